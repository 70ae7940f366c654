"""The four routing problems: generator, batched dynamics and cost, each written once in torch.

``PROBLEMS`` maps a problem's name to its class; :func:`step` and :func:`tour_cost` (from ``base``) are
the entry points shared by the single env, the vector env and the trainer.
"""
from .base import invalid_penalty, step, tour_cost
from .cvrp import CVRP
from .op import OP
from .pctsp import PCTSP
from .tsp import TSP

PROBLEMS = {"tsp": TSP, "cvrp": CVRP, "op": OP, "pctsp": PCTSP}


def get_problem(name: str):
    """The problem class for ``name`` (case-insensitive): ``tsp``, ``cvrp``, ``op`` or ``pctsp``."""
    try:
        return PROBLEMS[str(name).lower()]
    except KeyError:
        raise ValueError(f"unknown problem {name!r}; choose one of {sorted(PROBLEMS)}") from None


__all__ = ["CVRP", "OP", "PCTSP", "PROBLEMS", "TSP", "get_problem", "invalid_penalty", "step", "tour_cost"]
