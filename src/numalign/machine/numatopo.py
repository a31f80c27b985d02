"""Volcano's ``Numatopology`` (``nodeinfo.volcano.sh/v1alpha1``) to a Machine (read only).

The object carries the CPU topology (``spec.cpuDetail``: CPU id -> ``numa``, ``socket``, per-socket
``core``) and the kubelet policies, but no memory, hugepages, distances or devices: the machine
has memory 0 and no distances. Cores are renumbered to the kubelet's machine-wide id (the
lowest CPU of the threads sharing NUMA node, socket and ``core``). ``policies`` give the CPU and
Topology Manager policies; ``resReserved.cpu`` becomes ``kubeReserved`` cpu and
``resReserved.memory`` ``systemReserved`` memory. The usage
the object reports (``numares.cpu.allocatable``, ``podAllocations``) is read by
:func:`numalign.node.numatopo.numatopo_usage`; :func:`numalign.node.numatopo.build_numatopo`
writes the object.
"""

from __future__ import annotations

from typing import Any

from numalign.errors import InputError
from numalign.inputs.documents import read_yaml
from numalign.inputs.quantity import cpu_millis, parse_quantity, quantity_int
from numalign.machine.model import Cpu, KubeletConfig, Machine, NumaNode

API_GROUP = "nodeinfo.volcano.sh/"
KIND = "Numatopology"


def _int(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InputError(f"expected a non-negative integer, got {value!r}", where)
    return value


def numatopo_to_machine(obj: object) -> Machine:
    """A :class:`Machine` from a parsed Numatopology object."""
    if not isinstance(obj, dict):
        raise InputError("a Numatopology must be a mapping")
    api = obj.get("apiVersion")
    if api is not None and not (isinstance(api, str) and api.startswith(API_GROUP)):
        raise InputError(f"expected {API_GROUP}v1alpha1, got {api!r}", "apiVersion")
    if obj.get("kind", KIND) != KIND:
        raise InputError(f"expected {KIND}, got {obj.get('kind')!r}", "kind")
    meta = obj.get("metadata") or {}
    name = str(meta.get("name", "numatopo")) if isinstance(meta, dict) else "numatopo"
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        raise InputError("required mapping", "spec")
    detail = spec.get("cpuDetail")
    if not isinstance(detail, dict) or not detail:
        raise InputError(
            "required non-empty mapping of CPU id -> {numa, socket, core}", "spec.cpuDetail"
        )
    raw: list[tuple[int, int, int, int]] = []
    for key, info in detail.items():
        where = f"spec.cpuDetail.{key}"
        try:
            cpu = int(str(key))
        except ValueError:
            raise InputError(f"CPU id must be an integer, got {key!r}", where) from None
        if cpu < 0:
            raise InputError(f"CPU id must be non-negative, got {key!r}", where)
        if not isinstance(info, dict):
            raise InputError("must be a mapping {numa, socket, core}", where)
        raw.append(
            (
                cpu,
                _int(info.get("numa", 0), f"{where}.numa"),
                _int(info.get("socket", 0), f"{where}.socket"),
                _int(info.get("core", cpu), f"{where}.core"),
            )
        )
    if len({r[0] for r in raw}) != len(raw):
        raise InputError("duplicate CPU ids", "spec.cpuDetail")
    core_min: dict[tuple[int, int, int], int] = {}
    for cpu, numa, sock, core in raw:
        k = (numa, sock, core)
        core_min[k] = min(core_min.get(k, cpu), cpu)
    cpus = tuple(
        sorted(
            (Cpu(id=c, core=core_min[(n, s, k)], socket=s, numa=n) for c, n, s, k in raw),
            key=lambda c: c.id,
        )
    )
    nodes = tuple(NumaNode(id=i, memory=0) for i in sorted({c.numa for c in cpus}))
    policies = spec.get("policies") or {}
    if not isinstance(policies, dict):
        raise InputError("must be a mapping", "spec.policies")
    reserved: dict[str, int] = {}
    res = spec.get("resReserved") or {}
    if not isinstance(res, dict):
        raise InputError("must be a mapping", "spec.resReserved")
    if "cpu" in res:
        reserved["cpu"] = cpu_millis(parse_quantity(res["cpu"], "spec.resReserved.cpu"))
    # the exporter reports the kubelet's reservations summed; the memory part is kept as
    # systemReserved (node allocatable is the same either way)
    system_reserved: dict[str, int] = {}
    if "memory" in res:
        system_reserved["memory"] = quantity_int(parse_quantity(res["memory"], "spec.resReserved.memory"))
    numares = spec.get("numares") or {}
    if isinstance(numares, dict) and isinstance(numares.get("cpu"), dict):
        cap = numares["cpu"].get("capacity")
        if cap is not None and _int(cap, "spec.numares.cpu.capacity") != len(cpus):
            raise InputError(
                f"capacity {cap} differs from the {len(cpus)} CPUs of cpuDetail",
                "spec.numares.cpu.capacity",
            )
    kubelet = KubeletConfig(
        topology_manager_policy=str(policies.get("TopologyManagerPolicy", "none")),
        cpu_manager_policy=str(policies.get("CPUManagerPolicy", "none")),
        kube_reserved=reserved,
        system_reserved=system_reserved,
    )
    return Machine(name=name, numa_nodes=nodes, cpus=cpus, kubelet=kubelet)


def load_numatopo(path: str) -> Machine:
    """Read a Numatopology YAML or JSON file."""
    doc: Any = read_yaml(path, invalid="malformed YAML")
    try:
        return numatopo_to_machine(doc)
    except InputError as e:
        raise e.within(path) from None
