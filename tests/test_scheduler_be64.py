"""The numalign profile's best-first walk on nodes whose Topology Manager admits everything
(best-effort, none): nodes in the same state share the exact filter's NUMA count, so a walk
over many equal nodes stops after a few exact admissions - with the same decisions as the
walk that admits every candidate it cannot rule out (the reference: the state memo off)."""

from __future__ import annotations

from typing import Any

import pytest
from benchmarks.scheduler_bench import template
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from numalign.scheduler import Cluster, Scheduler, get_profile
from numalign.scheduler import scheduler as scheduler_module
from numalign.sim.cluster import load_cluster
from numalign.sim.sources import parse_workload_spec

Decision = tuple[int | None, bool, str | None, int | None]


def _run(nodes: Any, pods: list[Any], *, by_state: bool) -> tuple[list[Decision], list[int]]:
    sched = Scheduler(Cluster(nodes), get_profile("numalign"))
    sched._by_state = by_state  # False: the reference walk, every candidate admitted
    decisions: list[Decision] = []
    checks: list[int] = []
    for pod in pods:
        out = sched.schedule(pod)
        at = out.placement
        decisions.append((None if at is None else at.node, out.admitted, out.reason,
                          None if at is None else at.numa_count))
        checks.append(out.checked)
    return decisions, checks


def _cell(nodes: int, numa: int, policy: str, pods: int, seed: int = 7) -> tuple[Any, list[Any]]:
    cluster = load_cluster(template(nodes, numa, policy), "test")
    wl = parse_workload_spec(f"synthetic:count={pods},seed={seed}", None, cluster=cluster)
    return cluster, [a.pod for a in wl]


def test_best_effort_64_numa_walk_is_short_and_unchanged() -> None:
    nodes, pods = _cell(40, 64, "best-effort", 30)
    fast, fast_checks = _run(nodes, pods, by_state=True)
    slow, slow_checks = _run(nodes, pods, by_state=False)
    assert fast == slow
    # the reference admits every equal node it cannot rule out; the memo a few per pod
    assert max(slow_checks) >= 20
    assert max(fast_checks) <= 4
    assert sum(fast_checks) * 3 <= sum(slow_checks)


@pytest.mark.parametrize("policy", ["restricted", "single-numa-node", "mixed"])
def test_aligning_policies_unchanged_and_no_affinity_errors(policy: str) -> None:
    nodes, pods = _cell(30, 8, policy, 80)
    fast, _ = _run(nodes, pods, by_state=True)
    slow, _ = _run(nodes, pods, by_state=False)
    assert fast == slow
    assert all(reason != "TopologyAffinityError" for _, _, reason, _ in fast)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), policy=st.sampled_from(["best-effort", "none", "mixed"]),
       nodes=st.integers(1, 24))
def test_same_decisions_as_the_reference_walk(seed: int, policy: str, nodes: int) -> None:
    cluster, pods = _cell(nodes, 8, policy, 40, seed)
    assert _run(cluster, pods, by_state=True)[0] == _run(cluster, pods, by_state=False)[0]


def test_memo_starting_over_keeps_decisions(monkeypatch: pytest.MonkeyPatch) -> None:
    nodes, pods = _cell(20, 8, "best-effort", 40)
    slow, _ = _run(nodes, pods, by_state=False)
    monkeypatch.setattr(scheduler_module, "STATE_MEMO_SIZE", 3)
    fast, _ = _run(nodes, pods, by_state=True)
    assert fast == slow


def test_a_node_that_changed_is_not_answered_for_by_its_old_state() -> None:
    nodes, pods = _cell(6, 8, "best-effort", 12)
    sched = Scheduler(Cluster(nodes), get_profile("numalign"))
    before = [sched._state_id(i) for i in range(6)]
    assert len(set(before)) == 1  # identical new nodes: one state
    out = sched.schedule(pods[0])
    assert out.admitted and out.placement is not None
    after = [sched._state_id(i) for i in range(6)]
    assert after[out.placement.node] != before[out.placement.node]
    assert all(after[i] == before[i] for i in range(6) if i != out.placement.node)
