"""The ``routing-gym`` command line: render and eval with heuristics, errors as messages."""
import pytest

from agents.apps.cli import main


def test_render__records_a_comparison_gif(tmp_path, capsys):
    pytest.importorskip("PIL")
    from PIL import Image

    out = tmp_path / "rollout.gif"
    assert main(["render", "--problem", "cvrp", "--num-nodes", "6", "--policy", "nearest", "--policy", "random",
                 "--compare", "--seed", "0", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "nearest: cost" in printed and "random: cost" in printed
    with Image.open(out) as im:
        assert im.n_frames >= 7 and im.size[0] > im.size[1]  # two frames side by side


def test_eval__heuristic_on_seeded_instances(capsys):
    assert main(["eval", "--problem", "tsp", "--num-nodes", "10", "--policy", "nearest", "--num-instances", "200"]) == 0
    assert "tsp-10 nearest greedy: mean cost" in capsys.readouterr().out


def test_errors__are_reported_without_a_traceback(tmp_path, capsys):
    assert main(["eval", "--problem", "tsp", "--num-nodes", "10", "--policy", str(tmp_path / "none.pt")]) == 2
    assert "neither a heuristic" in capsys.readouterr().err
    assert main(["render", "--problem", "tsp", "--policy", "nearest", "--policy", "random"]) == 2
    assert "--compare" in capsys.readouterr().err


def test_eval__real_instances_table_with_gap(capsys):
    from pathlib import Path

    data = Path(__file__).resolve().parents[1].parent / "shared" / "data"
    if not (data / "E-n22-k4.vrp").exists():
        pytest.skip("shared data not present")
    assert main(["eval", "--problem", "cvrp", "--policy", "nearest", "--instances", str(data / "E-n22-k4.vrp")]) == 0
    out = capsys.readouterr().out
    assert "| E-n22-k4 | cvrp | 21 |" in out and "375 (comment)" in out


def test_eval__multistart_is_no_worse_than_greedy(capsys):
    args = ["eval", "--problem", "tsp", "--num-nodes", "8", "--policy", "nearest", "--num-instances", "50"]
    assert main(args) == 0 and main(args + ["--decode", "multistart"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    greedy, multi = (float(line.split("mean cost ")[1].split()[0]) for line in lines)
    assert multi <= greedy + 1e-6


def test_solve_then_eval__dataset_gap_and_limit(tmp_path, capsys):
    """``solve --save`` labels a dataset with exact costs; ``eval --dataset`` reports the gap to them, over
    the whole file or its first ``--limit`` instances."""
    data = tmp_path / "tsp7.npz"
    assert main(["solve", "--problem", "tsp", "--num-nodes", "7", "--method", "exact", "--num-instances", "30",
                 "--save", str(data), "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["eval", "--problem", "tsp", "--policy", "nearest", "--dataset", str(data)]) == 0
    assert main(["eval", "--problem", "tsp", "--policy", "nearest", "--dataset", str(data), "--limit", "10"]) == 0
    whole, first = capsys.readouterr().out.strip().splitlines()
    assert "first 10 instances" in first and "first" not in whole
    gaps = [float(line.split("gap ")[1].split("%")[0]) for line in (whole, first)]
    assert all(g > 0 for g in gaps)  # nearest neighbour is never better than the optimum
    assert main(["eval", "--problem", "tsp", "--policy", "nearest", "--dataset", str(data), "--limit", "0"]) == 2
    assert "--limit must be >= 1" in capsys.readouterr().err
