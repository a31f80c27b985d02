"""One rules object per node: everything that varies in how a node decides, resolved once.

A node's decision varies with its engine mode (the family of scheduler whose rules it follows:
label ``numalign.io/engine-mode`` or a scheduler profile), its kubelet configuration (policy,
scope, policy options behind their feature gates) and its labels and annotations.
:func:`resolve_rules` reads all of them once into a frozen :class:`NodeRules`; admission, the
scheduler's filters, the extender and the launcher ask it and never test a mode themselves.

It carries:

* the Topology Manager settings (:class:`~numalign.modes.family.NodePolicy`);
* the family's rules for this node (:class:`~numalign.modes.family.FamilyNode`): the policy a
  pod gets, the providers and their options, the merge;
* the admission chain: the kubelet's admit handlers in the order it runs them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from enum import StrEnum
from typing import TYPE_CHECKING

from numalign.engine.policies import (
    Policy,
    Scope,
    TopologyPolicy,
    parse_policy,
    parse_scope,
)
from numalign.engine.scopes import Merge
from numalign.errors import InputError
from numalign.machine.model import Machine
from numalign.modes.family import FamilyNode, ManagerStates, NodePolicy
from numalign.modes.kubelet.releases import (
    KubeletRelease,
    ResolvedRelease,
    check_startup,
    release_of,
)
from numalign.modes.registry import Family, Mode, family_of
from numalign.pods import Pod
from numalign.record import Record, set_field
from numalign.resources.base import Provider

if TYPE_CHECKING:
    from numalign.machine.kubelet_version import KubeletVersion

DYNAMIC = "dynamic"  # KEP-693: the node applies each pod's own policy


class AdmissionStep(StrEnum):
    """One of the kubelet's pod admit handlers numalign models."""

    #: node fit: pod count, cpu, memory, hugepages, extended resources against allocatable
    #: (``lifecycle.NewPredicateAdmitHandler``): ``OutOfcpu`` and friends
    PREDICATES = "predicates"
    #: the Topology Manager's merge, then every provider's allocation
    #: (``GetAllocateResourcesPodAdmitHandler``): ``TopologyAffinityError`` and friends
    TOPOLOGY_MANAGER = "topology-manager"


#: the kubelet's order: ``pkg/kubelet/kubelet.go`` adds
#: ``containerManager.GetAllocateResourcesPodAdmitHandler()`` before
#: ``lifecycle.NewPredicateAdmitHandler(...)`` and ``canAdmitPod`` stops at the first rejection
#: (the same in every modelled release: ``KubeletRelease.admission_chain``)
ADMISSION_CHAIN = (AdmissionStep.TOPOLOGY_MANAGER, AdmissionStep.PREDICATES)


def admission_chain(release: KubeletRelease) -> tuple[AdmissionStep, ...]:
    """The admit handlers of ``release`` as numalign runs them."""
    return tuple(AdmissionStep(step) for step in release.admission_chain)


class NodeRules(Record, frozen=True):
    """How one node decides (see the module docstring)."""

    __slots__ = ("mode", "family", "node", "decides", "chain")
    mode: Mode
    family: Family
    node: NodePolicy
    decides: FamilyNode
    chain: tuple[AdmissionStep, ...]

    def __init__(
        self,
        mode: Mode,
        family: Family,
        node: NodePolicy,
        decides: FamilyNode,
        chain: tuple[AdmissionStep, ...] = ADMISSION_CHAIN,
    ) -> None:
        set_field(self, "mode", mode)
        set_field(self, "family", family)
        set_field(self, "node", node)
        set_field(self, "decides", decides)
        set_field(self, "chain", chain)

    @property
    def dynamic(self) -> bool:
        return self.node.dynamic

    @property
    def release(self) -> ResolvedRelease:
        """The kubelet release this node decides by, and how numalign knows it."""
        return self.node.release

    def decides_as(self, version: KubeletVersion | None) -> bool:
        """Whether a node given ``version`` (None: none) instead of its own would decide by
        the same release row as these rules (an unmodelled version: False)."""
        try:
            return release_of(version).release is self.node.release.release
        except InputError:
            return False

    def release_notes(self, machine: Machine, pod: Pod) -> list[str]:
        """``--explain``: the node's kubelet release, and the NUMA masks its hint providers
        would enumerate for ``pod`` (``modes/kubelet/release_explain.py``)."""
        from numalign.modes.kubelet.release_explain import release_notes  # --explain only

        return release_notes(self.node.release, machine, pod)

    @property
    def kubelet_only(self) -> bool:
        """The kubelet's own rules with one node policy: no other family, no per-pod policy."""
        return self.family.mode is Mode.KUBELET and not self.node.dynamic

    def with_mode(self, machine: Machine, mode: Mode | None) -> NodeRules:
        """These rules under ``mode``'s family (None, or the same mode: unchanged)."""
        if mode is None or mode is self.mode:
            return self
        return resolve_rules(machine, mode, self.node)

    def policy_for(self, pod: Pod) -> tuple[Policy, Scope]:
        return self.decides.policy_for(pod)

    def providers(
        self, states: ManagerStates, reserved: frozenset[int], policy_of: Callable[[Pod], Policy]
    ) -> list[Provider]:
        return self.decides.providers(states, reserved, policy_of)

    def merge(self, policy: TopologyPolicy, providers: Sequence[Provider]) -> Merge | None:
        return self.decides.merge(policy, providers)

    def rejection_message(self, reasons: Sequence[str]) -> str | None:
        """The family's message for a merge rejection with ``reasons`` (None: the kubelet's)."""
        return self.decides.rejection_message(reasons)


def node_policy(machine: Machine) -> NodePolicy:
    """The Topology Manager settings of ``machine``'s kubelet section, checked as the node's
    kubelet release checks them at start-up (policy and scope names, locked feature gates,
    options behind their gates, ``modes/kubelet/releases.py``)."""
    kc = machine.kubelet
    dynamic = kc.topology_manager_policy == DYNAMIC
    release = release_of(kc.kubelet_version)
    options = check_startup(kc, release.release)
    if dynamic:
        policy, implied = Policy.NONE, None
    else:
        policy, implied = parse_policy(kc.topology_manager_policy, "kubelet.topologyManagerPolicy")
    scope = implied or parse_scope(kc.topology_manager_scope, "kubelet.topologyManagerScope")
    return NodePolicy(policy, scope, options, dynamic, release)


def resolve_rules(machine: Machine, mode: Mode | None = None, node: NodePolicy | None = None) -> NodeRules:
    """The rules of ``machine`` (``mode`` overrides its engine-mode label: a scheduler profile's;
    ``node``: its kubelet settings when already resolved)."""
    settings = node if node is not None else node_policy(machine)
    family = family_of(machine.labels, mode)
    return NodeRules(family.mode, family, settings, family.resolve(machine, settings),
                     admission_chain(settings.release.release))


__all__ = [
    "ADMISSION_CHAIN",
    "DYNAMIC",
    "AdmissionStep",
    "NodeRules",
    "admission_chain",
    "node_policy",
    "resolve_rules",
]
