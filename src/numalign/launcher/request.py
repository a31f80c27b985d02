"""What a launch asks for: the command and the resources it needs, and the pod it becomes.

:class:`LaunchRequest` is built from plain values (ints, quantity strings, ``RESOURCE=COUNT``
strings) and validated on construction. Errors are :class:`~numalign.errors.InputError` whose
field is the request field (``cpus``, ``memory``, ``hugepages-1Gi``, ``gpus``, ``devices``).
GPUs are counted without a resource name; :meth:`LaunchRequest.resources` resolves them to the
machine's GPU resource and checks every device resource exists on the machine.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from numalign.errors import InputError
from numalign.inputs.quantity import parse_quantity, quantity_int
from numalign.launcher.runs import CONTAINER, NAMESPACE, Identity

if TYPE_CHECKING:
    from numalign.machine.model import Machine
    from numalign.pods import Pod

#: what a Guaranteed pod without ``--memory`` carries (nothing accounts it, nothing is bound)
NOMINAL_MEMORY = 1 << 20
HUGEPAGE_RESOURCES = ("hugepages-1Gi", "hugepages-2Mi")
GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu", "gpu.intel.com/i915")
_ANN = "numalign.io/"
#: what a non-positive amount is called in its error: memory, hugepages
_AMOUNT = ("a memory amount", "a hugepage amount")


def _quantity(value: int | str, where: str) -> int:
    """A positive quantity (``4Gi``, ``512Mi``, bytes) as an integer."""
    q = parse_quantity(value, where)
    if q <= 0:
        raise InputError(f"{_AMOUNT[where != 'memory']} must be positive, got {value!r}", where)
    return quantity_int(q)


def _count(value: object, where: str, problem: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"{problem}, got {value!r}", where)
    return value


@dataclass(frozen=True)
class LaunchRequest:
    """A command and what it needs, in engine units (bytes, whole CPUs, device counts)."""

    command: tuple[str, ...] = ()
    cpus: int = 1
    memory: int | None = None  # bytes; None = not asked (nominal, not bound)
    hugepages: Mapping[str, int] = field(default_factory=dict)  # hugepages-1Gi -> bytes
    gpus: int = 0  # of the machine's GPU resource
    devices: Mapping[str, int] = field(default_factory=dict)  # resource -> count

    def __post_init__(self) -> None:
        command = tuple(self.command)
        if not all(isinstance(a, str) for a in command):
            raise InputError("must be strings", "command")
        cpus = _count(self.cpus, "cpus", "a whole number of exclusive CPUs")
        if cpus < 1:
            raise InputError(f"must be at least 1, got {cpus}", "cpus")
        if self.memory is not None and _count(self.memory, "memory", "a whole number of bytes") <= 0:
            raise InputError(f"{_AMOUNT[0]} must be positive, got {self.memory!r}", "memory")
        for res, size in self.hugepages.items():
            if res not in HUGEPAGE_RESOURCES:
                raise InputError(f"expected one of {', '.join(HUGEPAGE_RESOURCES)}", f"hugepages.{res}")
            if _count(size, res, "a whole number of bytes") <= 0:
                raise InputError(f"{_AMOUNT[1]} must be positive, got {size!r}", res)
        if _count(self.gpus, "gpus", "a whole number") < 0:
            raise InputError(f"must be non-negative, got {self.gpus}", "gpus")
        for res, n in self.devices.items():
            if not isinstance(res, str) or not res:
                raise InputError(f"expected RESOURCE=COUNT, got {res!r}", "devices")
            if _count(n, "devices", "count must be a whole number") < 1:
                raise InputError(f"count must be at least 1, got {n}", "devices")
        object.__setattr__(self, "command", command)
        object.__setattr__(self, "hugepages", MappingProxyType(dict(self.hugepages)))
        object.__setattr__(self, "devices", MappingProxyType(dict(self.devices)))

    @classmethod
    def from_values(
        cls, command: Iterable[str] = (), *, cpus: int | str = 1, memory: int | str | None = None,
        hugepages: Mapping[str, int | str | None] | None = None, gpus: int = 0,
        devices: Iterable[str] = (),
    ) -> LaunchRequest:
        """Parse plain values: ``cpus`` a whole number (``"4"``), ``memory`` and ``hugepages``
        quantities (``"4Gi"``; None or empty = not asked), ``devices`` ``RESOURCE=COUNT``
        strings (a resource named twice adds up)."""
        if isinstance(cpus, str):
            try:
                cpus = int(cpus)
            except ValueError:
                raise InputError(f"a whole number of exclusive CPUs, got {cpus!r}", "cpus") from None
        size = _quantity(memory, "memory") if memory else None
        pages = {res: _quantity(v, res) for res, v in (hugepages or {}).items() if v}
        counts: dict[str, int] = {}
        for item in devices:
            res, sep, n = item.rpartition("=")
            if not sep or not res:
                raise InputError(f"expected RESOURCE=COUNT, got {item!r}", "devices")
            try:
                count = int(n)
            except ValueError:
                raise InputError(f"count must be a whole number, got {n!r}", "devices") from None
            if count < 1:
                raise InputError(f"count must be at least 1, got {count}", "devices")
            counts[res] = counts.get(res, 0) + count
        return cls(tuple(command), cpus, size, pages, gpus, counts)

    @property
    def binds_memory(self) -> bool:
        return self.memory is not None or bool(self.hugepages)

    def resources(self, machine: Machine) -> dict[str, int]:
        """Requests = limits of the run's container on ``machine`` (GPUs resolved)."""
        devices: dict[str, int] = {}
        if self.gpus:
            devices[gpu_resource(machine)] = self.gpus
        for res, n in self.devices.items():
            if not machine.devices_of(res):
                raise InputError(f"this machine has no {res} devices", "devices")
            devices[res] = devices.get(res, 0) + n
        out = {"cpu": self.cpus * 1000,
               "memory": self.memory if self.memory is not None else NOMINAL_MEMORY}
        out.update(self.hugepages)
        out.update(devices)
        return out


def gpu_resource(machine: Machine) -> str:
    """The machine's GPU resource (the first of :data:`GPU_RESOURCES` it has)."""
    for res in GPU_RESOURCES:
        if machine.devices_of(res):
            return res
    raise InputError("this machine has no GPUs (no nvidia.com/gpu, amd.com/gpu or i915 device)",
                     "gpus")


def request_pod(request: LaunchRequest, machine: Machine, ident: Identity) -> Pod:
    """The one-container Guaranteed pod of a run (requests = limits)."""
    from numalign.pods import Container, ContainerKind, Pod, default_uid, pod_qos

    res = request.resources(machine)
    container = Container(CONTAINER, ContainerKind.APP, dict(res), dict(res))
    return Pod(
        namespace=NAMESPACE,
        name=ident.name,
        uid=default_uid(NAMESPACE, ident.name),
        qos=pod_qos([container]),
        containers=(container,),
        annotations={_ANN + "pid": str(ident.pid), _ANN + "start-time": str(ident.start),
                     _ANN + "command": json.dumps(list(request.command))},
    )


def pod_manifest(pod: Pod) -> dict[str, Any]:
    """``pod`` as a v1 Pod manifest (for ``numalign admit``)."""
    c = pod.containers[0]

    def q(res: str, v: int) -> str:
        return f"{v // 1000}" if res == "cpu" else str(v)

    resources = {k: q(k, v) for k, v in c.requests.items()}
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid,
                     "annotations": dict(pod.annotations)},
        "spec": {"containers": [{"name": c.name, "resources": {
            "requests": resources, "limits": dict(resources)}}]},
    }
