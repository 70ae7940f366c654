"""Policies, trainers and references for the routing-gym environments: ``agents.load_pretrained("tsp", 20)``
loads a shipped attention model."""
from .policies.pretrained import available_pretrained, load_pretrained

__all__ = ["available_pretrained", "load_pretrained"]
