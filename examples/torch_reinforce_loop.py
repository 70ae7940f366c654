"""A plain PyTorch training loop over ``gym.make_vec`` in torch mode: REINFORCE on TSP-20, no RL library.

The vector env hands torch tensors on its device straight to the policy (``array_type="torch"``), so
an episode of B instances is N batched steps with no numpy round trip. With
``autoreset_mode=DISABLED`` every sub-env stops when its tour is complete (its mask then allows only
the no-op node, whose log-probability is 0), so one ``reset`` + N ``step`` calls is exactly one batch
of episodes. The policy is the Attention Model (:mod:`agents.policies.attention_model`), smaller than
the paper's so that the default run takes a few minutes on a CPU; the baseline is the batch's mean cost.

Usage::

    python examples/torch_reinforce_loop.py                       # 300 batches of 256 instances, about 2 minutes
    python examples/torch_reinforce_loop.py --iterations 2000 --embed-dim 128 --layers 3 --device cuda
"""
from __future__ import annotations

import argparse
import time

import gymnasium as gym
import torch
from gymnasium.vector import AutoresetMode

import routing_gym  # noqa: F401  (registers the routing/ ids)
from agents.inference.rollout import evaluate
from agents.policies.attention_model import AttentionModel, AttentionModelConfig
from baselines import print_comparison, reference_costs, test_instances


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--num-nodes", type=int, default=20)
    p.add_argument("--iterations", type=int, default=300, help="gradient steps, one batch of episodes each")
    p.add_argument("--batch-size", type=int, default=256, help="B, sub-envs (episodes) per batch")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--embed-dim", type=int, default=64)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--eval-instances", type=int, default=512)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1, help="torch threads on the CPU")
    return p.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    env = gym.make_vec("routing/TSP-v0", num_envs=args.batch_size, vectorization_mode="vector_entry_point",
                       num_nodes=args.num_nodes, device=args.device, array_type="torch",
                       autoreset_mode=AutoresetMode.DISABLED)
    policy = AttentionModel(AttentionModelConfig(problem="tsp", embed_dim=args.embed_dim, n_heads=4,
                                                 n_layers=args.layers, ff_hidden=2 * args.embed_dim)).to(args.device)
    optimizer = torch.optim.Adam(policy.parameters(), lr=args.lr)

    start = time.perf_counter()
    obs, _ = env.reset(seed=args.seed)  # seeds the env's batched generator; later resets continue it
    for iteration in range(1, args.iterations + 1):
        if iteration > 1:
            obs, _ = env.reset()  # B fresh random instances
        cache = policy.precompute(obs)  # the encoder runs once per instance
        log_likelihood = torch.zeros(args.batch_size, device=args.device)  # (B,)
        cost = torch.zeros(args.batch_size, device=args.device)  # (B,)
        terminated = torch.zeros(args.batch_size, dtype=torch.bool, device=args.device)
        while not bool(terminated.all()):
            log_p, cache = policy.log_probs(cache, obs)  # (B, N), -inf at masked nodes; the next cache
            action = torch.multinomial(log_p.exp(), 1).squeeze(1)  # (B,)
            log_likelihood = log_likelihood + log_p.gather(1, action[:, None]).squeeze(1)
            obs, reward, terminated, truncated, info = env.step(action)
            cost = cost - reward  # rewards sum to minus the tour length
        advantage = cost - cost.mean()  # the batch mean as baseline
        loss = (advantage.detach() * log_likelihood).mean()
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
        optimizer.step()
        if iteration % 25 == 0 or iteration == 1:
            print(f"iteration {iteration:5d}  mean sampled cost {cost.mean():.3f}  "
                  f"{time.perf_counter() - start:6.0f} s")
    seconds = time.perf_counter() - start

    instances = test_instances(args.num_nodes, args.eval_instances, seed=1234)
    results = reference_costs(instances)
    policy.eval()
    greedy = float(evaluate(policy, "tsp", instances, device=args.device).mean())
    results[f"REINFORCE, torch loop ({args.iterations * args.batch_size:,} episodes, {seconds:.0f} s)"] = greedy
    print_comparison(f"Plain PyTorch REINFORCE on TSP-{args.num_nodes}", results, instances)


if __name__ == "__main__":
    main()
