"""routing-gym: vehicle-routing problems as Gymnasium environments over one batched torch core, one unit per
problem in ``routing_gym.problems`` (``PROBLEMS``, the registry).

Importing the package registers the environments under the ``routing/`` namespace::

    import gymnasium as gym
    import routing_gym  # noqa: F401  (or gym.make("routing_gym:routing/TSP-50"))

    env = gym.make("routing/TSP-50")
    env = gym.make("routing/OP-v0", num_nodes=37, prize_type="unif")
    venv = gym.make_vec("routing/CVRP-100", num_envs=1024, vectorization_mode="vector_entry_point")
"""
from .env import ENV_CLASSES, RoutingEnv
from .problems import PROBLEMS, Problem, get_problem, step, tour_cost
from .registration import register_envs

register_envs()
globals().update({p.label: p for p in PROBLEMS.values()})  # routing_gym.TSP, routing_gym.CVRP, ...
globals().update({cls.__name__: cls for cls in ENV_CLASSES.values()})  # routing_gym.TSPEnv, ...

__version__ = "0.1.0"
__all__ = ["ENV_CLASSES", "PROBLEMS", "Problem", "RoutingEnv", "get_problem", "register_envs", "step", "tour_cost",
           *(p.label for p in PROBLEMS.values()), *(cls.__name__ for cls in ENV_CLASSES.values())]
