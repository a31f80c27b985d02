"""NodeResourceTopology objects <-> node engines, for the exporter and the extender.

The exporter (:func:`build_nrt`) writes what the NRT CRD defines - zones ``node-<id>`` with
costs and ``capacity``/``allocatable``/``available`` per resource, the Topology Manager
attributes and the pod-set fingerprint in the podfingerprint library's format
(``pfp0v001...``, :mod:`numalign.kube.fingerprint`, method ``all``) - plus a few
``numalign.io/*`` attributes that other consumers ignore and that let the extender rebuild the
node's engine exactly:

* node: ``numalign.io/cpuManagerPolicy``, ``numalign.io/cpuManagerPolicyOptions``
  (``k=v,k=v``), ``numalign.io/reservedSystemCPUs`` (cpulist), ``numalign.io/memoryManagerPolicy``;
* zone: ``numalign.io/assignedCpus`` (the zone's exclusively assigned CPUs, cpulist),
  ``numalign.io/memoryNumaGroup`` (cpulist) and ``numalign.io/memoryAssignments`` (count): the
  memory manager's NUMA group of the zone (its ``cells``) while it holds assignments.

Reading any producer's NRT back into an engine is :mod:`numalign.kube.nrt_import`
(:func:`engine_from_nrt`, re-exported here).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from numalign.inputs.cpulist import format_cpulist
from numalign.inputs.quantity import CPU, MEMORY, format_amount, is_hugepages_resource
from numalign.kube import fingerprint as pfp
from numalign.kube.nrt_import import (
    ATTR_ASSIGNED_CPUS,
    ATTR_CPU_OPTIONS,
    ATTR_CPU_POLICY,
    ATTR_KUBELET_VERSION,
    ATTR_MEMORY_ASSIGNMENTS,
    ATTR_MEMORY_GROUP,
    ATTR_MEMORY_POLICY,
    ATTR_NO_TOPOLOGY_IN_USE,
    ATTR_NODE_ALLOCATABLE,
    ATTR_NODE_PODS,
    ATTR_NODE_REQUESTED,
    ATTR_RESERVED_CPUS,
    NRT_USAGE_UID,
    amounts_text,
    attr_map,
    engine_from_nrt,
)
from numalign.machine.nrt import format_counts, is_zone_device_resource, machine_to_nrt
from numalign.node.admission import Node
from numalign.node.usage import numa_amounts
from numalign.resources.cpu import POLICY_STATIC as CPU_STATIC

__all__ = [
    "ANNOTATION_FINGERPRINT",
    "ATTR_FINGERPRINT",
    "ATTR_FINGERPRINT_METHOD",
    "FINGERPRINT_METHOD",
    "NRT_USAGE_UID",
    "build_nrt",
    "engine_from_nrt",
    "fingerprint_of",
    "pods_fingerprint",
]

ATTR_FINGERPRINT = pfp.ATTRIBUTE
ATTR_FINGERPRINT_METHOD = pfp.ATTRIBUTE_METHOD
ANNOTATION_FINGERPRINT = pfp.ANNOTATION
#: every pod the node runs is in the set (the library's ``all`` method)
FINGERPRINT_METHOD = pfp.METHOD_ALL


def pods_fingerprint(keys: Iterable[str]) -> str:
    """The podfingerprint (``pfp0v001...``) of a pod set given as ``namespace/name`` keys
    (de-duplicated: a set of pods; a key without ``/`` is a name in namespace ``""``)."""
    return pfp.pods_fingerprint(pfp.split_key(k) for k in set(keys))


def _options_text(opts: Mapping[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(opts.items()))


def build_nrt(node: Node, pod_keys: Iterable[str] | None = None, name: str | None = None,
              *, node_level: bool = True) -> dict[str, Any]:
    """The NodeResourceTopology of ``node`` (its machine, kubelet configuration and state).

    ``node_level``: publish the node's allocatable and the admitted pods' requests (numalign
    attributes for the kubelet's predicate admission); off where the requests are unknown
    (podresources reports what pods hold, not what they request).

    ``pod_keys`` is the pod set the fingerprint covers (default: the state's pods).
    """
    machine = node.machine
    doc = machine_to_nrt(machine)
    if name is not None:
        doc["metadata"]["name"] = name
    amounts = numa_amounts(node)
    assigned = node.state.cpu.assigned_cpus()
    for zone in doc["zones"]:
        nid = int(zone["name"].removeprefix("node-"))
        z = amounts[nid]
        order = [CPU, MEMORY]
        order += sorted(r for r in z.capacity if is_hugepages_resource(r))
        order += sorted(r for r in z.capacity if is_zone_device_resource(r))
        zone["resources"] = [
            {
                "name": r,
                "capacity": format_amount(r, z.capacity[r]),
                "allocatable": format_amount(r, z.allocatable.get(r, 0)),
                "available": format_amount(r, z.available.get(r, 0)),
            }
            for r in order
            if r in z.capacity
        ]
        mine = assigned & machine.cpus_by_numa.get(nid, frozenset())
        if mine:
            zone.setdefault("attributes", []).append(
                {"name": ATTR_ASSIGNED_CPUS, "value": format_cpulist(mine)}
            )
        cells, count = node.state.memory.group(nid)
        if count:
            zone.setdefault("attributes", []).extend([
                {"name": ATTR_MEMORY_GROUP, "value": format_cpulist(cells)},
                {"name": ATTR_MEMORY_ASSIGNMENTS, "value": str(count)},
            ])
    k = machine.kubelet
    keys = list(pod_keys) if pod_keys is not None else [
        p.key for p in node.state.pods.values() if not p.observed
    ]
    fp = pods_fingerprint(keys)
    attrs: list[dict[str, str]] = doc["attributes"]
    attrs.append({"name": ATTR_CPU_POLICY, "value": k.cpu_manager_policy})
    if k.cpu_manager_policy_options:
        attrs.append({"name": ATTR_CPU_OPTIONS, "value": _options_text(k.cpu_manager_policy_options)})
    if k.cpu_manager_policy == CPU_STATIC and node.reserved_cpus:
        attrs.append({"name": ATTR_RESERVED_CPUS, "value": format_cpulist(node.reserved_cpus)})
    attrs.append({"name": ATTR_MEMORY_POLICY, "value": k.memory_manager_policy})
    if k.kubelet_version:
        attrs.append({"name": ATTR_KUBELET_VERSION, "value": str(k.kubelet_version)})
    if node_level:
        requested, count = node.requested()
        attrs.append({"name": ATTR_NODE_REQUESTED, "value": amounts_text(requested)})
        attrs.append({"name": ATTR_NODE_PODS, "value": str(count)})
        attrs.append({"name": ATTR_NODE_ALLOCATABLE, "value": amounts_text(node.allocatable)})
    taken = node.state.devices.taken()
    in_use: dict[str, int] = {}
    for d in machine.devices:
        if d.healthy and not d.numa and (d.resource, d.id) in taken:
            in_use[d.resource] = in_use.get(d.resource, 0) + 1
    if in_use:
        attrs.append({"name": ATTR_NO_TOPOLOGY_IN_USE, "value": format_counts(in_use)})
    attrs.append({"name": ATTR_FINGERPRINT, "value": fp})
    attrs.append({"name": ATTR_FINGERPRINT_METHOD, "value": FINGERPRINT_METHOD})
    doc["metadata"]["annotations"] = {ANNOTATION_FINGERPRINT: fp}
    return doc


# ------------------------------------------------------------------------------- reading


def fingerprint_of(obj: Mapping[str, Any]) -> str | None:
    return attr_map(obj.get("attributes")).get(ATTR_FINGERPRINT)
