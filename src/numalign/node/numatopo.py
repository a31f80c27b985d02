"""Volcano's ``Numatopology`` (``nodeinfo.volcano.sh/v1alpha1``) for a node: write it, and read
the usage it reports.

The machine half (``cpuDetail``, ``policies``, ``resReserved``) is read by
:mod:`numalign.machine.numatopo`; this module adds what depends on the node's state, as
volcano-sh/resource-exporter publishes it (``pkg/numatopo``, types in volcano-sh/apis
``pkg/apis/nodeinfo/v1alpha1/numatopo_types.go``):

* ``numares.cpu``: ``allocatable`` = the CPUs no pod holds exclusively (the kubelet's
  ``defaultCpuSet``, reserved CPUs included) as a cpuset string, ``capacity`` = every CPU;
* ``podAllocations``: per pod and container, the exclusive CPUs (``allocations.cpu``);
* ``resReserved``: the kubelet's reserved cpu (``<millis>m``) and memory (bytes).

:func:`build_numatopo` writes the object; :func:`numatopo_usage` reads ``numares.cpu.allocatable``
and ``podAllocations`` back as :class:`~numalign.node.usage.ObservedUsage` (CPUs in use per NUMA
node) for :func:`~numalign.node.usage.apply_observed`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from numalign.errors import InputError
from numalign.inputs.cpulist import format_cpulist, parse_cpulist
from numalign.machine.model import Machine
from numalign.node.usage import NodeView, ObservedUsage, pods_usage

API_VERSION = "nodeinfo.volcano.sh/v1alpha1"
KIND = "Numatopology"


def build_numatopo(node: NodeView, name: str) -> dict[str, Any]:
    """The Numatopology object resource-exporter would publish for ``node``."""
    m = node.machine
    kc = m.kubelet
    usage = pods_usage(m, node.state)
    held: set[int] = set()
    allocations: list[dict[str, Any]] = []
    for pu in usage:
        if pu.record.observed:
            held |= {c for cu in pu.containers for c in cu.cpus}
            continue
        containers = [
            {"name": cu.name, "allocations": {"cpu": format_cpulist(cu.cpus)}} for cu in pu.containers if cu.cpus
        ]
        held |= {c for cu in pu.containers for c in cu.cpus}
        if containers:
            entry: dict[str, Any] = {"uid": pu.uid}
            ns, sep, pod_name = pu.record.key.partition("/")
            if sep:
                entry.update(namespace=ns, name=pod_name)
            entry["containerAllocations"] = containers
            allocations.append(entry)
    all_cpus = [c.id for c in m.cpus]
    reserved: dict[str, str] = {}
    reserved_cpu = kc.kube_reserved.get("cpu", 0) + kc.system_reserved.get("cpu", 0)
    if node.reserved_cpus:
        reserved_cpu = max(reserved_cpu, 1000 * len(node.reserved_cpus))
    if reserved_cpu:
        reserved["cpu"] = f"{reserved_cpu}m"
    reserved_memory = kc.kube_reserved.get("memory", 0) + kc.system_reserved.get("memory", 0)
    if reserved_memory:
        reserved["memory"] = str(reserved_memory)
    spec: dict[str, Any] = {
        "policies": {
            "CPUManagerPolicy": kc.cpu_manager_policy,
            "TopologyManagerPolicy": kc.topology_manager_policy,
        },
        "resReserved": reserved,
        "numares": {"cpu": {"allocatable": format_cpulist(set(all_cpus) - held), "capacity": len(all_cpus)}},
        "cpuDetail": {str(c.id): {"numa": c.numa, "socket": c.socket, "core": c.core} for c in m.cpus},
    }
    if allocations:
        spec["podAllocations"] = allocations
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": name}, "spec": spec}


def numatopo_usage(obj: object, machine: Machine) -> ObservedUsage:
    """The exclusive CPUs in use per NUMA node that a Numatopology reports: every CPU outside
    ``numares.cpu.allocatable`` (when given) and every CPU in ``podAllocations``."""
    if not isinstance(obj, Mapping):
        raise InputError("a Numatopology must be a mapping")
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        raise InputError("required mapping", "spec")
    all_cpus = frozenset(c.id for c in machine.cpus)
    used: set[int] = set()
    numares = spec.get("numares") or {}
    if not isinstance(numares, Mapping):
        raise InputError("must be a mapping", "spec.numares")
    cpu = numares.get("cpu")
    if isinstance(cpu, Mapping) and cpu.get("allocatable") is not None:
        field = "spec.numares.cpu.allocatable"
        free = parse_cpulist(str(cpu["allocatable"]), field)
        if not free <= all_cpus:
            raise InputError(f"lists CPUs the node does not have: {format_cpulist(free - all_cpus)}", field)
        used |= all_cpus - free
    pods = spec.get("podAllocations") or []
    if not isinstance(pods, list):
        raise InputError("must be a list", "spec.podAllocations")
    for i, pod in enumerate(pods):
        where = f"spec.podAllocations[{i}]"
        if not isinstance(pod, Mapping):
            raise InputError("must be a mapping", where)
        for j, ca in enumerate(pod.get("containerAllocations") or []):
            cw = f"{where}.containerAllocations[{j}]"
            allocs = ca.get("allocations") if isinstance(ca, Mapping) else None
            if not isinstance(allocs, Mapping):
                raise InputError("must have allocations", cw)
            if allocs.get("cpu") is not None:
                cpus = parse_cpulist(str(allocs["cpu"]), f"{cw}.allocations.cpu")
                if not cpus <= all_cpus:
                    raise InputError("lists CPUs the node does not have", f"{cw}.allocations.cpu")
                used |= cpus
    by_numa: dict[int, set[int]] = {}
    for c in machine.cpus:
        if c.id in used:
            by_numa.setdefault(c.numa, set()).add(c.id)
    return ObservedUsage(cpus={n: frozenset(s) for n, s in by_numa.items()})


__all__ = ["API_VERSION", "KIND", "build_numatopo", "numatopo_usage"]
