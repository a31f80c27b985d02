"""Machine spec files: a :class:`~numalign.machine.model.Machine` written as YAML or JSON.

Two forms. The **full form** lists everything; :func:`dump_machine` writes it and
:func:`load_machine` reads it back to an equal machine::

    name: fig1
    numaNodes:                 # memory = MemTotal of the node; hugepages: page size -> bytes
      - {id: 0, memory: 64Gi, hugepages: {2Mi: 0, 1Gi: 8Gi}, distances: {0: 10, 1: 21}}
      - {id: 1, memory: 64Gi, hugepages: {1Gi: 8Gi}, distances: {0: 21, 1: 10}}
    cpus:                      # every logical CPU; uncoreCache, die, online are optional
      - {id: 0, core: 0, socket: 0, numa: 0}
    devices:                   # numa: a list (several nodes, or [] = unknown)
      - {resource: nvidia.com/gpu, id: gpu0, numa: [0], healthy: true,
         pcieRoot: "0000:3a", busId: "0000:3b:00.0"}
    kubelet:                   # KubeletConfiguration field names: paste yours
      topologyManagerPolicy: restricted
      topologyManagerScope: container
      topologyManagerPolicyOptions: {prefer-closest-numa-nodes: "true"}
      cpuManagerPolicy: static
      cpuManagerPolicyOptions: {full-pcpus-only: "true"}
      reservedSystemCPUs: "0"          # Linux cpulist syntax "0-3,8"
      systemReserved: {cpu: 500m, memory: 1Gi}
      kubeReserved: {cpu: "1"}
      memoryManagerPolicy: Static
      reservedMemory: [{numaNode: 0, limits: {memory: 1Gi}}]
      featureGates: {SomeGate: true}
      kubeletVersion: v1.33.4          # numalign's: the kubelet release (default: the newest)

The **compact form** replaces ``numaNodes`` and ``cpus`` with a ``shape``::

    name: box                  # optional (default: the file name without extension)
    shape:
      sockets: 2               # default 1
      numaPerSocket: 2         # default 1
      coresPerNuma: 8          # default 4
      threadsPerCore: 2        # default 1
      memoryPerNuma: 64Gi      # default 64Gi
      hugepages1GiPerNuma: 8Gi # bytes of 1Gi pages per node (default: no 1Gi pool)
      hugepages2MiPerNuma: 1Gi # bytes of 2Mi pages per node (default: no 2Mi pool)
      coresPerUncoreCache: 8   # optional: consecutive cores sharing an L3 (default: unknown)
      distances: {local: 10, sameSocket: 11, remote: 21}   # these defaults; null = none
      gpusPerNuma: 1           # shorthand for devicesPerNuma: {nvidia.com/gpu: 1}
      devicesPerNuma: {rdma/hca: 1}
    devices: [...]             # optional, as in the full form (compact entries allowed)
    kubelet: {...}             # optional, as in the full form

NUMA node ids run socket by socket (socket ``s`` holds nodes ``s*numaPerSocket ...``), cores
NUMA node by NUMA node. CPUs are numbered like Linux on Intel: first thread 0 of every core
in socket/NUMA order, then thread 1 of every core, and so on; with ``C`` cores in total the
SMT siblings of CPU ``n`` are ``n + C``, ``n + 2C`` ... A core's id is the lowest CPU id of
its threads, as the kubelet derives it.

A **compact device entry** (in either form) stands for several devices:
``{resource: nvidia.com/gpu, perNuma: 2, idPrefix: gpu}`` gives every NUMA node (ascending)
two devices ``gpu0, gpu1`` (node 0), ``gpu2, gpu3`` (node 1) ...; ``idPrefix`` defaults to
the resource name after its last ``/``. ``gpusPerNuma``/``devicesPerNuma`` expand the same way
and come before the ``devices`` list.

Rules checked (errors are one line and name the field, e.g.
``fig1.yaml: numaNodes[1].distances: missing entry for node 0``): unknown fields (outside
``kubelet``), types, duplicate ids, negative sizes, hugepage totals that are not a multiple
of their page size, CPUs and devices on NUMA nodes that do not exist, reserved CPUs that
do not exist, the threads of one core
on different NUMA nodes, distances incomplete on some node when any node has them, bad
cpulists and quantities. In ``kubelet`` unknown fields are ignored (a whole
KubeletConfiguration may be pasted) and known ones are checked as the kubelet checks them
when it starts, with its messages:

* ``topologyManagerPolicy``: ``none``, ``best-effort``, ``restricted``, ``single-numa-node``
  (the kubelet's names; ``""`` is unset = ``none``) or numalign's ``dynamic`` (KEP-693,
  an explicit extension). Other spellings numalign reads elsewhere (NRT's
  ``SingleNUMANodePodLevel``, Koordinator's ``Restricted``) are refused here;
* ``topologyManagerScope``: ``container`` or ``pod`` (``""`` = ``container``);
* ``topologyManagerPolicyOptions`` and ``cpuManagerPolicyOptions``: values here; names and
  their feature gates for the node's kubelet release (``kubeletVersion``) when the node's
  rules are resolved, before any decision (``modes/kubelet/releases.py``,
  ``docs/kubelet-releases.md``);
* ``kubeletVersion`` (not a KubeletConfiguration field): ``v1.33.4``, ``1.33``,
  ``v1.34.4+k3s1`` (:mod:`numalign.machine.kubelet_version`);
* ``evictionHard``: known signals, positive quantities or percentages (unset = the
  kubelet's default ``memory.available: 100Mi``); only ``memory.available`` changes anything
  (Node Allocatable memory);
* ``maxPods`` (default 110): the node's pod count limit (predicate admission);
* ``reservedMemory``: limits of ``memory`` or ``hugepages-<size>``, non-zero; with
  ``memoryManagerPolicy: Static`` their totals must equal systemReserved + kubeReserved +
  evictionHard ``memory.available`` per type (the memory manager refuses to start otherwise:
  ``the total amount "1Gi" of type "memory" is not equal to the value "1124Mi" determined by
  Node Allocatable feature``), see :mod:`numalign.machine.allocatable`.

Size caps (documented limits, so no spec can take minutes or gigabytes): at most
:data:`MAX_CPUS` (65536) logical CPUs from a ``shape``, at most :data:`MAX_DEVICES` (65536)
devices, counts in a ``shape`` at most 4096 each; CPU ids in cpulists at most 65535
(:mod:`numalign.inputs.cpulist`), NUMA node ids at most 1023.

Input ``core`` values may be per socket (Linux ``core_id``): CPUs are grouped into cores by
``(socket, core)`` and every core gets the kubelet's machine-wide id, the lowest CPU id of
its threads.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

from numalign.engine.bitmask import MAX_NUMA_ID
from numalign.engine.policies import check_kubelet_policy, check_kubelet_scope
from numalign.errors import InputError, escape_newlines
from numalign.inputs.cpulist import format_cpulist, parse_cpulist
from numalign.inputs.documents import read_yaml
from numalign.inputs.pyyaml import yaml
from numalign.inputs.quantity import (
    CPU,
    HUGEPAGES_PREFIX,
    MEMORY,
    cpu_millis,
    format_cpu_millis,
    is_hugepages_resource,
    parse_quantity,
    quantity_int,
)
from numalign.inputs.quantity import format_bytes as quantity_text
from numalign.machine.allocatable import parse_eviction_hard, validate_reserved_memory
from numalign.machine.model import (
    DEFAULT_MAX_PODS,
    Cpu,
    Device,
    KubeletConfig,
    Machine,
    NumaNode,
    ReservedMemory,
)

__all__ = ["dump_machine", "dump_machine_yaml", "format_bytes", "load_machine", "read_machine_file"]

_TOP_KEYS = ("name", "numaNodes", "cpus", "devices", "kubelet", "shape", "labels", "annotations")
_NODE_KEYS = ("id", "memory", "hugepages", "distances")
_CPU_KEYS = ("id", "core", "socket", "numa", "uncoreCache", "die", "online")
_DEVICE_KEYS = ("resource", "id", "numa", "healthy", "pcieRoot", "busId")
_COMPACT_DEVICE_KEYS = ("resource", "perNuma", "idPrefix", "healthy")
_SHAPE_KEYS = (
    "sockets",
    "numaPerSocket",
    "coresPerNuma",
    "threadsPerCore",
    "memoryPerNuma",
    "hugepages1GiPerNuma",
    "hugepages2MiPerNuma",
    "coresPerUncoreCache",
    "distances",
    "gpusPerNuma",
    "devicesPerNuma",
)
_DISTANCE_KEYS = ("local", "sameSocket", "remote")
_MAX_SHAPE = 4096  # a sanity bound for shape counts (sockets, cores...)
#: at most this many logical CPUs from a shape (sockets x NUMA x cores x threads)
MAX_CPUS = 65536
#: at most this many devices in a spec (shape and device lists together)
MAX_DEVICES = 65536

# --------------------------------------------------------------------------------------------
# small typed accessors; every one names the field in its error
# --------------------------------------------------------------------------------------------


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _kind(value: object) -> str:
    return "null" if value is None else type(value).__name__


def _mapping(value: object, path: str, allowed: Sequence[str] | None = None) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise InputError(f"expected a mapping, got {_kind(value)}", path or None)
    for key in value:
        if not isinstance(key, str):
            raise InputError(f"field name {key!r} is not a string", path or None)
        if allowed is not None and key not in allowed:
            raise InputError("unknown field", _join(path, key))
    return value


def _mapping_any(value: object, path: str) -> Mapping[Any, Any]:
    """A mapping whose keys are checked by the caller (NUMA node ids may be ints)."""
    if not isinstance(value, Mapping):
        raise InputError(f"expected a mapping, got {_kind(value)}", path)
    return value


def _list(value: object, path: str) -> Sequence[Any]:
    if not isinstance(value, Sequence) or isinstance(value, str | bytes):
        raise InputError(f"expected a list, got {_kind(value)}", path)
    return value


def _int(
    value: object,
    path: str,
    *,
    minimum: int = 0,
    maximum: int | None = None,
    allow_str: bool = False,
) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        if (
            allow_str
            and isinstance(value, str)
            and value.strip().isascii()
            and value.strip().isdigit()
        ):
            value = int(value.strip())
        else:
            raise InputError(f"expected an integer, got {value!r}", path)
    if value < minimum:
        raise InputError(f"must be at least {minimum}, got {value}", path)
    if maximum is not None and value > maximum:
        raise InputError(f"must be at most {maximum}, got {value}", path)
    return value


def _required(doc: Mapping[str, Any], key: str, path: str) -> Any:
    if doc.get(key) is None:
        raise InputError("missing required field", _join(path, key))
    return doc[key]


def _str(value: object, path: str) -> str:
    if not isinstance(value, str):
        raise InputError(f"expected a string, got {_kind(value)}", path)
    return value


def _bool(value: object, path: str) -> bool:
    if not isinstance(value, bool):
        raise InputError(f"expected true or false, got {value!r}", path)
    return value


def _bytes(value: object, path: str) -> int:
    """A non-negative byte size from a quantity (``64Gi``, ``1e9``, ``1024``)."""
    q = parse_quantity(value, path)
    if q < 0:
        raise InputError(f"must be non-negative, got {value!r}", path)
    return quantity_int(q)


def _node_ref(value: object, path: str, nodes: Mapping[int, object]) -> int:
    node = _int(value, path, maximum=MAX_NUMA_ID)
    if node not in nodes:
        raise InputError(f"NUMA node {node} is not in numaNodes", path)
    return node


def _page_size(key: str, path: str) -> int:
    text = key.removeprefix(HUGEPAGES_PREFIX)
    size = _bytes(text, path)
    if size <= 0:
        raise InputError(f"page size must be positive, got {key!r}", path)
    return size


def format_bytes(n: int) -> int | str:
    """A byte count for YAML: the exact binary quantity (``68719476736`` -> ``"64Gi"``) when it
    has a suffix, else the plain integer (``1000``, ``1536``)."""
    text = quantity_text(n)
    return n if -1024 < n < 1024 or text.lstrip("-").isdigit() else text


# --------------------------------------------------------------------------------------------
# loading
# --------------------------------------------------------------------------------------------


def _load_nodes(raw: object) -> dict[int, NumaNode]:
    nodes: dict[int, NumaNode] = {}
    items = _list(raw, "numaNodes")
    if not items:
        raise InputError("at least one NUMA node is required", "numaNodes")
    raw_distances: dict[int, tuple[str, Mapping[Any, Any] | None]] = {}
    for i, item in enumerate(items):
        path = f"numaNodes[{i}]"
        doc = _mapping(item, path, _NODE_KEYS)
        node_id = _int(_required(doc, "id", path), f"{path}.id", maximum=MAX_NUMA_ID)
        if node_id in nodes:
            raise InputError(f"duplicate NUMA node id {node_id}", f"{path}.id")
        memory = _bytes(_required(doc, "memory", path), f"{path}.memory")
        hugepages: dict[int, int] = {}
        hp_raw = doc.get("hugepages")
        if hp_raw is not None:
            for key, total in _mapping(hp_raw, f"{path}.hugepages").items():
                hp_path = f"{path}.hugepages.{key}"
                size = _page_size(key, hp_path)
                if size in hugepages:
                    raise InputError(f"page size {key} given twice", hp_path)
                nbytes = _bytes(total, hp_path)
                if nbytes % size:
                    raise InputError(
                        f"{total} is not a whole number of {quantity_text(size)} pages",
                        hp_path,
                    )
                hugepages[size] = nbytes
        dist = doc.get("distances")
        if dist is not None:
            dist = dict(_mapping_any(dist, f"{path}.distances"))
        raw_distances[node_id] = (path, dist)
        nodes[node_id] = NumaNode(id=node_id, memory=memory, hugepages=hugepages)

    have = [node for node, (_, d) in raw_distances.items() if d is not None]
    if not have:
        return nodes
    for node_id, (path, dist) in raw_distances.items():
        dpath = f"{path}.distances"
        if dist is None:
            raise InputError(
                f"missing, but NUMA node {have[0]} has distances (give them for all nodes or none)",
                dpath,
            )
        distances: dict[int, int] = {}
        for key, value in dist.items():
            if isinstance(key, bool):
                raise InputError(f"key {key!r} is not a NUMA node id", dpath)
            other = _int(key, dpath, maximum=MAX_NUMA_ID, allow_str=True)
            if other not in nodes:
                raise InputError(f"NUMA node {other} is not in numaNodes", dpath)
            if other in distances:
                raise InputError(f"entry for node {other} given twice", dpath)
            distances[other] = _int(value, f"{dpath}.{other}", minimum=1)
        for other in sorted(nodes):
            if other not in distances:
                raise InputError(f"missing entry for node {other}", dpath)
        nodes[node_id] = NumaNode(
            id=node_id,
            memory=nodes[node_id].memory,
            hugepages=nodes[node_id].hugepages,
            distances={k: distances[k] for k in sorted(distances)},
        )
    return nodes


def _load_cpus(raw: object, nodes: Mapping[int, NumaNode]) -> tuple[Cpu, ...]:
    items = _list(raw, "cpus")
    if not items:
        raise InputError("at least one CPU is required", "cpus")
    seen: dict[int, int] = {}
    parsed: list[tuple[int, Cpu]] = []
    for i, item in enumerate(items):
        path = f"cpus[{i}]"
        doc = _mapping(item, path, _CPU_KEYS)
        cpu_id = _int(_required(doc, "id", path), f"{path}.id")
        if cpu_id in seen:
            raise InputError(f"duplicate CPU id {cpu_id} (also cpus[{seen[cpu_id]}])", f"{path}.id")
        seen[cpu_id] = i
        core = _int(_required(doc, "core", path), f"{path}.core")
        socket = _int(_required(doc, "socket", path), f"{path}.socket")
        numa = _node_ref(_required(doc, "numa", path), f"{path}.numa", nodes)
        uncore = doc.get("uncoreCache")
        die = doc.get("die")
        online = doc.get("online", True)
        parsed.append(
            (
                i,
                Cpu(
                    id=cpu_id,
                    core=core,
                    socket=socket,
                    numa=numa,
                    uncore_cache=None if uncore is None else _int(uncore, f"{path}.uncoreCache"),
                    die=None if die is None else _int(die, f"{path}.die"),
                    online=_bool(online, f"{path}.online"),
                ),
            )
        )
    # kubelet core ids: the lowest CPU id of the core's threads, cores keyed by (socket, core)
    lowest: dict[tuple[int, int], int] = {}
    core_numa: dict[tuple[int, int], tuple[int, int]] = {}
    for i, cpu in parsed:
        key = (cpu.socket, cpu.core)
        lowest[key] = min(lowest.get(key, cpu.id), cpu.id)
        if key in core_numa and core_numa[key][0] != cpu.numa:
            other_numa, other_index = core_numa[key]
            raise InputError(
                f"CPU {cpu.id} is a thread of socket {cpu.socket} core {cpu.core} like "
                f"cpus[{other_index}], which is on NUMA node {other_numa}, but this one is on "
                f"NUMA node {cpu.numa}",
                f"cpus[{i}].numa",
            )
        core_numa.setdefault(key, (cpu.numa, i))
    out = [
        Cpu(
            id=c.id,
            core=lowest[(c.socket, c.core)],
            socket=c.socket,
            numa=c.numa,
            uncore_cache=c.uncore_cache,
            die=c.die,
            online=c.online,
        )
        for _, c in parsed
    ]
    return tuple(sorted(out, key=lambda c: c.id))


def _expand_per_numa(
    resource: str,
    per_numa: int,
    prefix: str,
    healthy: bool,
    nodes: Mapping[int, NumaNode],
) -> list[Device]:
    if per_numa * len(nodes) > MAX_DEVICES:
        raise InputError(
            f"{per_numa} {resource} per NUMA node x {len(nodes)} nodes is more than the "
            f"{MAX_DEVICES} devices a spec may describe"
        )
    out: list[Device] = []
    for node in sorted(nodes):
        for _ in range(per_numa):
            out.append(
                Device(resource=resource, id=f"{prefix}{len(out)}", numa=(node,), healthy=healthy)
            )
    return out


def _resource_name(value: object, path: str) -> str:
    name = _str(value, path)
    if not name or any(ch.isspace() for ch in name):
        raise InputError(f"invalid resource name {name!r}", path)
    return name


def _load_devices(
    raw: object, nodes: Mapping[int, NumaNode], implicit: list[tuple[str, list[Device]]]
) -> tuple[Device, ...]:
    out: list[tuple[str, Device]] = []
    for path, devs in implicit:
        out.extend((path, d) for d in devs)
    items = _list(raw, "devices") if raw is not None else []
    for i, item in enumerate(items):
        path = f"devices[{i}]"
        if isinstance(item, Mapping) and "perNuma" in item:
            doc = _mapping(item, path, _COMPACT_DEVICE_KEYS)
            resource = _resource_name(_required(doc, "resource", path), f"{path}.resource")
            per_numa = _int(doc["perNuma"], f"{path}.perNuma", maximum=_MAX_SHAPE)
            prefix = doc.get("idPrefix")
            prefix = (
                resource.rsplit("/", 1)[-1] if prefix is None else _str(prefix, f"{path}.idPrefix")
            )
            healthy = _bool(doc.get("healthy", True), f"{path}.healthy")
            devs = _expand_per_numa(resource, per_numa, prefix, healthy, nodes)
            out.extend((path, d) for d in devs)
            continue
        doc = _mapping(item, path, _DEVICE_KEYS)
        resource = _resource_name(_required(doc, "resource", path), f"{path}.resource")
        dev_id = _str(_required(doc, "id", path), f"{path}.id")
        if not dev_id:
            raise InputError("must not be empty", f"{path}.id")
        numa_raw = doc.get("numa")
        if numa_raw is None:
            numa_raw = []  # no topology information
        numa: list[int] = []
        if isinstance(numa_raw, int) and not isinstance(numa_raw, bool):
            numa_raw = [numa_raw]
        for j, n in enumerate(_list(numa_raw, f"{path}.numa")):
            node = _node_ref(n, f"{path}.numa[{j}]", nodes)
            if node in numa:
                raise InputError(f"NUMA node {node} listed twice", f"{path}.numa[{j}]")
            numa.append(node)
        pcie = doc.get("pcieRoot")
        bus = doc.get("busId")
        out.append(
            (
                path,
                Device(
                    resource=resource,
                    id=dev_id,
                    numa=tuple(sorted(numa)),
                    healthy=_bool(doc.get("healthy", True), f"{path}.healthy"),
                    pcie_root=None if pcie is None else _str(pcie, f"{path}.pcieRoot"),
                    bus_id=None if bus is None else _str(bus, f"{path}.busId"),
                ),
            )
        )
    seen: set[tuple[str, str]] = set()
    for path, dev in out:
        key = (dev.resource, dev.id)
        if key in seen:
            raise InputError(f"duplicate device id {dev.id!r} of {dev.resource}", f"{path}.id")
        seen.add(key)
    return tuple(d for _, d in out)


def _options(value: object, path: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, v in _mapping(value, path).items():
        if isinstance(v, bool):
            v = "true" if v else "false"
        out[key] = _str(v, f"{path}.{key}")
    return out


def _reserved(value: object, path: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for key, v in _mapping(value, path).items():
        q = parse_quantity(v, f"{path}.{key}")
        if q < 0:
            raise InputError(f"must be non-negative, got {v!r}", f"{path}.{key}")
        out[key] = cpu_millis(q) if key == CPU else quantity_int(q)
    return out


def _load_kubelet(raw: object, nodes: Mapping[int, NumaNode]) -> KubeletConfig:
    if raw is None:
        return KubeletConfig()
    doc = _mapping(raw, "kubelet")
    kw: dict[str, Any] = {}
    for key, attr in (
        ("topologyManagerPolicy", "topology_manager_policy"),
        ("topologyManagerScope", "topology_manager_scope"),
        ("cpuManagerPolicy", "cpu_manager_policy"),
        ("memoryManagerPolicy", "memory_manager_policy"),
    ):
        if doc.get(key) is not None:
            kw[attr] = _str(doc[key], f"kubelet.{key}")
    if "topology_manager_policy" in kw:
        kw["topology_manager_policy"] = check_kubelet_policy(kw["topology_manager_policy"])
    if "topology_manager_scope" in kw:
        kw["topology_manager_scope"] = check_kubelet_scope(kw["topology_manager_scope"])
    for key, attr in (
        ("topologyManagerPolicyOptions", "topology_manager_policy_options"),
        ("cpuManagerPolicyOptions", "cpu_manager_policy_options"),
    ):
        if doc.get(key) is not None:
            kw[attr] = _options(doc[key], f"kubelet.{key}")
    if doc.get("reservedSystemCPUs") is not None:
        kw["reserved_system_cpus"] = parse_cpulist(
            doc["reservedSystemCPUs"], "kubelet.reservedSystemCPUs"
        )
    for key, attr in (("systemReserved", "system_reserved"), ("kubeReserved", "kube_reserved")):
        if doc.get(key) is not None:
            kw[attr] = _reserved(doc[key], f"kubelet.{key}")
    if doc.get("reservedMemory") is not None:
        entries: list[ReservedMemory] = []
        seen: set[int] = set()
        for i, item in enumerate(_list(doc["reservedMemory"], "kubelet.reservedMemory")):
            path = f"kubelet.reservedMemory[{i}]"
            entry = _mapping(item, path)
            node = _node_ref(_required(entry, "numaNode", path), f"{path}.numaNode", nodes)
            if node in seen:
                raise InputError(f"NUMA node {node} reserved twice", f"{path}.numaNode")
            seen.add(node)
            limits: dict[str, int] = {}
            for res, v in _mapping(_required(entry, "limits", path), f"{path}.limits").items():
                lpath = f"{path}.limits.{res}"
                if res != MEMORY and not is_hugepages_resource(res):
                    raise InputError(
                        f'invalid configuration: the limit type "{res}" for NUMA node {node} is '
                        'not supported, only [memory hugepages-<HugePageSize>] is accepted', lpath)
                limits[res] = _bytes(v, lpath)
                if limits[res] == 0:
                    raise InputError(
                        f"invalid configuration: reserved memory may not be zero for NUMA node "
                        f'{node} and resource "{res}"', lpath)
            entries.append(ReservedMemory(numa_node=node, limits=limits))
        kw["reserved_memory"] = tuple(entries)
    if doc.get("featureGates") is not None:
        gates: dict[str, bool] = {}
        for key, v in _mapping(doc["featureGates"], "kubelet.featureGates").items():
            gates[key] = _bool(v, f"kubelet.featureGates.{key}")
        kw["feature_gates"] = gates
    if doc.get("evictionHard") is not None:
        eviction: dict[str, str] = {}
        for key, v in _mapping(doc["evictionHard"], "kubelet.evictionHard").items():
            eviction[key] = _str(v, f"kubelet.evictionHard.{key}").strip()
        parse_eviction_hard(eviction)
        kw["eviction_hard"] = eviction
    if doc.get("maxPods") is not None:
        kw["max_pods"] = _int(doc["maxPods"], "kubelet.maxPods", maximum=1 << 31)
    if doc.get("kubeletVersion") is not None:
        from numalign.machine.kubelet_version import parse_kubelet_version  # a version given only

        kw["kubelet_version"] = parse_kubelet_version(doc["kubeletVersion"])
    return KubeletConfig(**kw)


def _shape(raw: object) -> tuple[dict[int, NumaNode], tuple[Cpu, ...], list[Device]]:
    doc = _mapping(raw if raw is not None else {}, "shape", _SHAPE_KEYS)

    def count(key: str, default: int, minimum: int = 1) -> int:
        v = doc.get(key)
        return (
            default if v is None else _int(v, f"shape.{key}", minimum=minimum, maximum=_MAX_SHAPE)
        )

    sockets = count("sockets", 1)
    numa_per_socket = count("numaPerSocket", 1)
    cores_per_numa = count("coresPerNuma", 4)
    threads = count("threadsPerCore", 1)
    total = sockets * numa_per_socket * cores_per_numa * threads
    if total > MAX_CPUS:
        raise InputError(
            f"{sockets} sockets x {numa_per_socket} NUMA nodes x {cores_per_numa} cores x "
            f"{threads} threads = {total} CPUs, more than the {MAX_CPUS} a spec may describe",
            "shape",
        )
    if sockets * numa_per_socket - 1 > MAX_NUMA_ID:
        raise InputError(f"at most {MAX_NUMA_ID + 1} NUMA nodes", "shape.numaPerSocket")
    memory = _bytes(doc.get("memoryPerNuma", "64Gi"), "shape.memoryPerNuma")
    hugepages: dict[int, int] = {}
    for key, size in (("hugepages2MiPerNuma", 2 << 20), ("hugepages1GiPerNuma", 1 << 30)):
        if doc.get(key) is not None:
            nbytes = _bytes(doc[key], f"shape.{key}")
            if nbytes % size:
                raise InputError(
                    f"{doc[key]} is not a whole number of {format_bytes(size)} pages",
                    f"shape.{key}",
                )
            hugepages[size] = nbytes
    uncore_size = None
    if doc.get("coresPerUncoreCache") is not None:
        uncore_size = count("coresPerUncoreCache", 1)

    node_count = sockets * numa_per_socket
    socket_of = {n: n // numa_per_socket for n in range(node_count)}
    distances: dict[int, dict[int, int]] = {n: {} for n in range(node_count)}
    dist_raw = doc.get("distances", {})
    if dist_raw is not None:
        d = _mapping(dist_raw, "shape.distances", _DISTANCE_KEYS)
        local = _int(d.get("local", 10), "shape.distances.local", minimum=1)
        same = _int(d.get("sameSocket", 11), "shape.distances.sameSocket", minimum=1)
        remote = _int(d.get("remote", 21), "shape.distances.remote", minimum=1)
        for a in range(node_count):
            for b in range(node_count):
                distances[a][b] = (
                    local if a == b else same if socket_of[a] == socket_of[b] else remote
                )
    nodes = {
        n: NumaNode(id=n, memory=memory, hugepages=dict(hugepages), distances=distances[n])
        for n in range(node_count)
    }
    total_cores = node_count * cores_per_numa
    cpus = [
        Cpu(
            id=t * total_cores + g,
            core=g,
            socket=socket_of[g // cores_per_numa],
            numa=g // cores_per_numa,
            uncore_cache=None if uncore_size is None else g // uncore_size,
        )
        for t in range(threads)
        for g in range(total_cores)
    ]
    devices: list[Device] = []
    per_numa: dict[str, int] = {}
    if doc.get("gpusPerNuma") is not None:
        per_numa["nvidia.com/gpu"] = _int(
            doc["gpusPerNuma"], "shape.gpusPerNuma", maximum=_MAX_SHAPE
        )
    if doc.get("devicesPerNuma") is not None:
        for res, n in _mapping(doc["devicesPerNuma"], "shape.devicesPerNuma").items():
            path = f"shape.devicesPerNuma.{res}"
            _resource_name(res, path)
            if res in per_numa:
                raise InputError("also given as gpusPerNuma", path)
            per_numa[res] = _int(n, path, maximum=_MAX_SHAPE)
    for res, n in per_numa.items():
        devices.extend(_expand_per_numa(res, n, res.rsplit("/", 1)[-1], True, nodes))
    return nodes, tuple(sorted(cpus, key=lambda c: c.id)), devices


def _default_name(source: str) -> str:
    base = os.path.basename(source)
    stem, _ = os.path.splitext(base)
    return stem or "machine"


def _load(data: object, source: str) -> Machine:
    doc = _mapping(data, "", _TOP_KEYS)
    name = doc.get("name")
    name = _default_name(source) if name is None else _str(name, "name")
    implicit: list[tuple[str, list[Device]]] = []
    if "shape" in doc:
        for key in ("numaNodes", "cpus"):
            if key in doc:
                raise InputError("cannot be combined with shape (give one form)", key)
        nodes, cpus, shape_devices = _shape(doc["shape"])
        implicit.append(("shape", shape_devices))
    else:
        nodes = _load_nodes(_required(doc, "numaNodes", ""))
        cpus = _load_cpus(_required(doc, "cpus", ""), nodes)
    if sum(len(d) for _, d in implicit) > MAX_DEVICES:
        raise InputError(f"more than {MAX_DEVICES} devices", "shape")
    devices = _load_devices(doc.get("devices"), nodes, implicit)
    if len(devices) > MAX_DEVICES:
        raise InputError(f"more than {MAX_DEVICES} devices", "devices")
    kubelet = _load_kubelet(doc.get("kubelet"), nodes)
    if kubelet.reserved_system_cpus:
        unknown = kubelet.reserved_system_cpus - {c.id for c in cpus}
        if unknown:
            raise InputError(
                f"CPUs {format_cpulist(unknown)} are not in cpus", "kubelet.reservedSystemCPUs"
            )
    labels = {str(k): _str(v, f"labels.{k}") for k, v in _mapping(doc.get("labels", {}), "labels").items()}
    annotations = {str(k): _str(v, f"annotations.{k}")
                   for k, v in _mapping(doc.get("annotations", {}), "annotations").items()}
    if annotations:  # a malformed value is refused with the spec
        from numalign.machine.node_annotations import parse_kubelet_cpu_policy

        parse_kubelet_cpu_policy(annotations)
    machine = Machine(
        name=name,
        numa_nodes=tuple(nodes[n] for n in sorted(nodes)),
        cpus=cpus,
        devices=devices,
        kubelet=kubelet,
        labels=labels,
        annotations=annotations,
    )
    validate_reserved_memory(machine)
    return machine


def load_machine(data: object, source: str = "machine") -> Machine:
    """Build a :class:`Machine` from a parsed spec document (full or compact form).

    ``source`` names the document in error messages (``<source>: <field>: <problem>``) and
    gives the default machine name (its file name without extension).
    """
    try:
        return _load(data, source)
    except InputError as e:
        field = f"{source}: {e.field}" if e.field else source
        raise InputError(escape_newlines(e.problem), escape_newlines(field)) from None
    except (KeyError, TypeError, ValueError, AttributeError) as e:  # pragma: no cover - guard
        raise InputError(f"invalid machine spec: {e}", source) from None


def read_machine_file(path: str) -> Machine:
    """Read a machine spec file (YAML or JSON, which is YAML) and load it."""
    data = read_yaml(path)
    if data is None:
        raise InputError("empty machine spec", path)
    return load_machine(data, path)


# --------------------------------------------------------------------------------------------
# dumping
# --------------------------------------------------------------------------------------------


def _dump_kubelet(k: KubeletConfig) -> dict[str, Any]:
    out: dict[str, Any] = {
        "topologyManagerPolicy": k.topology_manager_policy,
        "topologyManagerScope": k.topology_manager_scope,
        "topologyManagerPolicyOptions": dict(k.topology_manager_policy_options),
        "cpuManagerPolicy": k.cpu_manager_policy,
        "cpuManagerPolicyOptions": dict(k.cpu_manager_policy_options),
    }
    if k.reserved_system_cpus is not None:
        out["reservedSystemCPUs"] = format_cpulist(k.reserved_system_cpus)
    out["systemReserved"] = {
        r: format_cpu_millis(v) if r == CPU else format_bytes(v)
        for r, v in k.system_reserved.items()
    }
    out["kubeReserved"] = {
        r: format_cpu_millis(v) if r == CPU else format_bytes(v) for r, v in k.kube_reserved.items()
    }
    out["memoryManagerPolicy"] = k.memory_manager_policy
    out["reservedMemory"] = [
        {"numaNode": e.numa_node, "limits": {r: format_bytes(v) for r, v in e.limits.items()}}
        for e in k.reserved_memory
    ]
    out["featureGates"] = dict(k.feature_gates)
    if k.eviction_hard is not None:
        out["evictionHard"] = dict(k.eviction_hard)
    if k.max_pods != DEFAULT_MAX_PODS:
        out["maxPods"] = k.max_pods
    if k.kubelet_version:
        out["kubeletVersion"] = str(k.kubelet_version)
    return out


def dump_machine(m: Machine) -> dict[str, Any]:
    """The canonical full form of ``m``: ``load_machine(dump_machine(m)) == m``.

    Plain dicts, lists, strings, ints and bools only (YAML- and JSON-serialisable; JSON turns
    the integer keys of ``distances`` into strings, which :func:`load_machine` accepts).
    Sizes are written as exact binary quantities (``64Gi``) where possible.
    """
    nodes: list[dict[str, Any]] = []
    for n in m.numa_nodes:
        node: dict[str, Any] = {"id": n.id, "memory": format_bytes(n.memory)}
        if n.hugepages:
            node["hugepages"] = {
                str(format_bytes(size)): format_bytes(total)
                for size, total in sorted(n.hugepages.items())
            }
        if n.distances:
            node["distances"] = {k: n.distances[k] for k in sorted(n.distances)}
        nodes.append(node)
    cpus: list[dict[str, Any]] = []
    for c in m.cpus:
        cpu: dict[str, Any] = {"id": c.id, "core": c.core, "socket": c.socket, "numa": c.numa}
        if c.uncore_cache is not None:
            cpu["uncoreCache"] = c.uncore_cache
        if c.die is not None:
            cpu["die"] = c.die
        if not c.online:
            cpu["online"] = False
        cpus.append(cpu)
    devices: list[dict[str, Any]] = []
    for d in m.devices:
        dev: dict[str, Any] = {
            "resource": d.resource,
            "id": d.id,
            "numa": list(d.numa),
            "healthy": d.healthy,
        }
        if d.pcie_root is not None:
            dev["pcieRoot"] = d.pcie_root
        if d.bus_id is not None:
            dev["busId"] = d.bus_id
        devices.append(dev)
    out: dict[str, Any] = {
        "name": m.name,
        "numaNodes": nodes,
        "cpus": cpus,
        "devices": devices,
        "kubelet": _dump_kubelet(m.kubelet),
    }
    if m.labels:
        out["labels"] = dict(sorted(m.labels.items()))
    if m.annotations:
        out["annotations"] = dict(sorted(m.annotations.items()))
    return out


def dump_machine_yaml(m: Machine) -> str:
    """:func:`dump_machine` as YAML text, one flow-style line per node, CPU and device."""
    doc = dump_machine(m)
    lines = [f"name: {json.dumps(doc['name'])}"]
    for key in ("numaNodes", "cpus", "devices"):
        if not doc[key]:
            lines.append(f"{key}: []")
            continue
        lines.append(f"{key}:")
        lines.extend(
            "  - "
            + yaml.safe_dump(item, default_flow_style=True, width=1 << 16, sort_keys=False).strip()
            for item in doc[key]
        )
    kubelet = yaml.safe_dump({"kubelet": doc["kubelet"]}, default_flow_style=False, sort_keys=False)
    return "\n".join(lines) + "\n" + kubelet
