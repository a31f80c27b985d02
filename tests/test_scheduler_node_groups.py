"""The scheduler's walk over groups of alike nodes (profiles with a node key: ``koordinator`` and
the ``nrt-snn`` variants) decides exactly like the node-by-node walk it replaces, and the caches
under it (NRT zone amounts by :func:`zones_key`, LeastNUMANodes' combinations) answer what the
plain computations answer.

The reference is the same profile without its node key (``Profile.node_key=None``): the
scheduler then asks the filter and the NUMA score on every candidate, in walk order."""

from __future__ import annotations

import random
import statistics
from dataclasses import replace
from itertools import combinations
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from numa2_template import numa2_template
from numalign.engine.policies import Scope
from numalign.node.admission import Node
from numalign.node.plan_cache import PlanCache, known_decision_key
from numalign.node.usage import _numa_amounts, numa_amounts, zones_key
from numalign.pods import Pod, QOSClass
from numalign.scheduler import Cluster, Scheduler, get_profile
from numalign.scheduler.filters import nrt_snn_filter, nrt_snn_refuses_always
from numalign.scheduler.node_groups import NodeGroups, group_heads
from numalign.scheduler.nrt_scores import (
    NumaZone,
    exact_variance,
    fewest_zones,
    find_suitable_combination,
    numa_nodes_required,
)
from numalign.scheduler.scorers import nrt_zones, published_zones
from numalign.sim.cluster import builtin_template, load_cluster
from numalign.sim.sources import parse_workload_spec

GROUPED = ("koordinator", "nrt-snn", "nrt-snn-least-numa", "nrt-snn-most-allocated", "nrt-snn-balanced")


def _nodes() -> Any:
    """Mixed machines and policies: the built-in small cluster (GPU and CPU nodes, Static
    managers), 2-NUMA nodes under restricted and single-numa-node, and 2-NUMA nodes without the
    Static memory manager (where the koordinator mode's own NUMA rules run)."""
    small = builtin_template("small")["nodes"]
    numa2 = numa2_template("restricted", 5, 5, "rst")["nodes"]
    plain = numa2_template("best-effort", 4, 4, "bep")["nodes"]
    for group in plain:
        machine = dict(group["machine"])
        kubelet = {k: v for k, v in machine["kubelet"].items() if k not in ("reservedMemory", "systemReserved")}
        machine["kubelet"] = {**kubelet, "memoryManagerPolicy": "None"}
        group.update(machine={**machine, "name": machine["name"] + "-nomem"},
                     namePrefix=group["namePrefix"] + "-nomem")
    return load_cluster({"nodes": [*small, *numa2, *plain]}, "groups")


NODES = _nodes()
POOL: list[Pod] = [a.pod for a in parse_workload_spec("synthetic:count=400,seed=3", None, cluster=NODES)]


def _run(profile: str, seed: int, nodes_to_score: int | None, steps: int) -> None:
    """Both walks, the same pods and releases, every answer and every node state compared."""
    rng = random.Random(seed)
    grouped = Scheduler(Cluster(NODES), get_profile(profile), nodes_to_score)
    plain = Scheduler(Cluster(NODES), replace(get_profile(profile), node_key=None), nodes_to_score)
    assert grouped._groups is not None and plain._groups is None
    running: list[tuple[int, Pod]] = []
    for step in range(steps):
        if running and rng.random() < 0.3:
            node, pod = running.pop(rng.randrange(len(running)))
            grouped.release(pod, node)
            plain.release(pod, node)
        base = POOL[rng.randrange(len(POOL))]
        pod = base.replace(uid=f"u{step}", name=f"p{step}")
        a, b = grouped.schedule(pod), plain.schedule(pod)
        where = (profile, seed, step)
        assert (a.placement, a.admitted, a.reason) == (b.placement, b.admitted, b.reason), where
        if a.admitted and a.placement is not None:
            running.append((a.placement.node, pod))
    for x, y in zip(grouped.cluster.nodes, plain.cluster.nodes, strict=True):
        assert x.node.state.to_dict() == y.node.state.to_dict()


@pytest.mark.parametrize("profile", GROUPED)
@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), nodes_to_score=st.sampled_from([None, 4, 9]))
def test_grouped_walk_decides_like_the_node_by_node_walk(profile: str, seed: int, nodes_to_score: int | None) -> None:
    _run(profile, seed, nodes_to_score, 90)


def test_a_node_holding_the_pod_is_walked_node_by_node() -> None:
    """A candidate already holding the pod (same namespace/name) answers differently from its
    group: that walk is not grouped, and decides like the plain one."""
    grouped = Scheduler(Cluster(NODES), get_profile("koordinator"))
    plain = Scheduler(Cluster(NODES), replace(get_profile("koordinator"), node_key=None))
    pod = next(p for p in POOL if p.qos is QOSClass.GUARANTEED)
    first = grouped.schedule(pod)
    assert first.admitted and first.placement is not None
    assert plain.schedule(pod).placement == first.placement
    again = pod.replace(uid="another-uid")  # the same namespace/name
    groups = grouped._groups
    assert groups is not None
    every = np.arange(len(NODES))
    groups.refresh(every)
    assert groups.holds_pod(again, every) and not groups.holds_pod(again.replace(name="other"), every)
    a, b = grouped.select(again), plain.select(again)
    assert (a[0], a[1]) == (b[0], b[1])


def test_an_answer_that_names_the_pod_is_not_kept_for_others() -> None:
    from numalign.scheduler.filters import FilterResult
    from numalign.scheduler.node_groups import Answer

    groups = NodeGroups(Cluster(NODES[:2]), lambda node: 0)
    pod = POOL[0]
    table = groups.table(pod.shape, ())
    groups.remember(table, 0, Answer(FilterResult(False, reason=f"pod {pod.key} is already admitted")), pod)
    groups.remember(table, 1, Answer(FilterResult(False, reason="Insufficient NUMA cpu")), pod)
    assert list(groups.table(pod.shape, ()).answers) == [1]


# ------------------------------------------------------------------------- the caches under it


@pytest.mark.parametrize("cached", [False, True])
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_zone_amounts_are_the_computed_ones(cached: bool, data: st.DataObject) -> None:
    """After random admissions and releases, every node's cached zones are the computed ones
    (and the NRT scores' shared zones the built ones), and nodes with equal zone keys publish
    equal zones; also where the admissions go through a plan cache (the zones then keyed by
    the states' decision keys it remembers)."""
    nodes = [Node(m) for _, m in NODES[:8]]
    if cached:
        shared = PlanCache()
        for n in nodes:
            n.plan_cache = shared
    admitted_last: set[int] = set()  # nodes whose state an admission made
    for _ in range(data.draw(st.integers(1, 12))):
        k = data.draw(st.integers(0, len(nodes) - 1))
        n = nodes[k]
        if n.state.pods and data.draw(st.booleans()):
            n.release(data.draw(st.sampled_from(sorted(n.state.pods))))
            admitted_last.discard(k)
        else:
            base = POOL[data.draw(st.integers(0, len(POOL) - 1))]
            if n.admit(base.replace(uid=f"z{len(n.state.pods)}-{id(n)}", name=f"z{id(n)}-{len(n.state.pods)}")).admitted:
                admitted_last.add(k)
    seen: dict[Any, Any] = {}
    for k, n in enumerate(nodes):
        fresh = _numa_amounts(n.machine, n.state, n.reserved_cpus)
        assert numa_amounts(n) == fresh
        assert list(published_zones(n)) == nrt_zones(n)  # the NRT scores' shared zones
        key = zones_key(n)
        assert seen.setdefault(key, fresh) == fresh
        decided = known_decision_key(n.state)
        if cached and k in admitted_last:  # a plan cache's admission: keyed by its decision key
            assert decided is not None
        assert decided is None or decided in key


_ZONE = st.fixed_dictionaries({"cpu": st.integers(0, 8000), "memory": st.integers(0, 8), "gpu": st.integers(0, 2)})


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_least_numa_combinations_are_upstreams(data: st.DataObject) -> None:
    """``numaNodesRequired`` as upstream writes it (every size's combinations through
    :func:`find_suitable_combination`, distances as fractions) against the integer, cached one."""
    count = data.draw(st.integers(1, 5))
    ids = data.draw(st.permutations(range(8)))[:count]
    zones = []
    for nid in ids:
        amounts = data.draw(_ZONE)
        published = {r: v for r, v in amounts.items() if data.draw(st.integers(0, 5)) > 0}
        costs = {o: data.draw(st.sampled_from([10, 11, 12, 20, 21, 32, 300])) for o in ids
                 if data.draw(st.integers(0, 6)) > 0}
        zones.append(NumaZone(nid, published, costs))
    request = {r: v for r, v in data.draw(_ZONE).items() if data.draw(st.booleans())}
    qos = data.draw(st.sampled_from(list(QOSClass)))
    want: tuple[frozenset[int] | None, bool] = (None, False)
    for size in range(1, len(zones) + 1):
        combo, optimal = find_suitable_combination(qos, zones, request, list(combinations(range(len(zones)), size)))
        if combo is not None:
            want = (frozenset(zones[i].numa_id for i in combo), optimal)
            break
    assert numa_nodes_required(qos, zones, request) == want
    assert numa_nodes_required(qos, zones, request) == want  # and again, from the cache
    if want[0] is not None:
        assert fewest_zones(qos, zones, request) <= len(want[0])


def _filled_nodes(data: st.DataObject, most: int) -> tuple[list[Node], Pod]:
    """A fresh node per test node, up to ``most`` random admissions of the pool's pods on them,
    and a pod of the pool to ask about."""
    nodes = [Node(m) for _, m in NODES]
    for _ in range(data.draw(st.integers(0, most))):
        n = nodes[data.draw(st.integers(0, len(nodes) - 1))]
        base = POOL[data.draw(st.integers(0, len(POOL) - 1))]
        n.admit(base.replace(uid=f"b{len(n.state.pods)}-{id(n)}", name=f"b{id(n)}-{len(n.state.pods)}"))
    return nodes, POOL[data.draw(st.integers(0, len(POOL) - 1))]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_node_bounds_never_undercut_the_score(data: st.DataObject) -> None:
    """Where the filter passes, a score's node, pod and rules bounds are never below its score."""
    nodes, pod = _filled_nodes(data, 10)
    for name in GROUPED[1:]:
        profile = get_profile(name)
        score = profile.numa_score
        if score is None:
            continue
        for n in nodes:
            res = nrt_snn_filter(n, pod)
            if not res.passed:
                continue
            got = score.score_on(n, pod, res.numa_count, 2)
            node_bound, rules_bound = score.node_bound(n, pod), score.rules_bound(n, pod)
            for bound in (node_bound, score.pod_bound(pod), rules_bound):
                assert bound is None or got <= bound, (name, n.machine.name, pod.shape)
            # the machine's bound (any state) is never below the node's (this state)
            assert rules_bound is None or node_bound is None or node_bound <= rules_bound
            assert rules_bound is None or rules_bound == score.rules_bound(Node(n.machine), pod)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_a_sure_refusal_is_a_refusal_in_every_state(data: st.DataObject) -> None:
    """Where ``nrt_snn_refuses_always`` says the filter refuses, it refuses, whatever the node
    holds; the answer is the machine's (a fresh node of it gives the same)."""
    nodes, pod = _filled_nodes(data, 12)
    for n in nodes:
        sure = nrt_snn_refuses_always(n, pod)
        assert sure == nrt_snn_refuses_always(Node(n.machine), pod), n.machine.name
        if sure:
            assert not nrt_snn_filter(n, pod).passed, (n.machine.name, pod.shape)


def test_sure_refusals_are_the_refusals_of_a_fresh_node_in_pod_scope() -> None:
    """On a fresh node every zone has its allocatable amounts available: in pod scope (one
    request checked) a sure refusal is exactly the filter's refusal there; in container scope
    it is at most that (the containers' taking in turn is not claimed). Neither is vacuous on
    the test cluster."""
    seen: dict[int, Node] = {}
    claimed = {"pod": 0, "container": 0}
    for _, m in NODES:
        seen.setdefault(id(m), Node(m))
    for n in seen.values():
        for pod in POOL:
            sure, refused = nrt_snn_refuses_always(n, pod), not nrt_snn_filter(n, pod).passed
            assert not sure or refused
            if n.node_scope is Scope.POD:
                assert sure == refused, (n.machine.name, pod.shape)
            claimed[n.node_scope.value] += sure
    assert claimed["pod"] and claimed["container"], claimed


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_group_heads_are_the_first_of_each_group_in_walk_order(data: st.DataObject) -> None:
    """:func:`group_heads` against sorting every candidate in walk order (score descending,
    node index ascending) and keeping each key number's first occurrence; NaN scores too."""
    n = data.draw(st.integers(1, 40))
    idx = np.array(data.draw(st.lists(st.integers(0, 200), min_size=n, max_size=n, unique=True)), dtype=np.int64)
    values = st.sampled_from([0.0, 12.5, 12.5, 50.0, 99.9, 100.0, float("nan")])
    scores = np.array(data.draw(st.lists(values, min_size=n, max_size=n)), dtype=np.float64)
    numbers = np.array(data.draw(st.lists(st.integers(0, 6), min_size=n, max_size=n)), dtype=np.int64)
    order = np.lexsort((idx, -scores))
    seen: dict[int, int] = {}
    for j in order.tolist():
        seen.setdefault(int(numbers[j]), j)
    heads = list(seen.values())
    got_scores, got_idx, got_numbers, last = group_heads(idx, scores, numbers)
    np.testing.assert_array_equal(got_scores, scores[heads])
    assert got_idx.tolist() == idx[heads].tolist()
    assert got_numbers.tolist() == list(seen)
    assert last == int(numbers[order[-1]])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.floats(0, 1), st.sampled_from([0.0, 1.0, 0.1, 1 / 3, 2 / 3, 5e-324])),
                min_size=2, max_size=6))
def test_exact_variance_is_statistics_variance(values: list[float]) -> None:
    """BalancedAllocation's variance: the float ``statistics.variance`` gives (exact, one
    rounding), bit for bit."""
    assert exact_variance(values) == statistics.variance(values)


def test_rules_groups_split_the_nodes_by_machine_policy_and_scope() -> None:
    """Every node in exactly one group, a group's nodes alike in machine, policy and scope, no
    two groups alike; kept until the nodes' rules change (a scheduler sets their engine mode)."""
    cluster = Cluster(NODES)
    parts, of = cluster.rules_groups()
    assert sorted(i for m in parts for i in m.tolist()) == list(range(len(NODES)))

    def rules(i: int) -> tuple[int, object, object]:
        node = cluster.nodes[i].node
        return id(node.machine), node.node_policy, node.node_scope

    seen = set()
    for g, members in enumerate(parts):
        assert {rules(int(i)) for i in members} == {rules(int(members[0]))}
        assert (of[members] == g).all()
        seen.add(rules(int(members[0])))
    assert len(seen) == len(parts) > 1
    assert cluster.rules_groups() is cluster.rules_groups()
    before = cluster.rules_groups()
    Scheduler(cluster, get_profile("koordinator"))  # sets every node's engine mode
    assert cluster.rules_groups() is not before
