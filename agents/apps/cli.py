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
import sys

import torch

from .commands import COMMANDS
# load_policy and the parser's names are imported from here too (benchmarks/, older scripts)
from .commands.common import (EXIT_INTERRUPTED, EXIT_REFUSED, EXIT_USAGE, Parser, UsageError,  # noqa: F401
                              check_not_input, load_policy, one_line, os_error_message)


def build_parser() -> argparse.ArgumentParser:
    """The ``routing-gym`` parser: one subcommand per module of :mod:`agents.apps.commands`, in --help's order."""
    ap = Parser(prog="routing-gym", description=__doc__)
    sub = ap.add_subparsers(dest="command", required=True, title="commands", metavar="COMMAND")
    for command in COMMANDS.values():
        command.add_parser(sub)
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
        check_not_input(args, *(COMMANDS[args.command].WRITES_AND_READS or (None, ())))
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
