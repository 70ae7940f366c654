"""Sector decoding: depot instances cut into sub-problems around the depot, each decoded by a model, routes joined."""
import subprocess
import sys

import pytest
import torch

from agents.inference.search import greedy
from agents.inference.subproblems import applies, sector_bounds, sector_decode
from agents.policies.attention_model import AttentionModel, AttentionModelConfig
from agents.policies.pretrained import load_pretrained
from routing_gym.problems import get_problem, tour_cost
from tours import ordered_routes


def small_model(problem):
    torch.manual_seed(0)
    return AttentionModel(AttentionModelConfig(problem=problem, embed_dim=32, n_heads=4, n_layers=1,
                                               ff_hidden=64)).eval()


@pytest.mark.parametrize("size", [1, 7, 20, 30])
def test_sector_bounds__consecutive_sectors_of_at_most_size_differing_by_one(size):
    for n in range(1, 121):
        bounds = sector_bounds(n, size)
        lengths = [end - first for first, end in bounds]
        assert bounds[0][0] == 0 and bounds[-1][1] == n
        assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:]))
        assert len(bounds) == -(-n // size) and max(lengths) <= size and max(lengths) - min(lengths) <= 1


@pytest.mark.parametrize("name", ["cvrp", "sdvrp"])
def test_sector_decode__feasible_tours_costed_as_the_unit_replays_them(name):
    problem = get_problem(name)
    instances = problem.generate(4, 45, generator=torch.Generator().manual_seed(1))
    found = sector_decode(small_model(name), problem, instances, [10, 20], rotations=3, augment=2)
    assert torch.isfinite(found.cost).all()
    torch.testing.assert_close(found.cost, tour_cost(problem, instances, found.tours))
    if name == "cvrp":  # every customer exactly once
        for tour in found.tours:
            served = sorted(a for a in tour.tolist() if a != 0)
            assert served == list(range(1, 46))


def test_sector_decode__each_route_stays_in_one_sector_around_the_depot():
    problem = get_problem("cvrp")
    instances = problem.generate(3, 40, generator=torch.Generator().manual_seed(2))
    found = sector_decode(small_model("cvrp"), problem, instances, [10], rotations=1, augment=1)
    offset = instances.locs[:, 1:] - instances.locs[:, :1]
    order = torch.atan2(offset[..., 1], offset[..., 0]).argsort(dim=1) + 1
    for row, tour in enumerate(found.tours):
        sector_of = {int(node): k // 10 for k, node in enumerate(order[row])}
        for customers in ordered_routes(tour):
            assert len({sector_of[c] for c in customers}) == 1


def test_sector_decode__an_instance_within_the_size_is_decoded_whole():
    problem = get_problem("cvrp")
    instances = problem.generate(3, 15, generator=torch.Generator().manual_seed(3))
    model = small_model("cvrp")
    found = sector_decode(model, problem, instances, [20, 30], augment=4)
    whole = greedy(model, problem, instances, augment=4)
    torch.testing.assert_close(found.cost, whole.cost)


def test_sector_decode__refuses_what_it_cannot_cut():
    tsp = get_problem("tsp")
    assert not applies(tsp) and not applies(get_problem("op")) and not applies(get_problem("cvrpmvc"))
    with pytest.raises(ValueError, match="not such a problem"):
        sector_decode(small_model("tsp"), tsp, tsp.generate(2, 30), [10])
    cvrp = get_problem("cvrp")
    with pytest.raises(ValueError, match="sizes must be"):
        sector_decode(small_model("cvrp"), cvrp, cvrp.generate(2, 30), [])


def test_sector_decode__the_shipped_cvrp20_model_builds_cheaper_cvrp100_routes_than_decoding_whole():
    problem = get_problem("cvrp")
    instances = problem.generate(8, 100, generator=torch.Generator().manual_seed(4321))
    model = load_pretrained("cvrp", 20)
    sectors = sector_decode(model, problem, instances, augment=8).cost  # sizes 20, 30, 50
    whole = greedy(model, problem, instances, augment=8).cost
    assert float(sectors.mean()) < 0.98 * float(whole.mean()), (sectors.mean(), whole.mean())


def test_cli__eval_decode_sectors_uses_the_shipped_model_of_the_sector_size(tmp_path):
    cmd = [sys.executable, "-m", "agents.apps.cli", "eval", "--problem", "cvrp", "--num-nodes", "40", "--policy",
           "pretrained", "--decode", "sectors", "--sector-sizes", "20", "--num-instances", "3", "--csv",
           str(tmp_path / "rows.csv")]
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert "sectors of at most 20 customers" in res.stdout
    assert len((tmp_path / "rows.csv").read_text().splitlines()) == 4
    res = subprocess.run(cmd[:5] + ["tsp"] + cmd[6:], capture_output=True, text=True)
    assert res.returncode == 2 and "--decode sectors cuts routes from a depot" in res.stderr
