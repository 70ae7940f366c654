"""ATSP: an independent float64 judge of every feasible episode of tiny instances, a hand-checkable optimum,
MatNet's generator (as RL4CO's), validation, the drawing layout, the Attention Model reading the matrix,
TSPLIB ``.atsp`` files and LKH's tours."""
import itertools
from pathlib import Path

import numpy as np
import pytest
import torch

from routing_gym.problems import ATSP, step, tour_cost
from routing_gym.problems.base import invalid_penalty

DATA = Path(__file__).resolve().parent / "data"


def judge_cost(matrix: np.ndarray, tour: list[int]) -> float:
    """The closed tour's length by the matrix, row = from, in float64 (not with the unit)."""
    m = np.asarray(matrix, np.float64)
    return float(sum(m[tour[i], tour[(i + 1) % len(tour)]] for i in range(len(tour))))


def own_cost(locs, feats, tour) -> float:
    """The judge ``tests/test_problems.py``'s rollout test reads (``locs`` is None: ATSP has no coordinates)."""
    return judge_cost(feats["cost_matrix"], tour)


def judge_episodes(n: int) -> set[tuple[int, ...]]:
    """Every feasible action sequence by the rules: each node once, any start."""
    return set(itertools.permutations(range(n)))


def unit_episodes(instance) -> dict[tuple[int, ...], float]:
    """Every complete action sequence the unit's masks allow (depth-first), with its summed reward."""
    out = {}

    def dfs(state, actions, ret):
        if state.done.item():
            out[tuple(actions)] = ret
            return
        for a in state.mask[0].nonzero().flatten().tolist():
            nxt, r, invalid = step(ATSP, state, torch.tensor([a]))
            assert not invalid.item()
            dfs(nxt, actions + [a], ret + float(r[0]))

    dfs(ATSP.reset(instance), [], 0.0)
    return out


@pytest.mark.parametrize("n", [2, 3, 4, 5])
@pytest.mark.parametrize("seed", [0, 1])
def test_atsp__masks_allow_exactly_the_judges_episodes_and_costs_agree(n, seed):
    instance = ATSP.generate(1, n, generator=torch.Generator().manual_seed(seed))
    matrix = instance.cost_matrix[0].double().numpy()
    episodes = unit_episodes(instance)
    assert set(episodes) == judge_episodes(n)
    tours = torch.tensor(sorted(episodes))
    costs = tour_cost(ATSP, ATSP.Instance(instance.cost_matrix.expand(len(tours), n, n)), tours)
    for tour, cost in zip(tours.tolist(), costs.tolist()):
        ref = judge_cost(matrix, tour)
        assert episodes[tuple(tour)] == pytest.approx(-ref, abs=1e-5)
        assert cost == pytest.approx(ref, abs=1e-5)


def test_atsp__hand_checkable_optimum_is_the_cheap_direction():
    m = np.full((4, 4), 1.0)
    np.fill_diagonal(m, 0.0)
    for i in range(4):
        m[i, (i + 1) % 4] = 0.1  # 0 -> 1 -> 2 -> 3 -> 0 costs 0.4; the reverse 4.0
    instance = ATSP.instance_from({"cost_matrix": m})
    episodes = unit_episodes(instance)
    best = max(episodes, key=episodes.get)
    assert episodes[best] == pytest.approx(-0.4, abs=1e-6) and best in {(0, 1, 2, 3), (1, 2, 3, 0), (2, 3, 0, 1), (3, 0, 1, 2)}
    assert float(tour_cost(ATSP, instance, torch.tensor([[3, 2, 1, 0]]))[0]) == pytest.approx(4.0, abs=1e-6)
    # rewards step by step: 0 for the start, then the edge from the previous node, the last adds the closing edge
    state, rewards = ATSP.reset(instance), []
    for a in (1, 2, 3, 0):
        state, r, _ = step(ATSP, state, torch.tensor([a]))
        rewards.append(float(r[0]))
    assert rewards == pytest.approx([0.0, -0.1, -0.1, -0.2])


def test_atsp__generator_is_rl4cos_triangle_closed_uniform_matrix():
    g = torch.Generator().manual_seed(0)
    inst = ATSP.generate(64, 12, generator=g)
    d = inst.cost_matrix.double()
    assert d.shape == (64, 12, 12) and (torch.diagonal(d, dim1=1, dim2=2) == 0).all()
    assert 0 <= d.min() and d.max() <= 1
    assert (d[:, :, None, :] <= d[:, :, :, None] + d[:, None, :, :] + 1e-6).all()  # d[i,j] <= d[i,k] + d[k,j]
    assert not torch.allclose(d, d.transpose(1, 2))  # asymmetric
    # RL4CO's ATSPGenerator (rl4co/envs/routing/atsp/generator.py) on the same draw: min-plus products until
    # nothing changes
    raw = torch.rand(64, 12, 12, generator=torch.Generator().manual_seed(0)) * (1 - torch.eye(12))
    rl4co = raw.clone()
    while True:
        old = rl4co.clone()
        rl4co, _ = (rl4co[..., :, None, :] + rl4co[..., None, :, :].transpose(-2, -1)).min(dim=-1)
        if (rl4co == old).all():
            break
    torch.testing.assert_close(inst.cost_matrix, rl4co, atol=1e-6, rtol=0)
    a = ATSP.generate(4, 6, generator=torch.Generator().manual_seed(5))
    b = ATSP.generate(4, 6, generator=torch.Generator().manual_seed(5))
    assert torch.equal(a.cost_matrix, b.cost_matrix)


@pytest.mark.parametrize("data,match", [
    ({"cost_matrix": [[0, 1], [1, 0], [1, 1]]}, "'cost_matrix' must have shape"),
    ({"cost_matrix": [[0.0]]}, "at least 2 nodes"),
    ({"cost_matrix": [[0, 1.5], [0.2, 0]]}, "'cost_matrix' must lie in"),
    ({"cost_matrix": [[0, np.nan], [0.2, 0]]}, "'cost_matrix' contains NaN"),
    ({"cost_matrix": [[0.1, 0.5], [0.2, 0]]}, "'cost_matrix' must have a zero diagonal"),
    ({"cost_matrix": [[0, 1], [1, 0]], "locs": [[0, 0], [1, 1]]}, "unknown field"),
    ({"locs": [[0, 0], [1, 1]]}, "lacks field"),
])
def test_atsp__instance_from_names_the_bad_field(data, match):
    with pytest.raises(ValueError, match=match):
        ATSP.instance_from(data)


def test_atsp__penalty_bound_is_fixed_per_instance_and_above_every_step():
    inst = ATSP.generate(32, 7, generator=torch.Generator().manual_seed(2))
    state = ATSP.reset(inst)
    bound = ATSP.step_cost_bound(state)
    assert torch.equal(bound, 1 + 2 * inst.cost_matrix.amax(dim=(1, 2)))
    g = torch.Generator().manual_seed(3)
    while not state.done.all():
        a = torch.multinomial(state.mask.float(), 1, generator=g).squeeze(1)
        state, r, _ = step(ATSP, state, a)
        assert torch.equal(ATSP.step_cost_bound(state), bound) and (-r < bound).all()
    fresh = ATSP.reset(inst)
    assert torch.allclose(invalid_penalty(ATSP, fresh), 7 * bound)


def test_atsp__layout_is_deterministic_in_the_unit_square_and_exact_for_planar_distances():
    inst = ATSP.generate(3, 9, generator=torch.Generator().manual_seed(0))
    xy = ATSP.layout(inst)
    assert xy.shape == (3, 9, 2) and 0 <= xy.min() and xy.max() <= 1 and torch.equal(xy, ATSP.layout(inst))
    pts = torch.rand(1, 9, 2, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    dist = torch.cdist(pts, pts)
    placed = ATSP.layout(ATSP.Instance(cost_matrix=(dist / dist.max()).float())).double()
    again = torch.cdist(placed, placed)
    ratio = again[dist > 0] / dist[dist > 0]  # classical MDS recovers planar points up to scale and isometry
    assert float(ratio.max() - ratio.min()) < 1e-4 * float(ratio.mean())


def test_atsp__attention_model_reads_the_matrix_and_relabelling_permutes_its_outputs():
    from agents.policies.attention_model import AttentionModel, AttentionModelConfig

    torch.manual_seed(0)
    model = AttentionModel(AttentionModelConfig(problem="atsp", embed_dim=32, n_heads=4, n_layers=2)).eval()
    assert hasattr(model.layers[0], "distance_bias")  # the matrix is the attention bias
    inst = ATSP.generate(2, 7, generator=torch.Generator().manual_seed(0))

    def logp(instance, current=3):
        state = ATSP.reset(instance)
        state, _, _ = step(ATSP, state, torch.full((2,), current))
        obs = {**ATSP.observe(state), "action_mask": state.mask.bool()}
        assert "locs" not in obs
        with torch.no_grad():
            return model.log_probs(model.precompute(obs), obs)[0]

    base = logp(inst)
    assert torch.isfinite(base[:, [0, 1, 2, 4, 5, 6]]).all() and torch.isinf(base[:, 3]).all()
    perm = torch.tensor([3, 0, 6, 1, 5, 2, 4])  # new node j is old node perm[j]; old 3 becomes new 0
    moved = logp(ATSP.Instance(inst.cost_matrix[:, perm][:, :, perm]), current=0)
    torch.testing.assert_close(moved, base[:, perm], atol=1e-5, rtol=1e-5)
    transposed = logp(ATSP.Instance(inst.cost_matrix.transpose(1, 2).contiguous()))
    assert not torch.allclose(transposed, base)  # the direction of the costs matters to it


def test_atsp__tsplib_full_matrix_file_loads_and_costs_in_its_own_units():
    pytest.importorskip("vrplib")
    from routing_gym import tsplib

    real = tsplib.load(DATA / "tiny5.atsp")
    assert real.problem == "atsp" and real.reference == 5 and real.reference_source == "comment"
    assert real.matrix[0, 1] == 1 and real.matrix[1, 0] == 8 and (np.diag(real.matrix) == 0).all()
    assert real.scale == 8  # the largest entry off the diagonal (9999 there is TSPLIB's "no edge")
    torch.testing.assert_close(real.instance.cost_matrix[0].double(), torch.as_tensor(real.matrix) / 8, atol=1e-7, rtol=0)
    assert tsplib.cost(real, [0, 1, 2, 3, 4]) == 5 and tsplib.cost(real, [2, 3, 4, 0, 1]) == 5
    assert tsplib.cost(real, [0, 4, 3, 2, 1]) == 7 + 8 + 8 + 8 + 8  # the reverse direction
    assert tsplib.gap(real, tsplib.cost(real, [0, 4, 3, 2, 1])) == pytest.approx(100 * (39 - 5) / 5)
    with pytest.raises(ValueError, match="infeasible"):
        tsplib.cost(real, [0, 1, 1, 3, 4])


def test_atsp__lkh_tours_cost_by_our_tour_cost_what_the_matrix_says_and_are_optimal_on_tiny_instances():
    pytest.importorskip("elkai")
    from agents.references.solvers import solve

    inst = ATSP.generate(3, 7, generator=torch.Generator().manual_seed(4))
    solved = solve("atsp", inst, "lkh", 0.2, progress=False)
    matrices = inst.cost_matrix.double().numpy()
    for matrix, tour, cost in zip(matrices, solved.tours.tolist(), solved.cost.tolist()):
        assert cost == pytest.approx(judge_cost(matrix, tour), abs=1e-6)
        optimum = min(judge_cost(matrix, [0, *p]) for p in itertools.permutations(range(1, 7)))
        assert cost == pytest.approx(optimum, abs=1e-6)
    torch.testing.assert_close(tour_cost(ATSP, inst, solved.tours), solved.cost)
    two = ATSP.instance_from({"cost_matrix": [[0, 0.3], [0.5, 0]]})
    assert float(solve("atsp", two, "lkh", 0.1, progress=False).cost[0]) == pytest.approx(0.8)
