"""``routing-gym compare``: the shipped models against the classic heuristics on seeded test instances
(:mod:`agents.apps.compare`): a table, and a picture of one instance per problem."""
from __future__ import annotations

import argparse
import sys

from .common import PROBLEM_CHOICES, add_command, make_parent, output_file, positive_int, progress_bar, seed_int

COMPARE_PICTURE = "runs/compare.png"  # where `routing-gym compare` saves its picture unless told otherwise
WRITES_AND_READS = None  # it reads only the shipped models


def add_parser(sub) -> None:
    """The ``compare`` subcommand: which shipped models, the test set, and the picture."""
    from ...policies.pretrained import pretrained_sizes

    c = add_command(sub, "compare", "the shipped models against the heuristics",
                    "The shipped models against the classic heuristics on seeded test instances: a table, and a "
                    f"picture of one instance per problem (in {COMPARE_PICTURE} unless --out or --no-picture).")
    c.add_argument("--problems", nargs="+", choices=[p for p in PROBLEM_CHOICES if pretrained_sizes(p)],
                   help="problems with a shipped model (default: every one shipped for --num-nodes)")
    c.add_argument("--num-nodes", type=positive_int, default=20, help="customers (TSP: nodes)")
    c.add_argument("--num-instances", type=positive_int, default=1000, help="test instances per problem")
    c.add_argument("--seed", type=seed_int, default=4321, help="seed of the test set (the trainer never draws it)")
    c.add_argument("--out", type=output_file, help=f"save the picture here (an image file name such as .png; needs "
                   f"Pillow) (default: {COMPARE_PICTURE}, skipped with a note when Pillow is missing)")
    c.add_argument("--no-picture", action="store_true", help="the table only")
    c.add_argument("--no-progress", action="store_true",
                   help="no progress bar (there is none anyway when stderr is not a terminal)")
    c.set_defaults(func=run)


def run(args) -> int:
    """Print the table of costs and gaps; save the picture (the default one skipped, with a note, when it
    cannot be drawn)."""
    from ..compare import check_picture, compare_problem, method_count, picture, shipped_problems, table

    shipped = shipped_problems(args.num_nodes)
    problems = args.problems or shipped
    if not problems:
        raise ValueError(f"no shipped model for n = {args.num_nodes}")
    missing = [p for p in problems if p not in shipped]
    if missing:
        raise ValueError(f"no shipped {', '.join(missing)} model for n = {args.num_nodes}; shipped for "
                         f"n = {args.num_nodes}: {', '.join(shipped) or 'none'}")
    if args.out and args.no_picture:
        raise ValueError("--out and --no-picture contradict each other; give one")
    out = args.out
    if out is None and not args.no_picture:  # the default picture: skipped, with a note, if it cannot be drawn
        try:
            check_picture(COMPARE_PICTURE)
            out = output_file(COMPARE_PICTURE)
        except (ImportError, argparse.ArgumentTypeError) as e:
            print(f"routing-gym compare: no picture ({e}); the table only", file=sys.stderr)
    if out:  # before the table's work, not after it
        check_picture(out)
        make_parent(out)
    rows = []
    with progress_bar(args, sum(method_count(p) for p in problems), "method") as bar:
        for name in problems:
            def done(method: str) -> None:
                bar.set_postfix_str(f"{name}: {method}", refresh=False)
                bar.update()

            rows += compare_problem(name, args.num_nodes, args.num_instances, args.seed, done=done)
    print(table(rows, args.num_nodes, args.num_instances, args.seed))
    if out:
        picture(problems, args.num_nodes, args.seed, out)
        print(f"saved the picture in {out}")
    return 0
