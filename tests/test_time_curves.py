"""benchmarks/time_curves.py (issue #31, item 6) at a tiny setting: its rows parse, every gap against a
published optimum is >= 0, the pipeline is never worse than NN + 2-opt, and it draws its PNG."""
import re
import runpy
from pathlib import Path

from agents.references.solvers import available

ROOT = Path(__file__).resolve().parents[1]
ROW = re.compile(r"^\| (\S+) \| ([^|]+?) \| (-?\d+\.\d+)% \((\d+\.\d+) s\) \|$")


def test_time_curves__rows_parse_and_gaps_against_the_optimum_are_not_negative(monkeypatch, capsys, tmp_path):
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    script = runpy.run_path(str(ROOT / "benchmarks" / "time_curves.py"))
    png = tmp_path / "curves.png"
    results = script["main"](["--sets", "eil51", "--limits", "0.05", "--count", "1", "--plot", str(png)])
    out = capsys.readouterr().out
    rows = [ROW.match(line) for line in out.splitlines() if line.startswith("| eil51 |")]
    assert rows and all(rows), out
    gaps = {m.group(2): float(m.group(3)) for m in rows}
    expected = {"NN + 2-opt", "construction", "construction + search", "construction + search + revision",
                "search, no model", "pipeline", "pipeline + revision"}  # the revision by the shipped SHPP-20 model
    expected |= {label for label, method in (("PyVRP", "pyvrp"), ("LKH-3", "lkh")) if available(method)}
    assert set(gaps) == expected
    assert all(g >= -1e-9 for g in gaps.values()), gaps  # eil51's optimum is 426: no tour is shorter
    assert gaps["pipeline"] <= gaps["NN + 2-opt"] + 1e-9  # the pipeline keeps the heuristic start at worst
    assert gaps["pipeline + revision"] <= gaps["NN + 2-opt"] + 1e-9
    assert all(abs(round(results["eil51", m][0][0], 2) - g) < 1e-9 for m, g in gaps.items())  # printed = returned
    assert all(0 < results["eil51", m][0][1] < 5 for m in gaps)  # seconds measured
    assert all(0 <= float(m.group(4)) < 5 for m in rows)  # as printed: NN + 2-opt on eil51 can round to 0.00
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_time_curves__cvrp_rows_have_the_savings_and_the_pipeline_is_never_worse(monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    script = runpy.run_path(str(ROOT / "benchmarks" / "time_curves.py"))
    results = script["main"](["--sets", "E-n22-k4", "--limits", "0.05", "--methods", "NN + 2-opt", "savings",
                              "pipeline"])
    gaps = {method: cells[0][0] for (name, method), cells in results.items() if name == "E-n22-k4"}
    assert set(gaps) == {"NN + 2-opt", "savings", "pipeline"}, capsys.readouterr().out
    assert 0 <= gaps["pipeline"] <= min(gaps["savings"], gaps["NN + 2-opt"]) + 1e-9  # both are its starts
