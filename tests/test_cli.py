"""The ``routing-gym`` command line: render and eval with heuristics, errors as messages."""
import argparse
import dataclasses
import importlib.util
import io
import shlex
import sys
from pathlib import Path

import pytest
import torch

from agents.apps.cli import main

DATA = Path(__file__).resolve().parent / "data"  # public TSPLIB / CVRPLIB files, sources in data/README.md
README = Path(__file__).resolve().parents[1] / "README.md"


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
    pytest.importorskip("vrplib")
    assert main(["eval", "--problem", "cvrp", "--policy", "nearest", "--instances", str(DATA / "E-n22-k4.vrp")]) == 0
    out = capsys.readouterr().out
    assert "| E-n22-k4 | cvrp | 21 |" in out and "375 (comment)" in out
    assert "| 4 (k = 4) |" in out and "note:" not in out  # nearest neighbour uses the file's 4 vehicles


def readme_command(marker: str) -> list[str]:
    """The arguments of the README's ``routing-gym ...`` line holding ``marker``, as written there."""
    line = next(line for line in README.read_text().splitlines() if marker in line and "routing-gym " in line)
    command = line.split("routing-gym ", 1)[1].split("#")[0]
    return shlex.split(command)


def test_eval__readme_real_instance_example_uses_the_nearest_shipped_size(monkeypatch, capsys):
    """README: `routing-gym eval --problem cvrp --policy pretrained --instances E-n51-k5.vrp` (n = 50, while
    the shipped CVRP model has n = 20) was refused ("no shipped model for cvrp-50")."""
    pytest.importorskip("vrplib")
    argv = readme_command("E-n51-k5.vrp")
    assert argv == ["eval", "--problem", "cvrp", "--policy", "pretrained", "--instances", "tests/data/E-n51-k5.vrp"]
    monkeypatch.chdir(README.parent)  # as written, from the clone's root
    assert main(argv) == 0
    out, err = capsys.readouterr()
    assert "| E-n51-k5 | cvrp | 50 |" in out and "521 (comment)" in out and "(k = 5) |" in out
    assert "no shipped cvrp model for n = 50; using the cvrp-20 model" in err


def test_eval__a_file_that_cannot_be_evaluated_is_skipped_and_named(tmp_path, capsys):
    pytest.importorskip("vrplib")
    matrix = tmp_path / "geo.vrp"  # geographic distances: not Euclidean in any coordinates, cannot be represented
    matrix.write_text("NAME : geo\nTYPE : CVRP\nDIMENSION : 3\nCAPACITY : 10\nEDGE_WEIGHT_TYPE : GEO\n"
                      "NODE_COORD_SECTION\n1 10.0 20.0\n2 11.0 21.0\n3 12.5 20.5\n"
                      "DEMAND_SECTION\n1 0\n2 1\n3 1\nDEPOT_SECTION\n1\n-1\nEOF\n")
    broken = tmp_path / "broken.tsp"
    broken.write_text("NAME : broken\nTYPE : TSP\nDIMENSION : 3\nEDGE_WEIGHT_TYPE : EUC_2D\nNODE_COORD_SECTION\n"
                      "1 0 0\n2 1 1\nEOF\n")  # one row short
    good = str(DATA / "E-n22-k4.vrp")
    assert main(["eval", "--policy", "nearest", "--instances", str(matrix), good, str(broken)]) == 0
    out, err = capsys.readouterr()
    assert "| E-n22-k4 | cvrp | 21 |" in out and "2 file(s) skipped: geo.vrp, broken.tsp" in out
    skipped = err.strip().splitlines()
    assert len(skipped) == 2
    assert f"skipped {matrix}: EDGE_WEIGHT_TYPE GEO" in skipped[0]
    assert f"skipped {broken}: DIMENSION is 3 but NODE_COORD_SECTION has 2 rows" in skipped[1]
    # nothing evaluated: an error, exit code 2
    assert main(["eval", "--policy", "nearest", "--instances", str(matrix), str(broken)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and "none of the 2 files could be evaluated" in err[-1]
    refused(capsys, ["eval", "--policy", "nearest", "--instances", str(matrix)], str(matrix), "GEO")
    refused(capsys, ["eval", "--policy", "no-such-policy", "--instances", good, good], "neither a heuristic")


CVRP_HEADER = "NAME : {name}\nCOMMENT : ({comment})\nTYPE : CVRP\nDIMENSION : 5\nEDGE_WEIGHT_TYPE : EUC_2D\n"
CVRP_BODY = ("CAPACITY : 10\nNODE_COORD_SECTION\n1 0 0\n2 0 10\n3 0 20\n4 10 0\n5 20 0\n"
             "DEMAND_SECTION\n1 0\n2 5\n3 5\n4 5\n5 5\nDEPOT_SECTION\n1\n-1\nEOF\n")


def test_eval__cvrp_routes_against_the_files_vehicle_count(tmp_path, capsys):
    """CVRPLIB's values are for exactly k vehicles (the name's -kK, or the COMMENT's "No of trucks"); the table
    reports the routes used, and a note explains a mismatch (here k = 1 cannot carry the demand, so the plain
    decoding stands)."""
    pytest.importorskip("vrplib")
    named = tmp_path / "T-n5-k1.vrp"  # two routes are needed (total demand 20, capacity 10)
    named.write_text(CVRP_HEADER.format(name="T-n5-k1", comment="k in the name") + CVRP_BODY)
    commented = tmp_path / "plain.vrp"
    commented.write_text(CVRP_HEADER.format(name="plain", comment="Augerat-style, No of trucks: 2, Best value: 80")
                         + CVRP_BODY)
    assert main(["eval", "--policy", "nearest", "--instances", str(named), str(commented)]) == 0
    out = capsys.readouterr().out
    assert "| T-n5-k1 | cvrp | 4 |" in out and "| 2 (k = 1) |" in out
    assert "| plain | cvrp | 4 | 80 | 80 (comment) | 0.00% | 2 (k = 2) |" in out  # "Best value" read too
    notes = [line for line in out.splitlines() if line.startswith("note:")]
    assert len(notes) == 1 and "T-n5-k1: 2 routes where its reference is for exactly k = 1 vehicles" in notes[0]


def test_eval__pretrained_without_num_nodes_uses_the_shipped_size(capsys):
    assert main(["eval", "--problem", "cvrp", "--policy", "pretrained", "--num-instances", "10"]) == 0
    assert "cvrp-20 pretrained greedy: mean cost" in capsys.readouterr().out
    refused(capsys, ["eval", "--problem", "tsp", "--policy", "pretrained"],  # two sizes shipped: which one?
            "eval needs --num-nodes: tsp models are shipped for n = 20, 50")
    refused(capsys, ["eval", "--problem", "sdvrp", "--policy", "pretrained"], "no shipped model for sdvrp")
    refused(capsys, ["eval", "--problem", "tsp", "--policy", "nearest"], "needs --num-nodes")


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_eval__progress_bar_on_a_terminal_unless_no_progress(monkeypatch, capsys):
    argv = ["eval", "--problem", "tsp", "--num-nodes", "5", "--policy", "nearest", "--num-instances", "40",
            "--batch-size", "10"]
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert main(argv) == 0
    assert "/40 [" in terminal.getvalue() and "instance/s" in terminal.getvalue()  # tqdm's bar
    terminal.seek(0), terminal.truncate()
    assert main(argv + ["--no-progress"]) == 0
    assert terminal.getvalue() == ""
    monkeypatch.undo()
    assert main(argv) == 0  # not a terminal: no bar
    assert capsys.readouterr().err == ""


def test_eval__decoding_in_steps_for_the_progress_bar_changes_no_cost(capsys):
    """eval decodes --batch-size instances per call (the progress bar's steps); the decoders cut their rows
    at the same places, so even sampled costs equal those of one call over all instances."""
    from agents.inference.search import decode
    from agents.policies.pretrained import load_pretrained
    from routing_gym.problems import get_problem

    tsp = get_problem("tsp")
    instances = tsp.generate(12, 20, generator=torch.Generator().manual_seed(4321))
    with torch.no_grad():
        whole = decode(load_pretrained("tsp", 20), tsp, instances, "sample", num_samples=4, batch_size=5,
                       generator=torch.Generator().manual_seed(4321)).cost
    assert main(["eval", "--problem", "tsp", "--num-nodes", "20", "--policy", "pretrained", "--num-instances", "12",
                 "--decode", "sample", "--samples", "4", "--batch-size", "5"]) == 0
    assert f"mean cost {whole.mean():.4f} " in capsys.readouterr().out


def test_help__every_command_with_a_line_and_every_default_shown():
    from agents.apps.cli import build_parser
    from agents.training.config import TrainConfig

    parser = build_parser()
    listing = parser.format_help()
    commands = parser._subparsers._group_actions[0]
    assert set(commands.choices) == {"train", "eval", "solve", "render", "compare", "export", "play"}
    for name, sub in commands.choices.items():
        line = next(line for line in listing.splitlines() if line.strip().startswith(name + " "))
        assert len(line.split(name, 1)[1].strip()) > 10, line  # a one-line summary beside each name
        for action in sub._actions:
            if action.option_strings and action.default not in (None, False, argparse.SUPPRESS):
                assert "(default: " in sub._get_formatter()._get_help_string(action), (name, action.option_strings)
    assert "docs/contract.md" in listing
    # train's options default to None (TrainConfig fills them in): their help names TrainConfig's default
    defaults = {f.name: f.default for f in dataclasses.fields(TrainConfig)
                if f.default not in (None, dataclasses.MISSING) and f.name != "out_dir"}  # the CLI's is runs/PN
    train = [a for a in commands.choices["train"]._actions if a.dest in defaults and a.nargs != 0]
    assert {a.dest for a in train} >= {"problem", "num_nodes", "epochs", "epoch_size", "batch_size", "lr", "seed"}
    for action in train:
        assert f"(default: {defaults[action.dest]})" in action.help, action.option_strings


def test_compare__picture_goes_under_runs_by_default(tmp_path, monkeypatch, capsys):
    pytest.importorskip("PIL")
    pytest.importorskip("pygame")
    monkeypatch.chdir(tmp_path)
    assert main(COMPARE + ["--no-picture"]) == 0
    assert list(tmp_path.iterdir()) == []
    assert main(COMPARE) == 0
    assert "saved the picture in runs/compare.png" in capsys.readouterr().out
    assert [str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file()] == ["runs/compare.png"]
    refused(capsys, COMPARE + ["--no-picture", "--out", "x.png"], "--no-picture")


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
    assert "argument --limit: must be an integer >= 1" in capsys.readouterr().err


# -- every bad input: exit code 2 and one line on stderr naming the fault --------------------------------
def refused(capsys, argv: list[str], *needles: str) -> str:
    """Run ``routing-gym argv``: it must exit with 2 and print one line on stderr holding each needle."""
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    for needle in needles:
        assert needle in err[0], err[0]
    return err[0]


EVAL = ["eval", "--problem", "tsp", "--num-nodes", "5", "--policy", "nearest", "--num-instances", "4"]
SOLVE = ["solve", "--problem", "tsp", "--method", "exact", "--num-nodes", "5", "--num-instances", "2", "--no-progress"]
RENDER = ["render", "--problem", "tsp", "--num-nodes", "5", "--policy", "nearest"]
COMPARE = ["compare", "--problems", "tsp", "--num-nodes", "20", "--num-instances", "2"]


@pytest.mark.parametrize("argv, option", [
    (EVAL + ["--num-instances", "-3"], "--num-instances"),  # was a traceback (negative dimension)
    (EVAL + ["--num-instances", "0"], "--num-instances"),  # was a mean cost of nan
    (EVAL + ["--batch-size", "-1"], "--batch-size"),  # was "infeasible tour"
    (EVAL + ["--batch-size", "0"], "--batch-size"),  # was "range() arg 3 must not be zero"
    (EVAL + ["--batch-size", "nan"], "--batch-size"),
    (EVAL + ["--samples", "0", "--decode", "sample"], "--samples"),
    (EVAL + ["--augment", "9"], "--augment"),
    (EVAL + ["--seed", "-1"], "--seed"),
    (EVAL + ["--seed", str(2**70)], "--seed"),  # was "Overflow when unpacking long long"
    (SOLVE + ["--num-instances", "0"], "--num-instances"),  # was "torch.cat(): expected a non-empty list"
    (SOLVE + ["--time-limit", "-1"], "--time-limit"),
    (SOLVE + ["--time-limit", "nan"], "--time-limit"),
    (SOLVE + ["--time-limit", "inf"], "--time-limit"),
    (SOLVE + ["--workers", "0"], "--workers"),
    (RENDER + ["--seed", "-1", "--out", "x.gif"], "--seed"),  # was numpy's "expected non-negative integer"
    (COMPARE[:-1] + ["-1"], "--num-instances"),  # was a traceback
    (["play", "--seed", "-5"], "--seed"),
])
def test_errors__bad_numbers_are_refused_by_the_parser(capsys, argv, option):
    refused(capsys, argv, f"argument {option}:", "--help")


def test_errors__a_size_of_zero_is_refused_not_replaced_by_the_default(capsys):
    # --num-nodes 0 used to fall back to the shipped model's size (a run on n = 20 instances, not an error)
    refused(capsys, ["eval", "--problem", "op", "--num-nodes", "0", "--policy", "pretrained", "--num-instances", "2"],
            "num_nodes must be an integer >= 1, got 0")


def test_errors__usage_mistakes_are_one_line(capsys):
    refused(capsys, ["eval", "--problem", "tsp"], "required: --policy", "routing-gym eval --help")
    refused(capsys, EVAL + ["--no-such-option"], "unrecognized arguments: --no-such-option")


def test_errors__devices_are_parsed_once_for_every_subcommand(capsys):
    from agents.inference.device import parse_device

    refused(capsys, EVAL + ["--device", "bogus"], "unknown device 'bogus'")  # was torch's RuntimeError
    refused(capsys, EVAL + ["--device", "meta"], "not one routing-gym runs on")
    assert parse_device("cpu") == torch.device("cpu")
    assert parse_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    for bad in ("bogus", "CPU", "meta"):
        with pytest.raises(ValueError, match=repr(bad)):
            parse_device(bad)
    if not torch.cuda.is_available():  # was "Cannot get CUDA generator without ATen_cuda library"
        refused(capsys, EVAL + ["--device", "cuda"], "CUDA is not available")
        with pytest.raises(ValueError, match="CUDA is not available"):
            parse_device("cuda:0")


def test_errors__input_files_missing_or_folders(tmp_path, capsys):
    folder = tmp_path / "folder"
    folder.mkdir()
    refused(capsys, ["eval", "--problem", "tsp", "--policy", "nearest", "--dataset", str(folder)],
            "argument --dataset:", "is a folder")  # was "does not exist"
    refused(capsys, ["solve", "--problem", "tsp", "--method", "exact", "--dataset", str(tmp_path / "none.npz")],
            "argument --dataset:", "does not exist")
    refused(capsys, ["export", "--checkpoint", str(tmp_path / "none.pt"), "--out", str(tmp_path / "p.pt")],
            "argument --checkpoint:", "does not exist")
    refused(capsys, ["eval", "--policy", "nearest", "--instances", str(folder)], "is a folder")
    refused(capsys, ["eval", "--policy", "nearest", "--instances", str(tmp_path / "none*.tsp")], "no such file")
    refused(capsys, ["eval", "--policy", "nearest", "--instances", str(tmp_path / "none.tsp"), "--reference-table",
                     str(folder)], "argument --reference-table:", "is a folder")


def test_errors__reference_table_values_must_be_positive(tmp_path, capsys):
    tsp = tmp_path / "square.tsp"
    tsp.write_text("NAME : square\nTYPE : TSP\nDIMENSION : 4\nEDGE_WEIGHT_TYPE : EUC_2D\nNODE_COORD_SECTION\n"
                   "1 0 0\n2 10 0\n3 10 10\n4 0 10\nEOF\n")
    base = ["eval", "--policy", "nearest", "--instances", str(tsp), "--reference-table"]
    for text in ("square 0\n", "square nan\n", "square -40\n"):  # 0 was a ZeroDivisionError traceback
        (tmp_path / "table.txt").write_text(text)
        refused(capsys, base + [str(tmp_path / "table.txt")], "table.txt", "'square'")
    for name, text in (("table.json", "[40]"), ("empty.txt", "")):
        (tmp_path / name).write_text(text)
        refused(capsys, base + [str(tmp_path / name)], name)
    (tmp_path / "table.txt").write_text("square 40\n")
    assert main(base + [str(tmp_path / "table.txt")]) == 0
    assert "40 (table)" in capsys.readouterr().out


def test_errors__output_paths_that_cannot_be_written(tmp_path, capsys):
    """Checked before the work: a folder, a path under a file, a dataset not named .npz; missing folders
    above an output are created."""
    a_file, folder = tmp_path / "a_file", tmp_path / "folder"
    a_file.write_text("")
    folder.mkdir()
    refused(capsys, RENDER + ["--out", str(a_file / "x.gif")], "argument --out:", "is a file, not a folder")
    refused(capsys, RENDER + ["--out", str(folder)], "argument --out:", "is a folder")
    refused(capsys, COMPARE + ["--out", str(a_file / "x.png")], "argument --out:", "is a file, not a folder")
    refused(capsys, SOLVE + ["--save", str(a_file / "x.npz")], "argument --save:", "is a file")  # was a traceback
    refused(capsys, SOLVE + ["--save", str(folder)], "argument --save:", ".npz")  # was written to folder.npz
    refused(capsys, ["export", "--checkpoint", str(a_file), "--out", str(folder)], "argument --out:", "is a folder")
    assert main(SOLVE + ["--save", str(tmp_path / "new" / "sub" / "x.npz")]) == 0
    assert (tmp_path / "new" / "sub" / "x.npz").is_file()


def test_errors__os_errors_name_the_path(tmp_path, capsys):
    """Any other path that cannot be used (here train's --out-dir under a file): one line naming it."""
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    line = refused(capsys, ["train", "--problem", "tsp", "--num-nodes", "5", "--epochs", "1", "--epoch-size", "8",
                            "--batch-size", "4", "--eval-size", "4", "--val-size", "4", "--no-progress",
                            "--out-dir", str(a_file / "run")], str(a_file / "run"))
    assert line.startswith("routing-gym train: error:")


def test_save_checkpoint__leaves_no_temporary_file_when_it_fails(tmp_path, monkeypatch):
    from agents.policies import checkpoint

    folder = tmp_path / "folder"
    folder.mkdir()
    with pytest.raises(IsADirectoryError):  # export --out at a folder left an 11 MB .tmp
        checkpoint.save_checkpoint(folder, kind="policy", payload={"x": torch.zeros(3)})

    def broken_replace(src, dst):
        raise PermissionError(13, "Permission denied", str(dst))

    monkeypatch.setattr(checkpoint.os, "replace", broken_replace)
    with pytest.raises(PermissionError):
        checkpoint.save_checkpoint(tmp_path / "p.pt", kind="policy", payload={"x": torch.zeros(3)})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder"]


@pytest.fixture
def quit_at_once(monkeypatch):
    """A window closed as soon as it opens, so that a command that wrongly opens one returns, not hangs."""
    pygame = pytest.importorskip("pygame")
    monkeypatch.setattr(pygame.event, "get", lambda *a, **k: [pygame.event.Event(pygame.QUIT)])


@pytest.mark.parametrize("environment", ["dummy driver", "no DISPLAY"])
def test_errors__windows_need_a_display(tmp_path, monkeypatch, capsys, quit_at_once, environment):
    if environment == "dummy driver":
        monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")
    else:
        if not sys.platform.startswith("linux"):
            pytest.skip("DISPLAY / WAYLAND_DISPLAY are how Linux tells of a display")
        for name in ("SDL_VIDEODRIVER", "DISPLAY", "WAYLAND_DISPLAY"):
            monkeypatch.delenv(name, raising=False)
    refused(capsys, RENDER, "needs a display", "--out rollout.gif")
    refused(capsys, ["play", "--problem", "tsp", "--num-nodes", "5", "--opponent", "nearest"], "needs a display",
            "--out rollout.gif")
    if importlib.util.find_spec("PIL") is not None:  # a file needs no display
        assert main(RENDER + ["--out", str(tmp_path / "rollout.gif")]) == 0


def test_errors__optional_packages_are_checked_before_the_work(monkeypatch, capsys):
    from agents.apps import compare

    def no_work(*args, **kwargs):
        raise AssertionError("the table was computed before the check")

    monkeypatch.setattr(compare, "compare_problem", no_work)
    refused(capsys, COMPARE + ["--out", "picture"], "no image file extension", ".png")
    monkeypatch.setitem(sys.modules, "PIL", None)  # Pillow missing
    refused(capsys, COMPARE + ["--out", "picture.png"], "pip install pillow")  # was: two minutes, then a traceback
    if importlib.util.find_spec("imageio") is None:
        refused(capsys, RENDER + ["--out", "rollout.gif"], "pip install pillow")  # was a traceback
    monkeypatch.setitem(sys.modules, "vrplib", None)  # TSPLIB / VRPLIB reading missing
    refused(capsys, ["eval", "--policy", "nearest", "--instances", "any.tsp"], "needs vrplib", "pip install")


def test_library__bad_counts_raise_value_errors():
    from agents.inference.search import decode
    from agents.references.heuristics import HEURISTICS
    from agents.references.solvers import solve
    from routing_gym.problems import get_problem

    tsp = get_problem("tsp")
    instances = tsp.generate(3, 5, generator=torch.Generator().manual_seed(0))
    policy = HEURISTICS["nearest"]("tsp")
    for batch_size in (0, -1):
        for strategy in ("greedy", "beam", "multistart"):
            with pytest.raises(ValueError, match="batch_size must be a positive integer"):
                decode(policy, tsp, instances, strategy, batch_size=batch_size)
    for time_limit in (-1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="time_limit"):
            solve(tsp, instances, "exact", time_limit, progress=False)
    with pytest.raises(ValueError, match="workers"):
        solve(tsp, instances, "exact", progress=False, workers=0)
    with pytest.raises(ValueError, match="no instances"):
        solve(tsp, tsp.generate(0, 5, generator=torch.Generator().manual_seed(0)), "exact", progress=False)


TRAIN = ["train", "--problem", "tsp", "--num-nodes", "5", "--epochs", "1", "--epoch-size", "8", "--batch-size", "4",
         "--eval-size", "4", "--val-size", "4", "--no-progress"]


def test_train__network_size_options_set_the_model_and_are_checked(tmp_path, capsys):
    """--embed-dim, --n-layers and --ff-hidden size the attention model (smaller networks as a recipe)."""
    out = tmp_path / "small"
    assert main(TRAIN + ["--embed-dim", "16", "--n-layers", "1", "--ff-hidden", "32", "--out-dir", str(out)]) == 0
    ckpt = torch.load(out / "last.pt", weights_only=True)
    assert {k: ckpt["model_config"][k] for k in ("embed_dim", "n_layers", "ff_hidden")} == \
        {"embed_dim": 16, "n_layers": 1, "ff_hidden": 32}
    assert ckpt["model"]["layers.0.feed_forward.0.weight"].shape == (32, 16) and "layers.1.norm1.norm.weight" not in ckpt["model"]
    capsys.readouterr()
    refused(capsys, TRAIN + ["--embed-dim", "0"], "argument --embed-dim:")
    refused(capsys, TRAIN + ["--embed-dim", "12", "--out-dir", str(tmp_path / "x")], "n_heads (8) must divide embed_dim (12)")
    refused(capsys, TRAIN + ["--policy", "pointer", "--n-layers", "2", "--out-dir", str(tmp_path / "y")],
            "the pointer policy has no setting n_layers")
    refused(capsys, ["train", "--resume", str(out / "last.pt"), "--n-layers", "2"], "not --n-layers")
    refused(capsys, TRAIN + ["--init-from", str(out / "last.pt"), "--embed-dim", "16", "--out-dir", str(tmp_path / "z")],
            "init_from takes its model settings")


def test_eval__cvrplib_files_keep_to_their_fleet_where_the_plain_decoding_does_not(capsys):
    """A CVRPLIB file whose name gives k is decoded again under the fixed-fleet CVRP where the plain decoding
    used more than k routes; --no-fleet keeps the plain decoding."""
    pytest.importorskip("vrplib")
    path = str(Path(__file__).parent / "data" / "E-n51-k5.vrp")
    # random play returns to the depot whenever it may: 50 routes unless the fleet's mask forbids returns
    assert main(["eval", "--policy", "random", "--instances", path, "--no-progress"]) == 0
    fleet = capsys.readouterr().out
    assert "| 5 (k = 5) |" in fleet and "note:" not in fleet
    assert main(["eval", "--policy", "random", "--instances", path, "--no-fleet", "--no-progress"]) == 0
    plain = capsys.readouterr().out
    assert "(k = 5)" in plain and "| 5 (k = 5) |" not in plain and "note: E-n51-k5" in plain


def test_eval__bf16_decodes_under_autocast_with_nearly_the_same_costs(capsys, monkeypatch):
    """``--bf16`` runs the network under bf16 autocast (seen inside the decoder) and finds tours of nearly the
    same cost as fp32 (the shipped TSP-20 model, 200 instances)."""
    import agents.apps.commands.decoding as decoding

    seen, decode = [], decoding._decode
    monkeypatch.setattr(decoding, "_decode", lambda *a: seen.append(torch.is_autocast_enabled("cpu")) or decode(*a))
    costs = []
    for extra in ([], ["--bf16"]):
        assert main(["eval", "--problem", "tsp", "--policy", "pretrained", "--num-nodes", "20", "--num-instances",
                     "200", "--no-progress", *extra]) == 0
        costs.append(float(capsys.readouterr().out.split("mean cost ")[1].split()[0]))
    assert seen == [False, True]
    assert costs[1] == pytest.approx(costs[0], rel=0.005)
