"""The attributes of the multi-attribute VRP, each rule written once: the variant names, and the batched
feasibility rules that :mod:`.unit` composes into the mask.

After RouteFinder (Berto et al. 2024, ai4co/routefinder, ``routefinder/envs/mtvrp/env.py``,
``MTVRPEnv.get_action_mask``) and RL4CO's ``MTVRPEnv`` (``rl4co/envs/routing/mtvrp/env.py``). Every attribute
is per-instance data, so that one batch mixes variants; an absent attribute is its neutral value:

- C, capacity (always): ``demand_linehaul`` (N,) delivered, as a fraction of the capacity;
- B / MB, backhauls: ``demand_backhaul`` (N,) picked up (0 everywhere: no backhauls); ``backhaul_class``
  (1,) 1 = B (on a route, linehauls before backhauls), 2 = MB (any order, load never above the capacity);
- O, open routes: ``open_route`` (1,) bool: the return to the depot is not driven (not counted, not checked);
- L, duration limit: ``distance_limit`` (1,), each route's length (inf: none);
- TW, time windows: ``time_windows`` (N, 2) for the start of service ([0, inf]: none), ``service_time``
  (N,), ``speed`` (1,); waiting allowed;
- MD, multiple depots: ``num_depots`` (1,); nodes ``0 .. num_depots - 1`` are depots. A closed route
  returns to the depot it left.

Variant names are RouteFinder's (its README's table of 48): ``[MD][O]VRP[B|MB][L][TW]``, the plain ones
``CVRP`` and ``MDCVRP``.
"""
from __future__ import annotations

import itertools
from typing import NamedTuple

import torch
from torch import Tensor

from ..masks import any_marked

TOLERANCE = 1e-5  # float32 slack of every comparison with a capacity, a closing time or a length limit


class Flags(NamedTuple):
    """Which attributes a variant has (besides C)."""

    open_route: bool  # O
    backhaul: bool  # B (linehauls first) or, with ``mixed``, MB
    mixed: bool  # MB: backhaul_class 2
    limit: bool  # L
    time_windows: bool  # TW
    multi_depot: bool  # MD


def variant_name(f: Flags) -> str:
    """RouteFinder's name of a variant (``VRPBLTW``, ``MDOVRPMB``, ``CVRP``...)."""
    core = ("O" if f.open_route else "") + "VRP" + ("MB" if f.mixed else "B" if f.backhaul else "") \
        + ("L" if f.limit else "") + ("TW" if f.time_windows else "")
    return ("MD" if f.multi_depot else "") + ("CVRP" if core == "VRP" else core)


VARIANTS: dict[str, Flags] = {
    variant_name(f): f for f in (
        Flags(o, b != "", b == "MB", lim, tw, md)
        for md, o, b, lim, tw in itertools.product((False, True), (False, True), ("", "B", "MB"), (False, True),
                                                   (False, True)))}
assert len(VARIANTS) == 48


# ------------------------------------------------------------------------------------------ the rules
def capacity_allows(demand_linehaul: Tensor, demand_backhaul: Tensor, mixed: Tensor, linehaul: Tensor,
                    backhaul: Tensor, peak: Tensor) -> Tensor:
    """C, B and MB: (B, N) bool, the customers whose demand fits.

    ``linehaul`` / ``backhaul`` (B,): delivered / picked up on the route so far; ``peak`` (B,): the most
    that pickups have exceeded deliveries at any point of the route (>= 0). The vehicle leaves the depot
    with every delivery of its route, so its load after a prefix is ``L - delivered + picked up`` with ``L``
    the route's total delivery: the route fits while ``L + peak <= 1``. A linehaul customer adds ``q`` to
    ``L``: it fits when ``linehaul + peak + q <= 1``, and under B (``mixed`` False) only before the first
    pickup; a backhaul customer fits when ``backhaul + p <= 1``. Without pickups this is CVRP's
    ``used + q <= 1``. (RouteFinder's MB mask checks ``q + picked up <= 1`` instead, which admits routes
    whose load exceeds the capacity at the start; this rule is exact.)
    """
    fits_linehaul = demand_linehaul + (linehaul + peak)[:, None] <= 1.0 + TOLERANCE
    in_order = mixed[:, None] | (backhaul <= 0)[:, None]
    fits_backhaul = demand_backhaul + backhaul[:, None] <= 1.0 + TOLERANCE
    return torch.where(demand_linehaul > 0, fits_linehaul & in_order, fits_backhaul)


def load_after(linehaul: Tensor, backhaul: Tensor, peak: Tensor, q: Tensor, p: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """The route's (delivered, picked up, peak) after serving a customer of demands ``q``, ``p`` (B,)."""
    linehaul, backhaul = linehaul + q, backhaul + p
    return linehaul, backhaul, torch.maximum(peak, backhaul - linehaul)


def time_windows_allow(arrival: Tensor, time_windows: Tensor, service_time: Tensor, back_time: Tensor,
                       horizon: Tensor, open_route: Tensor) -> Tensor:
    """TW: (B, N) bool, the nodes reached (``arrival`` (B, N)) before their window closes and, after their
    service (starting at ``max(arrival, open)``), leaving time to drive back (``back_time`` (B, N)) to the
    route's depot before its window (``horizon`` (B,)) closes; open routes do not drive back."""
    start = torch.maximum(arrival, time_windows[..., 0])
    in_time = arrival <= time_windows[..., 1] + TOLERANCE
    returns = start + service_time + back_time <= horizon[:, None] + TOLERANCE
    return in_time & (returns | open_route[:, None])


def duration_allows(route_length: Tensor, to_node: Tensor, back: Tensor, distance_limit: Tensor,
                    open_route: Tensor) -> Tensor:
    """L: (B, N) bool, the nodes after which the route (``route_length`` (B,) so far, ``to_node`` (B, N) to
    reach the node, ``back`` (B, N) from it to the route's depot, not driven on open routes) stays within
    ``distance_limit`` (B,)."""
    back = torch.where(open_route[:, None], 0.0, back)
    return route_length[:, None] + to_node + back <= distance_limit[:, None] + TOLERANCE


def depots_allow(is_depot: Tensor, current: Tensor, at_depot: Tensor, route_depot: Tensor, relocated: Tensor,
                 customer_allowed: Tensor) -> Tensor:
    """MD and the return: (B, N) bool, the depots allowed.

    From a customer: the route's depot only (the route ends there; on an open route the vehicle stops).
    At a depot: another depot (a new route starts there, at no cost) unless the last action already moved
    between depots (``relocated``), so that an episode stays finite; the depot it is at only where nothing
    else is allowed (as CVRP's rule: never twice in a row while a customer is allowed).
    """
    nodes = torch.arange(is_depot.shape[1], device=is_depot.device)[None, :]
    here = nodes == current[:, None]
    others = is_depot & ~here & (at_depot & ~relocated)[:, None]
    back = (nodes == route_depot[:, None]) & ~at_depot[:, None]
    stuck = ~any_marked(customer_allowed | others)
    return others | back | (here & (at_depot & stuck)[:, None])
