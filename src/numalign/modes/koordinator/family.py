"""The Koordinator family: Koordinator's scheduler decides the node's NUMA allocation.

Resolved once per node: the node's NUMA policy (label ``node.koordinator.sh/numa-topology-policy``,
else the kubelet's), koordlet's ``kubelet.koordinator.sh/cpu-manager-policy`` annotation, and
whether Koordinator's NUMA rules apply - they do unless the kubelet's Static memory manager runs,
whose NUMA-group rule and tables then stay in charge.

* the policy a pod gets: its ``numa-topology-spec`` policy when set, else the node's; always pod
  scope (``mergeTopologyPolicy``: Koordinator hints and allocates the pod as a whole);
* providers: DeviceShare (device hints joint over device types) and NodeNUMAResource (CPUs and
  per-NUMA memory hinted jointly) with Koordinator's CPU bind policies; with the Static memory
  manager, the kubelet's device and memory managers around Koordinator's CPU manager;
* the merge: Koordinator's (:mod:`numalign.modes.merge` with :data:`RULES`), the hints' NUMA
  scores breaking ties among equally narrow preferred masks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from numalign.engine.hints import ProviderHints
from numalign.engine.policies import MergeResult, Policy, Scope, TopologyPolicy
from numalign.engine.scopes import Merge
from numalign.machine.model import Machine
from numalign.machine.node_annotations import parse_kubelet_cpu_policy
from numalign.modes.family import Family, ManagerStates, NodePolicy
from numalign.modes.koordinator.cpu import KoordinatorCpuManager
from numalign.modes.koordinator.devices import KoordinatorDeviceManager
from numalign.modes.koordinator.memory import KoordinatorNumaResource
from numalign.modes.koordinator.numa import KOORDINATOR_NODE_POLICY_LABEL, node_numa_policy
from numalign.modes.koordinator.reasons import status_message
from numalign.modes.merge import merge
from numalign.modes.rules import Mode, ModeRules
from numalign.pods import Pod
from numalign.pods.annotations import KOORDINATOR_ANNOTATION
from numalign.resources.base import Provider
from numalign.resources.devices import DeviceManager
from numalign.resources.memory import POLICY_STATIC as MEMORY_STATIC
from numalign.resources.memory import MemoryManager

#: Koordinator's row: the current merge rule, ``single-numa-node`` all-nodes -> no affinity, an
#: unsatisfied best-effort hint -> all nodes, ``unsatisfied`` and per-resource reasons reported
RULES = ModeRules(Mode.KOORDINATOR, False, True, True, True, False, (KOORDINATOR_ANNOTATION,),
                  KOORDINATOR_NODE_POLICY_LABEL)


class KoordinatorNode:
    """Koordinator's rules on one node."""

    def __init__(self, machine: Machine, node: NodePolicy) -> None:
        self.machine = machine
        #: the node's NUMA policy Koordinator reads (label, else the kubelet's)
        self.node_policy = node_numa_policy(machine.labels, node.policy)
        self.kubelet_cpu = parse_kubelet_cpu_policy(machine.annotations)
        #: Koordinator's own NUMA rules apply (the kubelet's Static memory manager is off)
        self.numa = machine.kubelet.memory_manager_policy != MEMORY_STATIC

    def policy_for(self, pod: Pod) -> tuple[Policy, Scope]:
        asked = pod.koordinator_numa_spec.policy
        return (asked if asked is not None else self.node_policy), Scope.POD

    def providers(
        self, states: ManagerStates, reserved: frozenset[int], policy_of: Callable[[Pod], Policy]
    ) -> list[Provider]:
        m = self.machine
        cpu = KoordinatorCpuManager(m, states.cpu, reserved=reserved, policy_of=policy_of,
                                    kubelet=self.kubelet_cpu)
        if self.numa:
            return [KoordinatorDeviceManager(m, states.devices),
                    KoordinatorNumaResource(m, cpu, states.memory, cpu.policy_of)]
        return [DeviceManager(m, states.devices), cpu, MemoryManager(m, states.memory)]

    def merge(self, policy: TopologyPolicy, providers: Sequence[Provider]) -> Merge | None:
        """Koordinator's merge where its NUMA rules apply; with the Static memory manager the
        kubelet's memory manager allocates and its NUMA-group rule refuses a best-effort
        all-nodes fallback, so the kubelet's merge is kept there."""
        if not self.numa:
            return None
        scorers = [p for p in providers if isinstance(p, (KoordinatorNumaResource, KoordinatorDeviceManager))]

        def score(mask: int) -> int:
            return sum(p.hint_score(mask) for p in scorers)

        def merged(hints: Sequence[ProviderHints]) -> MergeResult:
            out = merge(RULES, policy, hints, score=score if scorers else None)
            return MergeResult(out.hint, out.admit, out.explain)

        return merged

    def rejection_message(self, reasons: Sequence[str]) -> str | None:
        """NodeNUMAResource's Filter message when the Topology Manager refuses the pod:
        ``Admit`` returns ``NewStatus(Unschedulable, reasons...)`` and ``Status.Message()``
        joins the reasons with ``", "``; None without reasons (the kubelet's merge ran)."""
        return status_message(reasons) if reasons else None


FAMILY = Family(Mode.KOORDINATOR, RULES, KoordinatorNode, reads_koordlet_annotations=True)
