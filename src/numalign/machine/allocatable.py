"""Node allocatable, as the kubelet computes it from a machine and its KubeletConfiguration.

Pure functions over a :class:`~numalign.machine.model.Machine`; no I/O.

* :func:`parse_eviction_hard` - the kubelet's ``eviction.ParseThresholdConfig`` over
  ``evictionHard`` (signal names, ``<`` thresholds as quantities or percentages, ``0%`` and
  ``100%`` ignored, quantities must be positive), with the kubelet's messages;
* :func:`allocatable_reservation` - ``GetNodeAllocatableReservation``
  (``pkg/kubelet/cm/node_container_manager_linux.go``): per resource, systemReserved +
  kubeReserved + the hard-eviction reservation (``memory.available`` only: numalign models
  no disks); ``reservedSystemCPUs`` replaces the cpu of both reservations with its CPU count
  (``cmd/kubelet/app/server.go``);
* :func:`node_capacity` / :func:`node_allocatable` - the node status' capacity and
  allocatable (``pkg/kubelet/nodestatus/setters.go`` ``MachineInfo``): allocatable =
  capacity - reservation (never negative), and regular memory also loses every hugepage
  pool's capacity; ``pods`` is ``maxPods``; a device plugin resource's allocatable counts its
  healthy devices;
* :func:`validate_reserved_memory` - the memory manager's start-up check
  (``pkg/kubelet/cm/memorymanager/memory_manager.go`` ``validateReservedMemory``): under the
  Static policy, for memory and every hugepage size, the ``reservedMemory`` total must equal
  the Node Allocatable reservation.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from numalign.errors import InputError
from numalign.inputs.goparse import GoSyntaxError, parse_float32, to_float32
from numalign.inputs.quantity import (
    CPU,
    MEMORY,
    Quantity,
    format_bytes,
    hugepage_resource_name,
    is_hugepages_resource,
    parse_quantity,
    quantity_int,
)
from numalign.machine.model import KubeletConfig, Machine, ReservedMemory

PODS = "pods"
DEFAULT_MAX_PODS = 110
MEMORY_AVAILABLE = "memory.available"
#: the kubelet's default ``evictionHard`` on Linux (only its memory part matters here)
DEFAULT_EVICTION_HARD: Mapping[str, str] = {
    MEMORY_AVAILABLE: "100Mi",
    "nodefs.available": "10%",
    "nodefs.inodesFree": "5%",
    "imagefs.available": "15%",
    "imagefs.inodesFree": "5%",
}
#: eviction signals the kubelet knows (``pkg/kubelet/eviction/api/types.go``)
EVICTION_SIGNALS = frozenset({
    MEMORY_AVAILABLE, "allocatableMemory.available", "nodefs.available", "nodefs.inodesFree",
    "imagefs.available", "imagefs.inodesFree", "containerfs.available",
    "containerfs.inodesFree", "pid.available",
})
_FIELD = "kubelet.evictionHard"


def _threshold(signal: str, text: str, path: str) -> Quantity | tuple[str, float] | None:
    """One threshold, as the kubelet parses it (``parseThresholdStatement``): a quantity,
    ``("%", fraction)`` or None (exactly ``0%`` or ``100%``: none). A percentage is Go's
    ``strconv.ParseFloat(s, 32)`` of the text without its trailing ``%`` signs, divided by
    100 in float32 (``parsePercentage``); it must lie in [0, 1] (the kubelet's ``percentage >
    1`` check; releases before it compared with 100)."""
    if text.endswith("%"):
        if text in ("0%", "100%"):
            return None
        try:
            pct = to_float32(parse_float32(text.rstrip("%")) / 100)
        except GoSyntaxError as e:
            raise InputError(f"invalid percentage: {text!r} ({e})", path) from None
        if pct != pct:  # NaN passes both of the kubelet's checks; its reservation is undefined
            raise InputError(f"invalid percentage: {text!r} is not a number", path)
        if pct < 0:
            raise InputError(f"eviction percentage threshold {signal} must be >= 0%: {text}", path)
        if pct > 1:
            raise InputError(f"eviction percentage threshold {signal} must be <= 100%: {text}", path)
        return ("%", pct)
    q = parse_quantity(text, path)
    if q <= 0:
        raise InputError(f"eviction threshold {signal} must be positive: {text}", path)
    return q


def parse_eviction_hard(raw: Mapping[str, str]) -> None:
    """Validate ``evictionHard`` as the kubelet does at start-up; raises InputError."""
    for signal, text in raw.items():
        path = f"{_FIELD}.{signal}"
        if signal not in EVICTION_SIGNALS:
            raise InputError(f"unsupported eviction signal {signal}", path)
        _threshold(signal, text, path)


def eviction_memory(kc: KubeletConfig, memory_capacity: int) -> int:
    """Bytes the hard ``memory.available`` threshold reserves (percentages of capacity)."""
    table = DEFAULT_EVICTION_HARD if kc.eviction_hard is None else kc.eviction_hard
    text = table.get(MEMORY_AVAILABLE)
    if text is None:
        return 0
    t = _threshold(MEMORY_AVAILABLE, text, f"{_FIELD}.{MEMORY_AVAILABLE}")
    if t is None:
        return 0
    if isinstance(t, tuple):
        # GetThresholdQuantity: int64(float64(capacity) * float64(percentage)), truncated
        return int(float(memory_capacity) * t[1])
    return quantity_int(t)


def memory_capacity(machine: Machine) -> int:
    """The node's memory capacity: MemTotal of every NUMA node together."""
    return sum(n.memory for n in machine.numa_nodes)


def node_capacity(machine: Machine) -> dict[str, int]:
    """cpu (millicores of online CPUs), memory, hugepages per size, pods, devices (all)."""
    out: dict[str, int] = {
        CPU: len(machine.online_cpus) * 1000,
        MEMORY: memory_capacity(machine),
        PODS: machine.kubelet.max_pods,
    }
    for n in machine.numa_nodes:
        for size, total in n.hugepages.items():
            name = hugepage_resource_name(size)
            out[name] = out.get(name, 0) + total
    for d in machine.devices:
        out[d.resource] = out.get(d.resource, 0) + 1
    return out


def allocatable_reservation(machine: Machine) -> dict[str, int]:
    """kubelet ``GetNodeAllocatableReservation``: reserved amount per resource (non-zero)."""
    kc = machine.kubelet
    system = dict(kc.system_reserved)
    kube = dict(kc.kube_reserved)
    if kc.reserved_system_cpus:
        kube.pop(CPU, None)
        system[CPU] = len(kc.reserved_system_cpus) * 1000
    capacity = node_capacity(machine)
    eviction = {MEMORY: eviction_memory(kc, capacity[MEMORY])}
    out: dict[str, int] = {}
    for name in capacity:
        value = system.get(name, 0) + kube.get(name, 0) + eviction.get(name, 0)
        if value:
            out[name] = value
    return out


def node_allocatable(machine: Machine) -> dict[str, int]:
    """The node status' allocatable per resource, as the kubelet's predicate admission uses it."""
    capacity = node_capacity(machine)
    reservation = allocatable_reservation(machine)
    out = {name: max(0, value - reservation.get(name, 0)) for name, value in capacity.items()}
    for name, value in capacity.items():
        if is_hugepages_resource(name):
            out[MEMORY] = max(0, out[MEMORY] - value)
    for resource in machine.device_resources:
        out[resource] = sum(1 for d in machine.devices_of(resource) if d.healthy)
    return out


def check_reserved_memory(
    reservation: Mapping[str, int], reserved_memory: Iterable[ReservedMemory]
) -> None:
    """kubelet ``validateReservedMemory``: for memory and each hugepage size named by either
    side, the ``reservedMemory`` total equals the Node Allocatable ``reservation``."""
    totals: dict[str, int] = {}
    for rm in reserved_memory:
        for name, amount in rm.limits.items():
            totals[name] = totals.get(name, 0) + amount
    kinds = set(totals) | {r for r in reservation if r == MEMORY or is_hugepages_resource(r)}
    for kind in sorted(kinds):
        want, have = reservation.get(kind, 0), totals.get(kind, 0)
        if want != have:
            raise InputError(
                f'the total amount "{format_bytes(have)}" of type "{kind}" is not equal to the '
                f'value "{format_bytes(want)}" determined by Node Allocatable feature'
            )


def validate_reserved_memory(machine: Machine) -> None:
    """The Static memory manager's start-up check of ``reservedMemory`` against Node
    Allocatable (kubelet message, with what makes up the reservation; field
    ``kubelet.reservedMemory``). Nothing to check under the ``None`` policy."""
    kc = machine.kubelet
    if kc.memory_manager_policy != "Static":
        return
    try:
        check_reserved_memory(allocatable_reservation(machine), kc.reserved_memory)
    except InputError as e:
        raise InputError(
            f"{e.problem} (systemReserved + kubeReserved + evictionHard memory.available, "
            "whose kubelet default is 100Mi)",
            "kubelet.reservedMemory",
        ) from None
