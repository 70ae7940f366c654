"""Batched local search (agents.inference.local_search): every result re-costed by tour_cost, never worse
than its start, the moves checked by hand, batch and single runs alike."""
import pytest
import torch

from agents.inference.local_search import INF, Move, exchange, giant_actions, improve, independent
from agents.inference.search import pad_tours
from agents.references.heuristics import construct, improve_routes, nearest_neighbour_tsp
from agents.references.solvers import available, solve
from routing_gym.problems import CVRP, PROBLEMS, TSP, tour_cost
from tours import instances, random_tours, routes


def one_move(a, b, c, d, rev1=False, rev2=False):
    t = torch.tensor
    return Move(t([0.0]), t([a]), t([b]), t([c]), t([d]), t([rev1]), t([rev2]))


# -- the moves ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("move, expected", [
    (one_move(2, 4, 5, 4, rev1=True), [0, 1, 4, 3, 2, 5, 6, 7]),  # 2-opt: s[2..4] reversed
    (one_move(1, 1, 5, 4), [0, 2, 3, 4, 1, 5, 6, 7]),  # relocate s[1] after s[4]
    (one_move(2, 1, 4, 5, rev2=True), [0, 1, 5, 4, 2, 3, 6, 7]),  # or-opt: s[4..5] reversed, after s[1]
    (one_move(1, 1, 5, 5), [0, 5, 2, 3, 4, 1, 6, 7]),  # swap s[1] and s[5]
    (one_move(2, 3, 5, 6), [0, 1, 5, 6, 4, 2, 3, 7]),  # blocks of two exchanged (2-opt* tails)
])
def test_exchange__blocks_by_hand(move, expected):
    assert exchange(torch.arange(8)[None], move)[0].tolist() == expected


def test_giant_actions__drops_the_leading_depot_and_empty_routes():
    seq = torch.tensor([[0, 3, 0, 0, 1, 2, 0, 0], [0, 0, 2, 1, 0, 3, 0, 0]])
    assert giant_actions(seq).tolist() == [[3, 0, 1, 2, 0, 0, 0], [2, 1, 0, 3, 0, 0, 0]]


# -- never worse, never infeasible -------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_improve__never_worse_nor_infeasible(name):
    problem = PROBLEMS[name]
    inst = instances(problem, 16, 12, seed=1)
    start = construct(problem, inst)
    before = tour_cost(problem, inst, start)
    tours, cost = improve(problem, inst, start)
    assert torch.allclose(tour_cost(problem, inst, tours), cost, rtol=0, atol=1e-9)  # feasible, cost as said
    assert (cost <= before).all()
    same = cost == before
    assert torch.equal(tours[same, :start.shape[1]], start[same])  # kept as given


def test_improve__keeps_an_optimal_tour():
    locs = torch.tensor([[[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0]]])
    tours, cost = improve(TSP, TSP.Instance(locs=locs), torch.tensor([[2, 3, 0, 1]]))
    assert tours.tolist() == [[2, 3, 0, 1]] and cost.item() == pytest.approx(4.0, abs=1e-6)


def test_improve__refuses_an_infeasible_start():
    inst = instances(TSP, 1, 5)
    with pytest.raises(ValueError, match="infeasible"):
        improve(TSP, inst, torch.tensor([[0, 1, 1, 2, 3]]))


def test_improve__capacity_from_the_unit():
    """Depot (0, 0); A (1, 0) and B (1, 0.1) with demand 0.6 each cannot share a route, C (0, 1) demand 0.3.
    From routes {C, A}, {B} (5.42) the best feasible routes are {A}, {B, C}: 2 + 1 + sqrt(1.81) + sqrt(1.01)
    = 5.3503; joining A and B (4.105) would break the capacity."""
    locs = torch.tensor([[[0.0, 0.0], [1.0, 0.0], [1.0, 0.1], [0.0, 1.0]]])
    inst = CVRP.Instance(locs=locs, demand=torch.tensor([[0.0, 0.6, 0.6, 0.3]]))
    tours, cost = improve(CVRP, inst, torch.tensor([[3, 1, 0, 2]]))
    assert cost.item() == pytest.approx(2 + 1 + 1.81 ** 0.5 + 1.01 ** 0.5, abs=1e-5)
    assert routes(tours[0]) == [[1], [2, 3]]


# -- it improves ------------------------------------------------------------------------------------------
def test_improve__random_tsp50_tours_drop_by_three_quarters():
    inst = instances(TSP, 32, 50)
    start = random_tours(32, 50)
    before = tour_cost(TSP, inst, start).mean()
    _, cost = improve(TSP, inst, start)
    assert cost.mean() < 0.25 * before  # about 26.1 -> 5.9 (optimal tours: about 5.7)


def test_improve__cvrp_beats_intra_route_two_opt():
    inst = instances(CVRP, 32, 20)
    start = construct(CVRP, inst)
    intra = tour_cost(CVRP, inst, improve_routes(CVRP, inst, start)).mean()
    _, cost = improve(CVRP, inst, start)
    assert cost.mean() < 0.93 * intra  # moves between routes too


@pytest.mark.skipif(not available("lkh"), reason="needs elkai (LKH-3)")
def test_improve__nearest_neighbour_tsp50_within_8_percent_of_lkh():
    inst = instances(TSP, 16, 50, seed=2)
    _, cost = improve(TSP, inst, nearest_neighbour_tsp(inst.locs))
    lkh = solve(TSP, inst, "lkh", time_limit=0.5, progress=False).cost
    assert (cost.mean() / lkh.mean()).item() < 1.08


# -- batch and single, determinism -----------------------------------------------------------------------
@pytest.mark.parametrize("problem", [TSP, CVRP])
def test_improve__same_on_a_batch_as_one_by_one(problem):
    inst = instances(problem, 5, 20, seed=3)
    start = construct(problem, inst)
    tours, cost = improve(problem, inst, start, candidates=4, combine=8)  # by default they adapt to the batch
    for i in range(5):
        row = problem.Instance(*(f[i:i + 1] for f in inst))
        one, one_cost = improve(problem, row, start[i:i + 1], candidates=4, combine=8)
        width = max(one.shape[1], tours.shape[1])
        assert torch.equal(pad_tours(one, width)[0], pad_tours(tours, width)[i]) if problem.has_depot \
            else torch.equal(one[0], tours[i])
        assert one_cost.item() == cost[i].item()


def test_independent__cheapest_first_and_no_edge_in_common():
    """Moves that replayed feasible and cheaper, cheapest first, none changing an edge (a - 1 .. d) another
    kept one changes; at most ``most`` per row, -1 after the last."""
    span = lambda *v: torch.tensor([v])  # noqa: E731
    a, d = span(2, 4, 9, 12, 3), span(3, 6, 10, 14, 3)  # edges changed: 1-3, 3-6, 8-10, 11-14, 2-3
    score = torch.tensor([[5.0, 4.0, 3.0, INF, 6.0]], dtype=torch.float64)
    move = Move(score, a, a, d, d, torch.zeros_like(a, dtype=torch.bool), torch.zeros_like(a, dtype=torch.bool))
    # cheapest first: 2 (8-10), 1 (3-6), then 0 (1-3) shares edge 3 with 1, 4 (2-3) too; 3 is not finite
    assert independent(move, score, 4).tolist() == [[2, 1, -1, -1]]
    assert independent(move, score, 1).tolist() == [[2]]


def test_improve__one_round_with_moves_combined_gains_at_least_the_best_single_move():
    inst = instances(CVRP, 16, 30, seed=5)
    start = construct(CVRP, inst)
    _, single = improve(CVRP, inst, start, max_rounds=1, candidates=4, combine=1)
    tours, combined = improve(CVRP, inst, start, max_rounds=1, candidates=4, combine=8)
    assert (combined <= single).all() and (combined < single).any()
    assert torch.equal(tour_cost(CVRP, inst, tours), combined)


def test_improve__a_route_that_visits_nothing_comes_back_as_it_is():
    inst = instances(PROBLEMS["op"], 3, 10)
    empty = torch.zeros(3, 5, dtype=torch.long)  # straight back to the depot: feasible, prize 0
    tours, cost = improve(PROBLEMS["op"], inst, empty)
    assert (tours == 0).all() and torch.equal(cost, tour_cost(PROBLEMS["op"], inst, empty))


def test_improve__deterministic():
    inst = instances(CVRP, 8, 20, seed=4)
    start = construct(CVRP, inst)
    first, second = improve(CVRP, inst, start), improve(CVRP, inst, start)
    assert torch.equal(first[0], second[0]) and torch.equal(first[1], second[1])


def test_improve__round_limit_bounds_the_moves():
    inst = instances(TSP, 4, 30)
    start = random_tours(4, 30)
    _, none = improve(TSP, inst, start, max_rounds=0)
    _, few = improve(TSP, inst, start, max_rounds=3)
    _, full = improve(TSP, inst, start)
    assert torch.equal(none, tour_cost(TSP, inst, start))
    assert (full <= few).all() and (few < none).all()


def test_improve__no_round_starts_past_the_time_limit():
    inst = instances(CVRP, 4, 10)
    start = construct(CVRP, inst)
    tours, cost = improve(CVRP, inst, start, time_limit=0.0)
    assert torch.equal(tours[:, :start.shape[1]], start) and torch.equal(cost, tour_cost(CVRP, inst, start))
