"""The multi-attribute VRP (RouteFinder's 48 variants) as one unit: the attributes and their rules
(:mod:`.attributes`), the generator (:mod:`.generator`) and the unit (:mod:`.unit`)."""
from .attributes import VARIANTS, Flags, variant_name
from .unit import MTVRP, MTVRPInstance, MTVRPState, variant_names

__all__ = ["MTVRP", "MTVRPInstance", "MTVRPState", "VARIANTS", "Flags", "variant_name", "variant_names"]
