"""An in-process fake kubelet serving the pod-resources v1 API on a unix socket (tests only).

It answers ``List`` and ``GetAllocatableResources`` from a numalign node (what the kubelet
would report for the same machine and allocations) or from given messages.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent import futures
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import grpc

from numalign.inputs.quantity import is_memory_resource
from numalign.kube.podresources import api_pb2 as pb
from numalign.kube.podresources.client import METHOD_ALLOCATABLE, METHOD_LIST, SERVICE
from numalign.node.admission import Node
from numalign.node.usage import numa_amounts, pod_usage
from numalign.resources.cpu import POLICY_STATIC as CPU_STATIC
from numalign.resources.memory import POLICY_STATIC as MEMORY_STATIC


def _topology(numa: tuple[int, ...]) -> Any:
    return pb.TopologyInfo(nodes=[pb.NUMANode(ID=i) for i in numa])


def list_from_node(node: Node) -> Any:
    """``ListPodResourcesResponse`` of the pods in ``node``'s state."""
    m = node.machine
    numa_of = {(d.resource, d.id): d.numa for d in m.devices}
    out = pb.ListPodResourcesResponse()
    for uid, rec in sorted(node.state.pods.items()):
        if rec.observed:
            continue
        usage = pod_usage(m, node.state, uid)
        assert usage is not None
        ns, _, name = rec.key.partition("/")
        pod = out.pod_resources.add(namespace=ns, name=name)
        for c in usage.containers:
            cr = pod.containers.add(name=c.name, cpu_ids=sorted(c.cpus))
            for res, ids in sorted(c.devices.items()):
                for i in ids:  # one entry per device, with its topology, as the kubelet does
                    numa = numa_of.get((res, i), ())
                    d = cr.devices.add(resource_name=res, device_ids=[i])
                    if numa:
                        d.topology.CopyFrom(_topology(numa))
            for b in c.memory:
                cr.memory.add(memory_type=b.type, size=b.size,
                              topology=_topology(tuple(b.numa_affinity)))
    return out


def allocatable_from_node(node: Node) -> Any:
    """``AllocatableResourcesResponse`` of ``node`` (CPUs only under the static CPU manager,
    memory only under the Static memory manager, healthy devices)."""
    m = node.machine
    out = pb.AllocatableResourcesResponse()
    if m.kubelet.cpu_manager_policy == CPU_STATIC:
        out.cpu_ids.extend(sorted(c.id for c in m.cpus if c.id not in node.reserved_cpus))
    for d in m.devices:
        if d.healthy:
            cd = out.devices.add(resource_name=d.resource, device_ids=[d.id])
            if d.numa:
                cd.topology.CopyFrom(_topology(d.numa))
    if m.kubelet.memory_manager_policy == MEMORY_STATIC:
        fresh = Node(m)
        for nid, z in sorted(numa_amounts(fresh).items()):
            for res, amount in sorted(z.allocatable.items()):
                if is_memory_resource(res) and amount > 0:
                    out.memory.add(memory_type=res, size=amount, topology=_topology((nid,)))
    return out


@contextmanager
def serve(socket: Path, listed: Callable[[], Any], allocatable: Callable[[], Any]) -> Iterator[str]:
    """Serve the two RPCs on ``socket`` (a path in a test's tmp_path) until the block ends."""

    def on_list(request: Any, context: Any) -> Any:
        return listed()

    def on_allocatable(request: Any, context: Any) -> Any:
        return allocatable()

    handlers = {
        METHOD_LIST.rsplit("/", 1)[1]: grpc.unary_unary_rpc_method_handler(
            on_list, request_deserializer=pb.ListPodResourcesRequest.FromString,
            response_serializer=pb.ListPodResourcesResponse.SerializeToString),
        METHOD_ALLOCATABLE.rsplit("/", 1)[1]: grpc.unary_unary_rpc_method_handler(
            on_allocatable, request_deserializer=pb.AllocatableResourcesRequest.FromString,
            response_serializer=pb.AllocatableResourcesResponse.SerializeToString),
    }
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
    bound = server.add_insecure_port(f"unix://{socket}")
    assert bound, f"could not bind {socket}"
    server.start()
    try:
        yield str(socket)
    finally:
        server.stop(None)


def pods_listing(pods: list[tuple[str, str]]) -> Any:
    """A ``ListPodResourcesResponse`` naming ``pods`` (no resources)."""
    out = pb.ListPodResourcesResponse()
    for ns, name in pods:
        out.pod_resources.add(namespace=ns, name=name)
    return out
