"""Evaluate a MaskablePPO model on TSP with action masks, three ways, against nearest neighbour and the
shipped attention model.

1. The batched adapter: :func:`routing_gym.sb3.evaluate_costs` runs one greedy episode on each of
   the seeded evaluation instances at once (``set_options({"instances": ...})``), masks from
   ``env_method("action_masks")``.
2. Best of k samples: the same with ``deterministic=False``, k times, keeping each instance's best tour.
3. sb3-contrib's ``evaluate_policy(..., use_masking=True)`` on the single env ``gym.make(...)``
   (wrapped in SB3's ``Monitor``), and one episode acted out step by step with ``action_masks()``.

Usage::

    python examples/sb3_maskable_ppo.py --policy attention --save tsp20_ppo.zip
    python examples/sb3_evaluate.py --model tsp20_ppo.zip

Without ``--model`` it first trains a small attention policy for ``--timesteps`` steps (about a minute).
"""
from __future__ import annotations

import argparse

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode
from sb3_contrib import MaskablePPO
from sb3_contrib.common.maskable.evaluation import evaluate_policy
from stable_baselines3.common.monitor import Monitor

from agents.policies.sb3_extractor import AttentionPolicy
from baselines import print_comparison, reference_costs, test_instances
from routing_gym.sb3 import SB3VecEnv, evaluate_costs, make_sb3_vec_env


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", metavar="PATH", help="a saved MaskablePPO model (.zip); trains one when absent")
    p.add_argument("--num-nodes", type=int, default=20, help="TSP size (must match the model's)")
    p.add_argument("--timesteps", type=int, default=30_000, help="training steps when no --model is given")
    p.add_argument("--eval-instances", type=int, default=512)
    p.add_argument("--samples", type=int, default=8, help="k for best-of-k sampling")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    return p.parse_args(argv)


def quick_model(args) -> MaskablePPO:
    venv = make_sb3_vec_env("routing/TSP-v0", 128, seed=args.seed, num_nodes=args.num_nodes)
    model = MaskablePPO(AttentionPolicy, venv, gamma=1.0, n_steps=args.num_nodes, batch_size=256, n_epochs=4,
                        learning_rate=1e-3, seed=args.seed, policy_kwargs=dict(features_extractor_kwargs=dict(
                            embed_dim=64, n_heads=4, n_layers=1, ff_hidden=128)))
    print(f"training an attention policy for {args.timesteps:,} steps (pass --model to evaluate a saved one)")
    return model.learn(args.timesteps)


def main(argv=None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    model = MaskablePPO.load(args.model) if args.model else quick_model(args)
    instances = test_instances(args.num_nodes, args.eval_instances, seed=1234)
    results = reference_costs(instances)

    # 1. greedy, all instances in one batch
    venv = SB3VecEnv(gym.make_vec("routing/TSP-v0", num_envs=args.eval_instances, num_nodes=args.num_nodes,
                                  vectorization_mode="vector_entry_point", autoreset_mode=AutoresetMode.SAME_STEP))
    venv.set_options({"instances": instances})
    results["MaskablePPO, greedy"] = float(evaluate_costs(model, venv).mean())

    # 2. best of k sampled tours per instance
    best = np.full(args.eval_instances, np.inf)
    for _ in range(args.samples):
        venv.set_options({"instances": instances})
        best = np.minimum(best, evaluate_costs(model, venv, deterministic=False))
    results[f"MaskablePPO, best of {args.samples} samples"] = float(best.mean())
    print_comparison("Evaluating an SB3 model with masks", results, instances)

    # 3. the single env, as any SB3 user would (fresh random instances, not the set above)
    env = Monitor(gym.make("routing/TSP-v0", num_nodes=args.num_nodes))
    env.reset(seed=args.seed)
    mean_reward, std_reward = evaluate_policy(model, env, n_eval_episodes=20, use_masking=True)
    print(f"\nsb3-contrib evaluate_policy on the single env, 20 episodes: mean cost {-mean_reward:.3f} "
          f"(std {std_reward:.3f})")
    obs, _ = env.reset(seed=args.seed)
    terminated = False
    while not terminated:
        action, _ = model.predict(obs, action_masks=env.unwrapped.action_masks(), deterministic=True)
        obs, reward, terminated, truncated, info = env.step(action)
    print(f"one greedy episode step by step: tour {info['tour'].tolist()}, cost {info['cost']:.3f}")


if __name__ == "__main__":
    main()
