"""The one owner of NUMA usage facts: every adapter asks here, nobody reads the managers' tables.

Questions answered (for a :class:`~numalign.node.admission.Node` and its state):

* what a pod or container holds - :func:`pod_usage`, :func:`pods_usage` (defined in
  :mod:`numalign.node.holdings`, which admission loads alone, and re-exported here);
* which NUMA nodes a pod uses - :func:`pod_numa_nodes` (the NUMA nodes of its exclusive
  CPUs, memory blocks and devices; a pod that got none of them uses none);
* per-NUMA amounts - :func:`numa_amounts` (``capacity`` / ``allocatable`` / ``available``, what a
  NodeResourceTopology zone publishes) and :func:`numa_free` (the generous free amounts the
  scheduler's prefilter needs);
* the NUMA demand of a pod under a scope - :func:`numa_demand` (which requests the node's
  managers bind to NUMA nodes);
* the fewest NUMA nodes that can hold an amount - :func:`numa_capacities`,
  :func:`fewest_nodes`, :func:`fewest_numa_nodes`;
* usage observed elsewhere (an NRT, a kubelet checkpoint) applied *through the managers*,
  memory groups included - :class:`ObservedUsage`, :func:`apply_observed`.

The managers expose reader methods (the kubelet's ``state.Reader`` discipline); this module
combines them with the machine.

Units: ``cpu`` in whole CPUs, memory and hugepages in bytes, devices in counts.
"""

from __future__ import annotations

import weakref
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from numalign.engine.policies import Scope
from numalign.errors import InputError
from numalign.inputs.quantity import CPU, MEMORY, hugepage_resource_name, is_memory_resource
from numalign.machine.model import Machine
from numalign.memo import remember
from numalign.node.holdings import ContainerUsage as ContainerUsage
from numalign.node.holdings import PodUsage as PodUsage
from numalign.node.holdings import container_usage as container_usage
from numalign.node.holdings import cpus_numa_nodes as cpus_numa_nodes
from numalign.node.holdings import pod_numa_nodes as pod_numa_nodes
from numalign.node.holdings import pod_usage as pod_usage
from numalign.node.holdings import pods_usage as pods_usage
from numalign.node.plan_cache import known_decision_key
from numalign.node.state import NodeState, PodRecord
from numalign.pods import (
    ContainerKind,
    Pod,
    QOSClass,
    effective_pod_limits,
    effective_pod_requests,
    guaranteed_cpus,
    pod_guaranteed_cpus,
)
from numalign.resources.cpu import POLICY_STATIC as CPU_STATIC
from numalign.resources.memory import POLICY_STATIC as MEMORY_STATIC
from numalign.resources.memory_state import numa_held

#: the uid under which observed usage is recorded (not a pod numalign admitted)
OBSERVED_UID = "numalign.io/observed-usage"


class NodeView(Protocol):
    """What this module needs of a node (a :class:`~numalign.node.admission.Node`)."""

    @property
    def machine(self) -> Machine: ...

    @property
    def state(self) -> NodeState: ...

    @property
    def reserved_cpus(self) -> frozenset[int]: ...


# ------------------------------------------------------------------------- amounts


@dataclass
class ZoneAmounts:
    """One NUMA node's capacity, allocatable and available amounts per resource."""

    capacity: dict[str, int] = field(default_factory=dict)
    allocatable: dict[str, int] = field(default_factory=dict)
    available: dict[str, int] = field(default_factory=dict)


def zones_key(node: NodeView) -> Hashable:
    """Everything :func:`numa_amounts` reads of a node, as one value: the machine (by
    identity), the reserved CPUs, the CPUs held, the memory tables' allocatable and free amounts
    per NUMA node and resource, the devices in use - the last two as the state's decision key
    when the plan cache has one for it (:func:`~numalign.node.plan_cache.known_decision_key`,
    which holds both), else as such. Nodes with equal keys publish equal zones.
    Computed once per node state (kept by the state's identity: a state a node holds is never
    changed in place - admission, release and observed usage make new states, see
    :mod:`numalign.node.plan_cache`)."""
    return _state_entry(node).key


class _StateZones:
    """What is known of one node state: its :func:`zones_key`, and its zones once asked for."""

    __slots__ = ("key", "machine", "reserved", "state", "zones")

    def __init__(self, state: NodeState, machine: Machine, reserved: frozenset[int], key: Hashable) -> None:
        self.state = weakref.ref(state)
        self.machine = machine
        self.reserved = reserved
        self.key = key
        self.zones: Zones | None = None


#: per node state by identity (a weak reference tells a live state from a dead one whose id
#: was reused), made for one machine and reserved CPUs: its :func:`zones_key` and zones
_ZONES_KEYS: dict[int, _StateZones] = {}


def _state_entry(node: NodeView) -> _StateZones:
    m, st, reserved = node.machine, node.state, node.reserved_cpus
    hit = _ZONES_KEYS.get(id(st))
    if hit is not None and hit.state() is st and hit.machine is m and hit.reserved == reserved:
        return hit
    decided = known_decision_key(st)
    if decided is not None:  # it holds the memory tables and the devices in use (and more)
        key: Hashable = (id(m), reserved, st.cpu.assigned_cpus(), decided)
    else:
        memory = tuple((n, r, t.allocatable, t.free) for n, ns in st.memory.machine_state.items()
                       for r, t in ns.memory_map.items())  # what MemoryState.amounts answers from
        key = (id(m), reserved, st.cpu.assigned_cpus(), memory, st.devices.taken())
    return remember(_ZONES_KEYS, id(st), _StateZones(st, m, reserved, key), AMOUNTS_SIZE)


class Zones:
    """One :func:`zones_key`'s zones: the amounts per NUMA node (not to be changed), the
    ``available`` amounts as one value (:func:`available_key`), and ``derived``: values that
    callers compute from these zones alone, kept here under their own names so that a node
    state asks for them once (:func:`zones_of`)."""

    __slots__ = ("amounts", "available", "derived", "machine")

    def __init__(self, machine: Machine, amounts: dict[int, ZoneAmounts], available: Hashable) -> None:
        self.machine = machine
        self.amounts = amounts
        self.available = available
        self.derived: dict[Hashable, object] = {}

    def remember(self, key: Hashable, value: object) -> None:
        """Keep ``value`` in :attr:`derived` (all of it is dropped beyond
        :data:`DERIVED_SIZE` entries: it is recomputed when asked again)."""
        remember(self.derived, key, value, DERIVED_SIZE)


#: :class:`Zones` by :func:`zones_key` (with the machine, so that a reused id never matches);
#: cleared beyond :data:`AMOUNTS_SIZE` entries
_AMOUNTS: dict[Hashable, Zones] = {}
AMOUNTS_SIZE = 1 << 14
#: values derived from one zones' amounts kept with them (:meth:`Zones.remember`)
DERIVED_SIZE = 1 << 10


def zones_of(node: NodeView) -> Zones:
    """The node's :class:`Zones`, computed once per distinct :func:`zones_key` and looked up
    once per node state."""
    entry = _state_entry(node)
    got = entry.zones
    if got is not None:
        return got
    hit = _AMOUNTS.get(entry.key)
    if hit is None or hit.machine is not node.machine:
        out = _numa_amounts(node.machine, node.state, node.reserved_cpus)
        available = tuple((i, tuple(sorted(z.available.items()))) for i, z in sorted(out.items()))
        hit = remember(_AMOUNTS, entry.key, Zones(node.machine, out, available), AMOUNTS_SIZE)
    entry.zones = hit
    return hit


def _zones(node: NodeView) -> tuple[dict[int, ZoneAmounts], Hashable]:
    z = zones_of(node)
    return z.amounts, z.available


def numa_amounts(node: NodeView) -> dict[int, ZoneAmounts]:
    """NUMA node id -> amounts per resource, as a NodeResourceTopology zone publishes them.

    ``capacity`` = physical, ``allocatable`` = minus the kubelet's reservations, ``available``
    = minus what running pods hold exclusively. A device counts on its first NUMA node.
    Computed once per distinct :func:`zones_key` (nodes alike share it); every call gets its
    own copy.
    """
    out, _ = _zones(node)
    return {i: ZoneAmounts(dict(z.capacity), dict(z.allocatable), dict(z.available)) for i, z in out.items()}


def available_key(node: NodeView) -> Hashable:
    """The ``available`` amounts of :func:`numa_amounts` as one value (NUMA id -> resource ->
    amount), computed with them."""
    return _zones(node)[1]


def _numa_amounts(m: Machine, st: NodeState, reserved: frozenset[int]) -> dict[int, ZoneAmounts]:
    out = {i: ZoneAmounts() for i in m.node_ids}
    assigned = st.cpu.assigned_cpus()
    for i in m.node_ids:
        cpus = m.cpus_by_numa.get(i, frozenset())
        z = out[i]
        z.capacity[CPU] = len(cpus)
        z.allocatable[CPU] = len(cpus - reserved)
        z.available[CPU] = len(cpus - reserved - assigned)
    for n in m.numa_nodes:
        z = out[n.id]
        resources = {MEMORY: n.memory}
        for size, total in n.hugepages.items():
            resources[hugepage_resource_name(size)] = total
        for res, total in resources.items():
            z.capacity[res] = total
            amounts = st.memory.amounts(n.id, res)
            if amounts is None:
                z.allocatable[res] = total
                z.available[res] = total
            else:
                z.allocatable[res], z.available[res] = amounts
    taken = st.devices.taken()
    for d in m.devices:
        if not d.numa:
            continue
        zone = out.get(d.numa[0])
        if zone is None:
            continue
        zone.capacity[d.resource] = zone.capacity.get(d.resource, 0) + 1
        zone.allocatable.setdefault(d.resource, 0)
        zone.available.setdefault(d.resource, 0)
        if d.healthy:
            zone.allocatable[d.resource] += 1
            if (d.resource, d.id) not in taken:
                zone.available[d.resource] += 1
    return out


def numa_available(node: NodeView, resource: str) -> tuple[bool, list[int]]:
    """For ``cpu`` or a device resource: whether some NUMA node has it allocatable, and per
    NUMA node (in ``machine.node_ids`` order) its available amount - the ``allocatable`` and
    ``available`` of :func:`numa_amounts` for this one resource, without the others' (the
    simulator samples them on every node)."""
    m, st, reserved = node.machine, node.state, node.reserved_cpus
    if resource == CPU:
        assigned = st.cpu.assigned_cpus()
        allocatable = False
        available = []
        for i in m.node_ids:
            free = m.cpus_by_numa.get(i, frozenset()) - reserved
            allocatable = allocatable or bool(free)
            available.append(len(free - assigned))
        return allocatable, available
    if is_memory_resource(resource):
        raise ValueError(f"numa_available: {resource} is not cpu or a device resource")
    slot = {nid: k for k, nid in enumerate(m.node_ids)}
    out = [0] * len(slot)
    allocatable = False
    taken: frozenset[tuple[str, str]] | None = None  # read once a device needs it
    for d in m.devices:
        if d.resource != resource or not d.numa or not d.healthy:
            continue
        k = slot.get(d.numa[0])  # a device counts on its first NUMA node
        if k is None:
            continue
        allocatable = True
        if taken is None:
            taken = st.devices.taken()
        if (d.resource, d.id) not in taken:
            out[k] += 1
    return allocatable, out


def numa_memory_held(node: NodeView) -> dict[int, dict[str, int]]:
    """NUMA node -> memory resource -> bytes pods hold there outside the kubelet's Static
    memory manager: the ``koordinator`` mode's per-NUMA accounting (Koordinator's
    ``NodeAllocation``), which :func:`numa_amounts` does not publish as a zone's use (the
    kubelet binds no memory to NUMA nodes there). Empty under ``Static``, whose tables
    :func:`numa_amounts` already counts."""
    if node.machine.kubelet.memory_manager_policy == MEMORY_STATIC:
        return {}
    return numa_held(node.state.memory)


def numa_free(node: NodeView) -> dict[int, dict[str, int]]:
    """NUMA node id -> resource -> free amount *the managers bind to NUMA nodes*, generously.

    Exclusive CPUs only under the static CPU manager (shared pool minus reserved), memory and
    hugepages only under the Static memory manager (the tables' ``free``), healthy free
    devices with topology counted on *each* of their NUMA nodes. Never less than what any
    mask could get, so a test against it is a necessary condition of admission.
    """
    m, st, reserved = node.machine, node.state, node.reserved_cpus
    out: dict[int, dict[str, int]] = {i: {} for i in m.node_ids}
    if m.kubelet.cpu_manager_policy == CPU_STATIC:
        free = st.cpu.default_set - reserved
        for nid, cpus in m.cpus_by_numa.items():
            n = len(cpus & free)
            if n and nid in out:
                out[nid][CPU] = n
    if m.kubelet.memory_manager_policy == MEMORY_STATIC:
        for nid, ns in st.memory.machine_state.items():
            per = out.get(nid)
            if per is None:
                continue
            for res in sorted(ns.memory_map):
                per[res] = ns.memory_map[res].free
    devices = [d for d in m.devices if d.healthy and d.numa]
    if devices:
        taken = st.devices.taken()
        for d in devices:
            if (d.resource, d.id) not in taken:
                for nid in d.numa:
                    if nid in out:
                        out[nid][d.resource] = out[nid].get(d.resource, 0) + 1
    return out


@dataclass(frozen=True)
class FreeLayout:
    """Where :func:`numa_free_columns` puts one machine's free amounts: per column of a
    resource, per NUMA slot (the machine's NUMA node ids in order). Made once per machine by
    :func:`free_layout`."""

    machine: Machine
    width: int  # columns
    slots: int
    #: (column of ``cpu``, ((slot, CPUs of that NUMA node), ...)); None: no exclusive CPUs
    cpu: tuple[int, tuple[tuple[int, frozenset[int]], ...]] | None
    #: Static memory manager: NUMA node id -> slot; resource -> column (None: no tables)
    memory_slots: Mapping[int, int] | None
    memory_cols: Mapping[str, int]
    #: healthy devices with topology and a column: ((resource, id), column, slots)
    devices: tuple[tuple[tuple[str, str], int, tuple[int, ...]], ...]


def free_layout(machine: Machine, columns: Mapping[str, int], slots: int) -> FreeLayout:
    """The :class:`FreeLayout` of ``machine`` for ``columns`` (resource -> column) and
    ``slots`` (at least the machine's NUMA node count)."""
    m = machine
    slot_of = {nid: s for s, nid in enumerate(m.node_ids)}
    cpu = None
    if CPU in columns and m.kubelet.cpu_manager_policy == CPU_STATIC:
        cpu = (columns[CPU], tuple((s, m.cpus_by_numa[nid]) for s, nid in enumerate(m.node_ids)
                                   if m.cpus_by_numa.get(nid)))
    devices = tuple(
        ((d.resource, d.id), columns[d.resource], tuple(slot_of[n] for n in d.numa if n in slot_of))
        for d in m.devices if d.healthy and d.numa and d.resource in columns
    )
    return FreeLayout(m, len(columns), slots, cpu,
                      slot_of if m.kubelet.memory_manager_policy == MEMORY_STATIC else None,
                      dict(columns), devices)


def numa_free_columns(node: NodeView, layout: FreeLayout) -> list[list[int]]:
    """:func:`numa_free` laid out for a vectorised reader (``layout`` is the node machine's
    :func:`free_layout`): per column, per NUMA slot, the free amount (0 where
    :func:`numa_free` has none; resources without a column are left out). The same amounts
    as :func:`numa_free`, without its dicts: the scheduler's prefilter reads this after
    every bind."""
    st = node.state
    slots = layout.slots
    cols = [[0] * slots for _ in range(layout.width)]
    if layout.cpu is not None:
        free = st.cpu.default_set - node.reserved_cpus
        row = cols[layout.cpu[0]]
        for s, cpus in layout.cpu[1]:
            row[s] = len(cpus & free)
    slot_of = layout.memory_slots
    if slot_of is not None:
        mem_cols = layout.memory_cols
        for nid, ns in st.memory.machine_state.items():
            at = slot_of.get(nid)
            if at is None:
                continue
            for res, table in ns.memory_map.items():
                col = mem_cols.get(res)
                if col is not None:
                    cols[col][at] = table.free
    if layout.devices:
        taken = st.devices.taken()
        for key, col, slots_of in layout.devices:
            if key not in taken:
                row = cols[col]
                for s in slots_of:
                    row[s] += 1
    return cols


# -------------------------------------------------------------------------- demand


def numa_demand(machine: Machine, pod: Pod, scope: Scope) -> list[dict[str, int]]:
    """The requests the node's managers bind to NUMA nodes: one dict per container (container
    scope: init, sidecar and app containers, each on its own) or one for the pod (pod scope).

    Exclusive CPUs under the static CPU manager; memory and hugepages of Guaranteed pods under
    the Static memory manager; devices of resources that have NUMA topology.
    """
    kc = machine.kubelet
    cpu_static = kc.cpu_manager_policy == CPU_STATIC
    mem_static = kc.memory_manager_policy == MEMORY_STATIC and pod.qos is QOSClass.GUARANTEED
    topo_devices = {d.resource for d in machine.devices if d.numa}

    def of(requests: Mapping[str, int], limits: Mapping[str, int], cpus: int) -> dict[str, int]:
        out: dict[str, int] = {}
        if cpu_static and cpus:
            out[CPU] = cpus
        if mem_static:
            for r, v in requests.items():
                if is_memory_resource(r) and v > 0:
                    out[r] = v
        for r, v in limits.items():
            if r in topo_devices and v > 0:
                out[r] = v
        return out

    if scope is Scope.POD:
        return [of(effective_pod_requests(pod), effective_pod_limits(pod), pod_guaranteed_cpus(pod))]
    return [
        of(c.requests, c.limits, guaranteed_cpus(pod, c))
        for c in pod.containers
        if c.kind in (ContainerKind.INIT, ContainerKind.SIDECAR, ContainerKind.APP)
    ]


def numa_capacities(node: NodeView, resource: str) -> tuple[list[int], list[int]]:
    """Per NUMA node (machine order), the capacity the providers size preferred masks by:
    ``(generous, strict)``.

    CPUs: online CPUs (both). Memory and hugepages: the memory manager's allocatable (strict;
    generous falls back to physical memory without a table). Devices: those near the node
    (generous: a device near several nodes counts on each; strict: single-node devices only).
    """
    m, st = node.machine, node.state
    generous: list[int] = []
    strict: list[int] = []
    for numa in m.numa_nodes:
        if resource == CPU:
            n = len(m.cpus_by_numa.get(numa.id, ()))
            generous.append(n)
            strict.append(n)
        elif is_memory_resource(resource):
            amounts = st.memory.amounts(numa.id, resource)
            if amounts is None:
                generous.append(numa.memory if resource == MEMORY else 0)
                strict.append(0)
            else:
                generous.append(amounts[0])
                strict.append(amounts[0])
        else:
            generous.append(sum(1 for d in m.devices if d.resource == resource and numa.id in d.numa))
            strict.append(sum(1 for d in m.devices if d.resource == resource and d.numa == (numa.id,)))
    return generous, strict


def fewest_nodes(caps: Iterable[int], demand: int) -> int:
    """The fewest of ``caps`` (largest first) that add up to ``demand`` (all, if none do)."""
    total = 0
    ordered = sorted(caps, reverse=True)
    for j, c in enumerate(ordered):
        total += c
        if total >= demand:
            return max(1, j + 1)
    return max(1, len(ordered))


def fewest_numa_nodes(node: NodeView, pod: Pod, scope: Scope, *, strict: bool = False) -> int:
    """The fewest NUMA nodes the pod's NUMA-bound requests need on ``node`` (0: none bound):
    the largest, over containers (or the pod) and resources, of :func:`fewest_nodes`."""
    m = node.machine
    best = 0
    for demand in numa_demand(m, pod, scope):
        for res, amount in demand.items():
            caps = numa_capacities(node, res)[1 if strict else 0]
            best = max(best, fewest_nodes(caps, amount))
    return best


# ------------------------------------------------------------------ observed usage


@dataclass(frozen=True)
class ObservedUsage:
    """Usage learnt from outside numalign, per NUMA node.

    * ``cpus``: NUMA node -> exclusively assigned CPU ids (exact), or
      ``cpu_counts``: NUMA node -> how many (the highest free ids are taken);
    * ``memory``: NUMA node -> resource -> bytes in use;
    * ``memory_groups``: NUMA node -> (cells, assignments) of its memory assignments (a node with
      memory in use and no entry is one single-node assignment);
    * ``devices``: NUMA node -> resource -> how many devices in use;
    * ``device_ids``: resource -> the ids of devices in use (exact, e.g. from the kubelet's
      podresources API; ids the machine does not have are ignored).
    """

    cpus: Mapping[int, frozenset[int]] = field(default_factory=dict)
    cpu_counts: Mapping[int, int] = field(default_factory=dict)
    memory: Mapping[int, Mapping[str, int]] = field(default_factory=dict)
    memory_groups: Mapping[int, tuple[tuple[int, ...], int]] = field(default_factory=dict)
    devices: Mapping[int, Mapping[str, int]] = field(default_factory=dict)
    device_ids: Mapping[str, frozenset[str]] = field(default_factory=dict)


def apply_observed(node: NodeView, observed: ObservedUsage, uid: str = OBSERVED_UID) -> NodeState:
    """A copy of the node's state with ``observed`` applied through the managers, held by one
    synthetic pod ``uid`` (a :class:`PodRecord` with ``observed=True``)."""
    m, state, reserved = node.machine, node.state, node.reserved_cpus
    work = state.copy()
    used_any = False
    if m.kubelet.cpu_manager_policy == CPU_STATIC:
        for nid in sorted(set(observed.cpus) | set(observed.cpu_counts)):
            zone = m.cpus_by_numa.get(nid, frozenset())
            if nid in observed.cpus:
                taken = frozenset(observed.cpus[nid])
                if not taken <= zone:
                    raise InputError("lists CPUs outside the NUMA node", f"node-{nid}.cpus")
                if taken & reserved:
                    raise InputError("lists CPUs reserved for the system", f"node-{nid}.cpus")
            else:
                free = sorted(work.cpu.shared_pool() & zone - reserved, reverse=True)
                taken = frozenset(free[: max(0, observed.cpu_counts[nid])])
            if taken:
                try:
                    work.cpu.occupy(uid, f"node-{nid}", taken)
                except InputError as e:
                    raise e.within(f"node-{nid}") from None
                used_any = True
    if m.kubelet.memory_manager_policy == MEMORY_STATIC and (observed.memory or observed.memory_groups):
        work.memory.observe(uid, observed.memory, observed.memory_groups)
        used_any = used_any or any(v > 0 for per in observed.memory.values() for v in per.values())
    for nid, per in sorted(observed.devices.items()):
        for res, count in sorted(per.items()):
            if count <= 0:
                continue
            taken_ids = work.devices.taken()
            ids = [d.id for d in m.devices
                   if d.resource == res and d.healthy and d.numa[:1] == (nid,)
                   and (res, d.id) not in taken_ids][:count]
            if ids:
                work.devices.occupy(uid, f"node-{nid}", res, ids)
                used_any = True
    for res, wanted in sorted(observed.device_ids.items()):
        taken_ids = work.devices.taken()
        ids = sorted(d.id for d in m.devices
                     if d.resource == res and d.id in wanted and (res, d.id) not in taken_ids)
        if ids:
            work.devices.occupy(uid, "devices", res, ids)
            used_any = True
    if used_any:
        kc = m.kubelet
        work.pods[uid] = PodRecord(uid, uid, kc.topology_manager_policy, kc.topology_manager_scope,
                                   observed=True)
    return work
