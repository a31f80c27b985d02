"""The prefilter's and the exact walk's fast paths change no decision.

* :meth:`NumaPrefilter.refresh` (only changed columns, from ``numa_free_columns``) leaves the
  same top-k sums and free amounts as :meth:`NumaPrefilter.refresh_reference` (``numa_free``);
* :meth:`NumaPrefilter.passing` (per-shape thresholds) and :meth:`NumaPrefilter.passing_range`
  (runs of one machine group) answer as :meth:`NumaPrefilter.passing_reference`, with runs and
  with groups interleaved too much for runs;
* the numalign profile binds the same pods to the same nodes, with the same NUMA counts,
  scores and reasons, as a scheduler whose prefilter and exact filter take the reference
  paths every time.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from numalign.node.usage import free_layout, numa_free, numa_free_columns
from numalign.pods import Pod
from numalign.scheduler import Cluster, Scheduler, filters, get_profile
from numalign.scheduler.prefilter import NumaPrefilter
from numalign.sim.cluster import load_cluster
from numalign.sim.sources import parse_workload_spec

_KUBELET = {"topologyManagerPolicy": "single-numa-node", "cpuManagerPolicy": "static",
            "reservedSystemCPUs": "0,32", "memoryManagerPolicy": "Static",
            "systemReserved": {"memory": "1Gi"},
            "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1124Mi"}}]}


def _machine(numa: int, policy: str, scope: str = "container", name: str = "") -> dict[str, Any]:
    per_socket = max(1, numa // 2)
    return {
        "name": name or f"numa{numa}-{policy}-{scope}",
        "shape": {"sockets": 2, "numaPerSocket": per_socket, "coresPerNuma": 32 // numa * 2,
                  "threadsPerCore": 2, "memoryPerNuma": f"{512 // numa}Gi",
                  "hugepages1GiPerNuma": f"{64 // numa}Gi", "gpusPerNuma": max(1, 8 // numa),
                  "devicesPerNuma": {"rdma/hca": max(1, 8 // numa)}},
        "kubelet": {**_KUBELET, "topologyManagerPolicy": policy, "topologyManagerScope": scope},
    }


def _mixed(nodes_per_entry: int) -> list[tuple[str, Any]]:
    """2- and 8-NUMA nodes, single-numa-node, restricted (both scopes) and best-effort, in
    contiguous runs per machine."""
    entries = [
        (_machine(2, "single-numa-node"), "snn2"),
        (_machine(2, "restricted", "pod"), "res2"),
        (_machine(8, "single-numa-node"), "snn8"),
        (_machine(8, "restricted"), "res8"),
        (_machine(2, "best-effort"), "be2"),
    ]
    return load_cluster({"nodes": [{"machine": m, "count": nodes_per_entry, "namePrefix": p}
                                   for m, p in entries]}, "fast")


def _interleaved(entries: int) -> list[tuple[str, Any]]:
    """Many machines of two node policies, alternating: more runs than the run walk takes."""
    out = []
    for k in range(entries):
        policy, scope = (("single-numa-node", "container"), ("restricted", "pod"))[k % 2]
        out.append({"machine": _machine(2, policy, scope, name=f"m{k}"), "count": 2,
                    "namePrefix": f"n{k}-"})
    return load_cluster({"nodes": out}, "fast")


def _pods(nodes: list[tuple[str, Any]], count: int, seed: int) -> list[Pod]:
    wl = parse_workload_spec(f"synthetic:count={count},seed={seed}", None, cluster=nodes)
    return [a.pod for a in wl]


def _reference_scheduler(cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> Scheduler:
    """The numalign profile with every fast path replaced by its reference."""
    sched = Scheduler(cluster, get_profile("numalign"))
    pre = sched.prefilter
    assert pre is not None
    pre.refresh = pre.refresh_reference  # type: ignore[method-assign]
    pre.passing = pre.passing_reference  # type: ignore[method-assign]
    pre.passing_range = (  # type: ignore[method-assign]
        lambda pod, a, b: pre.passing_reference(pod, np.arange(a, b))
    )

    class NoUniform(dict[Any, Any]):
        def get(self, key: Any, default: Any = None) -> Any:
            return None

    sched.numa_scoring.bound_uniform = NoUniform()
    sched.numa_scoring.score_of_count = NoUniform()
    return sched


def _run(sched: Scheduler, pods: list[Pod]) -> list[tuple[Any, ...]]:
    out = []
    for pod in pods:
        o = sched.schedule(pod)
        p = o.placement
        out.append((pod.uid, o.admitted, o.reason, None if p is None else (p.node, p.numa_count, p.score)))
    return out


@pytest.mark.parametrize("make, nodes, pods, seed", [
    (_mixed, 60, 700, 7),
    (_interleaved, 80, 400, 3),
])
def test_numalign_binds_as_the_reference_paths(make: Any, nodes: int, pods: int, seed: int,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    machines = make(nodes)
    workload = _pods(machines, pods, seed)
    fast = Scheduler(Cluster(machines), get_profile("numalign"))
    got = _run(fast, workload)
    monkeypatch.setattr(filters, "_numa_count", lambda node, pod, result, planned: len(
        filters.pod_numa_nodes(node.machine, planned, pod.uid)))
    ref = _reference_scheduler(Cluster(machines), monkeypatch)
    want = _run(ref, workload)
    assert got == want
    assert sum(1 for g in got if g[1]) > pods // 4  # the run places pods (and so binds)
    # and the fast prefilter's tables are the reference's
    assert fast.prefilter is not None and ref.prefilter is not None
    assert np.array_equal(fast.prefilter.topk, ref.prefilter.topk)
    assert np.array_equal(fast.prefilter.free, ref.prefilter.free)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), placed=st.integers(1, 300))
def test_refresh_and_free_columns_agree_with_numa_free(seed: int, placed: int) -> None:
    machines = _mixed(8)
    cluster = Cluster(machines)
    sched = Scheduler(cluster, get_profile("numalign"))
    for pod in _pods(machines, placed, seed):
        sched.schedule(pod)
    pre = sched.prefilter
    assert pre is not None
    ref = NumaPrefilter([cn.node for cn in cluster.nodes])
    for i, cn in enumerate(cluster.nodes):
        ref.refresh_reference(i)
        cols = numa_free_columns(cn.node, free_layout(cn.node.machine, pre.col, pre.slots))
        for s, per in enumerate(numa_free(cn.node).values()):
            for res, amount in per.items():
                assert cols[pre.col[res]][s] == amount
    assert np.array_equal(pre.topk, ref.topk)
    assert np.array_equal(pre.free, ref.free)


@pytest.mark.parametrize("make", [_mixed, _interleaved])
def test_passing_and_passing_range_answer_as_the_reference(make: Any) -> None:
    machines = make(40)
    cluster = Cluster(machines)
    sched = Scheduler(cluster, get_profile("numalign"))
    pods = _pods(machines, 500, 5)
    for pod in pods[:250]:
        sched.schedule(pod)
    pre = sched.prefilter
    assert pre is not None
    n = len(cluster.nodes)
    rng = np.random.default_rng(1)
    dropped = 0
    for pod in pods[250:]:
        everyone = np.arange(n)
        want = pre.passing_reference(pod, everyone)
        dropped += int((~want).sum())
        assert np.array_equal(pre.passing(pod, everyone), want)
        some = np.sort(rng.choice(n, size=n // 3, replace=False))
        assert np.array_equal(pre.passing(pod, some), pre.passing_reference(pod, some))
        a = int(rng.integers(0, n))
        b = int(rng.integers(a, n + 1))
        assert np.array_equal(pre.passing_range(pod, a, b), want[a:b])
    assert dropped > 0  # the condition prunes here
