"""What NodeNUMAResource's Score and its bound read of one node, read once per node state.

:class:`ScoreAmounts` holds a node's amounts in the Score's units (milli-CPUs, bytes): the
node-level requests and allocatable, every CPU bound to a pod, and per NUMA node the zone's
allocatable, what is allocated there (the Score's ``before``) and what is free for the bound's
holding test. The Score of a plan (:meth:`KoordinatorNumaScore.score_on
<numalign.modes.koordinator.scheduling.KoordinatorNumaScore.score_on>`) and its bound
(``node_bound``) both read it, and the bound reads the per-resource sums over every subset of
NUMA nodes it enumerates (:meth:`ScoreAmounts.subsets`), summed once per node state instead of
once per pod shape: nodes in one state are asked for many shapes.

Kept per node (weakly) with the state, the external pods and the weights it was read for; a
node whose state changed reads it again.
"""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from numalign.inputs.quantity import CPU, is_memory_resource
from numalign.node.admission import Node
from numalign.node.state import NodeState
from numalign.node.usage import numa_amounts, numa_free, numa_memory_held
from numalign.resources.cpu import POLICY_STATIC as CPU_STATIC
from numalign.resources.memory import POLICY_STATIC as MEMORY_STATIC


@dataclass(frozen=True)
class SubsetSums:
    """A set of NUMA nodes and the sums over it: per weighted resource (in the weights' order)
    the zones' allocatable and ``before``; per resource of :attr:`ScoreAmounts.free`, the free
    amount."""

    ids: tuple[int, ...]
    alloc: tuple[int, ...]
    before: tuple[int, ...]
    free: Mapping[str, int]

    def holds(self, need: Mapping[str, int]) -> bool:
        """Was at least ``need`` free on these NUMA nodes together?"""
        free = self.free
        return all(free.get(r, 0) >= v for r, v in need.items())


@dataclass(frozen=True)
class ScoreAmounts:
    """What the Score and its bound read of a node, pod aside (the Score's units)."""

    static_cpus: bool
    static_memory: bool
    #: the weighted resources, in the weights' order (the order of every per-resource tuple)
    resources: tuple[str, ...]
    requested: Mapping[str, int]  # node-level requests of the weighted resources
    allocatable: Mapping[str, int]  # node allocatable of the weighted resources
    bound_cpus: int  # every CPU bound to a pod, in milli-CPUs
    ids: tuple[int, ...]
    alloc: Mapping[int, Mapping[str, int]]  # per NUMA node: the zone's allocatable
    before: Mapping[int, Mapping[str, int]]  # per NUMA node: allocated there (the Score's before)
    #: per NUMA node: free CPUs (count), free memory (Static memory manager) and free devices
    #: of :attr:`aligned`
    free: Mapping[int, Mapping[str, int]]
    #: device resources whose every device sits on exactly one NUMA node
    aligned: frozenset[str]
    #: every device of the machine sits on one NUMA node at most
    single_numa_devices: bool
    _subsets: dict[bool, tuple[SubsetSums, ...]] = field(default_factory=dict, compare=False, repr=False)

    def fixed_before(self, cpuset: bool) -> list[int | None]:
        """Per weighted resource, the Score's ``before`` a cpuset fixes (every bound CPU, for
        cpu, when the pod holds a cpuset), else None: the set's own sum."""
        return [self.bound_cpus if cpuset and r == CPU else None for r in self.resources]

    def node_level(self) -> SubsetSums:
        """The whole node as one set: node allocatable, node-level requests (no free amounts)."""
        return SubsetSums((), tuple(self.allocatable[r] for r in self.resources),
                          tuple(self.requested[r] for r in self.resources), {})

    def sums(self, ids: Sequence[int]) -> SubsetSums:
        """The sums over NUMA nodes ``ids``."""
        free: dict[str, int] = {}
        for i in ids:
            for r, v in self.free[i].items():
                free[r] = free.get(r, 0) + v
        return SubsetSums(tuple(ids), tuple(sum(self.alloc[i][r] for i in ids) for r in self.resources),
                          tuple(sum(self.before[i][r] for i in ids) for r in self.resources), free)

    def subsets(self, singles: bool) -> tuple[SubsetSums, ...]:
        """Every single NUMA node (``singles``), else every non-empty subset of the NUMA nodes
        (``itertools.combinations`` order), with their sums; computed once."""
        got = self._subsets.get(singles)
        if got is None:
            combos = ([(i,) for i in self.ids] if singles else
                      [c for k in range(1, len(self.ids) + 1) for c in itertools.combinations(self.ids, k)])
            got = self._subsets[singles] = tuple(self.sums(c) for c in combos)
        return got


#: per node: the state, external pods and weights :class:`ScoreAmounts` was read for
_AMOUNTS: weakref.WeakKeyDictionary[Node, tuple[NodeState, object, object, ScoreAmounts]] = (
    weakref.WeakKeyDictionary())


def score_amounts(node: Node, weights: Mapping[str, int]) -> ScoreAmounts:
    """``node``'s :class:`ScoreAmounts` for ``weights`` (read again after a state change)."""
    external = (node.external_pods, tuple(sorted(node.external_requests.items())))
    hit = _AMOUNTS.get(node)
    if hit is not None and hit[0] is node.state and hit[1] == external and hit[2] == weights:
        return hit[3]
    m = node.machine
    zones = numa_amounts(node)
    numa_mem = numa_memory_held(node)  # NodeAllocation's per-NUMA memory (scoring.go)
    scale = {CPU: 1000}
    ids = tuple(sorted(zones))
    static_memory = m.kubelet.memory_manager_policy == MEMORY_STATIC
    free: dict[int, dict[str, int]] = {i: {CPU: zones[i].available.get(CPU, 0)} for i in ids}
    by_resource: dict[str, bool] = {}
    for d in m.devices:
        by_resource[d.resource] = by_resource.get(d.resource, True) and len(d.numa) == 1
    aligned = frozenset(r for r, ok in by_resource.items() if ok)
    for i, per in numa_free(node).items():
        if i in free:
            free[i].update((r, v) for r, v in per.items()
                           if r in aligned or (static_memory and is_memory_resource(r)))
    requested, _ = node.requested()
    out = ScoreAmounts(
        static_cpus=m.kubelet.cpu_manager_policy == CPU_STATIC,
        static_memory=static_memory,
        resources=tuple(weights),
        requested={r: requested.get(r, 0) for r in weights},
        allocatable={r: node.allocatable.get(r, 0) for r in weights},
        bound_cpus=sum(z.allocatable.get(CPU, 0) - z.available.get(CPU, 0) for z in zones.values()) * 1000,
        ids=ids,
        alloc={i: {r: zones[i].allocatable.get(r, 0) * scale.get(r, 1) for r in weights} for i in ids},
        before={i: {r: (zones[i].allocatable.get(r, 0) - zones[i].available.get(r, 0)
                        + numa_mem.get(i, {}).get(r, 0)) * scale.get(r, 1) for r in weights} for i in ids},
        free=free,
        aligned=aligned,
        single_numa_devices=all(len(d.numa) <= 1 for d in m.devices),
    )
    _AMOUNTS[node] = (node.state, external, dict(weights), out)
    return out


__all__ = ["ScoreAmounts", "SubsetSums", "score_amounts"]
