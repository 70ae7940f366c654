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


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("mode", list(AutoresetMode))
def test_record_episode_statistics__cuda_never_synchronises(mode):
    envs = RecordEpisodeStatistics(native(mode, "torch", device="cuda"))
    obs, _ = envs.reset(seed=0)
    g = torch.Generator(device="cuda").manual_seed(0)
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(30):
            obs, _, _, _, info = envs.step(torch.multinomial(obs["action_mask"].float(), 1, generator=g).squeeze(1))
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert info["episode"]["r"].device.type == "cuda" and envs.episode_count > 0


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


# -- 2. skrl: the mask as a Box ------------------------------------------------------------------------
def test_mask_as_box__skrl_wraps_the_single_and_vector_env():
    """skrl's spaces exclude ``MultiBinary`` (before: ``wrap_env``'s env fails with "Unsupported space");
    ``MaskAsBox`` / ``VectorMaskAsBox`` declare the mask as ``Box(0, 1, int8)`` with the same values."""
    pytest.importorskip("skrl")
    from skrl.envs.wrappers.torch import wrap_env
    from skrl.utils.spaces.torch import compute_space_size, unflatten_tensorized_space

    with pytest.raises(ValueError, match="Unsupported space"):
        wrap_env(gym.make("routing/TSP-v0", num_nodes=N), wrapper="gymnasium", verbose=False).reset()
    single = MaskAsBox(gym.make("routing/CVRP-v0", num_nodes=N))
    assert single.observation_space["action_mask"] == gym.spaces.Box(0, 1, (N + 1,), np.int8)
    obs, _ = single.reset(seed=0)
    assert single.observation_space.contains(obs)
    env = wrap_env(single, wrapper="gymnasium", verbose=False)
    flat, _ = env.reset()
    np.testing.assert_array_equal(unflatten_tensorized_space(env.observation_space, flat)["action_mask"][0].numpy(),
                                  single.unwrapped.action_masks())
    for array_type in ("numpy", "torch"):
        venv = VectorMaskAsBox(native(AutoresetMode.SAME_STEP, array_type))
        assert venv.observation_space["action_mask"] == gym.spaces.Box(0, 1, (B, N + 1), np.int8)
        env = wrap_env(venv, wrapper="gymnasium", verbose=False)
        flat, _ = env.reset()
        mask = unflatten_tensorized_space(env.observation_space, flat)["action_mask"]
        np.testing.assert_array_equal(mask.cpu().numpy(), np.asarray(venv.unwrapped.action_masks(), dtype=float))
        flat, reward, *_ = env.step(mask.argmax(1, keepdim=True))
        assert flat.shape == (B, compute_space_size(env.observation_space, occupied_size=True))
        assert reward.shape == (B, 1)


def test_mask_as_box__skrl_ppo_trains_and_never_takes_a_masked_action():
    """skrl's PPO path (``examples/skrl_ppo.py``: ``wrap_env``, a categorical policy that masks its logits with
    the observation's ``action_mask``, a value model, the sequential trainer) on TSP with 5 nodes."""
    pytest.importorskip("skrl")
    spec = importlib.util.spec_from_file_location("example_skrl_ppo", EXAMPLES / "skrl_ppo.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for num_envs in (1, 4):  # the single env, and the native vector env (SAME_STEP)
        out = module.main(["--env-id", "routing/TSP-v0", "--num-nodes", "5", "--num-envs", str(num_envs),
                           "--total-steps", "400", "--rollouts", "32"])
        assert out["episodes"] == 400 // 5 and out["invalid"] == 0  # a masked action would end an episode early
        assert 0 < out["mean_cost"] < 5


# -- 3. final_obs: per-env dicts in numpy mode, batched tensors in torch mode ------------------------------
@pytest.mark.parametrize("reads_host", [True, False], ids=["cpu", "as-off-the-cpu"])
def test_final_obs__torch_mode_is_a_dict_of_batched_tensors_whose_marked_rows_are_numpy_modes(reads_host):
    """The documented layouts (class docstring, docs/contract.md): with SAME_STEP, numpy mode (as
    ``SyncVectorEnv``) gives ``final_obs`` as a (B,) object array holding a dict per ended sub-env (None
    elsewhere); torch mode gives one dict of (B, ...) tensors (no per-row split, which would read the host),
    whose rows marked by ``_final_obs`` hold the same observations."""
    envs = {t: native(AutoresetMode.SAME_STEP, t) for t in ("numpy", "torch")}
    # False: what a CUDA device gets (every step holds final_obs; automatic resets then draw other instances
    # than numpy mode's, so the runs are compared up to the first)
    envs["torch"].unwrapped._reads_host = reads_host
    obs = {t: env.reset(seed=0)[0] for t, env in envs.items()}
    rng = np.random.default_rng(0)
    syncs = sync(AutoresetMode.SAME_STEP)
    sync_obs, _ = syncs.reset(seed=0)
    ended = 0
    for t in range(40):
        a = seeded_actions(obs["numpy"], rng)
        obs["numpy"], _, _, _, info = envs["numpy"].step(a)
        obs["torch"], _, _, _, tinfo = envs["torch"].step(torch.as_tensor(a))
        if t < 4:  # before any automatic reset, SyncVectorEnv steps the same instances: the same layout
            *_, sinfo = syncs.step(a)
            assert ("final_obs" in sinfo) == ("final_obs" in info)
            if "final_obs" in info:
                assert sinfo["final_obs"].dtype == info["final_obs"].dtype == object
        if "final_obs" not in info:
            assert reads_host or not tinfo["_final_obs"].any()
            continue
        finals, marked = info["final_obs"], info["_final_obs"]
        assert finals.shape == (B,) and finals.dtype == object
        assert all((f is None) != m for f, m in zip(finals, marked))
        batched = tinfo["final_obs"]
        np.testing.assert_array_equal(tinfo["_final_obs"].numpy(), marked)
        assert isinstance(batched, dict) and all(isinstance(v, torch.Tensor) and v.shape[0] == B for v in batched.values())
        for i in np.flatnonzero(marked):
            assert finals[i].keys() == batched.keys()
            for key, value in finals[i].items():
                np.testing.assert_array_equal(value, batched[key][i].numpy(), err_msg=key)
            ended += 1
        if not reads_host:
            break
    assert ended > (B if reads_host else 0)


# -- 4. TorchRL: reading cost, spawned workers --------------------------------------------------------------
def test_torchrl__info_reader_reads_cost_at_the_last_step_of_each_episode():
    """README's recipe: infos are empty until an episode ends, so the reader is given the spec of ``cost``
    (float64, shape ()) and writes 0 in the other steps; at each episode's last step it holds minus the
    episode's return."""
    pytest.importorskip("torchrl")
    from torchrl.data import Unbounded
    from torchrl.envs import GymEnv
    from torchrl.envs.gym_like import default_info_dict_reader
    from torchrl.envs.utils import check_env_specs

    env = GymEnv("routing/TSP-v0", num_nodes=N)
    env.set_info_dict_reader(default_info_dict_reader(["cost"], spec=[Unbounded((), dtype=torch.float64)]))
    check_env_specs(env)
    env.set_seed(0)
    td = env.rollout(40, break_when_any_done=False)  # random actions: some end early on a masked one
    done, cost, reward = td["next", "done"].squeeze(-1), td["next", "cost"], td["next", "reward"].squeeze(-1)
    assert cost.dtype == torch.float64 and done.sum() >= 4
    assert (cost[~done] == 0).all()
    start = 0
    for end in done.nonzero().flatten().tolist():
        assert cost[end].item() == pytest.approx(-reward[start:end + 1].double().sum().item(), rel=1e-5)
        start = end + 1


def test_torchrl__parallel_env_workers_make_the_env_by_its_prefixed_id():
    """Spawned workers have not imported routing_gym: ``routing_gym:routing/...`` imports it there."""
    pytest.importorskip("torchrl")
    import functools

    from torchrl.envs import GymEnv, ParallelEnv

    env = ParallelEnv(2, functools.partial(GymEnv, "routing_gym:routing/TSP-v0", num_nodes=N), mp_start_method="spawn")
    try:
        env.set_seed(0)
        td = env.rollout(2 * N, break_when_any_done=False)
        assert td["next", "done"].shape == (2, 2 * N, 1) and td["next", "done"].any()
    finally:
        env.close()


def test_numpy_infos__torchrl_reads_invalid_action_and_cost_through_the_wrapper():
    """TorchRL's default_info_dict_reader reads a value's dtype: the contract's Python bool ``invalid_action``
    fails there, the NumpyInfos wrapper's numpy scalars are read."""
    pytest.importorskip("torchrl")
    import torch
    from torchrl.data import Unbounded
    from torchrl.envs import GymWrapper
    from torchrl.envs.gym_like import default_info_dict_reader

    from routing_gym.wrappers import NumpyInfos

    def reader():
        return default_info_dict_reader(["invalid_action", "cost"],
                                        spec=[Unbounded((), dtype=torch.bool), Unbounded((), dtype=torch.float64)])

    plain = GymWrapper(gym.make("routing/TSP-10"))
    plain.set_info_dict_reader(reader())
    with pytest.raises(AttributeError, match="dtype"):
        plain.rollout(12, break_when_any_done=True)
    env = GymWrapper(NumpyInfos(gym.make("routing/TSP-10")))
    env.set_info_dict_reader(reader())
    torch.manual_seed(0)  # the rollout's random actions, which soon take a masked one
    td = env.rollout(12, break_when_any_done=True)
    done = td["next", "done"].squeeze(-1)
    assert td["next", "invalid_action"].dtype == torch.bool and td["next", "cost"].dtype == torch.float64
    assert done[-1] and td["next", "invalid_action"][-1] and td["next", "cost"][-1] > 0  # read at the episode's end
    assert not td["next", "invalid_action"][:-1].any()
