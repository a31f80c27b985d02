"""A client of the kubelet's pod-resources API (``podresources/v1`` over the kubelet's unix
socket, by default ``/var/lib/kubelet/pod-resources/kubelet.sock``).

:func:`read_podresources` calls ``List`` and ``GetAllocatableResources`` and returns plain
frozen values (:class:`Snapshot`); nothing else in numalign touches the generated messages.
The RPCs are wired by method path (``/v1.PodResourcesLister/<Method>``) with the generated
messages' (de)serializers, so no generated ``*_pb2_grpc`` module (and no grpcio version pin)
is needed. ``grpcio`` is imported only when a socket is actually read.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from typing import Any

from numalign.errors import InputError

DEFAULT_SOCKET = "/var/lib/kubelet/pod-resources/kubelet.sock"
SERVICE = "v1.PodResourcesLister"
METHOD_LIST = f"/{SERVICE}/List"
METHOD_ALLOCATABLE = f"/{SERVICE}/GetAllocatableResources"
METHOD_GET = f"/{SERVICE}/Get"
#: the kubelet's own limit on a pod-resources message (16 MiB)
MAX_MESSAGE = 16 * 1024 * 1024


def grpc_module() -> Any:
    """``grpc`` (an optional dependency, the ``kube`` extra), untyped."""
    try:
        return importlib.import_module("grpc")
    except ImportError:
        raise InputError("grpcio is not installed (pip install 'numalign[kube]')") from None


def api() -> Any:
    """The generated messages module (needs the protobuf runtime)."""
    try:
        return importlib.import_module("numalign.kube.podresources.api_pb2")
    except ImportError as e:
        raise InputError(f"the protobuf runtime cannot load the podresources messages: {e}") from None


@dataclass(frozen=True)
class DeviceSet:
    resource: str
    ids: tuple[str, ...]
    numa: tuple[int, ...]  # () = the device plugin gave no topology


@dataclass(frozen=True)
class MemoryBlock:
    type: str  # memory, hugepages-2Mi...
    size: int  # bytes
    numa: tuple[int, ...]


@dataclass(frozen=True)
class ContainerResources:
    name: str
    cpus: frozenset[int]
    devices: tuple[DeviceSet, ...]
    memory: tuple[MemoryBlock, ...]


@dataclass(frozen=True)
class PodResources:
    namespace: str
    name: str
    containers: tuple[ContainerResources, ...]

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class Allocatable:
    cpus: frozenset[int]
    devices: tuple[DeviceSet, ...]
    memory: tuple[MemoryBlock, ...]


@dataclass(frozen=True)
class Snapshot:
    """What the kubelet reports: every pod's assigned resources and what is allocatable."""

    pods: tuple[PodResources, ...]
    allocatable: Allocatable


def _numa(topology: Any) -> tuple[int, ...]:
    return tuple(sorted({int(n.ID) for n in topology.nodes})) if topology is not None else ()


def _devices(items: Any) -> tuple[DeviceSet, ...]:
    return tuple(DeviceSet(d.resource_name, tuple(d.device_ids),
                           _numa(d.topology) if d.HasField("topology") else ()) for d in items)


def _memory(items: Any) -> tuple[MemoryBlock, ...]:
    return tuple(MemoryBlock(m.memory_type, int(m.size),
                             _numa(m.topology) if m.HasField("topology") else ()) for m in items)


def snapshot_from_messages(listed: Any, allocatable: Any) -> Snapshot:
    """A :class:`Snapshot` from a ``ListPodResourcesResponse`` and an
    ``AllocatableResourcesResponse`` message."""
    pods = tuple(
        PodResources(p.namespace, p.name, tuple(
            ContainerResources(c.name, frozenset(int(i) for i in c.cpu_ids),
                               _devices(c.devices), _memory(c.memory))
            for c in p.containers))
        for p in listed.pod_resources
    )
    alloc = Allocatable(frozenset(int(i) for i in allocatable.cpu_ids),
                        _devices(allocatable.devices), _memory(allocatable.memory))
    return Snapshot(pods, alloc)


def target(socket_path: str) -> str:
    """The gRPC target of a unix socket path."""
    return "unix://" + os.path.abspath(socket_path)


def read_podresources(socket_path: str = DEFAULT_SOCKET, timeout: float = 10.0) -> Snapshot:
    """Call ``List`` and ``GetAllocatableResources`` on the kubelet's socket.

    Errors (no socket, the kubelet refusing, a disabled API, a deadline) are an
    :class:`InputError` naming the socket, one line."""
    grpc, pb = grpc_module(), api()
    if not os.path.exists(socket_path):
        raise InputError("no such socket (is the kubelet's pod-resources API mounted?)", socket_path)
    opts = [("grpc.max_receive_message_length", MAX_MESSAGE)]
    with grpc.insecure_channel(target(socket_path), options=opts) as channel:
        list_call = channel.unary_unary(
            METHOD_LIST,
            request_serializer=pb.ListPodResourcesRequest.SerializeToString,
            response_deserializer=pb.ListPodResourcesResponse.FromString,
        )
        alloc_call = channel.unary_unary(
            METHOD_ALLOCATABLE,
            request_serializer=pb.AllocatableResourcesRequest.SerializeToString,
            response_deserializer=pb.AllocatableResourcesResponse.FromString,
        )
        try:
            listed = list_call(pb.ListPodResourcesRequest(), timeout=timeout)
            alloc = alloc_call(pb.AllocatableResourcesRequest(), timeout=timeout)
        except grpc.RpcError as e:
            code = e.code().name if hasattr(e, "code") else "UNKNOWN"
            details = (e.details() if hasattr(e, "details") else str(e)) or ""
            raise InputError(f"podresources call failed: {code}: {details.splitlines()[0] if details else ''}".rstrip(": "),
                             socket_path) from None
    return snapshot_from_messages(listed, alloc)
