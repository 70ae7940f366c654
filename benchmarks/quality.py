"""Solution quality of every heuristic, solver and decoding strategy, on seeded test sets.

For each problem (TSP, CVRP, OP with 'dist' prizes, deterministic PCTSP) and size n, one seeded test set
(Kool et al. 2019's distributions); per method the mean cost, the mean gap to the best reference
available *per instance* (the cheapest tour any solver found: Held-Karp where n <= --exact-max-n,
else LKH / OR-Tools / PyVRP, whichever are installed) and the wall-clock time for the whole set::

    python benchmarks/quality.py                                     # defaults: about 7 min on 2 CPU cores
    python benchmarks/quality.py --num-instances 10000 --time-limit 1 --workers 16 --policy kool pretrained
    python benchmarks/quality.py --policy 'runs/{problem}{n}/last.pt' --problems tsp cvrp

``--policy`` takes one or more of: ``kool`` (the published weights of Kool et al., not part of this
repository: a copy of the ``pretrained/`` folder of wouterkool/attention-learn-to-route in the folder
``KOOL`` below names), ``pretrained`` (the models shipped in
``agents/weights``) or a checkpoint path with ``{problem}`` and ``{n}`` filled in. A policy is decoded by
the ``--strategies`` of :mod:`agents.inference.search`: greedily, by best of ``--samples`` samples, by
beam search of width ``--beam-width`` and by multi-start with the 8 augmentations. Problems and sizes a policy has
no weights for are skipped.

The "paper" column holds Kool et al. 2019's Table 1 means on their own test set (:mod:`paper`) for the
methods they report: their Attention Model (greedy; sampling, best of 1,280), their reference solver
(on the row of the best solver here) and the TSP heuristics. Times are per 10,000 instances,
extrapolated linearly from the set's wall-clock time.

Writes ``benchmarks/results/quality.json`` (every row, the settings and the machine) and
``benchmarks/results/quality.md`` (one table per problem), and prints the markdown.
"""
from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import torch

from agents.inference.search import decode
from agents.references.heuristics import heuristic_tours
from agents.references.solvers import SUPPORTED, available, solve
from paper import TABLE1, kool_weights_dir, paper_value
from routing_gym.problems import get_problem, tour_cost

ROOT = Path(__file__).resolve().parents[1]
KOOL = kool_weights_dir()
KOOL_FOLDERS = {"tsp": "tsp_{n}", "cvrp": "cvrp_{n}", "op": "op_dist_{n}", "pctsp": "pctsp_det_{n}"}
HEURISTICS = {"tsp": ["nearest", "nearest_insertion", "farthest_insertion", "2opt"],
              "cvrp": ["nearest", "2opt"], "op": ["nearest", "greedy", "2opt"], "pctsp": ["nearest", "greedy", "2opt"]}
LABELS = {"nearest": "nearest neighbour", "nearest_insertion": "nearest insertion",
          "farthest_insertion": "farthest insertion", "greedy": "greedy (problem-aware)",
          "2opt": {"tsp": "farthest insertion + 2-opt", "cvrp": "greedy + 2-opt",
                   "op": "greedy + 2-opt + insert", "pctsp": "greedy + 2-opt + insert/remove"},
          "exact": "Held-Karp (exact)", "lkh": "LKH-3 (elkai)", "ortools": "OR-Tools (GLS)", "pyvrp": "PyVRP (ILS)"}
VARIANTS = {"op": {"prize_type": "dist"}}


def label(name: str, problem: str) -> str:
    value = LABELS.get(name, name)
    if isinstance(value, dict):
        return value[problem]
    return value


POLICY_LABELS = {"kool": "AM, Kool et al. weights", "pretrained": "AM, ours (shipped)"}
STRATEGIES = {  # name: (paper's key, label); the label's {} is filled with the setting
    "greedy": ("am_greedy", "greedy"), "sample": ("am_sampling", "sampling, best of {samples}"),
    "beam": (None, "beam search, width {beam_width}"), "multistart": (None, "multi-start x 8 augmentations")}


def load_policy(spec: str, problem: str, n: int):
    """``(policy, row label)`` of ``spec`` for one problem and size, or None when it has none."""
    if spec == "pretrained":
        from agents.policies.pretrained import load_pretrained, pretrained_path

        return (load_pretrained(problem, n).eval(), POLICY_LABELS[spec]) if pretrained_path(problem, n).is_file() else None
    if spec == "kool":
        from agents.policies.kool_weights import load_kool_weights

        folder = KOOL / KOOL_FOLDERS[problem].format(n=n)
        return (load_kool_weights(folder).eval(), POLICY_LABELS[spec]) if folder.is_dir() else None
    from agents.policies.checkpoint import load_checkpoint
    from agents.policies.pretrained import load_policy_file

    path = Path(spec.format(problem=problem, n=n))
    if not path.is_file():
        return None
    policy = load_policy_file(path).eval()
    if policy.config.problem != problem:
        return None
    try:
        meta = load_checkpoint(path).get("meta", {})
    except ValueError:  # the reference weights' own format: no metadata
        meta = {}
    return policy, meta.get("label") or f"{type(policy).__name__}, {path.stem}"


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def run(problem_name: str, n: int, args) -> list[dict]:
    """The rows of one problem and size: heuristics, solvers, then the policy's decoding strategies."""
    problem = get_problem(problem_name)
    instances = problem.generate(args.num_instances, n, generator=torch.Generator().manual_seed(args.seed + n),
                                 **VARIANTS.get(problem_name, {}))
    rows = []

    def add(name, kind, cost, seconds, text=None, **extra):
        text = text or label(name, problem_name)
        rows.append({"problem": problem_name, "n": n, "method": text, "key": name, "kind": kind,
                     "costs": cost.double().cpu(), "seconds": seconds, **extra})
        print(f"  {problem_name}{n} {text:32s} {cost.mean():9.4f} {seconds:8.1f} s", flush=True)

    for name in HEURISTICS[problem_name]:
        tours, seconds = timed(lambda: heuristic_tours(problem, instances, name))
        add(name, "heuristic", tour_cost(problem, instances, tours), seconds)
    for method in args.methods:
        if problem_name not in SUPPORTED[method] or not available(method):
            continue
        if method == "exact" and n > args.exact_max_n:
            continue
        out = solve(problem, instances, method, args.time_limit, progress=args.progress, workers=args.workers)
        add(method, "solver", out.cost, out.seconds, repaired=out.repaired,
            time_limit=None if method == "exact" else args.time_limit)
    on_device = type(instances)(*(f.to(args.device) for f in instances))
    settings = {"greedy": {}, "sample": {"num_samples": args.samples}, "beam": {"beam_width": args.beam_width},
                "multistart": {"augment": 8}}
    for spec in args.policy or []:
        loaded = load_policy(spec, problem_name, n)
        if loaded is None:
            continue
        policy, name = loaded
        policy = policy.to(args.device)
        for strategy in args.strategies:
            paper_key, text = STRATEGIES[strategy]
            with torch.inference_mode():
                gen = torch.Generator(args.device).manual_seed(args.seed)
                out, seconds = timed(lambda: decode(policy, problem, on_device, strategy, batch_size=args.batch_size,
                                                    generator=gen, **settings[strategy]))
            attention = type(policy).__name__ == "AttentionModel"  # the paper's rows are its Attention Model's
            add(paper_key if attention else None, "policy", out.cost, seconds, policy=spec,
                text=f"{name}: {text.format(samples=args.samples, beam_width=args.beam_width)}")
    references = [r["costs"] for r in rows if r["kind"] == "solver"]
    if references:
        best = torch.stack(references).min(dim=0).values
        solvers = [r for r in rows if r["kind"] == "solver"]
        best_row = min(solvers, key=lambda r: float(r["costs"].mean()))
        best_row["paper_key"] = "best"
        for r in rows:
            ok = best.abs() > 1e-9
            r["gap_percent"] = float(((r["costs"] - best) / best.abs())[ok].mean() * 100)
            r["reference"] = " / ".join(s["method"] for s in solvers)
    for r in rows:
        r["mean_cost"] = float(r.pop("costs").mean())
        r["seconds_per_10k"] = r["seconds"] * 10_000 / args.num_instances
        r["paper"] = paper_value(problem_name, n, r.get("paper_key") or r["key"] or "")
        if r["paper"] is not None and r.get("paper_key") == "best":
            r["paper_method"] = TABLE1[(problem_name, n)]["best_method"]
    return rows


def markdown(rows: list[dict], args) -> str:
    out = [f"{args.num_instances} seeded instances per set (seed {args.seed} + n), solvers {args.time_limit} s per "
           f"instance, {torch.get_num_threads()} torch thread(s), {args.workers} solver process(es); gap: mean over "
           "instances of (cost - best solver cost) / |best solver cost|; time: seconds per 10,000 instances "
           "(extrapolated); paper: Kool et al. 2019, Table 1 (their test set; sampling: best of 1,280). "
           "OP costs are minus the prize."]
    for problem in dict.fromkeys(r["problem"] for r in rows):
        sizes = sorted({r["n"] for r in rows if r["problem"] == problem})
        head = "| method | " + " | ".join(f"n={n} cost | gap | s / 10k | paper" for n in sizes) + " |"
        out += ["", f"### {problem.upper()}", "", head, "|---" * (1 + 4 * len(sizes)) + "|"]
        for method in dict.fromkeys(r["method"] for r in rows if r["problem"] == problem):
            cells = []
            for n in sizes:
                r = next((r for r in rows if r["problem"] == problem and r["n"] == n and r["method"] == method), None)
                if r is None:
                    cells.append("- | - | - | -")
                    continue
                gap = f"{r['gap_percent'] + 0.0:.2f}%".replace("-0.00", "0.00") if "gap_percent" in r else "-"
                paper = "-" if r["paper"] is None else f"{r['paper']:.2f}"
                if r.get("paper_method"):
                    paper += f" ({r['paper_method']})"
                cells.append(f"{r['mean_cost']:.3f} | {gap} | {r['seconds_per_10k']:.0f} | {paper}")
            out.append(f"| {method} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", nargs="+", default=["tsp", "cvrp", "op", "pctsp"])
    parser.add_argument("--sizes", type=int, nargs="+", default=[20, 50])
    parser.add_argument("--num-instances", type=int, default=100, help="instances per set (10000 for the paper's)")
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--methods", nargs="+", default=["exact", "lkh", "ortools", "pyvrp"],
                        help="solvers to run where installed")
    parser.add_argument("--time-limit", type=float, default=0.1, help="solver seconds per instance")
    parser.add_argument("--exact-max-n", type=int, default=20, help="run Held-Karp up to this n")
    parser.add_argument("--workers", type=int, default=1, help="solver processes")
    parser.add_argument("--policy", nargs="+", help="'kool', 'pretrained' and/or checkpoint paths ({problem}, {n} "
                                                    "filled in)")
    parser.add_argument("--strategies", nargs="+", choices=list(STRATEGIES), default=list(STRATEGIES),
                        help="decoding strategies of the policies")
    parser.add_argument("--samples", type=int, default=128)
    parser.add_argument("--beam-width", type=int, default=16)
    parser.add_argument("--batch-size", type=int, default=2048, help="rows decoded together")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch CPU threads (1 is fastest for these batches on a shared CPU)")
    parser.add_argument("--device", default="cpu", help="where the policy decodes (heuristics and solvers: CPU)")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    parser.add_argument("--progress", action="store_true", help="progress bars for the solvers")
    args = parser.parse_args()
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    rows = []
    start = time.perf_counter()
    for n in args.sizes:
        for problem in args.problems:
            rows += run(problem, n, args)
    table = markdown(rows, args)
    args.out.mkdir(parents=True, exist_ok=True)
    settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    (args.out / "quality.json").write_text(json.dumps(
        {"settings": settings, "machine": platform.platform(), "torch": torch.__version__,
         "threads": torch.get_num_threads(), "total_seconds": time.perf_counter() - start, "rows": rows}, indent=1))
    (args.out / "quality.md").write_text(table + "\n")
    print("\n" + table)


if __name__ == "__main__":
    main()
