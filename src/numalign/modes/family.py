"""What a scheduler family contributes to a node's rules: the interface every mode implements.

A family (``kubelet``, ``koordinator``, ``volcano``) is resolved once per node into a
:class:`FamilyNode` (:meth:`Family.resolve`), which answers the three questions admission asks:
which policy and scope a pod gets, which hint providers (and with which options) allocate, and
which merge replaces the policy's own. :mod:`numalign.node.rules` composes the answer with the
kubelet's settings into the node's :class:`~numalign.node.rules.NodeRules`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from numalign.engine.policies import Policy, PolicyOptions, Scope, TopologyPolicy
from numalign.engine.scopes import Merge
from numalign.machine.model import Machine
from numalign.modes.kubelet.releases import ResolvedRelease, release_of
from numalign.modes.rules import Mode, ModeRules
from numalign.pods import Pod
from numalign.record import Record, set_field
from numalign.resources.base import Provider
from numalign.resources.cpu_state import CpuState
from numalign.resources.devices import DeviceState
from numalign.resources.memory_state import MemoryState


class NodePolicy(Record, frozen=True):
    """The Topology Manager settings of a node's kubelet configuration, checked."""

    __slots__ = ("policy", "scope", "options", "dynamic", "release")
    #: the node's policy (``none`` on a ``dynamic`` node, which applies each pod's own)
    policy: Policy
    scope: Scope
    options: PolicyOptions
    #: KEP-693: the node applies each pod's own policy
    dynamic: bool
    #: the kubelet release the node decides by, and how it is known
    release: ResolvedRelease

    def __init__(
        self,
        policy: Policy,
        scope: Scope,
        options: PolicyOptions,
        dynamic: bool,
        release: ResolvedRelease | None = None,
    ) -> None:
        set_field(self, "policy", policy)
        set_field(self, "scope", scope)
        set_field(self, "options", options)
        set_field(self, "dynamic", dynamic)
        set_field(self, "release", release_of(None) if release is None else release)


class ManagerStates(Protocol):
    """The managers' states a node's providers allocate from (a node state)."""

    @property
    def cpu(self) -> CpuState: ...

    @property
    def memory(self) -> MemoryState: ...

    @property
    def devices(self) -> DeviceState: ...


class FamilyNode(Protocol):
    """A family's rules resolved for one node."""

    def policy_for(self, pod: Pod) -> tuple[Policy, Scope]:
        """The policy and scope ``pod`` gets on this node."""
        ...

    def providers(
        self, states: ManagerStates, reserved: frozenset[int], policy_of: Callable[[Pod], Policy]
    ) -> list[Provider]:
        """The hint providers and allocators over ``states``, in the order they are asked."""
        ...

    def merge(self, policy: TopologyPolicy, providers: Sequence[Provider]) -> Merge | None:
        """The merge of ``policy`` over these providers' hints (None: the policy's own)."""
        ...

    def rejection_message(self, reasons: Sequence[str]) -> str | None:
        """The message of a rejection whose merge gave ``reasons`` (the family's own words,
        :attr:`~numalign.engine.policies.MergeResult.reasons`); None: the kubelet's
        ``TopologyAffinityError`` message."""
        ...


class Family(Record, frozen=True):
    """One scheduler family: its mode, its rule row over the merge, and its per-node rules."""

    __slots__ = ("mode", "rules", "resolve", "reads_koordlet_annotations")
    mode: Mode
    rules: ModeRules
    resolve: Callable[[Machine, NodePolicy], FamilyNode]
    #: a malformed ``kubelet.koordinator.sh/cpu-manager-policy`` node annotation is an error on
    #: this family's nodes (elsewhere nothing reads it)
    reads_koordlet_annotations: bool

    def __init__(
        self,
        mode: Mode,
        rules: ModeRules,
        resolve: Callable[[Machine, NodePolicy], FamilyNode],
        reads_koordlet_annotations: bool = False,
    ) -> None:
        set_field(self, "mode", mode)
        set_field(self, "rules", rules)
        set_field(self, "resolve", resolve)
        set_field(self, "reads_koordlet_annotations", reads_koordlet_annotations)


__all__ = ["Family", "FamilyNode", "ManagerStates", "NodePolicy"]
