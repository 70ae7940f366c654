"""PDP (routing_gym/problems/pdp.py) against a plain float64 model of RL4CO's PDPEnv rules
(``rl4co/envs/routing/pdp/env.py``): every feasible episode of tiny instances enumerated, masks compared set
for set, costs recomputed; a hand-checkable instance; validation, sizes, heuristics, multi-start nodes, and
``solve`` saying that no solver handles PDP."""
import itertools
import math

import gymnasium as gym
import numpy as np
import pytest
import torch

from routing_gym.problems import PDP, step, tour_cost


class Model:
    """The rules in float64: from the depot, any unvisited pickup (1..n/2), or an unvisited delivery
    i + n/2 whose pickup i is visited; the tour closes back to the depot after the last node."""

    def __init__(self, locs):
        self.locs = np.asarray(locs, np.float64)
        self.n = len(self.locs) - 1
        self.seq = []

    def allowed(self):
        half = self.n // 2
        return {j for j in range(1, self.n + 1) if j not in self.seq and (j <= half or j - half in self.seq)}

    @property
    def done(self):
        return len(self.seq) == self.n

    def cost(self):
        path = [0, *self.seq, 0]
        return sum(math.hypot(*(self.locs[a] - self.locs[b])) for a, b in zip(path, path[1:]))


def every_episode(inst):
    """Follow the mask depth-first through every feasible episode; the mask must be the model's allowed set
    at every step and each episode's summed rewards and ``tour_cost`` minus / equal to the model's cost."""
    locs = inst.locs[0].double().numpy()
    episodes = []

    def dfs(state, seq, ret):
        model = Model(locs)
        model.seq = list(seq)
        if bool(state.done[0]):
            assert model.done and ret == pytest.approx(-model.cost(), abs=1e-5)
            episodes.append((seq, model.cost()))
            return
        allowed = set(state.mask[0].nonzero().flatten().tolist())
        assert allowed == model.allowed(), f"after {seq}"
        for a in sorted(allowed):
            nxt, r, invalid = step(PDP, state, torch.tensor([a]))
            assert not invalid.item()
            dfs(nxt, seq + [a], ret + float(r[0]))

    dfs(PDP.reset(inst), [], 0.0)
    tours = torch.tensor([s for s, _ in episodes])
    costs = tour_cost(PDP, PDP.Instance(inst.locs.expand(len(episodes), -1, -1)), tours)
    assert costs.tolist() == pytest.approx([c for _, c in episodes], abs=1e-5)
    return episodes


@pytest.mark.parametrize("n,seed", [(2, 0), (4, 1), (6, 2), (6, 3)])
def test_pdp__mask_and_costs_match_the_model_on_every_episode(n, seed):
    inst = PDP.generate(1, n, generator=torch.Generator().manual_seed(seed))
    episodes = every_episode(inst)
    half = n // 2
    # every precedence-feasible order, and nothing else: n! / 2^(n/2) of them
    assert len(episodes) == math.factorial(n) // 2 ** half
    feasible = {p for p in itertools.permutations(range(1, n + 1))
                if all(p.index(i) < p.index(i + half) for i in range(1, half + 1))}
    assert {tuple(s) for s, _ in episodes} == feasible


def test_pdp__hand_checked_optimum():
    """On a line from the depot at x = 0: pickup 1 at x = 1 with its delivery 3 at x = 0.5, pickup 2 at
    x = 0.25 with its delivery 4 at x = 0.75. No tour is shorter than out to x = 1 and back, 2, and a tour
    of length 2 visits its nodes by increasing x out and decreasing x back: 1 at the turn, so 3 on the way
    back; 2 on the way out (on the way back it would follow 4); 4 either way. So the optimum is 2, reached
    by exactly 0-2-4-1-3-0 and 0-2-1-4-3-0."""
    inst = PDP.instance_from({"locs": [[0, 0], [1, 0], [0.25, 0], [0.5, 0], [0.75, 0]]})
    episodes = every_episode(inst)
    best = min(c for _, c in episodes)
    assert best == pytest.approx(2.0)
    assert sorted(s for s, c in episodes if c < best + 1e-9) == [[2, 1, 4, 3], [2, 4, 1, 3]]


def test_pdp__observation_roles_and_partners():
    inst = PDP.generate(2, 6, generator=torch.Generator().manual_seed(0))
    obs = PDP.observe(PDP.reset(inst))
    assert obs["role"][0].tolist() == [0, 1, 1, 1, -1, -1, -1]
    assert torch.equal(obs["partner_locs"][:, [1, 2, 3, 4, 5, 6, 0]], inst.locs[:, [4, 5, 6, 1, 2, 3, 0]])
    assert obs["num_steps"].max() == 0 and PDP.max_steps(7) == 6


def test_pdp__sizes_are_even_and_instances_validated():
    assert PDP.valid_num_nodes(5) == 6 and PDP.valid_num_nodes(1) == 2
    with pytest.raises(ValueError, match="multiple of 2 for PDP"):
        gym.make("routing/PDP-v0", num_nodes=5)
    with pytest.raises(ValueError, match=r"'locs' must hold the depot and an even number"):
        PDP.instance_from({"locs": [[0, 0], [0.5, 0.5], [1, 1], [0, 1]]})
    with pytest.raises(ValueError, match=r"'locs' must lie in \[0.0, 1.0\]"):
        PDP.instance_from({"locs": [[0, 0], [0.5, 1.5], [1, 1]]})
    with pytest.raises(ValueError, match="unknown field"):
        PDP.instance_from({"locs": [[0, 0], [0.5, 0.5], [1, 1]], "demand": [0, 1, 1]})


def test_pdp__start_nodes_are_the_pickups():
    assert PDP.start_nodes(11).tolist() == [1, 2, 3, 4, 5]


def test_pdp__heuristics_respect_the_precedences():
    from agents.references.heuristics import applicable, heuristic_tours

    inst = PDP.generate(16, 20, generator=torch.Generator().manual_seed(3))
    assert "nearest" in applicable(PDP)
    costs = {name: tour_cost(PDP, inst, heuristic_tours(PDP, inst, name)) for name in applicable(PDP)}
    assert all(torch.isfinite(c).all() for c in costs.values())
    assert costs["nearest"].mean() < costs["random"].mean()


def test_pdp__solve_says_no_solver_handles_it():
    from agents.references.solvers import METHODS, solve

    inst = PDP.generate(1, 4, generator=torch.Generator().manual_seed(0))
    for method in METHODS:
        with pytest.raises(ValueError, match="no solver reference exists for PDP"):
            solve(PDP, inst, method, progress=False)
