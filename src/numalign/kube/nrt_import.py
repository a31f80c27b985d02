"""A NodeResourceTopology (any producer's) -> the node engine the extender decides with.

Every producer publishes zones ``node-<id>`` with ``capacity``/``allocatable``/``available`` per
resource, but they mean different things by them; this module reads them the way each producer
means them and decides the kubelet's policies per node (the table is in docs/kubernetes.md,
"Reading NRTs from other producers"):

* Topology Manager: :func:`numalign.machine.nrt.nrt_to_machine` (attributes over the v1alpha1
  ``topologyPolicies``; invalid values ignored, as scheduler-plugins does).
* CPU manager: ``numalign.io/cpuManagerPolicy`` when valid; else ``none`` when no zone has
  allocatable CPUs (NFD and RTE publish ``allocatable: 0`` under ``none``: the kubelet's
  ``GetAllocatableResources`` lists CPUs only under ``static``), else ``static``. Reserved CPUs:
  ``numalign.io/reservedSystemCPUs``, else ``capacity - allocatable`` lowest ids of each zone;
  none visible (scheduler-plugins' fixtures) -> an empty reservation, so exactly the published
  ``available`` CPUs can be taken, which is what scheduler-plugins' filter compares.
* Memory manager: ``numalign.io/memoryManagerPolicy`` when valid; else ``Static`` when some
  zone lists ``memory`` or ``hugepages-*`` (NFD and RTE list them only under ``Static``, from
  ``GetAllocatableResources``; scheduler-plugins' filter compares them whenever listed), else
  ``None``. The NUMA node's memory is sized so the engine's allocatable equals the zone's.
* Devices: every other zone resource, prefixed or not (``gpu`` too), ``capacity - allocatable``
  of them unhealthy. A resource in no zone is a device plugin without topology: the engine
  admits it without alignment (the kubelet gives it no hint; scheduler-plugins treats it as
  host-level), and the default scheduler's fit check counts it. numalign's own NRTs list such
  devices in ``numalign.io/devicesWithoutTopology`` (and how many are in use). A resource no
  device plugin registered at all is admitted without devices, as the kubelet admits it.

Node labels the engine reads (:data:`NODE_LABEL_KEYS`: the engine mode ``numalign.io/engine-mode``
and Koordinator's ``node.koordinator.sh/numa-topology-policy``, ``cpu-bind-policy``,
``numa-allocate-strategy``) come from the NRT's ``metadata.labels`` or from node-level attributes
of the same name (an attribute wins): a node in the ``koordinator`` mode then decides with
Koordinator's rules (:mod:`numalign.modes`), whatever the extender's profile. koordlet's
``kubelet.koordinator.sh/cpu-manager-policy`` NRT annotation (:data:`NODE_ANNOTATION_KEYS`) is
kept on the machine for that mode (``full-pcpus-only`` and the kubelet's reserved CPUs).

The published availability is applied to a fresh state through the managers
(:func:`numalign.node.usage.apply_observed`) as one synthetic occupant (:data:`NRT_USAGE_UID`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from numalign.errors import InputError
from numalign.inputs.cpulist import parse_cpulist
from numalign.inputs.quantity import (
    CPU,
    MEMORY,
    is_hugepages_resource,
    parse_quantity,
    quantity_int,
)
from numalign.machine.kubelet_version import parse_kubelet_version
from numalign.machine.model import Device, Machine, ReservedMemory
from numalign.machine.node_annotations import KUBELET_CPU_MANAGER_POLICY, parse_kubelet_cpu_policy
from numalign.machine.nrt import is_zone_device_resource, nrt_to_machine, parse_counts
from numalign.modes.koordinator.cpu import (
    NODE_CPU_BIND_POLICY_LABEL,
    NODE_NUMA_ALLOCATE_STRATEGY_LABEL,
)
from numalign.modes.koordinator.numa import KOORDINATOR_NODE_POLICY_LABEL
from numalign.modes.registry import MODE_LABEL, family_of, parse_mode
from numalign.node.admission import Node
from numalign.node.usage import ObservedUsage, apply_observed
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
#: node: how many of ``numalign.io/devicesWithoutTopology`` are in use, ``resource=count,...``
ATTR_NO_TOPOLOGY_IN_USE = "numalign.io/devicesWithoutTopologyInUse"
#: node-level requests of the admitted pods together ("cpu=2000,memory=1073741824") and their
#: count, for the kubelet's predicate admission; absent in NRTs of other producers
ATTR_NODE_REQUESTED = "numalign.io/nodeRequested"
ATTR_NODE_PODS = "numalign.io/nodePods"
#: the node status' allocatable the predicate admission compares against ("cpu=63000,...")
ATTR_NODE_ALLOCATABLE = "numalign.io/nodeAllocatable"
#: the node's kubelet version (``Node.status.nodeInfo.kubeletVersion`` form, ``v1.33.4``): the
#: release the node decides by (``docs/kubelet-releases.md``); absent = the newest modelled
ATTR_KUBELET_VERSION = "numalign.io/kubeletVersion"
NRT_USAGE_UID = "numalign.io/nrt-usage"  # the synthetic occupant of published usage
#: node labels the engine reads from an NRT (``metadata.labels`` or node attributes)
NODE_LABEL_KEYS = (
    MODE_LABEL, KOORDINATOR_NODE_POLICY_LABEL, NODE_CPU_BIND_POLICY_LABEL, NODE_NUMA_ALLOCATE_STRATEGY_LABEL,
)

#: NRT annotations the engine reads (koordlet's report of the kubelet's CPU manager)
NODE_ANNOTATION_KEYS = (KUBELET_CPU_MANAGER_POLICY,)

Amounts = dict[int, dict[str, dict[str, int]]]


class NrtNode(Node):
    """A node engine built from an NRT: the reserved CPUs are what the NRT shows (possibly
    none)."""

    def __init__(self, machine: Machine, reserved: frozenset[int]) -> None:
        super().__init__(machine)
        self._reserved = reserved


def attr_map(items: object) -> dict[str, str]:
    out: dict[str, str] = {}
    if isinstance(items, list):
        for a in items:
            if isinstance(a, dict) and isinstance(a.get("name"), str):
                out[a["name"]] = str(a.get("value", ""))
    return out


def options_parse(text: str, where: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in text.split(","):
        if not part.strip():
            continue
        k, sep, v = part.partition("=")
        if not sep or not k.strip():
            raise InputError(f"expected k=v pairs, got {text!r}", where)
        out[k.strip()] = v.strip()
    return out


def _zones(obj: Mapping[str, Any]) -> list[tuple[int, dict[str, Any]]]:
    out = []
    for z in obj.get("zones") or []:
        if isinstance(z, dict) and z.get("type") == "Node":
            out.append((int(str(z.get("name", "")).removeprefix("node-")), z))
    return out


def zone_amounts(obj: Mapping[str, Any]) -> Amounts:
    """zone id -> resource -> {capacity, allocatable, available} (engine units); a missing
    ``allocatable``/``available`` is the capacity, and ``available <= allocatable <= capacity``."""
    out: Amounts = {}
    for i, (nid, z) in enumerate(_zones(obj)):
        per: dict[str, dict[str, int]] = {}
        for j, r in enumerate(z.get("resources") or []):
            vals: dict[str, int] = {}
            for key in ("capacity", "allocatable", "available"):
                raw = r.get(key, r.get("capacity"))
                vals[key] = quantity_int(parse_quantity(raw, f"zones[{i}].resources[{j}].{key}"))
            vals["allocatable"] = min(vals["allocatable"], vals["capacity"])
            vals["available"] = max(0, min(vals["available"], vals["allocatable"]))
            per[r["name"]] = vals
        out[nid] = per
    return out


def infer_cpu_policy(attrs: Mapping[str, str], amounts: Amounts) -> str:
    given = attrs.get(ATTR_CPU_POLICY)
    if given in (CPU_NONE, CPU_STATIC):
        return given
    allocatable = sum(per[CPU]["allocatable"] for per in amounts.values() if CPU in per)
    return CPU_STATIC if allocatable > 0 else CPU_NONE


def infer_memory_policy(attrs: Mapping[str, str], amounts: Amounts) -> str:
    given = attrs.get(ATTR_MEMORY_POLICY)
    if given in (MEMORY_NONE, MEMORY_STATIC):
        return given
    listed = any(r == MEMORY or is_hugepages_resource(r) for per in amounts.values() for r in per)
    return MEMORY_STATIC if listed else MEMORY_NONE


def _reserved_cpus(machine: Machine, attrs: Mapping[str, str], amounts: Amounts) -> frozenset[int]:
    if ATTR_RESERVED_CPUS in attrs:
        return parse_cpulist(attrs[ATTR_RESERVED_CPUS], f"attributes.{ATTR_RESERVED_CPUS}")
    reserved: set[int] = set()
    for nid, per in amounts.items():
        cpu = per.get(CPU)
        if cpu and cpu["allocatable"] < cpu["capacity"]:
            ids = sorted(machine.cpus_by_numa.get(nid, frozenset()))
            reserved.update(ids[: cpu["capacity"] - cpu["allocatable"]])
    return frozenset(reserved)


def _memory_machine(machine: Machine, amounts: Amounts) -> tuple[Machine, tuple[ReservedMemory, ...]]:
    """Under the Static memory manager: each NUMA node's memory sized so the engine's
    allocatable (memory - hugepages - reserved) is the zone's, and the reservations
    (``capacity - allocatable - hugepages`` for memory: NFD's and numalign's capacity is
    MemTotal; ``capacity - allocatable`` per hugepage size).

    The kubelet's Static policy always reserves some memory; an NRT that shows no reservation
    (scheduler-plugins' fixtures) gets a one-byte reservation on its first memory zone, whose
    memory grows by that byte, so the allocatable amounts stay exactly the published ones.
    """
    sized: list[tuple[int, int, dict[str, int]]] = []  # id, memory, limits
    for n in machine.numa_nodes:
        per = amounts.get(n.id, {})
        huge_total = sum(v["capacity"] for r, v in per.items() if is_hugepages_resource(r))
        limits: dict[str, int] = {}
        memory = n.memory
        if MEMORY in per:
            v = per[MEMORY]
            limits[MEMORY] = max(0, v["capacity"] - v["allocatable"] - huge_total)
            memory = max(v["capacity"], v["allocatable"] + huge_total)
        for r, v in per.items():
            if is_hugepages_resource(r):
                limits[r] = v["capacity"] - v["allocatable"]
        sized.append((n.id, memory, {r: x for r, x in limits.items() if x > 0}))
    if not any(lim.get(MEMORY, 0) for _, _, lim in sized):
        first = next((k for k, (nid, _, _) in enumerate(sized) if MEMORY in amounts.get(nid, {})), 0)
        nid, memory, lim = sized[first]
        mem = amounts.get(nid, {}).get(MEMORY)
        if mem is not None:
            huge_total = sum(x["capacity"] for r, x in amounts[nid].items() if is_hugepages_resource(r))
            memory = max(memory, mem["allocatable"] + huge_total + 1)
            lim[MEMORY] = memory - mem["allocatable"] - huge_total
        else:
            memory, lim[MEMORY] = memory + 1, 1
        sized[first] = (nid, memory, lim)
    by_id = dict((nid, mem) for nid, mem, _ in sized)
    nodes = tuple(n.replace(memory=by_id[n.id]) for n in machine.numa_nodes)
    reserved = tuple(ReservedMemory(nid, lim) for nid, _, lim in sized if lim)
    return machine.replace(numa_nodes=nodes), reserved


def _unhealthy(machine: Machine, amounts: Amounts) -> tuple[Device, ...]:
    """The machine's devices with ``capacity - allocatable`` of each zone's marked unhealthy."""
    left = {(nid, r): v["capacity"] - v["allocatable"]
            for nid, per in amounts.items() for r, v in per.items() if is_zone_device_resource(r)}
    out = []
    for d in machine.devices:
        key = (d.numa[0] if d.numa else -1, d.resource)
        if left.get(key, 0) > 0:
            left[key] -= 1
            out.append(d.replace(healthy=False))
        else:
            out.append(d)
    return tuple(out)


def node_labels(obj: Mapping[str, Any], attrs: Mapping[str, str]) -> dict[str, str]:
    """The :data:`NODE_LABEL_KEYS` of the NRT's ``metadata.labels``, overridden by node
    attributes of the same name; the engine mode is checked here (``attributes.<name>``)."""
    meta = obj.get("metadata")
    raw = meta.get("labels") if isinstance(meta, Mapping) else None
    out = {k: v for k, v in (raw or {}).items() if k in NODE_LABEL_KEYS and isinstance(v, str)} \
        if isinstance(raw, Mapping) else {}
    out.update({k: attrs[k] for k in NODE_LABEL_KEYS if k in attrs})
    if out.get(MODE_LABEL):
        where = f"attributes.{MODE_LABEL}" if MODE_LABEL in attrs else f"metadata.labels.{MODE_LABEL}"
        parse_mode(out[MODE_LABEL], where)
    return out


def node_annotations(obj: Mapping[str, Any], labels: Mapping[str, str]) -> dict[str, str]:
    """The :data:`NODE_ANNOTATION_KEYS` of the NRT's ``metadata.annotations``. On a node labelled
    ``koordinator`` a malformed value is an :class:`InputError`; elsewhere it is dropped (the
    kubelet mode never reads it; Koordinator itself logs a bad value and goes on without it)."""
    meta = obj.get("metadata")
    raw = meta.get("annotations") if isinstance(meta, Mapping) else None
    if not isinstance(raw, Mapping):
        return {}
    out = {k: raw[k] for k in NODE_ANNOTATION_KEYS if isinstance(raw.get(k), str)}
    try:
        parse_kubelet_cpu_policy(out, "metadata.annotations")
    except InputError:
        if family_of(labels).reads_koordlet_annotations:
            raise
        return {}
    return out


def engine_from_nrt(obj: object) -> Node:
    """A node engine whose state shows what ``obj`` (an NRT object) says is available."""
    machine = nrt_to_machine(obj)
    assert isinstance(obj, dict)
    attrs = attr_map(obj.get("attributes"))
    amounts = zone_amounts(obj)
    zone_attrs = {nid: attr_map(z.get("attributes")) for nid, z in _zones(obj)}
    cpu_policy = infer_cpu_policy(attrs, amounts)
    reserved = _reserved_cpus(machine, attrs, amounts) if cpu_policy == CPU_STATIC else frozenset()
    cpu_options = options_parse(attrs.get(ATTR_CPU_OPTIONS, ""), f"attributes.{ATTR_CPU_OPTIONS}")
    mem_policy = infer_memory_policy(attrs, amounts)
    reserved_memory: tuple[ReservedMemory, ...] = ()
    if mem_policy == MEMORY_STATIC:
        machine, reserved_memory = _memory_machine(machine, amounts)
    version = attrs.get(ATTR_KUBELET_VERSION)
    kubelet = machine.kubelet.replace(
        kubelet_version=(parse_kubelet_version(version, f"attributes.{ATTR_KUBELET_VERSION}")
                         if version else None),
        cpu_manager_policy=cpu_policy,
        cpu_manager_policy_options=cpu_options,
        reserved_system_cpus=reserved or None,
        memory_manager_policy=mem_policy,
        reserved_memory=reserved_memory,
    )
    labels = node_labels(obj, attrs)
    machine = machine.replace(devices=_unhealthy(machine, amounts), kubelet=kubelet,
                      labels=labels, annotations=node_annotations(obj, labels))
    node = NrtNode(machine, reserved)
    observed = observed_usage(amounts, zone_attrs)
    if ATTR_NO_TOPOLOGY_IN_USE in attrs:
        where = f"attributes.{ATTR_NO_TOPOLOGY_IN_USE}"
        ids: dict[str, frozenset[str]] = {}
        for res, n in parse_counts(attrs[ATTR_NO_TOPOLOGY_IN_USE], where).items():
            ids[res] = frozenset(sorted(d.id for d in machine.devices
                                        if d.resource == res and not d.numa and d.healthy)[:n])
        observed = replace(observed, device_ids=ids)
    node.state = apply_observed(node, observed, NRT_USAGE_UID)
    _node_requested(node, attrs)
    return node


def amounts_text(amounts: Mapping[str, int]) -> str:
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
        node.allocatable = _amounts(attrs[ATTR_NODE_ALLOCATABLE], f"attributes.{ATTR_NODE_ALLOCATABLE}")
    else:  # another producer's NRT: zones only; node-level fit is kube-scheduler's
        node.check_node_fit = False
    raw, count = attrs.get(ATTR_NODE_REQUESTED), attrs.get(ATTR_NODE_PODS)
    if raw is None or count is None:
        return
    requested = _amounts(raw, f"attributes.{ATTR_NODE_REQUESTED}")
    if not count.isdigit() or len(count) > 9:
        raise InputError(f"expected a pod count, got {count!r}", f"attributes.{ATTR_NODE_PODS}")
    node.external_requests = requested
    node.external_pods = max(0, int(count) - len(node.state.pods))


def observed_usage(amounts: Amounts, zone_attrs: Mapping[int, Mapping[str, str]]) -> ObservedUsage:
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
            if r == MEMORY or is_hugepages_resource(r):
                memory.setdefault(nid, {})[r] = used
            elif is_zone_device_resource(r):
                devices.setdefault(nid, {})[r] = used
    return ObservedUsage(cpus, cpu_counts, memory, groups, devices)
