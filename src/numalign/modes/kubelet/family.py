"""The kubelet family: the rules every other family starts from.

* the policy a pod gets: the node's, at the node's scope; on a ``dynamic`` node (KEP-693) the
  pod's own (:attr:`numalign.pods.Pod.own_policy`), ``none`` when it asks for none;
* providers in the kubelet's order: device manager, CPU manager, memory manager
  (``pkg/kubelet/cm/container_manager_linux.go`` adds them as hint providers in that order);
* the merge: the policy's own (``pkg/kubelet/cm/topologymanager/policy.go``);
* the node's kubelet release (``releases.py``): how the device manager generates its hints.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from numalign.engine.policies import Policy, Scope, TopologyPolicy
from numalign.engine.scopes import Merge
from numalign.machine.model import Machine
from numalign.modes.family import Family, ManagerStates, NodePolicy
from numalign.modes.kubelet.releases import DeviceHints
from numalign.modes.rules import Mode, ModeRules
from numalign.pods import Pod
from numalign.resources.base import Provider
from numalign.resources.cpu import CpuManager
from numalign.resources.devices import DeviceManager
from numalign.resources.memory import MemoryManager


class KubeletNode:
    """The kubelet's rules on one node."""

    def __init__(self, machine: Machine, node: NodePolicy) -> None:
        self.machine = machine
        self.node = node
        #: the release's device hint generation (``modes/kubelet/releases.py``)
        self.device_numa_only = node.release.release.device_hints is DeviceHints.DEVICE_NUMA_NODES

    def policy_for(self, pod: Pod) -> tuple[Policy, Scope]:
        node = self.node
        if not node.dynamic:
            return node.policy, node.scope
        asked = pod.own_policy
        if asked is None:
            return Policy.NONE, node.scope
        policy, scope = asked
        return policy, scope or node.scope

    def providers(
        self, states: ManagerStates, reserved: frozenset[int], policy_of: Callable[[Pod], Policy]
    ) -> list[Provider]:
        m = self.machine
        return [DeviceManager(m, states.devices, self.device_numa_only),
                CpuManager(m, states.cpu, reserved=reserved), MemoryManager(m, states.memory)]

    def merge(self, policy: TopologyPolicy, providers: Sequence[Provider]) -> Merge | None:
        return None

    def rejection_message(self, reasons: Sequence[str]) -> str | None:
        return None  # the kubelet's merge has no words of its own


#: the kubelet's row: the current merge rule, ``single-numa-node`` turns an all-nodes result
#: into no affinity, no ``unsatisfied`` report, no pod policy of its own outside KEP-693
RULES = ModeRules(Mode.KUBELET, False, True, False, False, False, (), None)

FAMILY = Family(Mode.KUBELET, RULES, KubeletNode)
