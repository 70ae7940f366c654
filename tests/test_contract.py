"""The plug-in contract: what every registered problem declares agrees with what its code does, and the docs'
problem tables are the ones the declarations give. Every test iterates the registry."""
from pathlib import Path

import numpy as np
import pytest
import torch

import routing_gym
from routing_gym.common import observation_space
from routing_gym.problems import PROBLEMS, step
from routing_gym.problems.base import LEGEND_GLYPHS, read_fields
from routing_gym.problems.masks import MASK_DTYPE, flags
from routing_gym.problems.tables import TABLES, tables_in

ROOT = Path(__file__).resolve().parents[1]
NAMES = sorted(PROBLEMS)


def random_episodes(problem, num_nodes, batch=16, seed=0):
    """Yield (state, next_state, reward) along seeded random masked episodes of a batch."""
    g = torch.Generator().manual_seed(seed)
    state = problem.reset(problem.generate(batch, num_nodes, generator=g))
    for _ in range(problem.max_steps(state.mask.shape[1]) + 1):
        if bool(state.done.all()):
            return
        action = torch.multinomial(state.mask.float(), 1, generator=g).squeeze(1)
        nxt, reward, invalid = step(problem, state, action)
        assert not invalid.any()
        yield state, nxt, reward
        state = nxt
    raise AssertionError("an episode ran past max_steps")


@pytest.mark.parametrize("name", NAMES)
def test_observe__matches_the_declared_observation_in_keys_shapes_and_bounds(name):
    problem = PROBLEMS[name]
    n = problem.valid_num_nodes(6)
    n_total = problem.num_nodes_total(n)
    space = observation_space(problem, n_total)
    declared = {o.key: o for o in problem.observation}
    assert set(problem.bounds(n_total)) | set(problem.node_indices) == set(declared)
    for state, nxt, _ in random_episodes(problem, n):
        obs = problem.observe(nxt)
        assert set(obs) == set(declared), name
        for key, value in obs.items():
            entry = declared[key]
            assert tuple(value.shape) == (16, *entry.shape_for(n_total)), key
            if entry.node_index:
                assert value.dtype == torch.int64 and ((value >= 0) & (value < n_total)).all(), key
            else:
                _, low, high = entry.box(n_total)
                arr = value.numpy().astype(np.float32)
                assert (arr >= np.float32(low)).all() and (arr <= np.float32(high)).all(), key
        one = {k: (np.int64(v[0]) if declared[k].node_index else v[0].numpy().astype(np.float32)) for k, v in obs.items()}
        one["action_mask"] = nxt.mask[0].numpy().astype(np.int8)
        assert space.contains(one), name


@pytest.mark.parametrize("name", NAMES)
def test_dynamic_fields__are_the_observed_instance_fields_that_change(name):
    """The single env copies the observed instance fields once per episode, except ``dynamic_fields``: the
    declaration must name every observed instance field whose observed value changes."""
    problem = PROBLEMS[name]
    observed = [f for f in problem.Instance._fields if f in {o.key for o in problem.observation}]
    assert set(problem.dynamic_fields) <= set(observed)
    first = None
    changed = set()
    for state, nxt, _ in random_episodes(problem, problem.valid_num_nodes(6)):
        first = first or problem.observe(state)
        obs = problem.observe(nxt)
        changed |= {f for f in observed if not torch.equal(obs[f], first[f])}
        for f in observed:
            if f not in problem.dynamic_fields:
                assert torch.equal(obs[f], getattr(nxt.instance, f)), f
    assert changed <= set(problem.dynamic_fields), changed


def instance_forms(problem):
    """A generated batch of 3 as ``(data, batched)``: the batch's arrays, and its first instance's."""
    arrays = problem.generate(3, problem.valid_num_nodes(6), generator=torch.Generator().manual_seed(0))._asdict()
    return ({k: v.numpy() for k, v in arrays.items()}, True), ({k: v[0].numpy() for k, v in arrays.items()}, False)


@pytest.mark.parametrize("name", NAMES)
def test_fields__declare_the_instance_and_instance_from_round_trips(name):
    """The declared fields are the ``Instance``'s, in its order; ``instance_from`` is the base's (the declaration
    and ``check_instance`` are all a unit says about validation) and gives back a generated batch as it was,
    from the ``Instance`` itself and from its arrays, batched or one instance."""
    problem = PROBLEMS[name]
    assert [f.name for f in problem.fields] == list(problem.Instance._fields)
    assert "instance_from" not in vars(problem)
    inst = problem.generate(3, problem.valid_num_nodes(6), generator=torch.Generator().manual_seed(0))
    (batch, _), (one, _) = instance_forms(problem)
    for data, batched, want in ((inst, True, inst), (inst._asdict(), True, inst), (batch, True, inst),
                                (one, False, [v[:1] for v in inst])):
        back = problem.instance_from(data, batched=batched)
        assert type(back) is problem.Instance
        for field, a, b in zip(problem.Instance._fields, want, back):
            assert a.dtype == b.dtype and a.device == b.device and torch.equal(a, b), field


@pytest.mark.parametrize("name", NAMES)
def test_fields__each_is_refused_by_name_when_missing_misshapen_or_nan(name):
    """Through the one reader of the declaration: a required field missing, any field with an extra axis or
    holding NaN is a ``ValueError`` naming it; an optional one missing takes its default."""
    problem = PROBLEMS[name]
    for data, batched in instance_forms(problem):
        for field in problem.fields:
            others = {k: v for k, v in data.items() if k != field.name}
            if field.default is None:
                with pytest.raises(ValueError, match=rf"lacks field\(s\) \['{field.name}'\]"):
                    read_fields(problem.fields, others, batched=batched)
            else:
                assert field.name in read_fields(problem.fields, others, batched=batched)
            misshapen = np.repeat(np.asarray(data[field.name])[..., None], 3, axis=-1)
            with pytest.raises(ValueError, match=f"'{field.name}' must have shape"):
                read_fields(problem.fields, {**data, field.name: misshapen}, batched=batched)
            nan = np.array(data[field.name], dtype=np.float64)
            nan.reshape(-1)[-1] = np.nan
            with pytest.raises(ValueError, match=f"'{field.name}'"):
                read_fields(problem.fields, {**data, field.name: nan}, batched=batched)


@pytest.mark.parametrize("name", NAMES)
def test_step_cost_bound__exceeds_every_valid_step(name):
    problem = PROBLEMS[name]
    """Each step costs less than the bound, apart from the left-out cost charged when the episode ends
    (which :func:`invalid_penalty` adds on its own)."""
    for state, nxt, reward in random_episodes(problem, problem.valid_num_nodes(8), batch=64):
        left_out = problem.left_out_cost(nxt)
        cost = -reward if left_out is None else -reward - left_out * (nxt.done & ~state.done)
        assert (cost < torch.as_tensor(problem.step_cost_bound(state))).all()


@pytest.mark.parametrize("name", NAMES)
def test_masks__are_int8_zero_or_one(name):
    problem = PROBLEMS[name]
    for _, nxt, _ in random_episodes(problem, problem.valid_num_nodes(6)):
        for field in ("mask", "visited"):
            m = getattr(nxt, field)
            assert m.dtype == MASK_DTYPE and ((m == 0) | (m == 1)).all(), field
        assert flags(nxt.mask).any(dim=1).all()  # always an action, if only the no-op


@pytest.mark.parametrize("name", NAMES)
def test_sizes__valid_num_nodes_are_accepted_and_registered_sizes_valid(name):
    problem = PROBLEMS[name]
    for n in (1, 2, 3, 7):
        assert problem.check_num_nodes(problem.valid_num_nodes(n)) >= n
    for n in problem.sizes:
        assert problem.check_num_nodes(n) == n
    with pytest.raises(ValueError, match="num_nodes"):
        problem.check_num_nodes(problem.min_num_nodes - 1)


@pytest.mark.parametrize("name", NAMES)
def test_legend_and_gauge__declared_as_data(name):
    problem = PROBLEMS[name]
    assert all(entry.glyph in LEGEND_GLYPHS + ("",) and entry.text for entry in problem.drawing.legend)
    state = problem.reset(problem.generate(1, problem.valid_num_nodes(5), generator=torch.Generator().manual_seed(0)))
    fill, text, reached = problem.gauge(state)
    assert 0.0 <= fill <= 1.0 and isinstance(text, str) and text and isinstance(reached, bool)


def test_drawing__refuses_a_legend_glyph_the_renderer_cannot_draw():
    from routing_gym.problems.base import Drawing, LegendEntry
    with pytest.raises(ValueError, match="glyph"):
        Drawing(legend=(LegendEntry("triangle", "a pickup"),), paths="tour")


@pytest.mark.parametrize("doc", ["README.md", "docs/contract.md"])
def test_docs__problem_tables_are_the_generated_ones(doc):
    held = tables_in((ROOT / doc).read_text())
    assert held, f"{doc} holds no generated table"
    for name, table in held.items():
        assert table == TABLES[name](), (f"{doc}'s '{name}' table differs from the declarations: run "
                                         f"python -m routing_gym.problems.tables README.md docs/contract.md")


def test_docs__every_registered_problem_is_in_the_tables():
    table = TABLES["problems"]()
    assert all(f"| {p.label} |" in table for p in routing_gym.PROBLEMS.values())


@pytest.mark.parametrize("name", ["pctsp", "spctsp"])
def test_left_out_cost__is_the_penalties_of_the_unvisited_nodes(name):
    """PCTSP's left-out cost, kept in the state (the total less the penalties visited), stays the sum of the
    penalties over the unvisited nodes."""
    problem = PROBLEMS[name]
    for _, nxt, _ in random_episodes(problem, problem.valid_num_nodes(20), batch=32):
        unvisited = (nxt.instance.penalty * ~flags(nxt.visited)).sum(dim=1)
        torch.testing.assert_close(problem.left_out_cost(nxt), unvisited, rtol=0, atol=1e-5)
