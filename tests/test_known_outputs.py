"""Known outputs of the shipped models and of the paper's weights, through every path a user acts with:
``predict`` in a single env, ``routing-gym eval``, ``routing-gym render`` and ``routing-gym compare``.

A policy that ignores its network (say, one that takes the first allowed node) passes shape and
feasibility checks; these tests fail it twice over: the known tours and costs (recorded from the
committed weights; retraining a shipped model means recording them anew) and the margin by which the
models beat nearest neighbour. The last test checks that they do fail such a policy.
"""
import contextlib
import io
import re

import gymnasium as gym
import pytest
import torch

import agents
import routing_gym  # noqa: F401
from agents.apps.cli import main
from agents.apps.compare import compare_problem
from agents.inference.rollout import evaluate
from agents.policies.attention_model import AttentionModel
from agents.policies.kool_weights import load_kool_weights
from agents.references.heuristics import heuristic_tours
from routing_gym.problems import get_problem, tour_cost

# shipped model, single env reset(seed=0), greedy predict: (tour, cost)
PREDICT = {
    "tsp": ([6, 16, 11, 17, 10, 19, 8, 7, 14, 9, 1, 5, 15, 13, 2, 12, 3, 18, 4, 0], 3.885383),
    "cvrp": ([11, 16, 6, 0, 17, 10, 19, 8, 7, 20, 0, 14, 9, 1, 5, 15, 0, 18, 13, 2, 12, 3, 4], 6.351335),
    "op": ([8, 19, 7, 14, 20, 9, 5, 18, 0], -5.28),
    "pctsp": ([6, 16, 11, 17, 10, 19, 8, 7, 14, 20, 9, 5, 15, 13, 18, 0], 3.262018),
}
# `routing-gym eval --problem P --num-nodes N --policy pretrained --num-instances 200 --seed 7`: mean cost
EVAL = {("tsp", 20): 3.8814, ("cvrp", 20): 6.4306, ("op", 20): -5.2583, ("pctsp", 20): 3.1879,
        ("tsp", 50): 5.9641}
# `routing-gym render --problem P --num-nodes 20 --policy pretrained --seed 3`: the episode's cost
RENDER = {"tsp": 3.1986, "cvrp": 4.8206, "op": -5.8100, "pctsp": 2.9035}
# the paper's weights (folder), greedy on 200 generated n = 20 instances (seed 1234): mean cost; the paper's
# Table 1 (10,000 instances) for comparison: 3.85 / 6.40 / 6.39 / -5.19 / 3.18 / 3.26
REFERENCE = {"tsp": ("tsp_20", 3.85281), "cvrp": ("cvrp_20", 6.39584), "sdvrp": ("sdvrp_20", 6.41404),
             "op": ("op_dist_20", -5.3088), "pctsp": ("pctsp_det_20", 3.17631), "spctsp": ("pctsp_stoch_20", 3.25524)}


def cli(*argv) -> str:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(list(argv)) == 0
    return buf.getvalue()


def first_allowed(self, cache, obs):
    """A stand-in that ignores the network: all mass on the first allowed node."""
    mask = obs["action_mask"].bool()
    first = mask.float().argmax(dim=-1, keepdim=True)
    logits = torch.full(mask.shape, -1e4).scatter(1, first, 0.0)
    return logits.masked_fill(~mask, float("-inf")).log_softmax(dim=-1), cache


def predict_episode(problem: str):
    model = agents.load_pretrained(problem, 20)
    env = gym.make(f"routing/{problem.upper()}-20")
    obs, _ = env.reset(seed=0)
    terminated = False
    while not terminated:
        action, _ = model.predict(obs)
        obs, _, terminated, _, info = env.step(action)
    return info["tour"][info["tour"] >= 0].tolist(), info["cost"]  # the tour, unpadded


@pytest.mark.parametrize("problem", sorted(PREDICT))
def test_shipped_model__predict_gives_the_known_tour(problem):
    tour, cost = predict_episode(problem)
    assert tour == PREDICT[problem][0]
    assert cost == pytest.approx(PREDICT[problem][1], abs=1e-5)


@pytest.mark.parametrize("problem, n", sorted(EVAL))
def test_shipped_model__eval_gives_the_known_mean_and_beats_nearest_neighbour(problem, n):
    out = cli("eval", "--problem", problem, "--num-nodes", str(n), "--policy", "pretrained", "--num-instances", "200",
              "--seed", "7")
    mean = float(re.search(r"mean cost (-?[\d.]+)", out).group(1))
    assert mean == pytest.approx(EVAL[problem, n], abs=2e-4)
    unit = get_problem(problem)
    instances = unit.generate(200, n, generator=torch.Generator().manual_seed(7))
    nearest = float(tour_cost(unit, instances, heuristic_tours(unit, instances, "nearest")).mean())
    assert mean < nearest - 0.05 * abs(nearest)  # at least 5% better than nearest neighbour


@pytest.mark.parametrize("problem", sorted(RENDER))
def test_shipped_model__render_records_the_known_episode(problem, tmp_path):
    out = cli("render", "--problem", problem, "--num-nodes", "20", "--policy", "pretrained", "--seed", "3",
              "--out", str(tmp_path / "episode.gif"))
    assert float(re.search(r"pretrained: cost (-?[\d.]+)", out).group(1)) == pytest.approx(RENDER[problem], abs=2e-4)
    assert (tmp_path / "episode.gif").stat().st_size > 0


def test_shipped_model__compare_table_rows_are_the_models_costs():
    rows = {r["method"]: r for r in compare_problem("cvrp", 20, 200, 7)}
    assert rows["shipped model, greedy"]["cost"] == pytest.approx(EVAL["cvrp", 20], abs=2e-4)  # same set as eval
    assert rows["shipped model, greedy"]["cost"] < rows["nearest neighbour"]["cost"]


@pytest.mark.parametrize("problem", sorted(REFERENCE))
def test_reference_weights__greedy_mean_cost_is_known(kool_weights, problem):
    folder, mean = REFERENCE[problem]
    model = load_kool_weights(kool_weights / folder)
    instances = get_problem(problem).generate(200, 20, generator=torch.Generator().manual_seed(1234))
    assert float(evaluate(model, problem, instances).mean()) == pytest.approx(mean, abs=2e-4)


def test_known_outputs__fail_a_policy_that_ignores_its_network(monkeypatch):
    monkeypatch.setattr(AttentionModel, "log_probs", first_allowed)
    tour, _ = predict_episode("tsp")
    assert tour != PREDICT["tsp"][0]
    out = cli("eval", "--problem", "cvrp", "--num-nodes", "20", "--policy", "pretrained", "--num-instances", "200",
              "--seed", "7")
    assert float(re.search(r"mean cost (-?[\d.]+)", out).group(1)) != pytest.approx(EVAL["cvrp", 20], abs=2e-4)
