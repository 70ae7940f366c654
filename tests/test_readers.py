"""TSPLIB / CVRPLIB files are read strictly: every malformed instance, reference file (``.sol``,
``.opt.tour``), reference table or tour is a ValueError (FileNotFoundError when missing) naming the file
and what is wrong; nothing is misread, truncated or trusted. The files are written here (no sample data
needed). Datasets: tests/test_datasets.py."""
import re

import numpy as np
import pytest
import torch

pytest.importorskip("vrplib")

from routing_gym import tsplib  # noqa: E402

TSP = ("NAME : tiny\nTYPE : TSP\nDIMENSION : 3\nEDGE_WEIGHT_TYPE : EUC_2D\n"
       "NODE_COORD_SECTION\n1 0 0\n2 3 4\n3 6 8\nEOF\n")
CVRP = ("NAME : small\nTYPE : CVRP\nDIMENSION : 4\nEDGE_WEIGHT_TYPE : EUC_2D\nCAPACITY : 10\n"
        "NODE_COORD_SECTION\n1 0 0\n2 3 4\n3 6 8\n4 0 5\nDEMAND_SECTION\n1 0\n2 4\n3 5\n4 3\n"
        "DEPOT_SECTION\n1\n-1\nEOF\n")


def edited(text, old, new):
    assert old in text
    return text.replace(old, new)


def refused(path, match, **kwargs):
    """tsplib.load(path) raises a ValueError matching ``match`` whose message names the file."""
    with pytest.raises(ValueError, match=match) as info:
        tsplib.load(path, **kwargs)
    assert str(path) in str(info.value)
    return str(info.value)


def write(path, text):
    path.write_text(text)
    return path


def test_the_well_formed_files_are_read(tmp_path):
    tsp = tsplib.load(write(tmp_path / "tiny.tsp", TSP))
    assert tsplib.cost(tsp, [0, 1, 2]) == 5 + 5 + 10
    cvrp = tsplib.load(write(tmp_path / "small.vrp", CVRP))
    assert cvrp.capacity == 10 and cvrp.demand.tolist() == [0, 4, 5, 3]
    assert tsplib.cost(cvrp, [1, 2, 0, 3, 0]) == 5 + 5 + 10 + 5 + 5


# -- instances -----------------------------------------------------------------------------------
@pytest.mark.parametrize("old,new,match", [
    ("DIMENSION : 3", "DIMENSION : 5", "DIMENSION is 5 but NODE_COORD_SECTION has 3 rows"),
    ("DIMENSION : 3", "DIMENSION : 2", "DIMENSION is 2 but NODE_COORD_SECTION has 3 rows"),
    ("DIMENSION : 3\n", "", "no DIMENSION"),
    ("DIMENSION : 3", "DIMENSION : three", "DIMENSION must be a whole number"),
])
def test_dimension_must_agree_with_the_sections(tmp_path, old, new, match):
    refused(write(tmp_path / "tiny.tsp", edited(TSP, old, new)), match)


@pytest.mark.parametrize("old,new,match", [
    ("2 3 4\n3 6 8", "1 3 4\n1 6 8", "NODE_COORD_SECTION must list the node ids 1..3 in order.*row 2 has id 1"),
    ("1 0 0\n2 3 4\n3 6 8", "1 0 0\n1 0 0\n1 0 0", "row 2 has id 1"),  # duplicated rows once cost 0
    ("2 3 4\n3 6 8", "3 6 8\n2 3 4", "row 2 has id 3"),
    ("3 6 8", "4 6 8", "row 3 has id 4"),
])
def test_node_ids_must_be_one_to_dimension_in_order(tmp_path, old, new, match):
    refused(write(tmp_path / "tiny.tsp", edited(TSP, old, new)), match)


def test_demand_section_ids_are_checked_too(tmp_path):
    refused(write(tmp_path / "small.vrp", edited(CVRP, "3 5\n4 3", "3 5\n3 3")), "DEMAND_SECTION must list")


@pytest.mark.parametrize("old,new,match", [
    ("2 3 4", "2 3 x", "NODE_COORD_SECTION holds values that are not numbers"),
    ("2 3 4", "2 3", "not numbers, or rows of different lengths"),
    ("2 3 4", "2 3 nan", "NaN or infinite"),
    ("2 3 4", "2 3 1e999", "NaN or infinite"),
    ("1 0 0\n2 3 4\n3 6 8", "1 0 0 1\n2 3 4 1\n3 6 8 1", "each row of NODE_COORD_SECTION must hold a node id and 2"),
    ("NODE_COORD_SECTION", "NODE_COORD_SECTION\nDIMENSION : 3", "not a readable TSPLIB / VRPLIB file"),
])
def test_non_numeric_and_malformed_files_are_refused_by_name(tmp_path, old, new, match):
    refused(write(tmp_path / "tiny.tsp", edited(TSP, old, new)), match)


def test_binary_and_missing_files_are_refused_by_name(tmp_path):
    path = tmp_path / "binary.tsp"
    path.write_bytes(bytes(range(256)) * 4)
    refused(path, "not a text file")
    with pytest.raises(FileNotFoundError, match=re.escape(str(tmp_path / "none.tsp"))):
        tsplib.load(tmp_path / "none.tsp")


@pytest.mark.parametrize("old,new,match", [
    ("CAPACITY : 10\n", "", "a CVRP needs a CAPACITY"),
    ("CAPACITY : 10", "CAPACITY : ten", "CAPACITY must be a finite number > 0"),
    ("CAPACITY : 10", "CAPACITY : 0", "CAPACITY must be a finite number > 0"),
    ("DEMAND_SECTION\n1 0\n2 4\n3 5\n4 3\n", "", "no DEMAND_SECTION"),
    ("4 3\n", "", "DIMENSION is 4 but DEMAND_SECTION has 3 rows"),
    ("2 4\n", "2 4.5\n", "DEMAND_SECTION must hold whole numbers"),  # was truncated to 4
    ("2 4\n", "2 -4\n", "DEMAND_SECTION must hold whole numbers >= 0"),
    ("2 4\n", "2 40\n", "exceeds the capacity"),
    ("DEPOT_SECTION\n1\n", "DEPOT_SECTION\n7\n", "DEPOT_SECTION names node 7, not a node id in 1..4"),
    ("DEPOT_SECTION\n1\n", "DEPOT_SECTION\n0\n", "DEPOT_SECTION names node 0"),
    ("DEPOT_SECTION\n1\n", "DEPOT_SECTION\n1.5\n", "DEPOT_SECTION names node 1.5"),
])
def test_cvrp_needs_capacity_demands_and_an_existing_depot(tmp_path, old, new, match):
    refused(write(tmp_path / "small.vrp", edited(CVRP, old, new)), match)


# -- reference values ----------------------------------------------------------------------------
def with_comment(comment):
    return edited(TSP, "TYPE : TSP", f"COMMENT : {comment}\nTYPE : TSP")


@pytest.mark.parametrize("comment,value", [
    ("(Eilon, Min no of trucks: 4, Optimal value: 375)", 375), ("Best value: 669.5.", 669.5),
    ("Best known solution = 1234", 1234), ("an optimal tour by hand, 3 trucks", None),
])
def test_comment_references_are_read_whole(tmp_path, comment, value):
    real = tsplib.load(write(tmp_path / "tiny.tsp", with_comment(comment)))
    assert real.reference == value and real.reference_source == (None if value is None else "comment")


@pytest.mark.parametrize("comment", ["Optimal value: 1e999", "Optimal value: inf", "Optimal value: nan",
                                     "Optimal value: 1,234", "Optimal value: -5", "Optimal value: 0",
                                     "Optimal value: 1.2.3"])
def test_a_non_finite_or_unparsable_comment_reference_is_refused(tmp_path, comment):
    path = write(tmp_path / "tiny.tsp", with_comment(comment))
    refused(path, "the COMMENT's reference value must be a finite number > 0")
    assert tsplib.load(path, table={"tiny": 20}).reference == 20  # a table overrides it


@pytest.mark.parametrize("suffix,text,match", [
    (".csv", "instance,value\ntiny,inf\n", "line 2: the value of 'tiny' must be a finite number > 0"),
    (".csv", "tiny,20\nother,twenty\n", "line 2: the value of 'other' must be a finite number"),
    (".csv", "tiny,20\ntiny,21\n", "line 2: 'tiny' is given twice"),
    (".txt", "tiny 20\nlonely\n", "line 2: expected a name and a value"),
    (".json", '{"tiny": "nan"}', "the value of 'tiny' must be a finite number"),
    (".json", '{"tiny": true}', "the value of 'tiny' must be a finite number"),
    (".json", "[20]", "must be a JSON object"),
    (".json", "{tiny: 20}", "not a readable JSON file"),
])
def test_reference_tables_are_read_strictly(tmp_path, suffix, text, match):
    table = write(tmp_path / f"best{suffix}", text)
    with pytest.raises(ValueError, match=match) as info:
        tsplib.load(write(tmp_path / "tiny.tsp", TSP), table=table)
    assert str(table) in str(info.value)
    with pytest.raises(FileNotFoundError, match="missing.csv"):
        tsplib.load(tmp_path / "tiny.tsp", table=tmp_path / "missing.csv")
    with pytest.raises(ValueError, match="the value of 'tiny'"):
        tsplib.load(tmp_path / "tiny.tsp", table={"tiny": float("inf")})


def opt_tour(ids):
    return "NAME : tiny.opt.tour\nTYPE : TOUR\nTOUR_SECTION\n" + "\n".join(map(str, ids)) + "\n-1\nEOF\n"


@pytest.mark.parametrize("text,match", [
    (opt_tour([1, 2, 9]), "node id 9 does not exist"),  # was read as node 1: "infeasible tour"
    (opt_tour([1, 2, 0]), "node id 0 does not exist"),
    (opt_tour([1, 2, "x"]), "TOUR_SECTION holds 'x', not a node id"),
    (opt_tour([1, 2.5, 3]), "TOUR_SECTION holds '2.5'"),
    ("NAME : tiny\nEOF\n", "no TOUR_SECTION"),
    (opt_tour([]), "TOUR_SECTION lists no nodes"),
    (opt_tour([1, 2, 2]), "bad reference file, not a feasible solution of tiny.tsp"),
    (opt_tour([1, 2]), "bad reference file, not a feasible solution of tiny.tsp"),
])
def test_a_bad_opt_tour_beside_the_instance_is_refused_as_a_bad_reference(tmp_path, text, match):
    tour = write(tmp_path / "tiny.opt.tour", text)
    with pytest.raises(ValueError, match=match) as info:
        tsplib.load(write(tmp_path / "tiny.tsp", TSP))
    assert str(info.value).startswith(str(tour))


def test_a_good_opt_tour_gives_the_reference(tmp_path):
    write(tmp_path / "tiny.opt.tour", opt_tour([1, 3, 2]))
    real = tsplib.load(write(tmp_path / "tiny.tsp", TSP))
    assert (real.reference, real.reference_source) == (20, ".opt.tour")


@pytest.mark.parametrize("text,match", [
    ("Route #1: 1 2\nRoute #2: 9\nCost 30\n", "route 2 names customer 9, which does not exist"),
    ("Route #1: 1 2\nRoute #2: 0 3\nCost 30\n", "route 2 names customer 0"),  # 0 was the depot
    ("Route #1: 1 2\nRoute #2: -1 3\n", "route 2 names customer -1"),
    ("Route #1: 1 x\nCost 30\n", "not a readable VRPLIB solution file"),
    ("Cost 30\n", "no routes"),
    ("Route #1: 1 2\nRoute #2: 2 3\nCost 30\n", "bad reference file, not a feasible solution of small.vrp"),
    ("Route #1: 1 2\nCost 30\n", "bad reference file, not a feasible solution"),  # customer 3 unserved
    ("Route #1: 1 2\nRoute #2: 3\nCost 1e999\n", "the Cost line must be a finite number > 0"),
    ("Route #1: 1 2\nRoute #2: 3\nCost: thirty\n", "the Cost line must be a finite number > 0"),
])
def test_a_bad_sol_beside_the_instance_is_refused_naming_it(tmp_path, text, match):
    sol = write(tmp_path / "small.sol", text)
    with pytest.raises(ValueError, match=match) as info:
        tsplib.load(write(tmp_path / "small.vrp", CVRP))
    assert str(info.value).startswith(str(sol))


def test_a_good_sol_gives_its_cost_line_or_its_routes_cost(tmp_path):
    path = write(tmp_path / "small.vrp", CVRP)
    write(tmp_path / "small.sol", "Route #1: 1 2\nRoute #2: 3\nCost 30\n")
    assert (tsplib.load(path).reference, tsplib.load(path).reference_source) == (30, ".sol")
    write(tmp_path / "small.sol", "Route #1: 1 2\nRoute #2: 3\n")
    assert tsplib.load(path).reference == 5 + 5 + 10 + 5 + 5


# -- tours given to cost -------------------------------------------------------------------------
@pytest.mark.parametrize("tour,match", [
    ([0, 1.7, 2.2], "step 1 is 1.7, not a whole node index"),  # was truncated to [0, 1, 2]
    (np.array([0.0, np.nan, 2.0]), "step 1 is nan"),
    ([0, 1, 5], "step 2 is node 5, which does not exist \\(nodes 0..2\\)"),
    (torch.tensor([0, -1, 2]), "step 1 is node -1, which does not exist"),
    ([[0, 1, 2], [0, 2, 1]], "a tour must be an \\(S,\\) or \\(1, S\\) array"),
    (["0", "1", "2"], "a tour must be an \\(S,\\) or \\(1, S\\) array"),
    ([0, 1, 2, 1], "goes on after its episode ends at step 3: later steps must be the no-op 2, got node 1"),
])
def test_cost_refuses_tours_it_would_misread(tmp_path, tour, match):
    real = tsplib.load(write(tmp_path / "tiny.tsp", TSP))
    with pytest.raises(ValueError, match=match):
        tsplib.cost(real, tour)


def test_cost_takes_whole_floats_and_no_op_padding(tmp_path):
    tsp = tsplib.load(write(tmp_path / "tiny.tsp", TSP))
    assert tsplib.cost(tsp, [0.0, 1.0, 2.0]) == tsplib.cost(tsp, torch.tensor([[0, 1, 2, 2, 2]])) == 20
    cvrp = tsplib.load(write(tmp_path / "small.vrp", CVRP))
    assert tsplib.cost(cvrp, [1, 2, 0, 3, 0, 0]) == 30
    with pytest.raises(ValueError, match="later steps must be the no-op 0, got node 1"):
        tsplib.cost(cvrp, [1, 2, 0, 3, 1])


def test_evaluate_says_when_the_policy_tour_is_refused(tmp_path):
    path = write(tmp_path / "tiny.tsp", TSP)
    with pytest.raises(ValueError, match=f"{re.escape(str(path))}: the policy's tour is refused"):
        tsplib.evaluate([path], lambda problem, instance: torch.tensor([[0, 1, 1]]))
