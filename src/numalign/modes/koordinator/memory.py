"""Koordinator's per-NUMA memory accounting and its joint CPU + memory hints (``koordinator`` mode).

Read from koordinator-sh/koordinator (main history, HEAD ``a7a1b76b``; written anew here):

* ``pkg/scheduler/plugins/nodenumaresource/resource_manager.go``

  - ``GetTopologyHints`` / ``generateResourceHints``: for every NUMA mask (``IterateBitMasks``)
    a *trial allocation of the whole pod* (CPUs, memory, hugepages) is made inside the mask; a
    mask where it succeeds yields a hint for every requested resource the NUMA nodes carry,
    except for a resource one of the mask's NUMA nodes has none of (``numaNodesLackResource``).
    ``minAffinitySize`` is the fewest NUMA nodes among a resource's hints (feasible *now*);
    preferred = that size, or every hint under ``Restricted``. A requested resource without a
    hint gets an empty list ("cannot satisfy"). So CPU and memory hints are generated
    *jointly*: a mask that holds the CPUs but not the memory is no CPU hint either;
  - ``allocateResourcesByHint`` / ``tryBestToDistributeEvenly`` / ``splitQuantity``: each
    resource is split over the hint's NUMA nodes, node by node ``remaining / nodes left`` capped
    by what the node has free; what is left over is ``Insufficient NUMA <resource>``;
* ``node_allocation.go`` ``getAvailableNUMANodeResources``: free = the NUMA node's allocatable
  (the NodeResourceTopology zone's ``allocatable``) minus what the pods' allocations hold there.
  Every pod with requests is accounted, whatever its QoS class (``plugin.go`` PreFilter takes
  ``PodRequests``), once the node has a NUMA policy (``allocate`` skips pods without a policy
  and without a cpuset). There is no NUMA-group rule (the kubelet's Static memory manager's
  "a node of a multi-node group is never used alone").

numalign's form: the amounts live in the memory manager's state as one block per NUMA node and
resource (``Block((n,), resource, bytes)``) under the pod's first container, with the kubelet's
``None`` memory manager policy (the configuration Koordinator deployments run: its scheduler
decides, koordlet enforces). A NUMA node's allocatable is what the kubelet's memory manager
would count (memory minus ``reservedMemory`` minus hugepages; hugepages minus their
reservation). CPUs stay with :class:`~numalign.modes.koordinator.cpu.KoordinatorCpuManager`;
:class:`KoordinatorNumaResource` (Koordinator's ``NodeNUMAResource`` hint provider) asks it for
its CPU rule and hints CPUs and memory jointly.

Where numalign differs: upstream's split sorts the hint's NUMA nodes by
``totalAvailable[i] < totalAvailable[j]`` with ``i``, ``j`` *positions* in the list (the
ordering is by availability only for hints ``{0..k-1}``); a hint whose positional order leaves
a short NUMA node last can then fail although its NUMA nodes together hold the request. numalign
judges a mask by that total (a monotone rule the merge can search) and, where the positional
split falls short, splits in true availability order instead; where upstream's split succeeds,
numalign's split is upstream's.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence

from numalign.engine.bitmask import ids_of, mask_of
from numalign.engine.hints import Demand, GeneratedHints, ProviderHints, ResourceHints, TopologyHint
from numalign.engine.merge_budget import Budget
from numalign.engine.merge_search import Family, min_size
from numalign.engine.policies import Policy
from numalign.errors import UnexpectedAdmissionError
from numalign.inputs.quantity import MEMORY, is_memory_resource
from numalign.machine.model import Machine
from numalign.modes.koordinator.cpu import KoordinatorCpuManager
from numalign.modes.koordinator.cpu_accumulator import split_evenly
from numalign.pods import Container, Pod, effective_pod_requests
from numalign.resources.memory import default_machine_state
from numalign.resources.memory_state import Block, MemoryState, numa_held

#: Koordinator's ``tryBestToDistributeEvenly`` reason
ERR_INSUFFICIENT_NUMA = "Insufficient NUMA %s"


def _order(resources: Mapping[str, int]) -> list[str]:
    return sorted(resources, key=lambda r: (r != MEMORY, r))


def numa_allocatable(machine: Machine) -> dict[int, dict[str, int]]:
    """NUMA node -> memory resource -> allocatable bytes (a zone's ``allocatable``)."""
    out: dict[int, dict[str, int]] = {}
    for nid, ns in default_machine_state(machine, check=False).items():
        out[nid] = {r: max(0, t.allocatable) for r, t in ns.memory_map.items()}
    return out


def numa_available(machine: Machine, state: MemoryState) -> dict[int, dict[str, int]]:
    """Koordinator ``getAvailableNUMANodeResources`` for memory and hugepages."""
    held = numa_held(state)
    return {
        nid: {r: max(0, v - held.get(nid, {}).get(r, 0)) for r, v in per.items()}
        for nid, per in numa_allocatable(machine).items()
    }


def pod_numa_requests(pod: Pod, carried: Mapping[int, Mapping[str, int]]) -> dict[str, int]:
    """The pod's memory and hugepage requests (any QoS class) that some NUMA node carries."""
    names = {r for per in carried.values() for r, v in per.items() if v > 0}
    return {r: v for r, v in effective_pod_requests(pod).items() if v > 0 and is_memory_resource(r) and r in names}


def distribute(need: int, hint_nodes: Sequence[int], available: Mapping[int, int]) -> dict[int, int]:
    """``tryBestToDistributeEvenly`` for one resource: NUMA node -> amount (empty entries
    dropped). ``available`` covers every NUMA node (upstream's positional sort reads it by
    position). Falls back to true availability order when the positional split falls short."""
    got = split_evenly(need, hint_nodes, available)
    if sum(got.values()) >= need:
        return got
    out: dict[int, int] = {}
    remaining = need
    ordered = sorted(hint_nodes, key=lambda n: (available.get(n, 0), n))
    for i, n in enumerate(ordered):
        take = min(remaining // (len(ordered) - i), available.get(n, 0))
        if take > 0:
            out[n] = take
            remaining -= take
    return out


# --------------------------------------------------------------------------- joint hints


def _union(masks: Iterable[int]) -> int:
    out = 0
    for m in masks:
        out |= m
    return out


#: up to this many NUMA nodes the fewest feasible nodes are found by listing masks by size
SMALL = 8


def _fewest(universe: int, feasible: Callable[[int], bool]) -> int | None:
    ids = ids_of(universe)
    for k in range(1, len(ids) + 1):
        if any(feasible(mask_of(c)) for c in itertools.combinations(ids, k)):
            return k
    return None


def _joint_family(
    nodes: tuple[int, ...],
    universe: int,
    rules: Sequence[Callable[[int], bool]],
    demands: Sequence[Demand],
    exact: bool,
    everything_preferred: bool,
) -> ResourceHints:
    """One resource's hints: masks inside ``universe`` passing every rule; preferred = the
    fewest NUMA nodes of such a mask (every hint when ``everything_preferred``)."""

    def feasible(mask: int) -> bool:
        return all(rule(mask) for rule in rules)

    demand: Demand | None = None
    if exact and demands:
        demand = Demand(
            tuple(d for dm in demands for d in dm.dims),
            tuple(n for dm in demands for n in dm.need),
            tuple(t for dm in demands for t in dm.touch),
            _union(dm.lonely for dm in demands),
        )
    gen = GeneratedHints(nodes, universe, demand.feasible if demand is not None else feasible, 0, demand=demand)
    if not universe or gen.is_empty():
        return []
    size = _fewest(universe, gen.feasible) if universe.bit_count() <= SMALL else min_size(Family(gen), Budget())
    if size is None:
        return []
    return gen.replace(preferred_size=size, is_preferred=(lambda m: True) if everything_preferred else None)


def _explicit(
    masks: Sequence[int], universe: int, ok: Callable[[int], bool], everything_preferred: bool
) -> list[TopologyHint]:
    kept = [m for m in masks if m & ~universe == 0 and ok(m)]
    if not kept:
        return []
    fewest = min(m.bit_count() for m in kept)
    return [TopologyHint(m, everything_preferred or m.bit_count() == fewest) for m in kept]


def joint_hints(
    nodes: tuple[int, ...],
    cpu: ResourceHints,
    need: Mapping[str, int],
    available: Mapping[int, Mapping[str, int]],
    everything_preferred: bool,
) -> dict[str, ResourceHints]:
    """``generateResourceHints`` for a pod's CPUs (the CPU provider's answer ``cpu``, ``None``
    when it binds no CPUs) and memory requests ``need`` over the NUMA nodes' ``available``."""
    res = _order(need)
    mem = Demand.per_node({n: tuple(available.get(n, {}).get(r, 0) for r in res) for n in nodes},
                          tuple(need[r] for r in res))
    lacking = {r: mask_of(n for n in nodes if available.get(n, {}).get(r, 0) <= 0) for r in res}
    everything = mask_of(nodes)
    out: dict[str, ResourceHints] = {}
    if cpu is not None and not isinstance(cpu, GeneratedHints):
        masks = [h.affinity for h in cpu if h.affinity is not None]
        if not masks and cpu:  # only "any NUMA node" hints: nothing to align the CPUs with
            out["cpu"] = cpu
            cpu = None
        else:
            out["cpu"] = _explicit(masks, everything, mem.feasible, everything_preferred)
            for r in res:
                out[r] = _explicit(masks, everything & ~lacking[r], mem.feasible, everything_preferred)
            return out
    if isinstance(cpu, GeneratedHints):
        if cpu.is_empty():  # no mask holds the CPUs: no trial allocation succeeds anywhere
            return {"cpu": [], **{r: [] for r in res}}
        cpu_exact = cpu.demand is not None and not cpu.extra
        rules = [cpu.feasible, mem.feasible]
        demands = [cpu.demand, mem] if cpu.demand is not None else []
        out["cpu"] = _joint_family(nodes, cpu.universe, rules, demands, cpu_exact, everything_preferred)
        for r in res:
            out[r] = _joint_family(nodes, everything & ~lacking[r], rules, demands, cpu_exact,
                                   everything_preferred)
        return out
    for r in res:
        out[r] = _joint_family(nodes, everything & ~lacking[r], [mem.feasible], [mem], True, everything_preferred)
    return out


# --------------------------------------------------------------------------- the provider


# --------------------------------------------------------------------------- NUMA scores

#: the plugin's default ``numaScoringStrategy`` (``pkg/scheduler/apis/config/v1/defaults.go``)
DEFAULT_NUMA_SCORING = "LeastAllocated"
#: ``scoringStrategy.resources`` defaults: cpu and memory, weight 1 (what the NUMA scorer weighs)
DEFAULT_WEIGHTS: Mapping[str, int] = {"cpu": 1, MEMORY: 1}
MAX_SCORE = 100


def requested_score(strategy: str, requested: int, allocatable: int) -> int:
    """``leastRequestedScore`` / ``mostRequestedScore`` of one resource (0..100)."""
    if allocatable == 0:
        return 0
    if strategy == "MostAllocated":
        return min(requested, allocatable) * MAX_SCORE // allocatable
    if requested > allocatable:
        return 0
    return (allocatable - requested) * MAX_SCORE // allocatable


def numa_score(
    strategy: str,
    allocatable: Mapping[str, int],
    available: Mapping[str, int],
    pod_request: Mapping[str, int],
    weights: Mapping[str, int] = DEFAULT_WEIGHTS,
) -> int:
    """``resourceAllocationScorer.score`` of one NUMA mask (``generateResourceHints``): what
    the mask's NUMA nodes hold (allocatable minus available) plus the pod's requests, against
    their allocatable; resources with nothing allocatable are left out."""
    total = weight_sum = 0
    for r, w in weights.items():
        alloc = allocatable.get(r, 0)
        if alloc == 0:
            continue
        used = max(0, alloc - available.get(r, 0))
        total += requested_score(strategy, used + pod_request.get(r, 0), alloc) * w
        weight_sum += w
    return total // weight_sum if weight_sum else 0


class KoordinatorNumaResource:
    """Koordinator's ``NodeNUMAResource`` hint provider (``name = "nodenumaresource"``): the
    CPUs through ``cpu`` (:class:`KoordinatorCpuManager`) and the memory and hugepages per NUMA
    node in ``memory`` (a ``None``-policy memory state holding Koordinator's blocks), hinted
    jointly (:func:`joint_hints`) and allocated per NUMA node (:func:`distribute`).

    Koordinator hints and allocates the pod as a whole (pod scope); ``container_hints`` gives
    the CPU provider's answer only and the pod's memory is allocated with its first container.
    """

    name = "nodenumaresource"

    def __init__(
        self,
        machine: Machine,
        cpu: KoordinatorCpuManager,
        memory: MemoryState,
        policy_of: Callable[[Pod], Policy] | None = None,
    ) -> None:
        self.machine = machine
        self.cpu = cpu
        self.state = memory
        self.policy_of = policy_of
        self.scoring = DEFAULT_NUMA_SCORING
        #: the last pod hinted and how many of its resources got hint lists (for the scores)
        self._hinted: tuple[Pod, int] | None = None
        #: per-NUMA amounts of the state the last hints were made on (the merge scores masks)
        self._amounts: tuple[dict[int, dict[str, int]], dict[int, dict[str, int]]] | None = None

    def available(self) -> dict[int, dict[str, int]]:
        return numa_available(self.machine, self.state)

    # -- hints
    def container_hints(self, pod: Pod, container: Container) -> ProviderHints:
        return self.cpu.container_hints(pod, container)

    def pod_hints(self, pod: Pod) -> ProviderHints:
        self._hinted = self._amounts = None
        cpu = self.cpu.pod_hints(pod)
        avail = self.available()
        need = pod_numa_requests(pod, numa_allocatable(self.machine))
        if not need or self.state.assignments.get(pod.uid):
            self._hinted = (pod, sum(1 for v in (cpu or {}).values() if v is not None))
            return cpu
        restricted = self.policy_of is not None and self.policy_of(pod) is Policy.RESTRICTED
        out: dict[str, ResourceHints] = dict(cpu or {})
        out.update(joint_hints(self.machine.node_ids, (cpu or {}).get("cpu"), need, avail, restricted))
        self._hinted = (pod, sum(1 for v in out.values() if v is not None))
        self._amounts = None
        return out

    def numa_amounts(self) -> tuple[dict[int, dict[str, int]], dict[int, dict[str, int]]]:
        """Per NUMA node ``(allocatable, available)``: CPUs in milli-CPUs (not reserved; not
        bound to a pod), memory and hugepages in bytes."""
        alloc = {n: dict(per) for n, per in numa_allocatable(self.machine).items()}
        avail = self.available()
        free = self.cpu.available_cpus()
        for n, cpus in self.cpu.topology.cpus_in_numa.items():
            alloc.setdefault(n, {})["cpu"] = len(cpus - self.cpu.reserved) * 1000
            avail.setdefault(n, {})["cpu"] = len(cpus & free) * 1000
        return alloc, avail

    def mask_score(self, pod: Pod, mask: int) -> int:
        """The NUMA scorer's score of ``mask`` for ``pod`` (one hint's ``Score``)."""
        if self._amounts is None:
            self._amounts = self.numa_amounts()
        alloc, avail = self._amounts
        total: dict[str, int] = {}
        free: dict[str, int] = {}
        for n in ids_of(mask):
            for r, v in alloc.get(n, {}).items():
                total[r] = total.get(r, 0) + v
            for r, v in avail.get(n, {}).items():
                free[r] = free.get(r, 0) + v
        return numa_score(self.scoring, total, free, effective_pod_requests(pod))

    def hint_score(self, mask: int) -> int:
        """The summed ``Score`` this provider's hints give ``mask`` (every hint list of the
        last pod hinted carries the mask's score); 0 before any hint."""
        if self._hinted is None:
            return 0
        pod, lists = self._hinted
        return self.mask_score(pod, mask) * lists

    # -- allocation
    def allocate(self, pod: Pod, container: Container, hint: TopologyHint) -> None:
        self.cpu.allocate(pod, container, hint)
        if hint.affinity is None or not pod.containers or container.name != pod.containers[0].name:
            return
        if self.state.assignments.get(pod.uid):
            return
        avail = self.available()
        need = pod_numa_requests(pod, numa_allocatable(self.machine))
        blocks: list[Block] = []
        for r in _order(need):
            share = distribute(need[r], ids_of(hint.affinity), {n: per.get(r, 0) for n, per in avail.items()})
            if sum(share.values()) < need[r]:
                raise UnexpectedAdmissionError(ERR_INSUFFICIENT_NUMA % r)
            blocks += [Block((n,), r, v) for n, v in sorted(share.items())]
        if blocks:
            self.state.assignments.setdefault(pod.uid, {})[container.name] = blocks

    def release_pod(self, pod_uid: str) -> None:
        self.cpu.release_pod(pod_uid)
        self.state.assignments.pop(pod_uid, None)


__all__ = [
    "DEFAULT_NUMA_SCORING",
    "DEFAULT_WEIGHTS",
    "ERR_INSUFFICIENT_NUMA",
    "KoordinatorNumaResource",
    "distribute",
    "joint_hints",
    "numa_allocatable",
    "numa_available",
    "numa_score",
    "pod_numa_requests",
    "requested_score",
]
