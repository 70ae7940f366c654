"""Registration of the environments under the ``routing/`` namespace (flat data)."""
from __future__ import annotations

import gymnasium as gym

ENV_CLASSES = {"TSP": "TSPEnv", "CVRP": "CVRPEnv", "OP": "OPEnv", "PCTSP": "PCTSPEnv"}
SIZES = (10, 20, 50, 100)


def register_envs() -> None:
    """Register ``routing/{P}-{10,20,50,100}`` and the parametric ``routing/{P}-v0`` (``num_nodes=...``)."""
    for name, cls in ENV_CLASSES.items():
        entry = f"routing_gym.env:{cls}"
        vector_entry = f"routing_gym.vector:{cls.replace('Env', 'VectorEnv')}"
        # ------------------------------------------------------------------ fixed sizes
        for n in SIZES:
            gym.register(id=f"routing/{name}-{n}", entry_point=entry, vector_entry_point=vector_entry,
                         kwargs={"num_nodes": n})
        # ------------------------------------------------------------------ parametric size
        gym.register(id=f"routing/{name}-v0", entry_point=entry, vector_entry_point=vector_entry)
