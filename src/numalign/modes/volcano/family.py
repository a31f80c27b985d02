"""The Volcano family: the merge rules of Volcano's ``numa-aware`` plugin; its nodes run the
kubelet, so a node admits by the kubelet's rules (:mod:`numalign.modes.kubelet.family`).

Volcano's row (volcano-sh/volcano ``pkg/scheduler/plugins/numaaware/policy``): a permutation is
preferred when every hint is preferred (no equal-affinity rule: the kubelet's pre-1.21 rule,
``legacy_merge``); ``single-numa-node`` keeps an all-nodes result as the all-nodes mask; a task
with a policy is placed only on a node with the same policy (``volcano.sh/numa-topology-policy``
against the Numatopology's ``TopologyManagerPolicy``).
"""

from __future__ import annotations

from numalign.modes.family import Family
from numalign.modes.kubelet.family import KubeletNode
from numalign.modes.rules import Mode, ModeRules
from numalign.pods.annotations import VOLCANO_ANNOTATION

RULES = ModeRules(Mode.VOLCANO, True, False, False, False, True, (VOLCANO_ANNOTATION,), None)

FAMILY = Family(Mode.VOLCANO, RULES, KubeletNode)
