"""Decisions that depend on the node's kubelet release (issue 25): device hints before and after
kubernetes#138244 (the upstream tables that changed, tests/data/kubelet_releases/), the same
pod on the same machine deciding differently under v1.35 and v1.36, the GB200-shaped machine
(admit, --explain, a small simulated cluster) and an upgrade simulated half on v1.30."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from numalign.engine.bitmask import mask_of
from numalign.engine.hints import GeneratedHints, TopologyHint
from numalign.engine.merge import NARROWEST
from numalign.engine.reference import product_fold
from numalign.machine.model import Device, Machine, NumaNode
from numalign.machine.spec import load_machine, read_machine_file
from numalign.node.admission import Node
from numalign.pods import parse_pods, read_pod_files
from numalign.resources.devices import DeviceManager
from test_devices_kubelet import COMMON, app, materialize, pod, state

REPO = Path(__file__).resolve().parent.parent
DATA = Path(__file__).parent / "data" / "kubelet_releases"
POST = json.loads((DATA / "devicemanager_topology_hints_post_138244.json").read_text())
CHANGED = {c["description"]: c for c in POST["TestGetTopologyHints_changed_common_cases"]}


def _hints(raw: list[dict[str, Any]] | None) -> list[TopologyHint] | None:
    if raw is None:
        return None
    return [TopologyHint(mask_of(h["numa"]), h["preferred"]) for h in raw]


def _machine(nodes: list[int], devices: dict[str, list[int] | None], resource: str = "r") -> Machine:
    devs = tuple(Device(resource, i, tuple(n or ())) for i, n in devices.items())
    return Machine("m", tuple(NumaNode(n, 1 << 30) for n in nodes), (), devices=devs)


@pytest.mark.parametrize(("name", "limits", "devices", "allocated", "expected"), COMMON,
                         ids=[c[0] for c in COMMON])
def test_get_topology_hints_after_the_fix(name: str, limits: Any, devices: Any, allocated: Any,
                                          expected: Any) -> None:
    """Upstream's common TestGetTopologyHints table run with the v1.36 generation: the cases
    #138244 changed expect its new hints, every other case is unchanged."""
    from test_devices_kubelet import machine as two_node_machine

    m = two_node_machine(devices)
    dm = DeviceManager(m, state(allocated), device_numa_only=True)
    got = dm.container_hints(pod(app("fakeContainer", limits)), app("fakeContainer", limits))
    changed = CHANGED.get(name, {})  # lists only the resources whose hints changed
    want = {**expected, **{r: _hints(v) for r, v in changed.get("expected_hints", {}).items()}}
    assert _sorted(got) == _sorted(want)
    if changed:  # and the release before keeps the old list
        old = DeviceManager(m, state(allocated)).container_hints(
            pod(app("fakeContainer", limits)), app("fakeContainer", limits))
        before = {r: _hints(v) for r, v in changed["expected_hints_before_fix"].items()}
        assert _sorted(old) == _sorted({**expected, **before}) == _sorted(expected)


def _sorted(hints: Any) -> dict[str, list[TopologyHint] | None]:
    """Per resource, the hints ordered by mask (upstream sorts before comparing too)."""
    out: dict[str, list[TopologyHint] | None] = {}
    for r, h in hints.items():
        listed = materialize(h) if not isinstance(h, list) or h else h
        out[r] = None if listed is None else sorted(listed, key=lambda x: x.affinity or 0)
    return out


@pytest.mark.parametrize("case", POST["TestDeviceNUMANodes"], ids=lambda c: c["description"])
def test_device_numa_nodes(case: dict[str, Any]) -> None:
    nodes = case["machine_numa_nodes"] or [0]
    m = _machine(nodes, case["devices"])
    got = DeviceManager(m, device_numa_only=True).hint_nodes("r")
    assert got == (tuple(case["expected"]) or tuple(nodes))  # empty: the machine's (fallback)


@pytest.mark.parametrize("case", POST["TestGenerateDeviceTopologyHintsFiltersNUMANodes"],
                         ids=lambda c: c["description"])
def test_generate_device_topology_hints_filters_numa_nodes(case: dict[str, Any]) -> None:
    m = _machine(case["numa_nodes"], case["all_devices"])
    new, old = DeviceManager(m, device_numa_only=True), DeviceManager(m)
    args = (case["available"], case["reusable"], case["request"])
    got = new._generate("r", *args)
    assert isinstance(got, GeneratedHints)
    hints = got.materialize()
    if "expected_hints" in case:
        assert sorted(hints, key=lambda h: h.affinity or 0) == sorted(
            _hints(case["expected_hints"]) or [], key=lambda h: h.affinity or 0)
    else:  # "exactly one hint with mask [0,1]" among the hints: no duplicate
        assert [h.affinity for h in hints].count(0b11) == 1
    before = case["derived_hints_before_fix"]
    gen = old._generate("r", *args)
    assert isinstance(gen, GeneratedHints)
    if isinstance(before, list):  # derived by executing the pre-fix rule (research script)
        assert gen.materialize() == _hints(before)
    else:  # 34 NUMA nodes: only count what the old kubelet would enumerate and keep
        assert len(gen.nodes) == 34 and gen.contains(mask_of(range(34)))


# ------------------------------------------------------------------ same pod, two releases

TWO_NUMA = """
name: two-numa-one-gpu
shape: {sockets: 2, coresPerNuma: 8, threadsPerCore: 1, memoryPerNuma: 64Gi}
devices: [{resource: nvidia.com/gpu, id: GPU-0, numa: [0]}]
kubelet:
  topologyManagerPolicy: best-effort
  cpuManagerPolicy: static
  reservedSystemCPUs: "15"
  systemReserved: {memory: 1Gi}
  memoryManagerPolicy: Static
  reservedMemory: [{numaNode: 1, limits: {memory: 1124Mi}}]
"""
WIDE = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "wide"},
        "spec": {"containers": [{"name": "c", "resources": {
            "limits": {"cpu": "10", "memory": "8Gi", "nvidia.com/gpu": "1"}}}]}}


def test_same_pod_same_machine_two_releases() -> None:
    """docs/kubelet-releases.md's example: 10 CPUs need both NUMA nodes, the GPU sits on node 0,
    8Gi fit either node. v1.35's device hints keep the non-preferred {0,1}, so best-effort merges
    {0,1} and the Static memory manager spreads the memory over both nodes; v1.36's do not, the
    merge gives {0} and the memory stays on node 0."""
    import yaml

    doc = yaml.safe_load(TWO_NUMA)
    out = {}
    for version in ("v1.35.2", "v1.36.0"):
        doc["kubelet"]["kubeletVersion"] = version
        r = Node(load_machine(doc)).admit(parse_pods(WIDE)[0])
        (c,) = r.containers
        out[version] = (r.admitted, c.affinity, c.preferred, sorted(c.memory))
    assert out["v1.35.2"] == (True, 0b11, False, ["0,1"])  # one block over the NUMA group {0,1}
    assert out["v1.36.0"] == (True, 0b01, False, ["0"])
    # the literal kubelet fold over the explicit lists agrees (policy.go's permutations)
    cpu_ = [TopologyHint(0b11, True)]
    memory = [TopologyHint(0b01, True), TopologyHint(0b10, True), TopologyHint(0b11, False)]
    old_dev = [TopologyHint(0b01, True), TopologyHint(0b11, False)]
    new_dev = [TopologyHint(0b01, True)]
    assert product_fold([old_dev, cpu_, memory], 0b11, NARROWEST) == TopologyHint(0b11, False)
    assert product_fold([new_dev, cpu_, memory], 0b11, NARROWEST) == TopologyHint(0b01, False)


# ------------------------------------------------------------------ the GB200-shaped machine


def test_gb200_admit_decides_fast_and_explains_the_release() -> None:
    m = read_machine_file(str(REPO / "examples" / "gb200.yaml"))
    assert len(m.node_ids) == 34 and len({c.numa for c in m.cpus}) == 2
    (pod_,) = read_pod_files([str(REPO / "examples" / "pods" / "gb200-gpu.yaml")])
    t0 = time.process_time()
    r = Node(m).admit(pod_, explain=True)
    assert time.process_time() - t0 < 2.0  # CPU time, generous: numalign enumerates nothing
    assert r.admitted and r.containers[0].affinity == 0b01
    assert r.kubelet[0].startswith("no kubelet version given: decided as v1.36")
    assert any("nvidia.com/gpu (v1.36): the 2 NUMA nodes holding its devices" in s for s in r.kubelet)
    assert any(s.startswith("memory hints") and "would not finish" in s for s in r.kubelet)

    from numalign.machine.kubelet_version import parse_kubelet_version

    old = m.replace(kubelet=m.kubelet.replace(kubelet_version=parse_kubelet_version("v1.35.2")))
    r2 = Node(old).admit(pod_, explain=True)
    assert r2.containers[0].affinity == 0b01  # the same decision, which that kubelet never reaches
    assert any("nvidia.com/gpu (v1.35): all 34 NUMA nodes, 2^34 - 1 = 17179869183 masks - would "
               "not finish" in s for s in r2.kubelet)
    v130 = m.replace(kubelet=m.kubelet.replace(kubelet_version=parse_kubelet_version("v1.30.2")))
    with pytest.raises(Exception, match='unknown Topology Manager Policy option: "max-allowable-numa-nodes"'):
        Node(v130)


SMALL = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "small"},
         "spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": "2", "memory": "1Gi"}}}]}}


def _simulate(template: dict[str, Any], count: int, tmp_path: Path, small: int = 0) -> dict[str, Any]:
    from numalign.sim.cli_run import simulation_summary
    from numalign.sim.cluster import load_cluster
    from numalign.sim.workloads import Arrival, Workload

    nodes = load_cluster(template, "cluster.yaml", REPO / "examples")
    pods = parse_pods([{**WIDE, "metadata": {"name": f"p{i}"}} for i in range(count)]
                      + [{**SMALL, "metadata": {"name": f"s{i}"}} for i in range(small)])
    wl = Workload("w", tuple(Arrival(float(i), p) for i, p in enumerate(pods)))
    summary, _ = simulation_summary(nodes, wl, ["numalign"], spec="test", cluster_label="t")
    return summary


def test_gb200_cluster_schedules_without_topology_affinity_errors(tmp_path: Path) -> None:
    template = {"nodes": [{"machine": "gb200.yaml", "count": 3}]}
    summary = _simulate(template, 12, tmp_path)
    p = summary["profiles"]["numalign"]
    assert p["scheduled"] == 12 and p["topology_affinity_errors"] == 0
    assert p["by_kubelet_release"] == {"v1.36": {"aligned": 12, "numa_nodes_1": 12, "scheduled": 12}}


def test_an_upgrade_half_on_v1_30_shows_what_changes(tmp_path: Path) -> None:
    """Half the nodes on v1.30, half on the newest release. Each node takes one wide pod: on
    v1.30 its memory is one block over the NUMA group {0,1} (best-effort merged {0,1}), on v1.36
    it stays on node 0. A small Guaranteed pod after it could not have single-node memory on a
    v1.30 node (both nodes belong to the group: the memory manager's group rule), so the
    NUMA-aware scheduler puts every small pod on the v1.36 nodes, each on one NUMA node. The
    summary shows it per release."""
    import yaml

    from numalign.sim.release_summary import release_lines

    machine = yaml.safe_load(TWO_NUMA)
    template = {"nodes": [
        {"machine": machine, "count": 2, "namePrefix": "old", "kubeletVersion": "v1.30.14"},
        {"machine": machine, "count": 2, "namePrefix": "new"}]}
    summary = _simulate(template, 4, tmp_path, small=4)
    by = summary["profiles"]["numalign"]["by_kubelet_release"]
    assert by["v1.30"] == {"aligned": 2, "numa_nodes_2": 2, "scheduled": 2}
    assert by["v1.36"] == {"aligned": 6, "numa_nodes_1": 4, "numa_nodes_2": 2, "scheduled": 6}
    assert summary["profiles"]["numalign"]["topology_affinity_errors"] == 0
    versions = {g["kubelet_version"] for g in summary["cluster"]["groups"]}
    assert versions == {"v1.30.14", "newest modelled"}
    lines = release_lines(summary)
    assert any(line.startswith("  numalign v1.30: admitted") for line in lines)


def test_a_bad_group_version_names_the_entry() -> None:
    from numalign.sim.cluster import load_cluster

    with pytest.raises(Exception, match=r"cluster.yaml: nodes\[0\].kubeletVersion"):
        load_cluster({"nodes": [{"machine": {"shape": {}}, "kubeletVersion": 1.3}]}, "cluster.yaml")
