"""A CleanRL-style single-file PPO over the native vector env in torch mode, with action masking.

The vector env steps B sub-envs in one batched call and hands torch tensors straight to the policy
(``array_type="torch"``). ``SAME_STEP`` autoreset gives the classic CleanRL semantics: when a sub-env's
episode ends, the step returns its reward and ``terminated`` flag together with the first observation of
its next episode (the finished episode's info under ``info["final_info"]``). ``RecordEpisodeStatistics``
from ``routing_gym.wrappers`` (Gymnasium's, for tensors) adds ``info["episode"]`` and keeps the last
episodes' returns on the device, read only when logging. The policy masks its logits with the
observation's ``action_mask`` (int8, 1 = allowed), so no action is ever refused. An MLP over the
flattened observation (plus the distances from the current node) keeps the file short; the Attention
Model in ``agents`` is the stronger policy.

Rewards are minus edge lengths and sum to minus the episode's cost, so ``gamma = 1``.

Usage::

    python examples/cleanrl_ppo.py                              # TSP-10, 200k steps, under a minute on a CPU
    python examples/cleanrl_ppo.py --env-id routing/CVRP-10 --total-steps 500000
"""
from __future__ import annotations

import argparse
import time

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode
from torch import nn
from torch.distributions import Categorical

import routing_gym  # noqa: F401  (registers the routing/ ids)
from routing_gym.wrappers import RecordEpisodeStatistics


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--env-id", default="routing/TSP-10")
    p.add_argument("--total-steps", type=int, default=200_000, help="environment steps (all sub-envs together)")
    p.add_argument("--num-envs", type=int, default=64)
    p.add_argument("--num-steps", type=int, default=32, help="steps per sub-env per rollout")
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--gae-lambda", type=float, default=0.95)
    p.add_argument("--minibatches", type=int, default=4)
    p.add_argument("--update-epochs", type=int, default=4)
    p.add_argument("--clip-coef", type=float, default=0.2)
    p.add_argument("--ent-coef", type=float, default=0.01)
    p.add_argument("--vf-coef", type=float, default=0.5)
    p.add_argument("--max-grad-norm", type=float, default=0.5)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1, help="torch threads on the CPU")
    return p.parse_args(argv)


def flatten(obs: dict[str, torch.Tensor], space: gym.spaces.Dict) -> torch.Tensor:
    """(B, F) float features: every observation key flattened (node indices one-hot), and the distance
    from the current node to every node, which lets an MLP learn to prefer near nodes quickly."""
    parts = []
    for key, sub in space.spaces.items():
        value = obs[key]
        if isinstance(sub, gym.spaces.Discrete):
            value = nn.functional.one_hot(value, int(sub.n))
        parts.append(value.float().flatten(1))
    here = obs["locs"].gather(1, obs["current_node"][:, None, None].expand(-1, 1, 2))  # (B, 1, 2)
    parts.append((obs["locs"] - here).norm(dim=-1))  # (B, N)
    return torch.cat(parts, dim=1)


class Agent(nn.Module):
    def __init__(self, num_features: int, num_actions: int, hidden: int = 128):
        super().__init__()
        self.critic = nn.Sequential(nn.Linear(num_features, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh(),
                                    nn.Linear(hidden, 1))
        self.actor = nn.Sequential(nn.Linear(num_features, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh(),
                                   nn.Linear(hidden, num_actions))

    def get_value(self, x: torch.Tensor) -> torch.Tensor:
        return self.critic(x).squeeze(-1)

    def get_action_and_value(self, x: torch.Tensor, mask: torch.Tensor, action: torch.Tensor | None = None):
        logits = self.actor(x).masked_fill(mask == 0, -1e9)  # masked actions get no probability
        dist = Categorical(logits=logits)
        if action is None:
            action = dist.sample()
        return action, dist.log_prob(action), dist.entropy(), self.get_value(x)


def main(argv=None) -> dict:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    device = torch.device(args.device)
    envs = gym.make_vec(args.env_id, num_envs=args.num_envs, vectorization_mode="vector_entry_point",
                        device=device, array_type="torch", autoreset_mode=AutoresetMode.SAME_STEP)
    envs = RecordEpisodeStatistics(envs, buffer_length=500)  # info["episode"], kept on the device
    space = envs.single_observation_space
    obs, _ = envs.reset(seed=args.seed)
    agent = Agent(flatten(obs, space).shape[1], int(envs.single_action_space.n)).to(device)
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.lr, eps=1e-5)

    b, t = args.num_envs, args.num_steps
    batch_size = b * t
    minibatch_size = batch_size // args.minibatches
    iterations = max(1, args.total_steps // batch_size)
    features = torch.zeros(t, b, flatten(obs, space).shape[1], device=device)
    masks = torch.zeros(t, b, envs.single_action_space.n, dtype=torch.int8, device=device)
    actions = torch.zeros(t, b, dtype=torch.long, device=device)
    logprobs, rewards, dones, values = (torch.zeros(t, b, device=device) for _ in range(4))
    next_done = torch.zeros(b, device=device)
    start = time.perf_counter()

    for iteration in range(1, iterations + 1):
        for step in range(t):
            x = flatten(obs, space)
            features[step], masks[step], dones[step] = x, obs["action_mask"], next_done
            with torch.no_grad():
                action, logprob, _, value = agent.get_action_and_value(x, obs["action_mask"])
            actions[step], logprobs[step], values[step] = action, logprob, value
            obs, reward, terminated, truncated, _ = envs.step(action)
            rewards[step] = reward
            next_done = (terminated | truncated).float()

        with torch.no_grad():  # generalised advantage estimation, gamma = 1
            next_value = agent.get_value(flatten(obs, space))
            advantages = torch.zeros_like(rewards)
            last = torch.zeros(b, device=device)
            for step in reversed(range(t)):
                not_done = 1.0 - (next_done if step == t - 1 else dones[step + 1])
                following = next_value if step == t - 1 else values[step + 1]
                delta = rewards[step] + following * not_done - values[step]
                last = delta + args.gae_lambda * not_done * last
                advantages[step] = last
            returns = advantages + values

        flat = [z.reshape(batch_size, *z.shape[2:]) for z in (features, masks, actions, logprobs, advantages, returns)]
        f_x, f_mask, f_action, f_logprob, f_adv, f_ret = flat
        for _ in range(args.update_epochs):
            for idx in torch.randperm(batch_size, device=device).split(minibatch_size):
                _, logprob, entropy, value = agent.get_action_and_value(f_x[idx], f_mask[idx], f_action[idx])
                ratio = (logprob - f_logprob[idx]).exp()
                adv = (f_adv[idx] - f_adv[idx].mean()) / (f_adv[idx].std() + 1e-8)
                pg_loss = torch.max(-adv * ratio, -adv * ratio.clamp(1 - args.clip_coef, 1 + args.clip_coef)).mean()
                v_loss = 0.5 * (value - f_ret[idx]).square().mean()
                loss = pg_loss - args.ent_coef * entropy.mean() + args.vf_coef * v_loss
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                optimizer.step()

        if iteration % 20 == 0 or iteration == iterations:
            recent = -np.array(envs.return_queue)  # the costs of the last 500 episodes (read from the device)
            print(f"iteration {iteration:4d}/{iterations}  steps {iteration * batch_size:8,d}  "
                  f"mean cost of the last {len(recent)} episodes {np.mean(recent):.3f}  "
                  f"{time.perf_counter() - start:5.0f} s")
    envs.close()
    return {"episodes": envs.episode_count, "mean_cost": float(-np.mean(envs.return_queue))}


if __name__ == "__main__":
    main()
