"""LeastNUMANodes (scheduler-plugins ``numaNodesRequired``) on nodes with many NUMA zones.

Upstream enumerates every k-combination of the zones for k = 1, 2, ... until one fits. On a
34-zone GB200 tray that is 2^34 combinations when nothing fits: numalign answers "none fits"
without enumerating when even all the zones that publish every requested resource fall short,
and refuses, naming its cap, to compare more than ``MAX_COMBINATIONS`` combinations of one
size. Equality with the upstream enumeration on small nodes is
``tests/test_scheduler_node_groups.py::test_least_numa_combinations_are_upstreams``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from numalign.errors import InputError
from numalign.machine.spec import read_machine_file
from numalign.node.admission import Node
from numalign.pods import QOSClass, parse_pods, read_pod_files
from numalign.scheduler import get_profile, nrt_scores
from numalign.scheduler.nrt_scores import NumaZone, numa_nodes_required

ROOT = Path(__file__).resolve().parents[1]


def _zones(n: int, memory: int) -> list[NumaZone]:
    ids = range(n)
    return [NumaZone(i, {"cpu": 4000 if i < 2 else 0, "memory": memory},
                     {j: 10 if i == j else 20 for j in ids}) for i in ids]


def test_nothing_fits_on_34_zones_without_enumerating() -> None:
    """A request no zone publishes (a GPU on a tray whose NRT has none) and one all the zones
    together cannot hold: (None, False) with no k-combination built."""
    zones = _zones(34, 1 << 30)
    before = nrt_scores._distance_totals.cache_info()
    assert numa_nodes_required(QOSClass.GUARANTEED, zones, {"cpu": 1000, "vendor.com/gpu": 1}) == (None, False)
    assert numa_nodes_required(QOSClass.GUARANTEED, zones, {"memory": 35 << 30}) == (None, False)
    after = nrt_scores._distance_totals.cache_info()
    assert (after.hits, after.misses) == (before.hits, before.misses)


def test_a_fitting_request_on_34_zones_is_answered() -> None:
    zones = _zones(34, 1 << 30)
    ids, optimal = numa_nodes_required(QOSClass.GUARANTEED, zones, {"memory": 2 << 30})
    assert ids == frozenset({0, 1}) and optimal


def test_the_combination_cap_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """Memory spread over many zones: C(34, 3) = 5,984 combinations of 3 zones pass a cap of
    1,000, and the error names the zones, the count and the cap."""
    monkeypatch.setattr(nrt_scores, "MAX_COMBINATIONS", 1000)
    nrt_scores._REQUIRED.clear()
    zones = _zones(34, 1 << 30)
    with pytest.raises(InputError) as e:
        numa_nodes_required(QOSClass.GUARANTEED, zones, {"memory": 3 << 30})
    assert e.value.field == "zones"
    assert "5,984 combinations of 3 of the 34 NUMA zones" in e.value.message
    assert "cap of 1,000" in e.value.message and "\n" not in e.value.message


def test_gb200_example_scores_a_pod_whose_resources_it_lacks() -> None:
    """The shipped GB200 tray under ``nrt-snn-least-numa``: the fig1 pod (GPUs and NICs of
    vendors the tray does not have) and the tray's own GPU pod are both scored; the first
    used to walk every combination of the 34 zones."""
    machine = read_machine_file(str(ROOT / "examples" / "gb200.yaml"))
    profile = get_profile("nrt-snn-least-numa")
    assert profile.filter is not None and profile.numa_score is not None
    got = {}
    for f in ("examples/fig1-pods.yaml", "examples/pods/gb200-gpu.yaml"):
        pod = read_pod_files([str(ROOT / f)])[0]
        node = Node(machine)
        res = profile.filter(node, pod)
        assert res.passed, f
        got[f] = profile.numa_score.score_on(node, pod, res.numa_count, 34)
    assert got["examples/fig1-pods.yaml"] == 0  # no combination of zones holds it
    assert got["examples/pods/gb200-gpu.yaml"] == nrt_scores.normalize_score(1, True)


def test_extender_scores_a_capped_node_0_and_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    """``/prioritize`` under ``nrt-snn-least-numa`` (a cap lowered to 30 combinations): the
    34-zone tray, whose LeastNUMANodes would pass it, scores 0 with a line on the log naming node, pod and cap; the other node is scored."""
    import io

    from numalign.kube.extender.core import ExtenderCore, engine_pod
    from numalign.kube.topology import build_nrt

    monkeypatch.setattr(nrt_scores, "MAX_COMBINATIONS", 30)  # C(34, 1) = 34 passes it, C(2, k) not
    nrt_scores._REQUIRED.clear()
    log = io.StringIO()
    core = ExtenderCore(get_profile("nrt-snn-least-numa"), log=log)
    core.set_nodes({
        "tray": build_nrt(Node(read_machine_file(str(ROOT / "examples" / "gb200.yaml"))), name="tray"),
        "fig1": build_nrt(Node(read_machine_file(str(ROOT / "examples" / "fig1.yaml"))), name="fig1"),
    })
    wide = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "wide", "namespace": "ns", "uid": "u-wide"},
            "spec": {"containers": [{"name": "c", "resources": {
                "requests": {"cpu": "2", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "1Gi"}}}]}}
    pod = engine_pod(parse_pods(wide)[0])
    scores = dict(core.prioritize(pod, ["tray", "fig1"]))
    assert scores["tray"] == 0 and scores["fig1"] > 0
    assert "node tray: pod ns/wide: score 0: zones: LeastNUMANodes would compare" in log.getvalue()
    assert "cap of 30" in log.getvalue()
