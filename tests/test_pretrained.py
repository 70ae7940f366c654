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
    variant = {"prize_type": meta["trainer"]["prize_type"]} if problem == "op" else {}
    instances = get_problem(problem).generate(300, n, generator=torch.Generator().manual_seed(4321), **variant)
    ours = evaluate(policy, problem, instances, **variant).mean()
    nearest = evaluate(NearestNeighbour(), problem, instances, **variant).mean()
    assert ours < nearest, (float(ours), float(nearest))


def test_load_pretrained__at_the_package_top():
    import agents

    assert {"tsp20", "cvrp20", "op20", "pctsp20"} <= set(agents.available_pretrained())
    assert agents.load_pretrained("op", 20).config.problem == "op"


def test_load_pretrained__names_what_is_available():
    with pytest.raises(ValueError, match="no shipped model for cvrp-77; available"):
        load_pretrained("cvrp", 77)


@pytest.mark.skipif("tsp20" not in available_pretrained(), reason="no shipped TSP-20 model")
def test_compare__table_of_heuristics_and_shipped_model_and_picture(tmp_path):
    from PIL import Image

    from agents.compare import compare_problem, picture, table

    rows = compare_problem("tsp", 20, 40, seed=4321)
    by_method = {r["method"]: r for r in rows}
    assert min(r["gap"] for r in rows) >= 0 and len(by_method) == 5
    # the best of 8 symmetric greedy rollouts includes the plain greedy one
    assert by_method["shipped model, greedy x 8 symmetries"]["cost"] <= by_method["shipped model, greedy"]["cost"]
    assert by_method["shipped model, greedy"]["cost"] < by_method["nearest neighbour"]["cost"]
    assert "| TSP-20 | nearest neighbour |" in table(rows, 20, 40, 4321)
    picture(["tsp"], 20, 0, tmp_path / "c.png", size=120)
    assert Image.open(tmp_path / "c.png").size[0] == 240
