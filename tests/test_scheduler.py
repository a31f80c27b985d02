"""Scheduler core: upstream scoring examples, exact filter, and the simulator's promise."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from numalign.cli import main
from numalign.node.admission import Node
from numalign.scheduler import Cluster, Scheduler, get_profile
from numalign.scheduler.scheduler import num_feasible_nodes_to_find
from numalign.scheduler.scorers import least_numa_nodes, volcano_numa_aware
from numalign.sim.cluster import builtin_cluster
from numalign.sim.runner import simulate
from numalign.sim.sources import parse_workload_spec


def test_volcano_design_example() -> None:
    """Volcano numa-aware design doc: weight 10, nodes needing 1, 2, 4 NUMA nodes."""
    assert volcano_numa_aware([1, 2, 4], weight=10) == [750, 500, 0]
    assert volcano_numa_aware([0, 0], weight=3) == [300, 300]


def test_scheduler_plugins_least_numa_nodes_examples() -> None:
    """scheduler-plugins LeastNUMANodes with maxNUMANodes 8 (step 12)."""
    assert least_numa_nodes(1, 8) == 88
    assert least_numa_nodes(1, 8, optimal_distance=True) == 94
    assert least_numa_nodes(2, 8) == 76
    assert least_numa_nodes(2, 8, optimal_distance=True) == 82
    assert least_numa_nodes(8, 8, optimal_distance=True) == 10
    assert least_numa_nodes(0, 8) == 100


def test_kube_scheduler_nodes_to_find() -> None:
    assert num_feasible_nodes_to_find(50) == 50
    assert num_feasible_nodes_to_find(5000) == 500
    assert num_feasible_nodes_to_find(1000) == 420


@pytest.fixture(scope="module")
def demo_run() -> tuple[list[tuple[str, object]], object]:
    nodes = builtin_cluster("default")
    wl = parse_workload_spec("synthetic:count=600,seed=3", None, cluster=nodes)
    return nodes, simulate(nodes, wl, ["default", "numalign"], keep_placements=True, samples=4)


def test_numalign_never_causes_topology_affinity_errors(demo_run: tuple[list[tuple[str, object]], object]) -> None:
    _, result = demo_run
    summary = result.recorder.summary()["profiles"]  # type: ignore[attr-defined]
    assert summary["numalign"]["topology_affinity_errors"] == 0
    assert summary["default"]["topology_affinity_errors"] > 0
    assert summary["numalign"]["scheduled"] >= summary["default"]["scheduled"]


def test_every_numalign_placement_is_admitted_when_replayed(demo_run: tuple[list[tuple[str, object]], object]) -> None:
    """Replay the binds and departures, in order, on fresh node engines."""
    nodes, result = demo_run
    events = result.placements["numalign"]  # type: ignore[attr-defined]
    assert sum(1 for e in events if e[0] == "bind") > 100
    assert any(e[0] == "release" for e in events)
    engines = {name: Node(m) for name, m in nodes}  # type: ignore[arg-type]
    cluster = result.clusters["numalign"]  # type: ignore[attr-defined]
    for kind, name, pod in events:
        if kind == "release":
            assert engines[name].release(pod.uid)
            continue
        replay = engines[name].admit(pod)
        assert replay.admitted, (name, pod.key, replay.reason)
    # and the replayed nodes hold exactly what the scheduler's nodes hold
    for cn in cluster.nodes:
        assert engines[cn.name].state.to_dict() == cn.node.state.to_dict()


def test_exact_filter_agrees_with_node_admission() -> None:
    nodes = builtin_cluster("small")
    wl = parse_workload_spec("synthetic:count=80,seed=5", None, cluster=nodes)
    cluster = Cluster(nodes)
    sched = Scheduler(cluster, get_profile("numalign"))
    for a in wl:
        placement, _, _ = sched.select(a.pod)
        for cn in cluster.nodes:
            planned = cn.node.plan(a.pod)[0].admitted
            if placement is not None and cn.name == placement.name:
                assert planned
        if placement is None:
            assert not any(cn.node.plan(a.pod)[0].admitted for cn in cluster.nodes
                           if cluster.fits(cluster.request_vector(a.pod))[cluster.index[cn.name]])  # type: ignore[arg-type]
        sched.schedule(a.pod)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--workload", "synthetic:count=x"], "count"),
        (["--workload", "bogus"], "workload"),
        (["--profiles", "default,fastest"], "unknown profile 'fastest'"),
        (["--cluster", "/nonexistent/cluster.yaml"], "cluster.yaml"),
    ],
)
def test_bad_simulate_input(tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    code = main(["simulate", "--quiet", "--out", str(tmp_path), *args])
    _, err = capsys.readouterr()
    assert code == 2 and message in err and err.count("\n") == 1, err


def test_bad_cluster_template_names_the_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "c.yaml"
    bad.write_text("nodes:\n  - {machine: {name: m, shape: {sockets: 1}}, count: -1}\n")
    code = main(["simulate", "--quiet", "--out", str(tmp_path), "--cluster", str(bad)])
    _, err = capsys.readouterr()
    assert code == 2 and "nodes[0].count" in err, err


def test_simulate_writes_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["simulate", "--quiet", "--cluster", "builtin:small", "--workload", "synthetic:count=60",
                 "--out", str(tmp_path)])
    out, _ = capsys.readouterr()
    assert code == 0 and "numalign" in out
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert set(summary["profiles"]) == {"default", "nrt-snn", "volcano", "numalign"}
    assert summary["profiles"]["numalign"]["topology_affinity_errors"] == 0
    html = (tmp_path / "report.html").read_text()
    assert html.count("data:image/png;base64,") >= 4


def test_prefilter_never_drops_a_node_the_engine_admits() -> None:
    """The vectorised prefilter is a necessary condition of the node's admission."""
    import numpy as np

    from numalign.scheduler.prefilter import NumaPrefilter

    nodes = builtin_cluster("default")
    wl = parse_workload_spec("synthetic:count=400,seed=11", None, cluster=nodes)
    cluster = Cluster(nodes)
    sched = Scheduler(cluster, get_profile("numalign"))
    pods = [a.pod for a in wl]
    for pod in pods[:300]:
        sched.schedule(pod)  # fill the cluster to varied states
    pre = NumaPrefilter([cn.node for cn in cluster.nodes])
    everyone = np.arange(len(cluster.nodes))
    dropped = 0
    for pod in pods[300:]:
        keep = pre.passing(pod, everyone)
        for i in np.flatnonzero(~keep):
            dropped += 1
            assert not cluster.nodes[int(i)].node.plan(pod)[0].admitted, (cluster.nodes[int(i)].name, pod.key)
    assert dropped > 0  # the condition does prune
