"""What users run: the ``routing-gym`` command line (:mod:`.cli`, one module per command in :mod:`.commands`),
the shipped-model comparison (:mod:`.compare`) and the visual rollouts (:mod:`.visual`). May import every other
layer."""
