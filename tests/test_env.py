"""The Gymnasium single envs: registration, checkers, episodes, user instances and errors."""
import subprocess
import sys
import warnings

import gymnasium as gym
import numpy as np
import pytest
import torch

import routing_gym  # noqa: F401
from routing_gym.problems import step, tour_cost
from routing_gym.problems.base import invalid_penalty
from routing_gym.problems.pctsp import penalty_bound

PROBLEMS = tuple(p.label for p in routing_gym.PROBLEMS.values())  # every problem in the registry
FIXED_IDS = [f"routing/{p.label}-{n}" for p in routing_gym.PROBLEMS.values() for n in p.sizes]


def random_episode(env, seed, rng):
    obs, _ = env.reset(seed=seed)
    ret, steps = 0.0, 0
    while True:
        assert np.array_equal(obs["action_mask"].astype(bool), env.unwrapped.action_masks())
        a = int(rng.choice(np.flatnonzero(obs["action_mask"])))
        obs, r, term, trunc, info = env.step(a)
        assert isinstance(r, float) and isinstance(term, bool) and isinstance(trunc, bool)
        ret += r
        steps += 1
        if term:
            return ret, info, steps


@pytest.mark.parametrize("env_id", FIXED_IDS + [f"routing/{p}-v0" for p in PROBLEMS])
def test_registered_ids__pass_gymnasium_and_sb3_checkers_without_warnings(env_id):
    from gymnasium.utils.env_checker import check_env
    from stable_baselines3.common.env_checker import check_env as sb3_check_env

    problem = routing_gym.get_problem(env_id.split("/")[1].split("-")[0])
    env = gym.make(env_id, num_nodes=problem.valid_num_nodes(7)) if env_id.endswith("-v0") else gym.make(env_id)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env.unwrapped, skip_render_check=True)
        sb3_check_env(env.unwrapped, warn=True, skip_render_check=True)
    msgs = [str(w.message) for w in caught if "unconventional shape" not in str(w.message)]
    assert msgs == []


def test_parametric_ids__take_num_nodes_and_prize_type():
    env = gym.make("routing/OP-v0", num_nodes=37, prize_type="unif")
    obs, _ = env.reset(seed=0)
    assert obs["locs"].shape == (38, 2)
    prizes = obs["prize"][1:] * 100
    assert np.allclose(prizes, np.round(prizes), atol=1e-4)
    assert gym.make("routing/TSP-v0", num_nodes=12).reset(seed=0)[0]["locs"].shape == (12, 2)


@pytest.mark.parametrize("env_id,kwargs", [
    ("routing/TSP-20", {"prize_type": "dist"}),
    ("routing/CVRP-v0", {"capacity": 30}),
    ("routing/PCTSP-50", {"foo": 1}),
])
def test_make__unknown_argument_is_a_type_error(env_id, kwargs):
    with pytest.raises(TypeError):
        gym.make(env_id, **kwargs)


def test_make__bad_argument_values_are_named():
    with pytest.raises(ValueError, match="num_nodes"):
        gym.make("routing/TSP-v0", num_nodes=1)
    with pytest.raises(ValueError, match="prize_type"):
        gym.make("routing/OP-v0", prize_type="gauss")
    with pytest.raises(ValueError, match="invalid_action"):
        gym.make("routing/TSP-20", invalid_action="ignore")


def test_make__module_prefix_registers_without_prior_import():
    code = "import gymnasium as gym; e = gym.make('routing_gym:routing/TSP-50'); print(e.reset(seed=0)[0]['locs'].shape)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "(50, 2)"


@pytest.mark.parametrize("problem", PROBLEMS)
def test_episode__return_equals_minus_info_cost_and_tour_matches(problem):
    env = gym.make(f"routing/{problem}-20")
    rng = np.random.default_rng(0)
    for seed in range(3):
        ret, info, steps = random_episode(env, seed, rng)
        assert info["cost"] == -ret and info["invalid_action"] is False
        core, inst = env.unwrapped.problem, env.unwrapped.state.instance
        tour = info["tour"]
        assert tour.dtype == np.int64 and tour.shape == (core.max_steps(core.n_total_of(inst)),)  # one shape always
        assert (tour[:steps] >= 0).all() and (tour[steps:] == -1).all()  # padded with -1
        replayed = tour_cost(core, inst, torch.as_tensor(tour[tour >= 0])[None])  # the tour, unpadded
        assert float(replayed[0]) == pytest.approx(info["cost"], abs=1e-5)


@pytest.mark.parametrize("problem", PROBLEMS)
def test_observation__fresh_arrays_each_call(problem):
    env = gym.make(f"routing/{problem}-20")
    obs, _ = env.reset(seed=0)
    key = env.unwrapped.problem.observation[0].key  # ``locs``, or a unit's first entry (ATSP's matrix)
    obs[key][:] = -1
    obs["action_mask"][:] = 0
    obs2 = env.unwrapped._observation()
    assert obs2[key].min() >= 0 and obs2["action_mask"].any()


def test_reset__same_seed_same_instance_and_fields_bounded():
    env = gym.make("routing/CVRP-20")
    a, _ = env.reset(seed=3)
    b, _ = env.reset(seed=3)
    c, _ = env.reset(seed=4)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert not np.array_equal(a["locs"], c["locs"])
    assert env.observation_space.contains(a)


def test_reset__user_instance_is_used_and_validated():
    env = gym.make("routing/CVRP-v0", num_nodes=2)
    inst = {"locs": [[0, 0], [1, 0], [0, 1]], "demand": [0, 0.6, 0.6]}
    obs, _ = env.reset(options={"instance": inst})
    assert np.allclose(obs["locs"], inst["locs"]) and np.allclose(obs["demand"], inst["demand"])
    total = 0.0
    for a in (1, 0, 2):
        obs, r, term, _, info = env.step(a)
        total += r
    assert term and info["cost"] == pytest.approx(4.0, abs=1e-6) and total == pytest.approx(-4.0, abs=1e-6)
    with pytest.raises(ValueError, match="exceeds the capacity"):
        env.reset(options={"instance": {"locs": inst["locs"], "demand": [0, 1.2, 0.1]}})
    with pytest.raises(ValueError, match="has 4 nodes; this env has 3"):
        env.reset(options={"instance": {"locs": np.zeros((4, 2)), "demand": [0, 0.1, 0.1, 0.1]}})
    with pytest.raises(ValueError, match="unknown reset option"):
        env.reset(options={"instances": inst})


@pytest.mark.parametrize("problem", PROBLEMS)
def test_masked_action__terminates_with_penalty_by_default(problem):
    env = gym.make(f"routing/{problem}-20")
    obs, _ = env.reset(seed=0)
    ret, taken = 0.0, []
    if obs["action_mask"].all():  # nothing masked yet: take a first step
        obs, r, *_ = env.step(1)
        ret, taken = r, [1]
    bad = int(np.flatnonzero(obs["action_mask"] == 0)[0])
    penalty = float(invalid_penalty(env.unwrapped.problem, env.unwrapped.state)[0])
    _, r, term, trunc, info = env.step(bad)
    assert term and not trunc and info["invalid_action"] is True
    assert r == pytest.approx(-penalty)  # float32 reward
    assert info["cost"] == -(ret + r)
    assert info["tour"][info["tour"] >= 0].tolist() == taken  # the masked action is not part of the tour
    with pytest.raises(RuntimeError, match="episode has ended"):
        env.step(0)


def test_masked_action__raise_mode_names_the_allowed_set_and_keeps_the_state():
    env = gym.make("routing/CVRP-v0", num_nodes=3, invalid_action="raise")
    env.reset(options={"instance": {"locs": [[0, 0], [0.1, 0], [0.2, 0], [0.3, 0]], "demand": [0, 0.5, 0.5, 0.5]}})
    with pytest.raises(ValueError, match=r"action 0 is masked .* allowed actions: \[1, 2, 3\]"):
        env.step(0)
    _, _, term, _, _ = env.step(1)
    assert not term


def test_step__errors_for_out_of_range_and_before_reset():
    env = gym.make("routing/TSP-20").unwrapped
    with pytest.raises(RuntimeError, match="reset"):
        env.step(0)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="outside Discrete"):
        env.step(20)
    with pytest.raises(ValueError, match="integer"):
        env.step(1.5)


@pytest.mark.parametrize("problem", sorted(routing_gym.PROBLEMS))
def test_reset__generated_instances_of_every_size_lie_in_the_space(problem):
    """Small sizes too, where the generator's prizes (PCTSP: 4/n) and penalties (3K/n: 6 for n = 1) exceed the
    large-n bounds."""
    core = routing_gym.PROBLEMS[problem]
    for n in sorted({core.valid_num_nodes(k) for k in range(core.min_num_nodes, 6)}):
        env = gym.make(f"routing/{core.label}-v0", num_nodes=n)
        for seed in range(20):
            assert env.observation_space.contains(env.reset(seed=seed)[0]), (n, seed)


def test_make__a_sized_id_fixes_num_nodes_and_v0_takes_it():
    with pytest.raises(ValueError, match=r"routing/TSP-20 has num_nodes=20, got num_nodes=30; make routing/TSP-v0"):
        gym.make("routing/TSP-20", num_nodes=30)
    with pytest.raises(ValueError, match="routing/CVRP-50 has num_nodes=50"):
        gym.make("routing/CVRP-50", num_nodes=20)
    assert gym.make("routing/TSP-20", num_nodes=20).unwrapped.num_nodes == 20
    assert gym.make("routing/TSP-v0", num_nodes=30).unwrapped.num_nodes == 30
    assert gym.make("routing/TSP-v0").unwrapped.num_nodes == 20
    for env_id in FIXED_IDS:
        assert gym.spec(env_id).kwargs["num_nodes"] == int(env_id.rsplit("-", 1)[1])


@pytest.mark.parametrize("size", [(600,), (1, 1), (63, 600), (600.0, 600), (True, 600), 600, "600x600"])
def test_make__render_size_is_two_integers_of_at_least_64(size):
    with pytest.raises(ValueError, match="render_size must be"):
        gym.make("routing/TSP-20", render_mode="rgb_array", render_size=size)
    assert gym.make("routing/TSP-20", render_mode="rgb_array", render_size=(64, np.int64(80))).unwrapped.render_size \
        == (64, 80)


def test_reset__the_problems_instance_of_batch_one_is_accepted_and_validated():
    core = routing_gym.PROBLEMS["cvrp"]
    inst = core.generate(2, 4, generator=torch.Generator().manual_seed(0))
    env = gym.make("routing/CVRP-v0", num_nodes=4)
    first = type(inst)(*(f[:1] for f in inst))
    obs, _ = env.reset(options={"instance": first})
    assert np.array_equal(obs["locs"], first.locs[0].numpy())
    with pytest.raises(ValueError, match="holds 2 instances; a single env plays one"):
        env.reset(options={"instance": inst})
    with pytest.raises(ValueError, match="'demand' must be 0 at the depot"):
        env.reset(options={"instance": first._replace(demand=first.demand + 0.05)})


@pytest.mark.parametrize("problem", PROBLEMS)
def test_masked_action__progress_always_pays_and_the_penalty_is_above_any_feasible_remainder(problem):
    """Along random valid episodes (with user instances at the validated extremes: PCTSP penalties up to their
    bound), at every state: failing now costs more than a valid step followed by failing (or than the
    finishing step), and more than the rest of the episode actually played. With a constant penalty an
    unmasked learner that expects to fail later gains by failing at once."""
    core = routing_gym.PROBLEMS[problem.lower()]
    gen = torch.Generator().manual_seed(0)
    inst = core.generate(64, 6, generator=gen)
    if "penalty" in inst._fields:  # the largest penalties the envs accept
        n = inst.locs.shape[1]
        inst = inst._replace(penalty=inst.penalty / inst.penalty.amax(dim=1, keepdim=True) * penalty_bound(n))
    state = core.reset(inst)

    def failing(state):  # what a masked action costs now (node -1 is outside the nodes: always masked)
        _, reward, invalid = step(core, state, torch.full_like(state.current, -1))
        return torch.where(invalid, -reward, 0.0)

    penalties, costs = [], []
    while not bool(state.done.all()):
        action = state.mask.float().multinomial(1, generator=gen).squeeze(1)
        before = ~state.done
        penalties.append(failing(state))
        state, reward, invalid = step(core, state, action)
        assert not invalid.any()
        costs.append(-reward)
        assert (penalties[-1] > costs[-1] + failing(state))[before].all()  # progress pays
    remainders = torch.stack(costs).flip(0).cumsum(0).flip(0)  # what the rest of each episode cost
    played = torch.stack(penalties) > 0
    assert (torch.stack(penalties) > remainders)[played].all()


@pytest.mark.parametrize("problem", PROBLEMS)
def test_info__tour_has_one_shape_for_every_episode_and_a_replay_buffer_stores_it(problem):
    """Tianshou's buffer stacks the infos it stores: a tour whose length varies with the episode broke it
    ("shape mismatch"); episodes ended by a masked action included."""
    tianshou = pytest.importorskip("tianshou")
    env = gym.make(f"routing/{problem}-v0", num_nodes=6)
    buffer = tianshou.data.ReplayBuffer(200)
    rng = np.random.default_rng(0)
    shapes = set()
    for episode in range(6):
        obs, _ = env.reset(seed=episode)
        done = False
        while not done:
            masked = episode % 2 and rng.random() < 0.3  # some episodes end on a masked action
            choices = np.flatnonzero(obs["action_mask"] != masked)
            action = int(rng.choice(choices)) if len(choices) else 0
            next_obs, r, term, trunc, info = env.step(action)
            buffer.add(tianshou.data.Batch(obs=obs, act=action, rew=r, terminated=term, truncated=trunc,
                                           obs_next=next_obs, info=info))
            obs, done = next_obs, term or trunc
        shapes.add(info["tour"].shape)
    assert len(shapes) == 1 and buffer.info.tour.shape[1:] == shapes.pop() and len(buffer) > 12


def test_import__does_not_load_the_compiler():
    """``import routing_gym`` (and ``gym.make``) leave ``torch.compile``'s machinery unloaded (about 2 s) until a
    ``compile=True`` env asks for it."""
    code = ("import sys, gymnasium as gym, routing_gym; gym.make('routing/TSP-10').reset(seed=0); "
            "print('torch._dynamo' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
