"""Registration of the environments under the ``routing/`` namespace, read from the problem registry."""
from __future__ import annotations

import gymnasium as gym

from .problems import PROBLEMS


def register_envs() -> None:
    """Register ``routing/{P}-{n}`` for each problem's declared sizes and the parametric
    ``routing/{P}-v0`` (``num_nodes=...``), for every problem in the registry."""
    for problem in PROBLEMS.values():
        entry = f"routing_gym.env:{problem.label}Env"
        vector_entry = f"routing_gym.vector:{problem.label}VectorEnv"
        # ------------------------------------------------------------------ fixed sizes
        for n in problem.sizes:
            gym.register(id=f"routing/{problem.label}-{n}", entry_point=entry, vector_entry_point=vector_entry,
                         kwargs={"num_nodes": n})
        # ------------------------------------------------------------------ parametric size
        gym.register(id=f"routing/{problem.label}-v0", entry_point=entry, vector_entry_point=vector_entry)
