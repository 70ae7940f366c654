"""The shipped models: they load with their metadata and beat the nearest-neighbour heuristic."""
import pytest
import torch

from agents.decoding import evaluate
from agents.heuristics import NearestNeighbour
from agents.pretrained import available_pretrained, load_pretrained, pretrained_meta
from routing_gym.problems import get_problem


@pytest.mark.parametrize("name", available_pretrained())
def test_shipped_model__loads_with_meta_and_beats_nearest_neighbour(name):
    problem = "".join(c for c in name if c.isalpha())
    n = int("".join(c for c in name if c.isdigit()))
    meta = pretrained_meta(problem, n)
    assert meta["problem"] == problem and meta["num_nodes"] == n and meta["instances_seen"] > 0
    policy = load_pretrained(problem, n)
    instances = get_problem(problem).generate(300, n, generator=torch.Generator().manual_seed(4321))
    ours = evaluate(policy, problem, instances).mean()
    nearest = evaluate(NearestNeighbour(), problem, instances).mean()
    assert ours < nearest, (float(ours), float(nearest))


def test_load_pretrained__names_what_is_available():
    with pytest.raises(ValueError, match="no shipped model for cvrp-77; available"):
        load_pretrained("cvrp", 77)
