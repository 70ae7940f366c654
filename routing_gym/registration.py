"""Registration of the environments under the ``routing/`` namespace, read from the problem registry."""
from __future__ import annotations

import gymnasium as gym

from .env import ENV_CLASSES, SIZED_ENV_CLASSES
from .problems import PROBLEMS
from .vector import SIZED_VECTOR_ENV_CLASSES, VECTOR_ENV_CLASSES


def register_envs() -> None:
    """Register ``routing/{P}-{n}`` for each problem's declared sizes (the size is fixed: another
    ``num_nodes`` raises ``ValueError``) and the parametric ``routing/{P}-v0`` (``num_nodes=...``), for
    every problem in the registry; then each problem's ``presets`` (named variants: ``routing/{name}-{n}`` and
    ``routing/{name}-v0``, the problem's envs with those options), except a name that is a problem's label
    (``CVRP``: that problem's own ids)."""
    for env_id, cls in SIZED_ENV_CLASSES.items():
        gym.register(id=env_id, entry_point=f"routing_gym.env:{cls.__name__}",
                     vector_entry_point=f"routing_gym.vector:{SIZED_VECTOR_ENV_CLASSES[env_id].__name__}",
                     kwargs={"num_nodes": cls.fixed_num_nodes})
    for name, problem in PROBLEMS.items():
        gym.register(id=f"routing/{problem.label}-v0", entry_point=f"routing_gym.env:{ENV_CLASSES[name].__name__}",
                     vector_entry_point=f"routing_gym.vector:{VECTOR_ENV_CLASSES[name].__name__}")
    labels = {problem.label for problem in PROBLEMS.values()}
    for name, problem in PROBLEMS.items():
        for preset, options in problem.presets.items():
            if preset in labels:
                continue
            for n in problem.sizes:
                sized = f"routing/{problem.label}-{n}"
                gym.register(id=f"routing/{preset}-{n}", entry_point=f"routing_gym.env:{SIZED_ENV_CLASSES[sized].__name__}",
                             vector_entry_point=f"routing_gym.vector:{SIZED_VECTOR_ENV_CLASSES[sized].__name__}",
                             kwargs={"num_nodes": n, **options})
            gym.register(id=f"routing/{preset}-v0", entry_point=f"routing_gym.env:{ENV_CLASSES[name].__name__}",
                         vector_entry_point=f"routing_gym.vector:{VECTOR_ENV_CLASSES[name].__name__}", kwargs=dict(options))
