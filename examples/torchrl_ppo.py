"""PPO with TorchRL over the native vector env, the actor a masked categorical.

TorchRL's ``GymWrapper`` wraps the vector env made with ``autoreset_mode="Disabled"``: TorchRL resets
finished sub-envs itself (through ``reset(options={"reset_mask": ...})``), which is the mode it prefers
and the one its ``check_env_specs`` passes with. The env returns numpy arrays, which TorchRL turns into
its tensordicts on ``--device`` (it hands actions back as numpy anyway). The actor is TorchRL's
``MaskedCategorical``, which needs a bool mask: the env's ``action_mask`` is int8 (1 = allowed, as its
``MultiBinary`` space declares), so one module turns it into bools. An MLP over the flattened
observation (plus the distances from the current node) keeps the file short; the Attention Model in
``agents`` is the stronger policy.

Rewards are minus edge lengths and sum to minus the episode's cost, so ``gamma = 1``.

Usage::

    python examples/torchrl_ppo.py                              # TSP-10, 200k steps, about a minute on a CPU
    python examples/torchrl_ppo.py --env-id routing/CVRP-10 --total-steps 500000
"""
from __future__ import annotations

import argparse
import time

import gymnasium as gym
import numpy as np
import torch
from tensordict.nn import TensorDictModule, TensorDictSequential
from torch import nn
from torchrl.collectors import Collector
from torchrl.data import Categorical, LazyTensorStorage, ReplayBuffer, SamplerWithoutReplacement
from torchrl.envs import GymWrapper, RewardSum, TransformedEnv
from torchrl.modules import MLP, MaskedCategorical, ProbabilisticActor, ValueOperator
from torchrl.objectives import ClipPPOLoss
from torchrl.objectives.value import GAE

import routing_gym  # noqa: F401  (registers the routing/ ids)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--env-id", default="routing/TSP-10")
    p.add_argument("--total-steps", type=int, default=200_000, help="environment steps (all sub-envs together)")
    p.add_argument("--num-envs", type=int, default=64)
    p.add_argument("--num-steps", type=int, default=32, help="steps per sub-env per batch")
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--minibatch-size", type=int, default=512)
    p.add_argument("--update-epochs", type=int, default=4)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1, help="torch threads on the CPU")
    return p.parse_args(argv)


def make_env(env_id: str, num_envs: int, device: str, seed: int) -> TransformedEnv:
    """The native vector env as a TorchRL env (batch size ``[num_envs]``), summing each episode's reward."""
    venv = gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="vector_entry_point", autoreset_mode="Disabled")
    env = TransformedEnv(GymWrapper(venv, categorical_action_encoding=True, device=device), RewardSum())
    env.set_seed(seed)
    return env


class Features(nn.Module):
    """One float vector per row: the observation keys flattened (node indices, ``Categorical`` specs,
    one-hot), and the distance from the current node to every node, which lets an MLP learn to prefer near
    nodes quickly. A spec's first dim is the env's batch; the rest are the key's own dims."""

    def __init__(self, specs: dict):
        super().__init__()
        self.keys = list(specs)
        self.categories = [spec.n if isinstance(spec, Categorical) else 0 for spec in specs.values()]
        self.event_dims = [len(spec.shape) - 1 for spec in specs.values()]

    def forward(self, *values: torch.Tensor) -> torch.Tensor:
        parts = []
        for value, n, dims in zip(values, self.categories, self.event_dims):
            if n:
                value, dims = nn.functional.one_hot(value, n), dims + 1
            parts.append(value.float().flatten(-dims) if dims else value.float()[..., None])
        obs = dict(zip(self.keys, values))
        locs, current = obs["locs"], obs["current_node"]  # (..., N, 2), (...)
        here = locs.gather(-2, current[..., None, None].expand(*current.shape, 1, 2))  # (..., 1, 2)
        parts.append((locs - here).norm(dim=-1))  # (..., N)
        return torch.cat(parts, dim=-1)


def main(argv=None) -> dict:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    env = make_env(args.env_id, args.num_envs, args.device, args.seed)
    num_actions = int(env.action_spec.space.n)
    specs = {k: env.observation_spec[k] for k in env.observation_spec.keys() if k != "episode_reward"}
    features = TensorDictModule(Features(specs), in_keys=list(specs), out_keys=["features"])
    num_features = features(env.reset())["features"].shape[-1]
    as_bool = TensorDictModule(lambda mask: mask.bool(), in_keys=["action_mask"], out_keys=["mask"])
    logits = TensorDictModule(MLP(in_features=num_features, out_features=num_actions, num_cells=[128, 128],
                                  activation_class=nn.Tanh), in_keys=["features"], out_keys=["logits"])
    actor = ProbabilisticActor(TensorDictSequential(features, as_bool, logits), in_keys=["logits", "mask"],
                               distribution_class=MaskedCategorical, return_log_prob=True, spec=env.action_spec)
    critic = TensorDictSequential(features, ValueOperator(
        MLP(in_features=num_features, out_features=1, num_cells=[128, 128], activation_class=nn.Tanh),
        in_keys=["features"]))
    actor, critic = actor.to(args.device), critic.to(args.device)

    frames_per_batch = args.num_envs * args.num_steps
    batches = max(1, args.total_steps // frames_per_batch)
    collector = Collector(env, actor, frames_per_batch=frames_per_batch, total_frames=batches * frames_per_batch,
                          device=args.device, auto_register_policy_transforms=False)
    buffer = ReplayBuffer(storage=LazyTensorStorage(frames_per_batch, device=args.device),
                          sampler=SamplerWithoutReplacement(), batch_size=args.minibatch_size)
    advantage = GAE(gamma=1.0, lmbda=0.95, value_network=critic, average_gae=True)
    loss = ClipPPOLoss(actor, critic, clip_epsilon=0.2, entropy_coeff=0.01, critic_coeff=0.5)
    optimizer = torch.optim.Adam(loss.parameters(), lr=args.lr)

    costs: list[float] = []
    start = time.perf_counter()
    for i, data in enumerate(collector, start=1):
        done = data["next", "done"].squeeze(-1)
        costs.extend((-data["next", "episode_reward"].squeeze(-1)[done]).tolist())  # rewards sum to -cost
        for _ in range(args.update_epochs):
            with torch.no_grad():
                advantage(data)
            buffer.extend(data.reshape(-1))
            for _ in range(frames_per_batch // args.minibatch_size):
                out = loss(buffer.sample())
                total = out["loss_objective"] + out["loss_critic"] + out["loss_entropy"]
                optimizer.zero_grad()
                total.backward()
                nn.utils.clip_grad_norm_(loss.parameters(), 0.5)
                optimizer.step()
        if i % 20 == 0 or i == batches:
            recent = costs[-500:]
            print(f"batch {i:4d}  steps {i * frames_per_batch:8,d}  mean cost of the last {len(recent)} episodes "
                  f"{np.mean(recent):.3f}  {time.perf_counter() - start:5.0f} s")
    collector.shutdown()
    return {"episodes": len(costs), "mean_cost": float(np.mean(costs[-500:]))}


if __name__ == "__main__":
    main()
