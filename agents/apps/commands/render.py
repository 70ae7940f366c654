"""``routing-gym render``: record a policy's rollout as a GIF or MP4 (or show it in a window); ``--compare``
puts several policies side by side."""
from __future__ import annotations

from routing_gym.problems import get_problem

from .common import (PROBLEM_CHOICES, add_command, add_variant_args, env_policies, make_parent, output_file, seed_int,
                     variant_of)

WRITES_AND_READS = ("out", ("policy",))  # never --out over a checkpoint read


def add_parser(sub) -> None:
    """The ``render`` subcommand: the problem, the policies, the instance's seed, the file (or a window)."""
    r = add_command(sub, "render", "record (or show) a policy's rollout",
                    "Record a policy's rollout as a GIF or MP4 (or show it in a window); --compare puts several "
                    "policies side by side.")
    r.add_argument("--problem", choices=PROBLEM_CHOICES, required=True)
    r.add_argument("--num-nodes", type=int, default=20, help="customers (TSP: nodes)")
    add_variant_args(r)
    r.add_argument("--policy", action="append", required=True,
                   help="random, nearest, pretrained or a checkpoint (repeatable, with --compare)")
    r.add_argument("--compare", action="store_true", help="the --policy rollouts side by side")
    r.add_argument("--seed", type=seed_int, default=0, help="seed of the instance")
    r.add_argument("--out", type=output_file, help="rollout.gif or .mp4; without it a window opens (needs a display)")
    r.set_defaults(func=run)


def run(args) -> int:
    """Roll the policies out on one seeded instance, print their costs, record (or show) the rollout."""
    from ..visual import check_writer, record, require_display

    variant = variant_of(args, get_problem(args.problem))
    if len(args.policy) > 1 and not args.compare:
        raise ValueError("several --policy values need --compare")
    if args.out is None:
        require_display("render without --out (a window)", "record to a file instead: --out rollout.gif")
    else:
        check_writer(args.out)
        make_parent(args.out)
    policies = env_policies(args.policy, args.problem, args.num_nodes, args.seed)
    costs = record(args.problem, args.num_nodes, policies, seed=args.seed, out=args.out, **variant)
    for name, cost in costs.items():
        print(f"{name}: cost {cost:.4f}")
    if args.out:
        print(f"saved {args.out}")
    return 0
