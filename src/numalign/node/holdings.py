"""What admitted pods hold: each container's CPUs, memory blocks and devices, and the NUMA
nodes those sit on, read through the managers' reader methods (never their tables).

Admission asks :func:`container_usage` for every container it admits; :mod:`numalign.node.usage`
answers the node-wide questions (per-NUMA amounts, free space, demand, observed usage) and
re-exports these names, so an adapter asks either. Kept apart so that admitting a pod loads
only this much (start-up time: ``docs/architecture.md``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from numalign.machine.model import Machine
from numalign.node.state import NodeState, PodRecord
from numalign.record import Record, set_field
from numalign.resources.memory_state import Block

__all__ = ["ContainerUsage", "PodUsage", "container_usage", "cpus_numa_nodes", "pod_numa_nodes",
           "pod_usage", "pods_usage"]


class ContainerUsage(Record, frozen=True):
    """What one container holds, and the NUMA nodes those things sit on."""

    __slots__ = ("name", "affinity", "preferred", "cpus", "memory", "devices", "numa_nodes")
    name: str
    affinity: tuple[int, ...] | None
    preferred: bool
    cpus: frozenset[int]
    memory: tuple[Block, ...]
    devices: Mapping[str, tuple[str, ...]]
    numa_nodes: frozenset[int]

    def __init__(
        self,
        name: str,
        affinity: tuple[int, ...] | None,
        preferred: bool,
        cpus: frozenset[int] = frozenset(),
        memory: tuple[Block, ...] = (),
        devices: Mapping[str, tuple[str, ...]] | None = None,
        numa_nodes: frozenset[int] = frozenset(),
    ) -> None:
        set_field(self, "name", name)
        set_field(self, "affinity", affinity)
        set_field(self, "preferred", preferred)
        set_field(self, "cpus", cpus)
        set_field(self, "memory", memory)
        set_field(self, "devices", {} if devices is None else devices)
        set_field(self, "numa_nodes", numa_nodes)

    def memory_by_numa(self) -> dict[str, dict[str, int]]:
        """``"0"`` or ``"0,1"`` (a block's NUMA nodes) -> resource -> bytes."""
        out: dict[str, dict[str, int]] = {}
        for b in self.memory:
            share = out.setdefault(",".join(str(i) for i in b.numa_affinity), {})
            share[b.type] = share.get(b.type, 0) + b.size
        return out


class PodUsage(Record, frozen=True):
    """What one admitted pod holds: its containers' CPUs, memory blocks and devices."""

    __slots__ = ("uid", "record", "containers", "cpu_exclusive")
    uid: str
    record: PodRecord
    containers: tuple[ContainerUsage, ...]
    #: the Koordinator CPU exclusive policy the pod's CPUs are held under (koordinator mode)
    cpu_exclusive: str | None

    def __init__(
        self,
        uid: str,
        record: PodRecord,
        containers: tuple[ContainerUsage, ...],
        cpu_exclusive: str | None = None,
    ) -> None:
        set_field(self, "uid", uid)
        set_field(self, "record", record)
        set_field(self, "containers", containers)
        set_field(self, "cpu_exclusive", cpu_exclusive)

    @property
    def numa_nodes(self) -> frozenset[int]:
        out: set[int] = set()
        for c in self.containers:
            out |= c.numa_nodes
        return frozenset(out)


def _numa_of(machine: Machine, cpus: Iterable[int], blocks: Iterable[Block],
             devices: Mapping[str, Iterable[str]]) -> frozenset[int]:
    used: set[int] = set()
    by_id = machine.cpu_by_id
    for c in cpus:
        cpu = by_id.get(c)
        if cpu is not None:
            used.add(cpu.numa)
    for b in blocks:
        used.update(b.numa_affinity)
    if devices:
        dev_numa = {(d.resource, d.id): d.numa[:1] for d in machine.devices}
        for res, ids in devices.items():
            for i in ids:
                used.update(dev_numa.get((res, i), ()))
    return frozenset(used)


def container_usage(machine: Machine, state: NodeState, uid: str, name: str) -> ContainerUsage:
    """What container ``name`` of pod ``uid`` holds in ``state``."""
    cpus = state.cpu.pod_cpus(uid).get(name, frozenset())
    blocks = tuple(state.memory.pod_blocks(uid).get(name, []))
    devices = {r: tuple(ids) for r, ids in state.devices.pod_allocations(uid).get(name, {}).items()}
    rec = state.pods.get(uid)
    c = rec.container(name) if rec is not None else None
    return ContainerUsage(
        name,
        c.affinity if c is not None else None,
        c.preferred if c is not None else False,
        frozenset(cpus),
        blocks,
        devices,
        _numa_of(machine, cpus, blocks, devices),
    )


def pod_usage(machine: Machine, state: NodeState, uid: str) -> PodUsage | None:
    """What pod ``uid`` holds (its recorded containers plus anything the managers hold for it)."""
    rec = state.pods.get(uid)
    if rec is None:
        return None
    names = [c.name for c in rec.containers]
    for extra in (state.cpu.pod_cpus(uid), state.memory.pod_blocks(uid),
                  state.devices.pod_allocations(uid)):
        names += sorted(n for n in extra if n not in names)
    return PodUsage(uid, rec, tuple(container_usage(machine, state, uid, n) for n in names),
                    state.cpu.pod_exclusive(uid))


def pods_usage(machine: Machine, state: NodeState) -> list[PodUsage]:
    """Every pod's usage, by key."""
    out = [pod_usage(machine, state, uid) for uid in state.pods]
    return sorted((u for u in out if u is not None), key=lambda u: (u.record.key, u.uid))


def pod_numa_nodes(machine: Machine, state: NodeState, uid: str) -> frozenset[int]:
    """NUMA nodes of the exclusive CPUs, memory blocks and devices pod ``uid`` holds."""
    cpus = [c for cs in state.cpu.pod_cpus(uid).values() for c in cs]
    blocks = [b for bs in state.memory.pod_blocks(uid).values() for b in bs]
    devices: dict[str, list[str]] = {}
    for per in state.devices.pod_allocations(uid).values():
        for r, ids in per.items():
            devices.setdefault(r, []).extend(ids)
    return _numa_of(machine, cpus, blocks, devices)


def cpus_numa_nodes(machine: Machine, cpus: Iterable[int]) -> frozenset[int]:
    """NUMA nodes of a CPU set."""
    return _numa_of(machine, cpus, (), {})
