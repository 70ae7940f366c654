"""The networks and what every layer above them shares: the policy protocol (:mod:`.protocol`), the
registry of networks (:mod:`.registry`) and policy files (:mod:`.checkpoint`, :mod:`.pretrained`,
:mod:`.kool_weights`). Nothing here imports the other ``agents`` subpackages."""
