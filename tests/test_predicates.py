"""The kubelet's predicate admission (node-level fit), which runs after the Topology Manager.

Tables transcribed from upstream:

* ``pkg/scheduler/framework/plugins/noderesources/fit_test.go`` ``TestEnoughRequests`` (the
  resource cases): node allocatable cpu 10m, memory 20, pods 32, example.com/aaa 5,
  hugepages-2Mi 5; the kubelet's predicate runs this same ``fitsRequest``;
* ``pkg/kubelet/lifecycle/predicate_test.go`` ``TestGeneralPredicates`` (its resource cases)
  and the kubelet's difference: extended resources the node lacks are dropped first;
* ``pkg/kubelet/cm/memorymanager/memory_manager_test.go`` ``TestValidateReservedMemory``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numalign.cli import main
from numalign.errors import InputError
from numalign.machine.allocatable import (
    allocatable_reservation,
    check_reserved_memory,
    node_allocatable,
)
from numalign.machine.model import ReservedMemory
from numalign.machine.spec import load_machine
from numalign.node.admission import Node
from numalign.node.predicates import Insufficient, fits
from numalign.node.state import NodeState, PodRecord
from numalign.pods import effective_pod_requests, parse_pods

GI = 1 << 30
MI = 1 << 20
EXT_A = "example.com/aaa"
EXT_B = "example.com/bbb"
K8S_A = "kubernetes.io/something"
HUGE_A = "hugepages-2Mi"
#: upstream makeAllocatableResources(10, 20, 32, 5, 20, 5)
ALLOCATABLE = {"cpu": 10, "memory": 20, "pods": 32, EXT_A: 5, HUGE_A: 5}


def _res(cpu: int = 0, mem: int = 0, **scalar: int) -> dict[str, str]:
    out = {"cpu": f"{cpu}m", "memory": str(mem)} if cpu or mem else {}
    names = {"a": EXT_A, "b": EXT_B, "k": K8S_A, "h": HUGE_A}
    out.update({names[k]: str(v) for k, v in scalar.items()})
    return out


def _pod(containers: list[dict[str, str]], inits: list[dict[str, str]] = ()) -> dict[str, int]:  # type: ignore[assignment]
    """A pod's effective requests (what fitsRequest compares), from containers' requests."""
    def ctr(name: str, req: dict[str, str]) -> dict[str, Any]:
        limits = {k: v for k, v in req.items() if k not in ("cpu", "memory")}  # not overcommittable
        return {"name": name, "resources": {"requests": req, "limits": limits}}

    doc = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {
        "initContainers": [ctr(f"i{i}", r) for i, r in enumerate(inits)],
        "containers": [ctr(f"c{i}", r) for i, r in enumerate(containers)] or [ctr("c", {})],
    }}
    pod = parse_pods(doc)[0]
    # the engine keeps cpu in millicores: the table's "MilliCPU: 1" is 1 here
    return {k: v for k, v in effective_pod_requests(pod).items() if v}


# (name, pod requests, used by the pod already on the node, expected shortages)
ENOUGH_REQUESTS: list[tuple[str, dict[str, int], dict[str, int], list[tuple[str, int, int, int]]]] = [
    ("no resources requested always fits", _pod([]), {"cpu": 10, "memory": 20}, []),
    ("too many resources fails", _pod([_res(1, 1)]), {"cpu": 10, "memory": 20},
     [("cpu", 1, 10, 10), ("memory", 1, 20, 20)]),
    ("too many resources fails due to init container cpu", _pod([_res(1, 1)], [_res(3, 1)]),
     {"cpu": 8, "memory": 19}, [("cpu", 3, 8, 10)]),
    ("too many resources fails due to highest init container cpu",
     _pod([_res(1, 1)], [_res(3, 1), _res(2, 1)]), {"cpu": 8, "memory": 19}, [("cpu", 3, 8, 10)]),
    ("too many resources fails due to init container memory", _pod([_res(1, 1)], [_res(1, 3)]),
     {"cpu": 9, "memory": 19}, [("memory", 3, 19, 20)]),
    ("too many resources fails due to highest init container memory",
     _pod([_res(1, 1)], [_res(1, 3), _res(1, 2)]), {"cpu": 9, "memory": 19},
     [("memory", 3, 19, 20)]),
    ("init container fits because it's the max, not sum, of containers and init containers",
     _pod([_res(1, 1)], [_res(1, 1)]), {"cpu": 9, "memory": 19}, []),
    ("multiple init containers fit because it's the max, not sum, of containers and init containers",
     _pod([_res(1, 1)], [_res(1, 1), _res(1, 1)]), {"cpu": 9, "memory": 19}, []),
    ("both resources fit", _pod([_res(1, 1)]), {"cpu": 5, "memory": 5}, []),
    ("one resource memory fits", _pod([_res(2, 1)]), {"cpu": 9, "memory": 5}, [("cpu", 2, 9, 10)]),
    ("one resource cpu fits", _pod([_res(1, 2)]), {"cpu": 5, "memory": 19},
     [("memory", 2, 19, 20)]),
    ("equal edge case", _pod([_res(5, 1)]), {"cpu": 5, "memory": 19}, []),
    ("equal edge case for init container", _pod([_res(4, 1)], [_res(5, 1)]),
     {"cpu": 5, "memory": 19}, []),
    ("extended resource fits", _pod([_res(a=1)]), {}, []),
    ("extended resource fits for init container", _pod([], [_res(a=1)]), {}, []),
    ("extended resource capacity enforced", _pod([_res(1, 1, a=10)]), {},
     [(EXT_A, 10, 0, 5)]),
    ("extended resource capacity enforced for init container", _pod([], [_res(1, 1, a=10)]), {},
     [(EXT_A, 10, 0, 5)]),
    ("extended resource allocatable enforced", _pod([_res(1, 1, a=1)]), {EXT_A: 5},
     [(EXT_A, 1, 5, 5)]),
    ("extended resource allocatable enforced for init container", _pod([], [_res(1, 1, a=1)]),
     {EXT_A: 5}, [(EXT_A, 1, 5, 5)]),
    ("extended resource allocatable enforced for multiple containers",
     _pod([_res(1, 1, a=3), _res(1, 1, a=3)]), {EXT_A: 2}, [(EXT_A, 6, 2, 5)]),
    ("extended resource allocatable admits multiple init containers",
     _pod([], [_res(1, 1, a=3), _res(1, 1, a=3)]), {EXT_A: 2}, []),
    ("extended resource allocatable enforced for multiple init containers",
     _pod([], [_res(1, 1, a=6), _res(1, 1, a=3)]), {EXT_A: 2}, [(EXT_A, 6, 2, 5)]),
    # the kubelet's predicate drops extended resources the node does not have at all
    # (removeMissingExtendedResources); the scheduler's fit reports them (Capacity 0)
    ("extended resource allocatable enforced for unknown resource (kubelet: dropped)",
     _pod([_res(1, 1, b=1)]), {}, []),
    ("kubernetes.io resource capacity enforced", _pod([_res(1, 1, k=10)]), {},
     [(K8S_A, 10, 0, 0)]),
    ("hugepages resource capacity enforced", _pod([_res(1, 1, h=10)]), {},
     [(HUGE_A, 10, 0, 5)]),
    ("hugepages resource capacity enforced for init container", _pod([], [_res(1, 1, h=10)]), {},
     [(HUGE_A, 10, 0, 5)]),
    ("hugepages resource allocatable enforced for multiple containers",
     _pod([_res(1, 1, h=3), _res(1, 1, h=3)]), {HUGE_A: 2}, [(HUGE_A, 6, 2, 5)]),
]


@pytest.mark.parametrize(
    ("pod", "used", "want"),
    [pytest.param(p, u, w, id=f"TestEnoughRequests/{n}") for n, p, u, w in ENOUGH_REQUESTS],
)
def test_enough_requests(pod: dict[str, int], used: dict[str, int], want: list[tuple[str, int, int, int]]) -> None:
    got = fits(ALLOCATABLE, pod, used, pods=1)
    assert [(s.resource, s.requested, s.used, s.capacity) for s in got] == want


def test_general_predicates_resource_cases() -> None:
    # "no resources/port/host requested always fits" and "not enough cpu and memory resource"
    node = {"cpu": 10, "memory": 20, "pods": 32}
    assert fits(node, {}, {"cpu": 9, "memory": 19}, pods=1) == []
    got = fits(node, {"cpu": 8, "memory": 10}, {"cpu": 5, "memory": 19}, pods=1)
    assert got == [Insufficient("cpu", 8, 5, 10), Insufficient("memory", 10, 19, 20)]
    # the kubelet reports the first one
    assert got[0].reason == "OutOfcpu"
    assert got[0].message == "Node didn't have enough resource: cpu, requested: 8, used: 5, capacity: 10"
    assert got[1].reason == "OutOfmemory"


def test_pod_count_comes_first() -> None:
    got = fits({"cpu": 10, "pods": 2}, {"cpu": 100}, {}, pods=2)
    assert [s.reason for s in got] == ["OutOfpods", "OutOfcpu"]
    assert got[0].message == "Node didn't have enough resource: pods, requested: 1, used: 2, capacity: 2"
    assert fits({"cpu": 10, "pods": 2}, {}, {}, pods=1) == []


def _cpulist_machine(**kubelet: Any) -> dict[str, Any]:
    return {"name": "box", "shape": {"sockets": 2, "coresPerNuma": 32, "threadsPerCore": 2,
                                     "memoryPerNuma": "64Gi", "hugepages1GiPerNuma": "8Gi"},
            "kubelet": kubelet}


def test_node_allocatable_as_the_kubelet_reports_it() -> None:
    m = load_machine(_cpulist_machine(systemReserved={"cpu": "1", "memory": "1Gi"},
                                      kubeReserved={"cpu": "500m", "memory": "512Mi"},
                                      evictionHard={"memory.available": "1%"}, maxPods=50))
    a = node_allocatable(m)
    assert a["cpu"] == 128_000 - 1500
    capacity = 128 * GI
    # the kubelet's float32 percentage: float32(1) / 100, then int64(float64(capacity) * it)
    eviction = int(float(capacity) * float(np.float32(1) / np.float32(100)))
    assert eviction != capacity // 100  # the float32 is not the exact hundredth
    # regular memory also loses the hugepage pools' capacity
    assert a["memory"] == capacity - GI - 512 * MI - eviction - 16 * GI
    assert a["hugepages-1Gi"] == 16 * GI
    assert a["pods"] == 50
    # reservedSystemCPUs replaces the cpu of both reservations by its CPU count
    m2 = load_machine(_cpulist_machine(cpuManagerPolicy="static", reservedSystemCPUs="0-3",
                                       kubeReserved={"cpu": "7"}))
    assert allocatable_reservation(m2)["cpu"] == 4000
    # default evictionHard: memory.available 100Mi; default maxPods 110
    m3 = load_machine(_cpulist_machine())
    assert allocatable_reservation(m3) == {"memory": 100 * MI}
    assert node_allocatable(m3)["pods"] == 110


def _admit(node: Node, name: str, requests: dict[str, str], limits: dict[str, str] | None = None) -> tuple[bool, str | None, str | None]:
    doc = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
           "spec": {"containers": [{"name": "c", "resources": {"requests": requests, "limits": limits or {}}}]}}
    r = node.admit(parse_pods(doc)[0])
    return r.admitted, r.reason, r.message


def test_issue_burstable_pods_beyond_the_node_are_refused() -> None:
    """Issue 13: cpu 1e30, and three Burstable pods of 100 CPUs on a 128-CPU machine."""
    node = Node(load_machine(_cpulist_machine(topologyManagerPolicy="single-numa-node")))
    ok, reason, msg = _admit(node, "huge", {"cpu": "1e30"})
    assert (ok, reason) == (False, "OutOfcpu")
    assert msg is not None and "capacity: 128000" in msg
    assert _admit(node, "a", {"cpu": "100"})[0]
    ok, reason, msg = _admit(node, "b", {"cpu": "100"})
    assert (ok, reason) == (False, "OutOfcpu")
    assert msg == "Node didn't have enough resource: cpu, requested: 100000, used: 100000, capacity: 128000"
    ok, reason, _ = _admit(node, "m", {"memory": "1000Gi"})
    assert (ok, reason) == (False, "OutOfmemory")
    # releasing frees the node-level request too
    assert node.release("default/a")
    assert _admit(node, "b", {"cpu": "100"})[0]


def test_max_pods_and_best_effort_pods_count() -> None:
    node = Node(load_machine(_cpulist_machine(maxPods=2)))
    assert _admit(node, "a", {})[0]
    assert _admit(node, "b", {})[0]
    assert _admit(node, "c", {})[1] == "OutOfpods"


def test_topology_manager_answers_before_the_predicates() -> None:
    """kubelet.go adds the resource-allocation admit handler (the Topology Manager) before
    the predicate admit handler, and the first rejection wins."""
    spec = _cpulist_machine(topologyManagerPolicy="restricted")
    spec["shape"]["gpusPerNuma"] = 1
    node = Node(load_machine(spec))
    gpu = {"nvidia.com/gpu": "3"}  # 2 GPUs on the node: no hint, so restricted rejects
    assert _admit(node, "g", gpu, gpu)[1] == "TopologyAffinityError"
    # no hint provider speaks for hugepages without the Static memory manager: the merge
    # admits, and the predicates find the shortage
    hp = {"hugepages-1Gi": "17Gi", "cpu": "1", "memory": "1Gi"}
    assert _admit(node, "h", hp, hp)[1] == "OutOfhugepages-1Gi"
    # an extended resource the node does not have is dropped by the predicate (a
    # cluster-level resource): no OutOf reason (the device manager has its own say after it)
    other = {"example.com/license": "1"}
    assert not (_admit(node, "l", other, other)[1] or "").startswith("OutOf")


def test_pod_record_keeps_requests_and_old_records_load() -> None:
    node = Node(load_machine(_cpulist_machine()))
    _admit(node, "a", {"cpu": "2", "memory": "1Gi"})
    doc = node.state.to_dict()
    uid = next(iter(doc["pods"]))
    assert doc["pods"][uid]["requests"] == {"cpu": 2000, "memory": GI}
    again = NodeState.from_dict(json.loads(json.dumps(doc)))
    assert again.pods[uid].requests == {"cpu": 2000, "memory": GI}
    del doc["pods"][uid]["requests"]  # a state written before requests were kept
    assert NodeState.from_dict(doc).pods[uid].requests == {}
    doc["pods"][uid]["requests"] = {"cpu": -1}
    with pytest.raises(Exception, match="requests"):
        NodeState.from_dict(doc)
    assert PodRecord("u", "k", "none", "container").requests == {}


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 40_000), st.integers(0, 8 * GI)), min_size=1, max_size=12))
def test_admitted_requests_never_exceed_allocatable(pods: list[tuple[int, int]]) -> None:
    """Invariant: whatever arrives, the admitted pods' requests fit the node's allocatable."""
    node = Node(load_machine({"name": "s", "shape": {"coresPerNuma": 16, "memoryPerNuma": "16Gi"},
                              "kubelet": {"maxPods": 8}}))
    for i, (cpu, mem) in enumerate(pods):
        _admit(node, f"p{i}", {"cpu": f"{cpu}m", "memory": str(mem)})
    total_cpu = sum(p.requests.get("cpu", 0) for p in node.state.pods.values())
    total_mem = sum(p.requests.get("memory", 0) for p in node.state.pods.values())
    assert total_cpu <= node.allocatable["cpu"]
    assert total_mem <= node.allocatable["memory"]
    assert len(node.state.pods) <= 8


# --- TestValidateReservedMemory -----------------------------------------------------------

MSG = 'the total amount "{}" of type "{}" is not equal to the value "{}" determined by Node Allocatable feature'
H2 = "hugepages-2Mi"
H1 = "hugepages-1Gi"
VALIDATE_RESERVED = [
    ("Node Allocatable not set, reserved not set", {}, [], None),
    ("Node Allocatable set to zero, reserved set to zero", {"memory": 0},
     [ReservedMemory(0, {"memory": 0})], None),
    ("Node Allocatable not set (equal zero), reserved set", {},
     [ReservedMemory(0, {"memory": 12})], MSG.format("12", "memory", "0")),
    ("Node Allocatable set, reserved not set", {H2: 5}, [], MSG.format("0", H2, "5")),
    ("Reserved not equal to Node Allocatable", {"memory": 5},
     [ReservedMemory(0, {"memory": 12})], MSG.format("12", "memory", "5")),
    ("Reserved total equal to Node Allocatable", {"memory": 17, H2: 77, H1: 13},
     [ReservedMemory(0, {"memory": 12, H2: 70, H1: 13}), ReservedMemory(1, {"memory": 5, H2: 7})],
     None),
    ("Reserved total hugapages-2M not equal to Node Allocatable", {"memory": 17, H2: 14, H1: 13},
     [ReservedMemory(0, {"memory": 12, H2: 70, H1: 13}), ReservedMemory(1, {"memory": 5, H2: 7})],
     MSG.format("77", H2, "14")),
]


@pytest.mark.parametrize(
    ("reservation", "reserved", "error"),
    [pytest.param(r, m, e, id=f"TestValidateReservedMemory/{n}") for n, r, m, e in VALIDATE_RESERVED],
)
def test_validate_reserved_memory(reservation: dict[str, int], reserved: list[ReservedMemory], error: str | None) -> None:
    if error is None:
        check_reserved_memory(reservation, reserved)
    else:
        with pytest.raises(InputError) as e:
            check_reserved_memory(reservation, reserved)
        assert e.value.problem == error


# --- the CLI: admit says the kubelet's reason ----------------------------------------------


def test_admit_cli_out_of_cpu(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "m.yaml"
    spec.write_text(json.dumps(_cpulist_machine()))
    pods = tmp_path / "p.yaml"
    pods.write_text(json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"},
                                "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1e30"}}}]}}))
    code = main(["admit", "-m", str(spec), "--state-dir", str(tmp_path / "s"), "-o", "json", str(pods)])
    out = json.loads(capsys.readouterr().out)
    assert code == 1
    assert out["pods"][0]["reason"] == "OutOfcpu"
