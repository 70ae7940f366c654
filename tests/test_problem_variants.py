"""SDVRP and SPCTSP, checked against plain-Python models of Kool et al.'s rules
(wouterkool/attention-learn-to-route: ``problems/vrp/state_sdvrp.py``, ``problems/pctsp/state_pctsp.py``).

Hand-made instances use dyadic demands and prizes (0.25, 0.625, ...), so the float64 models and the
float32 core do the same arithmetic exactly and the masks can be compared set for set; the generated
instances are compared with a float32 port of the reference's update."""
import math

import numpy as np
import pytest
import torch

from episodes import every_episode
from routing_gym.problems import CVRP, PCTSP, step, tour_cost
from routing_gym.problems.sdvrp import SDVRP, max_steps
from routing_gym.problems.spctsp import SPCTSP


def one(problem, **fields):
    return problem.instance_from(fields)


def route_length(locs, actions, close=True):
    """Length of the walk from the depot through ``actions`` (and back to it), in float64."""
    locs = np.asarray(locs, np.float64)
    path = [0, *actions] + ([0] if close and actions[-1] != 0 else [])
    return sum(float(np.hypot(*(locs[a] - locs[b]))) for a, b in zip(path, path[1:]))


# ------------------------------------------------------------------------------ plain-Python models
class SDVRPModel:
    """StateSDVRP in float64: deliver min(remaining, 1 - used); a customer is allowed while it has
    demand left and the vehicle is not full; the depot unless the vehicle is there while a customer is
    allowed; done when no demand is left."""

    def __init__(self, demand):
        self.rem, self.used, self.at, self.fills = [float(d) for d in demand], 0.0, 0, 0

    def allowed(self):
        customers = {i for i in range(1, len(self.rem)) if self.rem[i] > 0 and self.used < 1.0}
        return customers | ({0} if self.at != 0 or not customers else set())

    def apply(self, a):
        if a == 0:
            self.used = 0.0
        else:
            delivered = min(self.rem[a], 1.0 - self.used)
            self.fills += delivered < self.rem[a]  # a split: the vehicle is now full
            self.rem[a] -= delivered
            self.used += delivered
        self.at = a

    @property
    def done(self):
        return not any(r > 0 for r in self.rem)

    def cost(self, locs, actions):
        return route_length(locs, actions)  # routes split at depot visits, the last one closed


class SPCTSPModel:
    """StatePCTSP (stochastic) in float64: any unvisited node; the depot once the REAL prize collected is
    at least 1 or every node is visited; cost = length + penalties of the unvisited nodes."""

    def __init__(self, real_prize, penalty):
        self.real, self.penalty = [float(p) for p in real_prize], [float(p) for p in penalty]
        self.visited, self.collected, self.done = set(), 0.0, False

    def allowed(self):
        nodes = set(range(1, len(self.real))) - self.visited
        return nodes | ({0} if self.collected >= 1.0 or not nodes else set())

    def apply(self, a):
        self.done = a == 0
        if a:
            self.visited.add(a)
            self.collected += self.real[a]

    def cost(self, locs, actions):
        unvisited = set(range(1, len(self.real))) - set(actions)
        return route_length(locs, actions) + sum(self.penalty[i] for i in unvisited)


def check_every_episode(problem, inst, make_model):
    """The shared judge (:func:`episodes.every_episode`) with ``make_model()`` as the rules and its ``cost``;
    returns the episodes as (actions, model after them)."""
    locs = inst.locs[0].double().numpy()

    def replay(actions):
        model = make_model()
        for a in actions:
            model.apply(a)
        return model

    found = every_episode(problem, inst, make_model, lambda actions: replay(actions).cost(locs, actions))
    return [(actions, replay(actions)) for actions, _ in found]


# ------------------------------------------------------------------------------------------- SDVRP
SDVRP_CASES = [
    dict(locs=[[0, 0], [1, 0], [0, 1], [0.5, 0.5]], demand=[0, 0.75, 0.75, 0.5]),
    dict(locs=[[0.5, 0.5], [0.1, 0.9], [0.9, 0.2]], demand=[0, 0.625, 0.75]),
    dict(locs=[[0, 0], [0.2, 0.7], [0.6, 0.1], [0.9, 0.9]], demand=[0, 0.375, 0.875, 1.0]),
    dict(locs=[[0.3, 0.6], [0.2, 0.7], [0.6, 0.1], [0.9, 0.9], [0.4, 0.4]], demand=[0, 0.25, 0.625, 0.75, 0.5]),
]


@pytest.mark.parametrize("case", range(len(SDVRP_CASES)))
def test_sdvrp__every_episode_matches_the_model(case):
    inst = one(SDVRP, **SDVRP_CASES[case])
    episodes = check_every_episode(SDVRP, inst, lambda: SDVRPModel(SDVRP_CASES[case]["demand"]))
    n, total = len(SDVRP_CASES[case]["demand"]) - 1, sum(SDVRP_CASES[case]["demand"])
    assert any(model.fills for _, model in episodes)  # splits happen
    for actions, model in episodes:
        assert model.fills < total  # the step bound's argument: filled routes carry 1 each, the last is not
        assert len(actions) <= 2 * (n + model.fills) - 1 <= max_steps(n)


def test_sdvrp__splitting_beats_cvrp_where_loads_do_not_pair():
    fields = SDVRP_CASES[0]  # 0.75 + 0.75 + 0.5: CVRP needs three routes, SDVRP two (c3 split in halves)
    episodes = check_every_episode(SDVRP, one(SDVRP, **fields), lambda: SDVRPModel(fields["demand"]))
    best = min(model.cost(fields["locs"], actions) for actions, model in episodes)
    assert best == pytest.approx(2 + 2 * math.sqrt(2), abs=1e-6)  # 0 -> 1 -> 3 -> 0 -> 2 -> 3 -> 0
    state = SDVRP.reset(one(SDVRP, **fields))
    for a in [1, 3, 0, 2, 3]:
        state, _, invalid = step(SDVRP, state, torch.tensor([a]))
        assert not invalid.item()
    assert state.done.item() and float(state.length[0]) == pytest.approx(2 + 2 * math.sqrt(2), abs=1e-6)
    cvrp = CVRP.instance_from(fields)
    assert float(tour_cost(CVRP, cvrp, torch.tensor([[1, 0, 2, 0, 3]]))[0]) == pytest.approx(4 + math.sqrt(2), abs=1e-6)


def test_sdvrp__observation_shows_the_remaining_demand_and_capacity():
    inst = one(SDVRP, locs=[[0, 0], [0.1, 0], [0.2, 0]], demand=[0, 0.75, 0.5])
    state = SDVRP.reset(inst)
    obs = SDVRP.observe(state)
    assert obs["demand"][0].tolist() == [0, 0.75, 0.5] and obs["remaining_capacity"][0].tolist() == [1.0]
    state, _, _ = step(SDVRP, state, torch.tensor([1]))
    state, _, _ = step(SDVRP, state, torch.tensor([2]))  # delivers 0.25 of 0.5: vehicle full
    obs = SDVRP.observe(state)
    assert obs["demand"][0].tolist() == [0, 0, 0.25] and obs["remaining_capacity"][0].tolist() == [0.0]
    assert state.mask[0].tolist() == [True, False, False] and state.visited[0, 1:].tolist() == [True, False]
    assert int(obs["current_node"][0]) == 2 and obs["num_steps"][0].tolist() == [2.0]
    assert torch.equal(inst.demand, torch.tensor([[0, 0.75, 0.5]]))  # the instance is not modified
    state, _, _ = step(SDVRP, state, torch.tensor([0]))
    assert SDVRP.observe(state)["remaining_capacity"][0].tolist() == [1.0]
    assert state.mask[0].tolist() == [False, False, True]
    state, r, _ = step(SDVRP, state, torch.tensor([2]))  # the rest; the return is added to this step
    assert state.done.item() and float(r[0]) == pytest.approx(-0.4, abs=1e-6)
    bounds = SDVRP.bounds(3)
    assert set(bounds) | {"current_node"} == set(SDVRP.observe(state)) and bounds["num_steps"][2] == max_steps(2) == 7


def test_sdvrp__float_remainders_are_not_forgiven_as_in_the_reference():
    demand = (torch.tensor([3.0, 9.0, 8.0]) / 20).tolist()  # whole units that fill the vehicle exactly...
    inst = one(SDVRP, locs=[[0, 0], [0.1, 0], [0.2, 0], [0.3, 0]], demand=[0, *demand])
    state = SDVRP.reset(inst)
    for a in [1, 2, 3]:
        state, _, _ = step(SDVRP, state, torch.tensor([a]))
    left = float(state.remaining[0, 3])
    assert 0 < left < 1e-7  # ... but float32 leaves 3e-8 of customer 3, as Kool's float32 update does
    assert state.mask[0].tolist() == [True, False, False, False] and not state.done.item()
    state, _, _ = step(SDVRP, state, torch.tensor([0]))
    state, _, _ = step(SDVRP, state, torch.tensor([3]))
    assert state.done.item() and int(state.num_steps[0]) == 5


def reference_sdvrp_rollout(inst, seed):
    """Random rollouts through the core and, in lockstep, a float32 numpy port of StateSDVRP.update /
    get_mask (run while the core's sub-env is not done); returns the steps taken per instance."""
    rem = inst.demand.numpy().copy()
    used = np.zeros(rem.shape[0], np.float32)
    prev = np.zeros(rem.shape[0], np.int64)
    rows = np.arange(rem.shape[0])
    state, g = SDVRP.reset(inst), torch.Generator().manual_seed(seed)
    ret = torch.zeros(rem.shape[0], dtype=torch.float64)
    actions, tiny = [], False
    while not state.done.all():
        live = ~state.done.numpy()
        mask_loc = (rem[:, 1:] == 0) | (used[:, None] >= np.float32(1.0))
        mask_depot = (prev == 0) & ((~mask_loc).sum(-1) > 0)
        allowed = ~np.concatenate([mask_depot[:, None], mask_loc], 1)
        assert (state.mask.numpy()[live] == allowed[live]).all()
        a = state.mask.float().multinomial(1, generator=g).squeeze(1)
        state, r, invalid = step(SDVRP, state, a)
        assert not invalid.any()
        ret += r.double()
        a = a.numpy()
        sel = rem[rows, a]
        delivered = np.minimum(sel, np.float32(1.0) - used)
        used = np.where(live, (used + delivered) * (a != 0), used).astype(np.float32)
        rem[rows, a] = np.where(live, sel - delivered, sel)
        prev = np.where(live, a, prev)
        finished = ~(rem > 0).any(1)
        assert np.array_equal(state.remaining.numpy(), rem)
        assert np.array_equal(state.done.numpy(), finished)
        assert np.array_equal(state.used.numpy()[~finished], used[~finished])
        tiny |= bool(((rem > 0) & (rem < 1e-6)).any())
        actions.append(np.where(live, a, 0))
    tours = np.stack(actions, 1)
    for b in range(len(tours)):
        walk = [int(x) for x in tours[b][: int(state.num_steps[b])]]
        assert float(ret[b]) == pytest.approx(-route_length(inst.locs[b].double().numpy(), walk), abs=1e-4)
    return state.num_steps, tiny


def test_sdvrp__generated_rollouts_follow_a_port_of_the_reference_update():
    inst = SDVRP.generate(48, 20, generator=torch.Generator().manual_seed(3))
    steps, tiny = reference_sdvrp_rollout(inst, seed=4)
    assert tiny  # float32 remainders of ~1e-8 occurred and were handled as the reference does
    assert int(steps.max()) <= SDVRP.bounds(21)["num_steps"][2] == max_steps(20) == 79


def test_sdvrp__generator_is_cvrps_draw_for_draw():
    a = SDVRP.generate(5, 12, generator=torch.Generator().manual_seed(7))
    b = CVRP.generate(5, 12, generator=torch.Generator().manual_seed(7))
    assert torch.equal(a.locs, b.locs) and torch.equal(a.demand, b.demand)
    c = SDVRP.generate(5, 12, generator=torch.Generator().manual_seed(7))
    d = SDVRP.generate(5, 12, generator=torch.Generator().manual_seed(8))
    assert all(torch.equal(x, y) for x, y in zip(a, c)) and not torch.equal(a.locs, d.locs)
    assert isinstance(a, SDVRP.Instance) and SDVRP.num_nodes_total(12) == 13


# ------------------------------------------------------------------------------------------ SPCTSP
SPCTSP_CASES = [  # expected prizes that mislead: node 1 looks worth 1 but is worth 0.25
    dict(locs=[[0, 0], [0.5, 0], [0, 0.5], [1, 1]], prize=[0, 1.0, 0.25, 0.5], real_prize=[0, 0.25, 0.5, 0.75],
         penalty=[0, 0.1, 0.2, 0.3]),
    dict(locs=[[0.5, 0.5], [0.1, 0.9], [0.9, 0.2], [0.3, 0.3], [0.7, 0.8]], prize=[0, 0.3, 0.3, 0.3, 0.3],
         real_prize=[0, 0.5, 0.0, 0.125, 0.375], penalty=[0, 0.5, 0.25, 1.0, 0.125]),
]


@pytest.mark.parametrize("case", range(len(SPCTSP_CASES)))
def test_spctsp__every_episode_matches_the_model(case):
    f = SPCTSP_CASES[case]
    episodes = check_every_episode(SPCTSP, one(SPCTSP, **f), lambda: SPCTSPModel(f["real_prize"], f["penalty"]))
    n = len(f["locs"]) - 1
    assert all(len(actions) <= n + 1 == SPCTSP.bounds(n + 1)["num_steps"][2] for actions, _ in episodes)


def test_spctsp__depot_and_prize_to_collect_follow_the_real_prize():
    f = SPCTSP_CASES[0]
    state = SPCTSP.reset(one(SPCTSP, **f))
    state, _, _ = step(SPCTSP, state, torch.tensor([1]))  # expected 1.0, real 0.25: depot still masked
    obs = SPCTSP.observe(state)
    assert state.mask[0].tolist() == [False, False, True, True]
    assert obs["prize_to_collect"][0].tolist() == [0.75] and obs["prize"][0].tolist() == f["prize"]
    assert "real_prize" not in obs and set(obs) - {"current_node"} == set(SPCTSP.bounds(4))
    state, _, _ = step(SPCTSP, state, torch.tensor([3]))  # real 0.25 + 0.75 = 1: depot allowed
    assert state.mask[0].tolist() == [True, False, True, False]
    assert SPCTSP.observe(state)["prize_to_collect"][0].tolist() == [0.0]
    state, r, _ = step(SPCTSP, state, torch.tensor([0]))  # return plus node 2's penalty
    assert state.done.item() and float(r[0]) == pytest.approx(-(math.sqrt(2) + 0.2), abs=1e-6)
    pctsp = PCTSP.reset(PCTSP.instance_from({k: f[k] for k in ("locs", "prize", "penalty")}))
    pctsp, _, _ = step(PCTSP, pctsp, torch.tensor([1]))
    assert pctsp.mask[0, 0].item()  # the deterministic problem would allow the depot here


def test_spctsp__generated_rollouts_against_float32_prize_sums():
    inst = SPCTSP.generate(32, 20, generator=torch.Generator().manual_seed(11))
    state, g = SPCTSP.reset(inst), torch.Generator().manual_seed(12)
    real, pen = inst.real_prize.numpy(), inst.penalty.double().numpy()
    collected = np.zeros(32, np.float32)
    tours, ret = [], torch.zeros(32, dtype=torch.float64)
    while not state.done.all():
        live = ~state.done.numpy()
        visited = state.visited.numpy()
        depot = (collected >= 1.0) | visited[:, 1:].all(1)
        assert np.array_equal(state.mask.numpy()[live, 0], depot[live])
        a = state.mask.float().multinomial(1, generator=g).squeeze(1)
        state, r, _ = step(SPCTSP, state, a)
        ret += r.double()
        collected = np.where(live, collected + real[np.arange(32), a.numpy()], collected).astype(np.float32)
        assert np.array_equal(state.collected.numpy(), collected)
        tours.append(a.numpy())
    tours = np.stack(tours, 1)
    for b in range(32):
        walk = [int(x) for x in tours[b][: int(state.num_steps[b])]]
        own = route_length(inst.locs[b].double().numpy(), walk) + pen[b][sorted(set(range(1, 21)) - set(walk))].sum()
        assert float(ret[b]) == pytest.approx(-own, abs=1e-4)
    assert float(tour_cost(SPCTSP, inst, torch.as_tensor(tours))[0]) == pytest.approx(-float(ret[0]), abs=1e-4)


def test_spctsp__generator_is_pctsps_then_the_real_prize():
    g = torch.Generator().manual_seed(5)
    s = SPCTSP.generate(200, 20, generator=g)
    g2 = torch.Generator().manual_seed(5)
    p = PCTSP.generate(200, 20, generator=g2)
    assert torch.equal(s.locs, p.locs) and torch.equal(s.penalty, p.penalty) and torch.equal(s.prize, p.prize)
    assert torch.equal(s.real_prize[:, 1:], torch.rand(200, 20, generator=g2) * p.prize[:, 1:] * 2)  # Kool's draw
    assert (s.real_prize[:, 0] == 0).all() and (s.real_prize >= 0).all() and (s.real_prize <= 2 * s.prize).all()
    ratio = (s.real_prize[:, 1:] / (2 * s.prize[:, 1:])).mean()
    assert abs(float(ratio) - 0.5) < 0.02  # uniform in [0, 2 * prize]: the expected prize is the mean
    again = SPCTSP.generate(200, 20, generator=torch.Generator().manual_seed(5))
    assert all(torch.equal(x, y) for x, y in zip(s, again))
    other = SPCTSP.generate(200, 20, generator=torch.Generator().manual_seed(6))
    assert not torch.equal(s.real_prize, other.real_prize)


# ------------------------------------------------------------------------------------ both problems
@pytest.mark.parametrize("problem", [SDVRP, SPCTSP])
def test_variants__a_batch_steps_each_instance_as_alone(problem):
    """Four instances at different progress (one finishing early, one taking a masked action): every row
    of the batched step equals stepping that instance on its own."""
    insts = problem.generate(4, 6, generator=torch.Generator().manual_seed(21))
    batch_state = problem.reset(insts)
    alone = [problem.reset(problem.Instance(*(f[b:b + 1] for f in insts))) for b in range(4)]
    g = torch.Generator().manual_seed(22)
    for t in range(40):
        a = batch_state.mask.float().multinomial(1, generator=g).squeeze(1)
        if t == 3:
            a[2] = int((~batch_state.mask[2]).nonzero()[0])  # instance 2: a masked action
        if t >= 2 and problem is SDVRP:
            a[0] = int(batch_state.mask[0].nonzero()[-1])  # instance 0 follows another policy
        batch_state, r, invalid = step(problem, batch_state, a)
        for b in range(4):
            alone[b], rb, ib = step(problem, alone[b], a[b:b + 1])
            assert float(r[b]) == float(rb[0]) and bool(invalid[b]) == bool(ib[0])
            for key, value in problem.observe(alone[b]).items():
                assert torch.equal(problem.observe(batch_state)[key][b], value[0]), key
            assert torch.equal(batch_state.mask[b], alone[b].mask[0])
            assert bool(batch_state.done[b]) == bool(alone[b].done[0])
    assert batch_state.done.all()
    assert len(set(batch_state.num_steps.tolist())) > 1  # they did finish at different steps


@pytest.mark.parametrize("problem,fields,match", [
    (SDVRP, {"locs": [[0, 0], [1, 1]]}, "lacks field"),
    (SDVRP, {"locs": [[0, 0], [1, 1]], "demand": [0, 1.5]}, "'demand' exceeds the capacity"),
    (SDVRP, {"locs": [[0, 0], [1, 1]], "demand": [0.1, 0.5]}, "'demand' must be 0 at the depot"),
    (SDVRP, {"locs": [[0, 0], [1, 1]], "demand": [0, 0]}, "'demand' must be > 0"),
    (SDVRP, {"locs": [[0, 0], [1, 1]], "demand": [0, 0.5, 0.2]}, "'demand' must have shape"),
    (SDVRP, {"locs": [[0, 0], [1, 1]], "demand": [0, 0.5], "real_prize": [0, 1]}, "unknown field"),
    (SPCTSP, {"locs": [[0, 0], [1, 1]], "prize": [0, 0.5], "penalty": [0, 0.5]}, r"lacks field\(s\) \['real_prize'\]"),
    (SPCTSP, {"locs": [[0, 0], [1, 1]], "prize": [0, 0.5], "penalty": [0, 0.5], "real_prize": [0, -0.5]},
     "'real_prize' must lie in"),
    (SPCTSP, {"locs": [[0, 0], [1, 1]], "prize": [0, 0.5], "penalty": [0, 0.5], "real_prize": [0.2, 0.5]},
     "'real_prize' must be 0 at the depot"),
    (SPCTSP, {"locs": [[0, 0], [1, 1]], "prize": [0, 0.5], "penalty": [0, 0.5], "real_prize": [0, 0.5, 1]},
     "'real_prize' must have shape"),
    (SPCTSP, {"locs": [[0, 0], [1, 1]], "prize": [0, 0.5], "penalty": [0, 0.5], "real_prize": [0, np.nan]},
     "'real_prize' contains NaN"),
    (SPCTSP, {"locs": [[0, 0], [1, 1]], "prize": [0, 0.5], "penalty": [0, -1], "real_prize": [0, 0.5]},
     "'penalty' must lie in"),
])
def test_variants__instance_from_names_the_bad_field(problem, fields, match):
    with pytest.raises(ValueError, match=match):
        problem.instance_from(fields)


def test_variants__instance_from_batched_round_trips_a_generated_batch():
    for problem in (SDVRP, SPCTSP):
        inst = problem.generate(3, 5, generator=torch.Generator().manual_seed(0))
        back = problem.instance_from({k: v.numpy() for k, v in inst._asdict().items()}, batched=True)
        assert type(back) is problem.Instance and all(torch.equal(x, y) for x, y in zip(inst, back))
