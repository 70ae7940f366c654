"""What the policies are measured against: classic heuristics (:mod:`.heuristics`), the exact Held-Karp
DP (:mod:`.exact`) and external solvers (:mod:`.solvers`). Imports :mod:`agents.inference` and
:mod:`agents.policies`."""
