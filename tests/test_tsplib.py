"""Real instances through vrplib: costs in the files' own units (EUC_2D rounds each edge), the
published optima recomputed from their tours, reference values found, and unrepresentable files refused."""
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("vrplib")

from agents.inference.search import greedy  # noqa: E402
from agents.references.heuristics import NearestNeighbour  # noqa: E402
from routing_gym import tsplib  # noqa: E402


DATA = Path(__file__).resolve().parent / "data"  # public TSPLIB / CVRPLIB files, sources in data/README.md

# TSPLIB's optimal tours (eil51.opt.tour, berlin52.opt.tour), 1-based node ids
EIL51_OPT = [1, 22, 8, 26, 31, 28, 3, 36, 35, 20, 2, 29, 21, 16, 50, 34, 30, 9, 49, 10, 39, 33, 45, 15, 44, 42, 40,
             19, 41, 13, 25, 14, 24, 43, 7, 23, 48, 6, 27, 51, 46, 12, 47, 18, 4, 17, 37, 5, 38, 11, 32]
BERLIN52_OPT = [1, 49, 32, 45, 19, 41, 8, 9, 10, 43, 33, 51, 11, 52, 14, 13, 47, 26, 27, 28, 12, 25, 4, 6, 15, 5, 24,
                48, 38, 37, 40, 39, 36, 35, 34, 44, 46, 16, 29, 50, 20, 23, 30, 2, 7, 42, 21, 17, 3, 18, 31, 22]
# An optimal E-n22-k4 solution (LKH-3, c4v4/LKH3 CVRP/TOURS/Eilon/E-n22-k4.375.tour): ids > 22 are the depot
E_N22_K4_LKH_TOUR = [1, 10, 8, 6, 3, 2, 7, 23, 18, 21, 19, 16, 13, 25, 11, 9, 4, 5, 12, 14, 24, 15, 22, 20, 17]


def data_file(name):
    path = DATA / name
    assert path.is_file(), f"{path} is shipped with the tests"
    return path


def copy_beside(tmp_path, name):
    """The instance copied into tmp_path, so that reference files can be put next to it."""
    return Path(shutil.copy(data_file(name), tmp_path / name))


def write_tour(path, ids):
    path.write_text(f"NAME : {path.name}\nTYPE : TOUR\nDIMENSION : {len(ids)}\nTOUR_SECTION\n"
                    + "\n".join(map(str, ids)) + "\n-1\nEOF\n")


def test_tsp__optimal_tours_cost_the_published_optima_with_nint_edges(tmp_path):
    eil = tsplib.load(data_file("eil51.tsp"))
    assert tsplib.cost(eil, [i - 1 for i in EIL51_OPT]) == 426
    berlin = tsplib.load(data_file("berlin52.tsp"))
    assert tsplib.cost(berlin, [i - 1 for i in BERLIN52_OPT]) == 7542
    # the same tour with unrounded edges (data README: 429.98): the rounding is per edge, not of the sum
    d = np.sqrt(((eil.coords[:, None] - eil.coords[None]) ** 2).sum(-1))
    tour = [i - 1 for i in EIL51_OPT]
    assert sum(d[a, b] for a, b in zip(tour, tour[1:] + tour[:1])) == pytest.approx(429.98, abs=0.01)


def test_tsp__scaled_into_the_unit_square_keeping_the_aspect_ratio():
    real = tsplib.load(data_file("berlin52.tsp"))
    locs = real.instance.locs[0].double().numpy()
    assert locs.min() == 0 and locs.max() == pytest.approx(1.0)
    assert np.allclose(locs * real.scale + real.offset, real.coords, atol=1e-3)
    unit = np.linalg.norm(locs[0] - locs[1]) * real.scale
    assert unit == pytest.approx(np.linalg.norm(real.coords[0] - real.coords[1]), rel=1e-5)


def test_reference__opt_tour_beside_the_instance_table_and_comment(tmp_path):
    path = copy_beside(tmp_path, "eil51.tsp")
    assert (tsplib.load(path).reference, tsplib.load(path).reference_source) == (426, "TSPLIB")  # its published optimum
    write_tour(tmp_path / "eil51.opt.tour", EIL51_OPT)
    real = tsplib.load(path)
    assert (real.reference, real.reference_source) == (426, ".opt.tour")
    table = tmp_path / "best.csv"
    table.write_text("instance,value\neil51,430\n")
    assert tsplib.load(path, table=table).reference == 430
    assert tsplib.load(data_file("berlin52.tsp"), table={"berlin52": 7542}).reference_source == "table"
    cvrp = tsplib.load(data_file("E-n22-k4.vrp"))
    assert (cvrp.reference, cvrp.reference_source) == (375, "comment")


@pytest.mark.parametrize("comment, value", [
    ("(Augerat et al, Min no of trucks: 2, Best value: 450)", 450),  # CVRPLIB's sets A, B and P
    ("(Christophides and Eilon, Min no of trucks: 2, Optimal value: 375)", 375),  # set E
    ("Best known solution = 1234.5", 1234.5),
])
def test_reference__optimal_or_best_value_in_the_comment(tmp_path, comment, value):
    path = tmp_path / "P-n4-k2.vrp"
    path.write_text(f"NAME : P-n4-k2\nCOMMENT : {comment}\nTYPE : CVRP\nDIMENSION : 4\nEDGE_WEIGHT_TYPE : EUC_2D\n"
                    "CAPACITY : 10\nNODE_COORD_SECTION\n1 0 0\n2 0 10\n3 10 0\n4 10 10\n"
                    "DEMAND_SECTION\n1 0\n2 5\n3 5\n4 5\nDEPOT_SECTION\n1\n-1\nEOF\n")
    real = tsplib.load(path)
    assert (real.reference, real.reference_source) == (value, "comment")


def test_cvrp__loading_demands_capacity_and_the_optimal_routes(tmp_path):
    real = tsplib.load(data_file("E-n22-k4.vrp"))
    assert real.problem == "cvrp" and real.capacity == 6000
    assert real.instance.locs.shape == (1, 22, 2)  # depot + 21 customers
    assert real.demand[0] == 0 and real.demand.sum() == 22500 and (real.demand[1:] > 0).all()
    assert torch.allclose(real.instance.demand[0].double(), torch.as_tensor(real.demand / 6000.0), atol=1e-7)
    write_tour(tmp_path / "lkh.tour", E_N22_K4_LKH_TOUR)
    actions = tsplib.read_tour(tmp_path / "lkh.tour", real)
    assert actions.count(0) == 4  # four routes
    assert tsplib.cost(real, actions) == 375


def test_cvrp__sol_file_beside_the_instance(tmp_path):
    path = copy_beside(tmp_path, "E-n22-k4.vrp")
    real = tsplib.load(path)
    write_tour(tmp_path / "t.tour", E_N22_K4_LKH_TOUR)
    actions = tsplib.read_tour(tmp_path / "t.tour", real)
    lines, route = [], []
    for a in actions:
        if a == 0:
            lines.append("Route #%d: %s" % (len(lines) + 1, " ".join(str(int(real.node_ids[c]) - 1) for c in route)))
            route = []
        else:
            route.append(a)
    # VRPLIB numbers customers from 1 (file id - 1); without a Cost line the routes are costed
    (tmp_path / "E-n22-k4.sol").write_text("\n".join(lines) + "\n")
    again = tsplib.load(path)
    assert (again.reference, again.reference_source) == (375, ".sol")


def test_heuristic_gap__computed_in_instance_units():
    paths = [data_file("eil51.tsp"), data_file("E-n22-k4.vrp")]
    rows = tsplib.evaluate(paths, lambda problem, inst: greedy(NearestNeighbour(problem), problem, inst).tours,
                           table={"eil51": 426})
    for row in rows:
        assert row["cost"] > row["reference"] and row["gap"] == pytest.approx(
            100 * (row["cost"] - row["reference"]) / row["reference"])
        assert row["cost"] == int(row["cost"])  # sums of integer edges
    assert "| mean |" in tsplib.format_rows(rows)


HEADER = "NAME : tiny\nTYPE : {type}\nDIMENSION : 3\nEDGE_WEIGHT_TYPE : {ewt}\n"


@pytest.mark.parametrize("kind,ewt,body,match", [
    ("TSP", "GEO", "NODE_COORD_SECTION\n1 10.0 20.0\n2 11.0 21.0\n3 12.5 20.5\nEOF\n", "GEO"),
    ("TSP", "EXPLICIT", "EDGE_WEIGHT_FORMAT : FULL_MATRIX\nEDGE_WEIGHT_SECTION\n0 1 2\n1 0 3\n2 3 0\nEOF\n",
     "EXPLICIT"),
    ("ATSP", "EUC_2D", "NODE_COORD_SECTION\n1 0 0\n2 1 0\n3 0 1\nEOF\n", "TYPE ATSP"),
])
def test_load__rejects_what_cannot_be_represented(tmp_path, kind, ewt, body, match):
    path = tmp_path / "tiny.tsp"
    path.write_text(HEADER.format(type=kind, ewt=ewt) + body)
    with pytest.raises(ValueError, match=match):
        tsplib.load(path)


@pytest.mark.parametrize("ewt,expected", [("EUC_2D", 1 + 3 + 4), ("CEIL_2D", 2 + 3 + 5), ("ATT", 1 + 1 + 2)])
def test_distance_conventions(tmp_path, ewt, expected):
    path = tmp_path / "tiny.tsp"
    path.write_text(HEADER.format(type="TSP", ewt=ewt) + "NODE_COORD_SECTION\n1 0 0\n2 1 1\n3 1 4\nEOF\n")
    # edges: (0,0)-(1,1) 1.414, (1,1)-(1,4) 3, (1,4)-(0,0) 4.123; ATT: sqrt(d^2 / 10) rounded up if nint is below
    assert tsplib.cost(tsplib.load(path), [0, 1, 2]) == expected


def test_solver_in_the_files_own_distances_finds_the_optimum():
    pytest.importorskip("elkai")
    from agents.references.solvers import solve

    real = tsplib.load(data_file("eil51.tsp"), table={"eil51": 426})
    out = solve("tsp", real.instance, "lkh", 1.0, progress=False, distances=tsplib.distance_matrix(real)[None])
    assert tsplib.cost(real, out.tours) == 426 and tsplib.gap(real, 426) == 0
