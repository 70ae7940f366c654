"""The routing problems, one unit each, and the registry every other part of the project reads.

``PROBLEMS`` maps a problem's name to its unit (a :class:`~routing_gym.problems.base.Problem`
subclass): adding a problem means adding its module and one line here. :func:`step` and
:func:`tour_cost` (from ``base``) are the entry points shared by the single env, the vector env and
the trainer.
"""
from .acvrp import ACVRP
from .atsp import ATSP
from .base import Problem, invalid_penalty, step, tour_cost
from .cvrp import CVRP
from .cvrpmvc import CVRPMVC
from .cvrptw import CVRPTW
from .mtvrp import MTVRP
from .mdcpdp import MDCPDP
from .mpdp import MPDP
from .mtsp import MTSP
from .op import OP
from .pdp import PDP
from .pctsp import PCTSP
from .sdvrp import SDVRP
from .shpp import SHPP
from .spctsp import SPCTSP
from .svrp import SVRP
from .tsp import TSP

PROBLEMS: dict[str, type[Problem]] = {p.name: p for p in (
    TSP, CVRP, SDVRP, OP, PCTSP, SPCTSP,  # Kool et al. 2019
    ATSP,
    CVRPTW,
    CVRPMVC,
    PDP,
    MPDP,
    MDCPDP,
    MTSP,
    SHPP,
    SVRP,
    MTVRP,  # RouteFinder's 48 variants
    ACVRP,
)}


def get_problem(name) -> type[Problem]:
    """The problem unit for ``name`` (case-insensitive, e.g. ``"cvrp"``), or the unit itself."""
    if isinstance(name, type) and issubclass(name, Problem):
        return name
    try:
        return PROBLEMS[str(name).lower()]
    except KeyError:
        raise ValueError(f"unknown problem {name!r}; choose one of {sorted(PROBLEMS)}") from None


__all__ = ["ACVRP", "ATSP", "CVRP", "CVRPMVC", "CVRPTW", "MDCPDP", "MPDP", "MTVRP", "MTSP", "OP", "PCTSP", "PDP", "PROBLEMS", "Problem", "SDVRP", "SHPP", "SPCTSP", "SVRP", "TSP", "get_problem", "invalid_penalty", "step", "tour_cost"]
