"""Koordinator's ``buildCPUTopologyForTest`` and its CPU-list shorthand, shared by the
transcribed accumulator tables."""

from __future__ import annotations

from numalign.inputs.cpulist import parse_cpulist
from numalign.resources.cpu_assignment import CpuInfo, CpuTopology


def topo(sockets: int, nodes_per_socket: int, cores_per_node: int, cpus_per_core: int,
         *, socket_core_ids: bool = False) -> CpuTopology:
    """``buildCPUTopologyForTest``: ids in order socket, node, core, thread; NUMA ids are
    ``socket << 16 | node`` as upstream builds them; ``socket_core_ids``: core ids
    ``socket << 16 | core`` as the ref-count tests build them."""
    details: dict[int, CpuInfo] = {}
    node = core = cpu = 0
    for s in range(sockets):
        for _ in range(nodes_per_socket):
            for _ in range(cores_per_node):
                for _ in range(cpus_per_core):
                    details[cpu] = CpuInfo(s << 16 | core if socket_core_ids else core, s, s << 16 | node, s)
                    cpu += 1
                core += 1
            node += 1
    return CpuTopology(details)


def cpus(text: str) -> frozenset[int]:
    return frozenset(parse_cpulist(text)) if text else frozenset()
