"""Koordinator's CPU allocator: bind policies, CPU exclusive policies and the NUMA allocate strategy.

Read from koordinator-sh/koordinator (written anew here, not copied):

* ``pkg/scheduler/plugins/nodenumaresource/cpu_accumulator.go`` - ``takeCPUs`` /
  ``takePreferredCPUs`` (:func:`take_cpus`, :func:`take_preferred_cpus`):

  - ``FullPCPUs`` (or one CPU per core): whole free cores from the first NUMA node that holds
    them all (NUMA nodes ordered by free CPUs - fewest first under ``MostAllocated``, most first
    under ``LeastAllocated`` - then by the socket's free CPUs, then by id; first skipping NUMA
    nodes held ``NUMANodeLevel``-exclusive), else from the first such socket, else whole cores
    from the sockets with the most free cores, then core by core from the fullest remaining;
  - ``SpreadByPCPUs``: one CPU per physical core first (``0,2`` on a 2-thread core machine, never
    the siblings ``0,1``) from the first NUMA node (then socket) in the same order that has
    enough, then the siblings, round-robin over cores;
  - the rest: CPUs in order of socket co-location with what was already taken, the socket's
    and the NUMA node's free CPUs (by strategy), the core's free CPUs (fewest first), socket,
    core; spread one per core per round.

  ``maxRefCount`` (how many pods may hold one CPU; ``TopologyOptions.MaxRefCount``, 1 unless
  an out-of-tree plugin raises it - no in-tree code does at ``a7a1b76b``): with more than 1,
  the CPUs of ``available`` may already be held ``ref_counts[c]`` times; whole cores are then
  ordered by their free CPUs' summed reference counts (after size), CPUs inside a NUMA node,
  socket or core by their own count (then id), and ``freeCPUs`` puts less-referenced cores
  first after the socket (``getCoreRefCount``, ``sortCPUsByRefCount``). Which CPUs are
  available at all is :class:`CpuRefCounts`' job (``node_allocation.go`` ``getAvailableCPUs``:
  a CPU is available while fewer than ``maxRefCount`` pods hold it).
* ``resource_manager.go`` - ``filterCPUsByRequiredCPUBindPolicy`` (a *required* policy keeps only
  whole free cores, or one CPU per core), ``satisfiedRequiredCPUBindPolicy`` and the even split of
  the CPUs over a hint's NUMA nodes (``tryBestToDistributeEvenly`` / ``splitQuantity``,
  :func:`split_evenly`).
* ``apis/extension/numa_aware.go`` - the pod annotation ``scheduling.koordinator.sh/resource-spec``
  (``requiredCPUBindPolicy``, ``preferredCPUBindPolicy``, ``preferredCPUExclusivePolicy``) and the
  node labels ``node.koordinator.sh/cpu-bind-policy`` (``FullPCPUsOnly`` / ``SpreadByPCPUs``,
  required on that node) and ``node.koordinator.sh/numa-allocate-strategy``.
* ``plugin.go`` / ``util.go`` - the policy a pod gets (:func:`cpu_bind_choice`): ``Default`` or no
  preferred policy means the plugin's ``defaultCPUBindPolicy`` (``FullPCPUs``); a required
  policy wins; a node policy makes its policy required and conflicts with a different required
  one ("node(s) cpu bind policy conflicts with pod's required cpu bind policy"); a required
  ``FullPCPUs`` needs a multiple of the CPUs per core ("node(s) requested cpus not multiple cpus
  per core"). The NUMA allocate strategy is the node label, else the plugin default
  ``LeastAllocated`` (``MostAllocated`` when the plugin's ``numaScoringStrategy`` is).

Upstream has no ``ConstraintSpreadByPCPUs`` policy (only ``Default``, ``FullPCPUs``,
``SpreadByPCPUs`` and ``ConstrainedBurst``, the latter about shared pools, not cpusets).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from numalign.engine.bitmask import ids_of
from numalign.engine.hints import GeneratedHints, ProviderHints, TopologyHint
from numalign.engine.policies import Policy
from numalign.errors import UnexpectedAdmissionError
from numalign.machine.model import Machine
from numalign.machine.node_annotations import KubeletCpuPolicy, parse_kubelet_cpu_policy
from numalign.modes.koordinator.cpu_accumulator import (
    ERR_NOT_ENOUGH_CPUS,
    CpuAllocError,
    NumaAllocateStrategy,
    filter_required,
    satisfies_required,
    split_evenly,
    take_preferred_cpus,
)
from numalign.pods import Container, Pod, guaranteed_cpus, pod_guaranteed_cpus
from numalign.pods.annotations import BindPolicy, ExclusivePolicy, ResourceSpec, parse_enum
from numalign.resources.cpu import CpuManager
from numalign.resources.cpu_state import CpuState

NODE_CPU_BIND_POLICY_LABEL = "node.koordinator.sh/cpu-bind-policy"
NODE_NUMA_ALLOCATE_STRATEGY_LABEL = "node.koordinator.sh/numa-allocate-strategy"

ERR_BIND_CONFLICT = "node(s) cpu bind policy conflicts with pod's required cpu bind policy"
ERR_SMT_ALIGNMENT = "node(s) requested cpus not multiple cpus per core"


class NodeBindPolicy(StrEnum):
    NONE = "None"
    FULL_PCPUS_ONLY = "FullPCPUsOnly"
    SPREAD_BY_PCPUS = "SpreadByPCPUs"


#: the plugin's defaults (``pkg/scheduler/apis/config/v1/defaults.go``)
DEFAULT_BIND_POLICY = BindPolicy.FULL_PCPUS
DEFAULT_NUMA_STRATEGY = NumaAllocateStrategy.LEAST_ALLOCATED


# ------------------------------------------------------------------ annotations and labels


def node_bind_policy(labels: Mapping[str, str], kubelet_full_pcpus_only: bool = False) -> NodeBindPolicy:
    """Koordinator ``GetNodeCPUBindPolicy``: the label, or ``FullPCPUsOnly`` when the kubelet
    runs the static policy with ``full-pcpus-only``; unknown label values count as ``None``."""
    raw = labels.get(NODE_CPU_BIND_POLICY_LABEL, "")
    if raw == NodeBindPolicy.FULL_PCPUS_ONLY or kubelet_full_pcpus_only:
        return NodeBindPolicy.FULL_PCPUS_ONLY
    if raw == NodeBindPolicy.SPREAD_BY_PCPUS:
        return NodeBindPolicy.SPREAD_BY_PCPUS
    return NodeBindPolicy.NONE


def numa_allocate_strategy(
    labels: Mapping[str, str], default: NumaAllocateStrategy = DEFAULT_NUMA_STRATEGY
) -> NumaAllocateStrategy:
    """Koordinator ``GetNUMAAllocateStrategy``: the node label when set, else the default."""
    raw = labels.get(NODE_NUMA_ALLOCATE_STRATEGY_LABEL, "")
    if not raw:
        return default
    value = parse_enum(NumaAllocateStrategy, raw, f"labels[{NODE_NUMA_ALLOCATE_STRATEGY_LABEL}]")
    return default if value is None else value


@dataclass(frozen=True)
class BindChoice:
    """The bind policy a pod gets on a node, whether it is required, and its exclusive policy."""

    policy: BindPolicy
    required: bool
    exclusive: ExclusivePolicy = ExclusivePolicy.NONE


def cpu_bind_choice(
    spec: ResourceSpec,
    node_policy: NodeBindPolicy,
    cpus: int,
    cpus_per_core: int,
    default: BindPolicy = DEFAULT_BIND_POLICY,
) -> BindChoice:
    """The plugin's PreFilter + Filter + ``getCPUBindPolicy`` for a pod that binds ``cpus`` whole
    CPUs. Raises :class:`CpuAllocError` with Koordinator's filter messages."""
    preferred = spec.preferred
    if preferred is None or preferred is BindPolicy.DEFAULT:
        preferred = default
    required = spec.required
    if required is BindPolicy.DEFAULT:
        required = default
    policy = required or preferred
    node_required = {
        NodeBindPolicy.FULL_PCPUS_ONLY: BindPolicy.FULL_PCPUS,
        NodeBindPolicy.SPREAD_BY_PCPUS: BindPolicy.SPREAD_BY_PCPUS,
    }.get(node_policy)
    if node_required is not None:
        if required is not None and required is not node_required:
            raise CpuAllocError(ERR_BIND_CONFLICT)
        required, policy = node_required, node_required
    if required is BindPolicy.FULL_PCPUS and cpus_per_core and cpus % cpus_per_core:
        raise CpuAllocError(ERR_SMT_ALIGNMENT)
    return BindChoice(policy, required is not None, spec.exclusive or ExclusivePolicy.NONE)


# ----------------------------------------------------------- the provider of the koordinator mode


def _min_feasible_size(gen: GeneratedHints, universe: int) -> int:
    """The fewest NUMA nodes of a feasible mask inside ``universe`` (greedy on the demand: the
    nodes it must touch, then the nodes with the most free CPUs)."""
    if gen.demand is None or len(gen.demand.dims) != 1:
        sizes = [m.bit_count() for m in gen.masks() if m & ~universe == 0]
        return min(sizes, default=universe.bit_count())
    demand = gen.demand
    mask = 0
    for t in demand.touch:
        mask |= t
    items = sorted(((v, m) for m, v in demand.dims[0] if m & universe and not m & mask), reverse=True)
    for _, m in items:
        if demand.feasible(mask):
            break
        mask |= m
    return mask.bit_count()


class KoordinatorCpuManager(CpuManager):
    """The CPU provider of the ``koordinator`` engine mode: the kubelet CPU manager's bookkeeping
    (who gets exclusive CPUs, the shared pool, reusable init CPUs) with Koordinator's rules for
    hints and CPU choice:

    * **hints** (``resource_manager.go`` ``generateResourceHints``): a mask touching a NUMA node
      without free CPUs is no hint; preferred = the fewest NUMA nodes of a hint *now* (not on an
      empty machine), every hint under ``Restricted``; a required bind policy counts only the CPUs
      it may take (``trimNUMANodeResources``);
    * **allocation** (``allocateCPUSet``): the CPUs are split evenly over the hint's NUMA nodes and
      taken per NUMA node by :func:`take_preferred_cpus` with the pod's bind policy, exclusive
      policy and the node's NUMA allocate strategy (init-container CPUs preferred), avoiding the
      cores / NUMA nodes of CPUs other pods hold under the same exclusive policy; a required
      policy is checked on the result. A pod with ``preferredCPUExclusivePolicy`` ``PCPULevel``
      or ``NUMANodeLevel`` has it recorded in the CPU state (``CpuState.exclusive``, persisted
      with the node state) for as long as it holds CPUs.

    ``labels`` are the node's (``cpu-bind-policy``, ``numa-allocate-strategy``); the machine's
    ``kubelet.koordinator.sh/cpu-manager-policy`` annotation (:func:`parse_kubelet_cpu_policy`)
    makes the node ``FullPCPUsOnly`` with ``full-pcpus-only: "true"`` and keeps its
    ``reservedCPUs`` out of every cpuset; ``policy_of`` gives the Topology Manager policy a pod
    gets on this node (for ``Restricted``).
    """

    def __init__(
        self,
        machine: Machine,
        state: CpuState | None = None,
        *,
        reserved: Iterable[int] | None = None,
        policy_of: Callable[[Pod], Policy] | None = None,
        kubelet: KubeletCpuPolicy | None = None,
    ) -> None:
        super().__init__(machine, state, reserved=reserved)
        labels = machine.labels
        if kubelet is None:
            kubelet = parse_kubelet_cpu_policy(machine.annotations)
        #: the kubelet's reserved CPUs koordlet reports are never bound (``ReservedCPUs``)
        extra = kubelet.reserved_cpus & self.topology.all_cpus
        if extra - self.reserved:
            self.reserved = self.reserved | extra
            self.reserved_physical = self.topology.siblings(self.reserved)
        self.node_bind = node_bind_policy(labels, self.options.full_pcpus_only or kubelet.full_pcpus_only)
        self.strategy = numa_allocate_strategy(labels)
        self.policy_of = policy_of
        self._pod: Pod | None = None

    def bind_choice(self, pod: Pod, cpus: int) -> BindChoice:
        """The bind policy ``pod`` gets here; raises UnexpectedAdmissionError on a conflict."""
        try:
            return cpu_bind_choice(pod.koordinator_resource_spec, self.node_bind, cpus, self.topology.cpus_per_core)
        except CpuAllocError as e:
            raise UnexpectedAdmissionError(str(e)) from None

    def _choice(self, n: int) -> BindChoice:
        if self._pod is None:
            return BindChoice(DEFAULT_BIND_POLICY, False)
        return self.bind_choice(self._pod, n)

    # -- hints
    def container_hints(self, pod: Pod, container: Container) -> ProviderHints:
        self._pod = pod
        return super().container_hints(pod, container)

    def pod_hints(self, pod: Pod) -> ProviderHints:
        self._pod = pod
        return super().pod_hints(pod)

    def hint_set(
        self, available: Iterable[int], reusable: Iterable[int], n: int
    ) -> GeneratedHints | list[TopologyHint]:
        choice = self._choice(n)
        pool = frozenset(available)
        if choice.required:
            pool = filter_required(choice.policy, pool, self.topology)
        reuse = frozenset(reusable)
        gen = super().hint_set(pool, reuse, n)
        if not isinstance(gen, GeneratedHints):
            return gen
        d = self.topology.details
        with_cpus = 0
        for c in pool | reuse:  # the pod's reusable (init) CPUs count as free for it
            if c in d:
                with_cpus |= 1 << d[c].numa
        universe = gen.universe & with_cpus
        if not universe or not gen.feasible(universe):
            return []
        restricted = self._pod is not None and self.policy_of is not None and (
            self.policy_of(self._pod) is Policy.RESTRICTED)
        return GeneratedHints(
            nodes=gen.nodes,
            universe=universe,
            feasible=gen.feasible,
            preferred_size=_min_feasible_size(gen, universe),
            is_preferred=(lambda m: True) if restricted else None,
            demand=gen.demand,
        )

    # -- allocation
    def allocate(self, pod: Pod, container: Container, hint: TopologyHint) -> None:
        self._pod = pod
        binds = self.static and guaranteed_cpus(pod, container) > 0
        choice = self.bind_choice(pod, pod_guaranteed_cpus(pod)) if binds else None  # conflicts refuse first
        super().allocate(pod, container, hint)
        if choice is not None and choice.exclusive is not ExclusivePolicy.NONE:
            # Koordinator's PodAllocation.CPUExclusivePolicy: later pods avoid these CPUs' cores
            # (PCPULevel) or NUMA nodes (NUMANodeLevel) while the pod holds them
            self.state.hold_exclusive(pod.uid, choice.exclusive.value)

    def held_exclusive(self) -> dict[int, ExclusivePolicy]:
        """The CPUs other pods hold under an exclusive policy (``allocatedCPUs``)."""
        return {c: ExclusivePolicy(p) for c, p in self.state.exclusive_cpus().items()}

    def allocate_cpus(
        self, n: int, affinity: int | None, reusable: Iterable[int] = ()
    ) -> frozenset[int]:
        choice = self._choice(n)
        reuse = frozenset(reusable)
        pool = self.available_cpus() | reuse
        topo = self.topology
        if choice.required:
            pool = filter_required(choice.policy, pool, topo)
        if len(pool) < n:
            raise UnexpectedAdmissionError(ERR_NOT_ENOUGH_CPUS)

        held = self.held_exclusive()

        def take(cpus: frozenset[int], k: int) -> frozenset[int]:
            return take_preferred_cpus(topo, cpus, reuse, k, choice.policy, choice.exclusive, self.strategy, held)

        result: frozenset[int] = frozenset()
        try:
            if affinity is not None:
                nodes = ids_of(affinity)
                in_node = {i: pool & topo.cpus_in_numa.get(i, frozenset()) for i in nodes}
                whole = topo.cpus_per_core if choice.required and choice.policy is BindPolicy.FULL_PCPUS else 0
                share = split_evenly(n, nodes, {i: len(c) for i, c in in_node.items()}, whole)
                for i in sorted(share):
                    result |= take(in_node[i] - result, share[i])
            if n > len(result):  # outside the hint (best-effort): the kubelet's fallback
                result |= take(pool - result, n - len(result))
        except CpuAllocError as e:
            raise UnexpectedAdmissionError(str(e)) from None
        if choice.required and not satisfies_required(choice.policy, result, topo):
            raise UnexpectedAdmissionError(
                f"insufficient CPUs to satisfy required cpu bind policy {choice.policy.value}")
        return result


__all__ = [
    "DEFAULT_BIND_POLICY",
    "DEFAULT_NUMA_STRATEGY",
    "ERR_BIND_CONFLICT",
    "ERR_SMT_ALIGNMENT",
    "NODE_CPU_BIND_POLICY_LABEL",
    "NODE_NUMA_ALLOCATE_STRATEGY_LABEL",
    "BindChoice",
    "KoordinatorCpuManager",
    "NodeBindPolicy",
    "cpu_bind_choice",
    "node_bind_policy",
    "numa_allocate_strategy",
]
