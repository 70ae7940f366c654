"""The routing-gym command line: train, eval, solve, render, compare, export and play.

Each command has its own --help, which shows every option's default. Observation keys, episode
semantics and the dataset format are described in docs/contract.md.

Exit status: 0 done; 1 a run refused or stopped (an --out-dir in use or holding another run, nothing
left to train, a diverged run, a write that failed mid-run: a full disk, a folder made read-only); 2 a
usage error (an option, value or file is wrong, or a file cannot be written, or a value too large for
this machine's memory; nothing was done, or nothing saved); 130 interrupted (Ctrl-C). Each error is one
line on stderr.
"""
from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import math
import os
import re
import sys
import time
from pathlib import Path

import torch

from routing_gym.data import check_fits
from routing_gym.problems import PROBLEMS, get_problem

PROBLEM_CHOICES = sorted(PROBLEMS)
COMPARE_PICTURE = "runs/compare.png"  # where `routing-gym compare` saves its picture unless told otherwise
# every problem option declared in the registry (OP's prize_type), as --prize-type, ...: (choices, default)
VARIANT_OPTIONS = {key: spec for p in PROBLEMS.values() for key, spec in p.variants.items()}
EXIT_REFUSED, EXIT_USAGE, EXIT_INTERRUPTED = 1, 2, 130  # the exit statuses of the module docstring
MODEL_OPTIONS = ("embed_dim", "n_layers", "ff_hidden")  # train options that set AttentionModelConfig fields


# -- arguments, checked where they enter ----------------------------------------------------------------
class UsageError(Exception):
    """A command line the parser rejects (:class:`Parser`); :func:`main` prints it as one line."""


class HelpFormatter(argparse.HelpFormatter):
    """--help text with ``(default: X)`` after every option that has a default (not for flags, nor where
    the help already says its default)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if (action.option_strings and default is not None and default is not False and default is not argparse.SUPPRESS
                and "default" not in text):
            text += " (default: %(default)s)"
        return text


class Parser(argparse.ArgumentParser):
    """argparse, except that a rejected command line raises :class:`UsageError` (one line, the command
    and the fault) instead of printing the usage and exiting, and that --help shows the defaults
    (:class:`HelpFormatter`); the subcommands' parsers are of this class too."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        raise UsageError(f"{self.prog}: error: {message} (see {self.prog} --help)")


def int_in(text: str, low: int, high: int | None = None) -> int:
    """An integer from ``low`` to ``high`` (no upper bound if None), else ``ArgumentTypeError`` saying so."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < low or (high is not None and value > high):
        bounds = f">= {low}" if high is None else f"from {low} to {high}"
        raise argparse.ArgumentTypeError(f"must be an integer {bounds}, got {text}")
    return value


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1 (counts, sizes)."""
    return int_in(text, 1)


def seed_int(text: str) -> int:
    """argparse type: a seed, an integer from 0 to 2**63 - 1 (what torch, numpy and Gymnasium all take)."""
    try:
        return int_in(text, 0, 2**63 - 1)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"a seed is an integer from 0 to 2**63 - 1, got {text}") from None


def augment_count(text: str) -> int:
    """argparse type: how many of the 8 symmetries of the unit square, 1 to 8."""
    return int_in(text, 1, 8)


def positive_float(text: str) -> float:
    """argparse type: a positive, finite number (not nan or inf)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive, finite number, got {text}")
    return value


def device_arg(text: str) -> torch.device:
    """argparse type: a device this machine has (:func:`agents.inference.device.parse_device`)."""
    from ..inference.device import parse_device

    try:
        return parse_device(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def device_name(text: str) -> str:
    """argparse type: the name of a device this machine has, kept as given (``auto`` stays ``auto``: a
    training checkpoint records the name, and a resumed run picks its device again)."""
    device_arg(text)
    return text


def name_fits(text: str) -> Path:
    """``text`` as a path, or ``ArgumentTypeError`` when this system cannot hold such a name (a part longer
    than the folder's NAME_MAX, usually 255 characters, or the whole longer than PATH_MAX)."""
    path = Path(text)
    try:
        path.exists()  # raises for a name too long (and for other names no file can have)
    except OSError as e:
        longest = max(path.parts, key=len, default="")
        limit = name_max(path)
        detail = f"a part of it has {len(longest)} characters, the limit here is {limit}" \
            if len(longest) > limit else f"{len(text)} characters"
        raise argparse.ArgumentTypeError(f"{text[:60]}...: {e.strerror or e} ({detail})" if len(text) > 80
                                         else f"{text}: {e.strerror or e} ({detail})") from None
    return path


def name_max(path: Path) -> int:
    """The longest file name the nearest existing folder above ``path`` takes (255 where unknown)."""
    folder = path.parent
    try:
        while not folder.exists() and folder != folder.parent:
            folder = folder.parent
        return os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError, AttributeError):
        return 255


def input_file(text: str) -> str:
    """argparse type: an existing file (not a folder)."""
    path = name_fits(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a folder, not a file")
    if not path.exists():
        raise argparse.ArgumentTypeError(f"{text} does not exist")
    return text


def output_file(text: str) -> str:
    """argparse type: a file that can be written: not a folder, and not under a file; the missing folders
    above it are created before writing (:func:`make_parent`)."""
    path = name_fits(text)
    if text.endswith(("/", os.sep)) or path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a folder; give a file name")
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise argparse.ArgumentTypeError(f"cannot write {text}: {folder} is a file, not a folder")
    if not os.access(folder, os.W_OK):
        raise argparse.ArgumentTypeError(f"cannot write {text}: the folder {folder} is not writable")
    return text


def folder_arg(text: str) -> str:
    """argparse type: a folder name, not empty (an empty one would mean the current folder)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty folder name; give one, e.g. runs/tsp20")
    name_fits(str(Path(text) / "metrics.csv.tmp"))  # the longest name a run writes in it
    return text


def npz_output(text: str) -> str:
    """argparse type: an :func:`output_file` named ``*.npz`` (numpy would append the suffix otherwise)."""
    if Path(text).suffix.lower() != ".npz":
        raise argparse.ArgumentTypeError(f"the dataset is an .npz file: give a name ending in .npz, got {text}")
    return output_file(text)


def make_parent(path: str) -> None:
    """Create the folders above an output file (checked by :func:`output_file`)."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)


def os_error_message(e: OSError) -> str:
    """One line for an OS error: the path and what is wrong (``runs/x: Not a directory``)."""
    if e.filename is None:
        return str(e)
    paths = f"{e.filename} -> {e.filename2}" if e.filename2 is not None else f"{e.filename}"
    return f"{paths}: {e.strerror or e}"


def one_line(message: str) -> str:
    """A message on one line (some libraries' messages span several)."""
    return " ".join(line.strip() for line in message.splitlines() if line.strip())


# the file each command writes, and the options that name what it reads: never the same file
WRITES_AND_READS = {
    "eval": ("save", ("dataset", "policy", "instances", "reference_table")),
    "solve": ("save", ("dataset",)),
    "render": ("out", ("policy",)),
    "export": ("out", ("checkpoint",)),
}


def check_not_input(args: argparse.Namespace) -> None:
    """``ValueError`` if the file a command writes is one it reads (compared as files on disk, so another
    spelling, a link or a hard link of the input counts too): a command never writes over its own input."""
    written, reads = WRITES_AND_READS.get(args.command, (None, ()))
    out = getattr(args, written, None) if written else None
    if out is None or not Path(out).is_file():
        return
    for key in reads:
        values = getattr(args, key, None)
        for value in [values] if isinstance(values, str) else values or []:
            if Path(value).is_file() and os.path.samefile(out, value):
                raise ValueError(f"--{flag(written)} {out} is this command's own input (--{flag(key)} {value}); "
                                 f"a command never writes over its input: give another file name")


def flag(key: str) -> str:
    """The option of an argparse destination: ``num_nodes`` -> ``num-nodes``."""
    return key.replace("_", "-")


def add_variant_args(parser: argparse.ArgumentParser) -> None:
    """One ``--option`` per problem option the registry declares (``--prize-type`` for OP)."""
    for key, spec in VARIANT_OPTIONS.items():
        parser.add_argument(f"--{key.replace('_', '-')}", choices=spec.choices,
                            help=f"{spec.doc.replace('``', '')} (problems that take it)")


def variant_of(args: argparse.Namespace, problem) -> dict:
    """The options of ``problem`` given on the command line (defaults filled in by the problem)."""
    given = {key: getattr(args, key, None) for key in problem.variants}
    return problem.check_variant({k: v for k, v in given.items() if v is not None})


def load_policy(spec: str, problem: str, num_nodes: int, device="cpu"):
    """A policy of the protocol (:mod:`agents.policies.protocol`) from ``spec``: a heuristic's name,
    ``pretrained``, or a checkpoint path (a routing-gym checkpoint, or the reference weights of Kool et
    al., told apart by their content)."""
    from ..references.heuristics import HEURISTICS

    check_policy_spec(spec)
    if spec in HEURISTICS:
        return HEURISTICS[spec](problem)
    if spec == "pretrained":
        from ..policies.pretrained import load_pretrained

        return load_pretrained(problem, num_nodes, device=device)
    path = Path(spec)
    from ..policies.pretrained import load_policy_file

    policy = load_policy_file(path, device=device)
    if policy.config.problem != problem:
        raise ValueError(f"checkpoint {path} holds a {policy.config.problem} policy, not {problem}")
    return policy


def check_policy_spec(spec: str) -> None:
    """``ValueError`` unless ``spec`` is a heuristic's name, ``pretrained`` or an existing path."""
    from ..references.heuristics import HEURISTICS

    if spec not in HEURISTICS and spec != "pretrained" and not Path(spec).exists():
        raise ValueError(f"policy {spec!r} is neither a heuristic ({sorted(HEURISTICS)}), 'pretrained', "
                         f"nor an existing checkpoint file")


def progress_bar(args, total: int, unit: str):
    """A tqdm bar on stderr; none with ``--no-progress`` or when stderr is not a terminal."""
    from tqdm import tqdm

    return tqdm(total=total, unit=unit, file=sys.stderr, leave=False,
                disable=args.no_progress or not sys.stderr.isatty())


def cmd_train(args) -> int:
    from ..training.config import TrainConfig
    from ..training.distributed import init_distributed
    from ..training.reinforce import NothingLeft, Trainer, TrainingDiverged

    if args.distributed:
        args.device = init_distributed(args.device)
    if args.resume:
        changeable = ("epochs", "batch_size", "out_dir", "device", "max_minutes")
        fixed = [f.name for f in dataclasses.fields(TrainConfig) if f.name not in changeable
                 and getattr(args, f.name, None) is not None] + (["distance_bias"] if args.distance_bias else []) \
            + [k for k in (*VARIANT_OPTIONS, *MODEL_OPTIONS) if getattr(args, k, None) is not None]
        if fixed:
            raise ValueError(f"--resume continues the checkpoint's settings; only --epochs, --batch-size, --out-dir, "
                             f"--device and --max-minutes may be changed, not {', '.join('--' + k.replace('_', '-') for k in fixed)}")
        overrides = {k: getattr(args, k) for k in changeable if getattr(args, k) is not None}
        trainer = Trainer.resume(args.resume, **overrides)
    else:
        fields = {f.name for f in dataclasses.fields(TrainConfig)}
        given = {k: v for k, v in vars(args).items() if k in fields and v is not None}
        if args.init_from is not None and args.policy is None:  # the weights choose the network
            given["policy"] = network_of_file(args.init_from)
        given["model"] = {k: getattr(args, k) for k in MODEL_OPTIONS if getattr(args, k) is not None}
        if args.distance_bias:
            given["model"]["distance_bias"] = True
        given["variant"] = variant_of(args, get_problem(given.get("problem", TrainConfig.problem)))
        config = TrainConfig(**given)  # its defaults fill what was not given
        if args.imitation_epochs is not None and args.imitate is None:
            raise ValueError("--imitation-epochs counts the epochs of --imitate; give the labelled dataset too")
        if args.out_dir is None:
            config = dataclasses.replace(config, out_dir=f"runs/{config.problem}{config.num_nodes}")
        trainer = Trainer(config)
    first_epoch = trainer.epoch
    try:
        trainer.fit(progress=not args.no_progress, overwrite=args.overwrite)
    except (FileExistsError, NothingLeft, TrainingDiverged) as e:
        print(f"routing-gym train: error: {one_line(str(e))}", file=sys.stderr)
        return EXIT_REFUSED
    except KeyboardInterrupt:
        print(f"routing-gym train: interrupted (Ctrl-C); {how_to_go_on(trainer)}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except OSError as e:  # a write failed mid-run (a full disk, a folder made read-only): the run stopped
        if trainer.epoch == first_epoch:  # before any training: the folder cannot be used (a usage error)
            raise
        print(f"routing-gym train: error: {one_line(os_error_message(e))}; {how_to_go_on(trainer)}", file=sys.stderr)
        return EXIT_REFUSED
    return 0


def how_to_go_on(trainer) -> str:
    """After an interrupted run: where its last finished epoch is kept, and the command that continues it."""
    from ..policies.checkpoint import load_checkpoint

    last = Path(trainer.cfg.out_dir) / "last.pt"
    try:  # what the file holds (an epoch whose save failed or was interrupted is not in it)
        epoch = load_checkpoint(last, kind="trainer")["epoch"] - 1 if last.is_file() else None
    except (ValueError, KeyError, OSError):
        epoch = None
    if epoch is None or epoch < 0:
        return "no epoch had finished: nothing was saved, and the same command starts again"
    return f"{last} keeps epoch {epoch}: continue with routing-gym train --resume {last}"


def network_of_file(path: str) -> str:
    """The network (``attention`` or ``pointer``) of a policy file or checkpoint."""
    from ..policies.pretrained import load_policy_file
    from ..policies.registry import network_of

    return network_of(load_policy_file(path))


def cmd_eval(args) -> int:
    from routing_gym.data import load_dataset, save_dataset

    from ..inference.search import pad_tours
    from ..policies.protocol import select_rows

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
        num_nodes = next((n for n in (args.num_nodes, record.get("num_nodes")) if n is not None), None) \
            or default_num_nodes(args.policy, args.problem)
        note_variant(args.policy, args.problem, num_nodes, variant, record)
        check_fits(args.problem, args.num_instances, num_nodes, "--num-instances", **variant)
        instances = problem.generate(args.num_instances, num_nodes, generator=torch.Generator().manual_seed(args.seed),
                                     **variant)
        source = f"{args.num_instances} seeded instances (seed {args.seed})"
    policy = load_policy(args.policy, args.problem, num_nodes, device=args.device)
    instances = instances.__class__(*(f.to(args.device) for f in instances))
    total, costs, tours, seconds = len(instances[0]), [], [], []
    start = time.perf_counter()
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
    costs = torch.cat(costs)
    elapsed = time.perf_counter() - start
    line = (f"{args.problem}-{num_nodes} {args.policy} {describe_decoding(args)}: mean cost {costs.mean():.4f} "
            f"on {source} in {elapsed:.2f} s")
    if "ref_cost" in extras:
        ref = torch.as_tensor(extras["ref_cost"], dtype=torch.float64)
        gap = ((costs.double().cpu() - ref) / ref.abs()).mean() * 100
        line += f", gap {gap:.2f}% to ref_cost (mean {ref.mean():.4f})"
    print(line)
    if tours:
        width = max(t.shape[1] for t in tours)  # chunks' tours differ in length
        tours = torch.cat([pad_tours(t, width) for t in tours])
    if args.csv:
        ref = extras.get("ref_cost")
        write_csv(args.csv, [csv_row(str(i), num_nodes, float(costs[i]), None if ref is None else float(ref[i]),
                                     problem.has_depot, tours[i].tolist(), range(problem.n_total_of(instances)),
                                     seconds[i]) for i in range(total)])
    if args.save:  # the decoded tours as a labelled dataset: what train --imitate reads (self-labelling)
        save_dataset(args.save, instances, ref_cost=costs.cpu().numpy(), ref_tours=tours.numpy())
        print(f"saved {args.save} (the instances, with the decoded costs as ref_cost and tours as ref_tours)")
    return 0


def trained_on(spec: str) -> dict:
    """What a checkpoint file ``spec`` records of its training: ``problem``, ``num_nodes`` and ``variant``
    (those it holds, of the right types); empty for a heuristic, ``pretrained`` or other files."""
    from ..policies.checkpoint import NotACheckpoint, load_checkpoint

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
        from ..policies.pretrained import pretrained_meta, pretrained_path

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


def check_instances_options(args) -> None:
    """``ValueError`` for an option that does not apply to ``--instances`` (each file gives its problem,
    size and data): it would be dropped without a word."""
    if args.save:
        raise ValueError("--save writes a dataset of unit-square instances; with --instances there is none "
                         "(drop one of the two)")
    unused = [key for key in ("dataset", "limit", "num_nodes", *VARIANT_OPTIONS)
              if getattr(args, key, None) is not None]
    if unused:
        raise ValueError(f"--instances reads each file's own problem, size and data; "
                         f"{', '.join('--' + flag(k) for k in unused)} does not apply to it (drop one or the other)")


def default_num_nodes(policy: str, problem: str) -> int:
    """``eval``'s size when ``--num-nodes`` is not given: the shipped model's, for ``--policy pretrained``
    (when one size of it is shipped); otherwise ``ValueError`` asking for ``--num-nodes``."""
    if policy == "pretrained":
        from ..policies.pretrained import available_pretrained, pretrained_sizes

        sizes = pretrained_sizes(problem)
        if len(sizes) == 1:
            return sizes[0]
        if not sizes:
            raise ValueError(f"no shipped model for {problem}; available: {available_pretrained() or 'none'}")
        raise ValueError(f"eval needs --num-nodes: {problem} models are shipped for n = "
                         f"{', '.join(map(str, sizes))}")
    raise ValueError("eval needs --num-nodes (or --dataset, or --instances)")


def describe_decoding(args) -> str:
    if args.decode == "best":
        return f"best in {args.time_limit:g} s per instance"
    temperature = f" at temperature {args.temperature:g}" if args.temperature != 1 else ""
    detail = {"sample": f" x{args.samples}{temperature}", "beam": f" width {args.beam_width}"}.get(args.decode, "")
    return args.decode + detail + (f", augment x{args.augment}" if args.augment > 1 else "")


BEST_CHUNK = 64  # instances searched together by --decode best (its search holds copies x (N, N) per instance)
CSV_FIELDS = ("name", "n", "cost", "reference", "gap", "routes", "seconds", "tour")


def decode_with(args, policy, problem, instances, options):
    """``--decode``'s tours of a batch: :func:`agents.inference.search.decode`, or for ``best`` the pipeline of
    :mod:`agents.references.pipeline` with ``--time-limit`` seconds per instance (``.cost``, ``.tours`` either way)."""
    if args.decode == "best":
        from ..references.pipeline import best

        return best(policy, problem, instances, args.time_limit, batch_size=args.batch_size)
    from ..inference.search import decode

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
    import csv

    make_parent(path)
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {path} ({len(rows)} rows)")


def eval_real_instances(args, options) -> int:
    """TSPLIB / VRPLIB files (or glob patterns): decode on the unit-square scaling, cost in the file's
    own units, gap to its reference (.sol / .opt.tour beside it, --reference-table, or its COMMENT).

    A file that cannot be evaluated (unreadable, a distance matrix without coordinates, a refused tour,
    ...) is skipped and named on stderr with the reason, and the others go on; the command fails only
    when none could be evaluated. ``--policy pretrained`` decodes each file with the shipped model of the
    nearest size (a note says so). CVRP rows report the routes used against the file's vehicle count k.
    """
    import glob

    from routing_gym import tsplib

    if importlib.util.find_spec("vrplib") is None:
        raise ModuleNotFoundError("reading TSPLIB / VRPLIB files needs vrplib: pip install 'routing-gym[data]' "
                                  "(or pip install vrplib)")
    paths = [p for pattern in args.instances for p in (sorted(glob.glob(pattern)) or [pattern])]
    for p in paths:  # all of them, before any is decoded
        if Path(p).is_dir():
            raise ValueError(f"--instances {p} is a folder: give .tsp / .vrp files, or a pattern such as {p}/*.vrp")
        if not Path(p).exists():
            raise FileNotFoundError(f"--instances {p}: no such file (and no file matches it as a pattern)")
    table = reference_table(args.reference_table) if args.reference_table else None
    check_policy_spec(args.policy)
    policies, decoded, notes = {}, {}, []

    def say(message: str) -> None:  # on stderr, without breaking the progress bar
        from tqdm import tqdm

        tqdm.write(message, file=sys.stderr)

    def policy_for(problem_name: str, n: int):
        size = None
        if args.policy == "pretrained":
            from ..policies.pretrained import nearest_pretrained_size

            size = nearest_pretrained_size(problem_name, n)
            note = (f"note: no shipped {problem_name} model for n = {n}; using the {problem_name}-{size} model "
                    "(the nearest size shipped)")
            if size != n and note not in notes:
                notes.append(note)
                say(note)
        key = (problem_name, size)  # checkpoints load once
        if key not in policies:
            policies[key] = load_policy(args.policy, problem_name, size or n, device=args.device)
        return policies[key]

    def tours(problem_name, instance):
        if args.problem is not None and problem_name != args.problem:
            raise ValueError(f"a {problem_name} file, not {args.problem} (--problem); --instances reads the "
                             f"problem from each file: drop --problem")
        policy = policy_for(problem_name, get_problem(problem_name).size_of(instance))
        fleet = None if args.no_fleet or problem_name != "cvrp" else fleet_of(decoded["real"])
        instance = type(instance)(*(f.to(args.device) for f in instance))
        began = time.perf_counter()
        with torch.no_grad():
            decoded["tours"] = decode_with(args, policy, get_problem(problem_name), instance, options).tours
            if fleet is not None and count_routes(decoded["tours"]) > int(fleet.num_vehicles[0]):
                # more routes than the file's k: decoded again under the fixed-fleet CVRP's mask (same observation
                # keys), which keeps to k routes where it can
                fleet = type(fleet)(*(f.to(args.device) for f in fleet))
                decoded["tours"] = decode_with(args, policy, get_problem("cvrpmvc"), fleet, options).tours
        decoded["seconds"] = time.perf_counter() - began
        return decoded["tours"]

    rows, skipped, csv_rows = [], [], []
    start = time.perf_counter()
    with progress_bar(args, len(paths), "file") as bar:
        for p in paths:
            try:
                decoded["real"] = tsplib.load(p, table=table)
                row, = tsplib.evaluate([p], tours, table=table)
            except (ValueError, OSError) as e:  # this file's fault (or the policy's on it): the others go on
                message = os_error_message(e) if isinstance(e, OSError) else one_line(str(e))
                reason = message.removeprefix(f"{p}: ").removeprefix(f"{Path(p)}: ")
                skipped.append((p, reason))
                if len(paths) > 1:
                    say(f"routing-gym eval: skipped {p}: {reason}")
            else:
                if row["problem"] == "cvrp":
                    row["routes"], row["vehicles"] = count_routes(decoded["tours"]), tsplib.fleet_size(p)
                if args.csv:
                    real = tsplib.load(p, table=table)
                    seq = tsplib.episode(real, tsplib.tour_nodes(real, decoded["tours"]))
                    csv_rows.append(csv_row(row["name"], row["n"], row["cost"], row["reference"],
                                            get_problem(real.problem).has_depot, seq, real.node_ids.tolist(),
                                            decoded["seconds"]))
                rows.append(row)
            bar.update()
    if not rows:
        if len(skipped) == 1:
            raise ValueError(f"{skipped[0][0]}: {skipped[0][1]}")
        raise ValueError(f"none of the {len(paths)} files could be evaluated (each is named above with the reason)")
    elapsed = time.perf_counter() - start
    print(f"{args.policy} {describe_decoding(args)}: {len(rows)} instance(s) in {elapsed:.2f} s"
          + (f"; {len(skipped)} file(s) skipped: {', '.join(Path(p).name for p, _ in skipped)}" if skipped else ""))
    print(instances_table(rows))
    if args.csv:
        write_csv(args.csv, csv_rows)
    for r in rows:
        if r.get("vehicles") is not None and r["routes"] != r["vehicles"]:
            print(f"note: {r['name']}: {r['routes']} routes where its reference is for exactly k = {r['vehicles']} "
                  "vehicles (the decoding under the fixed fleet, cvrpmvc, could not keep to k either, or --no-fleet "
                  "was given), so its cost and gap are not those of a "
                  "k-vehicle solution (with more routes, a cost below a proven optimum is possible)")
    return 0


def fleet_of(real):
    """A CVRPLIB file's fixed-fleet instance (:func:`routing_gym.tsplib.fleet_instance`), or None where it states
    no k or its k cannot carry the demand (the plain decoding stands; the table's note says so)."""
    from routing_gym import tsplib

    try:
        return tsplib.fleet_instance(real)
    except ValueError:
        return None


def count_routes(tours) -> int:
    """Routes in a CVRP tour (one row of actions; 0 is the depot, and 0 or -1 pads the end): runs of customers."""
    seq = [int(a) for a in torch.as_tensor(tours).reshape(-1).tolist()]
    return sum(1 for i, a in enumerate(seq) if a > 0 and (i == 0 or seq[i - 1] <= 0))


def instances_table(rows: list[dict]) -> str:
    """:func:`routing_gym.tsplib.format_rows`'s table, with a column of the routes used against k when
    there are CVRP rows."""
    from routing_gym import tsplib

    lines = tsplib.format_rows(rows).splitlines()
    if not any("routes" in r for r in rows):
        return "\n".join(lines)
    lines[0] += " routes |"
    lines[1] += "---|"
    for i, row in enumerate(rows, 2):
        lines[i] += f" {routes_cell(row)} |"
    for i in range(2 + len(rows), len(lines)):  # the mean row
        lines[i] += " |"
    return "\n".join(lines)


def routes_cell(row: dict) -> str:
    """``5 (k = 5)``: the routes a CVRP row's solution used, and the file's vehicle count; ``-`` for TSP."""
    if "routes" not in row:
        return "-"
    return f"{row['routes']}" + (f" (k = {row['vehicles']})" if row["vehicles"] is not None else "")


def reference_table(path: str) -> dict[str, float]:
    """``--reference-table`` read once, before any instance is decoded: its costs by name
    (:func:`routing_gym.tsplib.read_table` refuses a value that is not a finite number > 0, as a gap
    divides by it); a table with no costs is refused too."""
    from routing_gym import tsplib

    values = tsplib.read_table(path)
    if not values:
        raise ValueError(f"reference table {path} holds no costs (expected JSON {{name: cost}}, CSV name,cost "
                         "or 'name cost' lines)")
    return values


def cmd_solve(args) -> int:
    from routing_gym.data import load_dataset, save_dataset

    from ..references.solvers import solve

    problem = get_problem(args.problem)
    variant = variant_of(args, problem)
    if args.dataset:
        instances, _ = load_dataset(args.dataset, args.problem)
    else:
        if args.num_nodes is None:
            raise ValueError("solve needs --num-nodes (or --dataset)")
        check_fits(args.problem, args.num_instances, args.num_nodes, "--num-instances", **variant)
        instances = problem.generate(args.num_instances, args.num_nodes,
                                     generator=torch.Generator().manual_seed(args.seed), **variant)
    num_nodes = problem.size_of(instances)
    if args.save:
        make_parent(args.save)
    out = solve(problem, instances, args.method, args.time_limit, progress=not args.no_progress, seed=args.seed,
                workers=args.workers)
    repaired = f", {out.repaired} tour(s) repaired" if out.repaired else ""
    print(f"{args.problem}-{num_nodes} {args.method}: mean cost {out.cost.mean():.4f} on {len(out.cost)} instances "
          f"in {out.seconds:.1f} s{repaired}")
    if args.save:
        save_dataset(args.save, instances, ref_cost=out.cost.numpy(), ref_tours=out.tours.numpy())
        print(f"saved {args.save} (instances, ref_cost, ref_tours)")
    return 0


def env_policies(specs: list[str], problem: str, num_nodes: int, seed: int) -> list:
    """``policy(env, obs)`` callables for ``render``/``play``: built-in ones by name, else checkpoints."""
    from ..inference.rollout import env_policy
    from .visual import BUILTIN_POLICIES, builtin_policy, checkpoint_labels

    out = []
    for spec, name in zip(specs, checkpoint_labels(specs)):
        if spec in BUILTIN_POLICIES:
            out.append(builtin_policy(spec, seed=seed))
        else:
            out.append(env_policy(load_policy(spec, problem, num_nodes), name))
    return out


def cmd_render(args) -> int:
    from .visual import check_writer, record, require_display

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


def cmd_play(args) -> int:
    from .visual import play, require_display

    from ..policies.pretrained import pretrained_path

    require_display("play (a window to click in)", "on this machine, record a policy's rollout instead: "
                    f"routing-gym render --problem {args.problem} --policy nearest --out rollout.gif")
    spec = args.opponent
    if spec is None:  # the bundled policy when one is shipped for this problem and size, else nearest
        spec = "pretrained" if pretrained_path(args.problem, args.num_nodes).is_file() else "nearest"
    opponent = env_policies([spec], args.problem, args.num_nodes, args.seed)[0]
    play(args.problem, args.num_nodes, seed=args.seed, opponent=opponent)
    return 0


def cmd_compare(args) -> int:
    from .compare import check_picture, compare_problem, method_count, picture, shipped_problems, table

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


def cmd_export(args) -> int:
    from ..policies.pretrained import export_policy

    meta = export_policy(args.checkpoint, args.out)
    print(f"wrote {args.out}: {meta['problem']}-{meta['num_nodes']}, {meta['instances_seen']} instances seen, "
          f"validation cost {meta['val_cost']}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    from ..inference.device import DEVICE_HELP
    from ..policies.pretrained import pretrained_sizes
    from ..references.heuristics import HEURISTICS
    from ..training.baselines import BASELINES

    from ..training.config import LR_SCHEDULES, TrainConfig

    ap = Parser(prog="routing-gym", description=__doc__)
    sub = ap.add_subparsers(dest="command", required=True, title="commands", metavar="COMMAND")

    def command(name: str, summary: str, description: str | None = None) -> Parser:
        """A subcommand: ``summary`` is its line in ``routing-gym --help``, ``description`` heads its own."""
        return sub.add_parser(name, help=summary, description=description or summary)

    def trained(name: str) -> str:
        """``(default: X)`` from :class:`TrainConfig` (train's options default to None: the config fills them)."""
        return f"(default: {TrainConfig.__dataclass_fields__[name].default})"

    t = command("train", "train a policy with REINFORCE",
                "Train the Attention Model (or the Pointer Network) with REINFORCE; the defaults are the paper's.")
    t.add_argument("--problem", choices=PROBLEM_CHOICES, help=trained("problem"))
    t.add_argument("--num-nodes", type=int, help="customers (TSP: nodes) per instance " + trained("num_nodes"))
    add_variant_args(t)
    t.add_argument("--epochs", type=int, help=trained("epochs"))
    t.add_argument("--epoch-size", type=int, help="fresh training instances per epoch " + trained("epoch_size"))
    t.add_argument("--batch-size", type=int, help="instances per gradient step " + trained("batch_size"))
    t.add_argument("--lr", type=float, help="Adam learning rate " + trained("lr"))
    t.add_argument("--lr-decay", type=float, help="learning rate multiplied by this after every epoch "
                   + trained("lr_decay"))
    t.add_argument("--lr-schedule", choices=LR_SCHEDULES,
                   help="the learning rate over the run's budget (--epochs x --epoch-size instances, or --max-minutes "
                   "when that ends first): constant (times --lr-decay per epoch), cosine or linear (down to 0) "
                   + trained("lr_schedule"))
    t.add_argument("--lr-warmup", type=float, help="fraction of the budget over which the learning rate first rises "
                   "linearly from 0 " + trained("lr_warmup"))
    t.add_argument("--baseline", choices=tuple(BASELINES),
                   help="rollout (Kool et al.), exponential, pomo (Kwon et al.) or critic (Bello et al.) "
                   + trained("baseline"))
    t.add_argument("--warmup-epochs", type=int, help="epochs during which an exponential moving average stands in "
                   "for the rollout baseline (0 when fine-tuning a trained policy) " + trained("warmup_epochs"))
    t.add_argument("--augment", type=augment_count, help="with --baseline pomo: also roll every instance out on this "
                   "many of its 8 symmetric copies, all sharing one baseline (POMO's augmentation in training, "
                   "Sym-NCO's symmetricity) " + trained("augment"))
    t.add_argument("--critic-lr", type=float, help="Adam learning rate of the critic (--baseline critic) "
                   + trained("critic_lr"))
    t.add_argument("--policy", choices=("attention", "pointer"), help="network to train " + trained("policy"))
    t.add_argument("--distance-bias", action="store_true", help="attention model: distance-biased encoder")
    t.add_argument("--embed-dim", type=positive_int, help="attention model: embedding width (default: the paper's 128)")
    t.add_argument("--n-layers", type=positive_int, help="attention model: encoder layers (default: the paper's 3)")
    t.add_argument("--ff-hidden", type=positive_int,
                   help="attention model: hidden units of the encoder's feed-forward sublayers (default: the paper's 512)")
    t.add_argument("--eval-size", type=int, help="instances in the rollout baseline's evaluation set "
                   + trained("eval_size"))
    t.add_argument("--val-size", type=int, help="instances in the fixed validation set " + trained("val_size"))
    t.add_argument("--seed", type=int, help="seed of the training stream " + trained("seed"))
    t.add_argument("--device", type=device_name, help=DEVICE_HELP + " " + trained("device"))
    t.add_argument("--bf16", action="store_true", default=None, help="bf16 autocast on CUDA (default: off)")
    t.add_argument("--out-dir", type=folder_arg,
                   help="where checkpoints and metrics.csv go (default: runs/PROBLEMNUM_NODES, "
                   "e.g. runs/tsp20)")
    t.add_argument("--init-from", help="start from the weights of this policy file or trainer checkpoint (e.g. "
                   "agents/weights/tsp20.pt), with their model settings; optimiser and baseline start afresh")
    t.add_argument("--imitate", type=input_file,
                   help="a labelled dataset (routing-gym solve --save writes one) whose tours the policy first "
                   "imitates by teacher forcing, for --imitation-epochs epochs of --epoch-size labelled instances; "
                   "REINFORCE follows (default: none)")
    t.add_argument("--imitation-epochs", type=int, help="supervised epochs at the start of the run, with --imitate "
                   + trained("imitation_epochs"))
    t.add_argument("--max-minutes", type=float,
                   help="wall-clock budget of the run in minutes: training, baseline tests, validation and "
                   "checkpoints (each epoch's end is set aside in it, and the start says how long it takes); with "
                   "--resume it counts the checkpoint's earlier minutes too (default: none)")
    t.add_argument("--val-dataset", help="validate on this dataset file instead of --val-size generated instances "
                   "(with reference costs, metrics.csv also gets val_gap)")
    t.add_argument("--resume", help="a trainer checkpoint (OUT_DIR/last.pt or best.pt) to continue from, writing "
                   "into its folder unless --out-dir is given; --epochs, --batch-size, --out-dir, --device and "
                   "--max-minutes may be changed, the other settings are the checkpoint's")
    t.add_argument("--overwrite", action="store_true",
                   help="replace the run already in --out-dir (without it, an existing run is never touched)")
    t.add_argument("--no-progress", action="store_true", help="no progress bars")
    t.add_argument("--distributed", action="store_true", help="data-parallel under torchrun (DDP)")
    t.set_defaults(func=cmd_train)

    e = command("eval", "evaluate a policy: seeded instances, a dataset or files",
                "A policy's mean cost on seeded generated instances, on a dataset (with the gap to its reference "
                "costs), or on TSPLIB / VRPLIB files (a table with each file's cost and gap).")
    e.add_argument("--problem", choices=PROBLEM_CHOICES,
                   help="required unless --instances (each file gives its own) or a checkpoint as --policy (its own)")
    e.add_argument("--num-nodes", type=int, help="customers (TSP: nodes) per generated instance (default: a "
                   "checkpoint's own size; with --policy pretrained the shipped model's, where one size is shipped)")
    add_variant_args(e)
    e.add_argument("--policy", required=True, help="a checkpoint file (its problem and size are the defaults of "
                   "--problem and --num-nodes), 'pretrained' (the shipped model), or a heuristic: "
                   + ", ".join(HEURISTICS))
    e.add_argument("--dataset", type=input_file,
                   help=".npz dataset (format: docs/contract.md); else --num-instances seeded instances")
    e.add_argument("--num-instances", type=positive_int, default=10_000, help="seeded instances generated")
    e.add_argument("--limit", type=positive_int, help="with --dataset: only its first LIMIT instances")
    e.add_argument("--seed", type=seed_int, default=4321,
                   help="seed of the generated test set (the trainer validates on seed 1234, kept apart)")
    e.add_argument("--decode", choices=("greedy", "sample", "beam", "multistart", "best"), default="greedy",
                   help="sample = best of --samples; multistart = every start node (POMO); best = the best "
                   "tour of the policy's multi-start x 8 and nearest neighbour + 2-opt, improved by local search "
                   "for --time-limit seconds per instance (agents/references/pipeline.py)")
    e.add_argument("--time-limit", type=positive_float, default=2.0, help="seconds per instance with --decode best")
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
                        "again with at most k routes (the fixed-fleet CVRP, cvrpmvc) where the plain decoding used more, "
                        "unless this is given")
    e.add_argument("--reference-table", type=input_file,
                   help="with --instances: optimal/best-known costs by name (JSON, CSV, 'name value')")
    e.add_argument("--batch-size", type=positive_int, default=1000, help="rows decoded at a time")
    e.add_argument("--save", type=npz_output, help="write the instances with the decoded costs and tours as "
                   "ref_cost and ref_tours to this .npz: a labelled dataset for train --imitate (the policy's "
                   "own best tours, e.g. with --decode multistart)")
    e.add_argument("--device", type=device_arg, default="cpu", help=DEVICE_HELP)
    e.add_argument("--no-progress", action="store_true",
                   help="no progress bar (there is none anyway when stderr is not a terminal)")
    e.set_defaults(func=cmd_eval)

    v = command("solve", "reference solutions (Held-Karp, LKH, OR-Tools, PyVRP)",
                "Reference solutions of seeded instances or a dataset (Held-Karp, LKH, OR-Tools, PyVRP); --save "
                "writes them with the instances as a labelled dataset.")
    v.add_argument("--problem", choices=PROBLEM_CHOICES, required=True)
    v.add_argument("--method", choices=("exact", "lkh", "ortools", "pyvrp"), required=True,
                   help="exact = Held-Karp (TSP up to n = 20); the others need pip install -e '.[solvers]'")
    v.add_argument("--num-nodes", type=int, help="customers (TSP: nodes) per generated instance")
    add_variant_args(v)
    v.add_argument("--dataset", type=input_file, help=".npz dataset to solve; else --num-instances seeded instances")
    v.add_argument("--num-instances", type=positive_int, default=1000, help="seeded instances generated")
    v.add_argument("--seed", type=seed_int, default=4321, help="seed of the generated instances (and the solvers)")
    v.add_argument("--time-limit", type=positive_float, default=1.0, help="seconds per instance (exact ignores it)")
    v.add_argument("--workers", type=positive_int, default=1, help="solver processes")
    v.add_argument("--save", type=npz_output, help="write the instances with ref_cost and ref_tours to this .npz")
    v.add_argument("--no-progress", action="store_true", help="no progress bar")
    v.set_defaults(func=cmd_solve)

    r = command("render", "record (or show) a policy's rollout",
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
    r.set_defaults(func=cmd_render)

    c = command("compare", "the shipped models against the heuristics",
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
    c.set_defaults(func=cmd_compare)

    x = command("export", "write a checkpoint's policy as a small policy file",
                "Write a trainer checkpoint's policy as a small policy file, with its metadata record.")
    x.add_argument("--checkpoint", type=input_file, required=True, help="a trainer checkpoint (OUT_DIR/last.pt)")
    x.add_argument("--out", type=output_file, required=True, help="e.g. agents/weights/tsp20.pt")
    x.set_defaults(func=cmd_export)

    p = command("play", "build a tour by clicking, then compare with a policy")
    p.add_argument("--problem", choices=PROBLEM_CHOICES, default="tsp", help="the problem to play")
    p.add_argument("--num-nodes", type=int, default=20, help="customers (TSP: nodes)")
    p.add_argument("--seed", type=seed_int, default=0, help="seed of the instance")
    p.add_argument("--opponent", help="policy to compare with (default: the shipped model, else nearest)")
    p.set_defaults(func=cmd_play)
    return ap


def main(argv: list[str] | None = None) -> int:
    """Run one subcommand; a mistake (a rejected argument, a bad value or file, a path that cannot be
    written, a missing optional package, no display) is one line on stderr and exit code 2 (the module
    docstring lists every exit status)."""
    try:
        args = build_parser().parse_args(argv)
    except UsageError as e:
        print(one_line(str(e)), file=sys.stderr)
        return EXIT_USAGE
    except OSError as e:  # a name no file can have, met by an option's check
        print(f"routing-gym: error: {one_line(os_error_message(e))}", file=sys.stderr)
        return EXIT_USAGE
    try:
        check_not_input(args)
        return args.func(args)
    except KeyboardInterrupt:
        print(f"routing-gym {args.command}: interrupted (Ctrl-C)", file=sys.stderr)
        return EXIT_INTERRUPTED
    except (ValueError, ImportError) as e:
        message = str(e)
    except OSError as e:
        message = os_error_message(e)
    except (MemoryError, RuntimeError) as e:  # torch's allocators: too much for this machine, one line
        if not out_of_memory(e):
            raise
        message = (f"out of memory ({one_line(str(e))[:160]}): lower --batch-size, --num-instances, --num-nodes "
                   "or the model's size")
    print(f"routing-gym {args.command}: error: {one_line(message)}", file=sys.stderr)
    return EXIT_USAGE


def out_of_memory(e: BaseException) -> bool:
    """Whether ``e`` is an allocation that failed (Python's, torch's CPU or CUDA allocator)."""
    return isinstance(e, (MemoryError, torch.OutOfMemoryError)) or any(
        words in str(e) for words in ("can't allocate memory", "out of memory"))


if __name__ == "__main__":
    sys.exit(main())
