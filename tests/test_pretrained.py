"""The shipped models: they load with their metadata and beat the nearest-neighbour heuristic, and
loading one imports no trainer, reference or app."""
import json
import subprocess
import sys

import pytest
import torch

from agents.inference.rollout import evaluate
from agents.policies.pretrained import available_pretrained, load_pretrained, pretrained_meta
from agents.references.heuristics import NearestNeighbour
from routing_gym.problems import get_problem


@pytest.mark.parametrize("name", available_pretrained())
def test_shipped_model__loads_with_meta_and_beats_nearest_neighbour(name):
    problem = "".join(c for c in name if c.isalpha())
    n = int("".join(c for c in name if c.isdigit()))
    meta = pretrained_meta(problem, n)
    assert meta["problem"] == problem and meta["num_nodes"] == n and meta["instances_seen"] > 0
    policy = load_pretrained(problem, n)
    trainer = meta["trainer"]  # its problem options: `variant`, or top-level keys in files exported before it existed
    variant = trainer.get("variant", {k: trainer[k] for k in get_problem(problem).variants if k in trainer})
    instances = get_problem(problem).generate(300, n, generator=torch.Generator().manual_seed(4321), **variant)
    ours = evaluate(policy, problem, instances, **variant).mean()
    nearest = evaluate(NearestNeighbour(problem), problem, instances, **variant).mean()
    assert ours < nearest, (float(ours), float(nearest))


def test_load_pretrained__at_the_package_top():
    import agents

    assert {"tsp20", "cvrp20", "op20", "pctsp20"} <= set(agents.available_pretrained())
    assert agents.load_pretrained("op", 20).config.problem == "op"


def test_load_pretrained__imports_neither_the_trainer_nor_references_nor_apps():
    """``agents.load_pretrained`` needs the policies layer only: not scipy (the t-test), the training
    subpackage (and its DDP), the references or the apps. Modules that ``import torch`` loads by itself
    (in some versions ``torch.distributed`` and ``torch.nn.parallel.distributed``) are not held against it."""
    script = """
import json, sys
import torch
before = set(sys.modules)
import agents
model = agents.load_pretrained("tsp", 20)
assert model.config.problem == "tsp"
print(json.dumps({"before": sorted(before), "after": sorted(sys.modules)}))
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    loaded = set(seen["after"]) - set(seen["before"])
    assert "agents.policies.pretrained" in loaded
    forbidden = ("scipy", "agents.training", "agents.training.reinforce", "agents.training.distributed",
                 "agents.references", "agents.apps", "agents.inference", "torch.distributed",
                 "torch.nn.parallel.distributed")
    assert not [m for m in forbidden if m in loaded], sorted(m for m in forbidden if m in loaded)
    assert not [m for m in loaded if m.startswith("scipy.")]


def test_load_pretrained__names_what_is_available():
    with pytest.raises(ValueError, match="no shipped model for cvrp-77; available"):
        load_pretrained("cvrp", 77)


@pytest.mark.skipif("tsp20" not in available_pretrained(), reason="no shipped TSP-20 model")
def test_compare__table_of_heuristics_and_shipped_model_and_picture(tmp_path):
    from PIL import Image

    from agents.apps.compare import compare_problem, picture, table

    rows = compare_problem("tsp", 20, 40, seed=4321)
    by_method = {r["method"]: r for r in rows}
    assert min(r["gap"] for r in rows) >= 0 and len(by_method) == 5
    # the best of 8 symmetric greedy rollouts includes the plain greedy one
    assert by_method["shipped model, greedy x 8 symmetries"]["cost"] <= by_method["shipped model, greedy"]["cost"]
    assert by_method["shipped model, greedy"]["cost"] < by_method["nearest neighbour"]["cost"]
    assert "| TSP-20 | nearest neighbour |" in table(rows, 20, 40, 4321)
    picture(["tsp"], 20, 0, tmp_path / "c.png", size=120)
    assert Image.open(tmp_path / "c.png").size[0] == 240
