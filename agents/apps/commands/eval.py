"""``routing-gym eval``: a policy's mean cost on seeded generated instances or on a dataset (with the gap to its
reference costs); ``--instances`` reads TSPLIB / VRPLIB files instead (:mod:`.eval_files`)."""
from __future__ import annotations

import sys
import time
from pathlib import Path

import torch

from routing_gym.data import check_fits
from routing_gym.problems import get_problem

from .common import (PROBLEM_CHOICES, add_command, add_variant_args, augment_count, device_arg, input_file,
                     load_policy, make_parent, npz_output, output_file, positive_float, positive_int, progress_bar,
                     seed_int, variant_of)
from .decoding import csv_row, decode_with, describe_decoding, model_size, write_csv
from .eval_files import check_instances_options, eval_real_instances

BEST_CHUNK = 64  # instances searched together by --decode best (its search holds copies x (N, N) per instance)
WRITES_AND_READS = ("save", ("dataset", "policy", "instances", "reference_table"))  # never --save over an input


def add_parser(sub) -> None:
    """The ``eval`` subcommand: what to evaluate, then how to decode it and where the results go."""
    from ...references.heuristics import HEURISTICS

    e = add_command(sub, "eval", "evaluate a policy: seeded instances, a dataset or files",
                    "A policy's mean cost on seeded generated instances, on a dataset (with the gap to its reference "
                    "costs), or on TSPLIB / VRPLIB files (a table with each file's cost and gap).")
    e.add_argument("--problem", choices=PROBLEM_CHOICES,
                   help="required unless --instances (each file gives its own) or a checkpoint as --policy (its own)")
    e.add_argument("--num-nodes", type=int, help="customers (TSP: nodes) per generated instance (default: a "
                   "checkpoint's own size; with --policy pretrained the shipped model's, where one size is shipped)")
    add_variant_args(e)
    e.add_argument("--policy", required=True, help="a checkpoint file (its problem and size are the defaults of "
                   "--problem and --num-nodes), 'pretrained' (the shipped model of the nearest size, with a note where "
                   "that is not the instances'), or a heuristic: "
                   + ", ".join(HEURISTICS))
    e.add_argument("--dataset", type=input_file,
                   help=".npz dataset (format: docs/contract.md); else --num-instances seeded instances")
    e.add_argument("--num-instances", type=positive_int, default=10_000, help="seeded instances generated")
    e.add_argument("--limit", type=positive_int, help="with --dataset: only its first LIMIT instances")
    e.add_argument("--seed", type=seed_int, default=4321,
                   help="seed of the generated test set (the trainer validates on seed 1234, kept apart)")
    add_decoding_args(e)
    e.set_defaults(func=run)


def add_decoding_args(e) -> None:
    """How ``eval`` decodes (--decode and its settings, the files of --instances) and what it writes."""
    from ...inference.device import DEVICE_HELP
    from ...inference.subproblems import SIZES as SECTOR_SIZES

    e.add_argument("--decode", choices=("greedy", "sample", "beam", "multistart", "best", "sectors"),
                   default="greedy",
                   help="sample = best of --samples; multistart = every start node (POMO); best = the best "
                   "tour of the policy's multi-start x 8 and nearest neighbour + 2-opt, improved by local search "
                   "for --time-limit seconds per instance (agents/references/pipeline.py); sectors (CVRP, SDVRP) = "
                   "greedy on sub-problems of --sector-sizes customers around the depot, each moved into the unit "
                   "square, routes joined (agents/inference/subproblems.py)")
    e.add_argument("--sector-sizes", type=positive_int, nargs="+", default=list(SECTOR_SIZES), metavar="N",
                   help="with --decode sectors: the most customers of a sector; each size is cut 4 ways and "
                   "each instance keeps its cheapest cut (default: %(default)s)")
    e.add_argument("--time-limit", type=positive_float, default=2.0, help="seconds per instance with --decode best")
    e.add_argument("--revise", action="store_true",
                   help="with --decode best: after the local search, windows of each tour (TSP) or route (CVRP) "
                   "re-solved by the shipped SHPP-20 model, then searched again (agents/inference/revision.py); "
                   "not the default: it did not pay at 0.5 and 2 s (docs/quality.md)")
    e.add_argument("--csv", type=output_file, help="write one row per instance to this CSV: name (a generated "
                   "instance's index), n, cost (a file's own units), reference, gap, routes, seconds and the tour "
                   "(node ids, space separated: a file's own ids; with a depot, the depot between routes)")
    e.add_argument("--samples", type=positive_int, default=1280, help="samples per instance with --decode sample")
    e.add_argument("--temperature", type=positive_float, default=1.0,
                   help="softmax temperature of --decode sample (below 1 sharper, above 1 flatter)")
    e.add_argument("--beam-width", type=positive_int, default=16, help="beams per instance with --decode beam")
    e.add_argument("--augment", type=augment_count, default=1, help="1 to 8 symmetric transforms of the unit square")
    e.add_argument("--instances", nargs="+",
                   help="TSPLIB .tsp / VRPLIB .vrp files (or patterns): a table of costs in the files' units and "
                   "gaps; a file that cannot be evaluated is skipped and named (the command fails only if none "
                   "can be); --policy pretrained uses the shipped model of the nearest size")
    e.add_argument("--no-fleet", action="store_true",
                   help="with --instances: CVRPLIB files whose name or COMMENT gives a fleet k (E-n51-k5) are decoded "
                   "again under the fixed-fleet CVRP (cvrpmvc) where the plain decoding used more than k routes, "
                   "and those tours kept where they keep to k (--decode best runs once, keeping to k where it can); "
                   "unless this is given, or --decode sectors")
    e.add_argument("--reference-table", type=input_file,
                   help="with --instances: optimal/best-known costs by name (JSON, CSV, 'name value')")
    e.add_argument("--batch-size", type=positive_int, default=1000, help="rows decoded at a time")
    e.add_argument("--save", type=npz_output, help="write the instances with the decoded costs and tours as "
                   "ref_cost and ref_tours to this .npz: a labelled dataset for train --imitate (the policy's "
                   "own best tours, e.g. with --decode multistart)")
    e.add_argument("--device", type=device_arg, default="cpu", help=DEVICE_HELP)
    e.add_argument("--bf16", action="store_true",
                   help="run the networks under bf16 autocast (on a CPU with bf16 matrix units, Intel AMX: greedy TSP-50 "
                        "about 1.8x faster; the tours sometimes differ, TSP-50 mean cost +0.03%%)")
    e.add_argument("--no-progress", action="store_true",
                   help="no progress bar (there is none anyway when stderr is not a terminal)")


def run(args) -> int:
    """Decode the instances (generated, a dataset's, or ``--instances`` files) and print the mean cost;
    ``--csv`` and ``--save`` write the tours."""
    if args.revise and args.decode != "best":
        raise ValueError(f"--revise is a piece of --decode best, not of --decode {args.decode}")
    gen = torch.Generator(device=args.device).manual_seed(args.seed)
    options = dict(num_samples=args.samples, beam_width=args.beam_width, augment=args.augment,
                   batch_size=args.batch_size, generator=gen, temperature=args.temperature)
    if args.instances:
        check_instances_options(args)
        return eval_real_instances(args, options)
    if args.save:  # before the work, not after it
        make_parent(args.save)
    record = trained_on(args.policy)
    args.problem = args.problem or record.get("problem")
    if args.problem is None:
        raise ValueError("eval needs --problem (or --instances, or a checkpoint as --policy)")
    problem = get_problem(args.problem)
    if args.decode == "sectors":
        from ...inference.subproblems import applies

        if not applies(problem):
            raise ValueError(f"--decode sectors cuts routes from a depot over instances of locs and demand alone "
                             f"(cvrp, sdvrp), not {args.problem}")
    instances, extras, num_nodes, source = instances_to_decode(args, problem, record)
    size, note = model_size(args, num_nodes, args.problem)  # --policy pretrained: the nearest shipped size
    if note is not None:
        print(f"routing-gym eval: {note}", file=sys.stderr)
    policy = load_policy(args.policy, args.problem, size or num_nodes, device=args.device)
    instances = instances.__class__(*(f.to(args.device) for f in instances))
    start = time.perf_counter()
    costs, tours, seconds = decode_all(args, policy, problem, instances, options)
    elapsed = time.perf_counter() - start
    line = (f"{args.problem}-{num_nodes} {args.policy} {describe_decoding(args)}: mean cost {costs.mean():.4f} "
            f"on {source} in {elapsed:.2f} s")
    if "ref_cost" in extras:
        ref = torch.as_tensor(extras["ref_cost"], dtype=torch.float64)
        gap = ((costs.double().cpu() - ref) / ref.abs()).mean() * 100
        line += f", gap {gap:.2f}% to ref_cost (mean {ref.mean():.4f})"
    print(line)
    write_results(args, problem, instances, num_nodes, costs, tours, seconds, extras.get("ref_cost"))
    return 0


def instances_to_decode(args, problem, record: dict):
    """``(instances, extras, num_nodes, source)``: the first ``--limit`` rows of ``--dataset`` with its
    reference columns, or ``--num-instances`` generated with ``--seed`` (of ``--num-nodes``, else the size
    the checkpoint ``record`` was trained on, else the shipped model's); ``source`` says which, in words."""
    from routing_gym.data import load_dataset

    from ...policies.protocol import select_rows

    variant = variant_of(args, problem)
    extras = {}
    if args.dataset:
        instances, extras = load_dataset(args.dataset, args.problem, limit=args.limit)  # reads LIMIT rows only
        num_nodes = problem.size_of(instances)
        source = args.dataset
        if args.limit is not None:  # the first LIMIT instances, with their references
            instances = select_rows(instances, slice(None, args.limit))
            extras = {k: v[:args.limit] for k, v in extras.items()}
            source = f"the first {len(instances[0])} instances of {args.dataset}"
    else:
        num_nodes = next((n for n in (args.num_nodes, record.get("num_nodes")) if n is not None), None)
        if num_nodes is None:  # not `or`: --num-nodes 0 is refused by the generator, not replaced by a default
            num_nodes = default_num_nodes(args.policy, args.problem)
        note_variant(args.policy, args.problem, num_nodes, variant, record)
        check_fits(args.problem, args.num_instances, num_nodes, "--num-instances", **variant)
        instances = problem.generate(args.num_instances, num_nodes, generator=torch.Generator().manual_seed(args.seed),
                                     **variant)
        source = f"{args.num_instances} seeded instances (seed {args.seed})"
    return instances, extras, num_nodes, source


def decode_all(args, policy, problem, instances, options):
    """``(costs, tours, seconds)`` of every instance, ``--batch-size`` at a time: costs (B,), tours (B, S)
    padded (kept only for ``--save`` or ``--csv``, else ``[]``), and each instance's share of its batch's
    seconds."""
    from ...inference.search import pad_tours
    from ...policies.protocol import select_rows

    total, costs, tours, seconds = len(instances[0]), [], [], []
    # --batch-size instances per call: the decoders cut their rows (instance-major) at the same places,
    # so the costs, sampled ones included, are those of a single call over all instances
    step = min(args.batch_size, BEST_CHUNK) if args.decode == "best" else args.batch_size
    with torch.no_grad(), progress_bar(args, total, "instance") as bar:
        for first in range(0, total, step):
            chunk = select_rows(instances, slice(first, first + step))
            began = time.perf_counter()
            found = decode_with(args, policy, problem, chunk, options)
            seconds += [(time.perf_counter() - began) / len(chunk[0])] * len(chunk[0])
            costs.append(found.cost)
            if args.save or args.csv:
                tours.append(found.tours.cpu())
            bar.update(len(chunk[0]))
    if tours:
        width = max(t.shape[1] for t in tours)  # chunks' tours differ in length
        tours = torch.cat([pad_tours(t, width) for t in tours])
    return torch.cat(costs), tours, seconds


def write_results(args, problem, instances, num_nodes: int, costs, tours, seconds: list[float], ref) -> None:
    """``--csv``: a row per instance; ``--save``: the instances labelled with the decoded costs and tours."""
    from routing_gym.data import save_dataset

    if args.csv:
        write_csv(args.csv, [csv_row(str(i), num_nodes, float(costs[i]), None if ref is None else float(ref[i]),
                                     problem.has_depot, tours[i].tolist(), range(problem.n_total_of(instances)),
                                     seconds[i]) for i in range(len(costs))])
    if args.save:  # the decoded tours as a labelled dataset: what train --imitate reads (self-labelling)
        save_dataset(args.save, instances, ref_cost=costs.cpu().numpy(), ref_tours=tours.numpy())
        print(f"saved {args.save} (the instances, with the decoded costs as ref_cost and tours as ref_tours)")


def trained_on(spec: str) -> dict:
    """What a checkpoint file ``spec`` records of its training: ``problem``, ``num_nodes`` and ``variant``
    (those it holds, of the right types); empty for a heuristic, ``pretrained`` or other files."""
    from ...policies.checkpoint import NotACheckpoint, load_checkpoint

    if not Path(spec).is_file():
        return {}
    try:
        ckpt = load_checkpoint(spec)  # a damaged routing-gym checkpoint is refused here, naming the file
    except NotACheckpoint:  # the reference weights of Kool et al., which load_policy reads
        return {}
    meta = ckpt.get("meta") if isinstance(ckpt.get("meta"), dict) else {}
    config = ckpt.get("config") if isinstance(ckpt.get("config"), dict) else meta.get("trainer")
    config = config if isinstance(config, dict) else {}
    found = {"problem": config.get("problem", meta.get("problem")),
             "num_nodes": config.get("num_nodes", meta.get("num_nodes")), "variant": config.get("variant")}
    kinds = {"problem": str, "num_nodes": int, "variant": dict}
    return {k: v for k, v in found.items() if isinstance(v, kinds[k]) and not isinstance(v, bool)}


def note_variant(spec: str, problem: str, num_nodes: int, variant: dict, record: dict) -> None:
    """A note on stderr when the instances' options (``--prize-type unif``) differ from those the model
    was trained on (the shipped model's, or the checkpoint's)."""
    if spec == "pretrained":
        from ...policies.pretrained import pretrained_meta, pretrained_path

        if not pretrained_path(problem, num_nodes).is_file():
            return
        record = {"variant": pretrained_meta(problem, num_nodes).get("trainer", {}).get("variant")}
        spec = f"the shipped {problem}-{num_nodes} model"
    trained = get_problem(problem).check_variant(record["variant"]) if isinstance(record.get("variant"), dict) else None
    if trained and trained != variant:
        def say(v):
            return ", ".join(f"{k} {v[k]!r}" for k in sorted(v))
        print(f"routing-gym eval: note: {spec} was trained on {say(trained)}; these instances have {say(variant)}",
              file=sys.stderr)


def default_num_nodes(policy: str, problem: str) -> int:
    """``eval``'s size when ``--num-nodes`` is not given: the shipped model's, for ``--policy pretrained``
    (when one size of it is shipped); otherwise ``ValueError`` asking for ``--num-nodes``."""
    if policy == "pretrained":
        from ...policies.pretrained import available_pretrained, pretrained_sizes

        sizes = pretrained_sizes(problem)
        if len(sizes) == 1:
            return sizes[0]
        if not sizes:
            raise ValueError(f"no shipped model for {problem}; available: {available_pretrained() or 'none'}")
        raise ValueError(f"eval needs --num-nodes: {problem} models are shipped for n = "
                         f"{', '.join(map(str, sizes))}")
    raise ValueError("eval needs --num-nodes (or --dataset, or --instances)")
