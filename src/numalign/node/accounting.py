"""Per-NUMA-node capacity, allocatable and available amounts of a node.

The numbers a NodeResourceTopology zone publishes (``capacity`` = physical, ``allocatable`` =
minus the kubelet's reservations, ``available`` = minus exclusive assignments of running
pods), derived from a :class:`~numalign.node.admission.Node` and its state. Used by the NRT
exporter, the ``nrt-snn`` scheduler profile, fragmentation metrics and ``numalign state``.

Units: ``cpu`` in whole CPUs, memory and hugepages in bytes, devices in counts.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from numalign.node.admission import Node
from numalign.quantity import CPU, MEMORY, hugepage_resource_name


@dataclass
class ZoneAmounts:
    capacity: dict[str, int] = field(default_factory=dict)
    allocatable: dict[str, int] = field(default_factory=dict)
    available: dict[str, int] = field(default_factory=dict)


def numa_amounts(node: Node) -> dict[int, ZoneAmounts]:
    """NUMA node id -> amounts, per resource."""
    m = node.machine
    out = {i: ZoneAmounts() for i in m.node_ids}
    reserved = node.reserved_cpus
    assigned: set[int] = set()
    for containers in node.state.cpu.assignments.values():
        for cpus in containers.values():
            assigned |= cpus
    for i in m.node_ids:
        cpus = m.cpus_by_numa.get(i, frozenset())
        z = out[i]
        z.capacity[CPU] = len(cpus)
        z.allocatable[CPU] = len(cpus - reserved)
        z.available[CPU] = len(cpus - reserved - assigned)
    mem = node.state.memory.machine_state
    for n in m.numa_nodes:
        z = out[n.id]
        resources = {MEMORY: n.memory}
        for size, total in n.hugepages.items():
            resources[hugepage_resource_name(size)] = total
        for res, total in resources.items():
            z.capacity[res] = total
            table = mem[n.id].table(res) if n.id in mem else None
            if table is None:
                z.allocatable[res] = total
                z.available[res] = total
            else:
                z.allocatable[res] = table.allocatable
                z.available[res] = table.free
    taken: set[tuple[str, str]] = set()
    for per_container in node.state.devices.allocated.values():
        for per_res in per_container.values():
            for res, ids in per_res.items():
                taken.update((res, d) for d in ids)
    for d in m.devices:
        if not d.numa:
            continue
        zone = out.get(d.numa[0])
        if zone is None:
            continue
        z = zone
        z.capacity[d.resource] = z.capacity.get(d.resource, 0) + 1
        z.allocatable.setdefault(d.resource, 0)
        z.available.setdefault(d.resource, 0)
        if d.healthy:
            z.allocatable[d.resource] += 1
            if (d.resource, d.id) not in taken:
                z.available[d.resource] += 1
    return out
