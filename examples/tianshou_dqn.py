"""DQN with Tianshou on a routing env, masked by Tianshou's own convention.

Tianshou masks actions when the observation holds ``mask`` beside ``obs`` (its DQN reads ``batch.obs.mask``
and gives masked actions the lowest Q-value, in its greedy and in its epsilon-random choices). The
minimal adapter, :func:`masked_for_tianshou`, only renames: the observation goes under ``obs`` and its
``action_mask`` (int8, 1 = allowed) under ``mask``. Tianshou's replay buffer stores the infos too;
``info["tour"]`` has one shape for every episode (padded with -1), so it can. The Q-network is an MLP over
the flattened observation plus the distances from the current node (the Attention Model in ``agents`` is
the stronger policy).

Rewards are minus edge lengths and sum to minus the episode's cost, so ``gamma = 1``.

Usage::

    python examples/tianshou_dqn.py                             # TSP-10, 100k steps, a few minutes on a CPU
    python examples/tianshou_dqn.py --env-id routing/CVRP-10 --total-steps 300000
"""
from __future__ import annotations

import argparse

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces
from gymnasium.wrappers import TransformObservation
from torch import nn
from tianshou.algorithm import DQN
from tianshou.algorithm.modelfree.dqn import DiscreteQLearningPolicy
from tianshou.algorithm.optim import AdamOptimizerFactory
from tianshou.data import Collector, VectorReplayBuffer
from tianshou.env import DummyVectorEnv
from tianshou.trainer import OffPolicyTrainerParams

import routing_gym  # noqa: F401  (registers the routing/ ids)


def masked_for_tianshou(env: gym.Env) -> gym.Env:
    """``env`` with observations ``{"obs": the observation, "mask": its action_mask}``, Tianshou's masking
    convention."""
    space = env.observation_space
    return TransformObservation(env, lambda o: {"obs": o, "mask": o["action_mask"]},
                                spaces.Dict({"obs": space, "mask": space["action_mask"]}))


class QNet(nn.Module):
    """Q-values (B, N) from a batch of observations (Tianshou hands ``obs.obs``: a batch of the env's
    observation dicts): an MLP over every key flattened (node indices one-hot) and the distance from the
    current node to every node."""

    def __init__(self, space: spaces.Dict, hidden: int = 128):
        super().__init__()
        self.space = space
        n = space["action_mask"].n
        features = spaces.flatdim(space) + n
        self.mlp = nn.Sequential(nn.Linear(features, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                                 nn.Linear(hidden, n))

    def forward(self, obs, state=None, info=None):
        obs = {key: torch.as_tensor(obs[key]) for key in self.space.spaces}
        parts = []
        for key, sub in self.space.spaces.items():
            value = obs[key]
            if isinstance(sub, spaces.Discrete):
                value = nn.functional.one_hot(value, int(sub.n))
            parts.append(value.float().flatten(1))
        here = obs["locs"].gather(1, obs["current_node"][:, None, None].expand(-1, 1, 2))  # (B, 1, 2)
        parts.append((obs["locs"] - here).norm(dim=-1))  # (B, N)
        return self.mlp(torch.cat(parts, dim=1)), state


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--env-id", default="routing/TSP-10")
    p.add_argument("--total-steps", type=int, default=100_000, help="environment steps of training")
    p.add_argument("--num-envs", type=int, default=8)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--eps", type=float, default=0.1, help="epsilon-greedy exploration while training")
    p.add_argument("--test-episodes", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1, help="torch threads on the CPU")
    return p.parse_args(argv)


def main(argv=None) -> dict:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)  # Tianshou's epsilon-greedy draws from numpy's global generator
    make = lambda: masked_for_tianshou(gym.make(args.env_id))  # noqa: E731
    train_envs = DummyVectorEnv([make for _ in range(args.num_envs)])
    test_envs = DummyVectorEnv([make for _ in range(args.num_envs)])
    train_envs.seed(args.seed)
    test_envs.seed(args.seed + 10**6)
    env = make()

    net = QNet(env.observation_space["obs"])
    policy = DiscreteQLearningPolicy(model=net, action_space=env.action_space, eps_training=args.eps)
    algorithm = DQN(policy=policy, optim=AdamOptimizerFactory(lr=args.lr), gamma=1.0, target_update_freq=200)
    buffer = VectorReplayBuffer(50_000, args.num_envs)
    train_collector = Collector(algorithm, train_envs, buffer, exploration_noise=True)
    test_collector = Collector(algorithm, test_envs)
    epoch_steps = min(args.total_steps, 10_000)
    algorithm.run_training(OffPolicyTrainerParams(
        training_collector=train_collector, test_collector=test_collector,
        max_epochs=max(1, args.total_steps // epoch_steps), epoch_num_steps=epoch_steps,
        collection_step_num_env_steps=args.num_envs * 4, update_step_num_gradient_steps_per_sample=0.25,
        batch_size=64, test_step_num_episodes=args.num_envs, show_progress=False))

    stats = test_collector.collect(n_episode=args.test_episodes, reset_before_collect=True)
    costs = -stats.returns  # rewards sum to minus the cost
    stored = train_collector.buffer.info
    print(f"greedy policy over {len(costs)} test episodes: mean cost {costs.mean():.3f}; the replay buffer holds "
          f"{len(train_collector.buffer):,} steps, their infos' tours as one {stored.tour.shape} array")
    return {"episodes": len(costs), "mean_cost": float(costs.mean())}


if __name__ == "__main__":
    main()
