"""The plan cache (admissions replayed between nodes in the same situation) changes no decision:
every scheduling run, with departures and node rejections, gives the same placements, results
and node states as the engine asked every time."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from numa2_template import numa2_template
from numalign.node.admission import Node, PodResult
from numalign.node.plan_cache import PlanCache
from numalign.node.state import NodeState
from numalign.pods import Pod
from numalign.sim.cluster import builtin_cluster, load_cluster
from numalign.sim.runner import SimResult, simulate
from numalign.sim.sources import parse_workload_spec


def _template_2numa() -> dict[str, Any]:
    return numa2_template("best-effort", 6, 6, "be")


def _run(nodes: Any, workload: Any, profile: str, cached: bool, monkeypatch: pytest.MonkeyPatch) -> SimResult:
    with monkeypatch.context() as m:
        if not cached:
            m.setattr(PlanCache, "get", lambda self, key: None)
        return simulate(nodes, workload, [profile], keep_placements=True)


def _states(result: SimResult, profile: str) -> list[Any]:
    return [(n.name, n.node.state) for n in result.clusters[profile].nodes]


def _placements(result: SimResult, profile: str) -> list[tuple[str, str, str]]:
    return [(kind, node, pod.uid) for kind, node, pod in result.placements[profile]]


def _summary(result: SimResult, profile: str) -> dict[str, Any]:
    out = dict(result.recorder.summary()["profiles"][profile])
    return {k: v for k, v in out.items() if not any(w in k for w in ("time", "latency", "per_s", "cpu_s", "wall"))}


CASES = [
    ("default", "default"), ("default", "numalign"), ("small", "numalign"), ("small", "default"),
    ("numa2", "default"), ("numa2", "numalign"), ("default", "koordinator"), ("default", "nrt-snn"),
]


@pytest.mark.parametrize(("cluster", "profile"), CASES)
def test_cached_runs_decide_exactly_like_the_engine(cluster: str, profile: str,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    nodes = load_cluster(_template_2numa(), "numa2") if cluster == "numa2" else builtin_cluster(cluster)
    count = 80 if cluster == "default" else 60
    workload = parse_workload_spec(f"synthetic:count={count},seed=5", None, cluster=nodes)
    fast = _run(nodes, workload, profile, True, monkeypatch)
    slow = _run(nodes, workload, profile, False, monkeypatch)
    assert fast.clusters[profile].plan_cache.hits > 0  # the cache was really used
    assert slow.clusters[profile].plan_cache.hits == 0
    assert _placements(fast, profile) == _placements(slow, profile)
    assert _summary(fast, profile) == _summary(slow, profile)
    assert _states(fast, profile) == _states(slow, profile)
    for (_, a), (_, b) in zip(_states(fast, profile), _states(slow, profile), strict=True):
        assert a.to_dict() == b.to_dict()


_NODES = builtin_cluster("small")
_POOL: list[Pod] = [a.pod for a in parse_workload_spec("synthetic:count=80,seed=9", None, cluster=_NODES)]


Ops = list[tuple[int, int]]  # (pod in the pool, release the n-th admitted pod first if > 0)
#: a few small kinds (Burstable, Guaranteed with and without devices, 3 containers), so that
#: random sequences meet in equal - and in nearly equal - states
_KINDS = (0, 1, 2, 6, 9, 14)
_OPS = st.lists(st.tuples(st.sampled_from(_KINDS), st.integers(0, 3)), min_size=1, max_size=12)


def _step(node: Node, ops: Ops, tag: str) -> Iterator[tuple[PodResult, NodeState | None]]:
    for step, (i, release) in enumerate(ops):
        if release and len(node.state.pods) >= release:
            node.release(list(node.state.pods)[release - 1])
        pod = _POOL[i].replace(uid=f"{tag}-{step}", name=f"{tag}-{step}")
        result, planned = node.plan(pod)
        yield result, planned
        if planned is not None:
            node.commit(planned)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_OPS, min_size=1, max_size=4), _OPS, st.integers(0, len(_NODES) - 1))
def test_replayed_plans_equal_computed_ones(warm_ops: list[Ops], ops: Ops, which: int) -> None:
    """Warm nodes fill a cache with random admissions and releases; a node using that cache
    and a node without one then see the same sequence: every result and state is the same."""
    machine = _NODES[which][1]
    cache = PlanCache()
    for k, w in enumerate(warm_ops):
        warm = Node(machine)
        warm.plan_cache = cache
        for _ in _step(warm, w, f"warm{k}"):
            pass
    fast = Node(machine)
    fast.plan_cache = cache
    slow = Node(machine)
    for (r_fast, s_fast), (r_slow, s_slow) in zip(_step(fast, ops, "p"), _step(slow, ops, "p"), strict=True):
        assert r_fast == r_slow
        assert s_fast == s_slow
        if s_fast is not None and s_slow is not None:
            assert s_fast.to_dict() == s_slow.to_dict()
    assert fast.state == slow.state
