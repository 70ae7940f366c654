"""Published numbers of Kool, van Hoof & Welling, "Attention, Learn to Solve Routing Problems!", ICLR 2019,
Table 1 (mean costs over their 10,000 test instances; OP as minus the prize, so that lower is better).

``am_greedy`` and ``am_sampling`` are the Attention Model's rows (sampling: best of 1,280 samples); ``best`` is
the paper's best reference method on that set, named in ``best_method``; the heuristics are the TSP rows.
Used by the benchmark scripts for their "paper" columns and lines.
"""
from __future__ import annotations

TABLE1: dict[tuple[str, int], dict] = {
    ("tsp", 20): {"am_greedy": 3.85, "am_sampling": 3.84, "best": 3.84, "best_method": "Concorde",
                  "nearest": 4.50, "nearest_insertion": 4.33, "farthest_insertion": 3.93},
    ("tsp", 50): {"am_greedy": 5.80, "am_sampling": 5.73, "best": 5.70, "best_method": "Concorde",
                  "nearest": 7.00, "nearest_insertion": 6.78, "farthest_insertion": 6.01},
    ("tsp", 100): {"am_greedy": 8.12, "am_sampling": 7.94, "best": 7.76, "best_method": "Concorde",
                   "nearest": 9.68, "nearest_insertion": 9.46, "farthest_insertion": 8.35},
    ("cvrp", 20): {"am_greedy": 6.40, "am_sampling": 6.25, "best": 6.10, "best_method": "Gurobi"},
    ("cvrp", 50): {"am_greedy": 10.98, "am_sampling": 10.62, "best": 10.38, "best_method": "LKH3"},
    ("cvrp", 100): {"am_greedy": 16.80, "am_sampling": 16.23, "best": 15.65, "best_method": "LKH3"},
    ("op", 20): {"am_greedy": -5.19, "am_sampling": -5.30, "best": -5.39, "best_method": "Gurobi"},
    ("op", 50): {"am_greedy": -15.64, "am_sampling": -16.07},
    ("pctsp", 20): {"am_greedy": 3.18, "am_sampling": 3.15, "best": 3.13, "best_method": "Gurobi"},
    ("pctsp", 50): {"am_greedy": 4.60, "am_sampling": 4.52},
}


def paper_value(problem: str, n: int, key: str) -> float | None:
    """The paper's mean cost for a method key (``am_greedy``, ``am_sampling``, ``best``, a TSP heuristic's
    name), or None."""
    return TABLE1.get((problem, n), {}).get(key)


def kool_weights_dir():
    """The folder of the published weights of Kool et al. (a copy of the ``pretrained/`` folder of
    wouterkool/attention-learn-to-route): ``$ROUTING_GYM_KOOL_WEIGHTS``, else ``reference-models/kool2019``
    in a ``shared`` folder beside the repository (where the project's machines keep it)."""
    import os
    from pathlib import Path

    default = Path(__file__).resolve().parents[2] / "shared" / "reference-models" / "kool2019"
    return Path(os.environ.get("ROUTING_GYM_KOOL_WEIGHTS", default))

