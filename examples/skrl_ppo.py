"""PPO with skrl over the native vector env (or the single env), the policy a categorical that applies the
action mask.

skrl's spaces exclude ``MultiBinary``, so ``wrap_env`` refuses the env's ``action_mask`` ("Unsupported
space"). ``routing_gym.wrappers.MaskAsBox`` (single env) and ``VectorMaskAsBox`` (vector env) declare it
as ``Box(0, 1, (N,), int8)``; the values are the same (1 = allowed). skrl takes the observation a vector
env's step returns as the next episode's first, so the vector env is made with ``SAME_STEP`` autoreset.

skrl hands a model the observation flattened into one float tensor (B, F): its keys in sorted order
(``action_mask`` first), a node index (``Discrete``) as one column holding its value, not one-hot, so
its width is ``compute_space_size(space, occupied_size=True)``, not the model's ``num_observations``.
``unflatten_tensorized_space(self.observation_space, x)`` gives the dict back, and the policy masks its
logits with its ``action_mask`` (so no action is ever refused). An MLP over the flat observation (plus
the distances from the current node) keeps the file short.

Rewards are minus edge lengths and sum to minus the episode's cost, so ``gamma = 1``.

Usage::

    python examples/skrl_ppo.py                                 # TSP-10, 200k steps over 16 sub-envs
    python examples/skrl_ppo.py --env-id routing/CVRP-10 --num-envs 1 --total-steps 50000   # the single env
"""
from __future__ import annotations

import argparse
import tempfile

import gymnasium as gym
import numpy as np
import torch
from skrl.agents.torch.ppo import PPO, PPO_CFG
from skrl.envs.wrappers.torch import wrap_env
from skrl.memories.torch import RandomMemory
from skrl.models.torch import CategoricalMixin, DeterministicMixin, Model
from skrl.trainers.torch import SequentialTrainer
from skrl.utils.spaces.torch import compute_space_size, unflatten_tensorized_space
from torch import nn

import routing_gym  # noqa: F401  (registers the routing/ ids)
from routing_gym.wrappers import MaskAsBox, VectorMaskAsBox


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--env-id", default="routing/TSP-10")
    p.add_argument("--num-nodes", type=int, default=None, help="for a -v0 id")
    p.add_argument("--num-envs", type=int, default=16, help="1: the single env; more: the native vector env")
    p.add_argument("--total-steps", type=int, default=200_000, help="environment steps (all sub-envs together)")
    p.add_argument("--rollouts", type=int, default=32, help="steps per sub-env per update")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def features(x: torch.Tensor, obs: dict[str, torch.Tensor]) -> torch.Tensor:
    """(B, F + N): the flat observation and the distance from the current node to every node, which lets
    an MLP learn to prefer near nodes quickly."""
    here = obs["locs"].gather(1, obs["current_node"].long()[:, None].expand(-1, 1, 2))  # (B, 1, 2)
    return torch.cat([x, (obs["locs"] - here).norm(dim=-1)], dim=1)


class Policy(CategoricalMixin, Model):
    """Logits over the nodes from an MLP on the flat observation, masked by its ``action_mask``."""

    def __init__(self, observation_space, action_space, device, hidden: int = 64):
        Model.__init__(self, observation_space=observation_space, action_space=action_space, device=device)
        CategoricalMixin.__init__(self, unnormalized_log_prob=True)
        # the flat width is not num_observations (which counts a Discrete one-hot); N distances added
        width = compute_space_size(observation_space, occupied_size=True) + action_space.n
        self.net = nn.Sequential(nn.Linear(width, hidden), nn.Tanh(), nn.Linear(hidden, self.num_actions))

    def compute(self, inputs, role=""):
        x = inputs["observations"]  # (B, F) float32, the keys in sorted order
        obs = unflatten_tensorized_space(self.observation_space, x)  # the dict: action_mask (B, N), 1 = allowed
        return self.net(features(x, obs)).masked_fill(obs["action_mask"] < 0.5, -1e9), {}


class Value(DeterministicMixin, Model):
    def __init__(self, observation_space, action_space, device, hidden: int = 64):
        Model.__init__(self, observation_space=observation_space, action_space=action_space, device=device)
        DeterministicMixin.__init__(self)
        width = compute_space_size(observation_space, occupied_size=True) + action_space.n
        self.net = nn.Sequential(nn.Linear(width, hidden), nn.Tanh(), nn.Linear(hidden, 1))

    def compute(self, inputs, role=""):
        x = inputs["observations"]
        return self.net(features(x, unflatten_tensorized_space(self.observation_space, x))), {}


class EpisodeLog(gym.Wrapper):
    """The infos of the episodes that ended (``cost``, ``invalid_action``), as the trainer passes them by."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self.ended: list[dict] = []

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        if terminated or truncated:
            self.ended.append(info)
        return obs, reward, terminated, truncated, info


class VectorEpisodeLog(gym.vector.VectorWrapper):
    """:class:`EpisodeLog` for the vector env with ``SAME_STEP`` (the ended episodes' infos in ``final_info``)."""

    def __init__(self, env: gym.vector.VectorEnv):
        super().__init__(env)
        self.ended: list[dict] = []

    def step(self, actions):
        obs, reward, terminated, truncated, info = self.env.step(actions)
        final = info.get("final_info", {})
        for i in np.flatnonzero(final.get("_cost", [])):
            self.ended.append({"cost": final["cost"][i], "invalid_action": final["invalid_action"][i]})
        return obs, reward, terminated, truncated, info


def make_env(env_id: str, num_envs: int, **kwargs):
    """The single env (``num_envs`` 1) or the native vector env with ``SAME_STEP`` autoreset (skrl reads the
    observation a step returns as the next episode's first), the mask declared as a ``Box``, and a log."""
    if num_envs == 1:
        return EpisodeLog(MaskAsBox(gym.make(env_id, **kwargs)))
    venv = gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="vector_entry_point",
                        autoreset_mode="SameStep", **kwargs)
    return VectorEpisodeLog(VectorMaskAsBox(venv))


def main(argv=None) -> dict:
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    kwargs = {} if args.num_nodes is None else {"num_nodes": args.num_nodes}
    log = make_env(args.env_id, args.num_envs, **kwargs)
    env = wrap_env(log, wrapper="gymnasium", verbose=False)
    device = env.device
    models = {"policy": Policy(env.observation_space, env.action_space, device),
              "value": Value(env.observation_space, env.action_space, device)}
    cfg = PPO_CFG(rollouts=args.rollouts, learning_epochs=4, mini_batches=2, discount_factor=1.0, gae_lambda=0.95,
                  learning_rate=1e-3, entropy_loss_scale=0.01, value_loss_scale=0.5)
    cfg.experiment.directory = tempfile.mkdtemp(prefix="skrl_ppo_")  # skrl writes its runs there
    cfg.experiment.write_interval = 0
    cfg.experiment.checkpoint_interval = 0
    agent = PPO(models=models, memory=RandomMemory(memory_size=args.rollouts, num_envs=env.num_envs, device=device),
                observation_space=env.observation_space, action_space=env.action_space, device=device, cfg=cfg)
    SequentialTrainer(env=env, agents=agent, cfg={"timesteps": args.total_steps // args.num_envs, "headless": True,
                                                 "disable_progressbar": True, "close_environment_at_exit": False}).train()
    costs = [float(info["cost"]) for info in log.ended]
    invalid = sum(bool(info["invalid_action"]) for info in log.ended)
    recent = costs[-100:]
    print(f"{len(costs)} episodes, {invalid} ended on a masked action, mean cost of the last {len(recent)}: "
          f"{np.mean(recent):.3f}")
    return {"episodes": len(costs), "invalid": invalid, "mean_cost": float(np.mean(recent))}


if __name__ == "__main__":
    main()
