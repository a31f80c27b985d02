"""The grouped walk's array steps (:mod:`numalign.scheduler.group_arrays`) against the plain
computations: both ways of finding each group's first candidate against sorting every
candidate in walk order, the walk's last candidate, the drop of groups known to refuse (and the
tables' refusal arrays it reads), and the grouped walk with both shortcuts taken on every walk
against the node-by-node walk."""

from __future__ import annotations

import random
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from numa2_template import numa2_template
from numalign.pods import Pod, parse_pods
from numalign.scheduler import Cluster, Scheduler, get_profile, group_arrays
from numalign.scheduler import scheduler as scheduler_module
from numalign.scheduler.filters import FilterResult
from numalign.scheduler.group_arrays import (
    first_of_each,
    heads_by_group,
    heads_by_sorting,
    walk_last,
    without_refused,
)
from numalign.scheduler.node_groups import KEYS_SIZE, Answer, NodeGroups
from numalign.sim.cluster import builtin_template, load_cluster
from numalign.sim.sources import parse_workload_spec

GROUPED = ("koordinator", "nrt-snn", "nrt-snn-least-numa", "nrt-snn-most-allocated", "nrt-snn-balanced")
NODES = load_cluster(builtin_template("small"), "arrays")
POOL: list[Pod] = [a.pod for a in parse_workload_spec("synthetic:count=200,seed=5", None, cluster=NODES)]


@st.composite
def candidates(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n = draw(st.integers(1, 60))
    idx = np.array(draw(st.lists(st.integers(0, 500), min_size=n, max_size=n, unique=True)), dtype=np.int64)
    values = st.sampled_from([0.0, 12.5, 12.5, 33.25, 50.0, 99.9, 100.0, float("nan")])
    scores = np.array(draw(st.lists(values | st.floats(0, 100), min_size=n, max_size=n)), dtype=np.float64)
    pool = draw(st.lists(st.integers(0, KEYS_SIZE - 1), min_size=1, max_size=8, unique=True))
    numbers = np.array(draw(st.lists(st.sampled_from(pool), min_size=n, max_size=n)), dtype=np.int64)
    return idx, scores, numbers


def _walk_order_heads(idx: np.ndarray, scores: np.ndarray, numbers: np.ndarray) -> tuple[list[int], int]:
    """Every candidate in walk order, in Python: score descending (NaN last), node index
    ascending; each key number's first position, and the last candidate's key number."""
    order = sorted(range(idx.size), key=lambda j: (np.isnan(scores[j]), -scores[j] if not np.isnan(scores[j]) else 0,
                                                   int(idx[j])))
    seen: dict[int, int] = {}
    for j in order:
        seen.setdefault(int(numbers[j]), j)
    return list(seen.values()), int(numbers[order[-1]])


@settings(max_examples=120, deadline=None)
@given(candidates())
def test_both_ways_give_the_first_candidate_of_each_group_in_walk_order(arrays: tuple[np.ndarray, ...]) -> None:
    idx, scores, numbers = arrays
    heads, last = _walk_order_heads(idx, scores, numbers)
    for way in (heads_by_sorting, heads_by_group):
        got_scores, got_idx, got_numbers, got_last = way(idx, scores, numbers)
        np.testing.assert_array_equal(got_scores, scores[heads])
        assert got_idx.tolist() == idx[heads].tolist(), way.__name__
        assert got_numbers.tolist() == numbers[heads].tolist(), way.__name__
        assert got_last == last, way.__name__
    assert walk_last(idx, scores, numbers) == last


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, KEYS_SIZE - 1), min_size=1, max_size=80))
def test_first_of_each_is_uniques_first_index(numbers: list[int]) -> None:
    arr = np.array(numbers, dtype=np.int64)
    assert first_of_each(arr).tolist() == sorted(np.unique(arr, return_index=True)[1].tolist())


@settings(max_examples=80, deadline=None)
@given(candidates(), st.data())
def test_without_refused_keeps_exactly_the_others(arrays: tuple[np.ndarray, ...], data: st.DataObject) -> None:
    idx, scores, numbers = arrays
    refusing = set(data.draw(st.lists(st.sampled_from(sorted(set(numbers.tolist()))), max_size=4)))
    refused = np.array([int(x) in refusing for x in numbers], dtype=np.bool_)
    got = without_refused(idx, scores, numbers, refused)
    if not refusing:
        assert got is None
        return
    assert got is not None
    keep = [j for j in range(idx.size) if int(numbers[j]) not in refusing]
    assert got[0].tolist() == idx[keep].tolist() and got[2].tolist() == numbers[keep].tolist()
    np.testing.assert_array_equal(got[1], scores[keep])


def test_key_numbers_fit_the_radix_sort() -> None:
    """group_arrays sorts key numbers as uint16: they must stay below 2^16."""
    assert KEYS_SIZE <= 1 << 16


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 300), st.booleans(), st.booleans()), max_size=40),
       st.lists(st.integers(0, 400), min_size=1, max_size=30), st.integers(64, 2000))
def test_refusal_arrays_are_the_tables_answers(steps: list[tuple[int, bool, bool]], asked: list[int],
                                               cells: int) -> None:
    """After answers kept (some naming the pod, so not kept) and tables dropped when the array
    cap is reached, :meth:`NodeGroups.refused` says exactly which key numbers hold a refusal."""
    groups = NodeGroups(Cluster(NODES[:2]), lambda node: 0)
    pod = POOL[0]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("numalign.scheduler.node_groups.ARRAY_CELLS", cells)
        for number, passed, names_pod in steps:
            table = groups.table(pod.shape, ())
            reason = "" if passed else (f"pod {pod.key} is already admitted" if names_pod else "no NUMA cpu")
            groups.remember(table, number, Answer(FilterResult(passed, 1 if passed else 0, reason)), pod)
        table = groups.table(pod.shape, ())
        got = groups.refused(table, np.array(asked, dtype=np.int64)).tolist()
    want = [n in table.answers and not table.answers[n].result.passed for n in asked]
    assert got == want


@pytest.mark.parametrize("profile", GROUPED)
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), nodes_to_score=st.sampled_from([None, 3]), look=st.sampled_from([1, 2, 64]))
def test_grouped_walk_with_every_shortcut_decides_like_the_node_by_node_walk(
        profile: str, seed: int, nodes_to_score: int | None, look: int) -> None:
    """Known refusals dropped and the heads found by group on every walk (not only on walks
    over thousands of candidates), and without a NUMA score the first passing candidate looked
    for among the best ``look`` first: the same placements, reasons and node states as the
    node-by-node walk, over random pods and releases."""
    rng = random.Random(seed)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(scheduler_module, "DROP_FROM", 0)
        mp.setattr(scheduler_module, "FIRST_PASSING_LOOK", look)
        mp.setattr(group_arrays, "HEADS_BY_GROUP_FROM", 0)
        grouped = Scheduler(Cluster(NODES), get_profile(profile), nodes_to_score)
        plain = Scheduler(Cluster(NODES), replace(get_profile(profile), node_key=None), nodes_to_score)
        running: list[tuple[int, Pod]] = []
        for step in range(60):
            if running and rng.random() < 0.3:
                node, pod = running.pop(rng.randrange(len(running)))
                grouped.release(pod, node)
                plain.release(pod, node)
            pod = POOL[rng.randrange(len(POOL))].replace(uid=f"u{step}", name=f"p{step}")
            a, b = grouped.schedule(pod), plain.schedule(pod)
            assert (a.placement, a.admitted, a.reason) == (b.placement, b.admitted, b.reason), (profile, seed, step)
            if a.admitted and a.placement is not None:
                running.append((a.placement.node, pod))
    for x, y in zip(grouped.cluster.nodes, plain.cluster.nodes, strict=True):
        assert x.node.state.to_dict() == y.node.state.to_dict()


def _cpu_pod(step: int, cpu: int) -> Pod:
    return parse_pods({"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": f"p{step}", "namespace": "ns", "uid": f"u{step}"},
                       "spec": {"containers": [{"name": "c", "resources": {
                           "limits": {"cpu": str(cpu), "memory": "1Gi"}}}]}})[0]


_SIZES = [1, 2, 3, 1, 2, 3, 4, 5] + [10] * 6 + [1, 2, 3, 4] + [10, 9] * 5


@pytest.mark.parametrize("profile", ["nrt-snn", "nrt-snn-least-numa"])
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), look=st.sampled_from([1, 2, 3, 64]))
def test_walk_over_the_rest_decides_like_the_node_by_node_walk(profile: str, seed: int, look: int) -> None:
    """single-numa-node nodes first, restricted ones after, a sample of 2: a pod wider than a
    NUMA node is refused by every sampled single-numa-node node (the NRT filter passes it on
    the others) and the walk goes on over every other node, with refusals known and, without a
    NUMA score, the first passing candidate looked for among the best ``look``: the same
    placements, reasons and states as the node-by-node walk, over random pods and releases."""
    nodes = load_cluster(numa2_template("restricted", 3, 12, "rst"), "rest")
    order = [n for n in nodes if n[0].startswith("snn")] + [n for n in nodes if not n[0].startswith("snn")]
    rng = random.Random(seed)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(scheduler_module, "DROP_FROM", 0)
        mp.setattr(scheduler_module, "FIRST_PASSING_LOOK", look)
        grouped = Scheduler(Cluster(order), get_profile(profile), 2)
        plain = Scheduler(Cluster(order), replace(get_profile(profile), node_key=None), 2)
        running: list[tuple[int, Pod]] = []
        rest_walks = 0
        for step in range(60):
            if running and rng.random() < 0.15:
                node, pod = running.pop(rng.randrange(len(running)))
                grouped.release(pod, node)
                plain.release(pod, node)
            # small pods first (single-numa-node nodes in several states: groups not asked yet),
            # then wide ones (the restricted nodes fill up and come after those in walk order)
            pod = _cpu_pod(step, _SIZES[step] if step < len(_SIZES) else rng.choice([1, 2, 3, 9, 10]))
            a, b = grouped.schedule(pod), plain.schedule(pod)
            assert (a.placement, a.admitted, a.reason) == (b.placement, b.admitted, b.reason), (profile, seed, step)
            rest_walks += a.placement is not None and not a.placement.name.startswith("snn") and pod.containers[
                0].requests["cpu"] > 8000
            if a.admitted and a.placement is not None:
                running.append((a.placement.node, pod))
    assert rest_walks > 0  # pods wider than a NUMA node went on past the sample
    for x, y in zip(grouped.cluster.nodes, plain.cluster.nodes, strict=True):
        assert x.node.state.to_dict() == y.node.state.to_dict()

