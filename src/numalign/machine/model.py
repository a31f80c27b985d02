"""The machine model: what the hardware is, and the kubelet configuration that runs on it.

Immutable value objects. Every source (spec file, sysfs, hwloc XML, NRT) produces a
:class:`Machine`; every adapter consumes one. Units: memory and hugepages in bytes, page sizes
in bytes, CPU ids are Linux logical CPU numbers.

``Cpu.core`` is unique machine-wide (the kubelet derives a core id from the lowest CPU id of
its threads; sources normalise per-socket ``core_id`` values to that). ``Cpu.socket`` is the
physical package id, ``Cpu.numa`` the NUMA node id, ``Cpu.uncore_cache`` the L3 (uncore)
cache id when known.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cached_property
from typing import TYPE_CHECKING

from numalign.engine.bitmask import mask_of
from numalign.record import Record, set_field

if TYPE_CHECKING:  # a spec without kubeletVersion never loads the version parser
    from numalign.machine.kubelet_version import KubeletVersion

#: the kubelet's default ``maxPods``
DEFAULT_MAX_PODS = 110


class NumaNode(Record, frozen=True):
    """One NUMA node: its regular memory, hugepages and SLIT distances."""

    __slots__ = ("id", "memory", "hugepages", "distances")
    id: int
    memory: int  # bytes of regular memory (MemTotal of the node)
    hugepages: Mapping[int, int]  # page size -> total bytes
    distances: Mapping[int, int]  # node id -> SLIT distance

    def __init__(
        self,
        id: int,
        memory: int,
        hugepages: Mapping[int, int] | None = None,
        distances: Mapping[int, int] | None = None,
    ) -> None:
        set_field(self, "id", id)
        set_field(self, "memory", memory)
        set_field(self, "hugepages", {} if hugepages is None else hugepages)
        set_field(self, "distances", {} if distances is None else distances)


class Cpu(Record, frozen=True):
    """One logical CPU and where it sits (core, socket, NUMA node, uncore cache, die)."""

    __slots__ = ("id", "core", "socket", "numa", "uncore_cache", "die", "online")
    id: int
    core: int
    socket: int
    numa: int
    uncore_cache: int | None
    die: int | None
    online: bool

    def __init__(
        self,
        id: int,
        core: int,
        socket: int,
        numa: int,
        uncore_cache: int | None = None,
        die: int | None = None,
        online: bool = True,
    ) -> None:
        set_field(self, "id", id)
        set_field(self, "core", core)
        set_field(self, "socket", socket)
        set_field(self, "numa", numa)
        set_field(self, "uncore_cache", uncore_cache)
        set_field(self, "die", die)
        set_field(self, "online", online)


class Device(Record, frozen=True):
    """A schedulable device instance of an extended resource (a GPU, a VF, an RDMA device)."""

    __slots__ = ("resource", "id", "numa", "healthy", "pcie_root", "bus_id")
    resource: str  # e.g. nvidia.com/gpu
    id: str  # device-plugin device id
    numa: tuple[int, ...]  # () = no topology information
    healthy: bool
    pcie_root: str | None
    bus_id: str | None

    def __init__(
        self,
        resource: str,
        id: str,
        numa: tuple[int, ...] = (),
        healthy: bool = True,
        pcie_root: str | None = None,
        bus_id: str | None = None,
    ) -> None:
        set_field(self, "resource", resource)
        set_field(self, "id", id)
        set_field(self, "numa", numa)
        set_field(self, "healthy", healthy)
        set_field(self, "pcie_root", pcie_root)
        set_field(self, "bus_id", bus_id)


class ReservedMemory(Record, frozen=True):
    """One ``reservedMemory`` entry of the KubeletConfiguration."""

    __slots__ = ("numa_node", "limits")
    numa_node: int
    limits: Mapping[str, int]  # resource name (memory, hugepages-1Gi) -> bytes

    def __init__(self, numa_node: int, limits: Mapping[str, int]) -> None:
        set_field(self, "numa_node", numa_node)
        set_field(self, "limits", limits)


class KubeletConfig(Record, frozen=True):
    """The KubeletConfiguration fields numalign honours (kubelet defaults)."""

    __slots__ = (
        "topology_manager_policy",
        "topology_manager_scope",
        "topology_manager_policy_options",
        "cpu_manager_policy",
        "cpu_manager_policy_options",
        "reserved_system_cpus",
        "system_reserved",
        "kube_reserved",
        "memory_manager_policy",
        "reserved_memory",
        "feature_gates",
        "eviction_hard",
        "max_pods",
        "kubelet_version",
    )
    topology_manager_policy: str
    topology_manager_scope: str
    topology_manager_policy_options: Mapping[str, str]
    cpu_manager_policy: str
    cpu_manager_policy_options: Mapping[str, str]
    reserved_system_cpus: frozenset[int] | None  # explicit --reserved-cpus
    system_reserved: Mapping[str, int]  # cpu in millicores
    kube_reserved: Mapping[str, int]  # cpu in millicores
    memory_manager_policy: str
    reserved_memory: tuple[ReservedMemory, ...]
    feature_gates: Mapping[str, bool]
    #: ``evictionHard`` signal -> threshold (``memory.available: 100Mi``); None = the kubelet's
    #: default (on Linux ``memory.available<100Mi`` and disk signals that numalign ignores)
    eviction_hard: Mapping[str, str] | None
    #: ``maxPods``: how many pods the node admits (the kubelet's default 110)
    max_pods: int
    #: the kubelet's version (``kubeletVersion`` in a machine spec, ``--kubelet-version``,
    #: ``Node.status.nodeInfo.kubeletVersion``); None = unknown, decided as the newest release
    #: numalign models (``modes/kubelet/releases.py``)
    kubelet_version: KubeletVersion | None

    def __init__(
        self,
        topology_manager_policy: str = "none",
        topology_manager_scope: str = "container",
        topology_manager_policy_options: Mapping[str, str] | None = None,
        cpu_manager_policy: str = "none",
        cpu_manager_policy_options: Mapping[str, str] | None = None,
        reserved_system_cpus: frozenset[int] | None = None,
        system_reserved: Mapping[str, int] | None = None,
        kube_reserved: Mapping[str, int] | None = None,
        memory_manager_policy: str = "None",
        reserved_memory: tuple[ReservedMemory, ...] = (),
        feature_gates: Mapping[str, bool] | None = None,
        eviction_hard: Mapping[str, str] | None = None,
        max_pods: int = DEFAULT_MAX_PODS,
        kubelet_version: KubeletVersion | None = None,
    ) -> None:
        set_field(self, "topology_manager_policy", topology_manager_policy)
        set_field(self, "topology_manager_scope", topology_manager_scope)
        set_field(self, "topology_manager_policy_options",
                  {} if topology_manager_policy_options is None else topology_manager_policy_options)
        set_field(self, "cpu_manager_policy", cpu_manager_policy)
        set_field(self, "cpu_manager_policy_options",
                  {} if cpu_manager_policy_options is None else cpu_manager_policy_options)
        set_field(self, "reserved_system_cpus", reserved_system_cpus)
        set_field(self, "system_reserved", {} if system_reserved is None else system_reserved)
        set_field(self, "kube_reserved", {} if kube_reserved is None else kube_reserved)
        set_field(self, "memory_manager_policy", memory_manager_policy)
        set_field(self, "reserved_memory", reserved_memory)
        set_field(self, "feature_gates", {} if feature_gates is None else feature_gates)
        set_field(self, "eviction_hard", eviction_hard)
        set_field(self, "max_pods", max_pods)
        set_field(self, "kubelet_version", kubelet_version)


class Machine(Record, frozen=True):
    """A node's topology (NUMA nodes, CPUs, devices), its kubelet configuration and labels."""

    __slots__ = (
        "name",
        "numa_nodes",
        "cpus",
        "devices",
        "kubelet",
        "labels",
        "annotations",
        "__dict__",
    )
    name: str
    numa_nodes: tuple[NumaNode, ...]  # ascending id
    cpus: tuple[Cpu, ...]  # ascending id
    devices: tuple[Device, ...]
    kubelet: KubeletConfig
    #: the Kubernetes node's labels (Koordinator's ``node.koordinator.sh/*``, numalign's
    #: ``numalign.io/engine-mode``): how cluster schedulers treat this node
    labels: Mapping[str, str]
    #: the node's annotations the cluster-scheduler modes read (Koordinator's
    #: ``kubelet.koordinator.sh/cpu-manager-policy``, which koordlet puts on its NRT)
    annotations: Mapping[str, str]

    def __init__(
        self,
        name: str,
        numa_nodes: tuple[NumaNode, ...],
        cpus: tuple[Cpu, ...],
        devices: tuple[Device, ...] = (),
        kubelet: KubeletConfig | None = None,
        labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
    ) -> None:
        set_field(self, "name", name)
        set_field(self, "numa_nodes", numa_nodes)
        set_field(self, "cpus", cpus)
        set_field(self, "devices", devices)
        set_field(self, "kubelet", KubeletConfig() if kubelet is None else kubelet)
        set_field(self, "labels", {} if labels is None else labels)
        set_field(self, "annotations", {} if annotations is None else annotations)

    @cached_property
    def node_ids(self) -> tuple[int, ...]:
        return tuple(n.id for n in self.numa_nodes)

    @cached_property
    def all_nodes_mask(self) -> int:
        return mask_of(self.node_ids)

    @cached_property
    def node_by_id(self) -> Mapping[int, NumaNode]:
        return {n.id: n for n in self.numa_nodes}

    @cached_property
    def cpu_by_id(self) -> Mapping[int, Cpu]:
        return {c.id: c for c in self.cpus}

    @cached_property
    def online_cpus(self) -> tuple[Cpu, ...]:
        return tuple(c for c in self.cpus if c.online)

    @cached_property
    def cpus_by_numa(self) -> Mapping[int, frozenset[int]]:
        out: dict[int, set[int]] = {i: set() for i in self.node_ids}
        for c in self.online_cpus:
            out.setdefault(c.numa, set()).add(c.id)
        return {k: frozenset(v) for k, v in out.items()}

    @cached_property
    def sockets(self) -> tuple[int, ...]:
        return tuple(sorted({c.socket for c in self.online_cpus}))

    @cached_property
    def cpus_per_core(self) -> int:
        """SMT level (threads per core), the kubelet's ``CPUsPerCore``."""
        cores: dict[int, int] = {}
        for c in self.online_cpus:
            cores[c.core] = cores.get(c.core, 0) + 1
        return max(cores.values(), default=1)

    @cached_property
    def distances(self) -> Mapping[int, Mapping[int, int]]:
        return {n.id: n.distances for n in self.numa_nodes}

    @cached_property
    def has_distances(self) -> bool:
        return all(all(j in n.distances for j in self.node_ids) for n in self.numa_nodes)

    def devices_of(self, resource: str) -> tuple[Device, ...]:
        return tuple(d for d in self.devices if d.resource == resource)

    @cached_property
    def device_resources(self) -> tuple[str, ...]:
        return tuple(sorted({d.resource for d in self.devices}))
