"""Scheduler profiles hold resolved strategies: node scores, NUMA scores and their bounds."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numalign.pods import Container, ContainerKind, Pod, QOSClass, default_uid
from numalign.scheduler import PROFILES, Cluster, Scheduler, get_profile
from numalign.scheduler.scorers import (
    AbsoluteNumaScore,
    LeastNumaNodes,
    NumaScore,
    VolcanoNumaAware,
    balanced_allocation,
    least_allocated,
    least_numa_nodes,
    most_allocated,
)
from numalign.sim.cluster import builtin_cluster
from numalign.sim.sources import parse_workload_spec

GIB = 1 << 30


def _pod(name: str, cpu_milli: int, memory: int, guaranteed: bool = True) -> Pod:
    req = {"cpu": cpu_milli, "memory": memory}
    c = Container("main", ContainerKind.APP, requests=req, limits=dict(req) if guaranteed else {})
    qos = QOSClass.GUARANTEED if guaranteed else QOSClass.BURSTABLE
    return Pod(namespace="t", name=name, uid=default_uid("t", name), qos=qos, containers=(c,))


@pytest.fixture(scope="module")
def small_nodes() -> list[tuple[str, object]]:
    return builtin_cluster("small")  # type: ignore[return-value]


def test_profiles_hold_strategies_not_names() -> None:
    for p in PROFILES.values():
        assert callable(p.node_score)
        assert p.numa_score is None or isinstance(p.numa_score, NumaScore)
        assert p.filter is None or callable(p.filter)
    assert get_profile("numalign").numa_score == LeastNumaNodes()
    assert get_profile("volcano").numa_score == VolcanoNumaAware()
    assert get_profile("volcano").numa_score.relative  # type: ignore[union-attr]
    assert not LeastNumaNodes().relative


def _reference_least_allocated(cluster: Cluster, idx: Sequence[int], vec: np.ndarray) -> list[float]:  # type: ignore[type-arg]
    out = []
    for i in idx:
        parts = []
        for col in cluster.score_cols:
            a = int(cluster.allocatable[i, col])
            r = int(cluster.requested[i, col] + vec[col])
            parts.append(0.0 if a == 0 else min(100.0, max(0.0, (a - r) * 100.0 / a)))
        out.append(sum(parts) / 2)
    return out


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 3), st.integers(0, 20_000), st.integers(0, 64)), max_size=6),
    st.integers(0, 40_000),
    st.integers(0, 256),
)
def test_node_scores_match_their_definitions(bound: list[tuple[int, int, int]], cpu: int, mem_gib: int) -> None:
    cluster = Cluster(builtin_cluster("small"))
    for k, (node, c, m) in enumerate(bound):
        pod = _pod(f"b{k}", c, m * GIB, guaranteed=False)
        vec = cluster.request_vector(pod)
        assert vec is not None
        cluster.bind(node, pod, vec)
    vec = cluster.request_vector(_pod("p", cpu, mem_gib * GIB, guaranteed=False))
    assert vec is not None
    idx = np.arange(len(cluster.nodes), dtype=np.int64)
    least = least_allocated(cluster, idx, vec)
    assert least == pytest.approx(_reference_least_allocated(cluster, idx, vec), abs=1e-9)
    assert least + most_allocated(cluster, idx, vec) == pytest.approx([100.0] * len(idx))
    balanced = balanced_allocation(cluster, idx, vec)
    assert ((balanced >= 50.0 - 1e-9) & (balanced <= 100.0 + 1e-9)).all()


@given(st.integers(1, 64), st.data())
def test_absolute_numa_bound_is_an_upper_bound(max_numa: int, data: st.DataObject) -> None:
    """Branch and bound is exact only if no count >= fewest scores above bound(fewest)."""
    fewest = data.draw(st.integers(0, max_numa))
    count = data.draw(st.integers(fewest, max_numa))
    s = LeastNumaNodes()
    assert s.bound(fewest, max_numa) >= s.scores([count], max_numa)[0]
    assert s.scores([count], max_numa) == [least_numa_nodes(count, max_numa)]


def test_a_profile_with_most_allocated_packs(small_nodes: list[tuple[str, object]]) -> None:
    """The profile's node-score function is what ranks nodes: swap it and the choice flips."""
    spread = get_profile("default")
    pack = replace(spread, name="pack", node_score=most_allocated)
    results = {}
    for p in (spread, pack):
        cluster = Cluster(small_nodes)  # type: ignore[arg-type]
        sched = Scheduler(cluster, p)
        first = sched.schedule(_pod("first", 2000, 4 * GIB, guaranteed=False))
        second = sched.schedule(_pod("second", 2000, 4 * GIB, guaranteed=False))
        assert first.placement is not None and second.placement is not None
        results[p.name] = (first.placement.node, second.placement.node)
    assert results["pack"][0] == results["pack"][1]
    assert results["default"][0] != results["default"][1]


@dataclass(frozen=True)
class CountingLeastNuma(AbsoluteNumaScore):
    """LeastNUMANodes that records the counts it scored (a stand-in for a new strategy)."""

    seen: list[int] = field(default_factory=list, compare=False)

    def score(self, count: int, max_numa: int) -> int:
        self.seen.append(count)
        return least_numa_nodes(count, max_numa)


def test_scheduler_calls_the_profiles_numa_strategy(small_nodes: list[tuple[str, object]]) -> None:
    wl = parse_workload_spec("synthetic:count=60,seed=9", None, cluster=small_nodes)  # type: ignore[arg-type]
    strategy = CountingLeastNuma()
    custom = replace(get_profile("numalign"), name="custom", numa_score=strategy)
    a = Scheduler(Cluster(small_nodes), get_profile("numalign"))  # type: ignore[arg-type]
    b = Scheduler(Cluster(small_nodes), custom)  # type: ignore[arg-type]
    for arrival in wl:
        pa, pb = a.schedule(arrival.pod), b.schedule(arrival.pod)
        assert (pa.placement, pa.admitted) == (pb.placement, pb.admitted)
    assert strategy.seen and any(c > 0 for c in strategy.seen)


@dataclass
class FavourLast(NumaScore):
    """A relative score: 100 for the last candidate collected, 0 for the others."""

    seen: list[list[int]] = field(default_factory=list)
    relative = True

    def scores(self, counts: Sequence[int], max_numa: int) -> list[int]:
        self.seen.append(list(counts))
        return [0] * (len(counts) - 1) + [100]

    def bound(self, fewest: int, max_numa: int) -> int:
        return 100


def test_relative_numa_strategy_scores_all_collected_candidates(small_nodes: list[tuple[str, object]]) -> None:
    """A relative strategy is asked once with every feasible candidate; its weighted score
    decides between them."""
    strategy = FavourLast()
    p = replace(get_profile("numalign"), name="favour-last", numa_score=strategy, numa_weight=1000)
    cluster = Cluster(small_nodes)  # type: ignore[arg-type]
    sched = Scheduler(cluster, p)
    pod = _pod("wide", 4000, 8 * GIB)
    assert p.filter is not None
    passing = [i for i, cn in enumerate(cluster.nodes) if p.filter(cn.node, pod).passed]
    assert len(passing) >= 2
    vec = cluster.request_vector(pod)
    assert vec is not None
    node_scores = least_allocated(cluster, np.arange(len(cluster.nodes), dtype=np.int64), vec)
    placement, _, _ = sched.select(pod)
    assert placement is not None
    assert len(strategy.seen) == 1 and len(strategy.seen[0]) == len(passing)
    # the last candidate in best-first order: the lowest node score (ties: the highest index)
    last = max(passing, key=lambda i: (-node_scores[i], i))
    assert placement.node == last
    assert placement.score == pytest.approx(float(node_scores[last]) + 100 * 1000)
