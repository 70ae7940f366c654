"""The Attention Model policy (agents/policies/attention_model.py) and the importer of Kool et al.'s
weights (agents/policies/kool_weights.py): masks, log-likelihoods, acting in the single env, and the
published results."""
from __future__ import annotations

import json
import math

import gymnasium as gym
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import routing_gym  # noqa: F401  (registers the envs)
from agents.inference.rollout import evaluate, make_env, rollout
from agents.policies.attention_model import AttentionModel, AttentionModelConfig
from agents.policies.kool_weights import load_kool_weights
from routing_gym.problems import get_problem

PROBLEMS = tuple(routing_gym.PROBLEMS)  # every problem in the registry
# folder, problem, env variant, published greedy mean cost at n = 20 (Table 1 of the paper)
KOOL_20 = [("tsp_20", "tsp", {}, 3.85), ("cvrp_20", "cvrp", {}, 6.40),
           ("op_dist_20", "op", {"prize_type": "dist"}, -5.19), ("pctsp_det_20", "pctsp", {}, 3.18),
           ("sdvrp_20", "sdvrp", {}, 6.39), ("pctsp_stoch_20", "spctsp", {}, 3.26)]


def untrained(problem: str, seed: int = 0) -> AttentionModel:
    torch.manual_seed(seed)
    return AttentionModel(AttentionModelConfig(problem=problem, embed_dim=32, n_heads=4, n_layers=2, ff_hidden=64))


def reset_env(problem: str, num_nodes: int, batch: int, seed: int = 0, **variant):
    env = make_env(problem, num_nodes, batch, **variant).unwrapped
    generator = torch.Generator().manual_seed(seed)
    instances = get_problem(problem).generate(batch, num_nodes, generator=generator, **variant)
    obs, _ = env.reset(options={"instances": instances})
    return env, instances, obs


def test_log_probs__tsp_uses_the_placeholder_at_step_0():
    model = untrained("tsp")
    _, _, obs = reset_env("tsp", 10, 4)
    with torch.no_grad():
        cache = model.precompute(obs)
        moved = dict(obs, first_node=torch.full((4,), 3), current_node=torch.full((4,), 7))
        torch.testing.assert_close(model.log_probs(cache, obs)[0], model.log_probs(cache, moved)[0])
        later = dict(moved, num_steps=torch.ones(4, 1))
        assert not torch.allclose(model.log_probs(cache, obs)[0], model.log_probs(cache, later)[0])


@pytest.mark.parametrize("problem", PROBLEMS)
def test_rollout__sampled_log_likelihoods_are_finite_and_differentiable(problem):
    model = untrained(problem)
    env, instances, _ = reset_env(problem, 10, 32)
    out = rollout(model, env, instances, strategy="sample", generator=torch.Generator().manual_seed(2))
    assert torch.isfinite(out.log_likelihood).all() and (out.log_likelihood <= 0).all()
    assert torch.isfinite(out.cost).all()
    out.log_likelihood.mean().backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    assert grads and all(torch.isfinite(g).all() for g in grads)


@pytest.mark.parametrize("problem", PROBLEMS)
def test_rollout__episodes_scored_in_one_pass_match_step_by_step_scoring(problem, monkeypatch):
    """With gradients the model decodes without them and scores the recorded episode in one pass
    (``log_probs_steps``): the same actions, and log-likelihoods and gradients as scoring each step (forced
    first actions, as multi-start training takes them, left out of both)."""
    model = untrained(problem)
    env, instances, obs = reset_env(problem, 10, 16)
    first = torch.arange(16) % obs["action_mask"].shape[1]
    results = []
    for parallel in (True, False):
        if not parallel:
            monkeypatch.setattr(AttentionModel, "parallel_steps", property(lambda self: False))
        model.zero_grad()
        out = rollout(model, env, instances, strategy="sample", generator=torch.Generator().manual_seed(4),
                      first_actions=first)
        out.log_likelihood.sum().backward()
        results.append((out, torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])))
    (one_pass, grad_one), (stepwise, grad_steps) = results
    assert torch.equal(one_pass.actions, stepwise.actions) and torch.equal(one_pass.cost, stepwise.cost)
    torch.testing.assert_close(one_pass.log_likelihood, stepwise.log_likelihood, rtol=1e-5, atol=1e-5)
    assert float((grad_one - grad_steps).norm() / grad_steps.norm()) < 1e-5  # float sums in another order


@pytest.mark.parametrize("problem", PROBLEMS)
def test_rollout__deferred_end_check_changes_nothing_but_trailing_no_ops(problem):
    """The end-of-episodes check that never waits for the device (CUDA's, forced here on the CPU) reads the
    flag one check late: the same costs, log-likelihoods and actions, plus no-op steps at the end."""
    model = untrained(problem).eval()
    env, instances, _ = reset_env(problem, 10, 32)
    outs = [rollout(model, env, instances, strategy="sample", generator=torch.Generator().manual_seed(3),
                    deferred_end=deferred) for deferred in (False, True)]
    now, late = outs
    assert torch.equal(now.cost, late.cost) and torch.equal(now.log_likelihood, late.log_likelihood)
    s = now.actions.shape[1]
    assert late.actions.shape[1] >= s and torch.equal(late.actions[:, :s], now.actions)
    # every episode has ended: its no-op node (the last check of `now` may come at the very step an episode ends)
    assert (late.actions[:, s:] == get_problem(problem).noop(env.state)[:, None]).all()


@pytest.mark.parametrize("problem", PROBLEMS)
@pytest.mark.parametrize("deterministic", [True, False])
def test_predict__takes_allowed_actions_in_the_single_env(problem, deterministic):
    model = untrained(problem).train()
    env = gym.make(f"routing/{problem.upper()}-20")
    obs, _ = env.reset(seed=3)
    terminated = False
    while not terminated:
        action, state = model.predict(obs, deterministic=deterministic)
        assert state is None and np.ndim(action) == 0 and obs["action_mask"][action] == 1
        obs, _, terminated, _, info = env.step(action)
    assert not info["invalid_action"] and model.training


def test_predict__batched_observations_of_the_vector_env():
    model = untrained("cvrp")
    env = gym.make_vec("routing/CVRP-20", num_envs=5, vectorization_mode="vector_entry_point")
    obs, _ = env.reset(seed=4)
    action, _ = model.predict(obs)
    assert action.shape == (5,) and action.dtype == np.int64
    assert obs["action_mask"][np.arange(5), action].all()


def test_config__rejects_unknown_problem_and_bad_heads():
    with pytest.raises(ValueError, match="problem"):
        AttentionModelConfig(problem="vrptw")
    with pytest.raises(ValueError, match="divide"):
        AttentionModelConfig(problem="tsp", embed_dim=100, n_heads=8)


# -- the importer ---------------------------------------------------------------------------------
def kool_first_step(state: dict, obs: dict, features: tuple[str, ...], scalar: str | None, heads: int = 8):
    """Kool et al.'s forward pass up to the first step's log-probabilities, written directly on their
    tensors and layout (``nets/graph_encoder.py``, ``nets/attention_model.py``)."""
    x = torch.cat([obs["locs"], *(obs[f][..., None] for f in features)], dim=-1)
    h = F.linear(x, state["init_embed.weight"], state["init_embed.bias"])
    if scalar is not None:
        h[:, 0] = F.linear(obs["locs"][:, 0], state["init_embed_depot.weight"], state["init_embed_depot.bias"])

    def batch_norm(h, p):
        return (h - state[p + "running_mean"]) / torch.sqrt(state[p + "running_var"] + 1e-5) * state[p + "weight"] \
            + state[p + "bias"]

    for i in range(3):
        p = f"embedder.layers.{i}."
        q, k, v = (torch.einsum("bnd,hdk->hbnk", h, state[p + f"0.module.W_{w}"]) for w in ("query", "key", "val"))
        attention = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]), dim=-1)
        mixed = torch.einsum("hbnk,hkd->bnd", attention @ v, state[p + "0.module.W_out"])
        h = batch_norm(h + mixed, p + "1.normalizer.")
        ff = F.linear(F.relu(F.linear(h, state[p + "2.module.0.weight"], state[p + "2.module.0.bias"])),
                      state[p + "2.module.2.weight"], state[p + "2.module.2.bias"])
        h = batch_norm(h + ff, p + "3.normalizer.")
    b, n, d = h.shape
    context = state["W_placeholder"].expand(b, -1) if scalar is None else torch.cat([h[:, 0], obs[scalar]], dim=-1)
    query = F.linear(h.mean(1), state["project_fixed_context.weight"]) \
        + F.linear(context, state["project_step_context.weight"])
    glimpse_k, glimpse_v, logit_k = F.linear(h, state["project_node_embeddings.weight"]).chunk(3, dim=-1)
    compat = torch.einsum("bhk,bnhk->bhn", query.view(b, heads, -1), glimpse_k.view(b, n, heads, -1)) \
        / math.sqrt(d // heads)
    mask = obs["action_mask"].bool()  # int8 in the env, as its space declares
    compat = compat.masked_fill(~mask[:, None], -math.inf)
    glimpse = torch.einsum("bhn,bnhk->bhk", compat.softmax(-1), glimpse_v.view(b, n, heads, -1)).reshape(b, d)
    logits = F.linear(glimpse, state["project_out.weight"])[:, None] @ logit_k.transpose(1, 2) / math.sqrt(d)
    return (10 * torch.tanh(logits[:, 0])).masked_fill(~mask, -math.inf).log_softmax(-1)


@pytest.mark.parametrize("folder, problem, variant, features, scalar", [
    ("tsp_20", "tsp", {}, (), None), ("cvrp_20", "cvrp", {}, ("demand",), "remaining_capacity"),
    ("op_dist_20", "op", {"prize_type": "dist"}, ("prize",), "remaining_length"),
    ("pctsp_det_20", "pctsp", {}, ("prize", "penalty"), "prize_to_collect")])
def test_kool_weights__first_step_matches_their_formulas(kool_weights, folder, problem, variant, features, scalar):
    path = kool_weights / folder / "epoch-99.pt"
    model = load_kool_weights(path)
    state = torch.load(path, weights_only=True)["model"]
    _, _, obs = reset_env(problem, 20, 64, seed=5, **variant)
    with torch.no_grad():
        ours, _ = model.log_probs(model.precompute(obs), obs)
        theirs = kool_first_step(state, obs, features, scalar)
    torch.testing.assert_close(ours, theirs, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("folder, problem, variant, published", KOOL_20)
def test_kool_weights__greedy_cost_matches_table_1(kool_weights, folder, problem, variant, published):
    model = load_kool_weights(kool_weights / folder)
    assert model.config.problem == problem and not model.training
    instances = get_problem(problem).generate(2000, 20, generator=torch.Generator().manual_seed(1234), **variant)
    with torch.inference_mode():
        cost = evaluate(model, problem, instances, batch_size=1000, **variant).mean().item()
    assert abs(cost - published) <= 0.01 * abs(published), f"{folder}: our greedy mean {cost:.4f} vs {published}"


def test_kool_weights__clear_errors_name_the_file(kool_weights, tmp_path):
    source = kool_weights / "cvrp_20"
    state = torch.load(source / "epoch-99.pt", weights_only=True)["model"]
    (tmp_path / "args.json").write_text(json.dumps({"problem": "vrptw", "model": "attention"}))
    torch.save({"model": state}, tmp_path / "epoch-99.pt")
    with pytest.raises(ValueError, match=r"args\.json.*vrptw"):
        load_kool_weights(tmp_path)
    (tmp_path / "args.json").write_text(json.dumps({"problem": "sdvrp"}))  # CVRP weights lack SDVRP's step projection
    with pytest.raises(ValueError, match=r"epoch-99\.pt.*project_node_step"):
        load_kool_weights(tmp_path)
    (tmp_path / "args.json").write_text(json.dumps({"problem": "cvrp"}))
    del state["project_out.weight"]
    torch.save({"model": state}, tmp_path / "epoch-99.pt")
    with pytest.raises(ValueError, match=r"epoch-99\.pt.*project_out\.weight"):
        load_kool_weights(tmp_path / "epoch-99.pt")


@pytest.mark.parametrize("normalization", ["batch", "instance"])
def test_encode__cpu_chunks_give_the_numbers_of_the_whole_batch(normalization, monkeypatch):
    """The CPU encoder runs chunks of instances where no batch statistics are computed (evaluation, or
    instance normalisation): the same embeddings as the whole batch at once; batch-normalised training
    runs whole (its statistics span the batch)."""
    import agents.policies.attention_model as am
    torch.manual_seed(0)
    model = AttentionModel(AttentionModelConfig(problem="tsp", embed_dim=32, n_heads=4, n_layers=2, ff_hidden=64,
                                                normalization=normalization))
    _, _, obs = reset_env("tsp", 10, 50)
    layers = AttentionModel.encode_layers
    for training in (False, True):
        model.train(training)
        with torch.no_grad():
            monkeypatch.setattr(am, "CPU_ENCODER_ROWS", 10 ** 9)
            whole = model.encode(obs)
            monkeypatch.setattr(am, "CPU_ENCODER_ROWS", 120)  # chunks of 12 instances
            calls = []
            monkeypatch.setattr(AttentionModel, "encode_layers",
                                lambda self, h, dist: calls.append(h.shape[0]) or layers(self, h, dist))
            chunked = model.encode(obs)
            monkeypatch.setattr(AttentionModel, "encode_layers", layers)
        assert torch.equal(whole, chunked)
        assert calls == ([50] if training and normalization == "batch" else [12, 12, 12, 12, 2])


def test_attention__bf16_with_gradients_on_the_cpu_runs_in_fp32_with_the_same_values_and_gradients(monkeypatch):
    """Under bf16 autocast on the CPU the attention's backward would run in bf16 (16x slower there): it runs in
    fp32 and returns bf16; values and gradients agree with an fp32 attention to bf16's precision, masks kept."""
    from agents.policies.attention_model import attention

    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(4, 8, 5, 16, generator=g) for _ in range(3))
    mask = torch.rand(4, 1, 5, 5, generator=g) > 0.3
    mask[..., 0] = True  # every query keeps a key
    want = [t.clone().requires_grad_() for t in (q, k, v)]
    F.scaled_dot_product_attention(*want, attn_mask=mask).square().sum().backward()
    sdpa, seen = F.scaled_dot_product_attention, []
    monkeypatch.setattr(F, "scaled_dot_product_attention", lambda q, *a, **kw: seen.append(q.dtype) or sdpa(q, *a, **kw))
    got = [t.to(torch.bfloat16).requires_grad_() for t in (q, k, v)]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = attention(*got, mask)
    assert out.dtype == torch.bfloat16
    out.float().square().sum().backward()
    for w, h in zip(want, got):
        assert h.grad.dtype == torch.bfloat16
        assert torch.allclose(h.grad.float(), w.grad, atol=0.1, rtol=0.05)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):  # inference stays in bf16 throughout
        assert attention(*(t.to(torch.bfloat16) for t in (q, k, v)), mask).dtype == torch.bfloat16
    assert seen == [torch.float32, torch.bfloat16]


def test_precompute__bf16_on_the_cpu_keeps_the_glimpse_keys_in_fp32_and_decodes_as_fp32_attention_would(monkeypatch):
    """Greedy decoding under bf16 autocast on the CPU: the cache holds the glimpse keys and values in fp32 (cast
    once), every step's glimpse runs in fp32 (a bf16 one-query glimpse is 3x slower there), and the step's
    log-probabilities stay within bf16's precision of an fp32 model's."""
    model = untrained("cvrp").eval()
    _, _, obs = reset_env("cvrp", 10, 16)
    with torch.no_grad():
        want, _ = model.log_probs(model.precompute(obs), obs)
    sdpa, seen = F.scaled_dot_product_attention, []
    monkeypatch.setattr(F, "scaled_dot_product_attention", lambda q, *a, **kw: seen.append(q.dtype) or sdpa(q, *a, **kw))
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        cache = model.precompute(obs)
        seen.clear()  # the encoder's self-attention stays in bf16
        got, _ = model.log_probs(cache, obs)
    assert cache.glimpse_key.dtype == cache.glimpse_val.dtype == torch.float32
    assert cache.glimpse_key.is_contiguous() and cache.glimpse_val.is_contiguous()
    assert cache.logit_key.dtype == torch.bfloat16
    assert seen == [torch.float32]
    allowed = obs["action_mask"].bool()
    assert torch.equal(torch.isinf(got), ~allowed)
    assert torch.allclose(got[allowed].float(), want[allowed], atol=0.05)
