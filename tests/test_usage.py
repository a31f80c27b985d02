"""node/usage.py is the one owner of NUMA usage: every adapter's answer is the same answer.

* the scheduler's exact filter, ``usage`` after the commit and the simulator's placement count
  agree on how many NUMA nodes a pod uses;
* an extender engine rebuilt from a node's own exported NodeResourceTopology decides every pod
  as the node does, also after the memory manager formed multi-NUMA groups;
* observed usage is applied through the managers (memory groups included).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from numalign.engine.policies import Scope
from numalign.inputs.cpulist import parse_cpulist
from numalign.kube.topology import build_nrt, engine_from_nrt
from numalign.machine.model import Machine
from numalign.machine.spec import load_machine
from numalign.node import usage
from numalign.node.admission import Node
from numalign.pods import Pod, parse_pods
from numalign.scheduler.filters import exact_filter
from numalign.sim.runner import _placement

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
POLICIES = ("best-effort", "restricted", "single-numa-node")


def machine(policy: str, scope: str = "container", gpus: bool = True, numa: int = 4) -> Machine:
    doc: dict[str, Any] = {
        "name": f"m{numa}",
        "shape": {"sockets": 2, "numaPerSocket": numa // 2, "coresPerNuma": 3, "threadsPerCore": 1,
                  "memoryPerNuma": "4Gi", "hugepages2MiPerNuma": "256Mi"},
        "kubelet": {
            "topologyManagerPolicy": policy, "topologyManagerScope": scope,
            "cpuManagerPolicy": "static", "reservedSystemCPUs": "0",
            "memoryManagerPolicy": "Static",
            # the kubelet's start-up check: reservedMemory total == the Node Allocatable reservation
            "evictionHard": {"memory.available": f"{512 * numa}Mi"},
            "reservedMemory": [{"numaNode": i, "limits": {"memory": "512Mi"}} for i in range(numa)],
        },
    }
    if gpus:
        doc["devices"] = [{"resource": "nvidia.com/gpu", "id": f"gpu{i}", "numa": i} for i in range(numa)]
    return load_machine(doc, "test")


def pod(name: str, containers: list[tuple[int, int, int, int]], guaranteed: bool = True) -> Pod:
    """containers: (cpus, memory MiB, hugepages 2Mi pages x 2Mi, gpus)."""
    cs = []
    for j, (cpu, mem, hp, gpu) in enumerate(containers):
        req: dict[str, str] = {"cpu": str(cpu), "memory": f"{mem}Mi"}
        if hp:
            req["hugepages-2Mi"] = f"{hp * 2}Mi"
        if gpu:
            req["nvidia.com/gpu"] = str(gpu)
        limits = dict(req) if guaranteed else {k: v for k, v in req.items() if k != "cpu"}
        if not guaranteed:
            req = {k: v for k, v in req.items() if not k.startswith("hugepages")}
            limits = {k: v for k, v in limits.items() if not k.startswith("hugepages")}
        cs.append({"name": f"c{j}", "resources": {"requests": req, "limits": limits}})
    doc = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {"containers": cs}}
    return parse_pods(doc)[0]


containers = st.lists(
    st.tuples(st.integers(1, 4), st.integers(64, 6000), st.integers(0, 40), st.integers(0, 2)),
    min_size=1, max_size=2,
)
pods = st.lists(st.tuples(containers, st.booleans()), min_size=1, max_size=8)


@SETTINGS
@given(st.sampled_from(POLICIES), st.sampled_from(["container", "pod"]), pods)
def test_filter_count_equals_usage_equals_simulator(policy: str, scope: str, specs: Any) -> None:
    node = Node(machine(policy, scope))
    for i, (cs, guaranteed) in enumerate(specs):
        p = pod(f"p{i}", cs, guaranteed)
        res = exact_filter(node, p)
        if not res.passed:
            continue
        assert res.planned is not None
        node.commit(res.planned)
        after = usage.pod_numa_nodes(node.machine, node.state, p.uid)
        _, simulated = _placement(node, p)
        held = usage.pod_usage(node.machine, node.state, p.uid)
        assert held is not None
        assert res.numa_count == len(after) == simulated == len(held.numa_nodes)
        # nothing NUMA-bound (BestEffort/Burstable under these managers) uses no NUMA node
        if not any(usage.numa_demand(node.machine, p, Scope.POD)[0].values()):
            assert res.numa_count == 0


def _decisions(node: Node, probes: list[Pod]) -> list[tuple[bool, str | None, tuple[int | None, ...]]]:
    out = []
    for p in probes:
        r = node.plan(p)[0]
        out.append((r.admitted, r.reason, tuple(c.affinity for c in r.containers)))
    return out


@SETTINGS
@given(st.sampled_from(POLICIES), st.sampled_from(["container", "pod"]), pods, pods)
def test_extender_from_exported_nrt_decides_as_the_node(policy: str, scope: str, fill: Any, probe: Any) -> None:
    node = Node(machine(policy, scope))
    for i, (cs, guaranteed) in enumerate(fill):
        node.admit(pod(f"fill{i}", cs, guaranteed))
    extender = engine_from_nrt(build_nrt(node))
    probes = [pod(f"probe{i}", cs, g) for i, (cs, g) in enumerate(probe)]
    assert _decisions(extender, probes) == _decisions(node, probes)


@pytest.mark.parametrize("policy", POLICIES)
def test_extender_sees_a_multi_numa_memory_group(policy: str) -> None:
    """A 5Gi pod forms a {x,y} memory group; nodes of that group can then hold no
    single-NUMA memory, and no new group may include them - the extender must know."""
    node = Node(machine("best-effort", gpus=False))
    assert node.admit(pod("big", [(1, 5 * 1024, 0, 0)])).admitted
    uid = node.state.find("default/big")
    assert uid is not None
    held = usage.pod_usage(node.machine, node.state, uid)
    assert held is not None and len(held.numa_nodes) == 2
    group = sorted(held.numa_nodes)
    spec = build_nrt(node)
    zone_attrs = {z["name"]: {a["name"]: a["value"] for a in z.get("attributes", [])} for z in spec["zones"]}
    for nid in group:
        assert parse_cpulist(zone_attrs[f"node-{nid}"]["numalign.io/memoryNumaGroup"]) == set(group)
    # the same kubelet with another policy: rebuild the node under `policy`, same state
    strict = Node(machine(policy, gpus=False), node.state.copy())
    doc = build_nrt(strict)
    extender = engine_from_nrt(doc)
    probes = [pod(f"q{i}", [(1, mem, 0, 0)]) for i, mem in enumerate((256, 1024, 2048, 3000, 3500, 5000, 6500))]
    assert _decisions(extender, probes) == _decisions(strict, probes)
    # the memory manager's group state itself came across
    for nid in strict.machine.node_ids:
        assert extender.state.memory.group(nid)[0] == strict.state.memory.group(nid)[0]


def test_observed_usage_goes_through_the_managers() -> None:
    node = Node(machine("restricted"))
    observed = usage.ObservedUsage(
        cpus={1: frozenset({3})},
        memory={2: {"memory": 1 << 30}, 3: {"memory": 1 << 29}},
        memory_groups={2: ((2, 3), 1), 3: ((2, 3), 1)},
        devices={0: {"nvidia.com/gpu": 1}},
    )
    state = usage.apply_observed(node, observed)
    assert node.state.pods == {}  # the node's own state is untouched
    held = usage.pod_usage(node.machine, state, usage.OBSERVED_UID)
    assert held is not None and held.record.observed
    assert held.numa_nodes == frozenset({0, 1, 2, 3})
    assert state.memory.group(2) == ((2, 3), 1) and state.memory.group(0) == ((), 0)
    after = Node(node.machine, state)
    zones = usage.numa_amounts(after)
    assert zones[1].available["cpu"] == zones[1].allocatable["cpu"] - 1
    assert zones[2].available["memory"] == zones[2].allocatable["memory"] - (1 << 30)
    assert zones[0].available["nvidia.com/gpu"] == 0
    # a CPU that is not in the shared pool (reserved CPU 0) cannot be observed as assigned
    from numalign.errors import InputError

    with pytest.raises(InputError, match="node-0"):
        usage.apply_observed(node, usage.ObservedUsage(cpus={0: frozenset({0})}))


def test_numa_demand_and_fewest_nodes() -> None:
    node = Node(machine("restricted"))
    p = pod("wide", [(5, 5000, 0, 1)])
    demand = usage.numa_demand(node.machine, p, Scope.CONTAINER)
    assert demand == [{"cpu": 5, "memory": 5000 << 20, "nvidia.com/gpu": 1}]
    # 3 CPUs per NUMA node -> 2 nodes for 5 CPUs; 3.5Gi allocatable per node -> 2 for 5000Mi
    assert usage.fewest_numa_nodes(node, p, Scope.CONTAINER) == 2
    assert usage.fewest_nodes([3, 3, 3], 7) == 3 and usage.fewest_nodes([3], 99) == 1
    burstable = pod("b", [(2, 100, 0, 0)], guaranteed=False)
    assert usage.numa_demand(node.machine, burstable, Scope.POD) == [{}]


@SETTINGS
@given(st.sampled_from(POLICIES), pods)
def test_extender_assumed_count_equals_the_filter_count(policy: str, specs: Any) -> None:
    from numalign.kube.extender import ExtenderCore

    node = Node(machine(policy))
    core = ExtenderCore()
    core.set_nodes({"n1": build_nrt(node, name="n1")})
    mirror = engine_from_nrt(build_nrt(node, name="n1"))
    for i, (cs, guaranteed) in enumerate(specs):
        p = pod(f"p{i}", cs, guaranteed)
        expected = exact_filter(mirror, p)
        passed, _ = core.filter(p, ["n1"])
        assert (passed == ["n1"]) == expected.passed
        if expected.passed:
            assert expected.planned is not None
            mirror.commit(expected.planned)
            assert core.nodes["n1"].assumed[p.uid].numa_count == expected.numa_count
