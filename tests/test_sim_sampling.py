"""The simulator's numbers are possible: properties over workloads, seeds and profiles.

* sample times never go back, and the last sample is the end of the simulation (after the
  last departure), showing the cluster as it is then;
* utilisation and fragmentation samples lie in [0, 1]; each summary's min <= mean <= max;
* every submitted pod has exactly one outcome:
  arrived + recreated = scheduled + rejected + pending + dropped.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from numalign.sim.cluster import builtin_cluster
from numalign.sim.metrics import MetricsRecorder, time_weighted_mean, unaccounted
from numalign.sim.runner import SimResult, simulate
from numalign.sim.sources import parse_workload_spec
from numalign.sim.workloads import Arrival, Workload

SMALL = builtin_cluster("small")
PROFILES = ("default", "nrt-snn", "volcano", "numalign")


def _workload(count: int, seed: int, forever_every: int = 0) -> Workload:
    """A synthetic workload; with ``forever_every`` = k, every k-th pod never departs."""
    wl = parse_workload_spec(f"synthetic:count={count},seed={seed}", None, cluster=SMALL)
    if not forever_every:
        return wl
    arrivals = tuple(
        replace(a, duration_s=None) if i % forever_every == 0 else a for i, a in enumerate(wl)
    )
    return Workload(wl.name, arrivals, wl.description)


def _series_points(result: SimResult, name: str) -> list[list[tuple[float, float]]]:
    m = result.recorder.profile(name)
    return [*m.utilisation.values(), *m.fragmentation.values()]


def _check_run(result: SimResult, wl: Workload, profiles: tuple[str, ...]) -> None:
    last_arrival = max(a.time_s for a in wl)
    for name in profiles:
        m = result.recorder.profile(name)
        summary = result.recorder.profile_summary(name)
        # accounting
        assert summary["arrived"] == len(wl)
        assert unaccounted(summary) == 0, (name, summary)
        # samples: monotone, in range, one common end
        ends = set()
        for pts in _series_points(result, name):
            times = [t for t, _ in pts]
            assert times == sorted(times), (name, times)
            assert all(0.0 <= v <= 1.0 for _, v in pts), (name, pts)
            ends.add(times[-1])
        [end] = ends
        assert end >= last_arrival
        for t, _ in (*m.errors, *m.pending):
            assert t <= end
        # the final sample is the cluster as the simulation left it
        cluster = result.clusters[name]
        cpu = cluster.col["cpu"]
        final_cpu = float(cluster.requested[:, cpu].sum() / cluster.allocatable[:, cpu].sum())
        assert m.utilisation["cpu"][-1] == (end, pytest.approx(final_cpu))
        # summary statistics of possible series
        for kind in ("utilisation", "fragmentation"):
            for res, stats in summary[kind].items():
                values = [v for _, v in getattr(m, kind)[res]]
                assert min(values) - 1e-6 <= stats["mean"] <= stats["max"] + 1e-6, (name, res)
                assert stats["max"] == pytest.approx(max(values), abs=1e-6)
                assert 0.0 <= stats["mean"] <= 1.0


def test_final_sample_is_after_the_last_departure_not_the_last_arrival() -> None:
    """The reported bug: departures after the last arrival were sampled, then a final sample
    went back to the last arrival time (GPU mean 118 %, negative fragmentation)."""
    nodes = builtin_cluster("default")
    wl = parse_workload_spec("synthetic:count=600,seed=3", None, cluster=nodes)
    result = simulate(nodes, wl, ["default", "numalign"], samples=24)
    last_arrival = max(a.time_s for a in wl)
    for name in ("default", "numalign"):
        m = result.recorder.profile(name)
        times = [t for t, _ in m.utilisation["gpu"]]
        assert times == sorted(times)
        assert times[-1] > last_arrival  # pods still ran after the last arrival
        s = result.recorder.profile_summary(name)
        assert s["utilisation"]["gpu"]["mean"] <= s["utilisation"]["gpu"]["max"]
        assert s["utilisation"]["cpu"]["mean"] <= s["utilisation"]["cpu"]["max"]
        assert s["fragmentation"]["gpu"]["mean"] >= 0.0
        assert s["utilisation"]["cpu"]["final"] == 0.0  # every pod of the workload departed
    _check_run(result, wl, ("default", "numalign"))


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    count=st.integers(5, 90),
    seed=st.integers(0, 10_000),
    forever_every=st.sampled_from([0, 0, 3, 7]),
    samples=st.integers(1, 40),
    recreate=st.booleans(),
    profiles=st.lists(st.sampled_from(PROFILES), min_size=1, max_size=2, unique=True),
)
# every GPU in use at the end: the GPU fragmentation series had no final sample
@example(count=84, seed=7762, forever_every=3, samples=1, recreate=False, profiles=["default"])
def test_samples_and_accounting_properties(
    count: int, seed: int, forever_every: int, samples: int, recreate: bool, profiles: list[str]
) -> None:
    wl = _workload(count, seed, forever_every)
    result = simulate(SMALL, wl, profiles, samples=samples, recreate=recreate, max_retries=2,
                      recreate_delay_s=5.0)
    _check_run(result, wl, tuple(profiles))


@pytest.mark.parametrize(("spec", "recreate"), [
    ("synthetic:count=200,seed=7", False),
    ("synthetic:count=200,seed=8", True),
    ("synthetic:count=150,seed=9,load=3", True),
])
def test_overloaded_runs_balance_their_books(spec: str, recreate: bool) -> None:
    """Busy runs: pods pend, some are dropped, rejected pods are recreated - rows add up."""
    wl = parse_workload_spec(spec, None, cluster=SMALL)
    result = simulate(SMALL, wl, list(PROFILES), samples=16, recreate=recreate)
    _check_run(result, wl, PROFILES)
    totals = {k: sum(result.recorder.profile_summary(p)[k] for p in PROFILES)
              for k in ("dropped", "rejected", "pending", "retries")}
    assert totals["dropped"] + totals["pending"] > 0  # the workload does overload the cluster
    if recreate:
        assert totals["retries"] > 0


def test_time_weighted_mean_of_monotone_series_is_between_min_and_max() -> None:
    @given(st.lists(st.tuples(st.floats(0, 1e6), st.floats(0, 1)), min_size=1, max_size=30))
    def check(raw: list[tuple[float, float]]) -> None:
        pts = sorted(raw, key=lambda p: p[0])
        mean = time_weighted_mean(pts)
        values = [v for _, v in pts]
        assert min(values) - 1e-9 <= mean <= max(values) + 1e-9

    check()


def test_scheduler_cpu_time_reported() -> None:
    wl = _workload(40, 1)
    result = simulate(SMALL, wl, ["numalign"], samples=4)
    s: dict[str, Any] = result.recorder.profile_summary("numalign")
    assert s["scheduler_cpu_s"] is not None and s["scheduler_cpu_s"] >= 0.0
    rate = s["scheduled_pods_per_cpu_s"]  # pods placed (not cycles) per CPU second
    assert rate is None or rate == pytest.approx(s["scheduled"] / s["scheduler_cpu_s"], rel=1e-2)
    assert MetricsRecorder(["x"]).profile_summary("x")["scheduler_cpu_s"] is None


def test_pending_pod_is_dropped_when_its_time_is_up_even_without_departures() -> None:
    """Nothing departs (the first pods run forever): the waiting pod is dropped at its own
    departure time, not counted as pending for ever, and the simulation ends then."""
    from numalign.sim.workloads import single_container_pod

    gib = 1 << 30
    gpu = {"cpu": 8000, "memory": 64 * gib, "nvidia.com/gpu": 4}  # one NUMA node's GPUs
    hogs = [Arrival(float(i), single_container_pod("t", f"hog-{i}", gpu, gpu), None)
            for i in range(4)]  # the small cluster's 16 GPUs, for ever
    late = Arrival(10.0, single_container_pod("t", "late", gpu, gpu), 50.0)
    wl = Workload("w", (*hogs, late))
    result = simulate(SMALL, wl, ["numalign"], samples=4)
    s = result.recorder.profile_summary("numalign")
    assert (s["scheduled"], s["pending"], s["dropped"]) == (4, 0, 1)
    assert unaccounted(s) == 0
    m = result.recorder.profile("numalign")
    assert m.pending == [(10.0, 1.0), (60.0, 0.0)]
    assert m.utilisation["gpu"][-1] == (60.0, 1.0)  # the end: the late pod's time ran out
