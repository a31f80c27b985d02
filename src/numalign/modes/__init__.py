"""Engine modes: the other schedulers' Topology Manager variants as families over one merge.

DESIGN.md: "Variants of other schedulers are **modes** of the same engine (``kubelet``,
``koordinator``, ``volcano``): small rule tables over one merge". Each family is one folder
(``modes/<family>/``) holding everything it adds - merge rules, managers, scores, selection, job
handling - and one line in :data:`numalign.modes.registry.FAMILIES`. A node's family is resolved
once into its rules (:mod:`numalign.node.rules`); admission and the scheduler ask those rules,
never the mode.
"""
