"""The native vector envs: make_vec, autoreset modes, array types, parity with the single env."""
import contextlib
import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode

import routing_gym  # noqa: F401
from routing_gym.problems.base import invalid_penalty, tensors_of
from routing_gym.vector import RoutingVectorEnv, clear_records, renew, renew_on_host

PROBLEMS = tuple(p.label for p in routing_gym.PROBLEMS.values())  # every problem in the registry


def make_vec(problem, num_envs=4, n=10, **kwargs):
    """The vector env of ``problem`` with the smallest valid size of at least ``n``."""
    return gym.make_vec(f"routing/{problem}-v0", num_envs=num_envs, vectorization_mode="vector_entry_point",
                        num_nodes=routing_gym.problems.get_problem(problem).valid_num_nodes(n), **kwargs)


def first_allowed(mask):
    return np.asarray(mask).astype(bool).argmax(axis=-1)


@pytest.mark.parametrize("env_id", [f"routing/{p}-{n}" for p in PROBLEMS for n in (20, 50, 100)])
def test_make_vec__every_registered_id(env_id):
    venv = gym.make_vec(env_id, num_envs=3, vectorization_mode="vector_entry_point")
    assert isinstance(venv, RoutingVectorEnv)
    obs, _ = venv.reset(seed=0)
    assert venv.observation_space.contains(obs)
    assert venv.metadata["autoreset_mode"] is AutoresetMode.NEXT_STEP


def test_make_vec__devices_and_max_episode_steps():
    assert make_vec("TSP", device=torch.device("cpu")).device == torch.device("cpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA is not available"):
            make_vec("TSP", device="cuda:1")
    with pytest.raises(ValueError, match="autoreset_mode"):
        make_vec("TSP", autoreset_mode="sometimes")
    with pytest.raises(TypeError):
        make_vec("TSP", prize_type="unif")
    venv = make_vec("TSP", num_envs=2, max_episode_steps=3)
    obs, _ = venv.reset(seed=0)
    for t in range(3):
        obs, r, term, trunc, _ = venv.step(first_allowed(obs["action_mask"]))
    assert trunc.all() and not term.any()


@pytest.mark.parametrize("problem", PROBLEMS)
def test_parity__sub_env_i_is_the_single_env_seeded_with_seed_plus_i(problem):
    b, seed = 5, 11
    venv = make_vec(problem, num_envs=b, autoreset_mode=AutoresetMode.DISABLED)
    singles = [gym.make(f"routing/{problem}-v0", num_nodes=10) for _ in range(b)]
    vobs, _ = venv.reset(seed=seed)
    sobs = [env.reset(seed=seed + i)[0] for i, env in enumerate(singles)]
    rng = np.random.default_rng(0)
    done = np.zeros(b, bool)
    while not done.all():
        for i in range(b):
            if not done[i]:
                for key, value in sobs[i].items():
                    assert np.array_equal(vobs[key][i], value), (problem, i, key)
        actions = np.array([rng.choice(np.flatnonzero(o["action_mask"])) if not d else 0
                            for o, d in zip(sobs, done)])
        vobs, vr, vterm, vtrunc, _ = venv.step(actions)
        for i in np.flatnonzero(~done):
            sobs[i], r, term, trunc, _ = singles[i].step(int(actions[i]))
            assert vr[i] == r and vterm[i] == term and vtrunc[i] == trunc, (problem, i)
            done[i] = term
        assert np.isfinite(vr).all()


@pytest.mark.parametrize("problem", PROBLEMS)
def test_disabled__finished_sub_envs_stay_done_with_a_noop_mask(problem):
    venv = make_vec(problem, num_envs=6, autoreset_mode="Disabled", array_type="torch")
    obs, _ = venv.reset(seed=0)
    ever_done = torch.zeros(6, dtype=torch.bool)
    returns = torch.zeros(6, dtype=torch.float64)
    costs = torch.full((6,), float("nan"), dtype=torch.float64)
    for _ in range(60):
        a = obs["action_mask"].float().multinomial(1, generator=torch.Generator().manual_seed(1)).squeeze(1)
        before = ever_done.clone()
        obs, r, term, trunc, info = venv.step(a)
        assert isinstance(r, torch.Tensor) and torch.isfinite(r).all()
        assert (r[before] == 0).all() and term[before].all()
        assert torch.equal(info["_cost"], term & ~before)  # flagged once, in the step that ends the episode
        returns += r
        costs = torch.where(info["_cost"], info["cost"], costs)
        ever_done |= term
        assert (obs["action_mask"][ever_done].sum(dim=1) == 1).all()
    assert ever_done.all()
    assert torch.allclose(costs, -returns)
    obs, _ = venv.reset(options={"reset_mask": np.array([True, False, True, False, False, False])})
    assert venv.unwrapped.state.done.tolist() == [False, True, False, True, True, True]


@pytest.mark.parametrize("problem", PROBLEMS)
def test_next_step__finished_sub_env_resets_on_the_next_step(problem):
    venv = make_vec(problem, num_envs=3)
    obs, _ = venv.reset(seed=0)
    costs = []
    for _ in range(80):
        obs, r, term, trunc, info = venv.step(first_allowed(obs["action_mask"]))
        if term.any():
            i = int(np.flatnonzero(term)[0])
            costs.append(info["cost"][i])
            tour = info["tour"][i]
            assert info["_cost"][i] and info["_tour"][i]
            assert tour.shape == (venv.unwrapped.problem.max_steps(venv.unwrapped.n_total),)
            assert (tour[tour >= 0] == tour[:int((tour >= 0).sum())]).all()  # the actions first, then -1s
            obs2, r2, term2, _, _ = venv.step(first_allowed(obs["action_mask"]))
            assert r2[i] == 0.0 and not term2[i]
            assert obs2["num_steps"][i, 0] == 0  # a fresh episode
            obs = obs2
    assert costs and np.isfinite(costs).all()


def test_same_step__final_obs_and_info_then_reset_obs():
    venv = make_vec("CVRP", num_envs=2, autoreset_mode=AutoresetMode.SAME_STEP)
    obs, _ = venv.reset(seed=0)
    for _ in range(60):
        obs, r, term, trunc, info = venv.step(first_allowed(obs["action_mask"]))
        if term.any():
            i = int(np.flatnonzero(term)[0])
            assert info["_final_obs"][i] and info["final_obs"][i]["num_steps"][0] > 0
            assert info["final_info"]["_cost"][i] and info["final_info"]["cost"][i] > 0
            assert obs["num_steps"][i, 0] == 0
            return
    pytest.fail("no episode finished")


def test_torch_mode__tensors_on_device_and_tensor_actions():
    venv = make_vec("OP", num_envs=4, array_type="torch", prize_type="const")
    obs, _ = venv.reset(seed=0)
    assert obs["action_mask"].dtype == torch.int8 and obs["locs"].device.type == "cpu"  # as the space declares
    assert (obs["prize"][:, 1:] == 1).all()
    obs, r, term, trunc, _ = venv.step(obs["action_mask"].int().argmax(dim=1))
    assert r.dtype == torch.float32 and term.dtype == torch.bool


def test_reset__user_instances_batch_is_loaded_and_validated():
    venv = make_vec("TSP", num_envs=2, n=3)
    locs = np.array([[[0, 0], [1, 0], [1, 1]], [[0, 0], [0.5, 0], [0, 0.5]]], np.float32)
    obs, _ = venv.reset(options={"instances": {"locs": locs}})
    assert np.array_equal(obs["locs"], locs)
    with pytest.raises(ValueError, match="'locs' must lie in"):
        venv.reset(options={"instances": {"locs": locs * 3}})
    with pytest.raises(ValueError, match=r"must have shape \(2, 3, 2\)"):
        venv.reset(options={"instances": {"locs": locs[:1]}})


def test_step__bad_actions_are_refused():
    venv = make_vec("TSP", num_envs=2)
    venv.reset(seed=0)
    with pytest.raises(ValueError, match="shape"):
        venv.step(np.array([0, 1, 2]))
    with pytest.raises(ValueError, match=r"sub-env 1: action 10 is outside Discrete\(10\)"):
        venv.step(np.array([0, 10]))
    strict = make_vec("TSP", num_envs=2, invalid_action="raise")
    strict.reset(seed=0)
    strict.step(np.array([0, 0]))
    with pytest.raises(ValueError, match="sub-env 0: action 0 is masked"):
        strict.step(np.array([0, 1]))


@pytest.mark.parametrize("array_type", ["numpy", "torch"])
@pytest.mark.parametrize("actions", [
    torch.tensor([1.9, 2.7]), torch.tensor([1.0, 2.0]), torch.tensor([True, False]), torch.tensor([1 + 0j, 2 + 0j]),
    torch.tensor([1.0, 2.0], requires_grad=True), np.array([1.0, 2.0]), np.array([True, False]), [0.5, 1],
    np.array([1 + 0j, 2 + 0j]),
])
def test_step__non_integer_actions_are_value_errors(actions, array_type):
    """The dtype is checked (tensor metadata, no synchronisation): floats are refused even where whole, as
    bools and complex numbers; a ValueError as the single env's for a non-integer action."""
    for mode in ("terminate", "raise"):
        venv = make_vec("TSP", num_envs=2, array_type=array_type, invalid_action=mode)
        venv.reset(seed=0)
        with pytest.raises(ValueError, match="integer"):
            venv.step(actions)
        assert venv.unwrapped.state.num_steps.tolist() == [0, 0]  # nothing was played


@pytest.mark.parametrize("array_type", ["numpy", "torch"])
def test_step__out_of_range_tensor_is_a_masked_action_or_a_value_error(array_type):
    """A tensor's range is checked on the device: in terminate mode an index outside the nodes ends that
    sub-env as a masked action does; raise mode names it (never a raw indexing error)."""
    venv = make_vec("TSP", num_envs=3, array_type=array_type)
    venv.reset(seed=0)
    penalty = invalid_penalty(venv.unwrapped.problem, venv.unwrapped.state)
    _, r, term, _, info = venv.step(torch.tensor([1, 10, -1]))
    r, term = np.asarray(r), np.asarray(term)
    assert term.tolist() == [False, True, True]
    assert r[1:].tolist() == pytest.approx((-penalty[1:]).tolist())
    assert np.asarray(info["invalid_action"]).tolist() == [False, True, True]
    strict = make_vec("TSP", num_envs=3, array_type=array_type, invalid_action="raise")
    strict.reset(seed=0)
    for bad, i, value in ((torch.tensor([1, 10, 2]), 1, 10), (torch.tensor([1, 2, -1]), 2, -1),
                          (torch.tensor([1, 2, 2**40]), 2, 2**40)):
        with pytest.raises(ValueError, match=rf"sub-env {i}: action {value} is outside Discrete\(10\)"):
            strict.step(bad)
    assert strict.unwrapped.state.num_steps.tolist() == [0, 0, 0]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("problem", ["TSP", "CVRP"])
def test_step__cuda_tensor_actions_are_checked_without_a_host_synchronisation(problem):
    """On CUDA an index outside the nodes would be a device-side assert that breaks the context; the env
    clamps it on the device and treats it as a masked action, and checks dtype and shape from metadata."""
    venv = make_vec(problem, num_envs=3, device="cuda", array_type="torch", autoreset_mode="Disabled")
    venv.reset(seed=0)
    penalty = invalid_penalty(venv.unwrapped.problem, venv.unwrapped.state)
    actions = torch.tensor([1, 10**6, -5], device="cuda")
    torch.cuda.set_sync_debug_mode("error")
    try:
        _, r, term, _, info = venv.step(actions)
        with pytest.raises(ValueError, match="integer"):
            venv.step(actions.float())
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert term.tolist() == [False, True, True] and info["invalid_action"].tolist() == [False, True, True]
    assert r[1:].tolist() == pytest.approx((-penalty[1:]).tolist())
    strict = make_vec(problem, num_envs=3, device="cuda", array_type="torch", invalid_action="raise")
    strict.reset(seed=0)
    with pytest.raises(ValueError, match=r"sub-env 1: action 1000000 is outside"):
        strict.step(actions)


@pytest.mark.parametrize("problem,field,index,value,match", [
    ("TSP", "locs", (0, 2, 0), np.nan, "'locs' contains NaN"),
    ("TSP", "locs", (0, 1, 1), 5.0, "'locs' must lie in"),
    ("CVRP", "locs", (0, 3, 1), np.inf, "'locs' contains NaN"),
    ("CVRP", "demand", (0, 1), 0.0, "'demand' must be > 0"),
    ("CVRP", "demand", (0, 0), 1.0, "'demand' must be 0 at the depot"),
    ("CVRP", "demand", (0, 2), 1.5, "'demand' exceeds the capacity"),
])
def test_reset__instance_form_is_validated_as_the_dict_form(problem, field, index, value, match):
    """A batch of 2 whose row 0 is bad, as a dict and as the problem's Instance: both refused alike, by the
    vector env and (row 0 alone) by the single env."""
    core = routing_gym.PROBLEMS[problem.lower()]
    fields = {"locs": np.full((2, 4, 2), 0.5, np.float32), "demand": np.tile(np.float32([0, 0.2, 0.3, 0.4]), (2, 1))}
    fields = {k: fields[k] for k in core.Instance._fields}
    fields[field][index] = value
    instance = core.Instance(**{k: torch.as_tensor(v) for k, v in fields.items()})
    venv = make_vec(problem, num_envs=2, n=core.num_customers(4))
    single = gym.make(f"routing/{problem}-v0", num_nodes=core.num_customers(4))
    for vector_form, single_form in ((fields, {k: v[0] for k, v in fields.items()}),
                                     (instance, type(instance)(*(f[:1] for f in instance)))):
        with pytest.raises(ValueError, match=match):
            venv.reset(options={"instances": vector_form})
        with pytest.raises(ValueError, match=match):
            single.reset(options={"instance": single_form})


def test_reset__instance_form_plays_as_the_dict_form():
    core = routing_gym.PROBLEMS["cvrp"]
    inst = core.generate(2, 5, generator=torch.Generator().manual_seed(0))
    venv = make_vec("CVRP", num_envs=2, n=5)
    by_dict, _ = venv.reset(options={"instances": {k: v.numpy() for k, v in inst._asdict().items()}})
    by_instance, _ = venv.reset(options={"instances": inst._replace(demand=inst.demand.double())})
    single, _ = gym.make("routing/CVRP-v0", num_nodes=5).reset(options={"instance": type(inst)(*(f[1:] for f in inst))})
    for key in by_dict:
        assert np.array_equal(by_dict[key], by_instance[key]) and np.array_equal(by_dict[key][1], single[key])


def test_reset__seeds_are_checked_as_the_single_env_checks_them():
    venv = make_vec("TSP", num_envs=2)
    single = gym.make("routing/TSP-v0", num_nodes=10)
    for seed in (1.5, "3", -1, np.int64(3)):
        with pytest.raises(gym.error.Error, match="Seed must be"):
            single.reset(seed=seed)
        with pytest.raises(gym.error.Error, match="Seed must be"):
            venv.reset(seed=seed)
    with pytest.raises(gym.error.Error, match="Seed must be"):
        venv.reset(seed=[0, 1.5])
    obs, _ = venv.reset(seed=[3, 4])
    assert np.array_equal(obs["locs"][1], single.reset(seed=4)[0]["locs"])


@pytest.mark.parametrize("kwargs,match", [
    ({"render_size": (600,)}, "render_size"), ({"render_size": (1, 1)}, "render_size"),
    ({"render_size": (600.5, 600)}, "render_size"), ({"render_size": 600}, "render_size"),
    ({"max_episode_steps": True}, "max_episode_steps"), ({"max_episode_steps": 2.5}, "max_episode_steps"),
    ({"max_episode_steps": 0}, "max_episode_steps"),
])
def test_make__bad_arguments_are_value_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_vec("TSP", render_mode="rgb_array", **kwargs)
    if "render_size" in kwargs:
        with pytest.raises(ValueError, match=match):
            gym.make("routing/TSP-v0", render_mode="rgb_array", **kwargs)


def test_make__a_sized_id_refuses_another_num_nodes():
    with pytest.raises(ValueError, match="routing/TSP-20 has num_nodes=20, got num_nodes=30"):
        gym.make_vec("routing/TSP-20", num_envs=2, vectorization_mode="vector_entry_point", num_nodes=30)
    assert gym.make_vec("routing/TSP-20", num_envs=2, vectorization_mode="vector_entry_point", num_nodes=20).num_nodes == 20
    assert make_vec("TSP", n=30).num_nodes == 30


@pytest.mark.parametrize("problem", PROBLEMS)
def test_sync_vector_env__over_single_envs_survives_episode_ends(problem):
    venv = gym.make_vec(f"routing/{problem}-v0", num_envs=2, vectorization_mode="sync",
                        num_nodes=routing_gym.problems.get_problem(problem).valid_num_nodes(5))
    obs, _ = venv.reset(seed=0)
    ended = 0
    for _ in range(30):
        obs, r, term, trunc, info = venv.step(first_allowed(obs["action_mask"]))
        ended += int(term.sum())
    assert ended >= 2 and np.isfinite(r).all()


# -- the VectorEnv contract that wrappers and other libraries read --------------------------------
@pytest.mark.parametrize("mode", list(AutoresetMode))
def test_autoreset_mode__is_an_attribute_as_well_as_metadata(mode):
    venv = make_vec("TSP", autoreset_mode=mode)
    assert venv.autoreset_mode is mode and venv.metadata["autoreset_mode"] is mode


def test_render__one_frame_per_sub_env_each_the_single_envs_frame():
    venv = make_vec("CVRP", num_envs=3, n=6, render_mode="rgb_array", render_size=(96, 96))
    singles = [gym.make("routing/CVRP-v0", num_nodes=6, render_mode="rgb_array", render_size=(96, 96))
               for _ in range(3)]
    obs, _ = venv.reset(seed=4)
    for i, env in enumerate(singles):
        env.reset(seed=4 + i)
    for _ in range(3):
        actions = first_allowed(obs["action_mask"])
        obs, *_ = venv.step(actions)
        for env, a in zip(singles, actions):
            env.step(int(a))
    frames = venv.render()
    assert isinstance(frames, tuple) and len(frames) == 3
    for frame, env in zip(frames, singles):
        assert frame.shape == (96, 96, 3) and frame.dtype == np.uint8 and np.array_equal(frame, env.render())


def test_render__gymnasium_vector_human_rendering_tiles_the_frames(monkeypatch):
    """Gymnasium's vector HumanRendering asserts one frame per sub-env (before: AssertionError)."""
    monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")
    from gymnasium.wrappers.vector import HumanRendering

    venv = HumanRendering(make_vec("TSP", num_envs=2, n=5, render_mode="rgb_array", render_size=(64, 64)))
    obs, _ = venv.reset(seed=0)
    for _ in range(6):
        obs, *_ = venv.step(first_allowed(obs["action_mask"]))
    assert venv.window is not None
    venv.close()


@pytest.mark.parametrize("problem", PROBLEMS)
def test_torch_mode__observations_are_in_the_declared_space(problem):
    """What torch mode emits matches the spaces it declares (``action_mask`` int8 as ``MultiBinary``)."""
    venv = make_vec(problem, num_envs=3, array_type="torch")
    obs, _ = venv.reset(seed=0)
    for key, space in venv.single_observation_space.spaces.items():
        assert obs[key].dtype == torch.as_tensor(np.zeros(1, space.dtype)).dtype, key
    assert venv.observation_space.contains({k: v.numpy() for k, v in obs.items()})
    assert torch.equal(venv.action_masks(), obs["action_mask"].bool())


@pytest.mark.parametrize("mode", list(AutoresetMode))
@pytest.mark.parametrize("problem", ["TSP", "CVRP", "PCTSP"])
def test_infos__numpy_and_torch_modes_report_the_same_episodes(problem, mode):
    """Episodes ended by the rules, by a masked action and by truncation are flagged alike in both modes
    (before: torch mode's ``_cost`` was False for the last two)."""
    envs = {at: make_vec(problem, num_envs=8, n=6, array_type=at, autoreset_mode=mode, max_episode_steps=5)
            for at in ("numpy", "torch")}
    obs = {at: env.reset(seed=1)[0] for at, env in envs.items()}
    rng = np.random.default_rng(0)
    ended = {"masked": 0, "truncated": 0, "all": 0}
    for _ in range(30):
        mask = obs["numpy"]["action_mask"].astype(bool)
        actions = np.array([rng.choice(np.flatnonzero(m)) if rng.random() > 0.1 else int(np.argmin(m)) for m in mask])
        infos = {}
        for at, env in envs.items():
            obs[at], _, _, truncated, info = env.step(actions if at == "numpy" else torch.as_tensor(actions))
            infos[at] = info.get("final_info", info)  # SAME_STEP: the infos of the episodes that ended
        flagged = infos["torch"]["_cost"].numpy()
        if not flagged.any():
            assert infos["numpy"] == {}
            continue
        assert infos["numpy"].keys() == infos["torch"].keys()
        for key, value in infos["numpy"].items():
            np.testing.assert_allclose(value, infos["torch"][key].numpy(), err_msg=key)
        ended["all"] += flagged.sum()
        ended["masked"] += infos["numpy"]["invalid_action"].sum()
        ended["truncated"] += (np.asarray(truncated) & flagged).sum()
    assert min(ended.values()) > 0, ended


@contextlib.contextmanager
def no_host_reads():
    """Every way a CPU tensor's value reaches Python (what would be a host synchronisation on CUDA) raises:
    a CPU stand-in for ``torch.cuda.set_sync_debug_mode("error")`` that runs on any machine."""
    names = ("__bool__", "__int__", "__float__", "__index__", "item", "tolist", "numpy", "cpu", "nonzero")
    saved = {name: getattr(torch.Tensor, name) for name in names}

    def refuse(name):
        def read(self, *args, **kwargs):
            raise AssertionError(f"the step read a tensor on the host (Tensor.{name})")
        return read

    try:
        for name in names:
            setattr(torch.Tensor, name, refuse(name))
        yield
    finally:
        for name, method in saved.items():
            setattr(torch.Tensor, name, method)


@pytest.mark.parametrize("problem", sorted(p.upper() for p in routing_gym.PROBLEMS))
def test_step__torch_mode_without_autoreset_never_reads_the_host(problem):
    """The rollouts of the trainer and of inference step the vector env in torch mode with autoreset
    disabled: those steps, masked and out-of-range actions included, launch device work only."""
    venv = make_vec(problem, num_envs=16, array_type="torch", autoreset_mode="Disabled")
    obs, _ = venv.reset(seed=0)
    g = torch.Generator().manual_seed(0)
    with no_host_reads():
        for t in range(40):
            a = torch.multinomial(obs["action_mask"].float() + (t % 7 == 3), 1, generator=g).squeeze(1)
            obs, *_ = venv.step(torch.where(torch.arange(16) == t % 16, a + 1000, a))


@pytest.mark.parametrize("problem", ["TSP", "CVRP"])
def test_observation__action_mask_is_int8_and_kept_by_the_next_steps(problem):
    """Torch mode gives the state's int8 mask as ``action_mask`` (no copy): an observation a user keeps
    still reads as it was after later steps and automatic resets."""
    venv = make_vec(problem, num_envs=4, n=5, array_type="torch", autoreset_mode="SameStep")
    obs, _ = venv.reset(seed=0)
    kept = []
    for _ in range(12):
        assert obs["action_mask"].dtype == torch.int8
        kept.append((obs["action_mask"], obs["action_mask"].clone()))
        obs, *_ = venv.step(obs["action_mask"].argmax(1))
    assert all(torch.equal(held, copy) for held, copy in kept)


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
@pytest.mark.parametrize("problem", sorted(p.upper() for p in routing_gym.PROBLEMS))
def test_autoreset__off_the_cpu_never_reads_the_host_and_every_episode_is_fresh(problem, mode):
    """Off the CPU (here forced on the CPU), automatic resets merge rows of a standby batch instead of
    reading which sub-envs reset: no step reads a tensor on the host, every reset episode is a new
    instance (no standby row used twice) and each episode's infos count only its own steps."""
    venv = make_vec(problem, num_envs=16, n=5, array_type="torch", autoreset_mode=mode)
    venv.unwrapped._reads_host = False  # what a CUDA device gets
    obs, _ = venv.reset(seed=0)
    g = torch.Generator().manual_seed(0)
    field = venv.unwrapped.problem.Instance._fields[0]  # ``locs``, or a unit's first field (ATSP's matrix)
    seen = {tuple(row.flatten().tolist()) for row in obs[field]}
    returns, actions = torch.zeros(16, dtype=torch.float64), [[] for _ in range(16)]
    waiting = torch.zeros(16, dtype=torch.bool)  # NEXT_STEP: ended, reset by the next step
    ended = fresh_count = 0
    for t in range(60):
        a = torch.multinomial(obs["action_mask"].float(), 1, generator=g).squeeze(1)
        a = torch.where(torch.rand(16, generator=g) < 0.15, (a + 1) % venv.unwrapped.n_total, a)  # some masked
        with no_host_reads():
            obs, r, term, trunc, info = venv.step(a)
        info = info.get("final_info", info)
        if mode == AutoresetMode.SAME_STEP:
            assert torch.equal(info["_cost"], term | trunc)
        fresh = waiting.clone() if mode == AutoresetMode.NEXT_STEP else term | trunc
        for i in range(16):
            if not waiting[i]:
                returns[i] += r[i]
                actions[i].append(int(a[i]))
            else:
                assert r[i] == 0.0 and not term[i]
            if term[i] or trunc[i]:
                ended += 1
                assert info["cost"][i] == pytest.approx(-returns[i].item(), rel=1e-5)
                tour = info["tour"][i]
                valid = actions[i][:-1] if info["invalid_action"][i] else actions[i]
                assert tour[tour >= 0].tolist() == valid
                returns[i], actions[i] = 0.0, []
            if fresh[i]:
                fresh_count += 1
                assert obs["num_steps"][i, 0] == 0
                key = tuple(obs[field][i].flatten().tolist())
                assert key not in seen, "an automatic reset repeated an instance"
                seen.add(key)
        if mode == AutoresetMode.NEXT_STEP:
            waiting = term | trunc
    assert ended > 16 and fresh_count > 16


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("mode", list(AutoresetMode))
@pytest.mark.parametrize("problem", ["TSP", "CVRP", "OP", "PCTSP"])
def test_step__cuda_torch_mode_never_synchronises_in_any_autoreset_mode(problem, mode):
    venv = make_vec(problem, num_envs=64, array_type="torch", device="cuda", autoreset_mode=mode)
    obs, _ = venv.reset(seed=0)
    g = torch.Generator(device="cuda").manual_seed(0)
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(40):
            a = torch.multinomial(obs["action_mask"].float(), 1, generator=g).squeeze(1)
            obs, *_ = venv.step(a)
    finally:
        torch.cuda.set_sync_debug_mode("default")


def test_clear_records__by_index_as_by_flags():
    """The records of the reset sub-envs start afresh alike whether they are flagged (B,) bool, as off the CPU,
    or listed by index, as the CPU's renewal gives them; the other rows keep theirs."""
    g = torch.Generator().manual_seed(0)
    records = (torch.rand(6, generator=g, dtype=torch.float64), torch.randint(1, 9, (6,), generator=g),
               torch.randint(0, 5, (6, 4), generator=g), torch.ones(6, dtype=torch.bool))
    rows = torch.tensor([0, 1, 1, 0, 0, 1], dtype=torch.bool)
    flagged, listed = [r.clone() for r in records], [r.clone() for r in records]
    clear_records(rows, *flagged)
    clear_records(rows.nonzero().squeeze(1), *listed)
    for before, a, b, fresh in zip(records, flagged, listed, (0.0, 0, -1, False)):
        assert torch.equal(a, b)
        assert (a[rows] == fresh).all() and torch.equal(a[~rows], before[~rows])


@pytest.mark.parametrize("problem", sorted(routing_gym.PROBLEMS))
def test_renew_on_host__gives_the_states_of_the_device_form(problem):
    """Where the host may be read (the CPU), automatic resets copy the reset rows in by index; off it, a ``where``
    over every row takes the same pool rows in the same order: the same new states and pool position, for no,
    some and every sub-env reset."""
    unit = routing_gym.get_problem(problem)
    g = torch.Generator().manual_seed(0)
    n = unit.valid_num_nodes(5)
    state = unit.reset(unit.generate(8, n, generator=g))
    pool = unit.reset(unit.generate(32, n, generator=g))
    for rows in (torch.zeros(8, dtype=torch.bool), torch.tensor([0, 1, 0, 0, 1, 1, 0, 1], dtype=torch.bool),
                 torch.ones(8, dtype=torch.bool)):
        nexts = [torch.tensor(3), torch.tensor(3)]
        by_where = renew(state, rows, pool, nexts[0])
        by_index = renew_on_host(state, rows.nonzero().squeeze(1), pool, nexts[1])
        assert type(by_where) is type(by_index)
        for x, y in zip(tensors_of(by_where), tensors_of(by_index), strict=True):
            assert x.dtype == y.dtype and torch.equal(x, y)
        assert int(nexts[0]) == int(nexts[1]) == 3 + int(rows.sum())
        if rows.any():  # the reset rows hold pool states, not the old ones
            assert not torch.equal(tensors_of(by_index)[0][rows], tensors_of(state)[0][rows])
