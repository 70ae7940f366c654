"""SHPP (routing_gym/problems/shpp.py) against a plain float64 model of RL4CO's SHPPEnv rules
(``rl4co/envs/routing/shpp/env.py``): every feasible episode of tiny instances enumerated, masks compared set
for set, costs recomputed; hand-checkable instances; validation, multi-start nodes, heuristics, and LKH's
paths (``solve(..., "lkh")``) costed by ``tour_cost`` as their float64 length and optimal on tiny instances."""
import itertools
import math

import gymnasium as gym
import numpy as np
import pytest
import torch

from episodes import every_episode as judge_every_episode
from routing_gym.problems import SHPP, tour_cost


class Model:
    """The rules in float64: from the start (node 0), any unvisited node but the end (N - 1); the end once
    every other node is visited. The cost is the path's length, start to end, with no closing edge."""

    def __init__(self, locs):
        self.locs = np.asarray(locs, np.float64)
        self.end = len(self.locs) - 1
        self.seq = []

    def apply(self, action):
        self.seq.append(action)

    def allowed(self):
        left = {j for j in range(1, self.end) if j not in self.seq}
        return left or ({self.end} - set(self.seq))

    @property
    def done(self):
        return self.seq[-1:] == [self.end]

    def cost(self):
        path = [0, *self.seq]
        return sum(math.hypot(*(self.locs[a] - self.locs[b])) for a, b in zip(path, path[1:]))


def own_cost(locs, feats, tour):
    """The registry's rollout judge (tests/test_problems.py): the path's float64 length, no closing edge."""
    model = Model(locs)
    model.seq = list(tour)
    assert model.done
    return model.cost()


def every_episode(inst):
    """The shared judge (:func:`episodes.every_episode`) with :class:`Model` as the rules and its cost; a
    finished episode's mask holds only the no-op, staying at the end."""
    locs = inst.locs[0].double().numpy()

    def cost(seq):
        model = Model(locs)
        model.seq = list(seq)
        return model.cost()

    def only_the_noop(state):
        assert int(state.mask[0].sum()) == 1 and int(state.mask[0, -1]) == 1

    return judge_every_episode(SHPP, inst, lambda: Model(locs), cost, at_end=only_the_noop)


@pytest.mark.parametrize("n,seed", [(1, 0), (2, 1), (3, 2), (4, 3), (5, 4)])
def test_shpp__mask_and_costs_match_the_model_on_every_episode(n, seed):
    inst = SHPP.generate(1, n, generator=torch.Generator().manual_seed(seed))
    assert inst.locs.shape == (1, n + 1, 2)
    episodes = every_episode(inst)
    # every order of the nodes between the start and the end, then the end, and nothing else
    assert {tuple(s) for s, _ in episodes} == {(*p, n) for p in itertools.permutations(range(1, n))}


def test_shpp__hand_checked_optimum():
    """A unit square's corners: start (0, 0), end (0, 1), and (1, 0), (1, 1) between. The path out along the
    bottom, up the right side and back along the top is 3; the other order crosses the square twice,
    2 sqrt(2) + 1. The closing edge end -> start (length 1) is not counted: the optimum is 3, not 4."""
    inst = SHPP.instance_from({"locs": [[0, 0], [1, 0], [1, 1], [0, 1]]})
    episodes = every_episode(inst)
    assert sorted(episodes) == [([1, 2, 3], pytest.approx(3.0)), ([2, 1, 3], pytest.approx(1 + 2 * math.sqrt(2)))]


def test_shpp__collinear_path_is_the_distance_from_start_to_end():
    """Nodes on a segment from the start at x = 0 to the end at x = 1: the optimum visits them by increasing
    x, length 1, and only that order reaches it."""
    xs = [0.0, 0.5, 0.25, 0.75, 1.0]
    inst = SHPP.instance_from({"locs": [[x, 0.3] for x in xs]})
    episodes = every_episode(inst)
    best = min(c for _, c in episodes)
    assert best == pytest.approx(1.0)
    assert [s for s, c in episodes if c < best + 1e-9] == [[2, 1, 3, 4]]


def test_shpp__observation_and_sizes():
    inst = SHPP.generate(2, 5, generator=torch.Generator().manual_seed(0))
    state = SHPP.reset(inst)
    obs = SHPP.observe(state)
    assert obs["last_node"].tolist() == [5, 5] and obs["current_node"].tolist() == [0, 0]
    assert state.mask[0].tolist() == [0, 1, 1, 1, 1, 0]
    assert SHPP.max_steps(6) == 5 and SHPP.num_nodes_total(20) == 21
    env = gym.make("routing/SHPP-20")
    obs, _ = env.reset(seed=0)
    assert obs["locs"].shape == (21, 2) and int(obs["action_mask"].sum()) == 19 and int(obs["last_node"]) == 20


def test_shpp__instances_validated():
    with pytest.raises(ValueError, match=r"'locs' must hold the start and the end node"):
        SHPP.instance_from({"locs": [[0.5, 0.5]]})
    with pytest.raises(ValueError, match=r"'locs' must lie in \[0.0, 1.0\]"):
        SHPP.instance_from({"locs": [[0, 0], [0.5, 1.5], [1, 1]]})
    with pytest.raises(ValueError, match="unknown field"):
        SHPP.instance_from({"locs": [[0, 0], [1, 1]], "demand": [0, 1]})
    two = SHPP.instance_from({"locs": [[0, 0], [0.3, 0.4]]})  # start and end only: one action
    assert tour_cost(SHPP, two, torch.tensor([[1]])).tolist() == pytest.approx([0.5])


def test_shpp__start_nodes_exclude_the_start_and_the_end():
    assert SHPP.start_nodes(6).tolist() == [1, 2, 3, 4]
    assert SHPP.start_nodes(2).tolist() == [1]


def test_shpp__heuristics_respect_the_end():
    from agents.references.heuristics import applicable, heuristic_tours

    inst = SHPP.generate(16, 20, generator=torch.Generator().manual_seed(3))
    assert "nearest" in applicable(SHPP)
    costs = {name: tour_cost(SHPP, inst, heuristic_tours(SHPP, inst, name)) for name in applicable(SHPP)}
    assert all(torch.isfinite(c).all() for c in costs.values())
    assert costs["nearest"].mean() < costs["random"].mean()


def path_length(locs: np.ndarray, actions) -> float:
    path = [0, *actions]
    return sum(math.hypot(*(locs[a] - locs[b])) for a, b in zip(path, path[1:]))


@pytest.mark.parametrize("n", [2, 4, 6])
def test_shpp__lkh_paths_are_optimal_on_tiny_instances(n):
    """LKH's paths (an ATSP whose only cheap edge into the start leaves the end): our ``tour_cost`` equals
    their float64 length, which equals the best of every order."""
    from agents.references.solvers import available, solve

    if not available("lkh"):
        pytest.skip("elkai is not installed")
    inst = SHPP.generate(4, n, generator=torch.Generator().manual_seed(n))
    solved = solve(SHPP, inst, "lkh", time_limit=0.2, progress=False)
    for b in range(4):
        locs = inst.locs[b].double().numpy()
        actions = [int(a) for a in solved.tours[b]][:n]
        assert actions[-1] == n and sorted(actions) == list(range(1, n + 1))
        best = min(path_length(locs, (*p, n)) for p in itertools.permutations(range(1, n)))
        assert float(solved.cost[b]) == pytest.approx(path_length(locs, actions), abs=1e-5)
        assert path_length(locs, actions) == pytest.approx(best, abs=1e-5)


def test_shpp__lkh_path_of_fifty_nodes_is_costed_as_its_length():
    from agents.references.heuristics import heuristic_tours
    from agents.references.solvers import available, solve

    if not available("lkh"):
        pytest.skip("elkai is not installed")
    inst = SHPP.generate(2, 50, generator=torch.Generator().manual_seed(0))
    solved = solve(SHPP, inst, "lkh", time_limit=0.5, progress=False)
    for b in range(2):
        actions = [int(a) for a in solved.tours[b]][:50]
        assert float(solved.cost[b]) == pytest.approx(path_length(inst.locs[b].double().numpy(), actions), abs=1e-4)
    nearest = tour_cost(SHPP, inst, heuristic_tours(SHPP, inst, "nearest"))
    assert (solved.cost <= nearest + 1e-6).all()
