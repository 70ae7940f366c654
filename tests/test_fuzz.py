"""Property-based fuzzing (hypothesis, bounded and deterministic) of every registered problem through the
single env, the native vector env (numpy and torch actions) and the core's instance validation.

Documented outcomes checked: every observation lies in its observation space; a mask never allows a
customer already served (TSP: a node already visited; SDVRP splits deliveries, so there: a customer whose
remaining demand is 0); a valid episode's rewards sum to ``-info["cost"]``, which ``tour_cost`` confirms
from the tour; a masked action ends the episode with the penalty and ``info["invalid_action"]``; and bad
input raises only the documented ``ValueError`` (Gymnasium's ``error.Error`` for a bad seed).
"""
import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import routing_gym  # noqa: F401
from routing_gym.problems import PROBLEMS, invalid_penalty, tour_cost

FUZZ = settings(max_examples=50, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
NAMES = sorted(PROBLEMS)


def problem_and_size():
    """(problem name, num_nodes): small valid sizes, down to each problem's minimum."""
    return st.sampled_from(NAMES).flatmap(
        lambda name: st.tuples(st.just(name), st.integers(PROBLEMS[name].min_num_nodes, 6).map(PROBLEMS[name].valid_num_nodes)))


# a step's choice: ("pick", k) takes the k-th allowed action; ("raw", a) takes a as it is (masked or not,
# possibly outside the nodes)
CHOICE = st.one_of(st.tuples(st.just("pick"), st.integers(0, 50)), st.tuples(st.just("raw"), st.integers(-3, 10)))


def choose(choice, mask) -> int:
    kind, k = choice
    allowed = np.flatnonzero(mask)
    return int(allowed[k % len(allowed)]) if kind == "pick" else k


def check_mask_spares_served(name, obs_i, mask_i, served) -> None:
    """One unfinished sub-env's mask allows no customer already served."""
    if name == "sdvrp":  # split deliveries: served means no demand left
        assert not (mask_i[1:] & (obs_i["demand"][1:] <= 0)).any()
    else:
        depot = PROBLEMS[name].has_depot  # node 0 is then the depot, which may be revisited
        assert not any(mask_i[j] for j in served if j >= depot), (name, sorted(served), mask_i)


def as_numpy(obs) -> dict:
    return {k: (v.cpu().numpy().astype(np.int8) if k == "action_mask" else v.cpu().numpy()) for k, v in obs.items()}


# ------------------------------------------------------------------------------------------ single env
@FUZZ
@given(problem_and_size(), st.integers(0, 2**16), st.lists(CHOICE, min_size=1, max_size=40))
def test_single_env__random_play_keeps_the_documented_outcomes(pn, seed, choices):
    name, n = pn
    env = gym.make(f"routing/{PROBLEMS[name].label}-v0", num_nodes=n)
    core, n_total = env.unwrapped.problem, env.unwrapped.n_total
    obs, _ = env.reset(seed=seed)
    ret, served, tour = 0.0, set(), []
    for choice in choices:
        assert env.observation_space.contains(obs)
        check_mask_spares_served(name, obs, obs["action_mask"].astype(bool), served)
        a = choose(choice, obs["action_mask"])
        if not 0 <= a < n_total:
            with pytest.raises(ValueError, match="outside Discrete"):
                env.step(a)
            continue
        masked = not obs["action_mask"][a]
        penalty = float(invalid_penalty(core, env.unwrapped.state)[0])
        obs, r, term, trunc, info = env.step(a)
        ret += r
        assert not trunc
        if masked:
            assert term and info["invalid_action"] is True and r == pytest.approx(-penalty)
        else:
            served.add(a)
            tour.append(a)
        if term:
            assert env.observation_space.contains(obs)
            assert info["cost"] == -ret and info["tour"][info["tour"] >= 0].tolist() == tour
            if not masked:
                replayed = tour_cost(core, env.unwrapped.state.instance, torch.tensor([tour]))
                assert float(replayed[0]) == pytest.approx(info["cost"], abs=1e-4)
            return


NON_INTEGER_FLOATS = st.one_of(st.sampled_from([0.5, -1.5, 2.7, 1e-9, np.nan, np.inf, -np.inf]),
                               st.floats(-10, 10).filter(lambda x: not x.is_integer()))
BAD_ACTIONS = st.one_of(
    NON_INTEGER_FLOATS,
    st.booleans(), st.text(max_size=3), st.none(), st.complex_numbers(min_magnitude=1),
    st.lists(st.integers(0, 3), min_size=2, max_size=3), st.integers(-10, -1), st.integers(50, 2**70))


@FUZZ
@given(problem_and_size(), BAD_ACTIONS)
def test_single_env__bad_actions_are_value_errors_and_change_nothing(pn, action):
    name, n = pn
    env = gym.make(f"routing/{PROBLEMS[name].label}-v0", num_nodes=n)
    obs, _ = env.reset(seed=0)
    with pytest.raises(ValueError):
        env.step(action)
    assert all(np.array_equal(v, env.unwrapped._observation()[k]) for k, v in obs.items())


# ------------------------------------------------------------------------------------------ vector env
@FUZZ
@given(problem_and_size(), st.integers(1, 4), st.sampled_from(["numpy", "torch"]),
       st.sampled_from([AutoresetMode.NEXT_STEP, AutoresetMode.DISABLED]), st.integers(0, 2**16),
       st.lists(st.lists(CHOICE, min_size=4, max_size=4), min_size=1, max_size=30))
def test_vector_env__random_play_keeps_the_documented_outcomes(pn, b, array_type, mode, seed, steps):
    name, n = pn
    venv = gym.make_vec(f"routing/{PROBLEMS[name].label}-v0", num_envs=b, vectorization_mode="vector_entry_point",
                        num_nodes=n, array_type=array_type, autoreset_mode=mode)
    core, n_total = venv.unwrapped.problem, venv.unwrapped.n_total
    obs, _ = venv.reset(seed=seed)
    ret, served, tours = np.zeros(b), [set() for _ in range(b)], [[] for _ in range(b)]
    finished = np.zeros(b, bool)  # the sub-envs whose episode has ended (NEXT_STEP: ended on the last step)
    for choices in steps:
        view = obs if array_type == "numpy" else as_numpy(obs)
        assert venv.observation_space.contains(view)
        masks = view["action_mask"].astype(bool)
        for i in np.flatnonzero(~finished):
            check_mask_spares_served(name, {k: v[i] for k, v in view.items()}, masks[i], served[i])
        actions = np.array([choose(c, m) for c, m in zip(choices, masks)])
        outside = (actions < 0) | (actions >= n_total)
        if array_type == "numpy" and outside.any():  # numpy actions are checked on the host, as the single env's
            with pytest.raises(ValueError, match="outside Discrete"):
                venv.step(actions)
            continue
        masked = ~finished & (outside | ~masks[np.arange(b), actions.clip(0, n_total - 1)])
        penalty = invalid_penalty(core, venv.unwrapped.state).cpu().numpy()
        obs, r, term, trunc, info = venv.step(actions if array_type == "numpy" else torch.as_tensor(actions))
        r, term, trunc = (np.asarray(x.cpu() if isinstance(x, torch.Tensor) else x) for x in (r, term, trunc))
        invalid = np.asarray(info["invalid_action"].cpu() if array_type == "torch" else info.get("invalid_action", 0))
        assert not trunc.any()
        assert (r[finished] == 0).all()  # finished sub-envs (resetting, or staying done) ignore their action
        assert r[masked] == pytest.approx(-penalty[masked]) and term[masked].all()
        ret += np.where(finished, 0.0, r)
        for i in np.flatnonzero(~finished & ~masked):
            served[i].add(int(actions[i]))
            tours[i].append(int(actions[i]))
        instance = venv.unwrapped.state.instance  # a sub-env ended now still holds its episode's instance
        for i in np.flatnonzero(term & ~finished):
            cost = float(info["cost"][i])
            assert cost == pytest.approx(-ret[i], abs=1e-9) and bool(invalid[i]) == masked[i]
            if not masked[i]:
                replayed = tour_cost(core, type(instance)(*(f[i:i + 1] for f in instance)), torch.tensor([tours[i]]))
                assert float(replayed[0]) == pytest.approx(cost, abs=1e-4)
        if mode == AutoresetMode.NEXT_STEP:  # a sub-env ended now resets on the next step (its action ignored)
            for i in np.flatnonzero(finished):
                ret[i], served[i], tours[i] = 0.0, set(), []
            finished = term.copy()
        else:
            finished |= term


BAD_VECTOR_ACTIONS = st.one_of(
    hnp.arrays(st.sampled_from([np.float32, np.float64, np.bool_, np.complex64]), 3),
    hnp.arrays(np.int64, st.sampled_from([(2,), (4,), (3, 1), ()]), elements=st.integers(0, 3)),
    st.lists(NON_INTEGER_FLOATS, min_size=3, max_size=3),
)


@FUZZ
@given(st.sampled_from(NAMES), st.sampled_from(["numpy", "torch"]), st.sampled_from(["terminate", "raise"]),
       BAD_VECTOR_ACTIONS, st.booleans())
def test_vector_env__bad_actions_are_value_errors_and_change_nothing(name, array_type, invalid_action, actions,
                                                                     as_tensor):
    venv = gym.make_vec(f"routing/{PROBLEMS[name].label}-v0", num_envs=3, vectorization_mode="vector_entry_point",
                        num_nodes=PROBLEMS[name].valid_num_nodes(3), array_type=array_type, invalid_action=invalid_action)
    venv.reset(seed=0)
    before = venv.unwrapped.state
    with pytest.raises(ValueError):
        venv.step(torch.as_tensor(np.asarray(actions)) if as_tensor else actions)
    assert venv.unwrapped.state is before


@FUZZ
@given(st.sampled_from(NAMES), st.sampled_from(["numpy", "torch"]),
       st.lists(st.integers(-3, 8), min_size=3, max_size=3))
def test_vector_env__raise_mode_names_the_first_refused_action_or_steps(name, array_type, actions):
    venv = gym.make_vec(f"routing/{PROBLEMS[name].label}-v0", num_envs=3, vectorization_mode="vector_entry_point",
                        num_nodes=PROBLEMS[name].valid_num_nodes(3), array_type=array_type, invalid_action="raise")
    obs, _ = venv.reset(seed=1)
    mask = np.asarray(obs["action_mask"].cpu() if array_type == "torch" else obs["action_mask"]).astype(bool)
    n_total = mask.shape[1]
    outside = [not 0 <= a < n_total for a in actions]
    refused = [o or not mask[i, a] for i, (o, a) in enumerate(zip(outside, actions))]
    if any(refused):  # numpy actions' range is checked first, on the host
        first = outside.index(True) if array_type == "numpy" and any(outside) else refused.index(True)
        with pytest.raises(ValueError, match=f"sub-env {first}: action {actions[first]} is"):
            venv.step(torch.tensor(actions) if array_type == "torch" else np.array(actions))
    else:
        venv.step(torch.tensor(actions) if array_type == "torch" else np.array(actions))


# ------------------------------------------------------------------------------------------ instances
# values written into a valid instance: anywhere in and around the fields' ranges, the bounds and just
# beyond them, NaN and inf
VALUES = st.one_of(st.floats(-0.5, 1.5, width=32), st.sampled_from(
    [0.0, 1.0, float(np.nextafter(np.float32(1), np.float32(2))), -1e-9, 5.0, 100.0, np.nan, np.inf, -np.inf]))


@FUZZ
@given(problem_and_size(), st.integers(0, 2**16), st.lists(st.tuples(st.integers(0, 10**6), VALUES), max_size=3),
       st.booleans())
def test_instances__refused_with_a_value_error_or_observed_inside_the_space(pn, seed, edits, as_instance):
    """A generated instance with up to 3 entries overwritten, as a dict or as the problem's Instance: the
    single env and the vector env both refuse it with ValueError, or both play it inside their spaces."""
    name, n = pn
    core = PROBLEMS[name]
    generated = core.generate(1, n, generator=torch.Generator().manual_seed(seed))
    fields = {k: v[0].numpy().copy() for k, v in generated._asdict().items()}
    for where, value in edits:
        flat = fields[sorted(fields)[where % len(fields)]].reshape(-1)  # a view: writes reach the field
        flat[where % flat.size] = value
    env = gym.make(f"routing/{core.label}-v0", num_nodes=n)
    venv = gym.make_vec(f"routing/{core.label}-v0", num_envs=1, vectorization_mode="vector_entry_point", num_nodes=n)
    batch = {k: v[None] for k, v in fields.items()}
    batch = core.Instance(**{k: torch.as_tensor(v) for k, v in batch.items()}) if as_instance else batch
    try:
        obs, _ = env.reset(options={"instance": batch if as_instance else fields})
    except ValueError:
        with pytest.raises(ValueError):
            venv.reset(options={"instances": batch})
        return
    assert env.observation_space.contains(obs)
    vobs, _ = venv.reset(options={"instances": batch})
    assert venv.observation_space.contains(vobs)
    ret = 0.0
    while True:  # a valid episode on an accepted instance: its rewards sum to minus its cost
        obs, r, term, _, info = env.step(int(np.flatnonzero(obs["action_mask"])[0]))
        ret += r
        assert env.observation_space.contains(obs) and np.isfinite(r)
        if term:
            assert info["cost"] == -ret and not info["invalid_action"]
            break


@FUZZ
@given(st.one_of(NON_INTEGER_FLOATS, st.text(max_size=2), st.integers(-100, -1),
                 st.lists(NON_INTEGER_FLOATS, min_size=2, max_size=2)))
def test_seeds__refused_alike_by_the_single_and_the_vector_env(seed):
    env = gym.make("routing/TSP-v0", num_nodes=4)
    venv = gym.make_vec("routing/TSP-v0", num_envs=2, vectorization_mode="vector_entry_point", num_nodes=4)
    if not isinstance(seed, list):
        with pytest.raises(gym.error.Error):
            env.reset(seed=seed)
    with pytest.raises(gym.error.Error):
        venv.reset(seed=seed)
