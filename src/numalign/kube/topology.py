"""NodeResourceTopology objects <-> node engines, for the exporter and the extender.

The exporter (:func:`build_nrt`) writes what the NRT CRD defines - zones ``node-<id>`` with
costs and ``capacity``/``allocatable``/``available`` per resource, the Topology Manager
attributes and the pod-set fingerprint - plus a few ``numalign.io/*`` attributes that other
consumers ignore and that let the extender rebuild the node's engine exactly:

* node: ``numalign.io/cpuManagerPolicy``, ``numalign.io/cpuManagerPolicyOptions``
  (``k=v,k=v``), ``numalign.io/reservedSystemCPUs`` (cpulist), ``numalign.io/memoryManagerPolicy``;
* zone: ``numalign.io/assignedCpus`` (the zone's exclusively assigned CPUs, cpulist),
  ``numalign.io/memoryNumaGroup`` (cpulist) and ``numalign.io/memoryAssignments`` (count): the
  memory manager's NUMA group of the zone (its ``cells``) while it holds assignments.

The extender (:func:`engine_from_nrt`) reads any NRT (numalign's or another producer's):
the machine comes from :func:`numalign.machine.nrt.nrt_to_machine`; the kubelet policies from
the ``numalign.io`` attributes, or, without them, are inferred (static CPU manager when some
zone's ``cpu`` allocatable is below capacity, the lowest CPU ids of such a zone being the
reserved ones; memory manager ``None``). The published availability is then applied to a
fresh node state through the managers (:func:`numalign.node.usage.apply_observed`) as one
synthetic occupant (uid :data:`NRT_USAGE_UID`): the assigned CPUs (exact with
``numalign.io/assignedCpus``, else the zone's highest free CPU ids), memory and hugepages
``free`` lowered to ``available`` with the memory manager's NUMA groups (exact with the
``numalign.io/memory*`` attributes; else each zone with memory in use is a single-node
assignment, so it joins no new multi-NUMA group), and ``allocatable - available`` devices of
each zone taken. Devices counted in ``capacity`` but not in ``allocatable`` are unhealthy.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from numalign.cpulist import format_cpulist, parse_cpulist
from numalign.errors import InputError
from numalign.machine.model import Device, ReservedMemory
from numalign.machine.nrt import machine_to_nrt, nrt_to_machine
from numalign.node.admission import Node
from numalign.node.usage import ObservedUsage, apply_observed, numa_amounts
from numalign.quantity import (
    CPU,
    MEMORY,
    format_amount,
    is_hugepages_resource,
    is_memory_resource,
    parse_quantity,
    quantity_int,
)
from numalign.resources.cpu import POLICY_NONE as CPU_NONE
from numalign.resources.cpu import POLICY_STATIC as CPU_STATIC
from numalign.resources.memory import POLICY_NONE as MEMORY_NONE
from numalign.resources.memory import POLICY_STATIC as MEMORY_STATIC

ATTR_CPU_POLICY = "numalign.io/cpuManagerPolicy"
ATTR_CPU_OPTIONS = "numalign.io/cpuManagerPolicyOptions"
ATTR_RESERVED_CPUS = "numalign.io/reservedSystemCPUs"
ATTR_MEMORY_POLICY = "numalign.io/memoryManagerPolicy"
ATTR_ASSIGNED_CPUS = "numalign.io/assignedCpus"
#: zone: the NUMA group (cpulist of NUMA ids) the zone's memory assignments span, and how many
#: assignments the memory manager counts there (its ``cells`` / ``numberOfAssignments``)
ATTR_MEMORY_GROUP = "numalign.io/memoryNumaGroup"
ATTR_MEMORY_ASSIGNMENTS = "numalign.io/memoryAssignments"
ATTR_FINGERPRINT = "nodeTopologyPodsFingerprint"
#: node-level requests of the admitted pods together ("cpu=2000,memory=1073741824") and their
#: count, for the kubelet's predicate admission (issue 13); absent in NRTs of other producers
ATTR_NODE_REQUESTED = "numalign.io/nodeRequested"
ATTR_NODE_PODS = "numalign.io/nodePods"
#: the node status' allocatable the predicate admission compares against ("cpu=63000,...")
ATTR_NODE_ALLOCATABLE = "numalign.io/nodeAllocatable"
ATTR_FINGERPRINT_METHOD = "nodeTopologyPodsFingerprintMethod"
ANNOTATION_FINGERPRINT = "topology.node.k8s.io/fingerprint"
#: numalign's own fingerprint format (NOT the podfingerprint library's ``pfp0v001...``)
FINGERPRINT_METHOD = "numalign-sha256"
FINGERPRINT_PREFIX = "nfp0v001"
NRT_USAGE_UID = "numalign.io/nrt-usage"  # the synthetic occupant of published usage

def pods_fingerprint(keys: Iterable[str]) -> str:
    """A stable hash of the pod set (sorted, de-duplicated ``namespace/name`` or uid keys).

    ``nfp0v001`` + the first 16 hex digits of SHA-256 over the sorted keys joined by newlines.
    Not the podfingerprint library's format: equal sets give equal values, that is all.
    """
    text = "\n".join(sorted(set(keys)))
    return FINGERPRINT_PREFIX + hashlib.sha256(text.encode()).hexdigest()[:16]


def _options_text(opts: Mapping[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(opts.items()))


def _options_parse(text: str, where: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in text.split(","):
        if not part.strip():
            continue
        k, sep, v = part.partition("=")
        if not sep or not k.strip():
            raise InputError(f"expected k=v pairs, got {text!r}", where)
        out[k.strip()] = v.strip()
    return out


def build_nrt(node: Node, pod_keys: Iterable[str] | None = None, name: str | None = None) -> dict[str, Any]:
    """The NodeResourceTopology of ``node`` (its machine, kubelet configuration and state).

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
        order += sorted(r for r in z.capacity if "/" in r)
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
        p.key for p in node.state.pods.values()
    ]
    fp = pods_fingerprint(keys)
    attrs: list[dict[str, str]] = doc["attributes"]
    attrs.append({"name": ATTR_CPU_POLICY, "value": k.cpu_manager_policy})
    if k.cpu_manager_policy_options:
        attrs.append({"name": ATTR_CPU_OPTIONS, "value": _options_text(k.cpu_manager_policy_options)})
    if k.cpu_manager_policy == CPU_STATIC and node.reserved_cpus:
        attrs.append({"name": ATTR_RESERVED_CPUS, "value": format_cpulist(node.reserved_cpus)})
    attrs.append({"name": ATTR_MEMORY_POLICY, "value": k.memory_manager_policy})
    requested, count = node.requested()
    attrs.append({"name": ATTR_NODE_REQUESTED,
                  "value": _amounts_text(requested)})
    attrs.append({"name": ATTR_NODE_PODS, "value": str(count)})
    attrs.append({"name": ATTR_NODE_ALLOCATABLE, "value": _amounts_text(node.allocatable)})
    attrs.append({"name": ATTR_FINGERPRINT, "value": fp})
    attrs.append({"name": ATTR_FINGERPRINT_METHOD, "value": FINGERPRINT_METHOD})
    doc["metadata"]["annotations"] = {ANNOTATION_FINGERPRINT: fp}
    return doc


# ------------------------------------------------------------------------------- reading


def _attr_map(items: object) -> dict[str, str]:
    out: dict[str, str] = {}
    if isinstance(items, list):
        for a in items:
            if isinstance(a, dict) and isinstance(a.get("name"), str):
                out[a["name"]] = str(a.get("value", ""))
    return out


def _zone_amounts(obj: Mapping[str, Any]) -> dict[int, dict[str, dict[str, int]]]:
    """zone id -> resource -> {capacity, allocatable, available} (engine units)."""
    out: dict[int, dict[str, dict[str, int]]] = {}
    for i, z in enumerate(obj.get("zones") or []):
        if not isinstance(z, dict) or z.get("type") != "Node":
            continue
        nid = int(str(z.get("name", "")).removeprefix("node-"))
        per: dict[str, dict[str, int]] = {}
        for j, r in enumerate(z.get("resources") or []):
            rname = r["name"]
            vals: dict[str, int] = {}
            for key in ("capacity", "allocatable", "available"):
                raw = r.get(key, r.get("capacity"))
                vals[key] = quantity_int(parse_quantity(raw, f"zones[{i}].resources[{j}].{key}"))
            vals["allocatable"] = min(vals["allocatable"], vals["capacity"])
            vals["available"] = max(0, min(vals["available"], vals["allocatable"]))
            per[rname] = vals
        out[nid] = per
    return out


def fingerprint_of(obj: Mapping[str, Any]) -> str | None:
    return _attr_map(obj.get("attributes")).get(ATTR_FINGERPRINT)


def engine_from_nrt(obj: object) -> Node:
    """A node engine whose state shows what ``obj`` (an NRT object) says is available."""
    machine = nrt_to_machine(obj)
    assert isinstance(obj, dict)
    attrs = _attr_map(obj.get("attributes"))
    amounts = _zone_amounts(obj)
    zone_attrs = {
        int(str(z.get("name", "")).removeprefix("node-")): _attr_map(z.get("attributes"))
        for z in obj.get("zones") or []
        if isinstance(z, dict) and z.get("type") == "Node"
    }
    # --- kubelet policies
    reserved: set[int] = set()
    if ATTR_RESERVED_CPUS in attrs:
        reserved = set(parse_cpulist(attrs[ATTR_RESERVED_CPUS], f"attributes.{ATTR_RESERVED_CPUS}"))
    else:
        for nid, per in amounts.items():
            cpu = per.get(CPU)
            if cpu and cpu["allocatable"] < cpu["capacity"]:
                ids = sorted(machine.cpus_by_numa.get(nid, frozenset()))
                reserved.update(ids[: cpu["capacity"] - cpu["allocatable"]])
    cpu_policy = attrs.get(ATTR_CPU_POLICY, CPU_STATIC if reserved else CPU_NONE)
    cpu_options = _options_parse(attrs.get(ATTR_CPU_OPTIONS, ""), f"attributes.{ATTR_CPU_OPTIONS}")
    mem_policy = attrs.get(ATTR_MEMORY_POLICY, MEMORY_NONE)
    reserved_memory: list[ReservedMemory] = []
    if mem_policy == MEMORY_STATIC:
        for nid, per in sorted(amounts.items()):
            limits: dict[str, int] = {}
            huge_total = sum(v["capacity"] for r, v in per.items() if is_hugepages_resource(r))
            for r, v in per.items():
                if r == MEMORY:
                    limits[r] = max(0, v["capacity"] - v["allocatable"] - huge_total)
                elif is_hugepages_resource(r):
                    limits[r] = v["capacity"] - v["allocatable"]
            limits = {r: n for r, n in limits.items() if n > 0}
            if limits:
                reserved_memory.append(ReservedMemory(nid, limits))
    # --- devices: capacity - allocatable of them are unhealthy
    devices: list[Device] = []
    unhealthy_left: dict[tuple[int, str], int] = {}
    for nid, per in amounts.items():
        for r, v in per.items():
            if "/" in r:
                unhealthy_left[(nid, r)] = v["capacity"] - v["allocatable"]
    for d in machine.devices:
        key = (d.numa[0] if d.numa else -1, d.resource)
        if unhealthy_left.get(key, 0) > 0:
            unhealthy_left[key] -= 1
            devices.append(replace(d, healthy=False))
        else:
            devices.append(d)
    kubelet = replace(
        machine.kubelet,
        cpu_manager_policy=cpu_policy,
        cpu_manager_policy_options=cpu_options,
        reserved_system_cpus=frozenset(reserved) if cpu_policy == CPU_STATIC and reserved else None,
        memory_manager_policy=mem_policy,
        reserved_memory=tuple(reserved_memory),
    )
    machine = replace(machine, devices=tuple(devices), kubelet=kubelet)
    node = Node(machine)
    node.state = apply_observed(node, _observed(amounts, zone_attrs), NRT_USAGE_UID)
    _node_requested(node, attrs)
    return node


def _amounts_text(amounts: Mapping[str, int]) -> str:
    return ",".join(f"{r}={v}" for r, v in sorted(amounts.items()))


def _amounts(raw: str, where: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in filter(None, raw.split(",")):
        name, _, value = item.partition("=")
        if not name or not value.isdigit() or len(value) > 30:
            raise InputError(f"expected name=amount, got {item!r}", where)
        out[name] = int(value)
    return out


def _node_requested(node: Node, attrs: Mapping[str, str]) -> None:
    """numalign's node allocatable, node-level requests and pod count, for the engine's
    predicate admission (other producers' NRTs lack them: the machine's own figures stay)."""
    if ATTR_NODE_ALLOCATABLE in attrs:
        node.allocatable = _amounts(attrs[ATTR_NODE_ALLOCATABLE],
                                    f"attributes.{ATTR_NODE_ALLOCATABLE}")
    raw, count = attrs.get(ATTR_NODE_REQUESTED), attrs.get(ATTR_NODE_PODS)
    if raw is None or count is None:
        return
    requested = _amounts(raw, f"attributes.{ATTR_NODE_REQUESTED}")
    if not count.isdigit() or len(count) > 9:
        raise InputError(f"expected a pod count, got {count!r}", f"attributes.{ATTR_NODE_PODS}")
    node.external_requests = requested
    node.external_pods = max(0, int(count) - len(node.state.pods))


def _observed(
    amounts: Mapping[int, Mapping[str, Mapping[str, int]]],
    zone_attrs: Mapping[int, Mapping[str, str]],
) -> ObservedUsage:
    """The usage an NRT publishes: ``allocatable - available`` per zone and resource, the
    exact assigned CPUs and memory groups where numalign's attributes give them."""
    cpus: dict[int, frozenset[int]] = {}
    cpu_counts: dict[int, int] = {}
    memory: dict[int, dict[str, int]] = {}
    groups: dict[int, tuple[tuple[int, ...], int]] = {}
    devices: dict[int, dict[str, int]] = {}
    for nid, per in sorted(amounts.items()):
        attrs = zone_attrs.get(nid, {})
        where = f"node-{nid}.attributes"
        if ATTR_ASSIGNED_CPUS in attrs:
            cpus[nid] = parse_cpulist(attrs[ATTR_ASSIGNED_CPUS], f"{where}.{ATTR_ASSIGNED_CPUS}")
        elif CPU in per:
            cpu_counts[nid] = per[CPU]["allocatable"] - per[CPU]["available"]
        if ATTR_MEMORY_GROUP in attrs:
            cells = tuple(sorted(parse_cpulist(attrs[ATTR_MEMORY_GROUP], f"{where}.{ATTR_MEMORY_GROUP}")))
            raw = attrs.get(ATTR_MEMORY_ASSIGNMENTS, "1")
            if not raw.isdigit() or not 0 < int(raw) < 1 << 20:
                raise InputError(f"expected a positive count, got {raw!r}", f"{where}.{ATTR_MEMORY_ASSIGNMENTS}")
            if nid not in cells:
                raise InputError(f"group {list(cells)} does not contain the zone", f"{where}.{ATTR_MEMORY_GROUP}")
            groups[nid] = (cells, int(raw))
        for r, v in per.items():
            used = v["allocatable"] - v["available"]
            if used <= 0:
                continue
            if is_memory_resource(r):
                memory.setdefault(nid, {})[r] = used
            elif "/" in r:
                devices.setdefault(nid, {})[r] = used
    return ObservedUsage(cpus, cpu_counts, memory, groups, devices)
