"""SVRP (routing_gym/problems/svrp.py) against a plain float64 model of RL4CO's SVRPEnv rules
(``rl4co/envs/routing/svrp/env.py``: ``get_action_mask``, ``_step``, ``_get_reward``): every feasible episode of
tiny instances enumerated, masks compared set for set, costs recomputed; a hand-checkable instance; a
technician who can serve nobody skipped; validation, observation, heuristics, and ``solve`` saying that no
solver handles SVRP."""
import math

import gymnasium as gym
import numpy as np
import pytest
import torch

from episodes import every_episode as judge_every_episode
from routing_gym.problems import SVRP, tour_cost

RATES = (1.0, 2.0, 3.0)  # RL4CO's default tech_costs


class Model:
    """The rules in float64. Technicians k = 0, 1, 2 in turn from the depot; a customer is allowed when
    unserved and its need is at most the current technician's level; the depot unless a customer is allowed
    and the technician is at the depot or is the last; the depot sends out the next technician. The cost: each
    route's length (closed at the depot) times its technician's rate."""

    def __init__(self, locs, techs, skills):
        self.locs = np.asarray(locs, np.float64)
        self.techs = np.asarray(techs, np.float64)
        self.skills = np.asarray(skills, np.float64)
        self.seq = []

    def apply(self, action):
        self.seq.append(action)

    @property
    def tech(self):
        return self.seq.count(0)

    @property
    def current(self):
        return self.seq[-1] if self.seq else 0

    def allowed(self):
        customers = {j for j in range(1, len(self.locs))
                     if j not in self.seq and self.skills[j] <= self.techs[self.tech]}
        depot_forbidden = (self.current == 0 or self.tech == len(self.techs) - 1) and customers
        return customers | (set() if depot_forbidden else {0})

    @property
    def done(self):
        return set(range(1, len(self.locs))) <= set(self.seq)

    def cost(self):
        total, k, at = 0.0, 0, 0
        for a in [*self.seq, 0]:
            total += RATES[k] * math.hypot(*(self.locs[a] - self.locs[at]))
            at = a
            k += a == 0
        return total


def own_cost(locs, feats, tour):
    """The registry's rollout judge (tests/test_problems.py)."""
    model = Model(locs, feats["techs"], feats["skills"])
    model.seq = list(tour)
    assert model.done
    return model.cost()


def every_episode(inst):
    """The shared judge (:func:`episodes.every_episode`) with :class:`Model` as the rules and its cost."""
    args = [inst.locs[0].double().numpy(), inst.techs[0].double().numpy(), inst.skills[0].double().numpy()]

    def cost(seq):
        model = Model(*args)
        model.seq = list(seq)
        return model.cost()

    return judge_every_episode(SVRP, inst, lambda: Model(*args), cost)


@pytest.mark.parametrize("n,seed", [(1, 0), (2, 1), (3, 2), (4, 3), (4, 4), (5, 5)])
def test_svrp__mask_and_costs_match_the_model_on_every_episode(n, seed):
    inst = SVRP.generate(1, n, generator=torch.Generator().manual_seed(seed))
    episodes = every_episode(inst)
    assert all(sorted(a for a in s if a) == list(range(1, n + 1)) for s, _ in episodes)
    assert all(s.count(0) <= 2 for s, _ in episodes)  # three technicians at most


def test_svrp__hand_checked_optimum():
    """Depot (0, 0); A (1, 0) needs 5, B (0, 1) needs 1, C (1, 1) needs 4; technicians of levels 2, 5, 8.
    Technician 0 (rate 1) can serve only B, so it must (a technician who can serve someone leaves the depot):
    0-B-0, 2. Technician 1 (rate 2) then can serve A and C: A-C or C-A closes 0-A-C-0 of length 2 + sqrt(2),
    cost 4 + 2 sqrt(2); leaving one for technician 2 (rate 3) costs more (A: 4 + 6 sqrt(2), C: 4 sqrt(2) +
    6). So four episodes, and the optimum 6 + 2 sqrt(2) by [B, 0, A, C] and [B, 0, C, A]."""
    inst = SVRP.instance_from({"locs": [[0, 0], [1, 0], [0, 1], [1, 1]], "techs": [2, 5, 8], "skills": [0, 5, 1, 4]})
    episodes = every_episode(inst)
    r2 = math.sqrt(2)
    assert sorted(episodes) == sorted([([2, 0, 1, 3], pytest.approx(6 + 2 * r2)), ([2, 0, 3, 1], pytest.approx(6 + 2 * r2)),
                                       ([2, 0, 1, 0, 3], pytest.approx(2 + 4 + 6 * r2)),
                                       ([2, 0, 3, 0, 1], pytest.approx(2 + 4 * r2 + 6))])


def test_svrp__a_technician_who_can_serve_nobody_is_skipped():
    """Technician 0's level is below every need: the depot is the only action at reset (cost 0), and
    technician 1 (rate 2) serves the lone customer: 2 * (0.5 + 0.5)."""
    inst = SVRP.instance_from({"locs": [[0, 0], [0.3, 0.4]], "techs": [0.5, 5, 8], "skills": [0, 1]})
    state = SVRP.reset(inst)
    assert state.mask[0].tolist() == [1, 0]
    assert every_episode(inst) == [([0, 1], pytest.approx(2.0))]


def test_svrp__observation():
    inst = SVRP.generate(2, 5, generator=torch.Generator().manual_seed(0))
    assert (inst.techs[:, :-1] <= inst.techs[:, 1:]).all() and (inst.techs >= 1).all() and (inst.techs <= 10).all()
    assert (inst.skills[:, 0] == 0).all() and (inst.skills <= inst.techs[:, -1:]).all()
    obs = SVRP.observe(SVRP.reset(inst))
    assert obs["current_cost"].tolist() == [[1.0], [1.0]] and torch.equal(obs["current_skill"][:, 0], inst.techs[:, 0])
    assert SVRP.max_steps(6) == 7
    env = gym.make("routing/SVRP-20")
    obs, _ = env.reset(seed=0)
    assert obs["locs"].shape == (21, 2) and obs["techs"].shape == (3,) and obs["skills"].shape == (21,)


def test_svrp__instances_validated():
    good = {"locs": [[0, 0], [0.5, 0.5], [1, 1]], "techs": [1, 2, 3], "skills": [0, 1, 3]}
    SVRP.instance_from(good)
    for field, value, match in (("skills", [0, 1, 3.5], r"'skills' exceeds the last technician's level"),
                                ("skills", [1, 1, 3], r"'skills' must be 0 at the depot"),
                                ("skills", [0, -1, 3], r"'skills' must lie in \[0.0, 10.0\]"),
                                ("techs", [1, 2, 11], r"'techs' must lie in \[0.0, 10.0\]"),
                                ("techs", [1, 2], r"'techs' must have shape \(3,\)")):
        with pytest.raises(ValueError, match=match):
            SVRP.instance_from({**good, field: value})
    with pytest.raises(ValueError, match="lacks field"):
        SVRP.instance_from({"locs": good["locs"], "skills": good["skills"]})


def test_svrp__heuristics_respect_the_skills():
    from agents.references.heuristics import applicable, heuristic_tours

    inst = SVRP.generate(16, 20, generator=torch.Generator().manual_seed(3))
    assert "nearest" in applicable(SVRP)
    costs = {name: tour_cost(SVRP, inst, heuristic_tours(SVRP, inst, name)) for name in applicable(SVRP)}
    assert all(torch.isfinite(c).all() for c in costs.values())
    assert costs["nearest"].mean() < costs["random"].mean()


def test_svrp__solve_says_no_solver_handles_it():
    from agents.references.solvers import METHODS, solve

    inst = SVRP.generate(1, 4, generator=torch.Generator().manual_seed(0))
    for method in METHODS:
        with pytest.raises(ValueError, match="no solver reference exists for SVRP"):
            solve(SVRP, inst, method, progress=False)
