"""Issue #33's bad input and faults, by class: work and memory stay bounded (or the input is refused with
the limit stated), every fault ends in one sentence naming the file or flag, valid input is accepted and
silent nonsense is refused."""
import math
import os
import shutil
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("vrplib")

from routing_gym import tsplib  # noqa: E402

DATA = Path(__file__).resolve().parent / "data"


def tsp_file(path, coords, name="tiny", ewt="EUC_2D", extra=""):
    rows = "".join(f"{i} {x!r} {y!r}\n" for i, (x, y) in enumerate(coords, 1))
    path.write_text(f"NAME : {name}\n{extra}TYPE : TSP\nDIMENSION : {len(coords)}\nEDGE_WEIGHT_TYPE : {ewt}\n"
                    f"NODE_COORD_SECTION\n{rows}EOF\n")
    return path


def cvrp_file(path, capacity="10", extra="", demands=(0, 3, 4)):
    coords = "".join(f"{i} {i} {i * 2}\n" for i in range(1, len(demands) + 1))
    rows = "".join(f"{i} {d}\n" for i, d in enumerate(demands, 1))
    path.write_text(f"NAME : v\nTYPE : CVRP\nDIMENSION : {len(demands)}\nEDGE_WEIGHT_TYPE : EUC_2D\n"
                    f"CAPACITY : {capacity}\n{extra}NODE_COORD_SECTION\n{coords}DEMAND_SECTION\n{rows}"
                    "DEPOT_SECTION\n1\n-1\nEOF\n")
    return path


# -- bounded work and memory ----------------------------------------------------------------------------
def test_tsplib_cost__memory_bounded_for_large_instances(tmp_path):
    n = 3000  # an (N, N, 2) float64 array would be 144 MB; edge by edge is a few MB at most
    coords = np.random.default_rng(0).integers(0, 10_000, (n, 2)).tolist()
    real = tsplib.load(tsp_file(tmp_path / "big.tsp", coords))
    tracemalloc.start()
    try:
        value = tsplib.cost(real, np.arange(n))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    xy = np.asarray(coords, dtype=np.float64)
    legs = np.floor(np.hypot(*(xy - np.roll(xy, -1, axis=0)).T) + 0.5)
    assert value == legs.sum()
    assert peak < 20e6


def test_tsplib_distance_matrix__refused_above_its_stated_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(tsplib, "MATRIX_NODES", 4)
    real = tsplib.load(tsp_file(tmp_path / "five.tsp", [(0, 0), (3, 4), (6, 8), (0, 8), (3, 0)]))
    with pytest.raises(ValueError, match="5 nodes.*up to 4 nodes"):
        tsplib.distance_matrix(real)
    assert tsplib.cost(real, [0, 1, 2, 3, 4]) == 5 + 5 + 6 + 9 + 3


# -- valid input accepted -------------------------------------------------------------------------------
@pytest.mark.parametrize("extra", ["", "COMMENT : read to EOF, GEOFFREY's EOF test\n"])
def test_tsplib__eof_inside_name_or_comment_is_accepted(tmp_path, extra):
    real = tsplib.load(tsp_file(tmp_path / "g.tsp", [(0, 0), (3, 4), (6, 8)], name="GEOFF8", extra=extra))
    assert real.name == "GEOFF8" and len(real.node_ids) == 3
    assert tsplib.cost(real, [0, 1, 2]) == 20


def test_tsplib__text_after_the_eof_line_is_ignored(tmp_path):
    path = tsp_file(tmp_path / "t.tsp", [(0, 0), (3, 4), (6, 8)])
    path.write_text(path.read_text() + "anything at all\n")
    assert tsplib.cost(tsplib.load(path), [0, 1, 2]) == 20


# -- silent nonsense refused ----------------------------------------------------------------------------
def test_tsplib_sol__cost_line_below_its_own_routes_is_refused(tmp_path):
    path = cvrp_file(tmp_path / "v.vrp")
    (tmp_path / "v.sol").write_text("Route #1: 1 2\nCost 5\n")  # 0-1-2-0: 2 + 2 + 4 = 8 (nint)
    with pytest.raises(ValueError, match=r"v\.sol.*Cost line 5 is below the cost of its own routes, 8"):
        tsplib.load(path)
    (tmp_path / "v.sol").write_text("Route #1: 1 2\nCost 8\n")
    assert tsplib.load(path).reference == 8


@pytest.mark.parametrize("coords,what", [
    ([(1e200, 1e200), (-1e200, 0.0), (0.0, -1e200)], "magnitudes up to 1e\\+200"),
    ([(1e-200, 0.0), (0.0, 1e-200), (2e-200, 2e-200)], "extent of 2e-200"),
])
def test_tsplib__coordinates_whose_lengths_overflow_or_vanish_are_refused(tmp_path, coords, what):
    with pytest.raises(ValueError, match=f"t.tsp: NODE_COORD_SECTION.*within \\+-1e\\+100.*{what}"):
        tsplib.load(tsp_file(tmp_path / "t.tsp", coords, ewt="EXACT_2D"))


def test_tsplib__large_but_representable_coordinates_cost_exactly(tmp_path):
    real = tsplib.load(tsp_file(tmp_path / "t.tsp", [(0.0, 0.0), (3e90, 4e90), (0.0, 8e90)], ewt="EXACT_2D"))
    assert tsplib.cost(real, [0, 1, 2]) == pytest.approx(5e90 + 5e90 + 8e90, rel=1e-12)


@pytest.mark.parametrize("extra", ["DISTANCE : 100\n", "SERVICE_TIME : 10\n", "VEHICLES_MAX_DISTANCE : 50\n"])
def test_tsplib_cvrp__constraints_beyond_capacity_are_refused_by_name(tmp_path, extra):
    key = extra.split()[0]
    with pytest.raises(ValueError, match=f"{key} .*cannot be represented"):
        tsplib.load(cvrp_file(tmp_path / "v.vrp", extra=extra))


def test_tsplib_cvrp__capacity_below_a_demand_is_refused_naming_capacity(tmp_path):
    with pytest.raises(ValueError, match=r"v\.vrp: node 3's demand 4 exceeds the capacity \(CAPACITY 1e-300\)"):
        tsplib.load(cvrp_file(tmp_path / "v.vrp", capacity="1e-300"))


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_tsplib__a_folder_or_fifo_is_named_as_what_it_is(tmp_path):
    (tmp_path / "dir.tsp").mkdir()
    with pytest.raises(IsADirectoryError, match="dir.tsp is a folder"):
        tsplib.load(tmp_path / "dir.tsp")
    os.mkfifo(tmp_path / "pipe.tsp")
    with pytest.raises(ValueError, match="pipe.tsp is a FIFO"):  # and never opened (that would block)
        tsplib.load(tmp_path / "pipe.tsp")
    with pytest.raises(FileNotFoundError, match="none.tsp does not exist"):
        tsplib.load(tmp_path / "none.tsp")
