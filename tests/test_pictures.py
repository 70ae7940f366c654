"""Pictures a reader understands (issue 33): what each frame, legend, caption and gauge tells a reader."""
import os

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")

import gymnasium as gym
import numpy as np

import routing_gym  # noqa: F401
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


def test_cvrp__node_area_grows_with_demand_and_the_legend_says_so():
    (first, _), *_, (last, _) = episode_snapshots("cvrp", n=12)
    demand = first.fields["demand"][1:]
    radii = render._radii(first, 1.0)[1:]
    assert np.ptp(demand) > 0 and np.all(np.diff(radii[np.argsort(demand)]) >= 0)  # more demand, larger node
    assert radii[np.argmax(demand)] > radii[np.argmin(demand)]
    for snap in (first, last):  # demand does not change: every frame shows it, first to last
        assert ("size", "demand") in render.frame_legend(snap)
