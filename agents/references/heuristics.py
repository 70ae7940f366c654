"""Classic heuristics for the problems of the registry, batched in torch (no Python loop over instances).

A heuristic reads only what the problem unit declares (``has_depot``, ``depots_by``, ``optional_visits``,
``instance_from_observation``), never which problem it is.

Two forms, one implementation:

- functions from a batch of instances to tours (B, S) int64 in the env's action format (tours that end
  early are padded with the no-op: the depot for depot problems), which
  :func:`routing_gym.problems.tour_cost` accepts: :func:`heuristic_tours` by name, or the pieces
  (:func:`nearest_neighbour_tsp`, :func:`insertion_tsp`, :func:`construct`, and :func:`two_opt` of
  :mod:`agents.inference.local_search`, which improves any decoded tour);
- policies of the protocol of :mod:`agents.policies.protocol` (``precompute`` / ``log_probs``), so that
  ``routing-gym eval --policy NAME`` runs any of them on the vector env: :data:`HEURISTICS` maps a name to
  a class whose instances, ``HEURISTICS[name](problem)``, are such policies (stateless: ``log_probs``
  returns its cache unchanged). :func:`applicable` says which apply to a problem.

==================== ========================================================================================
name                 what it does
==================== ========================================================================================
``random``           uniform over the allowed nodes
``nearest``          nearest allowed node (without a depot from node 0; a depot, any of ``depots_by``, only when
                     no customer is allowed, except where ``optional_visits == "prize_collecting"``: back as
                     soon as the depot is allowed and nearest)
``greedy``           nearest feasible node, by the problem's ``optional_visits``: none: as ``nearest``;
                     ``"orienteering"``: the best prize per distance among the reachable nodes;
                     ``"prize_collecting"`` (on the observed prizes): collect the prize by nearest neighbour,
                     then keep visiting the nearest node while its penalty exceeds its detour
``nearest_insertion`` without a depot: insert the node nearest to the tour at its cheapest position
``farthest_insertion`` without a depot: insert the node farthest from the tour at its cheapest position
``random_insertion``  without a depot: insert nodes in random order (seed 0) at their cheapest position
``2opt``             without a depot: farthest insertion then 2-opt; with routes that return to the depot:
                     ``greedy`` then intra-route 2-opt; with optional visits: ``greedy``, then rounds of 2-opt
                     and node insertion / removal (:func:`improve_routes`)
``savings``          routes bound by a capacity alone (CVRP): Clarke & Wright's parallel savings
                     (:func:`savings_routes`)
==================== ========================================================================================

The insertions and ``2opt`` plan whole tours from the instance, so their policies read it from the first
observation (``Problem.instance_from_observation``): not where it is hidden (an observation of expected values
only), and, as they measure Euclidean distances, not where nodes have no coordinates (``policy.coordinates``
None).
``nearest`` measures the problem's declared travel costs where it has them (``policy.edge_weights``, the
cost from the current node's row), Euclidean distances otherwise.

References: Rosenkrantz, Stearns & Lewis (1977) for the insertion rules; Croes (1958) for 2-opt; Clarke &
Wright (1964) and Yellow (1970) for the savings. Kool et al. 2019 (Table 1) report the same baselines for
TSP.
"""
from __future__ import annotations

from functools import cache, partial
from typing import Callable

import torch
from torch import Tensor

from routing_gym.problems import PROBLEMS, get_problem

from ..inference.local_search import distances, two_opt
from ..inference.rollout import make_env, replay, rollout
from ..inference.search import pad_tours

INSERTION_RULES = ("nearest", "farthest", "random")
WINDOW = 64  # savings pairs :func:`savings_routes` checks at once
LOAD_TOLERANCE = 1e-6  # a joined route fits when its load (float64, fractions of the capacity) is at most 1 + this
INF = float("inf")
PLANNED = ("nearest_insertion", "farthest_insertion", "random_insertion", "2opt", "savings")  # whole tours planned


# -- policies of the protocol -------------------------------------------------------------------
class NearestNeighbour:
    """Go to the nearest allowed node. Without a depot the tour starts at node 0. With one, the depot comes
    last (only when no customer is allowed: CVRP, SDVRP, OP; with several, ``depots_by``, every depot: no
    move between depots while a customer is allowed), except where the problem is prize-collecting
    (PCTSP, SPCTSP): back as soon as the depot is allowed and nearest (it ignores penalties)."""

    def __init__(self, problem):
        self.problem = get_problem(problem)
        self.start_at_zero = not self.problem.has_depot
        self.depot_last = self.problem.has_depot and self.problem.optional_visits != "prize_collecting"

    def precompute(self, obs: dict) -> Tensor:
        """The coordinates, or the problem's declared travel costs (``policy.edge_weights``, (B, N, N))."""
        return obs[self.problem.policy.edge_weights or "locs"]

    def log_probs(self, locs: Tensor, obs: dict) -> tuple[Tensor, Tensor]:
        rows = torch.arange(locs.shape[0], device=locs.device)
        if self.problem.policy.edge_weights:  # the costs from the current node
            dist = locs[rows, obs["current_node"]]
        else:
            dist = torch.linalg.vector_norm(locs - locs[rows, obs["current_node"]][:, None], dim=-1)
        mask = obs["action_mask"].bool()
        nodes = torch.arange(mask.shape[1], device=mask.device)
        if self.start_at_zero:  # the first action is node 0
            dist = dist.masked_fill((obs["num_steps"][:, 0] == 0)[:, None] & (nodes != 0), float("inf"))
        elif self.depot_last:
            depots = obs[self.problem.depots_by].bool() if self.problem.depots_by else nodes == 0
            dist = dist + 1e3 * depots
        return torch.log_softmax((-dist * 1e3).masked_fill(~mask, float("-inf")), dim=-1), locs


class UniformRandom:
    """Uniform over the allowed nodes (of any problem)."""

    def __init__(self, problem=None):
        self.problem = None if problem is None else get_problem(problem)

    def precompute(self, obs: dict) -> None:
        return None

    def log_probs(self, cache: None, obs: dict) -> tuple[Tensor, None]:
        mask = obs["action_mask"]
        return torch.log(mask.float() / mask.sum(dim=-1, keepdim=True)), cache


def one_hot_log_probs(score: Tensor, mask: Tensor) -> Tensor:
    """Log-probabilities (B, N) that put (almost) all mass on the allowed node of highest ``score``."""
    best = score.masked_fill(~mask, float("-inf")).argmax(dim=-1)
    logits = torch.full_like(score, -1e4).scatter(1, best[:, None], 0.0)
    return logits.masked_fill(~mask, float("-inf")).log_softmax(dim=-1)


def prize_per_distance(locs: Tensor, obs: dict) -> Tensor:
    """Greedy's orienteering rule: the best prize per unit of distance; the depot when nothing fits."""
    b = torch.arange(locs.shape[0], device=locs.device)
    mask = obs["action_mask"].bool()
    dist = torch.linalg.vector_norm(locs - locs[b, obs["current_node"]][:, None], dim=-1)  # (B, N)
    depot = torch.arange(mask.shape[1], device=mask.device) == 0
    score = torch.where(depot, -1.0, obs["prize"] / dist.clamp(min=1e-9))
    return one_hot_log_probs(score, mask)


def penalty_vs_detour(locs: Tensor, obs: dict) -> Tensor:
    """Greedy's prize-collecting rule: the nearest node while the prize quota is not met, then the nearest
    node whose penalty exceeds its detour; the depot when none is left."""
    b = torch.arange(locs.shape[0], device=locs.device)
    mask = obs["action_mask"].bool()
    dist = torch.linalg.vector_norm(locs - locs[b, obs["current_node"]][:, None], dim=-1)  # (B, N)
    depot = torch.arange(mask.shape[1], device=mask.device) == 0
    to_depot = torch.linalg.vector_norm(locs - locs[:, :1], dim=-1)  # (B, N)
    detour = dist + to_depot - to_depot.gather(1, obs["current_node"][:, None])
    worth = obs["penalty"] > detour
    collecting = obs["prize_to_collect"][:, 0] > 0
    keep = mask & ~depot & (collecting[:, None] | worth)
    score = torch.where(keep, -dist, float("-inf"))
    score = torch.where(depot, torch.where(keep.any(dim=1, keepdim=True), float("-inf"), 0.0), score)
    return one_hot_log_probs(score, mask)


GREEDY_RULES: dict[str, Callable[[Tensor, dict], Tensor]] = {  # by the problem's ``optional_visits``
    "orienteering": prize_per_distance,
    "prize_collecting": penalty_vs_detour,
}


class Greedy:
    """Nearest feasible node, by the problem's ``optional_visits`` (see the module table; nearest neighbour where a
    tour visits every node); deterministic, so greedy decoding, sampling and beam search all follow it."""

    def __init__(self, problem):
        self.problem = get_problem(problem)
        self.rule = GREEDY_RULES.get(self.problem.optional_visits)
        self.nearest = NearestNeighbour(self.problem)

    def precompute(self, obs: dict) -> Tensor:
        return self.nearest.precompute(obs) if self.rule is None else obs["locs"]

    def log_probs(self, locs: Tensor, obs: dict) -> tuple[Tensor, Tensor]:
        if self.rule is None:
            return self.nearest.log_probs(locs, obs)
        return self.rule(locs, obs), locs


class PlannedTours:
    """A policy that plans the whole tour at ``precompute`` (with :func:`heuristic_tours`, on the instances
    that ``problem.instance_from_observation`` reads from the first observation) and then plays it back,
    one action per step (``obs["num_steps"]`` indexes the plan)."""

    def __init__(self, problem, name: str):
        self.problem = get_problem(problem)
        check_heuristic(self.problem, name)
        self.name = name

    def precompute(self, obs: dict) -> Tensor:
        return heuristic_tours(self.problem, self.problem.instance_from_observation(obs), self.name)

    def log_probs(self, tours: Tensor, obs: dict) -> tuple[Tensor, Tensor]:
        mask = obs["action_mask"].bool()
        t = obs["num_steps"][:, 0].long().clamp(max=tours.shape[1] - 1)
        planned = tours.gather(1, t[:, None]).squeeze(1)
        score = (torch.arange(mask.shape[1], device=mask.device) == planned[:, None]).float()
        return one_hot_log_probs(score, mask), tours


HEURISTICS: dict[str, Callable[..., object]] = {  # name -> (problem -> policy of the protocol)
    "random": UniformRandom,
    "nearest": NearestNeighbour,
    "greedy": Greedy,
    "nearest_insertion": partial(PlannedTours, name="nearest_insertion"),
    "farthest_insertion": partial(PlannedTours, name="farthest_insertion"),
    "random_insertion": partial(PlannedTours, name="random_insertion"),
    "2opt": partial(PlannedTours, name="2opt"),
    "savings": partial(PlannedTours, name="savings"),
}


@cache
def hidden_instance(problem) -> str | None:
    """Why ``problem``'s instance cannot be read from an observation (the unit's own refusal, by
    ``instance_from_observation`` on a small instance's first observation), or None when it can."""
    instance = problem.generate(1, max(2, problem.min_num_nodes))
    try:
        problem.instance_from_observation(problem.observe(problem.reset(instance)))
    except ValueError as e:
        return str(e)
    return None


def refusal(problem, name: str) -> str | None:
    """Why the heuristic ``name`` does not run on ``problem``, or None when it does."""
    problem = get_problem(problem)
    if name not in HEURISTICS:
        return f"unknown heuristic {name!r}; choose one of {sorted(HEURISTICS)}"
    why = _not_for(problem, name)
    return f"{why}; for {problem.label} choose one of {applicable(problem)}" if why else None


def _not_for(problem, name: str) -> str | None:
    if name.endswith("_insertion") and problem.has_depot:
        without = "/".join(p.label for p in PROBLEMS.values() if not p.has_depot)
        return f"heuristic {name!r} is for problems without a depot ({without} only)"
    if name == "savings" and not capacity_only(problem):
        which = "/".join(p.label for p in PROBLEMS.values() if capacity_only(p))
        return f"heuristic 'savings' joins routes bound by a capacity alone ({which} only, where they replay)"
    if name in PLANNED and problem.policy.coordinates is None:
        return f"heuristic {name!r} plans tours by Euclidean distances, and {problem.label} has no coordinates"
    if name in PLANNED and (why := hidden_instance(problem)):
        return f"heuristic {name!r} plans whole tours from the instance, and {why}"
    return None


@cache
def capacity_only(problem) -> bool:
    """Routes from a depot that serve every customer within a capacity and nothing else: instances of exactly
    ``locs`` and ``demand`` (what :func:`savings_routes` reads), whose savings routes replay through the unit's
    rules on a small generated batch (not SDVRP's, which sends a vehicle with room on to a customer)."""
    problem = get_problem(problem)
    instance = problem.generate(8, max(10, problem.min_num_nodes), generator=torch.Generator().manual_seed(0))
    if not (problem.has_depot and problem.optional_visits is None and set(instance._fields) == {"locs", "demand"}):
        return False
    return bool(replay(problem, instance, savings_routes(instance))[1].all())


def check_heuristic(problem, name: str) -> None:
    """``ValueError`` saying why, when the heuristic ``name`` does not run on ``problem``."""
    why = refusal(problem, name)
    if why:
        raise ValueError(why)


def applicable(problem) -> list[str]:
    """The heuristics that apply to ``problem`` with a rule of their own, in :data:`HEURISTICS` order: every
    one that runs on it (:func:`refusal`), less ``greedy`` where it is ``nearest`` (no ``optional_visits``)."""
    problem = get_problem(problem)
    return [name for name in HEURISTICS if _not_for(problem, name) is None
            and not (name == "greedy" and problem.optional_visits is None)]


# -- tours from instances -------------------------------------------------------------------------
def nearest_neighbour_tsp(locs: Tensor, start: int = 0) -> Tensor:
    """TSP tours (B, N) by nearest neighbour from node ``start``."""
    b, n, _ = locs.shape
    dist = distances(locs)
    rows = torch.arange(b, device=locs.device)
    current = torch.full((b,), start, dtype=torch.long, device=locs.device)
    visited = torch.zeros(b, n, dtype=torch.bool, device=locs.device)
    tour = [current]
    for _ in range(n - 1):
        visited[rows, current] = True
        current = dist[rows, current].masked_fill(visited, float("inf")).argmin(dim=1)
        tour.append(current)
    return torch.stack(tour, dim=1)


def insertion_tsp(locs: Tensor, rule: str = "farthest", generator: torch.Generator | None = None) -> Tensor:
    """TSP tours (B, N) by insertion from node 0: each round picks a node by ``rule`` (``"nearest"`` /
    ``"farthest"``: min / max over the remaining nodes of their distance to the tour; ``"random"``: a
    random order from ``generator``) and inserts it where the tour grows least."""
    if rule not in INSERTION_RULES:
        raise ValueError(f"rule must be one of {INSERTION_RULES}, got {rule!r}")
    b, n, _ = locs.shape
    dev = locs.device
    dist = distances(locs)
    rows = torch.arange(b, device=dev)
    tour = torch.zeros(b, 1, dtype=torch.long, device=dev)
    in_tour = torch.zeros(b, n, dtype=torch.bool, device=dev)
    in_tour[:, 0] = True
    to_tour = dist[:, 0].clone()  # (B, N) distance of each node to the nearest tour node
    priority = torch.rand(b, n, generator=generator, device=dev) if rule == "random" else None
    for k in range(1, n):
        if rule == "random":
            node = priority.masked_fill(in_tour, float("inf")).argmin(dim=1)
        elif rule == "nearest":
            node = to_tour.masked_fill(in_tour, float("inf")).argmin(dim=1)
        else:
            node = to_tour.masked_fill(in_tour, float("-inf")).argmax(dim=1)
        a, c = tour, tour.roll(-1, dims=1)  # edges (a_i, a_{i+1}) of the closed tour, (B, k)
        d_node = dist[rows, node]  # (B, N)
        grow = d_node.gather(1, a) + d_node.gather(1, c) - dist[rows[:, None], a, c]
        pos = grow.argmin(dim=1)  # insert after position pos
        idx = torch.arange(k + 1, device=dev)[None]
        src = torch.where(idx <= pos[:, None], idx, idx - 1).clamp(max=k - 1)
        tour = tour.gather(1, src)
        tour[rows, pos + 1] = node
        in_tour[rows, node] = True
        to_tour = torch.minimum(to_tour, d_node)
    return tour


def savings_routes(instances, shape: float | Tensor = 1.0, neighbours: int = 20) -> Tensor:
    """Capacitated routes (B, S) by Clarke & Wright's parallel savings (1964), batched: every customer
    starts on a route of its own, and in decreasing order of the saving ``d(0, i) + d(0, j) - shape * d(i, j)``
    (``shape`` scalar or (B,): Yellow's 1970 route-shape parameter) two routes whose ends are ``i`` and ``j``
    are joined there where their loads fit the capacity (1: ``instances.demand`` is a fraction of it).
    Only pairs among each customer's ``neighbours`` nearest customers are considered (the others' savings
    are rarely taken first). The loop goes from join to join: each row checks its next :data:`WINDOW` pairs
    at once against its routes as they are (they change only where a pair joins) and moves to its first join
    there. Reads ``locs`` and ``demand``; routes in Kool's action format (no leading depot, the depot between
    routes, padded with it)."""
    locs, demand = instances.locs, instances.demand.double()
    b, n, _ = locs.shape
    dev = locs.device
    rows = torch.arange(b, device=dev)
    dist = distances(locs)
    shape = torch.as_tensor(shape, dtype=torch.float64, device=dev).expand(b)
    k = min(neighbours, n - 2)
    if k < 1:  # one customer (or none): one route
        return torch.arange(n, device=dev).roll(-1).expand(b, n).clone()
    between = dist[:, 1:, 1:] + torch.diag(torch.full((n - 1,), INF, dtype=torch.float64, device=dev))
    near = between.topk(k, dim=2, largest=False).indices + 1  # (B, N-1, k) nearest other customers
    i = torch.arange(1, n, device=dev)[None, :, None].expand_as(near).reshape(b, -1)
    j = near.reshape(b, -1)
    saving = dist[:, 0].gather(1, i) + dist[:, 0].gather(1, j) - shape[:, None] * dist[rows[:, None], i, j]
    mutual = (near.gather(1, (j - 1)[:, :, None].expand(-1, -1, k)) == i[:, :, None]).any(dim=2)
    saving = saving.masked_fill(mutual & (i > j), -INF)  # each pair once
    order = saving.argsort(dim=1, descending=True)
    saving, i, j = saving.gather(1, order), i.gather(1, order), j.gather(1, order)
    pair = torch.stack([i, j], dim=2)  # (B, P, 2)
    label = torch.arange(n, device=dev).expand(b, n).clone()  # a route is named by one of its customers
    load = demand.clone()  # load of the route named v, at v
    link = torch.zeros(b, 2, n, dtype=torch.long, device=dev)  # next / previous customer on the route, 0 at an end
    count = (saving > 0).sum(dim=1)  # pairs with a positive saving, first in the order
    pos = torch.zeros_like(count)  # the next pair of each row
    window = torch.arange(WINDOW, device=dev)
    while bool((pos < count).any()):  # each row's next join within WINDOW pairs (its state changes only there)
        at = pos[:, None] + window  # (B, W)
        ac = pair.gather(1, at.clamp(max=pair.shape[1] - 1)[:, :, None].expand(-1, -1, 2))  # customers a and c
        named = label.gather(1, ac.view(b, -1)).view(b, WINDOW, 2)  # their routes
        around = link.gather(2, ac.view(b, 1, -1).expand(b, 2, -1)).view(b, 2, WINDOW, 2)  # next / previous of a, c
        fits = load.gather(1, named.view(b, -1)).view(b, WINDOW, 2).sum(dim=2) <= 1 + LOAD_TOLERANCE
        ok = (at < count[:, None]) & (named[..., 0] != named[..., 1]) & (around == 0).any(dim=1).all(dim=2) & fits
        join = ok.any(dim=1)
        first = ok.to(torch.uint8).argmax(dim=1)
        pos = torch.where(join, pos + first + 1, pos + WINDOW)
        ac, named, around = ac[rows, first], named[rows, first], around[rows, :, first]
        # orient: a the last customer of its route, c the first of its own, then link a -> c
        turn = join[:, None] & (around[:, [0, 1], [0, 1]] != 0)  # a has a next, c a previous
        flip = ((label[:, None] == named[:, :, None]) & turn[:, :, None]).any(dim=1)  # (B, N)
        link = torch.where(flip[:, None], link.flip(1), link).view(b, 2 * n)
        at = torch.stack([ac[:, 0], n + ac[:, 1]], dim=1)  # next of a, previous of c
        link = link.scatter(1, at, torch.where(join[:, None], ac.flip(1), link.gather(1, at))).view(b, 2, n)
        moved = torch.where(join[:, None], load.gather(1, named[:, 1:]), 0.0)  # c's route's load, onto a's
        load = load.scatter_add(1, named[:, :1], moved)
        label = torch.where(join[:, None] & (label == named[:, 1:]), named[:, :1], label)
    return linked_routes(*link.unbind(1))


def linked_routes(nxt: Tensor, prv: Tensor) -> Tensor:
    """Routes (B, S) in Kool's action format from linked customers (B, N) (``nxt`` / ``prv``: the next / previous
    customer on a customer's route, 0 at its ends; column 0 unused), routes in the order of their first customer."""
    b, n = nxt.shape
    rows = torch.arange(b, device=nxt.device)
    first = prv == 0
    first[:, 0] = False
    current = torch.zeros(b, dtype=torch.long, device=nxt.device)
    steps = []
    for _ in range(2 * (n - 1)):
        at_depot = current == 0
        start = first.float().argmax(dim=1)  # the first route not yet driven (0 where none is left)
        start = torch.where(first.any(dim=1), start, 0)
        current = torch.where(at_depot, start, nxt[rows, current])
        first[rows, current] = False
        steps.append(current)
        if bool((at_depot & (start == 0)).all()):
            break
    return torch.stack(steps, dim=1)


def construct(problem, instances, policy=None, strategy: str = "greedy",
              generator: torch.Generator | None = None) -> Tensor:
    """Tours (B, S) of a policy of the protocol (default :class:`Greedy`), decoded on the vector env
    (``strategy`` ``"greedy"`` or ``"sample"``)."""
    policy = Greedy(problem) if policy is None else policy
    env = make_env(problem.name, problem.size_of(instances), instances[0].shape[0], instances[0].device)
    with torch.no_grad():
        return rollout(policy, env, instances, strategy=strategy, generator=generator).actions


def improve_routes(problem, instances, tours: Tensor, max_iterations: int = 1000, rounds: int = 5) -> Tensor:
    """Local search on depot-problem tours (B, S) (Kool's action format: no leading depot).

    Without ``optional_visits`` (routes that serve every customer: CVRP, SDVRP): intra-route 2-opt, so each route
    keeps its customers and its load. With ``optional_visits`` (one route: OP, PCTSP): up to ``rounds`` rounds of
    2-opt followed by node moves (:func:`insert_and_remove`), which use the length that 2-opt freed; a
    round that changes nothing ends the search. A tour whose improvement does not replay is kept.
    """
    routes = problem.optional_visits is None
    zeros = torch.zeros_like(tours[:, :1])
    pad = instances.locs.shape[1] + 1 - tours.shape[1] if not routes else 0
    seq = torch.cat([zeros, tours] + [zeros] * max(pad, 1), dim=1)
    for _ in range(1 if routes else rounds):
        before = seq
        seq = two_opt(instances.locs, seq, fixed=seq == 0, max_iterations=max_iterations)
        if not routes:
            seq = insert_and_remove(problem, instances, seq)
        if torch.equal(seq, before):
            break
    better = seq[:, 1:]
    # float32 rounding in the env could in principle reject a tour at a length bound or a prize minimum
    # (or, with split deliveries, a reversed route deliver differently): keep the original tour where the
    # improved one does not replay.
    ok = replay(problem, instances, better)[1]
    width = max(better.shape[1], tours.shape[1])
    better, tours = pad_tours(better, width), pad_tours(tours, width)
    return torch.where(ok[:, None], better, tours)


def insert_and_remove(problem, instances, seq: Tensor, margin: float = 1e-5) -> Tensor:
    """Node moves on single-route tours ``seq`` (B, L) = ``0, c_1 .. c_k, 0, 0 ..`` (L >= N + 1), one
    move per instance and iteration until none applies:

    - ``optional_visits == "orienteering"`` (OP): insert the unvisited node of highest prize per added length among
      those that keep the tour within ``max_length - margin``, at its cheapest position;
    - ``optional_visits == "prize_collecting"`` (PCTSP): insert the node whose penalty exceeds its insertion cost the
      most; otherwise remove the node whose detour exceeds its penalty the most, if the prize collected
      stays above 1 + margin.
    """
    orienteering = problem.optional_visits == "orienteering"
    b, length = seq.shape
    dev = seq.device
    dist = distances(instances.locs)
    rows = torch.arange(b, device=dev)
    pos = torch.arange(length, device=dev)
    for _ in range(2 * instances.locs.shape[1]):
        size = (seq[:, 1:] != 0).sum(dim=1)  # k customers; the route is seq[0 .. k + 1]
        a, c = seq[:, :-1], seq[:, 1:]
        on_route = (pos[None, :-1] <= size[:, None])  # edges (p, p + 1) of the route, (B, L-1)
        edge = dist[rows[:, None], a, c]  # (B, L-1)
        grow = dist[rows[:, None], a][:, :, :] + dist[rows[:, None], c] - edge[:, :, None]  # (B, L-1, N)
        grow = grow.masked_fill(~on_route[:, :, None], float("inf"))
        cost_in, where = grow.min(dim=1)  # (B, N) cheapest insertion of each node
        visited = torch.zeros_like(dist[:, 0], dtype=torch.bool).scatter(1, seq, True)  # depot included
        length_now = (edge * on_route).sum(dim=1)
        if orienteering:
            fits = ~visited & (length_now[:, None] + cost_in <= instances.max_length[:, None].double() - margin)
            score = (instances.prize.double() / cost_in.clamp(min=1e-12)).masked_fill(~fits, float("-inf"))
            insert = fits.any(dim=1)
            remove = torch.zeros_like(insert)
        else:
            gain = (instances.penalty.double() - cost_in).masked_fill(visited, float("-inf"))
            score = gain
            insert = gain.max(dim=1).values > 1e-9
            # removal of the customer at position q in 1..k
            prev, node, nxt = seq[:, :-2], seq[:, 1:-1], seq[:, 2:]
            saving = dist[rows[:, None], prev, node] + dist[rows[:, None], node, nxt] - dist[rows[:, None], prev, nxt]
            collected = instances.prize.double().gather(1, seq).sum(dim=1)
            prize_q = instances.prize.double().gather(1, node)
            gain_out = saving - instances.penalty.double().gather(1, node)
            can = (pos[None, 1:-1] <= size[:, None]) & (node != 0) & (collected[:, None] - prize_q >= 1 + margin)
            gain_out = gain_out.masked_fill(~can, float("-inf"))
            best_out, q = gain_out.max(dim=1)
            remove = ~insert & (best_out > 1e-9)
        if not bool((insert | remove).any()):
            break
        v = score.argmax(dim=1)
        at = where.gather(1, v[:, None]).squeeze(1) + 1  # new position of v
        src = torch.where(pos[None] < at[:, None], pos[None], pos[None] - 1).clamp(min=0)
        inserted = seq.gather(1, src)
        inserted[rows, at.clamp(max=length - 1)] = v
        if not orienteering:
            q = q + 1  # position in seq
            src = torch.where(pos[None] < q[:, None], pos[None], (pos[None] + 1).clamp(max=length - 1))
            removed = seq.gather(1, src)
            removed[:, -1] = 0
        else:
            removed = seq
        seq = torch.where(insert[:, None], inserted, torch.where(remove[:, None], removed, seq))
    return seq


def heuristic_tours(problem, instances, name: str, generator: torch.Generator | None = None) -> Tensor:
    """Tours (B, S) of the heuristic ``name`` (see the module table) for a batch of instances;
    ``generator`` (default: seed 0) drives ``random`` and ``random_insertion``.

    Raises:
        ValueError: for an unknown name, or one that does not run on ``problem`` (:func:`refusal`: the
        insertions with a depot, planned tours where the instance is not observable).
    """
    problem = get_problem(problem)
    check_heuristic(problem, name)
    gen = generator if generator is not None else torch.Generator(instances[0].device).manual_seed(0)
    if name.endswith("_insertion"):
        return insertion_tsp(instances.locs, name.split("_")[0], generator=gen)
    if name == "random":
        return construct(problem, instances, UniformRandom(problem), strategy="sample", generator=gen)
    if name == "savings":
        return savings_routes(instances)
    if name == "2opt":
        if not problem.has_depot:
            tour = insertion_tsp(instances.locs, "farthest")
            return two_opt(instances.locs, torch.cat([tour, tour[:, :1]], dim=1))[:, :-1]
        return improve_routes(problem, instances, construct(problem, instances))
    return construct(problem, instances, HEURISTICS[name](problem))
