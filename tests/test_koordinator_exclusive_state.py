"""Koordinator CPU exclusive policies of pods already on a node, kept in the node state.

Upstream (koordinator-sh/koordinator ``a7a1b76b``): ``node_allocation.go`` records each pod's
``CPUExclusivePolicy`` (from its ``resource-spec`` ``preferredCPUExclusivePolicy``, also on
failover: ``pod_eventhandler.go``) on the CPUs it holds; ``resource_manager.go`` passes those
``allocatedCPUs`` to ``takeCPUs``, whose accumulator skips, for a pod with the same policy, the
physical cores (``PCPULevel``) or NUMA nodes (``NUMANodeLevel``) holding them
(``cpu_accumulator_test.go`` ``TestTakeCPUsWithExclusivePolicy``, already transcribed against
the accumulator in test_koordinator_cpu_accumulator.py; here through the node engine, a restart
from the state file, the plan cache and release).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from numalign.cli import main
from numalign.errors import InputError, StateError
from numalign.machine.spec import load_machine
from numalign.modes.koordinator.cpu import NODE_NUMA_ALLOCATE_STRATEGY_LABEL
from numalign.modes.registry import MODE_LABEL
from numalign.node import store
from numalign.node.admission import Node
from numalign.node.plan_cache import PlanCache
from numalign.node.state import NodeState
from numalign.pods import Container, ContainerKind, Pod, QOSClass, default_uid
from numalign.pods.annotations import RESOURCE_SPEC
from numalign.resources.cpu_state import CpuState

MOST = {MODE_LABEL: "koordinator", NODE_NUMA_ALLOCATE_STRATEGY_LABEL: "MostAllocated"}
SPREAD_PCPU = {"preferredCPUBindPolicy": "SpreadByPCPUs", "preferredCPUExclusivePolicy": "PCPULevel"}
SPREAD_NONE = {"preferredCPUBindPolicy": "SpreadByPCPUs"}
NUMA_LEVEL = {"preferredCPUExclusivePolicy": "NUMANodeLevel"}


def spec(labels: dict[str, str]) -> dict[str, Any]:
    """2 sockets x 1 NUMA node x 4 cores x 2 threads: CPUs 0-3 and 8-11 on NUMA 0 (siblings
    c and c+8), 4-7 and 12-15 on NUMA 1; CPU 0 reserved."""
    return {
        "name": "k", "labels": labels, "shape": {"sockets": 2, "coresPerNuma": 4, "threadsPerCore": 2},
        "kubelet": {"cpuManagerPolicy": "static", "topologyManagerPolicy": "none", "reservedSystemCPUs": "0"},
    }


def pod(name: str, cpus: int, resource_spec: dict[str, str] | None = None) -> Pod:
    req = {"cpu": cpus * 1000, "memory": 1 << 30}
    c = Container("main", ContainerKind.APP, requests=req, limits=dict(req))
    ann = {RESOURCE_SPEC: json.dumps(resource_spec)} if resource_spec else {}
    return Pod("t", name, default_uid("t", name), QOSClass.GUARANTEED, (c,), ann)


def cpus_of(n: Node, p: Pod) -> frozenset[int]:
    r = n.admit(p)
    assert r.admitted, r.message
    return r.containers[0].cpus


def numas(n: Node, cpus: frozenset[int]) -> set[int]:
    return {n.machine.cpu_by_id[c].numa for c in cpus}


def cores(n: Node, cpus: frozenset[int]) -> set[int]:
    return {n.machine.cpu_by_id[c].core for c in cpus}


def test_pcpu_level_avoids_cores_of_an_earlier_pcpu_level_pod() -> None:
    """"allocate cpus on full-free socket with PCPULevel": the fuller NUMA node 0 has 4 free CPUs
    one per core only by reusing the cores of pod ``a``; ``b`` goes to NUMA node 1 instead."""
    n = Node(load_machine(spec(MOST)))
    a = cpus_of(n, pod("a", 2, SPREAD_PCPU))
    assert numas(n, a) == {0} and len(cores(n, a)) == 2
    assert n.state.cpu.exclusive == {default_uid("t", "a"): "PCPULevel"}
    b = cpus_of(n, pod("b", 4, SPREAD_PCPU))
    assert numas(n, b) == {1} and not cores(n, a) & cores(n, b)


def test_no_exclusive_policy_shares_the_cores() -> None:
    """"allocate cpus with none exclusive policy": the same pods without the policy stay on the
    fuller NUMA node 0, on ``a``'s cores; nothing is recorded."""
    n = Node(load_machine(spec(MOST)))
    a = cpus_of(n, pod("a", 2, SPREAD_NONE))
    b = cpus_of(n, pod("b", 4, SPREAD_NONE))
    assert numas(n, b) == {0} and cores(n, a) & cores(n, b)
    assert n.state.cpu.exclusive == {}
    assert "cpuExclusivePolicy" not in n.state.cpu.to_dict()


def test_numa_node_level_avoids_the_numa_node_of_an_earlier_numa_node_level_pod() -> None:
    """"allocate cpus on full-free socket with NUMANodeLevel (with PCPUs)" and "... without
    NUMANodeLevel": a NUMANodeLevel pod avoids NUMA node 0, a pod without the policy does not."""
    n = Node(load_machine(spec(MOST)))
    assert numas(n, cpus_of(n, pod("a", 2, NUMA_LEVEL))) == {0}
    assert numas(n, cpus_of(n, pod("b", 2, NUMA_LEVEL))) == {1}
    assert numas(n, cpus_of(n, pod("c", 2))) == {0}


def test_released_pods_no_longer_count() -> None:
    n = Node(load_machine(spec(MOST)))
    cpus_of(n, pod("a", 2, NUMA_LEVEL))
    assert n.release("t/a")
    assert n.state.cpu.exclusive == {}
    assert numas(n, cpus_of(n, pod("b", 2, NUMA_LEVEL))) == {0}


def test_exclusive_policies_survive_a_restart_from_the_state_file(tmp_path: Path) -> None:
    """Each ``numalign admit --state-dir`` is a restart: the second pod is placed as in one
    process, because the state file carries the first pod's policy."""
    machine = tmp_path / "m.json"
    machine.write_text(json.dumps(spec(MOST)))
    state = tmp_path / "state"
    out = {}
    for name, n_cpus in (("a", 2), ("b", 4)):
        p = tmp_path / f"{name}.json"
        p.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "t", "annotations": {RESOURCE_SPEC: json.dumps(SPREAD_PCPU)}},
            "spec": {"containers": [{"name": "main", "resources": {
                "requests": {"cpu": str(n_cpus), "memory": "1Gi"}, "limits": {"cpu": str(n_cpus), "memory": "1Gi"}}}]},
        }))
        assert main(["admit", "-m", str(machine), "--state-dir", str(state), str(p)]) == 0
        payload = store.load(state, None)
        assert payload is not None
        loaded = NodeState.from_dict(payload["node"])
        out[name] = loaded.cpu.pod_cpus(next(u for u, r in loaded.pods.items() if r.key == f"t/{name}"))["main"]
    assert set(loaded.cpu.exclusive.values()) == {"PCPULevel"} and len(loaded.cpu.exclusive) == 2
    n = Node(load_machine(spec(MOST)))
    assert numas(n, out["b"]) == {1} and not cores(n, out["a"]) & cores(n, out["b"])


def test_state_round_trip_and_old_state_files() -> None:
    n = Node(load_machine(spec(MOST)))
    cpus_of(n, pod("a", 2, SPREAD_PCPU))
    doc = json.loads(json.dumps(n.state.to_dict()))
    assert doc["cpu"]["cpuExclusivePolicy"] == {default_uid("t", "a"): "PCPULevel"}
    assert NodeState.from_dict(doc).to_dict() == doc
    del doc["cpu"]["cpuExclusivePolicy"]  # a state file written before the field existed
    assert NodeState.from_dict(doc).cpu.exclusive == {}


@pytest.mark.parametrize(("value", "field"), [
    ({"u1": "CoreLevel"}, "cpu.cpuExclusivePolicy.u1"),
    ({"u1": "None"}, "cpu.cpuExclusivePolicy.u1"),
    ({"u1": ["PCPULevel"]}, "cpu.cpuExclusivePolicy.u1"),
    ({"u1": "x" * 10_000}, "cpu.cpuExclusivePolicy.u1"),
    (["PCPULevel"], "cpu.cpuExclusivePolicy"),
])
def test_bad_exclusive_policies_are_one_line_errors_naming_the_field(value: object, field: str) -> None:
    with pytest.raises(InputError) as err:
        CpuState.from_dict({"defaultCpuSet": "0-3", "cpuExclusivePolicy": value})
    assert err.value.field == field and "\n" not in str(err.value) and len(str(err.value)) < 200
    n = Node(load_machine(spec(MOST)))
    doc = n.state.to_dict()
    doc["cpu"]["cpuExclusivePolicy"] = value
    with pytest.raises(StateError, match=field.replace(".", r"\.")):
        NodeState.from_dict(doc)


def test_plan_cache_tells_states_apart_by_exclusive_policies() -> None:
    """Two koordinator nodes with the same free CPUs, one holding them under PCPULevel: a shared
    plan cache must not replay one node's plan on the other."""
    machine = load_machine(spec(MOST))
    cache = PlanCache()
    excl, plain = Node(machine), Node(machine)
    excl.plan_cache = plain.plan_cache = cache
    a1 = cpus_of(excl, pod("a", 2, SPREAD_PCPU))
    a2 = cpus_of(plain, pod("a2", 2, {**SPREAD_NONE, "preferredCPUExclusivePolicy": "None"}))
    assert a1 == a2 and excl.state.cpu.default_set == plain.state.cpu.default_set
    assert numas(excl, cpus_of(excl, pod("b", 4, SPREAD_PCPU))) == {1}
    assert numas(plain, cpus_of(plain, pod("b", 4, SPREAD_PCPU))) == {0}
    # and a replayed admission carries the admitted pod's policy along
    again = Node(machine)
    again.plan_cache = cache
    cpus_of(again, pod("a3", 2, SPREAD_PCPU))
    assert again.state.cpu.exclusive == {default_uid("t", "a3"): "PCPULevel"}


def test_kubelet_mode_records_nothing() -> None:
    n = Node(load_machine(spec({})))
    cpus_of(n, pod("a", 2, SPREAD_PCPU))
    assert n.state.cpu.exclusive == {} and "cpuExclusivePolicy" not in n.state.cpu.to_dict()


def test_reconcile_keeps_a_kept_pods_exclusive_policy() -> None:
    """``numalign state --reconcile`` moves each pod that still fits; its policy moves along."""
    from numalign.node.session import _moved

    n = Node(load_machine(spec(MOST)))
    cpus_of(n, pod("a", 2, SPREAD_PCPU))
    moved = _moved(n, load_machine(spec(MOST)))
    assert moved.notes == ["kept t/a"]
    assert moved.state.cpu.pod_exclusive(default_uid("t", "a")) == "PCPULevel"
