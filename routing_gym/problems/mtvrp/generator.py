"""Random instances of the multi-attribute VRP, as RouteFinder's generator (ai4co/routefinder,
``routefinder/envs/mtvrp/generator.py``, ``MTVRPGenerator`` with its defaults; RL4CO's
``rl4co/envs/routing/mtvrp/generator.py`` is the same):

- locations: every node uniform in [0, 1]^2 (``min_loc=0``, ``max_loc=1``);
- capacity (``get_vehicle_capacity``): ``30 + n // 5`` for n > 20 customers, 30 up to 20 (so 30/30/40/50
  for n = 10/20/50/100, and 230 at n = 1000); demands are divided by it (``scale_demand=True``), and
  ``capacity_original`` keeps it;
- demands: integers uniform in {1, ..., 9} (``min_demand=1``, ``max_demand=10``, drawn as
  ``floor(U(0, 9)) + 1``); with backhauls each customer is a backhaul with probability 0.2
  (``backhaul_ratio``), its pickup uniform in {1, ..., 9} and its delivery 0;
- time windows (``generate_time_windows``, after Liu et al. 2024): service times U(0.15, 0.18), window
  lengths U(0.18, 0.2), the opening uniform between the travel time ``d`` from the depot and the latest
  opening that still returns by ``max_time = 4.6``; the depots' windows [0, 4.6], service 0; ``speed`` 1;
- duration limit (``generate_distance_limit``): U(2 max_i d_i + 1e-6, max(2.8, that + 1e-6))
  (``max_distance_limit=2.8``), so that every customer can be served alone;
- multiple depots: the first ``num_depots`` nodes are depots (default 3). With several depots ``d`` above
  is the distance from the farthest depot, so every customer can be served alone from every depot.

Absent attributes take their neutral values (RouteFinder's ``subsample_problems``): ``open_route`` False,
windows [0, inf] and service 0, ``distance_limit`` inf, no backhauls (the pickup becomes a delivery of the
same size, so every customer's demand is U{1..9}), one depot.

How the plain variant (``CVRP``) relates to Kool et al.'s CVRP generator (our ``CVRP``): the same
locations and the same demand distribution U{1..9}; the same capacities 30/40/50 at n = 20/50/100, but 30
instead of 20 at n = 10, and ``30 + n // 5`` instead of Kool's linear interpolation between sizes (e.g. 36
instead of 33.3 at n = 30). The rules are the same: on the same instance data the costs are equal.

Variant batches (``variant=``): one of the 48 names; ``"all"``, RouteFinder's default
(``variant_preset="all"`` with ``use_combinations``): O, TW, L and B each present with probability 0.5,
independently per instance (its 16 variants, B as class 1); ``"mixed"``: O, TW, L, B and MD each with
probability 0.5, and B mixed (MB) with probability 0.5, so that every one of the 48 variants occurs.
"""
from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from ..base import check_num_nodes, distance, generation_device
from .attributes import VARIANTS, Flags

MAX_TIME = 4.6  # RouteFinder's max_time: the depots' closing time
BACKHAUL_RATIO = 0.2
MAX_DISTANCE_LIMIT = 2.8
SERVICE_TIME = (0.15, 0.18)
WINDOW_LENGTH = (0.18, 0.2)
MIXED_VARIANTS = ("all", "mixed")


def vehicle_capacity(num_customers: int) -> float:
    """RouteFinder's ``get_vehicle_capacity``: 30 + n // 5 above 20 customers (past 1000, one more per 33.3)."""
    n = num_customers
    extra = 1000 // 5 + (n - 1000) // 33.3 if n > 1000 else n // 5 if n > 20 else 0
    return float(30 + extra)


def sample_flags(variant: str, batch_size: int, generator, device) -> tuple[Tensor, ...]:
    """(B,) bool per attribute (``Flags`` order) for a variant name or a mixed preset."""
    if variant in VARIANTS:
        return tuple(torch.full((batch_size,), v, dtype=torch.bool, device=device) for v in VARIANTS[variant])
    coin = torch.rand(batch_size, 6, generator=generator, device=device) < 0.5  # O, B, M, L, TW, MD
    if variant == "all":
        coin[:, 2] = False
        coin[:, 5] = False
    o, b, m, lim, tw, md = coin.unbind(1)
    return o, b, m & b, lim, tw, md


def generate(batch_size: int, num_nodes: int, *, generator: torch.Generator | None = None, device: Any = None,
             variant: str = "all", num_depots: int = 3):
    """B instances with ``num_nodes + 1`` nodes (``num_depots`` of them depots in multi-depot variants), drawn on
    the device without reading a value on the host."""
    from .unit import MTVRPInstance

    n = check_num_nodes(num_nodes, minimum=1)
    dev = generation_device(generator, device)
    b, big = batch_size, n + 1
    flags = Flags(*sample_flags(variant, b, generator, dev))
    k = num_depots if variant == "mixed" or VARIANTS.get(variant, Flags(*[False] * 6)).multi_depot else 1  # depot slots
    if k > n:
        raise ValueError(f"num_depots={num_depots} leaves no customer among num_nodes + 1 = {n + 1} nodes")
    rand = lambda *shape: torch.rand(*shape, generator=generator, device=dev)  # noqa: E731
    locs = rand(b, big, 2)
    depots = torch.where(flags.multi_depot, num_depots, 1)  # (B,)
    is_depot = torch.arange(big, device=dev)[None, :] < depots[:, None]
    customer = ~is_depot
    cap = vehicle_capacity(n)
    units = torch.randint(1, 10, (b, big), generator=generator, device=dev).float()
    pickup = (rand(b, big) <= BACKHAUL_RATIO) & flags.backhaul[:, None] & customer
    demand_linehaul = torch.where(pickup | is_depot, 0.0, units / cap)
    demand_backhaul = torch.where(pickup, units / cap, 0.0)

    # travel from the farthest of the instance's depots (the depots are the first nodes)
    d = distance(locs[:, :k, None], locs[:, None, :])  # (B, k, N)
    d = d.masked_fill(torch.arange(k, device=dev)[None, :, None] >= depots[:, None, None], 0.0).amax(dim=1)  # (B, N)
    speed = torch.ones(b, 1, device=dev)
    service = SERVICE_TIME[0] + (SERVICE_TIME[1] - SERVICE_TIME[0]) * rand(b, big)
    length = WINDOW_LENGTH[0] + (WINDOW_LENGTH[1] - WINDOW_LENGTH[0]) * rand(b, big)
    travel = d / speed
    # RouteFinder's (1 + (h_max - 1) U) d / speed, h_max = (max_time - service - length) / d * speed - 1
    opening = travel + rand(b, big) * (MAX_TIME - service - length - 2 * travel)
    tw = flags.time_windows[:, None]
    windows = torch.stack([torch.where(tw & customer, opening, 0.0),
                           torch.where(tw, torch.where(customer, opening + length, MAX_TIME), torch.inf)], dim=-1)
    service_time = torch.where(tw & customer, service, 0.0)

    low = 2 * d.masked_fill(is_depot, 0.0).amax(dim=1) + 1e-6
    high = torch.clamp(low + 1e-6, min=MAX_DISTANCE_LIMIT)
    limit = torch.where(flags.limit, low + (high - low) * rand(b), torch.inf)
    return MTVRPInstance(
        locs=locs, demand_linehaul=demand_linehaul, demand_backhaul=demand_backhaul, time_windows=windows,
        service_time=service_time, distance_limit=limit[:, None], open_route=flags.open_route[:, None],
        backhaul_class=torch.where(flags.mixed, 2, 1)[:, None], speed=speed, num_depots=depots[:, None],
        capacity_original=torch.full((b, 1), cap, device=dev))
