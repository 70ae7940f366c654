"""Every client at home: what other libraries' ways of using an env need from ours (episode statistics in
torch mode, skrl's spaces, the layout of ``final_obs``, TorchRL's info readers and spawned workers)."""
import importlib.util
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode
from gymnasium.wrappers.vector import RecordEpisodeStatistics as GymnasiumRecordEpisodeStatistics

import routing_gym  # noqa: F401
from routing_gym.wrappers import MaskAsBox, RecordEpisodeStatistics, VectorMaskAsBox
from test_vector import no_host_reads

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
B, N = 6, 5


def native(mode=AutoresetMode.NEXT_STEP, array_type="numpy", problem="CVRP", **kwargs):
    return gym.make_vec(f"routing/{problem}-v0", num_envs=B, num_nodes=N, vectorization_mode="vector_entry_point",
                        autoreset_mode=mode, array_type=array_type, max_episode_steps=8, **kwargs)


def sync(mode=AutoresetMode.NEXT_STEP, problem="CVRP"):
    return gym.make_vec(f"routing/{problem}-v0", num_envs=B, num_nodes=N, vectorization_mode="sync",
                        vector_kwargs={"autoreset_mode": mode}, max_episode_steps=8)


def seeded_actions(obs, rng: np.random.Generator) -> np.ndarray:
    """An allowed node per sub-env, and now and then any node (a masked one ends the episode early)."""
    mask = np.asarray(obs["action_mask"].cpu() if isinstance(obs["action_mask"], torch.Tensor)
                      else obs["action_mask"]).astype(bool)
    allowed = np.array([rng.choice(np.flatnonzero(row)) for row in mask])
    return np.where(rng.random(len(mask)) < 0.1, rng.integers(0, mask.shape[1], len(mask)), allowed)


def statistics(envs, steps=60, seed=0, torch_actions=False):
    """Per step: ``(_episode, r, l)`` as numpy (None where the step has no ``episode``), and the wrapper."""
    rng = np.random.default_rng(seed)
    obs, _ = envs.reset(seed=seed)
    out = []
    for _ in range(steps):
        a = seeded_actions(obs, rng)
        obs, _, _, _, info = envs.step(torch.as_tensor(a) if torch_actions else a)
        if "episode" not in info:
            out.append(None)
            continue
        ep = {k: (v.cpu().numpy() if isinstance(v, torch.Tensor) else v) for k, v in info["episode"].items()}
        ended = info["_episode"].cpu().numpy() if isinstance(info["_episode"], torch.Tensor) else info["_episode"]
        assert (ep["t"][ended] >= 0).all() and (ep["t"][~ended] == 0).all()
        out.append((ended, ep["r"], ep["l"]))
    return out, envs


def assert_same_statistics(ours, theirs):
    (a, wa), (b, wb) = ours, theirs
    assert len(a) == len(b)
    for t, (x, y) in enumerate(zip(a, b)):
        if x is None or y is None:  # a step without the key means no episode ended in it
            assert (x is None or not x[0].any()) and (y is None or not y[0].any()), t
            continue
        for u, v in zip(x, y):
            np.testing.assert_array_equal(u, v, err_msg=f"step {t}")
            assert u.dtype == v.dtype, t
    assert wa.episode_count == wb.episode_count > B
    assert list(wa.length_queue) == list(wb.length_queue)
    np.testing.assert_array_equal(np.array(wa.return_queue), np.array(wb.return_queue))


# -- 1. RecordEpisodeStatistics, numpy and torch ------------------------------------------------------
@pytest.mark.parametrize("make", [native, sync], ids=["native", "sync"])
@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
def test_record_episode_statistics__numpy_as_gymnasiums_wrapper(make, mode):
    """Over numpy envs (the native one and SyncVectorEnv) the statistics are Gymnasium's, value for value
    and dtype for dtype (episodes of every length: done, ended on a masked action, truncated)."""
    ours = statistics(RecordEpisodeStatistics(make(mode), buffer_length=10))
    theirs = statistics(GymnasiumRecordEpisodeStatistics(make(mode), buffer_length=10))
    assert_same_statistics(ours, theirs)
    lengths = np.concatenate([s[2][s[0]] for s in ours[0] if s is not None])
    assert len(set(lengths.tolist())) > 2  # early ends, full tours and truncations alike


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
def test_record_episode_statistics__torch_mode_equals_numpy_mode_and_reads_no_host(mode):
    """Gymnasium's wrapper fails over torch mode (before: TypeError); ours gives numpy mode's statistics as
    tensors, in every step (all rows False where no episode ended), without reading a tensor on the host."""
    with pytest.raises(TypeError):
        statistics(GymnasiumRecordEpisodeStatistics(native(mode, "torch")), steps=20, torch_actions=True)
    numpy_run = statistics(RecordEpisodeStatistics(native(mode), buffer_length=10))
    envs = RecordEpisodeStatistics(native(mode, "torch"), buffer_length=10)
    torch_run = statistics(envs, torch_actions=True)
    assert all(step is not None for step in torch_run[0])
    assert_same_statistics(torch_run, numpy_run)
    obs, _ = envs.reset(seed=1)
    envs.unwrapped._reads_host = False  # what a CUDA device gets: the env reads nothing either
    with no_host_reads():
        for _ in range(12):
            obs, _, _, _, info = envs.step(obs["action_mask"].argmax(1))
    assert info["episode"]["r"].dtype == torch.float64 and info["episode"]["l"].dtype == torch.int64


@pytest.mark.parametrize("array_type", ["numpy", "torch"])
def test_record_episode_statistics__disabled_reports_each_episode_once(array_type):
    """With DISABLED a finished sub-env reports done in every step until reset; its episode is reported in
    the step where it ended, never again, and a ``reset_mask`` reset starts its next one afresh."""
    envs = RecordEpisodeStatistics(native(AutoresetMode.DISABLED, array_type))
    rng = np.random.default_rng(0)
    obs, _ = envs.reset(seed=0)
    reported, steps = np.zeros(B, dtype=int), np.zeros(B, dtype=int)
    finished = np.zeros(B, dtype=bool)
    for t in range(50):
        a = seeded_actions(obs, rng)
        obs, _, term, trunc, info = envs.step(torch.as_tensor(a) if array_type == "torch" else a)
        steps += ~finished
        info = {k: v for k, v in info.items()}
        as_np = (lambda v: v.cpu().numpy()) if array_type == "torch" else np.asarray
        done = as_np(term) | as_np(trunc)
        if "episode" in info:
            ended = as_np(info["_episode"])
            np.testing.assert_array_equal(ended, done & ~finished)
            np.testing.assert_array_equal(as_np(info["episode"]["l"])[ended], steps[ended])
            np.testing.assert_allclose(as_np(info["episode"]["r"])[ended], -as_np(info["cost"])[ended])
            reported += ended
        else:
            assert not (done & ~finished).any()
        finished |= done
        if t % 10 == 9 and finished.any():  # restart the finished ones
            mask = torch.as_tensor(finished) if array_type == "torch" else finished.copy()
            obs, _ = envs.reset(options={"reset_mask": mask})
            steps[finished], finished[:] = 0, False
    assert reported.sum() == envs.episode_count > B


def test_record_episode_statistics__cleanrl_loop_reads_minus_the_cost():
    """The CleanRL idiom over torch mode with SAME_STEP: ``info["episode"]["r"][info["_episode"]]`` are the
    ended episodes' returns, minus their ``final_info`` costs; the example logs from the wrapper's queue."""
    envs = RecordEpisodeStatistics(native(AutoresetMode.SAME_STEP, "torch", problem="TSP"))
    obs, _ = envs.reset(seed=0)
    seen = 0
    for _ in range(30):
        obs, _, _, _, info = envs.step(torch.multinomial(obs["action_mask"].float(), 1).squeeze(1))
        ended = info["_episode"]
        if "final_info" in info:
            assert torch.equal(ended, info["final_info"]["_cost"])
            torch.testing.assert_close(info["episode"]["r"][ended], -info["final_info"]["cost"][ended])
        seen += int(ended.sum())
    assert seen == envs.episode_count >= B
    spec = importlib.util.spec_from_file_location("example_cleanrl_ppo", EXAMPLES / "cleanrl_ppo.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = module.main(["--env-id", "routing/TSP-10", "--total-steps", "512", "--num-envs", "8", "--num-steps", "32",
                       "--update-epochs", "1", "--device", "cpu"])
    assert out["episodes"] >= 8 * 512 // (8 * 10) - 8 and 1.5 < out["mean_cost"] < 10
