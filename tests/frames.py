"""Test helper for pictures: every rendered frame of one episode beside the renderer's snapshot of its state."""
import gymnasium as gym

import routing_gym  # noqa: F401  (registers the routing/ ids)
from agents.apps.visual import nearest_policy
from routing_gym import render


def episode_snapshots(problem, n=8, seed=0, policy=nearest_policy, size=(300, 300)):
    """(snapshot, frame) of every state of one episode, from the first frame to the final one."""
    env = gym.make(f"routing/{problem.upper()}-v0", num_nodes=n, render_mode="rgb_array", render_size=size)
    obs, _ = env.reset(seed=seed)
    out, tour, done = [], [], False
    while True:
        core = env.unwrapped
        out.append((render.snapshot(problem, core.state, list(tour), -core._return, core._invalid), env.render()))
        if done:
            break
        tour.append(policy(env, obs))
        obs, _, done, _, _ = env.step(tour[-1])
    env.close()
    return out
