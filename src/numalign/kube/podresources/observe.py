"""What the kubelet's pod-resources API reports, turned into numalign's machine and usage.

* :func:`machine_with_allocatable`: the devices of every resource the kubelet reports in
  ``GetAllocatableResources`` become exactly those (the device plugins' ids and NUMA nodes,
  keeping the machine's PCIe details for ids it also knows); devices of other resources stay.
  Under the static CPU manager, the CPUs it does not list are the reserved ones.
* :func:`observed_usage`: ``List``'s assignments as :class:`~numalign.node.usage.ObservedUsage`:
  exclusive CPUs per NUMA node (a container whose CPUs include a reserved one is in the shared
  pool - older kubelets list the pool - and holds none), device ids, and memory blocks per
  NUMA node (a block spanning several nodes is spread over them in id order, each taking what
  its memory manager table still has free, as the kubelet's Static policy fills a group).
"""

from __future__ import annotations

from numalign.kube.podresources.client import Allocatable, Snapshot
from numalign.machine.model import Device, Machine
from numalign.node.usage import NodeView, ObservedUsage, numa_amounts
from numalign.resources.cpu import POLICY_STATIC as CPU_STATIC


def machine_with_allocatable(machine: Machine, alloc: Allocatable) -> Machine:
    """``machine`` with the kubelet's view of its devices and reserved CPUs."""
    known = {(d.resource, d.id): d for d in machine.devices}
    reported: dict[str, list[Device]] = {}
    for ds in alloc.devices:
        for i in ds.ids:
            old = known.get((ds.resource, i))
            dev = old.replace(numa=ds.numa, healthy=True) if old is not None else Device(
                resource=ds.resource, id=i, numa=ds.numa)
            reported.setdefault(ds.resource, []).append(dev)
    devices = [d for d in machine.devices if d.resource not in reported]
    for res in sorted(reported):
        seen: set[str] = set()
        for d in reported[res]:
            if d.id not in seen:
                seen.add(d.id)
                devices.append(d)
    kubelet = machine.kubelet
    if kubelet.cpu_manager_policy == CPU_STATIC and alloc.cpus:
        online = frozenset(c.id for c in machine.cpus)
        reserved = online - alloc.cpus
        if reserved:
            kubelet = kubelet.replace(reserved_system_cpus=reserved)
    return machine.replace(devices=tuple(devices), kubelet=kubelet)


def observed_usage(node: NodeView, snap: Snapshot) -> ObservedUsage:
    """The usage ``snap`` reports, for ``node`` (its machine from :func:`machine_with_allocatable`)."""
    m, reserved = node.machine, node.reserved_cpus
    cpus: dict[int, set[int]] = {}
    device_ids: dict[str, set[str]] = {}
    singles: dict[int, dict[str, int]] = {}
    spread: list[tuple[tuple[int, ...], str, int]] = []
    groups: dict[int, tuple[tuple[int, ...], int]] = {}
    for pod in snap.pods:
        for c in pod.containers:
            if c.cpus and not (c.cpus & reserved):
                for cpu in c.cpus:
                    info = m.cpu_by_id.get(cpu)
                    if info is not None:
                        cpus.setdefault(info.numa, set()).add(cpu)
            for ds in c.devices:
                device_ids.setdefault(ds.resource, set()).update(ds.ids)
            for b in c.memory:
                if not b.numa:
                    continue
                for nid in b.numa:  # the memory manager counts every block, empty ones too
                    cells, count = groups.get(nid, (b.numa, 0))
                    groups[nid] = (tuple(sorted(set(cells) | set(b.numa))), count + 1)
                if b.size <= 0:
                    continue
                if len(b.numa) == 1:
                    per = singles.setdefault(b.numa[0], {})
                    per[b.type] = per.get(b.type, 0) + b.size
                else:
                    spread.append((b.numa, b.type, b.size))
    memory = {nid: dict(per) for nid, per in singles.items()}
    if spread:
        amounts = numa_amounts(node)
        for cells, res, size in spread:
            left = size
            for nid in cells:
                zone = amounts.get(nid)
                if zone is None or left <= 0:
                    continue
                free = zone.allocatable.get(res, 0) - memory.get(nid, {}).get(res, 0)
                take = max(0, min(free, left))
                if nid == cells[-1]:
                    take = left
                if take:
                    per = memory.setdefault(nid, {})
                    per[res] = per.get(res, 0) + take
                    left -= take
    return ObservedUsage(
        cpus={nid: frozenset(ids) for nid, ids in cpus.items()},
        memory=memory,
        memory_groups=groups,
        device_ids={r: frozenset(ids) for r, ids in device_ids.items()},
    )
