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

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from numalign.engine.bitmask import ids_of
from numalign.engine.hints import GeneratedHints, ProviderHints, TopologyHint
from numalign.engine.policies import Policy
from numalign.errors import UnexpectedAdmissionError
from numalign.machine.model import Machine
from numalign.machine.node_annotations import KubeletCpuPolicy, parse_kubelet_cpu_policy
from numalign.pods import Container, Pod, guaranteed_cpus, pod_guaranteed_cpus
from numalign.pods.annotations import BindPolicy, ExclusivePolicy, ResourceSpec, parse_enum
from numalign.resources.cpu import CpuManager
from numalign.resources.cpu_assignment import CpuInfo, CpuTopology
from numalign.resources.cpu_state import CpuState

NODE_CPU_BIND_POLICY_LABEL = "node.koordinator.sh/cpu-bind-policy"
NODE_NUMA_ALLOCATE_STRATEGY_LABEL = "node.koordinator.sh/numa-allocate-strategy"

ERR_NOT_ENOUGH_CPUS = "not enough cpus available to satisfy request"
ERR_FAILED = "failed to allocate cpus"
ERR_BIND_CONFLICT = "node(s) cpu bind policy conflicts with pod's required cpu bind policy"
ERR_SMT_ALIGNMENT = "node(s) requested cpus not multiple cpus per core"


class NumaAllocateStrategy(StrEnum):
    MOST_ALLOCATED = "MostAllocated"
    LEAST_ALLOCATED = "LeastAllocated"
    DISTRIBUTE_EVENLY = "DistributeEvenly"


class NodeBindPolicy(StrEnum):
    NONE = "None"
    FULL_PCPUS_ONLY = "FullPCPUsOnly"
    SPREAD_BY_PCPUS = "SpreadByPCPUs"


#: the plugin's defaults (``pkg/scheduler/apis/config/v1/defaults.go``)
DEFAULT_BIND_POLICY = BindPolicy.FULL_PCPUS
DEFAULT_NUMA_STRATEGY = NumaAllocateStrategy.LEAST_ALLOCATED


class CpuAllocError(Exception):
    """The accumulator could not take the CPUs (Koordinator's error text)."""


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


# ------------------------------------------------------------------------ the accumulator


def _most(strategy: NumaAllocateStrategy) -> bool:
    return strategy is NumaAllocateStrategy.MOST_ALLOCATED


def _free_key(count: int, strategy: NumaAllocateStrategy) -> int:
    """Sort key of a free count: fewest first under MostAllocated, most first otherwise."""
    return count if _most(strategy) else -count


class _Accumulator:
    def __init__(
        self,
        topo: CpuTopology,
        available: Iterable[int],
        allocated: Mapping[int, ExclusivePolicy],
        needed: int,
        exclusive: ExclusivePolicy,
        strategy: NumaAllocateStrategy,
        ref_counts: Mapping[int, int] | None = None,
        max_ref_count: int = 1,
    ) -> None:
        self.topo = topo
        self.d: Mapping[int, CpuInfo] = topo.details
        self.free: set[int] = {c for c in available if c in self.d}
        #: reference counts of the free CPUs; empty (all 0) unless ``max_ref_count > 1``
        self.ref: dict[int, int] = (
            {c: ref_counts.get(c, 0) for c in self.free} if max_ref_count > 1 and ref_counts else {})
        self.needed = needed
        self.policy = exclusive
        self.strategy = strategy
        self.result: set[int] = set()
        self.excl_cores = {self.d[c].core for c, p in allocated.items()
                           if p is ExclusivePolicy.PCPU_LEVEL and c in self.d}
        self.excl_numas = {self.d[c].numa for c, p in allocated.items()
                           if p is ExclusivePolicy.NUMA_NODE_LEVEL and c in self.d}
        per_core = topo.cpus_per_core
        self.per_core = per_core
        self.per_node = topo.num_cpus // topo.num_numa if topo.num_numa else 0
        self.per_socket = topo.cpus_per_socket

    # -- state
    def take(self, cpus: Sequence[int]) -> None:
        for c in cpus:
            self.result.add(c)
            self.free.discard(c)
            if self.policy is ExclusivePolicy.PCPU_LEVEL:
                self.excl_cores.add(self.d[c].core)
            elif self.policy is ExclusivePolicy.NUMA_NODE_LEVEL:
                self.excl_numas.add(self.d[c].numa)
        self.needed -= len(cpus)

    def needs(self, k: int) -> bool:
        return self.needed >= k

    def satisfied(self) -> bool:
        return self.needed < 1

    def _core_ref(self, core: int) -> int:
        """``getCoreRefCount``: the summed reference counts of the core's free CPUs."""
        if not self.ref:
            return 0
        return sum(self.ref.get(c, 0) for c in self.topo.cpus_in_core.get(core, ()) if c in self.free)

    def _by_ref(self, cpus: Iterable[int]) -> list[int]:
        """Ascending ids, then (``sortCPUsByRefCount``) the least-referenced first."""
        if not self.ref:
            return sorted(cpus)
        return sorted(cpus, key=lambda c: (self.ref.get(c, 0), c))

    def _pcpu_excl(self, c: int) -> bool:
        return self.policy is ExclusivePolicy.PCPU_LEVEL and self.d[c].core in self.excl_cores

    def _numa_excl(self, c: int) -> bool:
        return self.policy is ExclusivePolicy.NUMA_NODE_LEVEL and self.d[c].numa in self.excl_numas

    def _one_per_core(self, cpus: Iterable[int]) -> list[int]:
        seen: set[int] = set()
        out = []
        for c in cpus:
            core = self.d[c].core
            if core not in seen:
                seen.add(core)
                out.append(c)
        return out

    def take_first_fitting(
        self, groups: Iterable[list[int]], order: Callable[[Sequence[int]], list[int]] | None = None
    ) -> bool:
        """Take the first ``needed`` CPUs (in ``order``, else as listed) of the first group that
        holds that many; False when none does."""
        for cpus in groups:
            if len(cpus) >= self.needed:
                self.take((order(cpus) if order is not None else cpus)[: self.needed])
                return True
        return False

    def spread(self, cpus: Sequence[int]) -> list[int]:
        """One CPU per core per round, keeping the order within a round."""
        if len(cpus) <= self.per_core:
            return list(cpus)
        out: list[int] = []
        rest = list(cpus)
        while rest:
            seen: set[int] = set()
            later = []
            for c in rest:
                core = self.d[c].core
                if core in seen:
                    later.append(c)
                else:
                    seen.add(core)
                    out.append(c)
            rest = later
        return out

    def _cores(self, skip: Callable[[int], bool]) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {}
        for c in self.free:
            if not skip(c):
                out.setdefault(self.d[c].core, []).append(c)
        return out

    def _whole_cores(self, cores: Mapping[int, list[int]], full_only: bool, key: Callable[[CpuInfo], int]
                     ) -> dict[int, list[int]]:
        """Free cores grouped by ``key`` (NUMA node or socket), each group's CPUs listed core by
        core (fullest core first, then core id), ascending within a core."""
        groups: dict[int, list[int]] = {}
        for core, cpus in cores.items():
            if full_only and len(cpus) != self.per_core:
                continue
            groups.setdefault(key(self.d[cpus[0]]), []).append(core)
        return {
            g: [c for core in sorted(cs, key=lambda k: (-len(cores[k]), self._core_ref(k), k))
                for c in sorted(cores[core])]
            for g, cs in groups.items()
        }

    def free_cores_in_node(self, full_only: bool, filter_exclusive: bool) -> list[list[int]]:
        cores = self._cores(lambda c: filter_exclusive and self._numa_excl(c))
        socket_free: dict[int, int] = {}
        for cpus in cores.values():
            for c in cpus:
                s = self.d[c].socket
                socket_free[s] = socket_free.get(s, 0) + 1
        by_node = self._whole_cores(cores, full_only, lambda i: i.numa)

        def key(n: int) -> tuple[int, int, int]:
            sock = self.d[by_node[n][0]].socket
            return (_free_key(len(by_node[n]), self.strategy), _free_key(socket_free[sock], self.strategy), n)

        return [by_node[n] for n in sorted(by_node, key=key)]

    def free_cores_in_socket(self, full_only: bool) -> list[list[int]]:
        by_socket = self._whole_cores(self._cores(lambda c: False), full_only, lambda i: i.socket)
        order = sorted(by_socket, key=lambda s: (_free_key(len(by_socket[s]), self.strategy), s))
        return [by_socket[s] for s in order]

    def free_cpus_in_node(self, filter_exclusive: bool) -> list[list[int]]:
        by_node: dict[int, list[int]] = {}
        socket_free: dict[int, int] = {}
        for c in self.free:
            if filter_exclusive and (self._pcpu_excl(c) or self._numa_excl(c)):
                continue
            info = self.d[c]
            by_node.setdefault(info.numa, []).append(c)
            socket_free[info.socket] = socket_free.get(info.socket, 0) + 1
        node_free = {n: len(cpus) for n, cpus in by_node.items()}
        lists = {n: self._by_ref(cpus) for n, cpus in by_node.items()}
        if filter_exclusive:
            lists = {n: self._one_per_core(cpus) for n, cpus in lists.items()}

        def key(n: int) -> tuple[int, int, int]:
            sock = self.d[lists[n][0]].socket
            return (_free_key(node_free[n], self.strategy), _free_key(socket_free[sock], self.strategy), n)

        return [lists[n] for n in sorted(lists, key=key)]

    def free_cpus_in_socket(self, filter_exclusive: bool) -> list[list[int]]:
        by_socket: dict[int, list[int]] = {}
        for c in self.free:
            if filter_exclusive and self._pcpu_excl(c):
                continue
            by_socket.setdefault(self.d[c].socket, []).append(c)
        lists = {s: self._by_ref(cpus) for s, cpus in by_socket.items()}
        if filter_exclusive:
            lists = {s: self._one_per_core(cpus) for s, cpus in lists.items()}
        order = sorted(lists, key=lambda s: (_free_key(len(lists[s]), self.strategy), s))
        return [lists[s] for s in order]

    def free_cpus(self, filter_exclusive: bool) -> list[int]:
        cores = self._cores(lambda c: filter_exclusive and (self._pcpu_excl(c) or self._numa_excl(c)))
        node_free: dict[int, int] = {}
        socket_free: dict[int, int] = {}
        for cpus in cores.values():
            info = self.d[cpus[0]]
            node_free[info.numa] = node_free.get(info.numa, 0) + len(cpus)
            socket_free[info.socket] = socket_free.get(info.socket, 0) + len(cpus)
        colo = {s: len(self.topo.cpus_in_socket.get(s, frozenset()) & self.result) for s in socket_free}

        def key(core: int) -> tuple[int, int, int, int, int, int, int]:
            info = self.d[cores[core][0]]
            return (
                -colo[info.socket],
                _free_key(socket_free[info.socket], self.strategy),
                _free_key(node_free[info.numa], self.strategy),
                len(cores[core]),
                info.socket,
                self._core_ref(core),
                core,
            )

        return [c for core in sorted(cores, key=key) for c in self._by_ref(cores[core])]


def take_cpus(
    topo: CpuTopology,
    available: Iterable[int],
    n: int,
    bind: BindPolicy = BindPolicy.FULL_PCPUS,
    exclusive: ExclusivePolicy = ExclusivePolicy.NONE,
    strategy: NumaAllocateStrategy = NumaAllocateStrategy.MOST_ALLOCATED,
    allocated: Mapping[int, ExclusivePolicy] | None = None,
    ref_counts: Mapping[int, int] | None = None,
    max_ref_count: int = 1,
) -> frozenset[int]:
    """Koordinator ``takeCPUs``: ``n`` CPUs out of ``available``. ``allocated`` maps CPUs held by
    other pods to those pods' exclusive policy; ``ref_counts`` how many pods hold each CPU (read
    only when ``max_ref_count > 1``). Raises :class:`CpuAllocError`."""
    acc = _Accumulator(topo, available, allocated or {}, n, exclusive, strategy, ref_counts, max_ref_count)
    if acc.satisfied():
        return frozenset()
    if acc.needed > len(acc.free):
        raise CpuAllocError(ERR_NOT_ENOUGH_CPUS)
    full = bind is BindPolicy.FULL_PCPUS
    if full or acc.per_core == 1:
        if acc.needed <= acc.per_node and acc.take_first_fitting(
                c for fe in (True, False) for c in acc.free_cores_in_node(True, fe)):
            return frozenset(acc.result)
        if acc.needed <= acc.per_socket and acc.take_first_fitting(acc.free_cores_in_socket(True)):
            return frozenset(acc.result)
        left: list[list[int]] = []
        for cpus in sorted(acc.free_cores_in_socket(True), key=len, reverse=True):
            if not acc.needs(len(cpus)):
                left.append(cpus)
                continue
            acc.take(cpus)
            if acc.satisfied():
                return frozenset(acc.result)
        if acc.needs(acc.per_core):
            for cpus in sorted(left, key=len):
                for i in range(0, len(cpus), acc.per_core):
                    acc.take(cpus[i: i + acc.per_core])
                    if acc.satisfied():
                        return frozenset(acc.result)
                    if not acc.needs(acc.per_core):
                        break
    if not full:
        if acc.needed <= acc.per_node and acc.take_first_fitting(
                (c for fe in (True, False) for c in acc.free_cpus_in_node(fe)), acc.spread):
            return frozenset(acc.result)
        if acc.needed <= acc.per_socket and acc.take_first_fitting(
                (c for fe in (True, False) for c in acc.free_cpus_in_socket(fe)), acc.spread):
            return frozenset(acc.result)
    for fe in (True, False):
        for c in acc.spread(acc.free_cpus(fe)):
            if acc.needs(1):
                acc.take([c])
            if acc.satisfied():
                return frozenset(acc.result)
    raise CpuAllocError(ERR_FAILED)


def take_preferred_cpus(
    topo: CpuTopology,
    available: Iterable[int],
    preferred: Iterable[int],
    n: int,
    bind: BindPolicy = BindPolicy.FULL_PCPUS,
    exclusive: ExclusivePolicy = ExclusivePolicy.NONE,
    strategy: NumaAllocateStrategy = NumaAllocateStrategy.MOST_ALLOCATED,
    allocated: Mapping[int, ExclusivePolicy] | None = None,
    ref_counts: Mapping[int, int] | None = None,
    max_ref_count: int = 1,
) -> frozenset[int]:
    """Koordinator ``takePreferredCPUs``: as many as possible from ``preferred`` first."""
    avail = frozenset(available)
    pref = avail & frozenset(preferred)
    result: frozenset[int] = frozenset()
    if pref:
        result = take_cpus(topo, pref, min(n, len(pref)), bind, exclusive, strategy, allocated,
                           ref_counts, max_ref_count)
        n -= len(result)
        avail -= pref
    if n > 0:
        result |= take_cpus(topo, avail, n, bind, exclusive, strategy, allocated, ref_counts, max_ref_count)
    return result


# ------------------------------------------------------------------- CPUs held by pods


@dataclass
class CpuRefCounts:
    """The CPU part of Koordinator's ``NodeAllocation`` (``node_allocation.go``): the CPUs each
    pod holds with its exclusive policy; per CPU how many pods hold it and the exclusive policy
    of the last pod that took it (``addPodAllocation`` overwrites it; ``release`` only counts
    down)."""

    pods: dict[str, tuple[frozenset[int], ExclusivePolicy]] = field(default_factory=dict)
    refs: dict[int, int] = field(default_factory=dict)
    policy: dict[int, ExclusivePolicy] = field(default_factory=dict)

    def add(self, uid: str, cpus: Iterable[int], exclusive: ExclusivePolicy = ExclusivePolicy.NONE) -> None:
        """``addCPUs``: a pod already known is left as it is."""
        if uid in self.pods:
            return
        held = frozenset(cpus)
        self.pods[uid] = (held, exclusive)
        for c in held:
            self.refs[c] = self.refs.get(c, 0) + 1
            self.policy[c] = exclusive

    def release(self, uid: str) -> None:
        held, _ = self.pods.pop(uid, (frozenset(), ExclusivePolicy.NONE))
        for c in held:
            left = self.refs.get(c, 0) - 1
            if left > 0:
                self.refs[c] = left
            else:
                self.refs.pop(c, None)
                self.policy.pop(c, None)

    def available(
        self, all_cpus: Iterable[int], max_ref_count: int = 1, reserved: Iterable[int] = (),
        *preferred: Iterable[int],
    ) -> tuple[frozenset[int], dict[int, int], dict[int, ExclusivePolicy]]:
        """``getAvailableCPUs``: the CPUs fewer than ``max_ref_count`` pods hold, minus
        ``reserved``, with the reference counts and exclusive policies of the held CPUs. Each
        ``preferred`` set (a reservation or a preempted pod restoring its CPUs) gives one
        reference back per CPU."""
        refs = dict(self.refs)
        for cpus in preferred:
            for c in cpus:
                if c in refs:
                    refs[c] -= 1
                    if refs[c] == 0:
                        del refs[c]
        full = {c for c, k in refs.items() if k >= max_ref_count}
        free = frozenset(all_cpus) - full - frozenset(reserved)
        return free, refs, {c: self.policy[c] for c in refs}


# ------------------------------------------------------------------- required bind policies


def filter_required(policy: BindPolicy, cpus: Iterable[int], topo: CpuTopology) -> frozenset[int]:
    """Koordinator ``filterCPUsByRequiredCPUBindPolicy``: ``FullPCPUs`` keeps whole free cores,
    ``SpreadByPCPUs`` the lowest free CPU of each core; other policies keep everything."""
    pool = frozenset(c for c in cpus if c in topo.details)
    if policy not in (BindPolicy.FULL_PCPUS, BindPolicy.SPREAD_BY_PCPUS):
        return pool
    by_core: dict[int, list[int]] = {}
    for c in pool:
        by_core.setdefault(topo.details[c].core, []).append(c)
    if policy is BindPolicy.FULL_PCPUS:
        return frozenset(c for cs in by_core.values() if len(cs) == topo.cpus_per_core for c in cs)
    return frozenset(min(cs) for cs in by_core.values())


def satisfies_required(policy: BindPolicy, cpus: Iterable[int], topo: CpuTopology) -> bool:
    """Koordinator ``satisfiedRequiredCPUBindPolicy``."""
    got = [c for c in cpus if c in topo.details]
    cores = {topo.details[c].core for c in got}
    if policy is BindPolicy.FULL_PCPUS:
        return len(cores) * topo.cpus_per_core == len(got)
    if policy is BindPolicy.SPREAD_BY_PCPUS:
        return len(cores) == len(got)
    return True


def split_evenly(
    n: int,
    nodes: Sequence[int],
    available: Mapping[int, int],
    whole_cores_of: int = 0,
) -> dict[int, int]:
    """Koordinator ``tryBestToDistributeEvenly`` for the CPU count: NUMA node by NUMA node, each
    takes ``remaining // nodes left`` (whole cores of ``whole_cores_of`` CPUs under a required
    ``FullPCPUs``), capped by its available CPUs. The order is upstream's: Go's ``sort.Slice``
    over the hint's node ids comparing ``available[i] < available[j]`` by *position* ``i``, ``j``
    (so it sorts by availability only when the hint is NUMA nodes ``0..k-1``)."""
    order = list(nodes)
    for i in range(1, len(order)):  # Go's insertion sort (sort.Slice below 13 elements)
        j = i
        while j > 0 and available.get(j, 0) < available.get(j - 1, 0):
            order[j], order[j - 1] = order[j - 1], order[j]
            j -= 1
    out: dict[int, int] = {}
    remaining = n
    for i, node in enumerate(order):
        parts = len(order) - i
        if whole_cores_of:
            share = (remaining // whole_cores_of) // parts * whole_cores_of
        else:
            share = remaining // parts
        got = min(share, available.get(node, 0))
        if got > 0:
            out[node] = got
            remaining -= got
    return out


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
    "ERR_FAILED",
    "ERR_NOT_ENOUGH_CPUS",
    "ERR_SMT_ALIGNMENT",
    "NODE_CPU_BIND_POLICY_LABEL",
    "NODE_NUMA_ALLOCATE_STRATEGY_LABEL",
    "BindChoice",
    "CpuAllocError",
    "CpuRefCounts",
    "KoordinatorCpuManager",
    "NodeBindPolicy",
    "NumaAllocateStrategy",
    "cpu_bind_choice",
    "filter_required",
    "node_bind_policy",
    "numa_allocate_strategy",
    "satisfies_required",
    "split_evenly",
    "take_cpus",
    "take_preferred_cpus",
]
