"""Inference-time search: beam width 1 is greedy, best-of-k keeps the cheapest sample, multi-start with
the 8 symmetries never loses to greedy, chunking changes nothing, and every tour replays (tour_cost)."""
import itertools

import pytest
import torch

from agents.inference.rollout import make_env, rollout
from agents.inference.search import augment, augment_locs, beam_search, decode, greedy, multistart, sample_best
from agents.policies.attention_model import AttentionModel, AttentionModelConfig
from agents.policies.pointer_network import PointerNetwork, PointerNetworkConfig
from agents.policies.protocol import select_rows
from agents.references.heuristics import NearestNeighbour
from routing_gym.problems import OP, PROBLEMS, tour_cost

N = 6
B = 4


def instances(problem, batch=B, seed=0):
    return PROBLEMS[problem].generate(batch, N, generator=torch.Generator().manual_seed(seed))


def attention_model(problem):
    torch.manual_seed(0)
    return AttentionModel(AttentionModelConfig(problem=problem)).eval()


def pointer_network(problem):
    torch.manual_seed(0)
    return PointerNetwork(PointerNetworkConfig(problem=problem)).eval()


POLICIES = {"nearest": NearestNeighbour, "attention": attention_model, "pointer": pointer_network}
CASES = list(itertools.product(sorted(PROBLEMS), sorted(POLICIES)))


@pytest.fixture(scope="module", params=CASES, ids=[f"{p}-{q}" for p, q in CASES])
def case(request):
    problem, policy = request.param
    return problem, POLICIES[policy](problem), instances(problem)


def valid(problem, inst, out):
    assert torch.allclose(out.cost, tour_cost(PROBLEMS[problem], inst, out.tours))
    return out.cost


def test_beam__width_one_is_greedy(case):
    problem, policy, inst = case
    g, b = greedy(policy, problem, inst), beam_search(policy, problem, inst, 1)
    assert torch.equal(g.tours, b.tours)
    valid(problem, inst, b)
    wide = beam_search(policy, problem, inst, 3, augment=2, batch_size=12)
    assert torch.isfinite(valid(problem, inst, wide)).all()


def test_sample__best_of_k_is_the_cheapest_of_its_samples(case):
    problem, policy, inst = case
    k = 16
    best = sample_best(policy, problem, inst, k, batch_size=B * k, generator=torch.Generator().manual_seed(3))
    valid(problem, inst, best)
    # the same k samples drawn directly: one rollout of B * k rows, copies of an instance adjacent
    rows = select_rows(inst, torch.arange(B).repeat_interleave(k))
    env = make_env(problem, N, B * k)
    with torch.no_grad():
        out = rollout(policy, env, rows, strategy="sample", generator=torch.Generator().manual_seed(3))
    cheapest = torch.minimum(out.cost.view(B, k).min(dim=1).values.double(), greedy(policy, problem, inst).cost)
    assert torch.allclose(best.cost, cheapest, atol=1e-4)  # the samples' best, or the greedy tour if cheaper
    single = sample_best(policy, problem, inst, 1, generator=torch.Generator().manual_seed(3))
    assert best.cost.mean() <= single.cost.mean() + 1e-6


def test_sample_and_beam__never_worse_than_greedy(case):
    problem, policy, inst = case
    for augment in (1, 2):
        g = greedy(policy, problem, inst, augment=augment).cost
        one = sample_best(policy, problem, inst, 1, augment=augment, generator=torch.Generator().manual_seed(1))
        assert (valid(problem, inst, one) <= g + 1e-6).all()
        beam = beam_search(policy, problem, inst, 2, augment=augment)
        assert (valid(problem, inst, beam) <= g + 1e-6).all()


def test_sample__temperature_near_zero_is_greedy_and_bad_temperatures_are_refused():
    policy, inst = attention_model("cvrp"), instances("cvrp", batch=8)
    env = make_env("cvrp", N, 8)
    with torch.no_grad():
        cold = rollout(policy, env, inst, strategy="sample", temperature=1e-4, generator=torch.Generator().manual_seed(0))
        g = rollout(policy, env, inst, strategy="greedy")
        hot = rollout(policy, env, inst, strategy="sample", temperature=100.0, generator=torch.Generator().manual_seed(0))
    assert torch.equal(cold.actions, g.actions)
    assert not torch.equal(hot.actions, g.actions)
    for bad in (0.0, -1.0, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="temperature"):
            rollout(policy, env, inst, strategy="sample", temperature=bad)


def test_multistart__with_augmentation_never_worse_than_greedy(case):
    problem, policy, inst = case
    g = greedy(policy, problem, inst)
    ms = multistart(policy, problem, inst, augment=8)
    assert (valid(problem, inst, ms) <= g.cost + 1e-5).all()
    plain = multistart(policy, problem, inst, augment=1)
    assert (ms.cost <= plain.cost + 1e-5).all()


def test_multistart__chunking_does_not_change_the_result():
    policy, inst = NearestNeighbour("cvrp"), instances("cvrp", seed=4)
    big = multistart(policy, "cvrp", inst, augment=8, batch_size=10_000)
    small = multistart(policy, "cvrp", inst, augment=8, batch_size=50)
    assert torch.equal(big.cost, small.cost)


def test_multistart__op_with_unreachable_starts_stays_feasible():
    inst = OP.instance_from({"locs": [[[0.5, 0.5], [0.5, 0.6], [0.0, 0.0], [1.0, 1.0]]],
                             "prize": [[0, 0.2, 1.0, 1.0]], "max_length": [0.5]}, batched=True)
    out = multistart(NearestNeighbour(OP), OP, inst)
    assert out.cost.item() == pytest.approx(-0.2)
    far = OP.instance_from({"locs": [[[0.0, 0.0], [1.0, 1.0], [0.9, 1.0]]], "prize": [[0, 1.0, 1.0]],
                            "max_length": [0.5]}, batched=True)
    assert multistart(NearestNeighbour(OP), OP, far).cost.item() == 0.0  # no start fits: greedy's empty tour


def test_augment__eight_distinct_transforms_keep_every_distance():
    locs = torch.rand(1, 10, 2, generator=torch.Generator().manual_seed(0))
    copies = augment_locs(locs.expand(8, -1, -1), torch.arange(8))
    assert len({tuple(c.flatten().tolist()) for c in copies}) == 8
    assert ((copies >= 0) & (copies <= 1)).all()
    assert torch.allclose(torch.cdist(copies, copies), torch.cdist(locs, locs).expand(8, -1, -1), atol=1e-6)
    inst = instances("pctsp", batch=2)
    aug = augment(inst, 8)
    assert aug.locs.shape == (16, N + 1, 2) and torch.equal(aug.penalty[:8], inst.penalty[:1].expand(8, -1))


def test_decode__strategies_and_errors():
    inst = instances("tsp")
    policy = NearestNeighbour("tsp")
    for strategy in ("greedy", "sample", "beam", "multistart"):
        out = decode(policy, "tsp", inst, strategy, num_samples=4, beam_width=3, augment=2)
        valid("tsp", inst, out)
    with pytest.raises(ValueError, match="strategy"):
        decode(policy, "tsp", inst, "mcts")
    with pytest.raises(ValueError, match="augment"):
        greedy(policy, "tsp", inst, augment=9)


@pytest.mark.parametrize("problem", ["tsp", "cvrp"])
@pytest.mark.parametrize("policy", ["attention", "pointer"])
def test_beam__scores_are_the_policys_log_likelihood_of_the_beam(problem, policy):
    """Each beam's summed log-probability is what teacher forcing its actions gives: the recurrent Pointer
    Network's decoder state follows its beam when beams are re-ranked."""
    from agents.inference.search import beam_rows
    from agents.training.supervised import teacher_forcing_nll

    net, core = POLICIES[policy](problem), PROBLEMS[problem]
    with torch.no_grad():  # an untrained network's logits barely depend on its decoder state: sharpen them
        for p in net.parameters():
            p.mul_(5)
    inst = core.generate(8, 8, generator=torch.Generator().manual_seed(1))
    max_steps = int(core.bounds(inst.locs.shape[1])["num_steps"][2])
    with torch.no_grad():
        cost, actions, score = beam_rows(net, core, inst, 5, max_steps)
        nll = teacher_forcing_nll(net, problem, inst, actions)
    assert torch.allclose(score, -nll, atol=1e-4), (score, -nll)
    assert torch.allclose(cost, tour_cost(core, inst, actions).to(cost.dtype), atol=1e-5)
