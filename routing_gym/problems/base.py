"""What every problem unit shares: the :class:`Problem` base (its declarations), the step wrapper,
instance validation and the size tables.

A problem unit is one :class:`Problem` subclass that declares everything the rest of the project reads,
through the registry in ``routing_gym.problems`` (nothing outside a unit names a problem or re-states its
rules). The declarations, each with its default where it has one:

- identity: ``name`` (registry key), ``label`` (ids, class names), ``has_depot``, ``Instance`` (the
  NamedTuple of instance tensors); ``depots_by`` where there may be depots besides node 0 (the state field
  and observation key (B, N) nonzero at the depots; None: node 0 alone where ``has_depot``), which the
  renderer and the heuristics read;
- sizes: ``min_num_nodes`` and ``num_nodes_multiple`` (the valid ``num_nodes``, checked by
  :meth:`Problem.check_num_nodes`), ``sizes`` (the registered ``routing/{label}-{n}`` ids);
- ``generate(batch_size, num_nodes, *, generator, device, **variant) -> Instance``: random instances;
  ``variants`` declares the keyword options, validated by :meth:`Problem.check_variant`; ``presets``: named
  variants registered as ids of their own (``routing/{name}-{n}`` and ``routing/{name}-v0`` with those
  options; a name that is a problem's label is left to that problem);
- ``fields`` (:class:`Field` entries): each instance field once, with its shape, bounds, kind, default and
  rules; ``check_instance(instance)``: the joint constraints (a value valid only together with another
  field's). ``instance_from(data, *, batched, device) -> Instance`` reads user instances against ``fields``
  (:func:`read_fields`) and runs ``check_instance``; :meth:`Problem.field_at_bound` builds a valid instance
  with one field at its bound;
  ``instance_from_observation(obs) -> Instance``: the instances behind a first observation (planned tours);
- ``optional_visits``: whether a tour may leave nodes out, and for what (``None``, ``"orienteering"``,
  ``"prize_collecting"``), the fact the heuristics read;
- ``reset(instance) -> State``, with ``visited`` and ``mask`` as (B, N) int8 masks (``masks``);
- ``transition(state, action, active) -> (State, cost)``: the problem's rules for the sub-envs in
  ``active``, the new state's ``mask`` by those rules and the cost of the step (zero where inactive).
  Inactive sub-envs (finished, or taking a masked action) arrive with ``action == state.current``, so
  staying put changes nothing but what accumulates per visit, which ``active`` gates;
- ``noop(state)``: the action of a finished sub-env (default: the depot);
- ``start_nodes(N)``: the first actions of multi-start decoding (default: every node, or every customer);
- ``step_cost_bound(state)``: more than one step can cost (default 3, above 2 sqrt(2) in the unit
  square), which :func:`invalid_penalty` reads;
- ``left_out_cost(state)``: what ending the episode now would charge for the unvisited nodes, which
  :func:`invalid_penalty` adds; None by default (nothing to add);
- ``observation`` (:class:`Obs` entries): each observation key once, with its shape, bounds and meaning;
  the observation space, ``bounds()``, ``node_indices`` and the docstring's table come from it, and
  ``observe(state) -> dict`` of batched tensors must match it (a test checks every registered problem);
  ``dynamic_fields``: the observed instance fields whose values change within an episode (SDVRP's
  demand), which the single env re-reads every step (the others it copies once per episode);
- ``policy`` (:class:`PolicyInputs`): what a network reads (node features, step context);
- ``drawing`` (:class:`Drawing`, its legend as data) and ``gauge(state)`` (default: nodes visited): what
  the renderer draws (and why a click the mask forbids is refused);
- ``doc`` (:class:`EnvDoc`): the problem's sections of its env's docstring and of the problem tables.

:func:`step` wraps ``transition`` with what is the same for all: finished sub-envs ignore their action
(no-op), a masked action ends the episode with :func:`invalid_penalty` (which grows with what is left
undone, so that progress always pays), and a finished sub-env's mask allows only its no-op node.
:func:`tour_cost` replays a tour through the same dynamics, so cost and feasibility have one source of
truth.

Dimension names in shape comments: B batch, N nodes (depot included), S steps.
"""
from __future__ import annotations

import contextlib
import functools
import math
import types
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

import numpy as np
import torch
from torch import Tensor

from .masks import flags, is_marked, mask_of, traced_for_compiler


@dataclass(frozen=True)
class Variant:
    """A keyword option of a problem's generator (and so of its envs)."""

    default: Any
    choices: tuple
    doc: str


@dataclass(frozen=True)
class Obs:
    """One observation entry, declared once: the env's space, ``bounds()``, the docstring's table and the
    check of ``observe()`` read it.

    ``shape``: the entry's shape in one env, ``"N"`` standing for the node count (depot included), e.g.
    ``("N", 2)``; ``()`` for a node index. ``low`` / ``high``: the bounds of a float32 Box, numbers or
    functions of N. ``node_index``: an int64 node index (``Discrete(N)``) instead of a Box.
    """

    key: str
    shape: tuple
    meaning: str
    high: float | Callable[[int], float] = 1.0
    low: float | Callable[[int], float] = 0.0
    node_index: bool = False

    def shape_for(self, n_total: int) -> tuple[int, ...]:
        return tuple(n_total if d == "N" else d for d in self.shape)

    def box(self, n_total: int) -> tuple[tuple[int, ...], float, float]:
        """``(shape, low, high)`` of the float32 Box in an env of N nodes."""
        low, high = (float(v(n_total)) if callable(v) else float(v) for v in (self.low, self.high))
        return self.shape_for(n_total), low, high

    @property
    def dtype(self) -> str:
        return "int64 (``Discrete(N)``)" if self.node_index else "float32"

    @property
    def shape_text(self) -> str:
        return "()" if not self.shape else "(" + ", ".join(map(str, self.shape)) + ("," if len(self.shape) == 1 else "") + ")"


def node_index(key: str, meaning: str) -> Obs:
    """An observation entry holding a node index (``Discrete(N)``)."""
    return Obs(key, (), meaning, node_index=True)


def steps_taken(most: Callable[[int], float], text: str) -> Obs:
    """The ``num_steps`` entry: actions taken so far, in [0, ``most(N)``] (the most an episode can take)."""
    return Obs("num_steps", (1,), f"actions taken, in [0, {text}]", high=most)


FIELD_KINDS = ("float", "float_or_inf", "int", "flag")


@dataclass(frozen=True)
class Field:
    """One field of a user instance, declared once: :func:`read_fields` reads it (``instance_from``).

    ``shape``: its shape in one instance, ``"N"`` standing for the node count, e.g. ``("N", 2)``; ``()`` for
    one number; a last axis of 1 may be left out by the user. ``low`` / ``high``: inclusive bounds, numbers
    or functions of N (None: none). ``kind``: ``"float"`` (finite real numbers, float32), ``"float_or_inf"``
    (also +inf, standing for none), ``"int"`` (whole numbers in [low, high], int64) or ``"flag"`` (bools or
    0 / 1, bool). ``options``: the names it holds, given as names or their codes 0..k-1, one for all
    instances or one each (float32 codes). ``default``: the value an absent field takes; None: required.
    ``rules``: ``(ok, message)`` checks of the field alone: ``ok(values, N)`` of the batched values
    (B, *shape), true where they hold, else ``ValueError`` "instance field '<name>' <message>" (``message``
    a str or a function of (values, N)). Constraints between fields are the unit's ``check_instance``.
    """

    name: str
    shape: tuple
    low: float | Callable[[int], float] | None = None
    high: float | Callable[[int], float] | None = None
    kind: str = "float"
    options: tuple[str, ...] = ()
    default: Any = None
    rules: tuple = ()

    def __post_init__(self):
        if self.kind not in FIELD_KINDS:
            raise ValueError(f"a field's kind must be one of {FIELD_KINDS}, got {self.kind!r}")


@dataclass(frozen=True)
class PolicyInputs:
    """What a network reads from the observation, declared by the problem (no ``if problem ==`` in the
    networks).

    ``node_features``: per-node observation keys embedded with (x, y), in Kool et al.'s order.
    ``context_nodes``: node-index observation keys whose embeddings form the step context.
    ``context_scalars``: (B, 1) observation keys appended to the step context.
    ``placeholder_at_start``: the step context is a learned placeholder while ``num_steps == 0``.
    ``coordinates``: the (N, 2) observation key of node coordinates, embedded first; None where nodes
    have none (ATSP).
    ``edge_weights``: an (N, N) observation key of travel costs i -> j that the encoder reads as its
    attention bias (instead of Euclidean distances), and whose rows and columns give each node's initial
    features; None where distances come from the coordinates.
    Node features that change within an episode (the problem's ``dynamic_fields``) are re-projected at
    every decoding step (Kool's ``project_node_step``).
    """

    node_features: tuple[str, ...]
    context_nodes: tuple[str, ...]
    context_scalars: tuple[str, ...] = ()
    placeholder_at_start: bool = False
    coordinates: str | None = "locs"
    edge_weights: str | None = None


LEGEND_GLYPHS = ("depot", "start", "current", "routes", "unavailable", "size", "ring", "split", "kind", "window")


class LegendEntry(NamedTuple):
    """One entry of a legend: the glyph drawn before the text (one of :data:`LEGEND_GLYPHS`: the depot's
    square, the start's diamond, the current node, the route colours, a node the mask forbids, node area,
    the ``ring_by`` ring, a customer served by several routes (its rim in their colours), a customer of the
    ``kind_by`` kind (a triangle), a ``window_by`` time window (a bar); or ``""``, text only) and its text."""

    glyph: str
    text: str


@dataclass(frozen=True)
class Drawing:
    """How the renderer draws a problem, as data.

    ``legend``: the problem's legend entries (:class:`LegendEntry`), in order; the renderer adds the
    current node (after the depot or start) and ``"not allowed now"`` for forbidden nodes where the
    problem declares no entry of those glyphs. ``paths``: how the actions become drawn paths: ``"tour"``
    (one path from the first node, closed back to it once the episode is done), ``"trips"`` (split at
    depot visits, each from the depot it left and, once done, back to the depot it returns to) or
    ``"from_depot"`` (one path from the depot; the episode ends by choosing it); the depots are node 0 or
    the problem's ``depots_by``. ``size_by``: per-node float field of the instance or the state that scales
    node area. ``ring_by``: such a field drawn as a ring on unvisited nodes (what leaving them out costs).
    ``kind_by``: such a field whose nonzero nodes are a second kind of customer, drawn as triangles
    (legend glyph ``"kind"``). ``open_by``: an instance flag (B, 1) that, where set, leaves the return arc of
    every ``trips`` route undrawn (open routes). ``window_by``: a (B, N, 2) field of (open, close) times, drawn
    under each customer as a bar over the horizon (the latest finite close) filled where its window is open
    (legend glyph ``"window"``; nothing where no window closes).
    ``header``: optional ``state -> str`` appended to the header (batch-1 state).
    ``depot_refusal`` / ``node_refusal``: why a person's click on the depot / on an unvisited node is refused
    when the mask forbids it (``routing-gym play``); ``{i}`` is the node's index.
    """

    legend: tuple[LegendEntry, ...]
    paths: str
    size_by: str | None = None
    ring_by: str | None = None
    kind_by: str | None = None
    open_by: str | None = None
    window_by: str | None = None
    header: Callable[[Any], str] | None = None
    depot_refusal: str = "the depot is not allowed now"
    node_refusal: str = "node {i} is not allowed now"

    def __post_init__(self):
        for entry in self.legend:
            if not isinstance(entry, LegendEntry) or entry.glyph not in LEGEND_GLYPHS + ("",):
                raise ValueError(f"a legend entry must be a LegendEntry whose glyph is one of {LEGEND_GLYPHS} "
                                 f"or '', got {entry!r}")


@dataclass(frozen=True)
class EnvDoc:
    """A problem's sections of its env's docstring (the env assembles Gymnasium's template; the
    observation table comes from the problem's ``observation``) and of the problem tables."""

    summary: str  # the first line
    description: str
    action: str  # what an action means, after ``Discrete(N)``:
    mask: str  # which actions the mask allows
    rewards: str
    starting_state: str
    episode_end: str  # when it terminates (before "(or on a masked action)")
    example: str  # doctest lines after ``>>> obs, info = env.reset(seed=0)``
    cost: str  # the quantity minimised, in a few words (the problem tables)


def max_steps_of(problem: type, n_total: int) -> int:
    """:meth:`Problem.max_steps`, computed (a constant in a compiled step, with no guard: :func:`compiled`
    marks it so)."""
    return int(problem.bounds(n_total)["num_steps"][2])


max_steps_cached = functools.cache(max_steps_of)  # for eager steps (the penalty reads it every step)


class Problem:
    """Base of the problem units: the declarations every problem makes, and what follows from them.

    Subclasses set the class attributes below and implement ``generate``, ``reset``, ``transition`` and
    ``observe`` as static methods (see the module docstring).
    """

    name: ClassVar[str]  # registry key, lower case
    label: ClassVar[str]  # upper-case name in env ids and class names
    has_depot: ClassVar[bool]  # node 0 is a depot
    # where there may be depots besides node 0: the (B, N) state field, and observation key, nonzero at the depots
    depots_by: ClassVar[str | None] = None
    Instance: ClassVar[type]  # the NamedTuple of instance tensors
    fields: ClassVar[tuple[Field, ...]]  # the Instance's fields as a user gives them, in its order
    variants: ClassVar[dict[str, Variant]] = {}
    presets: ClassVar[dict[str, dict[str, Any]]] = {}  # id name -> variant options (registered ids of their own)
    sizes: ClassVar[tuple[int, ...]] = (10, 20, 50, 100)  # registered ``routing/{label}-{n}`` ids
    min_num_nodes: ClassVar[int] = 1
    num_nodes_multiple: ClassVar[int] = 1  # valid num_nodes are multiples of this (pairs of nodes: 2)
    # None: every node must be visited. Otherwise a TSP with profits (Feillet, Dejax & Gendreau 2005): one route
    # from the depot visits a subset and choosing the depot ends the episode; ``"orienteering"``: the most prize
    # within a length budget; ``"prize_collecting"``: a prize quota, then length plus the penalties of the
    # nodes left out. The heuristics read it (``agents.references.heuristics``).
    optional_visits: ClassVar[str | None] = None
    observation: ClassVar[tuple[Obs, ...]]
    dynamic_fields: ClassVar[tuple[str, ...]] = ()  # observed instance fields that change within an episode
    num_reward_groups: ClassVar[int] = 0  # groups of :meth:`reward_groups` (0: the instances form no groups)
    node_indices: ClassVar[tuple[str, ...]]  # observation keys holding a node index (from ``observation``)
    policy: ClassVar[PolicyInputs]
    drawing: ClassVar[Drawing]
    doc: ClassVar[EnvDoc]

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "observation" in cls.__dict__:
            cls.node_indices = tuple(o.key for o in cls.observation if o.node_index)

    @classmethod
    def bounds(cls, n_total: int) -> dict[str, tuple[tuple[int, ...], float, float]]:
        """The float32 Box entries of the observation as ``key -> (shape, low, high)`` for N nodes."""
        return {o.key: o.box(n_total) for o in cls.observation if not o.node_index}

    @classmethod
    def num_nodes_total(cls, num_nodes: int) -> int:
        """N, the nodes of an instance with ``num_nodes`` customers (or nodes, without a depot): the depot counts."""
        return num_nodes + cls.has_depot

    @classmethod
    def num_customers(cls, n_total: int) -> int:
        """The ``num_nodes`` of an instance with N nodes (the inverse of :meth:`num_nodes_total`)."""
        return n_total - cls.has_depot

    @classmethod
    def n_total_of(cls, instance) -> int:
        """N, the nodes of a batch of instances: read from the first field declared with an ``"N"`` axis."""
        field = next(f for f in cls.fields if "N" in f.shape)
        return getattr(instance, field.name).shape[1 + field.shape.index("N")]

    @classmethod
    def size_of(cls, instance) -> int:
        """The ``num_nodes`` of a batch of instances."""
        return cls.num_customers(cls.n_total_of(instance))

    @classmethod
    def layout(cls, instance) -> Tensor:
        """(B, N, 2) where the renderer draws the nodes, in [0, 1]^2 (default: the coordinates, ``locs``;
        a unit without coordinates overrides it and says how it places them)."""
        return instance.locs

    @classmethod
    def check_num_nodes(cls, num_nodes: Any) -> int:
        """``num_nodes`` as an int, or ``ValueError`` when it is not an integer >= ``min_num_nodes`` and a
        multiple of ``num_nodes_multiple``."""
        n = check_num_nodes(num_nodes, cls.min_num_nodes)
        if n % cls.num_nodes_multiple:
            raise ValueError(f"num_nodes must be a multiple of {cls.num_nodes_multiple} for {cls.label}, got {n}")
        return n

    @classmethod
    def valid_num_nodes(cls, at_least: int) -> int:
        """The smallest valid ``num_nodes`` that is at least ``at_least`` (for tools and tests that need
        some size)."""
        n = max(at_least, cls.min_num_nodes)
        return -(-n // cls.num_nodes_multiple) * cls.num_nodes_multiple

    @classmethod
    def instance_from(cls, data: Any, *, batched: bool = False, device: Any = None):
        """Validated instance(s): ``data`` (a mapping of arrays keyed as the ``Instance``, or the ``Instance``)
        read against ``fields`` (:func:`read_fields`; a leading B axis on each field when ``batched``), then
        :meth:`check_instance`. ``ValueError`` names the field."""
        instance = cls.Instance(**read_fields(cls.fields, data, batched=batched, device=device))
        cls.check_instance(instance)
        return instance

    @staticmethod
    def check_instance(instance) -> None:
        """``ValueError`` (naming a field) where a batch of instances breaks a joint constraint: a value valid
        only together with another field's. Default: none."""

    @classmethod
    def field_at_bound(cls, data: dict, field: str, node: int, value: float) -> dict | None:
        """A copy of the one-instance ``data`` (numpy arrays keyed as the instance) with ``field`` at
        ``node`` set to ``value`` and whatever the joint constraints tie to it adjusted, or None where no
        valid instance has that value there. Default: the fields are independent, only ``field`` changes."""
        out = {k: np.array(v, copy=True) for k, v in data.items()}
        out[field].reshape(out[field].shape[0] if out[field].ndim else 1, -1)[node, 0] = value
        return out

    @classmethod
    def check_variant(cls, variant: Mapping[str, Any]) -> dict[str, Any]:
        """The full variant (defaults filled in) from keyword options; an unknown option raises
        ``TypeError`` worded as Python words an unknown keyword argument (tools such as TorchRL's ``GymEnv``
        retry without an optional keyword on that message), a bad value ``ValueError``."""
        unknown = sorted(set(variant) - set(cls.variants))
        if unknown:
            known = f"{cls.label} takes {sorted(cls.variants)}" if cls.variants else f"{cls.label} takes none"
            raise TypeError(f"got an unexpected keyword argument {unknown[0]!r} ({known})")
        out = {}
        for key, spec in cls.variants.items():
            value = variant.get(key, spec.default)
            if value not in spec.choices:
                raise ValueError(f"{key} must be one of {spec.choices}, got {value!r}")
            out[key] = value
        return out

    @classmethod
    def start_nodes(cls, n_total: int, device: Any = None) -> Tensor:
        """The first actions of multi-start decoding: every node, or every customer with a depot."""
        return torch.arange(int(cls.has_depot), n_total, device=device)

    @classmethod
    def instance_from_observation(cls, obs: Mapping[str, Tensor]):
        """The batch of instances behind an episode's first observation (a dict of batched tensors, as
        the vector env's torch mode gives), each ``Instance`` field read from the observation key of its
        name; ``ValueError`` when one is not observed. Units whose observation holds an instance field
        under another name override it, or refuse where the instance is not observable."""
        missing = [f for f in cls.Instance._fields if f not in obs]
        if missing:
            raise ValueError(f"{cls.label}'s instance field(s) {missing} are not observed")
        return cls.Instance(**{f: obs[f] for f in cls.Instance._fields})

    @classmethod
    def max_steps(cls, n_total: int) -> int:
        """S, the most actions an episode on N nodes can take: the bound of the ``num_steps`` observation (and
        the length of the padded ``info["tour"]``)."""
        # a functools cache is C code, which dynamo does not trace: compiled, the constant
        return max_steps_of(cls, n_total) if torch.compiler.is_compiling() else max_steps_cached(cls, n_total)

    @staticmethod
    def step_cost_bound(state) -> Tensor | float:
        """More than one step can cost (besides the left-out cost), (B,) or a number, constant within an
        episode: 3, above an edge plus a return (or closing) edge in the unit square, 2 sqrt(2). Part of
        :func:`invalid_penalty`; units whose steps can cost more (other coordinates, a distance matrix)
        override it."""
        return 3.0

    @staticmethod
    def left_out_cost(state) -> Tensor | None:
        """(B,) what ending the episode now would charge for the nodes still unvisited (their penalties, in a
        unit that has them), or None where that is nothing. Part of :func:`invalid_penalty`."""
        return None

    @staticmethod
    def noop(state) -> Tensor:
        """The action a finished sub-env takes: the depot (or its current node: ``noop = staticmethod(stay)``)."""
        return torch.zeros_like(state.current)

    @staticmethod
    def reward_groups(instance) -> Tensor:
        """(B,) int64 in [0, ``num_reward_groups``): the group of each instance (a variant) whose costs the
        trainer may normalise together; only problems that declare ``num_reward_groups`` implement it."""
        raise NotImplementedError("this problem's instances form no reward groups")

    @staticmethod
    def gauge(state) -> tuple[float, str, bool]:
        """The renderer's footer for a batch-1 state: (fill fraction, text, threshold reached); default:
        the nodes visited."""
        k, n = int(flags(state.visited[0]).sum()), state.visited.shape[1]
        return k / n, f"visited {k} / {n}", False


def interpolate_table(table: Mapping[int, float], n: int) -> float:
    """Piecewise-linear interpolation of a per-size table in ``n`` (a generator's parameter given for a few
    sizes), constant beyond its ends."""
    sizes = sorted(table)
    if n <= sizes[0]:
        return float(table[sizes[0]])
    if n >= sizes[-1]:
        return float(table[sizes[-1]])
    hi = next(s for s in sizes if s >= n)
    lo = max(s for s in sizes if s <= n)
    if hi == lo:
        return float(table[lo])
    w = (n - lo) / (hi - lo)
    return float(table[lo] * (1 - w) + table[hi] * w)


def invalid_penalty(problem, state) -> Tensor:
    """(B,) cost charged for a masked action in ``state``: ``c * (S - num_steps)`` plus what leaving the unvisited
    nodes out costs (:meth:`Problem.left_out_cost`, where a unit has one), where c is the
    problem's :meth:`Problem.step_cost_bound` (3 by default), S the most actions an episode can take
    (:meth:`Problem.max_steps`) and ``num_steps`` the actions taken so far.

    It grows with what is left undone, so that progress always pays:

    - above any feasible remainder: finishing from ``state`` takes at most ``S - num_steps`` (>= 1) steps, each
      costing less than c, plus at most the left-out cost, charged once;
    - each valid step lowers it by at least c (one step fewer left; the left-out cost only shrinks), more
      than the step costs. So failing now costs more than any valid action followed by anything, and an
      unmasked learner never gains by failing early (with a constant penalty, a policy that expects to
      fail later gains by failing at once).

    Valid episodes never pay it: their rewards sum to minus their cost.
    """
    per_step = (problem.max_steps(state.mask.shape[-1]) - state.num_steps) * problem.step_cost_bound(state)
    left_out = problem.left_out_cost(state)
    return per_step if left_out is None else per_step + left_out


def check_num_nodes(num_nodes: Any, minimum: int = 2) -> int:
    if isinstance(num_nodes, bool) or not isinstance(num_nodes, (int, np.integer)) or num_nodes < minimum:
        raise ValueError(f"num_nodes must be an integer >= {minimum}, got {num_nodes!r}")
    return int(num_nodes)


def generation_device(generator: torch.Generator | None, device: Any) -> torch.device:
    """The device to draw on: the generator's when one is given (a mismatch is an error)."""
    if generator is None:
        return torch.device(device if device is not None else "cpu")
    if device is not None and torch.device(device).type != generator.device.type:
        raise ValueError(f"generator is on {generator.device} but device={device!r} was asked for")
    return generator.device


def gather_nodes(values: Tensor, index: Tensor) -> Tensor:
    """``values[b, index[b]]`` for values (B, N) or (B, N, K) and index (B,)."""
    if values.dim() == 2:
        return values.gather(1, index[:, None]).squeeze(1)
    return values.gather(1, index[:, None, None].expand(-1, 1, values.shape[2])).squeeze(1)


def distance(a: Tensor, b: Tensor) -> Tensor:
    """Euclidean distance over the last axis (size 2), broadcasting."""
    return ((a[..., 0] - b[..., 0]).square() + (a[..., 1] - b[..., 1]).square()).sqrt()  # per coordinate: no (B, N, 2) broadcast


def route_step(locs: Tensor, current_loc: Tensor, action: Tensor, finished: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """A step of routes from the depot (node 0): the move from ``current_loc`` (B, 2) to ``action`` (B,), and
    where ``finished`` (B,) bool the return to the depot that ends the episode. Returns ``(length (B,),
    current (B,), current_loc (B, 2))``, the vehicle back at the depot where finished."""
    loc = gather_nodes(locs, action)
    depot_loc = locs[:, 0]
    length = distance(loc, current_loc) + distance(depot_loc, loc) * finished
    return length, torch.where(finished, 0, action), torch.where(finished[:, None], depot_loc, loc)


def stay(state) -> Tensor:
    """The no-op of a unit whose finished sub-env stays at its current node: ``noop = staticmethod(stay)``."""
    return state.current


def is_allowed(state, action: Tensor) -> Tensor:
    """(B,) bool: is ``action`` (B,) int64 a node (inside 0..N-1) that the state's mask allows? Computed
    on the device, without a host synchronisation (an index outside the nodes is clamped to one, and the
    clamp's difference marks it)."""
    node = action.clamp(0, state.mask.shape[-1] - 1)
    return is_marked(state.mask, node) & (node == action)


def step(problem, state, action: Tensor):
    """Advance every sub-env by one action: the dynamics shared by the single env, the vector env
    and the trainer.

    Args:
        problem: the problem unit (a :class:`Problem` subclass of the registry).
        state: its state, batch B.
        action: (B,) int64 node indices; another dtype or shape raises ``ValueError`` (read from the
            tensor's metadata: no host synchronisation). An index outside 0..N-1 counts as a masked
            action (checked on the device, also without synchronising).

    Returns:
        ``(state, reward, invalid)``: the new state, reward (B,) float (minus the step's cost; for a
        masked action, minus :func:`invalid_penalty` of the state it is taken in) and invalid (B,) bool,
        true where this step's action was masked (that sub-env is then done). A sub-env that was already
        done ignores its action, gets reward 0 and keeps a mask that allows only its no-op node.
    """
    if action.dtype != torch.int64 or action.shape != state.done.shape:
        raise ValueError(f"actions must be a {tuple(state.done.shape)} int64 tensor of node indices, "
                         f"got {action.dtype} of shape {tuple(action.shape)}")
    allowed = is_allowed(state, action)
    active = allowed & ~state.done
    invalid = ~(allowed | state.done)
    action = torch.where(active, action, state.current)  # inactive sub-envs stay where they are
    penalty = invalid_penalty(problem, state)
    state, cost = problem.transition(state, action, active)
    reward = torch.where(invalid, penalty, cost).neg_()
    return finish(problem, state, invalid), reward, invalid


@functools.cache
def compiled(fn: Callable, device_type: str, problem: Any = None) -> Callable:
    """``fn`` (:func:`step`, or a function around it) compiled with ``torch.compile`` for one device type
    (``"cpu"``, ``"cuda"``) and one problem unit: what the vector env's ``compile=True`` runs (the single
    env's is :func:`fixed_layout_step`). The first call for
    a shape compiles (seconds; a C++ compiler on the CPU); each new shape (batch size, node count) and
    the first step after a reset compile again.

    Each problem gets its own copy of ``fn``'s code: dynamo keeps at most
    ``torch._dynamo.config.recompile_limit`` (8) compiled versions per code object, and past that runs
    the code eagerly, which one shared copy reached within a few problems and shapes.

    On the CPU the code is compiled to scalar C++ loops (inductor's ``cpp.simdlen=1``): inductor's
    vectorised loops load and store bool tensors one element at a time, and run the step slower
    (``benchmarks/README.md``, "A compiled step"). ``fullgraph=True``: a graph break (code dynamo does not
    trace, such as a ``functools`` cache) is an error, not a step run in pieces with eager code between."""
    if problem is not None:
        name = f"{fn.__name__}_{problem.name}"
        code = fn.__code__.replace(co_name=name, **({"co_qualname": name} if hasattr(fn.__code__, "co_qualname") else {}))
        copy = types.FunctionType(code, fn.__globals__, name, fn.__defaults__, fn.__closure__)
        copy.__kwdefaults__ = fn.__kwdefaults__
        fn = copy
    # no guards on module globals (the rules' functions and constants, which do not change while envs
    # run): about 27 of a TSP-50 B = 1024 step's 200 us were spent checking them on every call; the guards on
    # the arguments (tensor shapes and dtypes, the problem, the autoreset mode) stay
    options = {"guard_filter_fn": torch.compiler.skip_guard_on_globals_unsafe}
    # marked here, not where it is defined: marking imports the compiler (about 2 s), which an eager user of
    # the envs should not pay at import time
    torch.compiler.assume_constant_result(max_steps_of)
    if device_type == "cpu":
        options["cpp.simdlen"] = 1
    return torch.compile(fn, dynamic=False, fullgraph=True, options=options)


def flatten(tree, leaves: list[Tensor]):
    """The tensors of ``tree`` (tensors, None, dicts, lists and tuples of them, NamedTuples included) appended to
    ``leaves`` in order; returns the structure that :func:`builder` rebuilds ``tree`` from."""
    if isinstance(tree, Tensor):
        leaves.append(tree)
        return None
    if tree is None:
        return ("none",)
    if isinstance(tree, dict):
        return ("dict", tuple(tree), tuple(flatten(v, leaves) for v in tree.values()))
    if isinstance(tree, (tuple, list)):
        return (type(tree), tuple(flatten(v, leaves) for v in tree))
    raise TypeError(f"cannot flatten a {type(tree).__name__} (tensors, None, dicts, lists and tuples only)")


def builder(spec) -> Callable:
    """The inverse of :func:`flatten` for one structure ``spec``, made once: a function of the tensors in order (a
    sequence) that rebuilds the tree. Generated code, one expression (a step's 16 tensors: 1.2 µs, against 2.7 µs
    through a closure per node)."""
    names: dict[Any, str] = {}
    taken = 0

    def expr(part) -> str:
        nonlocal taken
        if part is None:
            taken += 1
            return f"t[{taken - 1}]"
        kind = part[0]
        if kind == "none":
            return "None"
        if kind == "dict":
            keys = [names.setdefault(("key", k), f"k{len(names)}") for k in part[1]]
            return "{" + "".join(f"{k}: {expr(v)}, " for k, v in zip(keys, part[2])) + "}"
        items = "".join(f"{expr(v)}, " for v in part[1])
        if kind is tuple:
            return f"({items})"
        if kind is list:
            return f"[{items}]"
        return f"{names.setdefault(kind, f'k{len(names)}')}({items})"  # a NamedTuple, by position

    body = expr(spec)
    namespace = {name: (key[1] if isinstance(key, tuple) else key) for key, name in names.items()}
    exec(f"def build(t):\n    return {body}\n", namespace)
    return namespace["build"]


def reader(spec) -> Callable:
    """:func:`flatten`'s list of tensors for trees of one structure ``spec``, as a function made once (generated
    code, one list of indexings: a step's 16 tensors in 0.5 µs, against 3.6 µs through :func:`flatten`). It does
    not check the structure: a tree of another structure may raise ``IndexError``, ``KeyError`` or ``TypeError``."""
    names: dict[Any, str] = {}
    found: list[str] = []

    def walk(part, at: str) -> None:
        if part is None:
            found.append(at)
        elif part[0] == "dict":
            for key, value in zip(part[1], part[2]):
                walk(value, f"{at}[{names.setdefault(key, f'k{len(names)}')}]")
        elif part[0] != "none":
            for i, value in enumerate(part[1]):
                walk(value, f"{at}[{i}]")

    walk(spec, "tree")
    namespace = {name: key for key, name in names.items()}
    exec(f"def read(tree):\n    return [{', '.join(found)}]\n", namespace)
    return namespace["read"]


def tensors_of(tree) -> list[Tensor]:
    """The tensors of a state (a NamedTuple of tensors and NamedTuples of tensors, its instance), in field order
    (:func:`flatten`)."""
    out: list[Tensor] = []
    flatten(tree, out)
    return out


def rebuild(like, tensors: list[Tensor]):
    """``like``'s structure (a state) filled with ``tensors`` in field order (:func:`tensors_of`)."""
    return builder(flatten(like, []))(tensors)


def layout_of(tree) -> tuple:
    """What a compiled function is specialised to: the structure of its arguments ``tree`` (a state, or a tuple
    of states and tensors) and every tensor's shape, strides, dtype and device."""
    leaves: list[Tensor] = []
    structure = flatten(tree, leaves)
    return structure, tuple((t.shape, t.stride(), t.dtype, t.device) for t in leaves)


def row_major(t: Tensor) -> Tensor:
    """``t``, or a copy of it with the row-major strides of its shape (``contiguous()`` leaves the strides of
    size-1 dimensions as they were; a compiled graph's fresh outputs have these)."""
    strides, size = [], 1
    for n in reversed(t.shape):
        strides.append(size)
        size *= n
    return t if t.stride() == tuple(reversed(strides)) else t.clone(memory_format=torch.contiguous_format)


def row_major_state(state):
    """``state`` with every tensor row-major (:func:`row_major`): the layout a compiled step's outputs have; and
    each tensor its own (a reset may give two fields one tensor of zeros: the second is copied), as a compiled
    function's layout check expects (:func:`layout_guard`)."""
    seen: set[int] = set()
    tensors = []
    for t in tensors_of(state):
        t = row_major(t)
        if t.untyped_storage().data_ptr() in seen:
            t = t.clone()
        seen.add(t.untyped_storage().data_ptr())
        tensors.append(t)
    return rebuild(state, tensors)


_for_layout: dict[tuple, Callable] = {}


@contextlib.contextmanager
def scalar_loops_for_gcc() -> Iterator[None]:
    """Within: inductor compiles CPU code to scalar C++ loops (``cpp.simdlen=1``, as :func:`compiled`) and lets gcc
    vectorise them: inductor passes gcc ``-fno-tree-loop-vectorize`` (its own loops are vectorised already), which
    left every loop byte by byte (a copy of a (1024, 51) int8 mask: 25 µs; vectorised by gcc, 1 µs), and
    ``-fmath-errno``, which keeps a loop holding a square root scalar (errno is set by none of our code's square
    roots, of sums of squares). gcc vectorises without reassociating float operations (no ``-fassociative-math``),
    so the results are the scalar loops'.
    The flags are changed where inductor builds its compile command (``torch._inductor.cpp_builder``, read on the
    calling process: the command is part of the cache key); where a torch version builds it elsewhere, the loops
    stay scalar (slower, not different)."""
    import torch._inductor.config
    from torch._inductor import cpp_builder

    made = getattr(cpp_builder, "_get_optimization_cflags", None)

    def vectorisable(*args, **kwargs):
        cflags, ldflags = made(*args, **kwargs)  # (gcc's flags where inductor calls gcc, others elsewhere)
        swapped = {"fno-tree-loop-vectorize": None, "fmath-errno": "fno-math-errno"}
        return [swapped.get(f, f) for f in cflags if swapped.get(f, f) is not None], ldflags

    with torch._inductor.config.patch({"cpp.simdlen": 1}):
        if made is None:
            yield
            return
        cpp_builder._get_optimization_cflags = vectorisable
        try:
            yield
        finally:
            cpp_builder._get_optimization_cflags = made


def compiled_for_layout(fn: Callable, problem, *args, **static) -> Callable:
    """``fn(problem, *args, **static)`` compiled for the layout of ``args`` (their structure and every tensor's
    shape, strides, dtype and device; ``static`` are Python values, fixed too), called as ``fn`` with arguments
    of that layout and the same problem and ``static`` (others are a ``ValueError``): what the single env's ``compile=True``
    (:func:`fixed_layout_step`) and the vector env's on the CPU run.

    Traced once (``make_fx`` with fake tensors, so a branch on a tensor's value fails the trace rather than being
    baked in; functionalised, so an in-place update of an argument stays a write into it; decomposed as inductor
    decomposes) and compiled by inductor (scalar loops that gcc vectorises, :func:`scalar_loops_for_gcc`), then
    called without dynamo, whose frame handling, guards and wrappers cost about 17 µs a call and more with many
    arguments (``benchmarks/README.md``). The graph goes to inductor's ``compile_fx_inner``, the entry below
    AOTAutograd: the trace is already a functional ATen graph, and AOTAutograd's runtime wrappers cost 5-9 µs a
    call of a B = 1024 step. Compiled once per layout and shared by every caller, so a caller reads the layout once
    (a state keeps it: see :func:`row_major_state`) and keeps the function. Each call checks the layout of its
    arguments (:func:`layout_guard`: one check of every tensor, in place of inductor's assert of each one's shape and
    strides, 13 µs a call of a B = 1024 step with its renewal, 27 tensors). The function's ``passthrough`` says which
    of its output tensors are arguments returned as they came (for each output tensor in order, the index of that
    argument tensor, else None)."""
    from torch._inductor import config as inductor_config  # (imported here: importing the compiler takes seconds)
    from torch._inductor.compile_fx import compile_fx_inner
    from torch._inductor.decomposition import select_decomp_table
    from torch.fx.experimental.proxy_tensor import make_fx

    layout = layout_of(args)
    key = (fn, problem, tuple(sorted(static.items())), layout)
    made = _for_layout.get(key)
    if made is None:
        spec, flat_args = layout[0], tensors_of(args)
        out_spec, passed = [], []

        def flat_fn(*flat):
            leaves: list[Tensor] = []
            out_spec.append(flatten(fn(problem, *builder(spec)(flat), **static), leaves))
            passed.append(tuple(next((i for i, arg in enumerate(flat) if arg is leaf), None) for leaf in leaves))
            return tuple(leaves)

        # traced on copies of the same strides (clone() makes a sliced view contiguous): a reset's state may hold
        # one tensor in two fields (TSP's first and current node), which the trace would take as a rule of every state
        example = [torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=t.device).copy_(t) for t in flat_args]
        guard = layout_guard(example)  # (on the copies: the arguments' layout, none of them given twice)
        with torch.inference_mode(), traced_for_compiler():
            graph = make_fx(torch.func.functionalize(flat_fn, remove="mutations"),
                            decomposition_table=select_decomp_table(), tracing_mode="fake")(*example)
            with scalar_loops_for_gcc(), inductor_config.patch(size_asserts=False):  # (made checks every call)
                compiled_graph = compile_fx_inner(graph, example)  # called with a list of the arguments, which it empties
        # called once on the copies through inductor's wrapper (its first call ends its caches' bookkeeping); later
        # calls run the compiled code itself, without the wrapper's context managers (7 µs a call)
        compiled_graph(list(example))
        run = getattr(compiled_graph, "current_callable", None) or compiled_graph
        build, read = builder(out_spec[-1]), reader(spec)

        def made(called_problem, *args, **called_static):
            if called_problem is not problem or called_static != static:  # never run a graph made for others
                raise ValueError(f"this step was compiled for {problem.name} with {static}, called for "
                                 f"{getattr(called_problem, 'name', called_problem)} with {called_static}")
            try:
                flat = read(args)
            except (IndexError, KeyError, TypeError):
                flat = None
            if flat is None or guard is None or not guard(flat):  # (no guard: the layouts compared at every call)
                if flat is None or layout_of(args) != layout:
                    raise ValueError(f"this step was compiled for other arguments: {layout_difference(layout, args)}")
                if guard is not None:
                    guard.learn(flat)  # (the same layout, in another mode: inference mode, say)
            return build(run(flat))

        made.passthrough = passed[-1]  # for each output tensor, the argument tensor it is (its index), or None
        made.compiled_graph = compiled_graph  # (kept alive: its deletion empties what the compiled code runs)
        _for_layout[key] = made
    return made


def layout_difference(layout: tuple, tree) -> str:
    """Where the layout of ``tree`` differs from ``layout`` (:func:`layout_of`), in words."""
    structure, leaves = layout_of(tree)
    if structure != layout[0] or len(leaves) != len(layout[1]):
        return "another structure of tensors"
    for i, (want, got) in enumerate(zip(layout[1], leaves)):
        if want != got:
            names = ("shape", "strides", "dtype", "device")
            return f"tensor {i} has " + ", ".join(f"{k} {b} (compiled for {a})" for k, a, b in zip(names, want, got)
                                                   if a != b)
    return "none"


class LayoutGuard:
    """A check that a list of tensors has the layout of the tensors it was made from (the same count, and each one's
    shape, strides, dtype and device), as one call into C++: dynamo's ``TensorGuards``, about 2 µs for 27 tensors,
    where inductor's assert of each tensor's shape and strides costs 0.5 µs a tensor. A ``TensorGuards`` also says no
    where the layout is the same but the thread's mode or a tensor's flags differ from those it was made in
    (inference mode, ``requires_grad``, a tensor given twice), so a caller that hears no compares the layouts itself
    (:func:`layout_of`) and, where they are the same, calls :meth:`learn`: the guard then keeps one more
    ``TensorGuards``, made in that mode (up to :attr:`KEPT`), and says yes there too."""

    KEPT = 4

    def __init__(self, tensors: list[Tensor]):
        from torch._C._dynamo.guards import TensorGuards

        self._make = lambda flat: TensorGuards(*flat, dynamic_dims_sizes=[list(t.shape) for t in flat],
                                               dynamic_dims_strides=[list(t.stride()) for t in flat])
        self._guards = [self._make(tensors)]
        self._count = len(tensors)

    def __call__(self, flat: list[Tensor]) -> bool:
        if len(flat) == self._count:
            for g in self._guards:  # (a loop, not any() over a generator: 0.4 µs less a call)
                if g.check(*flat):
                    return True
        return False

    def learn(self, flat: list[Tensor]) -> None:
        """Also say yes to tensors as these (of the layout, checked by the caller) in this thread's mode."""
        if len(self._guards) < self.KEPT:
            self._guards.append(self._make(flat))


def layout_guard(tensors: list[Tensor]) -> LayoutGuard | None:
    """A :class:`LayoutGuard` of ``tensors``, or None where this torch has no ``TensorGuards`` that checks them as
    here (then :func:`compiled_for_layout` compares the layouts in Python at every call, 10-20 µs)."""
    try:
        guard = LayoutGuard(tensors)
    except (ImportError, TypeError, RuntimeError, SystemError):
        return None
    return guard if guard(tensors) else None


def fixed_layout_step(problem, state) -> tuple[Any, Callable]:
    """``(state, fn)``: ``state`` with row-major tensors (:func:`row_major`), and :func:`step` compiled for that
    state's layout (:func:`compiled_for_layout`: its batch size included), called as ``fn(problem, state, action)``
    with a (B,) int64 action: what the single env's ``compile=True`` runs. Without dynamo, a batch-1 step costs
    about half (TSP-50: 56 -> 30 us a step; ``benchmarks/README.md``, "The single env's compiled step without
    dynamo"). The compiled step returns a state of the same layout (checked when it is made), so the episode's
    states keep it."""
    state = row_major_state(state)
    action = torch.zeros(state.done.shape, dtype=torch.int64, device=state.done.device)
    fn = compiled_for_layout(step, problem, state, action)
    if fn not in _layout_kept:  # checked once per compiled step, on copies
        new = fn(problem, rebuild(state, [t.clone() for t in tensors_of(state)]), action)[0]
        if layout_of(new) != layout_of(state):
            raise RuntimeError(f"{problem.name}'s compiled step changes the state's layout "
                               f"({layout_of(state)} -> {layout_of(new)})")
        _layout_kept.add(fn)
    return state, fn


_layout_kept: set[Callable] = set()  # the compiled steps whose new state was checked to keep the layout


def finish(problem, state, stop: Tensor):
    """The state with sub-envs ``stop`` (B,) bool marked done, and every done sub-env's mask reduced
    to its no-op node."""
    done = state.done | stop
    noop = problem.noop(state)[:, None]
    # rows of done sub-envs cleared (a byte product: on the CPU, bool ops broadcasting (B, 1) against (B, N)
    # are slower, and gcc vectorises the compiled loop of a byte product where it does not a negated bool's),
    # then the no-op node set where done
    keep = state.mask * (1 - mask_of(done))[:, None]
    mask = keep.scatter_(1, noop, state.mask.gather(1, noop) | mask_of(done)[:, None])
    return state._replace(done=done, mask=mask)


def as_tours(instance, tours) -> Tensor:
    """``tours`` (B, S) as an int64 tensor on the instances' device; ``ValueError`` unless it holds
    integers (a float array is refused even where its values are whole: a tour is node indices, and the
    check reads the dtype only) and has B rows."""
    first = instance[0]  # every instance field has the batch first
    tours = (tours.detach() if isinstance(tours, Tensor) else torch.as_tensor(native_array(tours))).to(first.device)
    if tours.dtype == torch.bool or tours.is_floating_point() or tours.is_complex():
        raise ValueError(f"tours must hold integer node indices, got dtype {tours.dtype}")
    if tours.dim() != 2 or tours.shape[0] != first.shape[0]:
        raise ValueError(f"tours must have shape (B={first.shape[0]}, S), got {tuple(tours.shape)}")
    return tours.long()


REPLAY_CHECK = 8  # steps between two host reads of whether every replayed episode has ended


@torch.no_grad()
def replay(problem, instance, tours: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Replay tours through the dynamics without raising on an infeasible one: the one replay loop
    (``tour_cost`` validates with it; searches and references keep the feasible tours of a batch with it).

    Args:
        problem: the problem unit.
        instance: a batch of B instances.
        tours: (B, S) integer actions in order, padded with the no-op (:func:`as_tours`: ``ValueError``
            for another dtype or shape).

    Returns:
        ``(cost (B,) float64, feasible (B,) bool, first_masked (B,) int64)``: feasible where the tour
        takes no masked action (a node outside 0..N-1 counts as masked) and finishes; ``first_masked`` the
        step of the first masked action (-1 if none). The cost of an infeasible tour is meaningless.
    """
    tours = as_tours(instance, tours)
    state = problem.reset(instance)
    cost = torch.zeros(tours.shape[0], dtype=torch.float64, device=tours.device)
    first_masked = torch.full((tours.shape[0],), -1, dtype=torch.long, device=tours.device)
    for t in range(tours.shape[1]):
        if t % REPLAY_CHECK == 0 and bool(state.done.all()):  # what is left is ignored (the no-op or not)
            break
        state, reward, invalid = step(problem, state, tours[:, t])
        first_masked = torch.where(invalid & (first_masked < 0), t, first_masked)
        cost -= reward.double()
    return cost, state.done & (first_masked < 0), first_masked


def tour_cost(problem, instance, tours: Tensor) -> Tensor:
    """Cost of finished tours, validated by replaying them through the dynamics (:func:`replay`).

    Args:
        problem: the problem class.
        instance: a batch of B instances.
        tours: (B, S) integer actions in order (a float dtype is refused, whole values or not); tours that
            end early are padded with the no-op (the depot for depot problems).

    Returns:
        (B,) float cost (the quantity minimised).

    Raises:
        ValueError: for tours that are not (B, S) integers; naming the first node outside 0..N-1; naming
            the first instance whose tour takes a masked action or does not finish.
    """
    tours = as_tours(instance, tours)
    n = problem.n_total_of(instance)
    outside = (tours < 0) | (tours >= n)
    if bool(outside.any()):
        b, t = (int(i) for i in outside.nonzero()[0])
        raise ValueError(f"tour of instance {b} has node {int(tours[b, t])} at step {t}, outside the nodes 0..{n - 1}")
    cost, feasible, first_masked = replay(problem, instance, tours)
    if not bool(feasible.all()):
        b = int((~feasible).nonzero()[0])
        t = int(first_masked[b])
        if t >= 0:
            raise ValueError(f"infeasible tour: instance {b} takes masked action {int(tours[b, t])} at step {t}")
        raise ValueError(f"infeasible tour: instance {b}'s tour of {tours.shape[1]} steps does not finish")
    return cost


def native_array(value: Any) -> np.ndarray:
    """``value`` as a numpy array torch can take without a copy's surprises: C-contiguous (a negative-stride
    view such as ``x[::-1]`` is copied) and in the machine's byte order (a big-endian array is converted)."""
    arr = np.asarray(value)
    if arr.dtype.byteorder not in ("=", "|"):
        arr = arr.astype(arr.dtype.newbyteorder("="))
    contiguous = arr.flags.c_contiguous and all(s >= 0 for s in arr.strides)  # a 1-element view may be both
    return arr if contiguous else arr.copy(order="C")


def _shape(value: Any, name: str) -> tuple:
    """The shape of an instance field's value, read without copying it (a tensor may be on any device)."""
    try:
        return tuple(np.shape(value))
    except ValueError as e:
        raise ValueError(f"instance field '{name}' is not a numeric array: {e}") from None


def _tensor(value: Any, name: str) -> Tensor:
    """An instance field's value as a tensor (a tensor as it is; ``ValueError`` names the field)."""
    try:
        return value.detach() if isinstance(value, Tensor) else torch.as_tensor(native_array(value))
    except (TypeError, ValueError, RuntimeError) as e:
        raise ValueError(f"instance field '{name}' is not numeric: {e}") from None


def as_float_tensor(value: Any, name: str, shape: tuple, device: Any) -> Tensor:
    """One instance field (an array-like, or a tensor, which stays on its device when ``device`` is None)
    as a float32 tensor on ``device``, checking that it holds real numbers (not bools), its shape and its
    finiteness (``ValueError`` names the field)."""
    arr = _tensor(value, name)
    if arr.dtype == torch.bool or arr.is_complex():
        raise ValueError(f"instance field '{name}' must hold real numbers, got dtype {arr.dtype}")
    arr = arr.to(device=device, dtype=torch.float32)
    if tuple(arr.shape) != tuple(shape):
        raise ValueError(f"instance field '{name}' must have shape {tuple(shape)}, got {tuple(arr.shape)}")
    if not torch.isfinite(arr).all():
        raise ValueError(f"instance field '{name}' contains NaN or inf")
    return arr


def option_codes(value: Any, name: str, names: tuple[str, ...], lead: tuple, b: int, device: Any) -> Tensor:
    """An instance field that names one of ``names``: the names or their codes 0..len(names) - 1, one for all
    instances or (B,) / (B, 1), as a (B, 1) float32 tensor on ``device`` (``ValueError`` names the field)."""
    arr = np.asarray(value) if not isinstance(value, Tensor) else None
    if arr is not None and arr.dtype.kind in "US":
        if not set(arr.reshape(-1).tolist()) <= set(names):
            raise ValueError(f"instance field '{name}' must be one of {names}, got {value!r}")
        if arr.shape not in ((), lead, lead + (1,)):
            raise ValueError(f"instance field '{name}' must have shape {lead + (1,)}, got {arr.shape}")
        codes = np.vectorize(names.index, otypes=[np.float32])(arr).reshape(-1)
        return torch.as_tensor(np.broadcast_to(codes, (b,)).copy(), device=device).reshape(b, 1)
    shape = _shape(value, name)
    code = as_float_tensor(value, name, shape if shape in ((), lead, lead + (1,)) else lead, None).to(device)
    code = code.reshape(-1).expand(b).reshape(b, 1) if code.numel() == 1 else code.reshape(b, 1)
    if ((code != code.round()) | (code < 0) | (code > len(names) - 1)).any():
        raise ValueError(f"instance field '{name}' must be one of {names} or their codes 0..{len(names) - 1}, got "
                         f"{code.reshape(-1).tolist()}")
    return code


def check_range(arr: Tensor, name: str, low: float, high: float) -> None:
    if arr.numel() and (arr.min() < low or arr.max() > high):
        raise ValueError(f"instance field '{name}' must lie in [{low}, {high}], "
                         f"got values in [{float(arr.min()):.6g}, {float(arr.max()):.6g}]")


def whole(values: Tensor, low: float, high: float) -> Tensor:
    """Where ``values`` are whole numbers in [low, high] (a check for :attr:`Field.rules`)."""
    return (values == values.round()) & (values >= low) & (values <= high)


def node_count(ok: Callable[[int], bool], text: str) -> tuple:
    """A rule (:attr:`Field.rules`) on the node count N: ``ok(N)``, else "must hold {text}, got N nodes"."""
    return lambda values, n: ok(n), lambda values, n: f"must hold {text}, got {n} node{'s' * (n != 1)}"


ZERO_AT_DEPOT = (lambda values, n: values[:, 0] == 0, "must be 0 at the depot (node 0)")  # a rule on per-node values


def locs_field(*rules) -> Field:
    """``locs`` (N, 2): coordinates in [0, 1], with the unit's ``rules`` (its node count)."""
    return Field("locs", ("N", 2), 0.0, 1.0, rules=rules)


def read_fields(fields: tuple[Field, ...], data: Any, *, batched: bool = False,
                device: Any = None) -> dict[str, Tensor]:
    """The tensors of user instance(s) read against a problem's declared ``fields``: ``data`` is a mapping of
    arrays (or tensors) keyed by field name, or the problem's ``Instance``; each field (B, *shape) with its
    kind's dtype, B = 1 unless ``batched`` (then every given field has a leading B axis), on ``device`` (None:
    the first field's device, a tensor's own or the CPU). B and N come from the first field with an ``"N"``
    axis. An absent optional field is read as its default, broadcast to its shape.

    Raises:
        ValueError: naming the field: a required one missing, an unknown one, a wrong shape, values that are
            not real numbers (a flag: bools or 0 / 1), NaN or inf (``"float_or_inf"``: +inf allowed), a value
            outside [low, high], an unknown option, or a broken rule.
    """
    names = [f.name for f in fields]
    required = tuple(f.name for f in fields if f.default is None)
    if isinstance(data, tuple) and hasattr(data, "_asdict"):
        data = data._asdict()
    if not isinstance(data, Mapping):
        raise ValueError(f"an instance must be a mapping of arrays with keys {required}, or the problem's "
                         f"Instance, got {type(data).__name__}")
    missing = [k for k in required if k not in data]
    if missing:
        raise ValueError(f"instance lacks field(s) {missing}; expected {names}")
    unknown = [k for k in data if k not in names]
    if unknown:
        raise ValueError(f"instance has unknown field(s) {unknown}; expected {names}")
    b, n = _sizes(next(f for f in fields if "N" in f.shape), data, batched)
    lead = (b,) if batched else ()
    out = {}
    for field in fields:
        shape = tuple(n if d == "N" else d for d in field.shape)
        value = data[field.name] if field.name in data else np.array(np.broadcast_to(field.default, lead + shape))
        out[field.name] = _read(field, value, lead, shape, n, device)
        device = out[field.name].device if device is None else device
    return out


def _sizes(field: Field, data: Mapping[str, Any], batched: bool) -> tuple[int, int]:
    """(B, N) from the shape of ``field``'s value (B = 1 unless ``batched``)."""
    shape = _shape(data[field.name], field.name)
    symbols = ("B",) * batched + tuple(field.shape)
    nodes = {s for s, d in zip(shape, symbols) if d == "N"}
    fixed = all(s == d for s, d in zip(shape, symbols) if isinstance(d, int))
    if len(shape) != len(symbols) or len(nodes) != 1 or not fixed:
        expected = "(" + ", ".join(map(str, symbols)) + ("," if len(symbols) == 1 else "") + ")"
        raise ValueError(f"instance field '{field.name}' must have shape {expected}, got {shape}")
    return (shape[0] if batched else 1), nodes.pop()


def _read(field: Field, value: Any, lead: tuple, shape: tuple, n: int, device: Any) -> Tensor:
    """One field's value as a (B, *shape) tensor of its kind, checked against its bounds and rules."""
    name, b = field.name, (lead or (1,))[0]
    if field.options:
        out = option_codes(value, name, field.options, lead, b, device).reshape(b, *shape)
    else:
        want = lead + shape
        if shape[-1:] == (1,) and _shape(value, name) == lead + shape[:-1]:
            want = lead + shape[:-1]  # a last axis of 1 left out
        out = _numbers(field.kind, value, name, want, device).reshape(b, *shape)
    low, high = (v(n) if callable(v) else v for v in (field.low, field.high))
    if field.kind == "int":
        if ((out != out.round()) | (out < low) | (out > high)).any():
            raise ValueError(f"instance field '{name}' must be an integer in [{low}, {high}]")
        out = out.long()
    elif low is not None or high is not None:
        check_range(out, name, -math.inf if low is None else low, math.inf if high is None else high)
    for ok, message in field.rules:
        if not bool(torch.as_tensor(ok(out, n)).all()):
            raise ValueError(f"instance field '{name}' {message(out, n) if callable(message) else message}")
    return out


def _numbers(kind: str, value: Any, name: str, shape: tuple, device: Any) -> Tensor:
    """A field's value of ``shape`` as float32 (``"float"``, ``"int"``; ``"float_or_inf"`` keeping +inf) or
    bool (``"flag"``) on ``device``."""
    arr = _tensor(value, name)
    if kind == "flag":
        if tuple(arr.shape) != shape:
            raise ValueError(f"instance field '{name}' must have shape {shape}, got {tuple(arr.shape)}")
        if arr.dtype != torch.bool and not bool(((arr == 0) | (arr == 1)).all()):
            raise ValueError(f"instance field '{name}' must be a bool (or 0 / 1)")
        return arr.to(device=device).bool()
    inf = torch.isposinf(arr) if kind == "float_or_inf" and arr.is_floating_point() else None
    out = as_float_tensor(arr if inf is None else arr.masked_fill(inf, 0), name, shape, device)
    return out if inf is None else out.masked_fill(inf.to(out.device), torch.inf)
