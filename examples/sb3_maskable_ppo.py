"""MaskablePPO (sb3-contrib) on TSP-20 through the batched SB3 adapter, with a flat MLP or the
attention encoder, compared with nearest neighbour and the shipped attention model.

- ``--policy mlp``: SB3's ``MultiInputPolicy`` (every observation entry flattened and concatenated,
  an MLP on top);
- ``--policy attention``: :class:`agents.policies.sb3_extractor.AttentionPolicy`, the Attention Model's
  encoder as features extractor and a pointer action head;
- ``--policy both`` (default): one after the other, same budget, same evaluation instances.

``gamma=1.0``: the rewards are minus the edge lengths and sum to minus the tour length, so the
undiscounted return is exactly what we minimise. ``n_steps`` equals the episode length, so that every
rollout holds whole episodes (all sub-envs start together and a TSP episode always takes N steps).

Usage::

    python examples/sb3_maskable_ppo.py                                 # both, 60k steps each, a few minutes
    python examples/sb3_maskable_ppo.py --policy attention --timesteps 1000000 --save tsp20_ppo.zip
"""
from __future__ import annotations

import argparse
import time

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode
from sb3_contrib import MaskablePPO

from agents.policies.sb3_extractor import AttentionPolicy
from baselines import print_comparison, reference_costs, test_instances
from routing_gym.sb3 import SB3VecEnv, evaluate_costs, make_sb3_vec_env


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--policy", choices=("mlp", "attention", "both"), default="both")
    p.add_argument("--num-nodes", type=int, default=20)
    p.add_argument("--timesteps", type=int, default=60_000, help="environment steps per policy (default 60k)")
    p.add_argument("--num-envs", type=int, default=128, help="sub-envs stepped together by the adapter")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--embed-dim", type=int, default=64, help="attention policy: embedding width D")
    p.add_argument("--layers", type=int, default=1, help="attention policy: encoder layers")
    p.add_argument("--eval-instances", type=int, default=512)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1, help="torch threads (small networks: 1 is fastest)")
    p.add_argument("--save", metavar="PATH", help="save the (last) trained model, e.g. tsp20_ppo.zip")
    return p.parse_args(argv)


def make_model(kind: str, venv, args) -> MaskablePPO:
    common = dict(gamma=1.0, n_steps=args.num_nodes, batch_size=256, n_epochs=4, learning_rate=args.lr,
                  seed=args.seed, verbose=0)
    if kind == "mlp":
        return MaskablePPO("MultiInputPolicy", venv, policy_kwargs=dict(net_arch=[256, 256]), **common)
    encoder = dict(embed_dim=args.embed_dim, n_heads=4, n_layers=args.layers, ff_hidden=2 * args.embed_dim)
    return MaskablePPO(AttentionPolicy, venv, policy_kwargs=dict(features_extractor_kwargs=encoder), **common)


def main(argv=None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    instances = test_instances(args.num_nodes, args.eval_instances, seed=1234)
    evaluation = SB3VecEnv(gym.make_vec("routing/TSP-v0", num_envs=args.eval_instances, num_nodes=args.num_nodes,
                                        vectorization_mode="vector_entry_point",
                                        autoreset_mode=AutoresetMode.SAME_STEP))
    results = reference_costs(instances)
    kinds = ("mlp", "attention") if args.policy == "both" else (args.policy,)
    for kind in kinds:
        venv = make_sb3_vec_env("routing/TSP-v0", args.num_envs, seed=args.seed, num_nodes=args.num_nodes)
        model = make_model(kind, venv, args)
        start = time.perf_counter()
        model.learn(args.timesteps)
        seconds = time.perf_counter() - start
        evaluation.set_options({"instances": instances})
        costs = evaluate_costs(model, evaluation)
        results[f"MaskablePPO {kind} ({args.timesteps:,} steps, {seconds:.0f} s)"] = float(np.mean(costs))
        print(f"{kind}: trained {args.timesteps:,} steps in {seconds:.0f} s, greedy mean cost {np.mean(costs):.3f}")
        if args.save:
            model.save(args.save)
            print(f"saved {args.save}")
    print_comparison(f"MaskablePPO on TSP-{args.num_nodes}", results, instances)


if __name__ == "__main__":
    main()
