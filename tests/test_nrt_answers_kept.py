"""What the ``nrt-snn`` profiles and ``volcano`` keep between pods changes no answer.

* The NRT filter, zone scores and LeastNUMANodes' score and bound are kept with a node state's zones
  (:func:`numalign.node.usage.zones_of`), per scope and pod requests: on random node states
  and pods they answer what the plain computations over freshly built zones answer.
* A plan reused at bind (the node's plan cache: nodes in the same state share their
  admissions) is the admission the engine computes: every profile that admits after binding
  places and admits the same pods, with the same results and node states, with the cache and
  with the engine asked every time.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from numa2_template import numa2_template
from numalign.engine.policies import Policy, Scope
from numalign.inputs.quantity import CPU, is_memory_resource
from numalign.node.admission import Node
from numalign.node.plan_cache import PlanCache
from numalign.node.usage import _numa_amounts
from numalign.pods import Pod, QOSClass, effective_pod_requests
from numalign.scheduler import Cluster, Scheduler, get_profile, nrt_scores
from numalign.scheduler.filters import nrt_snn_filter
from numalign.scheduler.nrt_scores import NumaZone
from numalign.scheduler.scorers import NrtLeastNumaNodes, NrtZoneScore
from numalign.sim.cluster import builtin_template, load_cluster
from numalign.sim.sources import parse_workload_spec


def _nodes() -> Any:
    """The built-in small cluster and 2-NUMA nodes under single-numa-node (both scopes) and
    restricted."""
    small = builtin_template("small")["nodes"]
    rst, snn = numa2_template("restricted", 3, 4, "rst")["nodes"]
    machine = dict(snn["machine"])
    pod_scope = {"machine": {**machine, "name": "numa2-snn-pod",
                             "kubelet": {**machine["kubelet"], "topologyManagerScope": "pod"}},
                 "count": 4, "namePrefix": "snnpod"}
    return load_cluster({"nodes": [*small, rst, snn, pod_scope]}, "kept")


NODES = _nodes()
POOL: list[Pod] = [a.pod for a in parse_workload_spec("synthetic:count=300,seed=11", None, cluster=NODES)]


def _fresh_zones(node: Node) -> list[NumaZone]:
    """The published zones built from the node's state now, nothing remembered."""
    m = node.machine
    costs = m.distances if m.has_distances else {}
    out = _numa_amounts(m, node.state, node.reserved_cpus)
    return [NumaZone(nid, {r: (v * 1000 if r == "cpu" else v) for r, v in z.available.items()},
                     dict(costs.get(nid, {}))) for nid, z in out.items()]


def _affine(res: str) -> bool:
    return res == CPU or is_memory_resource(res)


def _fit(req: dict[str, int], avail: dict[int, dict[str, int]], qos: QOSClass) -> int | None:
    """scheduler-plugins' single-NUMA fit of one request, written out plainly."""
    mask = set(avail)
    for res, qty in req.items():
        if qty <= 0 or (qos is not QOSClass.GUARANTEED and _affine(res)):
            continue
        zones = {i for i, a in avail.items() if res in a}
        if not zones:
            if _affine(res):
                return None
            continue
        mask &= {i for i in zones if avail[i][res] >= qty}
        if not mask:
            return None
    return min(mask) if mask else None


def _units(req: dict[str, int]) -> dict[str, int]:
    return {r: (-(-v // 1000) if r == "cpu" else v) for r, v in req.items()}


def _plain_filter(node: Node, pod: Pod) -> tuple[bool, int, str]:
    """The NRT filter over freshly computed available amounts (each call its own copies)."""
    if node.node_policy is not Policy.SINGLE_NUMA_NODE:
        return True, 0, ""
    if pod.qos is QOSClass.BEST_EFFORT and not any(not _affine(r) for c in pod.containers for r in c.requests):
        return True, 0, ""
    avail = {nid: dict(z.available) for nid, z in _numa_amounts(node.machine, node.state, node.reserved_cpus).items()}
    if node.node_scope is Scope.POD:
        if _fit(_units(effective_pod_requests(pod)), avail, pod.qos) is None:
            return False, 0, "cannot align pod"
        return True, 1, ""
    for c in pod.init_containers:
        if _fit(_units(dict(c.requests)), avail, pod.qos) is None:
            return False, 0, f"cannot align init container {c.name}"
    for c in pod.app_containers:
        req = _units(dict(c.requests))
        numa = _fit(req, avail, pod.qos)
        if numa is None:
            return False, 0, f"cannot align container {c.name}"
        for res, qty in req.items():
            if res in avail[numa] and (pod.qos is QOSClass.GUARANTEED or not _affine(res)):
                avail[numa][res] -= qty
    return True, 1, ""


def _plain_zone_score(strategy: str, node: Node, pod: Pod) -> int:
    if pod.qos is not QOSClass.GUARANTEED:
        return nrt_scores.MAX_NODE_SCORE
    if node.node_policy is not Policy.SINGLE_NUMA_NODE:
        return 0
    fn = nrt_scores.ZONE_STRATEGIES[strategy]
    zones = _fresh_zones(node)
    if node.node_scope is Scope.POD:
        return nrt_scores.pod_scope_score(effective_pod_requests(pod), zones, fn, {})
    return nrt_scores.container_scope_score([dict(c.requests) for c in pod.containers], zones, fn, {})


def _plain_least_numa_bound(node: Node, pod: Pod) -> int | None:
    if NrtLeastNumaNodes().pod_bound(pod) is None:
        return None
    zones = _fresh_zones(node)
    if node.node_scope is Scope.POD:
        fewest = nrt_scores.fewest_zones(pod.qos, zones, effective_pod_requests(pod))
    else:
        fewest = max(nrt_scores.fewest_zones(pod.qos, zones, dict(c.requests)) for c in pod.containers)
    return nrt_scores.normalize_score(max(1, fewest), True)


def _plain_least_numa_score(node: Node, pod: Pod) -> int:
    if pod.qos is not QOSClass.GUARANTEED:
        return nrt_scores.MAX_NODE_SCORE
    zones = _fresh_zones(node)
    if node.node_scope is Scope.POD:
        return nrt_scores.least_numa_pod_scope_score(pod.qos, effective_pod_requests(pod), zones)
    return nrt_scores.least_numa_container_scope_score(pod.qos, [dict(c.requests) for c in pod.containers], zones)


def _fill(nodes: list[Node], data: st.DataObject, tag: str) -> None:
    for step in range(data.draw(st.integers(0, 14))):
        n = nodes[data.draw(st.integers(0, len(nodes) - 1))]
        if n.state.pods and data.draw(st.integers(0, 3)) == 0:
            n.release(data.draw(st.sampled_from(sorted(n.state.pods))))
        else:
            base = POOL[data.draw(st.integers(0, len(POOL) - 1))]
            n.admit(base.replace(uid=f"{tag}{step}", name=f"{tag}{step}"))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_kept_nrt_answers_are_the_plain_ones(data: st.DataObject) -> None:
    """On random node states (admissions and releases; nodes of one machine often alike) and
    random pods, asked twice (the second answer comes from what was kept): the filter, the
    three zone scores and LeastNUMANodes' score and node bound equal the plain computations."""
    nodes = [Node(m) for _, m in NODES]
    _fill(nodes, data, "k")
    scores = {s: NrtZoneScore(s) for s in nrt_scores.ZONE_STRATEGIES}
    least = NrtLeastNumaNodes()
    for _ in range(data.draw(st.integers(1, 4))):
        pod = POOL[data.draw(st.integers(0, len(POOL) - 1))]
        pod = pod.replace(uid=f"asked-{data.draw(st.integers(0, 9))}")  # a new pod object
        for n in nodes:
            want = _plain_filter(n, pod)
            for _ in range(2):
                got = nrt_snn_filter(n, pod)
                assert (got.passed, got.numa_count, got.reason) == want, (n.machine.name, pod.shape)
            if not want[0]:
                continue
            for _ in range(2):
                for name, score in scores.items():
                    assert score.score_on(n, pod, 1, 2) == _plain_zone_score(name, n, pod), (name, pod.shape)
                assert least.node_bound(n, pod) == _plain_least_numa_bound(n, pod)
                assert least.score_on(n, pod, 1, 2) == _plain_least_numa_score(n, pod)


ADMIT_AFTER_BIND = ("nrt-snn", "nrt-snn-least-numa", "nrt-snn-most-allocated", "nrt-snn-balanced", "volcano")


def _sequence(profile: str, seed: int, cached: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[list[Any], list[Any], int]:
    rng = random.Random(seed)
    with monkeypatch.context() as m:
        if not cached:
            m.setattr(PlanCache, "get", lambda self, key: None)
        sched = Scheduler(Cluster(NODES), get_profile(profile))
        running: list[tuple[int, Pod]] = []
        seen = []
        for step in range(50):
            if running and rng.random() < 0.25:
                node, gone = running.pop(rng.randrange(len(running)))
                sched.release(gone, node)
            # a few shapes only, so that nodes meet in the same state with the same shape (the
            # first pods: one shape on empty nodes, which are alike)
            base = POOL[0] if step < 3 else POOL[rng.randrange(8)]
            pod = base.replace(uid=f"u{step}", name=f"p{step}")
            out = sched.schedule(pod)
            seen.append((out.placement, out.admitted, out.reason, out.result))
            if out.admitted and out.placement is not None:
                running.append((out.placement.node, pod))
        states = [n.node.state.to_dict() for n in sched.cluster.nodes]
        return seen, states, sched.cluster.plan_cache.hits


@pytest.mark.parametrize("profile", ADMIT_AFTER_BIND)
@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1))
def test_plans_reused_at_bind_are_fresh_admissions(profile: str, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    fast, fast_states, hits = _sequence(profile, seed, True, monkeypatch)
    slow, slow_states, none = _sequence(profile, seed, False, monkeypatch)
    assert hits > 0 and none == 0  # the cache was really used, and really not
    assert fast == slow
    assert fast_states == slow_states
