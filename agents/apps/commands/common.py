"""What the commands share: the parser class, the argument types that check a value where it enters, the
exit statuses, and helpers more than one command calls (problem options, policies, progress bars, one-line
errors)."""
from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

import torch

from routing_gym.problems import PROBLEMS

PROBLEM_CHOICES = sorted(PROBLEMS)
# every problem option declared in the registry (OP's prize_type), as --prize-type, ...: (choices, default)
VARIANT_OPTIONS = {key: spec for p in PROBLEMS.values() for key, spec in p.variants.items()}
EXIT_REFUSED, EXIT_USAGE, EXIT_INTERRUPTED = 1, 2, 130  # the exit statuses of agents.apps.cli's docstring

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
    from ...inference.device import parse_device

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



def add_command(sub: argparse._SubParsersAction, name: str, summary: str, description: str | None = None) -> Parser:
    """A subcommand's parser: ``summary`` is its line in ``routing-gym --help``, ``description`` heads its own."""
    return sub.add_parser(name, help=summary, description=description or summary)


def check_not_input(args: argparse.Namespace, written: str | None, reads: tuple[str, ...]) -> None:
    """``ValueError`` if the file a command writes (option ``written``) is one it reads (options ``reads``),
    compared as files on disk, so another spelling, a link or a hard link of the input counts too: a
    command never writes over its own input."""
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
    from ...references.heuristics import HEURISTICS

    check_policy_spec(spec)
    if spec in HEURISTICS:
        return HEURISTICS[spec](problem)
    if spec == "pretrained":
        from ...policies.pretrained import load_pretrained

        return load_pretrained(problem, num_nodes, device=device)
    path = Path(spec)
    from ...policies.pretrained import load_policy_file

    policy = load_policy_file(path, device=device)
    if policy.config.problem != problem:
        raise ValueError(f"checkpoint {path} holds a {policy.config.problem} policy, not {problem}")
    return policy


def check_policy_spec(spec: str) -> None:
    """``ValueError`` unless ``spec`` is a heuristic's name, ``pretrained`` or an existing path."""
    from ...references.heuristics import HEURISTICS

    if spec not in HEURISTICS and spec != "pretrained" and not Path(spec).exists():
        raise ValueError(f"policy {spec!r} is neither a heuristic ({sorted(HEURISTICS)}), 'pretrained', "
                         f"nor an existing checkpoint file")


def progress_bar(args, total: int, unit: str):
    """A tqdm bar on stderr; none with ``--no-progress`` or when stderr is not a terminal."""
    from tqdm import tqdm

    return tqdm(total=total, unit=unit, file=sys.stderr, leave=False,
                disable=args.no_progress or not sys.stderr.isatty())

def env_policies(specs: list[str], problem: str, num_nodes: int, seed: int) -> list:
    """``policy(env, obs)`` callables for ``render``/``play``: built-in ones by name, else checkpoints."""
    from ...inference.rollout import env_policy
    from ..visual import BUILTIN_POLICIES, builtin_policy, checkpoint_labels

    out = []
    for spec, name in zip(specs, checkpoint_labels(specs)):
        if spec in BUILTIN_POLICIES:
            out.append(builtin_policy(spec, seed=seed))
        else:
            out.append(env_policy(load_policy(spec, problem, num_nodes), name))
    return out
