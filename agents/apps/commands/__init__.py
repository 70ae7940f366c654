"""The commands of ``routing-gym``, one module each: ``add_parser(sub)`` adds its subcommand and options,
``run(args)`` does it and returns the exit status, and ``WRITES_AND_READS`` names the option of the file it
writes and those of the files it reads (never the same file; None where it writes no file). What they share
is in :mod:`.common`."""
from __future__ import annotations

import importlib

NAMES = ("train", "eval", "solve", "render", "compare", "export", "play")  # in ``routing-gym --help``'s order
COMMANDS = {name: importlib.import_module(f"{__name__}.{name}") for name in NAMES}
