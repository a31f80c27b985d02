"""Koordinator's DeviceShare hints in the ``koordinator`` mode, against the kubelet's device manager.

Upstream (koordinator-sh/koordinator, main history): ``pkg/scheduler/plugins/deviceshare/
topology_hint.go`` (``generateTopologyHints``); transcribed: ``topology_hint_test.go``
``TestPlugin_GetPodTopologyHints`` on its ``fakeDeviceCR`` (``device_allocator_test.go``: NUMA 0
holds GPUs 0-3 under PCIe switches 0,0,1,1 and RDMA NICs 1,2 under switches 0,1; NUMA 1 GPUs 4-7
under 2,2,3,3 and NICs 3,4 under 2,3), in counts of whole devices (upstream's ``gpu-core: 100`` is
one GPU; ``rdma: 2`` under the default strategy is a share of one NIC, under ``RequestsAsCount``
two NICs).
"""

from __future__ import annotations

from typing import Any

import pytest

from numalign.engine.bitmask import mask_of
from numalign.engine.hints import GeneratedHints, TopologyHint
from numalign.machine.model import Cpu, Device, KubeletConfig, Machine, NumaNode
from numalign.machine.spec import load_machine
from numalign.modes.koordinator.devices import DEFAULT_NUMA_SCORE, KoordinatorDeviceManager
from numalign.modes.koordinator.numa import KOORDINATOR_NODE_POLICY_LABEL
from numalign.modes.registry import MODE_LABEL
from numalign.node.admission import Node
from numalign.pods import Container, ContainerKind, Pod, QOSClass, default_uid
from numalign.resources.devices import DeviceManager

GPU = "koordinator.sh/gpu"
RDMA = "koordinator.sh/rdma"
KOORD = {MODE_LABEL: "koordinator"}


def fake_device_cr_machine() -> Machine:
    devices = [Device(GPU, f"gpu{m}", (m // 4,), pcie_root=str(m // 2)) for m in range(8)]
    devices += [Device(RDMA, f"rdma{m}", ((m - 1) // 2,), pcie_root=str(m - 1)) for m in range(1, 5)]
    cpus = tuple(Cpu(i, i, i // 4, i // 4) for i in range(8))
    nodes = tuple(NumaNode(i, 64 << 30) for i in range(2))
    return Machine("fake-device-cr", nodes, cpus, tuple(devices), KubeletConfig())


def device_pod(name: str, **counts: int) -> Pod:
    names = {"gpu": GPU, "rdma": RDMA}
    req = {names[k]: v for k, v in counts.items()}
    c = Container("main", ContainerKind.APP, requests=req, limits=dict(req))
    return Pod("default", name, default_uid("default", name), QOSClass.BEST_EFFORT, (c,))


def listed(hints: Any) -> list[TopologyHint]:
    return hints.materialize() if isinstance(hints, GeneratedHints) else list(hints)


def h(*ids: int, p: bool = True) -> TopologyHint:
    return TopologyHint(mask_of(ids), p)


ONE_EACH = [h(0), h(1), h(0, 1, p=False)]
#: (name, pod requests, GPUs held by another pod, want hints per resource, want scores per mask)
GET_POD_TOPOLOGY_HINTS = [
    ("generate gpu&rdma hints", {"gpu": 1, "rdma": 1}, (), {GPU: ONE_EACH, RDMA: ONE_EACH},
     {(0,): DEFAULT_NUMA_SCORE, (1,): 0, (0, 1): DEFAULT_NUMA_SCORE}),
    ("generate gpu&rdma hints but large gpu requests", {"gpu": 17, "rdma": 1}, (), {GPU: [], RDMA: []}, {}),
    ("generate 2 rdma hints", {"rdma": 2}, (), {RDMA: ONE_EACH},
     {(0,): DEFAULT_NUMA_SCORE, (1,): DEFAULT_NUMA_SCORE, (0, 1): DEFAULT_NUMA_SCORE}),
    ("generate rdma 4 vf hints", {"rdma": 4}, (), {RDMA: [h(0, 1)]}, {(0, 1): DEFAULT_NUMA_SCORE}),
    ("generate joint-allocate gpu&rdma hints", {"rdma": 1, "gpu": 1}, (), {GPU: ONE_EACH, RDMA: ONE_EACH},
     {(0,): DEFAULT_NUMA_SCORE, (1,): 0, (0, 1): DEFAULT_NUMA_SCORE}),
    ("generate gpu hints with assigned devices", {"gpu": 4}, ("gpu0",), {GPU: [h(1), h(0, 1, p=False)]}, {}),
]


@pytest.mark.parametrize(("name", "counts", "held", "want", "scores"), GET_POD_TOPOLOGY_HINTS,
                         ids=[c[0] for c in GET_POD_TOPOLOGY_HINTS])
def test_get_pod_topology_hints(name: str, counts: dict[str, int], held: tuple[str, ...],
                                want: dict[str, list[TopologyHint]], scores: dict[tuple[int, ...], int]) -> None:
    """topology_hint_test.go TestPlugin_GetPodTopologyHints (hint lists and ``Score``s; the
    error answers - more GPUs than the node has - are "cannot satisfy" lists). For "generate gpu
    hints with assigned devices" upstream scores (1) and (0,1) 500: its allocator packs the four
    GPUs on NUMA 1 when free to choose; numalign's (PCIe-root aware, aligned first) takes GPUs 2,3
    and 4,5, so only the lists are compared there."""
    m = fake_device_cr_machine()
    mgr = KoordinatorDeviceManager(m)
    if held:
        mgr.state.occupy("assigned-pod", "main", GPU, list(held))
    p = device_pod("p", **counts)
    got = mgr.pod_hints(p)
    assert got is not None
    assert {r: listed(v) for r, v in got.items()} == want
    per_list = {r for r, v in want.items() if v}
    for ids, score in scores.items():
        assert mgr.hint_score(mask_of(ids)) == score * len(per_list)


def test_device_types_are_hinted_jointly() -> None:
    """The free GPU is on NUMA 0, the free NIC on NUMA 1: Koordinator's trial allocation holds
    both only on (0,1), the one preferred hint of both types; the kubelet hints each alone (its
    preferred (0) and (1) never agree). Restricted: Koordinator admits, the kubelet refuses."""
    m = fake_device_cr_machine()
    taken = {GPU: [f"gpu{i}" for i in range(1, 8)], RDMA: ["rdma1", "rdma2", "rdma3"]}
    p = device_pod("p", gpu=1, rdma=1)
    koord, kubelet = KoordinatorDeviceManager(m), DeviceManager(m)
    for mgr in (koord, kubelet):
        for r, ids in taken.items():
            mgr.state.occupy("other", "main", r, ids)
    got = koord.pod_hints(p)
    assert got is not None and listed(got[GPU]) == [h(0, 1)] == listed(got[RDMA])
    plain = kubelet.pod_hints(p)
    assert plain is not None
    assert listed(plain[GPU]) == [h(0), h(0, 1, p=False)] and listed(plain[RDMA]) == [h(1), h(0, 1, p=False)]


def spec(policy: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"name": "g", "labels": labels,
            "shape": {"sockets": 2, "coresPerNuma": 4, "threadsPerCore": 2, "gpusPerNuma": 3},
            "kubelet": {"cpuManagerPolicy": "static", "topologyManagerPolicy": policy, "reservedSystemCPUs": "0"}}


def gpu_pod(name: str, gpus: int) -> Pod:
    req = {"cpu": 1000, "memory": 1 << 30, "nvidia.com/gpu": gpus}
    c = Container("main", ContainerKind.APP, requests=req, limits=dict(req))
    return Pod("t", name, default_uid("t", name), QOSClass.GUARANTEED, (c,))


def test_preferred_is_the_fewest_numa_nodes_free_now() -> None:
    """Three GPUs per NUMA node, two pods took two on each: a 2-GPU pod fits only across both. Koordinator prefers the
    narrowest mask that fits *now* and Restricted admits; the kubelet sizes preference by every
    GPU of a NUMA node (one node would do) and refuses."""
    got = {}
    for name, labels in (("koordinator", {**KOORD, KOORDINATOR_NODE_POLICY_LABEL: "Restricted"}), ("kubelet", {})):
        n = Node(load_machine(spec("restricted", labels)))
        assert n.admit(gpu_pod("a", 2)).admitted
        assert n.admit(gpu_pod("b", 2)).admitted
        r = n.admit(gpu_pod("two", 2))
        got[name] = (r.admitted, r.containers[0].affinity if r.admitted else None)
    assert got == {"koordinator": (True, 0b11), "kubelet": (False, None)}


def test_the_whole_node_gpu_choice_wins_equally_narrow_masks() -> None:
    """Score 500 goes to the masks whose GPUs are those the allocator picks on the whole node:
    here the two GPUs under one PCIe switch of NUMA 1 (NUMA 0's free GPUs sit under two
    switches), so Koordinator's merge takes (1); without scores the lowest id, (0), wins."""
    from numalign.engine.policies import Policy, TopologyPolicy
    from numalign.modes.registry import Mode, merge

    m = fake_device_cr_machine()
    mgr = KoordinatorDeviceManager(m)
    mgr.state.occupy("other", "main", GPU, ["gpu1", "gpu3"])
    hints = mgr.pod_hints(device_pod("p", gpu=2))
    assert hints is not None and listed(hints[GPU]) == ONE_EACH
    policy = TopologyPolicy(Policy.BEST_EFFORT, m.node_ids)
    assert merge(Mode.KOORDINATOR, policy, [hints], score=mgr.hint_score).hint == h(1)
    assert merge(Mode.KOORDINATOR, policy, [hints]).hint == h(0)
