"""Koordinator's hint generation for CPUs, transcribed and run in the ``koordinator`` mode.

Source: koordinator-sh/koordinator ``pkg/scheduler/plugins/nodenumaresource/resource_manager_test.go``
``TestResourceManagerGetTopologyHint`` (the CPU-only cases: required ``FullPCPUs`` /
``SpreadByPCPUs`` with and without another pod's CPUs; topology ``buildCPUTopologyForTest(2, 1,
26, 2)``, NUMA policy BestEffort), against :class:`numalign.modes.koordinator.cpu.KoordinatorCpuManager`.
The amplification-ratio and memory/hugepages cases concern Koordinator's NUMA resource
amplification and its memory accounting, which the CPU provider does not model.

Plus Koordinator's rules where they differ from the kubelet's (``generateResourceHints``):
preferred means the fewest NUMA nodes that can hold the pod *now*; every hint is preferred under
``Restricted``; a mask touching a NUMA node without free CPUs is no hint.
"""

from __future__ import annotations

import json

import pytest

from numalign.engine.bitmask import mask_of
from numalign.engine.hints import GeneratedHints, TopologyHint
from numalign.engine.policies import Policy
from numalign.inputs.cpulist import parse_cpulist
from numalign.machine.model import Cpu, KubeletConfig, Machine, NumaNode
from numalign.modes.koordinator.cpu import KoordinatorCpuManager
from numalign.pods import Container, ContainerKind, Pod, QOSClass, default_uid
from numalign.pods.annotations import RESOURCE_SPEC
from numalign.resources.cpu import new_cpu_state


def machine(sockets: int, cores_per_node: int, threads: int) -> Machine:
    """``buildCPUTopologyForTest(sockets, 1, cores, threads)`` as a numalign machine (one NUMA
    node per socket, ids in order node, core, thread)."""
    cpus = []
    cpu = core = 0
    for s in range(sockets):
        for _ in range(cores_per_node):
            for _ in range(threads):
                cpus.append(Cpu(cpu, core, s, s))
                cpu += 1
            core += 1
    nodes = tuple(NumaNode(s, 128 << 30) for s in range(sockets))
    return Machine("koord-test", nodes, tuple(cpus), kubelet=KubeletConfig(cpu_manager_policy="static"))


def pod(cpus: int, spec: dict[str, str] | None = None, name: str = "p") -> Pod:
    req = {"cpu": cpus * 1000, "memory": 1 << 30}
    c = Container("main", ContainerKind.APP, requests=req, limits=dict(req))
    ann = {RESOURCE_SPEC: json.dumps(spec)} if spec else {}
    return Pod("default", name, default_uid("default", name), QOSClass.GUARANTEED, (c,), ann)


def cpu_hints(m: Machine, held: str, p: Pod, policy: Policy = Policy.BEST_EFFORT) -> list[TopologyHint]:
    state = new_cpu_state(m)
    taken = frozenset(c for c in parse_cpulist(held) if c < len(m.cpus)) if held else frozenset()
    if taken:
        state.occupy("other", "main", taken)
    mgr = KoordinatorCpuManager(m, state, reserved=(), policy_of=lambda _: policy)
    got = (mgr.pod_hints(p) or {})["cpu"]
    assert got is not None
    return got.materialize() if isinstance(got, GeneratedHints) else list(got)


def h(*ids: int, p: bool = True) -> TopologyHint:
    return TopologyHint(mask_of(ids), p)


FULL = {"requiredCPUBindPolicy": "FullPCPUs"}
SPREAD = {"requiredCPUBindPolicy": "SpreadByPCPUs"}

# (name, resource spec, CPUs held by another pod, want)
GET_TOPOLOGY_HINT = [
    ("allocate with required CPUBindPolicyFullPCPUs", FULL, "", [h(0), h(1), h(0, 1, p=False)]),
    ("allocate with required CPUBindPolicyFullPCPUs and allocated", FULL, "4-104", [h(0)]),
    ("failed to allocate with required CPUBindPolicyFullPCPUs and allocated", FULL, "1,3,5,7-104", []),
    ("allocate with required CPUBindPolicySpreadByPCPUs", SPREAD, "", [h(0), h(1), h(0, 1, p=False)]),
    ("allocate with required CPUBindPolicySpreadByPCPUs and allocated", SPREAD, "1,3,5,7-104", [h(0)]),
    ("failed to allocate with required CPUBindPolicySpreadByPCPUs and allocated", SPREAD, "4-104", []),
]


@pytest.mark.parametrize(("name", "spec", "held", "want"), GET_TOPOLOGY_HINT, ids=[c[0] for c in GET_TOPOLOGY_HINT])
def test_resource_manager_get_topology_hint(name: str, spec: dict[str, str], held: str,
                                            want: list[TopologyHint]) -> None:
    """resource_manager_test.go TestResourceManagerGetTopologyHint (CPU cases)."""
    assert cpu_hints(machine(2, 26, 2), held, pod(4, spec)) == want


def test_preferred_is_the_fewest_numa_nodes_now() -> None:
    """generateResourceHints: minAffinitySize is the narrowest *feasible* mask, so when no NUMA
    node can hold the pod any more the two-node mask is preferred (the kubelet compares with
    the empty machine and prefers nothing)."""
    m = machine(2, 4, 2)  # 8 CPUs per NUMA node
    got = cpu_hints(m, "0-4,8-12", pod(6))  # 3 free on each node
    assert got == [h(0, 1)]


def test_restricted_prefers_every_hint() -> None:
    m = machine(2, 4, 2)
    assert cpu_hints(m, "", pod(2), Policy.RESTRICTED) == [h(0), h(1), h(0, 1)]
    assert cpu_hints(m, "", pod(2), Policy.BEST_EFFORT) == [h(0), h(1), h(0, 1, p=False)]


def test_numa_node_without_free_cpus_is_in_no_hint() -> None:
    m = machine(2, 4, 2)
    assert cpu_hints(m, "0-7", pod(2)) == [h(1)]  # the kubelet also lists (0,1), not preferred


def test_kubelet_mode_keeps_the_kubelets_rule() -> None:
    from numalign.resources.cpu import CpuManager

    m = machine(2, 4, 2)
    state = new_cpu_state(m)
    state.occupy("other", "main", frozenset(parse_cpulist("0-4,8-12")))
    got = CpuManager(m, state, reserved=()).pod_hints(pod(6))
    assert got is not None
    hints = got["cpu"]
    assert isinstance(hints, GeneratedHints)
    assert hints.materialize() == [h(0, 1, p=False)]
