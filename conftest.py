"""Doctest collection: skip modules whose optional dependency is not installed."""
import importlib.util

collect_ignore = [] if importlib.util.find_spec("stable_baselines3") else ["routing_gym/sb3.py"]
