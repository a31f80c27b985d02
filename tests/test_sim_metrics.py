"""Metrics recorder: counters, pending bookkeeping, percentiles, summary maths."""

from __future__ import annotations

import json
import math

import pytest

from numalign.sim.metrics import (
    ContainerPlacement,
    MetricsRecorder,
    downsample,
    percentile,
    time_weighted_mean,
)


def test_percentile_linear_interpolation() -> None:
    values = [4.0, 1.0, 3.0, 2.0]  # sorted: 1 2 3 4
    assert percentile(values, 0.0) == 1.0
    assert percentile(values, 1.0) == 4.0
    assert percentile(values, 0.5) == 2.5
    assert percentile(values, 0.9) == pytest.approx(3.7)
    assert percentile([5.0], 0.99) == 5.0
    assert math.isnan(percentile([], 0.5))
    with pytest.raises(ValueError):
        percentile(values, 1.5)
    data = [float(i) for i in range(101)]
    assert percentile(data, 0.99) == pytest.approx(99.0)


def test_time_weighted_mean_and_downsample() -> None:
    # 0.0 for 10 s, then 1.0 for 30 s: mean 0.75 over 40 s (the last sample has no width)
    assert time_weighted_mean([(0.0, 0.0), (10.0, 1.0), (40.0, 0.2)]) == pytest.approx(0.75)
    assert time_weighted_mean([(5.0, 0.4)]) == 0.4
    assert math.isnan(time_weighted_mean([]))
    pts = [(float(i), float(i)) for i in range(1001)]
    d = downsample(pts, 11)
    assert len(d) == 11 and d[0] == pts[0] and d[-1] == pts[-1]
    assert downsample(pts[:5], 11) == pts[:5]


def test_summary_counters_and_fractions() -> None:
    r = MetricsRecorder(["default", "numalign"])
    one = ContainerPlacement("c", 0b01, {"cpu": 2000})
    two = ContainerPlacement("c", 0b11, {"cpu": 2000})
    none = ContainerPlacement("c", None, {"cpu": 500})
    r.record_placed("numalign", 1.0, "ns/a", [one], True, latency_s=0.001)
    r.record_placed(
        "numalign", 2.0, "ns/b", [one, ContainerPlacement("d", 0b10)], False, latency_s=0.003
    )
    r.record_placed("numalign", 3.0, "ns/c", [none], True, latency_s=0.002)
    r.record_placed("default", 1.0, "ns/a", [two], False, latency_s=0.001)
    r.record_rejected("default", 2.0, "ns/b", latency_s=0.001)
    r.record_rejected("default", 5.0, "ns/c", "TopologyAffinityError")
    r.record_rejected("default", 6.0, "ns/d", "SMTAlignmentError")
    r.record_retry("default", 6.0, "ns/c")
    r.record_departed("numalign", 9.0, "ns/a")
    s = r.summary(workload={"name": "w"})
    assert list(s["profiles"]) == ["default", "numalign"]
    assert s["workload"] == {"name": "w"}
    n = s["profiles"]["numalign"]
    assert n["scheduled"] == 3 and n["aligned"] == 2
    assert n["aligned_fraction"] == pytest.approx(2 / 3, abs=1e-6)
    assert n["topology_affinity_errors"] == 0 and n["departed"] == 1
    assert n["numa_nodes_used"] == {"0": 1, "1": 1, "2": 1}
    assert n["latency_ms"]["p50"] == pytest.approx(2.0)
    assert n["latency_ms"]["max"] == pytest.approx(3.0)
    assert n["scheduling_cycles"] == 3
    assert n["scheduled_pods_per_cpu_s"] is None  # no CPU time measured
    d = s["profiles"]["default"]
    assert d["scheduled"] == 1 and d["aligned_fraction"] == 0.0
    assert d["topology_affinity_errors"] == 2 and d["rejected"] == 3
    assert d["rejections"] == {"SMTAlignmentError": 1, "TopologyAffinityError": 2}
    assert d["retries"] == 1
    assert d["numa_nodes_used"] == {"2": 1}
    json.dumps(s, allow_nan=False)  # JSON-safe


def test_pending_set_semantics() -> None:
    r = MetricsRecorder()
    r.record_pending("p", 1.0, "ns/a", latency_s=0.01)
    r.record_pending("p", 2.0, "ns/a", latency_s=0.01)  # still the same pending pod
    r.record_pending("p", 2.0, "ns/b", latency_s=0.01)
    r.record_pending("p", 3.0, "ns/c", latency_s=0.01)
    assert r.summary()["profiles"]["p"]["pending"] == 3
    r.record_placed("p", 4.0, "ns/a", [], True, latency_s=0.01)
    r.record_dropped("p", 5.0, "ns/b")
    s = r.summary()["profiles"]["p"]
    assert s["pending"] == 1 and s["unschedulable_attempts"] == 4 and s["dropped"] == 1
    assert r.profile("p").pending == [(1.0, 1.0), (2.0, 2.0), (3.0, 3.0), (4.0, 2.0), (5.0, 1.0)]


def test_scheduled_pods_per_cpu_second_counts_pods_not_cycles() -> None:
    """Issue 23: the rate counted scheduling cycles (nrt-snn: 4,977 "pods/s" for 1,422 pods).
    Five cycles, one pod placed: one pod per CPU second spent, whatever the cycle count."""
    r = MetricsRecorder()
    for t in range(4):
        r.record_pending("p", float(t), "ns/a", latency_s=0.01)  # tried, nothing placed
    r.record_placed("p", 4.0, "ns/a", [], True, latency_s=0.01)
    r.record_rejected("p", 5.0, "ns/b", latency_s=0.01)  # bound, refused: not scheduled
    r.set_cpu_time("p", 0.5)
    s = r.summary()["profiles"]["p"]
    assert s["scheduling_cycles"] == 6 and s["scheduled"] == 1
    assert s["scheduled_pods_per_cpu_s"] == 2.0 and s["scheduler_cpu_s"] == 0.5
    assert "throughput_pods_per_s" not in s
    r.set_cpu_time("p", 0.0)  # too fast to measure: no rate rather than infinity
    assert r.summary()["profiles"]["p"]["scheduled_pods_per_cpu_s"] is None


def test_empty_profile_summary_is_json_safe() -> None:
    s = MetricsRecorder(["idle"]).summary()
    p = s["profiles"]["idle"]
    assert p["scheduled"] == 0 and p["aligned_fraction"] == 0.0
    assert p["latency_ms"]["p50"] is None and p["scheduled_pods_per_cpu_s"] is None
    json.dumps(s, allow_nan=False)


def test_samples_and_series() -> None:
    r = MetricsRecorder()
    for t in range(100):
        r.sample_utilisation("p", float(t), {"cpu": t / 100, "gpu": 0.5})
        r.sample_fragmentation("p", float(t), {"cpu": 0.1})
    r.record_rejected("p", 10.0, "ns/x")
    r.record_rejected("p", 20.0, "ns/y")
    s = r.summary()["profiles"]["p"]
    assert s["utilisation"]["gpu"] == {"mean": 0.5, "max": 0.5, "final": 0.5}
    assert s["utilisation"]["cpu"]["max"] == 0.99 and s["utilisation"]["cpu"]["final"] == 0.99
    assert s["utilisation"]["cpu"]["mean"] == pytest.approx(0.49)
    assert s["fragmentation"]["cpu"]["mean"] == pytest.approx(0.1)
    series = r.series(max_points=10)["p"]
    assert series.errors == [(0.0, 0.0), (10.0, 1.0), (20.0, 2.0)]
    assert len(series.utilisation["cpu"]) == 10
    assert series.utilisation["cpu"][-1] == (99.0, 0.99)


def test_keep_placements() -> None:
    r = MetricsRecorder(keep_placements=True)
    r.record_placed(
        "p", 1.0, "ns/a", [ContainerPlacement("c", 0b100, {"cpu": 1000})], True, node="n1"
    )
    [placed] = r.profile("p").placed
    assert placed.node == "n1" and placed.numa_nodes == 1 and placed.aligned
    r2 = MetricsRecorder()
    r2.record_placed("p", 1.0, "ns/a", [], True, numa_nodes=3)
    assert r2.profile("p").placed == []
    assert r2.summary()["profiles"]["p"]["numa_nodes_used"] == {"3": 1}
