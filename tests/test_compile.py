"""``compile=True``: the envs step the same dynamics compiled (the vector env with ``torch.compile``, the single
env by inductor for its state's fixed layout), and play exactly as the eager envs (observations, rewards, ends
and infos, up to float rounding)."""
import shutil

import gymnasium as gym
import numpy as np
import pytest
import torch
import torch._dynamo

import routing_gym
from routing_gym.env import eager_step
from routing_gym.problems import step
from routing_gym.problems.base import compiled, fixed_layout_step, layout_guard
from routing_gym.vector import advance

pytestmark = pytest.mark.skipif(not (shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")),
                                reason="torch.compile on the CPU needs a C++ compiler")


def compiled_graphs() -> int:
    return torch._dynamo.utils.counters["stats"]["unique_graphs"]


def assert_same(a, b, what):
    if isinstance(a, dict):
        assert a.keys() == b.keys(), what
        for key in a:
            assert_same(a[key], b[key], f"{what}[{key!r}]")
    else:
        a, b = np.asarray(a), np.asarray(b)
        assert a.dtype == b.dtype and a.shape == b.shape, what
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6, err_msg=what)


@pytest.mark.parametrize("mode", ["NextStep", "Disabled"])
def test_vector_env__compiled_steps_as_eager(mode):
    envs = [gym.make_vec("routing/CVRP-v0", num_envs=5, num_nodes=6, vectorization_mode="vector_entry_point",
                         array_type="torch", autoreset_mode=mode, max_episode_steps=9, compile=c) for c in (False, True)]
    obs = [env.reset(seed=0)[0] for env in envs]
    g = torch.Generator().manual_seed(0)
    for t in range(30):
        a = torch.multinomial(obs[0]["action_mask"].float() + 0.05 * (t % 5 == 4), 1, generator=g).squeeze(1)
        out = [env.step(a) for env in envs]
        for name, x, y in zip(("obs", "reward", "terminated", "truncated", "info"), out[0], out[1]):
            assert_same(x, y, f"step {t} {name}")
        obs = [o[0] for o in out]
    compiled_advance = envs[1].unwrapped._advance_fn  # on the CPU: compiled for the layout
    assert compiled_advance is not None and compiled_advance is not advance


def test_compile__must_be_a_bool():
    with pytest.raises(ValueError, match="compile must be True or False, got 'yes'"):
        gym.make("routing/TSP-20", compile="yes")
    with pytest.raises(ValueError, match="compile must be True or False"):
        gym.make_vec("routing/TSP-20", num_envs=2, vectorization_mode="vector_entry_point", compile=1)


def test_compile__refused_on_a_torch_whose_compiler_failed_on_the_steps(monkeypatch):
    """torch 2.11's compiler failed on the steps on CUDA (a dynamo error, a wrong state): compile=True on an
    older torch than 2.13 is a clear error, compile=False runs."""
    monkeypatch.setattr(torch, "__version__", "2.11.0+cu130")
    with pytest.raises(RuntimeError, match=r"compile=True needs torch 2.13 or newer \(this is torch 2.11.0\+cu130"):
        gym.make("routing/TSP-20", compile=True)
    with pytest.raises(RuntimeError, match="use compile=False"):
        gym.make_vec("routing/TSP-20", num_envs=2, vectorization_mode="vector_entry_point", compile=True)
    env = gym.make("routing/TSP-20", compile=False)
    assert env.reset(seed=0)[0]["action_mask"].all()


def test_compile__each_problem_has_its_own_compile_cache():
    """Dynamo keeps a few compiled versions per function (``recompile_limit``) and runs the rest eagerly;
    every problem compiles its own copy of a step it is given (:func:`compiled`, what the vector env runs off the
    CPU), so one problem's versions never crowd out another's."""
    torch._dynamo.reset()
    counts = []
    with torch._dynamo.config.patch(recompile_limit=2):
        for name in ("tsp", "cvrp", "op"):
            unit = routing_gym.get_problem(name)
            before = compiled_graphs()
            fn = compiled(step, "cpu", unit)
            state = unit.reset(unit.generate(2, 5, generator=torch.Generator().manual_seed(0)))
            for _ in range(3):
                state = fn(unit, state, torch.multinomial(state.mask.float(), 1).squeeze(1))[0]
            counts.append(compiled_graphs() - before)
    assert min(counts) >= 1, counts


def test_single_env__one_compiled_step_per_layout():
    """The single env's step is compiled once per state layout and shared: a second env of the same size, with
    a user's instance, reuses it, another size compiles its own, a state of another layout raises; a state whose tensors share storage (a reset's first and current node)
    steps as separate tensors."""
    env = gym.make("routing/TSP-v0", num_nodes=5, compile=True).unwrapped
    env.reset(seed=0)
    other = gym.make("routing/TSP-v0", num_nodes=5, compile=True).unwrapped
    other.reset(options={"instance": {"locs": np.random.default_rng(0).random((5, 2), dtype=np.float32)}})
    assert other._step is env._step
    state, fn = fixed_layout_step(env.problem, env.problem.reset(env.state.instance))
    assert fn is env._step and all(t.is_contiguous() for t in state if isinstance(t, torch.Tensor))
    with torch.inference_mode():
        new, reward, invalid = fn(env.problem, state, torch.tensor([2]))
    assert new.first.tolist() == new.current.tolist() == [2] and not invalid.item()
    with torch.inference_mode():
        new, reward, invalid = fn(env.problem, new, torch.tensor([4]))
    assert new.first.tolist() == [2] and new.current.tolist() == [4]
    assert reward.item() == pytest.approx(-torch.dist(state.instance.locs[0, 2], state.instance.locs[0, 4]).item())
    # another layout is refused, never misread: a shape, strides or a dtype
    with pytest.raises(ValueError, match=r"tensor 5 has shape torch.Size\(\[1, 6\]\) \(compiled for torch.Size"):
        fn(env.problem, new._replace(visited=torch.zeros(1, 6, dtype=torch.int8)), torch.tensor([1]))
    with pytest.raises(ValueError, match=r"tensor 5 has strides \(1, 1\) \(compiled for \(5, 1\)\)"):
        fn(env.problem, new._replace(visited=torch.zeros(5, 1, dtype=torch.int8).t()), torch.tensor([1]))
    with pytest.raises(ValueError, match="tensor 5 has dtype torch.bool"):
        fn(env.problem, new._replace(visited=torch.zeros(1, 5, dtype=torch.bool)), torch.tensor([1]))
    with pytest.raises(ValueError, match="another structure"):
        fn(env.problem, new.instance, torch.tensor([1]))
    with pytest.raises(ValueError, match="compiled for tsp"):  # nor is another problem's state run through it
        fn(routing_gym.get_problem("atsp"), new, torch.tensor([1]))
    bigger = gym.make("routing/TSP-v0", num_nodes=6, compile=True).unwrapped
    bigger.reset(seed=0)
    assert bigger._step is not env._step  # another layout, its own compiled step


def test_layout_guard__says_no_to_another_layout_in_every_mode_it_learns():
    """The compiled functions' layout check: yes to tensors of the layout it was made from, no to another shape,
    strides, dtype or count; in inference mode it says no until told the layout holds there too, then yes, and
    still no to another layout."""
    made = [torch.zeros(8, 5), torch.zeros(8, dtype=torch.long)]
    guard = layout_guard(made)
    same = [torch.ones(8, 5), torch.ones(8, dtype=torch.long)]
    assert guard(same)
    others = ([torch.zeros(8, 6), same[1]], [torch.zeros(5, 8).t(), same[1]], [same[0].double(), same[1]], same[:1])
    assert not any(guard(o) for o in others)
    with torch.inference_mode():
        assert not guard(same)
        guard.learn(same)
        assert guard(same) and not any(guard(o) for o in others)
    assert guard(same)


def test_compiled_for_layout__without_a_layout_guard_still_checks_every_call(monkeypatch):
    """On a torch whose ``TensorGuards`` is missing or checks otherwise (``layout_guard`` gives None), a function
    compiled for a layout steps as the eager one, and refuses another layout (a dtype too, which inductor's own
    asserts do not check) with the same ``ValueError``."""
    import routing_gym.problems.base as base

    monkeypatch.setattr(base, "layout_guard", lambda tensors: None)
    monkeypatch.setattr(base, "_for_layout", {})  # compiled afresh, without the guard
    problem = routing_gym.get_problem("tsp")
    state, fn = fixed_layout_step(problem, problem.reset(problem.generate(2, 6, generator=torch.Generator().manual_seed(0))))
    action = torch.tensor([3, 5])
    new, reward, invalid = fn(problem, state, action)
    eager, eager_reward, eager_invalid = step(problem, state, action)
    for a, b in zip([*base.tensors_of(new), reward, invalid], [*base.tensors_of(eager), eager_reward, eager_invalid]):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)  # (integers and bools exactly)
    with pytest.raises(ValueError, match="tensor 5 has dtype torch.bool"):
        fn(problem, new._replace(visited=new.visited.bool()), action)
    with pytest.raises(ValueError, match=r"tensor 5 has shape torch.Size\(\[2, 7\]\)"):
        fn(problem, new._replace(visited=torch.zeros(2, 7, dtype=torch.int8)), action)


def assert_exact(a, b, what):
    """Integers and bools (masks, actions, tours, ends) bitwise equal; floats within an ulp or two: ATen's
    eager float32 ``sqrt`` on the CPU is not always correctly rounded (1 ulp off), inductor's C++ is."""
    if isinstance(a, dict):
        assert a.keys() == b.keys(), what
        for key in a:
            assert_exact(a[key], b[key], f"{what}[{key!r}]")
    elif a is None or b is None:
        assert a is b, what
    else:
        a, b = torch.as_tensor(a), torch.as_tensor(b)
        assert a.dtype == b.dtype and a.shape == b.shape, what
        if a.is_floating_point():
            torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6, msg=what)
        else:
            assert torch.equal(a, b), what


# the default run: every original problem in the default mode, two in the others; the rest with -m slow
DEFAULT_RUN = {("tsp", "NextStep"), ("cvrp", "NextStep"), ("op", "NextStep"), ("pctsp", "NextStep"),
               ("sdvrp", "NextStep"), ("tsp", "SameStep"), ("op", "SameStep"), ("cvrp", "Disabled")}


def steps_alike(name: str, mode: str, off_cpu_form: bool = False) -> None:
    """Step an eager and a compiled vector env of problem ``name`` side by side, masked actions and
    truncation included, and compare everything they return (:func:`assert_exact`). ``off_cpu_form``: both
    envs step as they do on a device that does not read the host (one compiled function that renews every
    step, the pool of fresh states on a schedule), here on the CPU."""
    problem = routing_gym.get_problem(name)
    envs = [gym.make_vec(f"routing/{problem.label}-v0", num_envs=6, num_nodes=problem.valid_num_nodes(5),
                         vectorization_mode="vector_entry_point", array_type="torch", autoreset_mode=mode,
                         max_episode_steps=8, compile=c) for c in (False, True)]
    if off_cpu_form:
        for env in envs:
            env.unwrapped._reads_host = False
            env.unwrapped._advance = env.unwrapped._stepper()
    obs = [env.reset(seed=1)[0] for env in envs]
    g = torch.Generator().manual_seed(0)
    for t in range(24):
        a = torch.multinomial(obs[0]["action_mask"].float() + 0.05 * (t % 7 == 6), 1, generator=g).squeeze(1)
        out = [env.step(a) for env in envs]
        for label, x, y in zip(("obs", "reward", "terminated", "truncated", "info"), out[0], out[1]):
            assert_exact(x, y, f"step {t} {label}")
        obs = [o[0] for o in out]


@pytest.mark.parametrize("name,mode", [
    pytest.param(n, m, marks=() if (n, m) in DEFAULT_RUN else pytest.mark.slow)
    for n in sorted(routing_gym.PROBLEMS) for m in ("NextStep", "SameStep", "Disabled")])
def test_vector_env__compiled_step_steps_as_eager(name, mode):
    """The compiled step on the CPU (rules, masked-action penalty and records compiled as one function, the
    automatic resets as another, run only in steps where a sub-env resets) gives the eager step's
    observations, rewards, ends and infos."""
    steps_alike(name, mode)


@pytest.mark.parametrize("mode", ["NextStep", "SameStep"])
def test_vector_env__compiled_resets_leave_what_was_given_out_as_it_was(mode):
    """The CPU's compiled automatic resets write the reset rows in place, into tensors the step made anew only:
    an observation, and SameStep's last observations, keep their values through later steps (checked against
    copies taken when they were returned), with resets few enough for the compiled renewal (at most B / 8 per
    step) and more."""
    env = gym.make_vec("routing/OP-v0", num_envs=16, num_nodes=8, vectorization_mode="vector_entry_point",
                       array_type="torch", autoreset_mode=mode, compile=True)
    obs, info = env.reset(seed=3)
    given, copies, resets = [], [], []
    g = torch.Generator().manual_seed(0)
    for t in range(40):
        given += [obs] + ([info["final_obs"]] if "final_obs" in info else [])
        copies += [{k: v.clone() for k, v in o.items()} for o in given[len(copies):]]
        obs, _, terminated, truncated, info = env.step(
            torch.multinomial(obs["action_mask"].float() + 1e-3 * (t % 5 == 0), 1, generator=g).squeeze(1))
        resets.append(int((terminated | truncated).sum()))
    for i, (o, c) in enumerate(zip(given, copies)):
        for k in o:
            assert torch.equal(o[k], c[k]), f"observation {i}[{k!r}] changed by later steps"
    assert 0 < min(r for r in resets if r) <= 2 < max(resets), resets  # both renewals met (K = 2 rows)


@pytest.mark.parametrize("name,mode", [("tsp", "NextStep"), ("cvrp", "SameStep"),
                                       pytest.param("op", "NextStep", marks=pytest.mark.slow)])
def test_vector_env__one_compiled_pass_off_the_cpu_steps_as_eager(name, mode):
    """The form a GPU steps with, one compiled function holding the rules, the penalty, the records and the
    automatic resets of every step, gives its eager form's results too."""
    steps_alike(name, mode, off_cpu_form=True)


SINGLE_DEFAULT_RUN = {"tsp", "cvrp", "sdvrp", "op", "pctsp", "spctsp", "cvrptw", "pdp"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=() if n in SINGLE_DEFAULT_RUN else pytest.mark.slow)
                                  for n in sorted(routing_gym.PROBLEMS)])
def test_single_env__compiled_for_its_layout_steps_as_eager(name):
    """The single env's step compiled for its state's layout (:func:`fixed_layout_step`) gives the eager step's
    observations, rewards, ends and infos, over episodes that end normally and on a masked action."""
    problem = routing_gym.get_problem(name)
    envs = [gym.make(f"routing/{problem.label}-v0", num_nodes=problem.valid_num_nodes(5), compile=c)
            for c in (False, True)]
    rng = np.random.default_rng(0)
    for episode in range(3):
        obs = [env.reset(seed=episode)[0] for env in envs]
        assert_exact(obs[0], obs[1], "reset obs")
        done = False
        while not done:
            mask = obs[0]["action_mask"]
            masked = np.flatnonzero(mask == 0)
            take_masked = episode == 2 and len(masked) and rng.random() < 0.2
            a = int(rng.choice(masked if take_masked else np.flatnonzero(mask)))
            out = [env.step(a) for env in envs]
            for label, x, y in zip(("obs", "reward", "terminated", "truncated", "info"), out[0], out[1]):
                assert_exact(x, y, f"episode {episode} {label}")
            obs, done = [o[0] for o in out], out[0][2]
    assert envs[1].unwrapped._step is not eager_step


def test_masks__converted_not_viewed_in_a_graph_traced_for_the_compiler():
    """Inductor could not lower a bool view of a byte mask for CUDA (torch 2.11 on an H200): a graph traced
    for it (the single env's fixed-layout step) converts the masks, with the same values; eager code views."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from routing_gym.problems.masks import flags, mask_of, traced_for_compiler

    def fn(m):
        return mask_of(~flags(m))

    m = torch.tensor([[0, 1, 1, 0]], dtype=torch.int8)
    eager = make_fx(fn)(m)
    with traced_for_compiler():
        traced = make_fx(fn)(m)
    views = lambda g: [n for n in g.graph.nodes if n.target == torch.ops.aten.view.dtype]  # noqa: E731
    assert views(eager) and not views(traced)
    assert torch.equal(traced(m), fn(m)) and fn(m).tolist() == [[1, 0, 0, 1]]


def test_scalar_loops_for_gcc__lets_gcc_vectorise_within_only():
    """The compiled CPU step's speed rests on gcc vectorising inductor's scalar loops: within the context the
    command drops ``-fno-tree-loop-vectorize`` and ``-fmath-errno``; outside it is inductor's own again."""
    from torch._inductor import cpp_builder

    from routing_gym.problems.base import scalar_loops_for_gcc

    compiler = cpp_builder.get_cpp_compiler()
    before, _ = cpp_builder._get_optimization_cflags(compiler)
    with scalar_loops_for_gcc():
        within, _ = cpp_builder._get_optimization_cflags(compiler)
        assert torch._inductor.config.cpp.simdlen == 1
    after, _ = cpp_builder._get_optimization_cflags(compiler)
    # with gcc inductor passes both flags; with another compiler, what it passes is kept
    assert within == [{"fmath-errno": "fno-math-errno"}.get(f, f) for f in before if f != "fno-tree-loop-vectorize"]
    assert after == before
