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
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

from numalign.engine.bitmask import mask_of

if TYPE_CHECKING:  # a spec without kubeletVersion never loads the version parser
    from numalign.machine.kubelet_version import KubeletVersion


@dataclass(frozen=True)
class NumaNode:
    """One NUMA node: its regular memory, hugepages and SLIT distances."""

    id: int
    memory: int  # bytes of regular memory (MemTotal of the node)
    hugepages: Mapping[int, int] = field(default_factory=dict)  # page size -> total bytes
    distances: Mapping[int, int] = field(default_factory=dict)  # node id -> SLIT distance


@dataclass(frozen=True)
class Cpu:
    """One logical CPU and where it sits (core, socket, NUMA node, uncore cache, die)."""

    id: int
    core: int
    socket: int
    numa: int
    uncore_cache: int | None = None
    die: int | None = None
    online: bool = True


@dataclass(frozen=True)
class Device:
    """A schedulable device instance of an extended resource (a GPU, a VF, an RDMA device)."""

    resource: str  # e.g. nvidia.com/gpu
    id: str  # device-plugin device id
    numa: tuple[int, ...] = ()  # () = no topology information
    healthy: bool = True
    pcie_root: str | None = None
    bus_id: str | None = None


@dataclass(frozen=True)
class ReservedMemory:
    """One ``reservedMemory`` entry of the KubeletConfiguration."""

    numa_node: int
    limits: Mapping[str, int]  # resource name (memory, hugepages-1Gi) -> bytes


@dataclass(frozen=True)
class KubeletConfig:
    """The KubeletConfiguration fields numalign honours (kubelet defaults)."""

    topology_manager_policy: str = "none"
    topology_manager_scope: str = "container"
    topology_manager_policy_options: Mapping[str, str] = field(default_factory=dict)
    cpu_manager_policy: str = "none"
    cpu_manager_policy_options: Mapping[str, str] = field(default_factory=dict)
    reserved_system_cpus: frozenset[int] | None = None  # explicit --reserved-cpus
    system_reserved: Mapping[str, int] = field(default_factory=dict)  # cpu in millicores
    kube_reserved: Mapping[str, int] = field(default_factory=dict)  # cpu in millicores
    memory_manager_policy: str = "None"
    reserved_memory: tuple[ReservedMemory, ...] = ()
    feature_gates: Mapping[str, bool] = field(default_factory=dict)
    #: ``evictionHard`` signal -> threshold (``memory.available: 100Mi``); None = the kubelet's
    #: default (on Linux ``memory.available<100Mi`` and disk signals that numalign ignores)
    eviction_hard: Mapping[str, str] | None = None
    #: ``maxPods``: how many pods the node admits (the kubelet's default 110)
    max_pods: int = 110
    #: the kubelet's version (``kubeletVersion`` in a machine spec, ``--kubelet-version``,
    #: ``Node.status.nodeInfo.kubeletVersion``); None = unknown, decided as the newest release
    #: numalign models (``modes/kubelet/releases.py``)
    kubelet_version: KubeletVersion | None = None


@dataclass(frozen=True)
class Machine:
    """A node's topology (NUMA nodes, CPUs, devices), its kubelet configuration and labels."""

    name: str
    numa_nodes: tuple[NumaNode, ...]  # ascending id
    cpus: tuple[Cpu, ...]  # ascending id
    devices: tuple[Device, ...] = ()
    kubelet: KubeletConfig = field(default_factory=KubeletConfig)
    #: the Kubernetes node's labels (Koordinator's ``node.koordinator.sh/*``, numalign's
    #: ``numalign.io/engine-mode``): how cluster schedulers treat this node
    labels: Mapping[str, str] = field(default_factory=dict)
    #: the node's annotations the cluster-scheduler modes read (Koordinator's
    #: ``kubelet.koordinator.sh/cpu-manager-policy``, which koordlet puts on its NRT)
    annotations: Mapping[str, str] = field(default_factory=dict)

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
