"""Decoding policies of the protocol of :mod:`agents.policies.protocol`: rollouts on the vector env
(:mod:`.rollout`) and inference-time search (:mod:`.search`). Imports only :mod:`agents.policies`."""
