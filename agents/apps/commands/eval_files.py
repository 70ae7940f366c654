"""``routing-gym eval --instances``: TSPLIB / VRPLIB files decoded on the unit-square scaling, each file's cost
in its own units and its gap to a reference (.sol / .opt.tour beside it, --reference-table, or its COMMENT),
in a table."""
from __future__ import annotations

import glob
import importlib.util
import sys
import time
from pathlib import Path

import torch

from routing_gym.problems import get_problem

from .common import VARIANT_OPTIONS, check_policy_spec, flag, load_policy, one_line, os_error_message, progress_bar
from .decoding import count_routes, csv_row, decode_with, describe_decoding, model_size, write_csv


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


def eval_real_instances(args, options) -> int:
    """TSPLIB / VRPLIB files (or glob patterns): decode on the unit-square scaling, cost in the file's
    own units, gap to its reference (.sol / .opt.tour beside it, --reference-table, or its COMMENT).

    A file that cannot be evaluated (unreadable, a distance matrix without coordinates, a refused tour,
    ...) is skipped and named on stderr with the reason, and the others go on; the command fails only
    when none could be evaluated. ``--policy pretrained`` decodes each file with the shipped model of the
    nearest size (a note says so). CVRP rows report the routes used against the file's vehicle count k.
    """
    if importlib.util.find_spec("vrplib") is None:
        raise ModuleNotFoundError("reading TSPLIB / VRPLIB files needs vrplib: pip install 'routing-gym[data]' "
                                  "(or pip install vrplib)")
    paths = instance_paths(args.instances)
    table = reference_table(args.reference_table) if args.reference_table else None
    check_policy_spec(args.policy)
    start = time.perf_counter()
    rows, skipped, csv_rows = evaluate_files(args, paths, table, FileDecoder(args, options))
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
    note_fleets(rows)
    return 0


def instance_paths(patterns: list[str]) -> list[str]:
    """The files of ``--instances`` (each pattern's matches, sorted, or the name itself), all checked before
    any is decoded: ``ValueError`` for a folder, ``FileNotFoundError`` for a name that is not there."""
    paths = [p for pattern in patterns for p in (sorted(glob.glob(pattern)) or [pattern])]
    for p in paths:
        if Path(p).is_dir():
            raise ValueError(f"--instances {p} is a folder: give .tsp / .vrp files, or a pattern such as {p}/*.vrp")
        if not Path(p).exists():
            raise FileNotFoundError(f"--instances {p}: no such file (and no file matches it as a pattern)")
    return paths


def evaluate_files(args, paths: list[str], table: dict | None, decoder: FileDecoder):
    """The table's rows of the files that could be evaluated, ``(file, reason)`` of those skipped, and the
    ``--csv`` rows."""
    from routing_gym import tsplib

    rows, skipped, csv_rows = [], [], []
    with progress_bar(args, len(paths), "file") as bar:
        for p in paths:
            try:
                decoder.real = tsplib.load(p, table=table)
                row, = tsplib.evaluate([p], decoder, table=table)
            except (ValueError, OSError) as e:  # this file's fault (or the policy's on it): the others go on
                message = os_error_message(e) if isinstance(e, OSError) else one_line(str(e))
                reason = message.removeprefix(f"{p}: ").removeprefix(f"{Path(p)}: ")
                skipped.append((p, reason))
                if len(paths) > 1:
                    say(f"routing-gym eval: skipped {p}: {reason}")
            else:
                if get_problem(row["problem"]).has_depot:  # a file with a depot: CVRP, or ACVRP (a matrix)
                    row["routes"], row["vehicles"] = count_routes(decoder.tours), tsplib.fleet_size(p)
                if args.csv:
                    csv_rows.append(file_csv_row(p, row, table, decoder))
                rows.append(row)
            bar.update()
    return rows, skipped, csv_rows


def file_csv_row(path: str, row: dict, table: dict | None, decoder: FileDecoder) -> dict:
    """A file's ``--csv`` row: its decoded tour in the file's own node ids."""
    from routing_gym import tsplib

    real = tsplib.load(path, table=table)
    seq = tsplib.episode(real, tsplib.tour_nodes(real, decoder.tours))
    return csv_row(row["name"], row["n"], row["cost"], row["reference"], get_problem(real.problem).has_depot, seq,
                   real.node_ids.tolist(), decoder.seconds)


def note_fleets(rows: list[dict]) -> None:
    """A note for each CVRP row whose routes are not its file's k (its cost is not that of a k-vehicle solution)."""
    for r in rows:
        if r.get("vehicles") is not None and r["routes"] != r["vehicles"]:
            print(f"note: {r['name']}: {r['routes']} routes where its reference is for exactly k = {r['vehicles']} "
                  "vehicles (the decoding under the fixed fleet, cvrpmvc, could not keep to k either, or --no-fleet "
                  "or --decode sectors was given), so its cost and gap are not those of a "
                  "k-vehicle solution (with more routes, a cost below a proven optimum is possible)")


def say(message: str) -> None:
    """A line on stderr, without breaking the progress bar."""
    from tqdm import tqdm

    tqdm.write(message, file=sys.stderr)


class FileDecoder:
    """The ``tours(problem_name, instance)`` that :func:`routing_gym.tsplib.evaluate` calls on a file: the
    policy's tours under ``--decode``, each policy loaded once per problem and size. A CVRPLIB file with a
    fleet k whose plain decoding used more routes is decoded again under the fixed-fleet CVRP (cvrpmvc), whose
    tours replace the plain ones where they keep to k routes; ``--decode best`` runs once, given k (its pipeline
    puts its tours on k routes after its first search, :func:`agents.references.pipeline.within_fleet`), and
    ``sectors`` decodes plain CVRP only (its sub-problems are plain CVRP instances).
    ``real`` is the file being evaluated (set by the caller); ``tours`` and ``seconds``, the last call's."""

    def __init__(self, args, options: dict):
        self.args, self.options = args, options
        self.policies, self.notes = {}, []
        self.real, self.tours, self.seconds = None, None, 0.0

    def __call__(self, problem_name: str, instance):
        """The tours of one file's instance (a batch of 1); ``ValueError`` for a file of another problem than
        ``--problem``."""
        args = self.args
        if args.problem is not None and problem_name != args.problem:
            raise ValueError(f"a {problem_name} file, not {args.problem} (--problem); --instances reads the "
                             f"problem from each file: drop --problem")
        policy = self.policy_for(problem_name, get_problem(problem_name).size_of(instance))
        fleet = None if args.no_fleet or problem_name != "cvrp" else fleet_of(self.real)
        instance = type(instance)(*(f.to(args.device) for f in instance))
        fleet = None if fleet is None else type(fleet)(*(f.to(args.device) for f in fleet))
        k = None if fleet is None else int(fleet.num_vehicles[0])
        began = time.perf_counter()
        with torch.no_grad():
            # best keeps to k within its time limit (it eliminates routes beyond k after its first search)
            limit = torch.tensor([k]) if k is not None and args.decode == "best" else None
            self.tours = decode_with(args, policy, get_problem(problem_name), instance, self.options, limit).tours
            # more routes than the file's k: decoded again under the fixed-fleet CVRP's mask (same observation
            # keys), kept where it keeps to k routes (else the plain tours stand, with the table's note); sectors
            # cut plain CVRP instances only
            if k is not None and count_routes(self.tours) > k and args.decode not in ("best", "sectors"):
                tours = decode_with(args, policy, get_problem("cvrpmvc"), fleet, self.options).tours
                if count_routes(tours) <= k:
                    self.tours = tours
        self.seconds = time.perf_counter() - began
        return self.tours

    def policy_for(self, problem_name: str, n: int):
        """The policy for a file of ``n`` nodes: with ``--policy pretrained``, the shipped model of the nearest
        size (a note, once, when it is not ``n``)."""
        size, note = model_size(self.args, n, problem_name)
        if note is not None and note not in self.notes:
            self.notes.append(note)
            say(note)
        key = (problem_name, size)  # checkpoints load once
        if key not in self.policies:
            self.policies[key] = load_policy(self.args.policy, problem_name, size or n, device=self.args.device)
        return self.policies[key]


def fleet_of(real):
    """A CVRPLIB file's fixed-fleet instance (:func:`routing_gym.tsplib.fleet_instance`), or None where it states
    no k or its k cannot carry the demand (the plain decoding stands; the table's note says so)."""
    from routing_gym import tsplib

    try:
        return tsplib.fleet_instance(real)
    except ValueError:
        return None


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
