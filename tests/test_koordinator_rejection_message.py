"""Koordinator's reasons are the rejection message wherever a koordinator-mode decision is
reported: ``numalign admit`` on a koordinator-mode node, the extender's ``FailedNodes`` and the
simulator's unschedulable reasons under the ``koordinator`` profile.

Upstream (koordinator-sh/koordinator ``pkg/scheduler/frameworkext/topologymanager``):
``manager.go`` ``Admit`` answers a refused hint with ``NewStatus(Unschedulable, reasons...)``,
whose message joins the reasons with ``", "``; ``policy_single_numa_node.go`` gives one reason,
``Unaligned NUMA Hint cause `` and the per-resource summaries joined with ``","``, as its test
``TestPolicySingleNumaNodeMerge/Two providers, 1 hint each, no common mask`` asserts
(``policy_test.go``: ``resource1 prefer [01] among [01],resource2 prefer [10] among [10]``);
``policy_restricted.go`` joins them with ``" & "``. Masks print as ``bitmask.String()``.

The node below is that case on a machine: 2 NUMA nodes of 4 CPUs (CPU 0 reserved), the only GPU
on NUMA node 1, whose CPUs a first pod holds; a second pod asking for 2 CPUs and the GPU finds
its CPUs only on NUMA node 0 (``01``) and its GPU only on NUMA node 1 (``10``; ``11`` too, not
preferred). Its memory follows the CPUs (NodeNUMAResource hints CPU and memory jointly: ``01``
and ``11``; every hint preferred under Restricted).
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from numalign.cli import main
from numalign.machine.spec import load_machine
from numalign.modes.registry import MODE_LABEL, Mode
from numalign.node.admission import Node
from numalign.pods import Container, ContainerKind, Pod, QOSClass, default_uid
from numalign.sim.metrics import MAX_UNSCHEDULABLE_REASONS, OTHER_REASONS, MetricsRecorder
from numalign.sim.workloads import Arrival, Workload

GPU = "example.com/gpu"
#: what Koordinator's SingleNUMANode policy answers for the second pod (see the module docstring)
SINGLE_NUMA_NODE = (
    "Unaligned NUMA Hint cause cpu prefer [01] among [01],"
    f"{GPU} prefer [10] among [10 11],memory prefer [01] among [01 11]"
)
#: ... and Restricted (every hint preferred, summaries joined with " & ")
RESTRICTED = (
    "Unaligned NUMA Hint cause cpu prefer [01] among [01] & "
    f"{GPU} prefer [10] among [10 11] & memory prefer [01 11] among [01 11]"
)


def spec(policy: str, mode: str | None = "koordinator") -> dict[str, Any]:
    doc: dict[str, Any] = {
        "name": "k", "shape": {"sockets": 2, "coresPerNuma": 4, "threadsPerCore": 1},
        "kubelet": {"cpuManagerPolicy": "static", "topologyManagerPolicy": policy,
                    "topologyManagerScope": "pod", "reservedSystemCPUs": "0"},
        "devices": [{"resource": GPU, "id": "gpu0", "numa": [1]}],
    }
    if mode is not None:
        doc["labels"] = {MODE_LABEL: mode}
    return doc


def pod(name: str, cpus: int, gpus: int = 0) -> Pod:
    req = {"cpu": cpus * 1000, "memory": 1 << 30}
    if gpus:
        req[GPU] = gpus
    c = Container("main", ContainerKind.APP, requests=req, limits=dict(req))
    return Pod("t", name, default_uid("t", name), QOSClass.GUARANTEED, (c,))


def pod_doc(name: str, cpus: int, gpus: int = 0) -> dict[str, Any]:
    res = {"cpu": str(cpus), "memory": "1Gi", **({GPU: str(gpus)} if gpus else {})}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "t"},
            "spec": {"containers": [{"name": "main", "image": "x",
                                     "resources": {"requests": res, "limits": res}}]}}


@pytest.mark.parametrize(("policy", "message"), [("single-numa-node", SINGLE_NUMA_NODE),
                                                  ("restricted", RESTRICTED)])
def test_admission_on_a_koordinator_node_says_koordinators_words(policy: str, message: str) -> None:
    n = Node(load_machine(spec(policy)))
    assert n.mode is Mode.KOORDINATOR
    assert n.admit(pod("a", 4)).admitted  # NUMA node 1's CPUs (NodeNUMAResource's NUMA scores)
    r = n.admit(pod("b", 2, 1))
    assert (r.admitted, r.reason, r.message, r.family_message) == (False, "TopologyAffinityError", message, True)


def test_the_kubelet_mode_keeps_the_kubelets_message() -> None:
    n = Node(load_machine(spec("single-numa-node", None)))
    assert n.admit(pod("a", 4)).admitted
    r = n.admit(pod("b", 2, 1))
    assert (r.admitted, r.reason, r.message, r.family_message) == (
        False, "TopologyAffinityError", "Resources cannot be allocated with Topology locality", False)


def test_numalign_admit_prints_koordinators_words(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    machine = tmp_path / "m.yaml"
    machine.write_text(yaml.safe_dump(spec("single-numa-node")))
    pods = tmp_path / "pods.yaml"
    pods.write_text(yaml.safe_dump_all([pod_doc("a", 4), pod_doc("b", 2, 1)]))
    code = main(["admit", "-m", str(machine), "-o", "json", str(pods)])
    out = json.loads(capsys.readouterr().out)["pods"]
    assert code != 0
    assert [(p["admitted"], p["reason"], p["message"]) for p in out] == [
        (True, None, None), (False, "TopologyAffinityError", SINGLE_NUMA_NODE)]


def test_extender_failed_nodes_say_koordinators_words() -> None:
    from numalign.kube.extender import ExtenderCore
    from numalign.kube.topology import build_nrt
    from numalign.scheduler import get_profile

    core = ExtenderCore(get_profile("koordinator"), log=io.StringIO())
    core.set_nodes({"n1": build_nrt(Node(load_machine(spec("single-numa-node", None))), name="n1")})
    assert core.filter(pod("a", 4), ["n1"]) == (["n1"], {})  # passes, assumed on n1
    assert core.filter(pod("b", 2, 1), ["n1"]) == ([], {"n1": SINGLE_NUMA_NODE})


def test_simulator_counts_koordinators_words_for_a_pending_pod() -> None:
    from numalign.sim.runner import simulate

    nodes = [("n1", load_machine(spec("single-numa-node", None)))]
    workload = Workload("w", (Arrival(0.0, pod("a", 4)), Arrival(1.0, pod("b", 2, 1))))
    summary = simulate(nodes, workload, ["koordinator"]).recorder.summary()["profiles"]["koordinator"]
    assert (summary["scheduled"], summary["pending"]) == (1, 1)
    assert summary["unschedulable_reasons"] == {SINGLE_NUMA_NODE: summary["unschedulable_attempts"]}


def test_unschedulable_reasons_are_capped() -> None:
    rec = MetricsRecorder(["p"])
    for i in range(MAX_UNSCHEDULABLE_REASONS + 3):
        rec.record_pending("p", float(i), f"pod{i}", reason=f"why {i}")
    rec.record_pending("p", 99.0, "pod0", reason="why 0")
    rec.record_pending("p", 99.0, "pod0")  # no reason given: counted as an attempt only
    s = rec.summary()["profiles"]["p"]
    reasons = s["unschedulable_reasons"]
    assert s["unschedulable_attempts"] == MAX_UNSCHEDULABLE_REASONS + 5
    assert len(reasons) == MAX_UNSCHEDULABLE_REASONS + 1 and reasons[OTHER_REASONS] == 3
    assert list(reasons)[:2] == [OTHER_REASONS, "why 0"] and reasons["why 0"] == 2  # most frequent first
