"""What ``eval``'s two paths (generated instances or a dataset, and TSPLIB / VRPLIB files) share: the call
of ``--decode``, its one-line description, and the ``--csv`` rows."""
from __future__ import annotations

import torch

from .common import make_parent

CSV_FIELDS = ("name", "n", "cost", "reference", "gap", "routes", "seconds", "tour")


def describe_decoding(args) -> str:
    """``--decode``'s settings in words, as the result line shows them (``sample x1280, augment x8``)."""
    if args.decode == "best":
        return f"best in {args.time_limit:g} s per instance" + (", revised" if args.revise else "")
    if args.decode == "sectors":
        return (f"sectors of at most {' / '.join(map(str, args.sector_sizes))} customers"
                + (f", augment x{args.augment}" if args.augment > 1 else ""))
    temperature = f" at temperature {args.temperature:g}" if args.temperature != 1 else ""
    detail = {"sample": f" x{args.samples}{temperature}", "beam": f" width {args.beam_width}"}.get(args.decode, "")
    return args.decode + detail + (f", augment x{args.augment}" if args.augment > 1 else "")


def sectors_size(args, n: int, problem: str) -> int:
    """With ``--decode sectors`` and ``--policy pretrained``: the shipped model's size nearest to the sub-problems'
    (the smallest of ``--sector-sizes``, or ``n`` when that is smaller); else ``n``."""
    if args.decode != "sectors" or args.policy != "pretrained":
        return n
    from ...policies.pretrained import nearest_pretrained_size

    return nearest_pretrained_size(problem, min(n, *args.sector_sizes))


def model_size(args, n: int, problem: str) -> tuple[int | None, str | None]:
    """``(size, note)``: with ``--policy pretrained``, the size of the shipped model that decodes instances of ``n``
    nodes (the nearest shipped; with ``--decode sectors`` the nearest the sub-problems', :func:`sectors_size`) and a
    note saying so where it is not ``n``; for a checkpoint or a heuristic ``(None, None)``."""
    if args.policy != "pretrained":
        return None, None
    from ...policies.pretrained import nearest_pretrained_size

    size = nearest_pretrained_size(problem, sectors_size(args, n, problem))
    if size == n:
        return size, None
    if args.decode == "sectors":
        return size, f"note: {problem} sectors decoded by the {problem}-{size} model"
    return size, (f"note: no shipped {problem} model for n = {n}; using the {problem}-{size} model "
                  "(the nearest size shipped)")


def decode_with(args, policy, problem, instances, options, fleet=None):
    """``--decode``'s tours of a batch: :func:`agents.inference.search.decode`, for ``best`` the pipeline of
    :mod:`agents.references.pipeline` with ``--time-limit`` seconds per instance (and the most routes per
    instance, ``fleet`` (B,), where given; ``--revise``: the shipped SHPP model revises the searched
    tours), for ``sectors`` the sub-problems of :mod:`agents.inference.subproblems`
    (``.cost``, ``.tours`` in every case). ``--bf16``: the networks run under bf16 autocast (the costs stay
    the envs' fp32 sums)."""
    with torch.autocast(instances[0].device.type, dtype=torch.bfloat16, enabled=args.bf16):
        return _decode(args, policy, problem, instances, options, fleet)


def _decode(args, policy, problem, instances, options, fleet):
    if args.decode == "best":
        from ...references.pipeline import best, shipped_reviser

        reviser = shipped_reviser(device=instances[0].device) if args.revise else None
        if args.revise and reviser is None:
            raise ValueError("--revise needs a shipped SHPP model (agents/weights/shpp20.pt); none is installed")
        return best(policy, problem, instances, args.time_limit, batch_size=args.batch_size, fleet=fleet,
                    reviser=reviser)
    if args.decode == "sectors":
        from ...inference.subproblems import sector_decode

        return sector_decode(policy, problem, instances, args.sector_sizes, augment=args.augment,
                             batch_size=args.batch_size)
    from ...inference.search import decode

    return decode(policy, problem, instances, args.decode, **options)


def csv_row(name: str, n: int, cost: float, reference: float | None, has_depot: bool, tour: list[int],
            ids, seconds: float) -> dict:
    """One ``--csv`` row: ``tour`` (actions, node indices) written as node ``ids`` (a file's own; with a depot,
    the depot's id between routes, none before the first or after the last), ``routes`` counted (TSP: 1)."""
    ids = list(ids)
    if has_depot:
        tour = [a for i, a in enumerate(tour) if a != 0 or (0 < i and tour[i - 1] != 0)]  # no empty routes
        while tour and tour[-1] == 0:
            tour.pop()
    else:
        tour = tour[:len(ids)]
    gap = None if reference is None else 100.0 * (cost - reference) / abs(reference)
    return {"name": name, "n": n, "cost": f"{cost:.10g}", "reference": "" if reference is None else f"{reference:.10g}",
            "gap": "" if gap is None else f"{gap:.4f}", "routes": count_routes(torch.tensor(tour)) if has_depot else 1,
            "seconds": f"{seconds:.3f}", "tour": " ".join(str(ids[a]) for a in tour)}


def write_csv(path: str, rows: list[dict]) -> None:
    """``--csv``: the rows under a header of :data:`CSV_FIELDS`, the missing folders above it created."""
    import csv

    make_parent(path)
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {path} ({len(rows)} rows)")


def count_routes(tours) -> int:
    """Routes in a CVRP tour (one row of actions; 0 is the depot, and 0 or -1 pads the end): runs of customers."""
    from ...references.pipeline import route_counts

    return int(route_counts(torch.as_tensor(tours).reshape(1, -1)))
