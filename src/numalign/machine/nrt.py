"""NodeResourceTopology (``topology.node.k8s.io/v1alpha2``) to and from a Machine.

Writing (:func:`machine_to_nrt`): one zone ``node-<id>`` of type ``Node`` per NUMA node, with

* ``costs``: the node's SLIT distances (``node-<j>`` -> value);
* ``resources``: ``cpu`` (online CPUs; allocatable excludes ``reservedSystemCPUs`` of the node),
  ``memory`` (MemTotal; allocatable excludes the node's ``reservedMemory``),
  ``hugepages-<size>`` per page size, and one entry per device resource counting the healthy
  devices local to the node (a device near several nodes counts on its lowest one; devices
  without NUMA locality are in no zone). ``available`` is allocatable unless given;
* node attributes ``topologyManagerPolicy``, ``topologyManagerScope``,
  ``topologyManagerMaxNUMANodes`` (the ``max-allowable-numa-nodes`` option, else 8) and
  ``topologyManagerOption<CamelName>`` per Topology Manager policy option, plus the deprecated
  ``topologyPolicies`` list for older consumers.

NRT carries no per-CPU topology. numalign adds a few attributes that make the round trip
machine -> NRT -> machine keep CPU ids and SMT siblings; they are optional on reading:

* node attribute ``numalign.io/threadsPerCore`` (SMT level);
* zone attributes ``numalign.io/cpus`` (the zone's online CPU ids, Linux list),
  ``numalign.io/cores`` (the threads of each core, Linux lists joined by ``;``, written when
  some core has several threads) and ``numalign.io/socket``.

Reading (:func:`nrt_to_machine`) synthesises CPUs per zone: CPU ids from ``numalign.io/cpus``
if present (else numbered on from 0 in zone order), **one core per CPU** unless
``numalign.io/threadsPerCore`` says otherwise (then consecutive CPUs of a zone form a core), the
socket from ``numalign.io/socket`` (else the NUMA node id); ``numalign.io/cores``, when present,
gives the exact sibling groups. Resource amounts are the zone's
``capacity``; malformed quantities are an :class:`InputError` naming the field.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from numalign.engine.bitmask import MAX_NUMA_ID
from numalign.errors import InputError
from numalign.inputs.cpulist import format_cpulist, parse_cpulist
from numalign.inputs.documents import read_yaml_documents
from numalign.inputs.quantity import (
    CPU,
    MEMORY,
    format_amount,
    hugepage_resource_name,
    hugepage_size,
    is_hugepages_resource,
    parse_quantity,
    quantity_int,
)
from numalign.machine.model import Cpu, Device, KubeletConfig, Machine, NumaNode

API_VERSION = "topology.node.k8s.io/v1alpha2"
KIND = "NodeResourceTopology"
ATTR_CPUS = "numalign.io/cpus"
ATTR_SOCKET = "numalign.io/socket"
ATTR_THREADS = "numalign.io/threadsPerCore"
ATTR_CORES = "numalign.io/cores"
#: node: healthy devices without NUMA locality (in no zone), ``resource=count,...``
ATTR_NO_TOPOLOGY = "numalign.io/devicesWithoutTopology"
_MAX_OPTION = "max-allowable-numa-nodes"
_ZONE_RE = re.compile(r"node-(\d+)")

_LEGACY_POLICY = {
    "none": "None",
    "best-effort": "BestEffort",
    "restricted": "Restricted",
    "single-numa-node": "SingleNUMANode",
}
_LEGACY_SCOPE = {"container": "ContainerLevel", "pod": "PodLevel"}


def option_attribute(option: str) -> str:
    """``prefer-closest-numa-nodes`` -> ``topologyManagerOptionPreferClosestNumaNodes``."""
    return "topologyManagerOption" + "".join(p[:1].upper() + p[1:] for p in option.split("-"))


def option_from_attribute(name: str) -> str:
    """Inverse of :func:`option_attribute` (``...OptionPreferClosestNumaNodes`` -> kebab)."""
    camel = name.removeprefix("topologyManagerOption")
    words = re.findall(r"[A-Z]+(?![a-z])|[A-Z][a-z0-9]*|[a-z0-9]+", camel)
    return "-".join(w.lower() for w in words)


def machine_to_nrt(
    machine: Machine, available: Mapping[int, Mapping[str, int]] | None = None
) -> dict[str, Any]:
    """The NodeResourceTopology object of ``machine`` (plain dicts, ready for YAML/JSON).

    ``available`` maps a NUMA node id to resource amounts (``cpu`` in CPUs, memory and
    hugepages in bytes, devices in counts) still free; missing entries default to allocatable.
    """
    k = machine.kubelet
    reserved_cpus = k.reserved_system_cpus or frozenset()
    reserved_mem: dict[int, dict[str, int]] = {}
    for r in k.reserved_memory:
        reserved_mem.setdefault(r.numa_node, {}).update(r.limits)
    dev_counts: dict[int, dict[str, int]] = {}
    for d in machine.devices:
        if d.healthy and d.numa:
            per = dev_counts.setdefault(min(d.numa), {})
            per[d.resource] = per.get(d.resource, 0) + 1
    zones: list[dict[str, Any]] = []
    for n in machine.numa_nodes:
        cpus = sorted(machine.cpus_by_numa.get(n.id, frozenset()))
        amounts: list[tuple[str, int, int]] = []  # name, capacity, allocatable
        amounts.append((CPU, len(cpus), len([c for c in cpus if c not in reserved_cpus])))
        res_mem = reserved_mem.get(n.id, {})
        amounts.append((MEMORY, n.memory, max(0, n.memory - res_mem.get(MEMORY, 0))))
        for size, total in sorted(n.hugepages.items()):
            name = hugepage_resource_name(size)
            amounts.append((name, total, max(0, total - res_mem.get(name, 0))))
        for res, cnt in sorted(dev_counts.get(n.id, {}).items()):
            amounts.append((res, cnt, cnt))
        avail = (available or {}).get(n.id, {})
        resources = []
        for name, cap, alloc in amounts:
            resources.append(
                {
                    "name": name,
                    "capacity": format_amount(name, cap),
                    "allocatable": format_amount(name, alloc),
                    "available": format_amount(name, avail.get(name, alloc)),
                }
            )
        zone: dict[str, Any] = {"name": f"node-{n.id}", "type": "Node"}
        if n.distances:
            zone["costs"] = [
                {"name": f"node-{j}", "value": v} for j, v in sorted(n.distances.items())
            ]
        attrs = [{"name": ATTR_CPUS, "value": format_cpulist(cpus)}]
        cores: dict[int, list[int]] = {}
        for c in cpus:
            cores.setdefault(machine.cpu_by_id[c].core, []).append(c)
        if any(len(v) > 1 for v in cores.values()):
            groups = sorted(cores.values(), key=min)
            attrs.append({"name": ATTR_CORES, "value": ";".join(format_cpulist(g) for g in groups)})
        sockets = sorted({machine.cpu_by_id[c].socket for c in cpus})
        if len(sockets) == 1:
            attrs.append({"name": ATTR_SOCKET, "value": str(sockets[0])})
        zone["attributes"] = attrs
        zone["resources"] = resources
        zones.append(zone)
    opts = dict(k.topology_manager_policy_options)
    attributes = [
        {"name": "topologyManagerPolicy", "value": k.topology_manager_policy},
        {"name": "topologyManagerScope", "value": k.topology_manager_scope},
        {"name": "topologyManagerMaxNUMANodes", "value": str(opts.get(_MAX_OPTION, "8"))},
    ]
    for opt, val in sorted(opts.items()):
        attributes.append({"name": option_attribute(opt), "value": str(val)})
    attributes.append({"name": ATTR_THREADS, "value": str(machine.cpus_per_core)})
    no_topology = no_topology_counts(machine)
    if no_topology:
        attributes.append({"name": ATTR_NO_TOPOLOGY, "value": format_counts(no_topology)})
    legacy = _LEGACY_POLICY.get(k.topology_manager_policy)
    policies = []
    if legacy is not None:
        policies.append(
            legacy + ("" if legacy == "None" else _LEGACY_SCOPE.get(k.topology_manager_scope, ""))
        )
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": machine.name},
        "topologyPolicies": policies,
        "attributes": attributes,
        "zones": zones,
    }


def no_topology_counts(machine: Machine) -> dict[str, int]:
    """Healthy devices without NUMA locality, per resource."""
    out: dict[str, int] = {}
    for d in machine.devices:
        if d.healthy and not d.numa:
            out[d.resource] = out.get(d.resource, 0) + 1
    return out


def format_counts(counts: Mapping[str, int]) -> str:
    return ",".join(f"{r}={n}" for r, n in sorted(counts.items()))


def parse_counts(text: str, where: str) -> dict[str, int]:
    """``resource=count,...`` (counts 0..MAX_ZONE_COUNT)."""
    out: dict[str, int] = {}
    for part in text.split(","):
        if not part.strip():
            continue
        r, sep, n = part.partition("=")
        if not sep or not r.strip() or not n.strip().isdigit() or int(n) > MAX_ZONE_COUNT:
            raise InputError(f"expected resource=count pairs, got {part!r}", where)
        out[r.strip()] = int(n)
    return out


def _attrs(value: object, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, list):
        raise InputError("must be a list of {name, value}", where)
    out: dict[str, str] = {}
    for i, a in enumerate(value):
        if not isinstance(a, dict) or not isinstance(a.get("name"), str):
            raise InputError("must be a mapping with a string 'name'", f"{where}[{i}]")
        out[a["name"]] = str(a.get("value", ""))
    return out


def _int_attr(attrs: Mapping[str, str], key: str, where: str, minimum: int = 0) -> int | None:
    if key not in attrs:
        return None
    try:
        v = int(attrs[key])
    except ValueError:
        raise InputError(f"expected an integer, got {attrs[key]!r}", f"{where}.{key}") from None
    if v < minimum:
        raise InputError(f"must be at least {minimum}, got {v}", f"{where}.{key}")
    return v


def _legacy(policies: object) -> tuple[str, str] | None:
    """The v1alpha1 ``topologyPolicies[0]`` (``SingleNUMANodePodLevel``...), as scheduler-plugins
    maps it: only the exact names count (``None`` means the defaults); others are ignored."""
    if not isinstance(policies, list) or not policies or not isinstance(policies[0], str):
        return None
    p = policies[0]
    if p == _LEGACY_POLICY["none"]:
        return None
    for s_kube, s_nrt in _LEGACY_SCOPE.items():
        for kube, nrt in _LEGACY_POLICY.items():
            if kube != "none" and p == nrt + s_nrt:
                return kube, s_kube
    return None


#: the Topology Manager policies and scopes the kubelet accepts (numalign's ``dynamic`` too)
VALID_POLICIES = ("none", "best-effort", "restricted", "single-numa-node", "dynamic")
VALID_SCOPES = ("container", "pod")
DEFAULT_MAX_NUMA_NODES = 8
#: scheduler-plugins' sanity cap on ``topologyManagerMaxNUMANodes``
LIMIT_MAX_NUMA_NODES = 1024
#: resources a zone may list that no device plugin serves (host-level, never NUMA-bound)
HOST_LEVEL_RESOURCES = frozenset({"ephemeral-storage", "storage", "pods"})
#: the most devices (or CPUs) one zone may claim; more is hostile input, not hardware
MAX_ZONE_COUNT = 1 << 16
#: the most zones (and costs per zone) an NRT may list: one per NUMA node id numalign accepts
MAX_ZONES = MAX_NUMA_ID + 1
#: the most CPUs and devices of one node, all zones together (a machine spec's caps)
MAX_NODE_CPUS = 1 << 16
MAX_NODE_DEVICES = 1 << 16


def is_zone_device_resource(name: str) -> bool:
    """A zone resource counted in devices: anything but cpu, memory, hugepages and host-level
    resources, prefixed (``nvidia.com/gpu``) or not (``gpu``)."""
    return not (name in (CPU, MEMORY) or is_hugepages_resource(name) or name in HOST_LEVEL_RESOURCES)


def _max_numa_nodes(attrs: Mapping[str, str], numa_nodes: int, policy: str) -> int:
    """``max-allowable-numa-nodes`` as the running kubelet must have it.

    ``topologyManagerMaxNUMANodes`` counts when it is an integer above 1 (scheduler-plugins'
    rule, capped at 1024); the kubelet refuses values below 8, so those mean the default 8. A
    kubelet with a policy other than ``none`` that publishes more NUMA nodes than that runs with
    a limit at least that high (it would not have started otherwise), so the limit is then never
    below the zone count.
    """
    value = DEFAULT_MAX_NUMA_NODES
    raw = attrs.get("topologyManagerMaxNUMANodes")
    if raw is not None:
        try:
            n = int(raw.strip())
        except ValueError:
            n = 0
        if n > 1:
            value = max(DEFAULT_MAX_NUMA_NODES, min(n, LIMIT_MAX_NUMA_NODES))
    return value if policy == "none" else max(value, numa_nodes)


def _valid_options(attrs: Mapping[str, str]) -> dict[str, str]:
    """``topologyManagerOption*`` attributes the kubelet would accept, each on its own."""
    from numalign.engine.policies import parse_options

    out: dict[str, str] = {}
    for name, value in attrs.items():
        if not name.startswith("topologyManagerOption"):
            continue
        opt = option_from_attribute(name)
        if opt == _MAX_OPTION:
            continue  # decided with topologyManagerMaxNUMANodes
        try:
            parse_options({opt: value})
        except InputError:
            continue
        out[opt] = value
    return out


def _kubelet(obj: Mapping[str, Any], attrs: Mapping[str, str], numa_nodes: int) -> KubeletConfig:
    """The Topology Manager settings an NRT publishes, read as scheduler-plugins reads them:
    defaults ``none``/``container``, then the deprecated ``topologyPolicies[0]``, then the
    ``topologyManagerPolicy``/``Scope`` attributes; a value that is not valid is ignored (the
    earlier one stays), never an error."""
    policy, scope = "none", "container"
    legacy = _legacy(obj.get("topologyPolicies"))
    if legacy is not None:
        policy, scope = legacy
    if attrs.get("topologyManagerPolicy") in VALID_POLICIES:
        policy = attrs["topologyManagerPolicy"]
    if attrs.get("topologyManagerScope") in VALID_SCOPES:
        scope = attrs["topologyManagerScope"]
    options = _valid_options(attrs)
    max_nodes = _max_numa_nodes(attrs, numa_nodes, policy)
    if max_nodes != DEFAULT_MAX_NUMA_NODES:
        options[_MAX_OPTION] = str(max_nodes)
    return KubeletConfig(
        topology_manager_policy=policy,
        topology_manager_scope=scope,
        topology_manager_policy_options=options,
    )


def nrt_to_machine(obj: object) -> Machine:
    """A :class:`Machine` from a NodeResourceTopology object (parsed YAML/JSON)."""
    if not isinstance(obj, dict):
        raise InputError("a NodeResourceTopology must be a mapping")
    api = obj.get("apiVersion")
    if api is not None and not (isinstance(api, str) and api.startswith("topology.node.k8s.io/")):
        raise InputError(f"expected {API_VERSION}, got {api!r}", "apiVersion")
    if obj.get("kind", KIND) != KIND:
        raise InputError(f"expected {KIND}, got {obj.get('kind')!r}", "kind")
    meta = obj.get("metadata") or {}
    name = meta.get("name", "nrt") if isinstance(meta, dict) else "nrt"
    attrs = _attrs(obj.get("attributes"), "attributes")
    threads = _int_attr(attrs, ATTR_THREADS, "attributes", minimum=1) or 1
    zones_raw = obj.get("zones")
    if not isinstance(zones_raw, list):
        raise InputError("required list", "zones")
    # sizes first: nothing below is parsed for an object beyond them
    if len(zones_raw) > MAX_ZONES:
        raise InputError(f"{len(zones_raw)} zones: more than numalign accepts ({MAX_ZONES}, one "
                         f"per NUMA node id 0-{MAX_NUMA_ID})", "zones")
    for i, z in enumerate(zones_raw):
        costs = z.get("costs") if isinstance(z, dict) else None
        if isinstance(costs, list) and len(costs) > MAX_ZONES:
            raise InputError(f"{len(costs)} costs: more than numalign accepts ({MAX_ZONES})",
                             f"zones[{i}].costs")
    parsed: list[tuple[int, dict[str, Any], str]] = []
    for i, z in enumerate(zones_raw):
        where = f"zones[{i}]"
        if not isinstance(z, dict):
            raise InputError("must be a mapping", where)
        if z.get("type") != "Node":
            continue
        m = _ZONE_RE.fullmatch(str(z.get("name", "")))
        if m is None:
            raise InputError(
                f"a Node zone must be named node-<id>, got {z.get('name')!r}", f"{where}.name"
            )
        if len(m.group(1)) > 4 or int(m.group(1)) > MAX_NUMA_ID:
            raise InputError(f"NUMA node id {m.group(1)[:12]} is above {MAX_NUMA_ID}", f"{where}.name")
        parsed.append((int(m.group(1)), z, where))
    if not parsed:
        raise InputError("no zone of type Node", "zones")
    ids = [p[0] for p in parsed]
    if len(set(ids)) != len(ids):
        raise InputError("duplicate node-<id> zones", "zones")
    nodes: list[NumaNode] = []
    cpus: list[Cpu] = []
    devices: list[Device] = []
    next_cpu = 0
    for nid, z, where in sorted(parsed, key=lambda p: p[0]):
        memory = 0
        huge: dict[int, int] = {}
        n_cpus = 0
        res = z.get("resources") or []
        if not isinstance(res, list):
            raise InputError("must be a list", f"{where}.resources")
        for j, r in enumerate(res):
            rw = f"{where}.resources[{j}]"
            if not isinstance(r, dict) or not isinstance(r.get("name"), str):
                raise InputError("must be a mapping with a string 'name'", rw)
            for key in ("capacity", "allocatable", "available"):
                if key in r:
                    q = parse_quantity(r[key], f"{rw}.{key}")
                    if q < 0:
                        raise InputError(f"must be non-negative, got {r[key]!r}", f"{rw}.{key}")
            if "capacity" not in r:
                raise InputError("missing capacity", rw)
            q = parse_quantity(r["capacity"], f"{rw}.capacity")
            rname: str = r["name"]
            if rname == CPU:
                if q.denominator != 1:
                    raise InputError(
                        f"a zone's cpu must be whole CPUs, got {r['capacity']!r}", f"{rw}.capacity"
                    )
                n_cpus = int(q)
                if n_cpus > MAX_ZONE_COUNT:
                    raise InputError(f"more than {MAX_ZONE_COUNT} CPUs in one zone", f"{rw}.capacity")
                if len(cpus) + n_cpus > MAX_NODE_CPUS:
                    raise InputError(f"more than {MAX_NODE_CPUS} CPUs in all zones", f"{rw}.capacity")
            elif rname == MEMORY:
                memory = quantity_int(q)
            elif is_hugepages_resource(rname):
                huge[hugepage_size(rname, f"{rw}.name")] = quantity_int(q)
            elif is_zone_device_resource(rname):
                count = quantity_int(q)
                if count > MAX_ZONE_COUNT:
                    raise InputError(f"more than {MAX_ZONE_COUNT} devices in one zone", f"{rw}.capacity")
                if len(devices) + count > MAX_NODE_DEVICES:
                    raise InputError(f"more than {MAX_NODE_DEVICES} devices in all zones",
                                     f"{rw}.capacity")
                short = rname.rsplit("/", 1)[-1]
                devices.extend(
                    Device(resource=rname, id=f"{short}-node{nid}-{k}", numa=(nid,))
                    for k in range(count)
                )
        distances: dict[int, int] = {}
        costs = z.get("costs") or []
        if not isinstance(costs, list):
            raise InputError("must be a list", f"{where}.costs")
        for j, c in enumerate(costs):
            cw = f"{where}.costs[{j}]"
            if not isinstance(c, dict):
                raise InputError("must be a mapping", cw)
            cm = _ZONE_RE.fullmatch(str(c.get("name", "")))
            if cm is None:
                continue
            v = c.get("value")
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise InputError(f"expected a non-negative integer, got {v!r}", f"{cw}.value")
            if int(cm.group(1)) in ids:
                distances[int(cm.group(1))] = v
        zattrs = _attrs(z.get("attributes"), f"{where}.attributes")
        cpu_ids: list[int]
        if ATTR_CPUS in zattrs:
            cpu_ids = sorted(parse_cpulist(zattrs[ATTR_CPUS], f"{where}.attributes.{ATTR_CPUS}"))
            if len(cpu_ids) != n_cpus:
                raise InputError(
                    f"{ATTR_CPUS} lists {len(cpu_ids)} CPUs but cpu capacity is {n_cpus}", where
                )
        else:
            cpu_ids = list(range(next_cpu, next_cpu + n_cpus))
        socket = _int_attr(zattrs, ATTR_SOCKET, f"{where}.attributes")
        core_of = {c: cpu_ids[k - k % threads] for k, c in enumerate(cpu_ids)}
        if ATTR_CORES in zattrs:
            at = f"{where}.attributes.{ATTR_CORES}"
            for group_text in zattrs[ATTR_CORES].split(";"):
                group = parse_cpulist(group_text, at)
                if not group or not group <= set(cpu_ids):
                    raise InputError(f"core {group_text!r} is not within {ATTR_CPUS}", at)
                for c in group:
                    core_of[c] = min(group)
        for c in cpu_ids:
            sock = nid if socket is None else socket
            cpus.append(Cpu(id=c, core=core_of[c], socket=sock, numa=nid))
        next_cpu = max([next_cpu, *(c + 1 for c in cpu_ids)])
        nodes.append(
            NumaNode(
                id=nid,
                memory=memory,
                hugepages=dict(sorted(huge.items())),
                distances=dict(sorted(distances.items())),
            )
        )
    if ATTR_NO_TOPOLOGY in attrs:
        for res, n in parse_counts(attrs[ATTR_NO_TOPOLOGY], f"attributes.{ATTR_NO_TOPOLOGY}").items():
            short = res.rsplit("/", 1)[-1]
            devices.extend(Device(resource=res, id=f"{short}-nonuma-{k}", numa=()) for k in range(n))
    seen: set[int] = set()
    for c in cpus:
        if c.id in seen:
            raise InputError(f"CPU {c.id} is listed in two zones", "zones")
        seen.add(c.id)
    return Machine(
        name=str(name),
        numa_nodes=tuple(nodes),
        cpus=tuple(sorted(cpus, key=lambda c: c.id)),
        devices=tuple(devices),
        kubelet=_kubelet(obj, attrs, len(nodes)),
    )


def load_nrt(path: str) -> Machine:
    """Read a NodeResourceTopology YAML or JSON file (the first document)."""
    # no list longer than an NRT's longest (zones, costs): refused while parsing
    docs = [d for d in read_yaml_documents(
        path, invalid="malformed YAML", max_items=MAX_ZONES,
        why=f" (an NRT has at most {MAX_ZONES} zones, one per NUMA node id, and as many costs "
            "per zone)") if d is not None]
    if not docs:
        raise InputError("empty document", path)
    doc = docs[0]
    if isinstance(doc, dict) and doc.get("kind") == "List" and isinstance(doc.get("items"), list):
        doc = doc["items"][0] if doc["items"] else None
    try:
        return nrt_to_machine(doc)
    except InputError as e:
        raise e.within(path) from None
