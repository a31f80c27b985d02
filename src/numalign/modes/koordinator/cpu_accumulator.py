"""Koordinator's CPU accumulator: which CPUs a pod gets on a node, under its bind policy, its
exclusive policy and the node's NUMA allocate strategy.

Read upstream: koordinator-sh/koordinator ``pkg/scheduler/plugins/nodenumaresource``
(``cpu_accumulator.go``: ``takeCPUs``, ``takePreferredCPUs``; ``cpu_topology.go``;
``util.go``); its tests are transcribed in ``tests/test_koordinator_cpu_accumulator.py`` and
``tests/test_koordinator_cpu_refcount.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from numalign.memo import remember
from numalign.pods.annotations import BindPolicy, ExclusivePolicy
from numalign.resources.cpu_assignment import CpuInfo, CpuTopology

ERR_NOT_ENOUGH_CPUS = "not enough cpus available to satisfy request"
ERR_FAILED = "failed to allocate cpus"


class NumaAllocateStrategy(StrEnum):
    MOST_ALLOCATED = "MostAllocated"
    LEAST_ALLOCATED = "LeastAllocated"
    DISTRIBUTE_EVENLY = "DistributeEvenly"


class CpuAllocError(Exception):
    """The accumulator could not take the CPUs (Koordinator's error text)."""


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
    only when ``max_ref_count > 1``). Raises :class:`CpuAllocError`.

    A function of its arguments' contents alone: the CPUs taken are remembered per topology and
    contents (:data:`TAKEN_SIZE`), since nodes of one machine in different states often offer
    the same free CPUs on the NUMA node a pod gets (a scheduler plans a pod on many of them)."""
    avail = frozenset(available)
    key = (id(topo), avail, n, bind, exclusive, strategy, frozenset((allocated or {}).items()),
           frozenset((ref_counts or {}).items()) if max_ref_count > 1 else None, max_ref_count)
    hit = _TAKEN.get(key)
    if hit is not None and hit[0] is topo:
        return hit[1]
    out = _take_cpus(topo, avail, n, bind, exclusive, strategy, allocated, ref_counts, max_ref_count)
    remember(_TAKEN, key, (topo, out), TAKEN_SIZE)
    return out


#: :func:`take_cpus`'s answers by (topology identity, arguments' contents), with the topology (a
#: reused id never matches); cleared beyond :data:`TAKEN_SIZE` entries
_TAKEN: dict[Hashable, tuple[CpuTopology, frozenset[int]]] = {}
TAKEN_SIZE = 1 << 14


def _take_cpus(
    topo: CpuTopology,
    available: Iterable[int],
    n: int,
    bind: BindPolicy,
    exclusive: ExclusivePolicy,
    strategy: NumaAllocateStrategy,
    allocated: Mapping[int, ExclusivePolicy] | None,
    ref_counts: Mapping[int, int] | None,
    max_ref_count: int,
) -> frozenset[int]:
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


__all__ = [
    "ERR_FAILED",
    "ERR_NOT_ENOUGH_CPUS",
    "TAKEN_SIZE",
    "CpuAllocError",
    "CpuRefCounts",
    "NumaAllocateStrategy",
    "filter_required",
    "satisfies_required",
    "split_evenly",
    "take_cpus",
    "take_preferred_cpus",
]
