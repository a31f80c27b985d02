"""The 2-NUMA scheduling loop's fast paths change no decision and no prefilter table.

* :meth:`NumaPrefilter.refresh` given the admission just committed copies the rows another
  node was left with by the same (replayed) admission: after every bind, the bound node's
  free amounts and top-k sums are what :meth:`NumaPrefilter.refresh_reference` computes
  from the node's state, and the memo really answers most binds;
* the sampling walk's first window (sized from the last walk) changes neither the nodes
  sampled, nor the next start index, nor whether any node fits, whatever its size.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from numa2_template import numa2_template
from numalign.pods import Pod
from numalign.scheduler import Cluster, Scheduler, get_profile
from numalign.scheduler.prefilter import NumaPrefilter
from numalign.sim.cluster import load_cluster
from numalign.sim.sources import parse_workload_spec


def _nodes(count: int) -> list[tuple[str, Any]]:
    return load_cluster(numa2_template("restricted", count // 2, count - count // 2, "rst"), "numa2")


def _pods(nodes: list[tuple[str, Any]], count: int, seed: int) -> list[Pod]:
    return [a.pod for a in parse_workload_spec(f"synthetic:count={count},seed={seed}", None, cluster=nodes)]


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), profile=st.sampled_from(["numalign", "koordinator"]))
def test_refresh_after_a_bind_leaves_the_reference_rows(seed: int, profile: str) -> None:
    nodes = _nodes(120)
    cluster = Cluster(nodes)
    sched = Scheduler(cluster, get_profile(profile))
    pre = sched.prefilter
    assert pre is not None
    ref = NumaPrefilter([cn.node for cn in cluster.nodes])
    calls = {"fresh": 0}
    real = pre._write

    def counted(i: int, cols: list[list[int]]) -> None:
        calls["fresh"] += 1
        real(i, cols)

    pre._write = counted  # type: ignore[method-assign]
    binds = 0
    for pod in _pods(nodes, 400, seed):
        out = sched.schedule(pod)
        if not out.admitted:
            continue
        assert out.placement is not None
        i = out.placement.node
        binds += 1
        ref.refresh_reference(i)
        assert np.array_equal(pre.topk[:, :, i], ref.topk[:, :, i])
        assert np.array_equal(pre.free[i], ref.free[i])
        assert pre._cols[i] == ref._cols[i]
    assert binds > 100
    assert calls["fresh"] < binds  # the memo answered some binds
    assert np.array_equal(pre.topk, ref.topk)


def test_the_memo_is_not_used_without_the_admission() -> None:
    """A refresh without the admission (a release, say) reads the node's state."""
    nodes = _nodes(20)
    cluster = Cluster(nodes)
    sched = Scheduler(cluster, get_profile("numalign"))
    pre = sched.prefilter
    assert pre is not None
    placed = [(p, o.placement.node) for p in _pods(nodes, 40, 3)
              if (o := sched.schedule(p)).admitted and o.placement is not None]
    assert placed
    pod, i = placed[-1]
    sched.release(pod, i)
    ref = NumaPrefilter([cn.node for cn in cluster.nodes])
    assert np.array_equal(pre.topk, ref.topk)
    assert np.array_equal(pre.free, ref.free)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), per_found=st.sampled_from([0.01, 0.5, 1.0, 3.0, 1e6]),
       profile=st.sampled_from(["numalign", "default"]))
def test_the_first_window_changes_no_sample(seed: int, per_found: float, profile: str) -> None:
    nodes = _nodes(300)
    pods = _pods(nodes, 260, seed)
    a = Scheduler(Cluster(nodes), get_profile(profile))
    b = Scheduler(Cluster(nodes), get_profile(profile))
    assert a.nodes_to_score < len(nodes)
    for pod in pods:
        b._scan_per_found = per_found  # another first window every time
        vec = a.cluster.request_vector(pod)
        assert vec is not None
        ia, fa = a._sample(pod, vec)
        ib, fb = b._sample(pod, vec)
        assert list(ia) == list(ib)
        assert (fa > 0) == (fb > 0)  # (how many beyond that depends on the windows)
        assert a._next_start == b._next_start
        a._next_start = b._next_start = (a._next_start + 7) % len(nodes)  # start elsewhere
        for s in (a, b):
            s.schedule(pod)
