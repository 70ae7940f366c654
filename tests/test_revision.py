"""Revision of tours by an SHPP policy (agents.inference.revision): every node kept, never worse than its
start (re-costed by tour_cost), batch and single runs alike, deterministic; the window map checked by hand."""
from pathlib import Path

import pytest
import torch

from agents.inference.revision import SYMMETRIES, mirror, normalise, path_length, revise, windows
from agents.policies.attention_model import AttentionModel, AttentionModelConfig
from agents.policies.pretrained import load_policy_file
from agents.references.heuristics import applicable, heuristic_tours
from routing_gym.problems import CVRP, OP, PROBLEMS, TSP, tour_cost
from tours import instances, random_tours, routes

TRAINED = [p for p in (Path(__file__).parents[1] / "agents/weights/shpp20.pt",
                       Path(__file__).parents[1] / "runs/first/shpp20/best.pt") if p.is_file()]


@pytest.fixture(scope="module")
def tiny():
    torch.manual_seed(0)
    return AttentionModel(AttentionModelConfig(problem="shpp", embed_dim=16, n_heads=2, n_layers=1,
                                               ff_hidden=32)).eval()


# -- the window map ---------------------------------------------------------------------------------
def test_normalise__bounding_box_to_unit_square_by_its_larger_side():
    locs = torch.tensor([[[2.0, 1.0], [6.0, 1.0], [4.0, 3.0]]])  # box 4 wide, 2 high
    assert torch.equal(normalise(locs), torch.tensor([[[0.0, 0.0], [1.0, 0.0], [0.5, 0.5]]]))
    assert torch.equal(normalise(torch.full((1, 3, 2), 0.7)), torch.zeros(1, 3, 2))  # one point: no division by 0


def test_normalise__keeps_ratios_of_path_lengths():
    locs = torch.rand(1, 8, 2, generator=torch.Generator().manual_seed(1)) * 0.1 + 0.3  # one window, 5 orders
    order = torch.stack([torch.randperm(8, generator=torch.Generator().manual_seed(s)) for s in range(5)])
    unit = normalise(locs)
    ratio = path_length(unit.expand(5, -1, -1), order) / path_length(locs.expand(5, -1, -1), order)
    assert torch.allclose(ratio, ratio[:1].expand(5), rtol=1e-5)
    assert bool((unit >= 0).all() and (unit <= 1).all()) and float(unit.amax()) == 1.0


def test_mirror__the_eight_symmetries_keep_path_lengths():
    locs = torch.rand(3, 6, 2, generator=torch.Generator().manual_seed(2))
    images = mirror(locs, len(SYMMETRIES)).view(3, 8, 6, 2)
    assert torch.equal(images[:, 0], locs)
    order = torch.arange(6).expand(3, 8, -1)
    lengths = path_length(images, order)
    assert torch.allclose(lengths, lengths[:, :1].expand(-1, 8), atol=1e-6)
    assert len({tuple(images[0, k].flatten().tolist()) for k in range(8)}) == 8


@pytest.mark.parametrize("phase, expected", [(0, [(0, 3), (3, 3), (7, 3)]), (1, [(1, 3), (4, 3)])])
def test_windows__cut_at_fixed_positions_and_every_window_edges(phase, expected):
    fixed = torch.tensor([[1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 1]], dtype=torch.bool)  # two stretches: 7 and 3 edges
    row, start, size = windows(fixed, phase, 3)  # windows of fewer than 3 edges (one inner node) left out
    assert row.tolist() == [0] * len(expected)
    assert list(zip(start.tolist(), size.tolist())) == expected


# -- the revision -------------------------------------------------------------------------------------
@pytest.mark.parametrize("n, window, kwargs", [(50, 20, {}), (43, 10, {}), (30, 20, {"augment": 8}),
                                               (25, 8, {"samples": 3}), (12, 20, {})])
def test_revise__keeps_every_node_and_is_never_worse(tiny, n, window, kwargs):
    inst, tours = instances(TSP, 6, n, seed=n), random_tours(6, n, seed=n)
    before, given = tour_cost(TSP, inst, tours), tours.clone()
    revised, cost = revise(tiny, TSP, inst, tours, window=window, rounds=6,
                           generator=torch.Generator().manual_seed(0), **kwargs)
    assert torch.equal(tours, given)  # the input is not written over
    assert revised.dtype == torch.int64 and revised.shape == tours.shape
    assert torch.equal(revised.sort(dim=1).values, torch.arange(n).expand(6, -1))
    assert torch.equal(cost, tour_cost(TSP, inst, revised))  # tour_cost validates the tours
    assert bool((cost <= before).all())
    assert bool((cost < before).any())  # random tours: some window of an untrained model's paths is shorter


def test_revise__improves_only_window_inner_nodes_in_one_round(tiny):
    inst, tours = instances(TSP, 4, 40, seed=5), random_tours(4, 40, seed=5)
    revised, _ = revise(tiny, TSP, inst, tours, window=10, rounds=1)
    ends = torch.arange(0, 40, 10)  # the windows of round 0: positions 0..10, 10..20, ...: ends in place
    assert torch.equal(revised[:, ends], tours[:, ends])
    for k in range(4):  # and each window's nodes stay in that window
        block = slice(10 * k + 1, 10 * k + 10)
        assert torch.equal(revised[:, block].sort(dim=1).values, tours[:, block].sort(dim=1).values)


def test_revise__batch_equals_one_by_one(tiny):
    inst, tours = instances(TSP, 5, 37, seed=7), random_tours(5, 37, seed=7)
    batch, cost = revise(tiny, TSP, inst, tours, window=9, rounds=8, augment=2)
    for i in range(5):
        one = type(inst)(*(f[i:i + 1] for f in inst))
        single, single_cost = revise(tiny, TSP, one, tours[i:i + 1], window=9, rounds=8, augment=2)
        assert torch.equal(single[0], batch[i])
        assert torch.equal(single_cost[0], cost[i])


def test_revise__deterministic(tiny):
    inst, tours = instances(TSP, 3, 45, seed=9), random_tours(3, 45, seed=9)
    runs = [revise(tiny, TSP, inst, tours, window=12, rounds=5, samples=2,
                   generator=torch.Generator().manual_seed(4)) for _ in range(2)]
    assert torch.equal(runs[0][0], runs[1][0]) and torch.equal(runs[0][1], runs[1][1])


def test_revise__nothing_to_do_returns_the_input(tiny):
    inst, tours = instances(TSP, 2, 3), random_tours(2, 3)  # a window of 3 nodes has one inner node
    revised, cost = revise(tiny, TSP, inst, tours)
    assert torch.equal(revised, tours) and torch.equal(cost, tour_cost(TSP, inst, tours))
    inst, tours = instances(TSP, 2, 30), random_tours(2, 30)
    for kwargs in ({"rounds": 0}, {"time_limit": 0.0}):
        revised, cost = revise(tiny, TSP, inst, tours, **kwargs)
        assert torch.equal(revised, tours) and torch.equal(cost, tour_cost(TSP, inst, tours))


def test_revise__refuses_what_it_cannot_revise(tiny):
    with pytest.raises(ValueError, match="closed tours or routes"):
        inst = OP.generate(2, 10, generator=torch.Generator().manual_seed(0))
        revise(tiny, OP, inst, torch.zeros(2, 20, dtype=torch.long))
    inst = instances(TSP, 2, 10)
    with pytest.raises(ValueError, match="augment"):
        revise(tiny, TSP, inst, random_tours(2, 10), augment=9)
    with pytest.raises(ValueError):  # not a tour: tour_cost refuses it
        revise(tiny, TSP, inst, torch.zeros(2, 10, dtype=torch.long))


# -- routes -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("n, window", [(30, 20), (40, 4)])
def test_revise__routes_keep_their_customers_and_are_never_worse(tiny, n, window):
    inst = CVRP.generate(5, n, generator=torch.Generator().manual_seed(n))
    tours = heuristic_tours(CVRP, inst, "random", generator=torch.Generator().manual_seed(n))
    before, given = tour_cost(CVRP, inst, tours), tours.clone()
    revised, cost = revise(tiny, CVRP, inst, tours, window=window, rounds=6, augment=2)
    assert torch.equal(tours, given)
    assert torch.equal(cost, tour_cost(CVRP, inst, revised))  # tour_cost validates the tours (capacity)
    assert bool((cost <= before).all()) and bool((cost < before).any())
    for i in range(5):
        assert routes(revised[i]) == routes(tours[i])


def test_revise__routes_batch_equals_one_by_one(tiny):
    inst = CVRP.generate(4, 25, generator=torch.Generator().manual_seed(3))
    tours = heuristic_tours(CVRP, inst, "random", generator=torch.Generator().manual_seed(3))
    batch, cost = revise(tiny, CVRP, inst, tours, window=6, rounds=5)
    for i in range(4):
        one = type(inst)(*(f[i:i + 1] for f in inst))
        single, single_cost = revise(tiny, CVRP, one, tours[i:i + 1], window=6, rounds=5)
        assert torch.equal(single[0, :batch.shape[1]], batch[i]) and not bool(single[0, batch.shape[1]:].any())
        assert torch.equal(single_cost[0], cost[i])


@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_revise__never_worse_on_every_problem_it_accepts(tiny, name):
    problem = PROBLEMS[name]
    if problem.optional_visits is not None or problem.policy.coordinates is None:
        with pytest.raises(ValueError, match="closed tours or routes"):
            revise(tiny, problem, None, None)
        return
    inst = problem.generate(4, 12, generator=torch.Generator().manual_seed(0))
    heuristic = "random" if "random" in applicable(problem) else applicable(problem)[0]
    tours = heuristic_tours(problem, inst, heuristic, generator=torch.Generator().manual_seed(1))
    revised, cost = revise(tiny, problem, inst, tours, window=5, rounds=4)
    assert torch.equal(cost, tour_cost(problem, inst, revised))  # validated by the unit's own dynamics
    assert bool((cost <= tour_cost(problem, inst, tours)).all())


@pytest.mark.skipif(not TRAINED, reason="no trained SHPP-20 model: neither agents/weights/shpp20.pt nor "
                                        "runs/first/shpp20/best.pt (benchmarks/first_models.py --problems shpp)")
def test_revise__trained_shpp20_model_shortens_random_tours():
    policy = load_policy_file(TRAINED[0])
    inst, tours = instances(TSP, 4, 100, seed=11), random_tours(4, 100, seed=11)
    before = tour_cost(TSP, inst, tours)
    revised, cost = revise(policy, TSP, inst, tours, window=20)
    assert torch.equal(cost, tour_cost(TSP, inst, revised))
    assert bool((cost < 0.7 * before).all())
