"""routing-gym: TSP, CVRP, OP and PCTSP as Gymnasium environments over one batched torch core.

Importing the package registers the environments under the ``routing/`` namespace::

    import gymnasium as gym
    import routing_gym  # noqa: F401  (or gym.make("routing_gym:routing/TSP-50"))

    env = gym.make("routing/TSP-50")
    env = gym.make("routing/OP-v0", num_nodes=37, prize_type="unif")
    venv = gym.make_vec("routing/CVRP-100", num_envs=1024, vectorization_mode="vector_entry_point")
"""
from .env import CVRPEnv, OPEnv, PCTSPEnv, RoutingEnv, TSPEnv
from .problems import CVRP, OP, PCTSP, PROBLEMS, TSP, get_problem, step, tour_cost
from .registration import register_envs

register_envs()

__version__ = "0.1.0"
__all__ = ["CVRP", "CVRPEnv", "OP", "OPEnv", "PCTSP", "PCTSPEnv", "PROBLEMS", "RoutingEnv", "TSP", "TSPEnv",
           "get_problem", "register_envs", "step", "tour_cost"]
