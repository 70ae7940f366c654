"""Training policies: the settings (:mod:`.config`), REINFORCE (:mod:`.reinforce`), its data-parallel
helpers (:mod:`.distributed`) and supervised learning from labelled tours (:mod:`.supervised`).
Imports :mod:`agents.inference` and :mod:`agents.policies`."""
