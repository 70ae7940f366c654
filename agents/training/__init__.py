"""Training policies: the settings (:mod:`.config`), REINFORCE (:mod:`.reinforce`, the loop) and the units
it calls: baselines (:mod:`.baselines`), checkpoints and resume (:mod:`.checkpointing`), the metrics record
(:mod:`.metrics`), the budget (:mod:`.budget`), imitation (:mod:`.imitation`), data-parallel helpers
(:mod:`.distributed`); supervised learning from labelled tours (:mod:`.supervised`).
Imports :mod:`agents.inference` and :mod:`agents.policies`."""
