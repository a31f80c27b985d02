"""The kubelet's CPU assignment algorithms (``cpumanager/cpu_assignment.go``), re-implemented.

Pure functions over a :class:`CpuTopology` (the kubelet's ``topology.CPUTopology``): which CPUs
to hand out for a request of ``n`` CPUs out of a set of available CPUs.

* :func:`take_packed` - ``takeByTopologyNUMAPacked``: whole NUMA nodes / sockets first (the
  bigger unit first), then (option ``prefer-align-cpus-by-uncorecache``) whole and partial
  uncore caches, then whole cores (skipped with the ``spread`` sorting of
  ``distribute-cpus-across-cores``), then single CPUs, always from the most used element
  first (fewest free CPUs, then lowest id).
* :func:`take_distributed` - ``takeByTopologyNUMADistributed`` (KEP-2902,
  ``distribute-cpus-across-numa``): spread the request evenly over the fewest NUMA nodes that
  can hold it, choosing the combination that leaves the free CPUs of the machine most balanced
  (standard deviation rounded to 3 decimals, as the kubelet does).

Both raise :class:`CpuAssignmentError` with the kubelet's error text when the request cannot
be met. One deliberate deviation: on asymmetric topologies the kubelet can hand out a "whole"
socket or core that includes CPUs outside the available set (its free test uses per-unit
averages); numalign never returns unavailable CPUs (see ``_Accumulator._take_full``). The semantics follow ``spec/kubelet.md`` section 3.6 and the newest upstream
behaviour (ceil-based partial uncore-cache claim with the odd-request rule; remainder
subsets counted in whole CPU groups).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from enum import StrEnum
from functools import cached_property
from itertools import combinations
from typing import Literal

from numalign.machine.model import Machine
from numalign.record import Record, set_field

__all__ = [
    "CpuAssignmentError",
    "CpuInfo",
    "CpuSorting",
    "CpuTopology",
    "go_round3",
    "standard_deviation",
    "take_by_topology",
    "take_distributed",
    "take_packed",
]


class CpuAssignmentError(Exception):
    """A request the assignment algorithm cannot satisfy; ``str()`` is the kubelet's text."""


class CpuSorting(StrEnum):
    """``CPUSortingStrategy``: ``packed`` (default) or ``spread`` (distribute-cpus-across-cores)."""

    PACKED = "packed"
    SPREAD = "spread"


class CpuInfo(Record, frozen=True):
    """Where one logical CPU sits (kubelet ``topology.CPUInfo``)."""

    __slots__ = ("core", "socket", "numa", "uncore")
    core: int
    socket: int
    numa: int
    uncore: int

    def __init__(self, core: int, socket: int, numa: int, uncore: int) -> None:
        set_field(self, "core", core)
        set_field(self, "socket", socket)
        set_field(self, "numa", numa)
        set_field(self, "uncore", uncore)


def _group(
    details: Mapping[int, CpuInfo], key: Callable[[CpuInfo], int]
) -> dict[int, frozenset[int]]:
    out: dict[int, set[int]] = {}
    for cpu, info in details.items():
        out.setdefault(key(info), set()).add(cpu)
    return {k: frozenset(v) for k, v in out.items()}


#: the levels of the CPU hierarchy the accumulator counts free CPUs at
Level = Literal["core", "socket", "numa", "uncore"]
CORE: Level = "core"
SOCKET: Level = "socket"
NUMA: Level = "numa"
UNCORE: Level = "uncore"

_TOPOLOGY_CACHE_SIZE = 4096
_TOPOLOGY_CACHE: dict[int, tuple[Machine, CpuTopology]] = {}


class CpuTopology:
    """The kubelet's ``CPUTopology``: per-CPU details plus the per-unit averages it uses.

    ``cpus_per_core`` / ``cpus_per_socket`` / ``cpus_per_uncore`` are the kubelet's integer
    averages (``NumCPUs / NumCores`` ...), not per-element sizes: a socket is "free" when its
    free CPU count equals ``cpus_per_socket``, as upstream.
    """

    def __init__(self, details: Mapping[int, CpuInfo], num_sockets: int | None = None) -> None:
        self.details: Mapping[int, CpuInfo] = dict(details)
        self.all_cpus: frozenset[int] = frozenset(self.details)
        self.cpus_in_core = _group(self.details, lambda i: i.core)
        self.cpus_in_socket = _group(self.details, lambda i: i.socket)
        self.cpus_in_numa = _group(self.details, lambda i: i.numa)
        self.cpus_in_uncore = _group(self.details, lambda i: i.uncore)
        self.num_cpus = len(self.details)
        self.num_cores = len(self.cpus_in_core)
        self.num_sockets = len(self.cpus_in_socket) if num_sockets is None else num_sockets
        self.num_numa = len(self.cpus_in_numa)
        self.num_uncore = len(self.cpus_in_uncore)

    @classmethod
    def from_machine(cls, machine: Machine) -> CpuTopology:
        """The CPU topology the kubelet discovers (online CPUs only).

        A CPU without an uncore-cache id uses its socket id, as the kubelet does when cAdvisor
        reports no uncore cache for a core. Topologies are immutable and cached per machine
        object (the scheduler and the node build providers for every admission).
        """
        hit = _TOPOLOGY_CACHE.get(id(machine))
        if hit is not None and hit[0] is machine:
            return hit[1]
        details = {
            c.id: CpuInfo(
                c.core, c.socket, c.numa, c.socket if c.uncore_cache is None else c.uncore_cache
            )
            for c in machine.online_cpus
        }
        topo = cls(details)
        if len(_TOPOLOGY_CACHE) >= _TOPOLOGY_CACHE_SIZE:
            _TOPOLOGY_CACHE.pop(next(iter(_TOPOLOGY_CACHE)))
        _TOPOLOGY_CACHE[id(machine)] = (machine, topo)
        return topo

    @property
    def cpus_per_core(self) -> int:
        return self.num_cpus // self.num_cores if self.num_cores else 0

    @property
    def cpus_per_socket(self) -> int:
        return self.num_cpus // self.num_sockets if self.num_sockets else 0

    @property
    def cpus_per_uncore(self) -> int:
        return self.num_cpus // self.num_uncore if self.num_uncore else 0

    def groups(self, level: Level) -> Mapping[int, frozenset[int]]:
        """The CPUs of each element (core, socket, NUMA node, uncore cache) of ``level``."""
        return self._groups[level]

    def element_of(self, level: Level) -> Mapping[int, int]:
        """CPU -> the id of its element at ``level``."""
        return self._element_of[level]

    @cached_property
    def _groups(self) -> dict[Level, Mapping[int, frozenset[int]]]:
        return {CORE: self.cpus_in_core, SOCKET: self.cpus_in_socket, NUMA: self.cpus_in_numa,
                UNCORE: self.cpus_in_uncore}

    @cached_property
    def _element_of(self) -> dict[Level, dict[int, int]]:
        d = self.details
        return {
            CORE: {c: i.core for c, i in d.items()},
            SOCKET: {c: i.socket for c, i in d.items()},
            NUMA: {c: i.numa for c, i in d.items()},
            UNCORE: {c: i.uncore for c, i in d.items()},
        }

    @cached_property
    def numa_ids(self) -> tuple[int, ...]:
        """NUMA nodes that have CPUs, ascending (kubelet ``CPUDetails.NUMANodes()``)."""
        return tuple(sorted(self.cpus_in_numa))

    def sockets_of_numas(self, numas: Iterable[int]) -> frozenset[int]:
        """``CPUDetails.SocketsInNUMANodes``."""
        out: set[int] = set()
        for n in numas:
            out.update(self.details[c].socket for c in self.cpus_in_numa.get(n, ()))
        return frozenset(out)

    def cpus_of_numas(self, numas: Iterable[int]) -> frozenset[int]:
        out: set[int] = set()
        for n in numas:
            out |= self.cpus_in_numa.get(n, frozenset())
        return frozenset(out)

    def cpus_of_sockets(self, sockets: Iterable[int]) -> frozenset[int]:
        out: set[int] = set()
        for s in sockets:
            out |= self.cpus_in_socket.get(s, frozenset())
        return frozenset(out)

    def siblings(self, cpus: Iterable[int]) -> frozenset[int]:
        """All SMT siblings of ``cpus`` (their whole cores)."""
        out: set[int] = set()
        for c in cpus:
            info = self.details.get(c)
            if info is not None:
                out |= self.cpus_in_core[info.core]
        return frozenset(out)


# --------------------------------------------------------------------------------------------
# Go rounding and the balance score
# --------------------------------------------------------------------------------------------


def go_round3(x: float) -> float:
    """Go's ``math.Round(x*1000) / 1000`` (half away from zero, computed exactly)."""
    y = x * 1000
    t = float(math.trunc(y))
    if abs(y - t) >= 0.5:
        t += math.copysign(1.0, y)
    return t / 1000


def standard_deviation(xs: Sequence[int]) -> float:
    """The kubelet's balance score: population stddev with a 3-decimal rounded mean."""
    m = go_round3(math.fsum(float(x) for x in xs) / len(xs))
    s = math.sqrt(math.fsum((x - m) * (x - m) for x in xs) / len(xs))
    return go_round3(s)


# --------------------------------------------------------------------------------------------
# The accumulator
# --------------------------------------------------------------------------------------------


def _sorted_by_free(ids: Iterable[int], free: Mapping[int, int]) -> list[int]:
    """kubelet ``sort``: ascending number of free CPUs, then ascending id."""
    return sorted(ids, key=lambda i: (free.get(i, 0), i))


class _Accumulator:
    """kubelet ``cpuAccumulator``: the free CPUs (``details``), the result and what is needed."""

    def __init__(
        self, topo: CpuTopology, available: Iterable[int], n: int, sorting: CpuSorting
    ) -> None:
        self.topo = topo
        self.free: set[int] = set(available) & topo.all_cpus
        self.need = n
        self.result: set[int] = set()
        self.sorting = sorting
        self.numa_first = topo.num_sockets >= topo.num_numa

    # -- state ----------------------------------------------------------------------------
    def take(self, cpus: Iterable[int]) -> None:
        cpus = frozenset(cpus)
        self.result |= cpus
        self.free -= self.result
        self.need -= len(cpus)

    def needs(self, k: int) -> bool:
        return self.need >= k

    def satisfied(self) -> bool:
        return self.need < 1

    def failed(self) -> bool:
        return self.need > len(self.free)

    # -- free counts ----------------------------------------------------------------------
    def _count(self, level: Level) -> dict[int, int]:
        """Free CPUs per element of ``level`` (elements with none are left out, as the
        kubelet's map of counts has no entry for them)."""
        groups = self.topo.groups(level)
        free = self.free
        out: dict[int, int] = {}
        if 4 * len(groups) <= len(free):
            for k, cpus in groups.items():
                n = len(free & cpus)
                if n:
                    out[k] = n
            return out
        of = self.topo.element_of(level)
        get = out.get
        for c in free:
            k = of[c]
            out[k] = get(k, 0) + 1
        return out

    def _members(self, level: Level, within: Level, outer: int) -> set[int]:
        """Ids (at ``level``) of free CPUs whose ``within`` element is ``outer``."""
        inside = self.free & self.topo.groups(within).get(outer, frozenset())
        return set(map(self.topo.element_of(level).__getitem__, inside))

    # -- orders (numaOrSocketsFirst) ------------------------------------------------------
    def sort_numas(self) -> list[int]:
        free_numa = self._count(NUMA)
        if self.numa_first:
            return _sorted_by_free(free_numa, free_numa)
        out: list[int] = []
        for socket in self.sort_sockets():
            out += _sorted_by_free(
                self._members(NUMA, SOCKET, socket), free_numa
            )
        return out

    def sort_sockets(self) -> list[int]:
        free_socket = self._count(SOCKET)
        if not self.numa_first:
            return _sorted_by_free(free_socket, free_socket)
        out: list[int] = []
        for numa in self.sort_numas():
            out += _sorted_by_free(
                self._members(SOCKET, NUMA, numa), free_socket
            )
        return out

    def sort_cores(self) -> list[int]:
        free_core = self._count(CORE)
        out: list[int] = []
        if self.numa_first:
            for socket in self.sort_sockets():
                out += _sorted_by_free(
                    self._members(CORE, SOCKET, socket), free_core
                )
        else:
            for numa in self.sort_numas():
                out += _sorted_by_free(
                    self._members(CORE, NUMA, numa), free_core
                )
        return out

    def sort_uncores(self) -> list[int]:
        free_uncore = self._count(UNCORE)
        out: list[int] = []
        for numa in self.sort_numas():
            out += _sorted_by_free(
                self._members(UNCORE, NUMA, numa), free_uncore
            )
        return out

    def sort_cpus(self) -> list[int]:
        """Free CPUs in take order: per core (packed) or per socket (spread), ids ascending."""
        out: list[int] = []
        if self.sorting is CpuSorting.SPREAD:
            for socket in self.sort_sockets():
                out += sorted(self.free & self.topo.cpus_in_socket[socket])
        else:
            for core in self.sort_cores():
                out += sorted(self.free & self.topo.cpus_in_core[core])
        return out

    # -- "free" (wholly available) elements -----------------------------------------------
    def free_numas(self) -> list[int]:
        t = self.topo
        return [
            n
            for n in self.sort_numas()
            if len(self.free & t.cpus_in_numa[n]) == len(t.cpus_in_numa[n])
        ]

    def free_sockets(self) -> list[int]:
        t = self.topo
        return [
            s
            for s in self.sort_sockets()
            if len(self.free & t.cpus_in_socket[s]) == t.cpus_per_socket
        ]

    def free_cores(self) -> list[int]:
        t = self.topo
        return [
            c for c in self.sort_cores() if len(self.free & t.cpus_in_core[c]) == t.cpus_per_core
        ]

    def free_uncores(self) -> list[int]:
        t = self.topo
        return [
            u
            for u in self.sort_uncores()
            if len(self.free & t.cpus_in_uncore[u]) == len(t.cpus_in_uncore[u])
        ]

    # -- take steps -----------------------------------------------------------------------
    def _take_full(self, ids: list[int], members: Mapping[int, frozenset[int]]) -> None:
        for x in ids:
            cpus = members[x]
            if not self.needs(len(cpus)):
                continue
            # The kubelet takes the element's whole CPU set here. On asymmetric machines
            # (offline CPUs, hybrid cores) its "free" test compares against an average
            # (CPUsPerSocket, CPUsPerCore) and that set can hold CPUs that are not available -
            # already assigned to another container. numalign takes only the available ones;
            # on every symmetric machine both are the same set.
            self.take(cpus & self.free)

    def take_full_numas(self) -> None:
        self._take_full(self.free_numas(), self.topo.cpus_in_numa)

    def take_full_sockets(self) -> None:
        self._take_full(self.free_sockets(), self.topo.cpus_in_socket)

    def take_full_cores(self) -> None:
        self._take_full(self.free_cores(), self.topo.cpus_in_core)

    def take_full_first_level(self) -> None:
        if self.numa_first:
            self.take_full_numas()
        else:
            self.take_full_sockets()

    def take_full_second_level(self) -> None:
        if self.numa_first:
            self.take_full_sockets()
        else:
            self.take_full_numas()

    def take_full_uncores(self) -> None:
        self._take_full(self.free_uncores(), self.topo.cpus_in_uncore)

    def take_partial_uncore(self, uncore: int) -> None:
        """Claim ``need`` CPUs from the lowest-numbered cores of one uncore cache, or nothing."""
        t = self.topo
        per_core = t.cpus_per_core
        cores_needed = (self.need + per_core - 1) // per_core if per_core else 0
        cores = sorted({t.details[c].core for c in self.free if t.details[c].uncore == uncore})
        chosen = cores if len(cores) <= cores_needed else cores[:cores_needed]
        cpus: list[int] = sorted(c for core in chosen for c in self.free & t.cpus_in_core[core])
        if self.need % 2 != 0 and per_core > 1 and len(cpus) > self.need:
            # an odd request takes one thread of the last core only
            cpus = cpus[:-1]
        if len(cpus) == self.need:
            self.take(cpus)

    def take_uncore_caches(self) -> None:
        per_uncore = self.topo.cpus_per_uncore
        for uncore in self.sort_uncores():
            if self.needs(per_uncore):
                self.take_full_uncores()
            if self.satisfied():
                return
            self.take_partial_uncore(uncore)
            if self.satisfied():
                return

    def take_remaining(self) -> None:
        for cpu in self.sort_cpus():
            self.take((cpu,))
            if self.satisfied():
                return


def _not_enough(n: int, available: int) -> CpuAssignmentError:
    return CpuAssignmentError(
        f"not enough cpus available to satisfy request: requested={n}, available={available}"
    )


# --------------------------------------------------------------------------------------------
# Public algorithms
# --------------------------------------------------------------------------------------------


def take_packed(
    topo: CpuTopology,
    available: Iterable[int],
    n: int,
    sorting: CpuSorting = CpuSorting.PACKED,
    prefer_uncore: bool = False,
) -> frozenset[int]:
    """``takeByTopologyNUMAPacked``: ``n`` CPUs out of ``available``, packed."""
    available = frozenset(available)
    acc = _Accumulator(topo, available, n, sorting)
    if acc.satisfied():
        return frozenset()
    if acc.failed():
        raise _not_enough(n, len(available))
    acc.take_full_first_level()
    if acc.satisfied():
        return frozenset(acc.result)
    acc.take_full_second_level()
    if acc.satisfied():
        return frozenset(acc.result)
    if prefer_uncore:
        acc.take_uncore_caches()
        if acc.satisfied():
            return frozenset(acc.result)
    if sorting is not CpuSorting.SPREAD:
        acc.take_full_cores()
        if acc.satisfied():
            return frozenset(acc.result)
    acc.take_remaining()
    if acc.satisfied():
        return frozenset(acc.result)
    raise CpuAssignmentError("failed to allocate cpus")


def _numa_range(acc: _Accumulator, group: int) -> tuple[int, int]:
    """``rangeNUMANodesNeededToSatisfy``."""
    t = acc.topo
    num_numa = t.num_numa
    numa_available = len({t.details[c].numa for c in acc.free})
    groups_total = (t.num_cpus - 1) // group + 1
    groups_per_numa = (groups_total - 1) // num_numa + 1
    groups_needed = (acc.need - 1) // group + 1
    return (groups_needed - 1) // groups_per_numa + 1, min(groups_needed, numa_available)


def take_distributed(
    topo: CpuTopology,
    available: Iterable[int],
    n: int,
    group: int = 1,
    sorting: CpuSorting = CpuSorting.PACKED,
    align_by_socket: bool = False,
) -> frozenset[int]:
    """``takeByTopologyNUMADistributed``: ``n`` CPUs spread evenly over NUMA nodes.

    ``group`` is the CPU group size (the SMT level with full-pcpus-only, else 1). A request
    that is not a multiple of ``group`` falls back to :func:`take_packed`, as does a request
    no NUMA-node combination can balance. ``align_by_socket`` enables the newest upstream
    preference for combinations inside one socket (off in released kubelets' callers).
    """
    available = frozenset(available)
    if group < 1 or n % group != 0:
        return take_packed(topo, available, n, sorting, False)
    acc = _Accumulator(topo, available, n, sorting)
    if acc.satisfied():
        return frozenset()
    if acc.failed():
        raise _not_enough(n, len(available))

    numas = acc.sort_numas()
    d = topo.details
    free_count = Counter(d[c].numa for c in acc.free)
    min_k, max_k = _numa_range(acc, group)
    for k in range(min_k, max_k + 1):
        best_balance = math.inf
        best_remainder: tuple[int, ...] | None = None
        best_combo: tuple[int, ...] | None = None
        best_in_one_socket = False
        for combo in combinations(numas, k):
            if best_balance == 0 and (not align_by_socket or best_in_one_socket):
                break
            if sum(free_count[x] for x in combo) < n:
                continue
            if sum(free_count[x] // group for x in combo) * group < n:
                continue
            distribution = (n // k // group) * group
            if align_by_socket:
                for x in combo:
                    distribution = min(distribution, free_count[x] // group * group)
            if any(free_count[x] < distribution for x in combo):
                continue
            after = {x: free_count[x] for x in numas}
            for x in combo:
                after[x] -= distribution
            remainder = n - distribution * k
            remainder_combo = [x for x in combo if after[x] >= group]
            local_best = math.inf
            local_remainder: tuple[int, ...] | None = None
            if remainder == 0:
                local_best = standard_deviation(list(after.values()))
            j = len(remainder_combo)
            while remainder > 0 and j >= 1:
                for subset in combinations(remainder_combo, j):
                    if sum(after[x] // group for x in subset) * group < remainder:
                        continue
                    trial = dict(after)
                    left = remainder
                    while left > 0:
                        for x in subset:
                            if left == 0:
                                break
                            if trial[x] < group:
                                continue
                            trial[x] -= group
                            left -= group
                    balance = standard_deviation(list(trial.values()))
                    if balance < local_best:
                        local_best = balance
                        local_remainder = subset
                j -= 1
            in_one_socket = align_by_socket and len(topo.sockets_of_numas(combo)) == 1
            better = local_best < best_balance
            if align_by_socket and in_one_socket != best_in_one_socket:
                better = in_one_socket
            if better:
                best_balance = local_best
                best_remainder = local_remainder
                best_combo = combo
                if align_by_socket:
                    best_in_one_socket = in_one_socket
        if best_combo is None:
            continue

        distribution = (n // len(best_combo) // group) * group
        for x in best_combo:
            distribution = min(distribution, free_count[x] // group * group)
        for x in best_combo:
            acc.take(
                _packed_or_nothing(topo, acc.free & topo.cpus_in_numa[x], distribution, sorting)
            )
        remainder = n - distribution * len(best_combo)
        while remainder > 0 and best_remainder:
            progressed = False
            for x in best_remainder:
                if remainder == 0:
                    break
                pool = acc.free & topo.cpus_in_numa[x]
                if len(pool) < group:
                    continue
                acc.take(_packed_or_nothing(topo, pool, group, sorting))
                remainder -= group
                progressed = True
            if not progressed:
                break
        if acc.need > 0:
            raise CpuAssignmentError(
                f"accounting error, not enough CPUs allocated, remaining: {acc.need}"
            )
        if acc.need < 0:
            raise CpuAssignmentError(
                f"accounting error, too many CPUs allocated, remaining: {acc.need}"
            )
        return frozenset(acc.result)

    return take_packed(topo, available, n, sorting, False)


def _packed_or_nothing(
    topo: CpuTopology, pool: Iterable[int], n: int, sorting: CpuSorting
) -> frozenset[int]:
    """The kubelet ignores errors of the per-NUMA packed calls (they yield no CPUs)."""
    try:
        return take_packed(topo, pool, n, sorting, False)
    except CpuAssignmentError:
        return frozenset()


def take_by_topology(
    topo: CpuTopology,
    available: Iterable[int],
    n: int,
    *,
    full_pcpus_only: bool = False,
    distribute_across_numa: bool = False,
    distribute_across_cores: bool = False,
    prefer_uncore: bool = False,
) -> frozenset[int]:
    """The static policy's ``takeByTopology`` dispatch over the policy options."""
    sorting = CpuSorting.SPREAD if distribute_across_cores else CpuSorting.PACKED
    if distribute_across_numa:
        group = topo.cpus_per_core if full_pcpus_only else 1
        return take_distributed(topo, available, n, max(group, 1), sorting)
    return take_packed(topo, available, n, sorting, prefer_uncore)
