"""``routing-gym play``: build a tour by clicking in a window, then compare it with a policy's."""
from __future__ import annotations

from .common import PROBLEM_CHOICES, add_command, env_policies, seed_int

WRITES_AND_READS = None  # it writes nothing


def add_parser(sub) -> None:
    """The ``play`` subcommand: the problem, its size and seed, and the opponent."""
    p = add_command(sub, "play", "build a tour by clicking, then compare with a policy")
    p.add_argument("--problem", choices=PROBLEM_CHOICES, default="tsp", help="the problem to play")
    p.add_argument("--num-nodes", type=int, default=20, help="customers (TSP: nodes)")
    p.add_argument("--seed", type=seed_int, default=0, help="seed of the instance")
    p.add_argument("--opponent", help="policy to compare with (default: the shipped model, else nearest)")
    p.set_defaults(func=run)


def run(args) -> int:
    """Open the window (a display is needed) and play against the opponent: the shipped model, else nearest."""
    from ...policies.pretrained import pretrained_path
    from ..visual import play, require_display

    require_display("play (a window to click in)", "on this machine, record a policy's rollout instead: "
                    f"routing-gym render --problem {args.problem} --policy nearest --out rollout.gif")
    spec = args.opponent
    if spec is None:  # the bundled policy when one is shipped for this problem and size, else nearest
        spec = "pretrained" if pretrained_path(args.problem, args.num_nodes).is_file() else "nearest"
    opponent = env_policies([spec], args.problem, args.num_nodes, args.seed)[0]
    play(args.problem, args.num_nodes, seed=args.seed, opponent=opponent)
    return 0
