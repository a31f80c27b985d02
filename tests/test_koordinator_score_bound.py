"""The bound of Koordinator's NUMA score (:meth:`KoordinatorNumaScore.node_bound`,
:mod:`numalign.modes.koordinator.score_bound`) is never below the Score where the filter
passes (and never negative there): the grouped scheduler walk skips a group on it, so a bound
below the Score would change a decision. Random nodes (2, 4 and 8 NUMA nodes, every policy, with
and without the Static memory manager, GPUs on one, two or no NUMA node) filled by random pods,
random pods with Koordinator annotations; and the per-resource search against every subset."""

from __future__ import annotations

import itertools
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from numalign.modes.koordinator.scheduling import (
    KoordinatorNumaScore,
    koordinator_filter,
    resource_score,
)
from numalign.modes.koordinator.score_bound import best_ratio_score, numa_set_bound, subset_score
from numalign.modes.rules import Mode
from numalign.node.admission import Node
from numalign.pods import Pod
from numalign.pods.annotations import KOORDINATOR_ANNOTATION, RESOURCE_SPEC
from numalign.sim.cluster import load_cluster
from numalign.sim.sources import parse_workload_spec


def _machine(numa: int, policy: str, memory: str, name: str) -> dict[str, Any]:
    kubelet: dict[str, Any] = {"topologyManagerPolicy": policy, "cpuManagerPolicy": "static",
                               "reservedSystemCPUs": "0", "memoryManagerPolicy": memory,
                               "topologyManagerPolicyOptions": {"max-allowable-numa-nodes": "8"}}
    if memory == "Static":
        kubelet |= {"systemReserved": {"memory": "1Gi"},
                    "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1124Mi"}}]}
    return {"name": name,
            "shape": {"sockets": 2 if numa > 1 else 1, "numaPerSocket": max(1, numa // 2), "coresPerNuma": 2,
                      "threadsPerCore": 2, "memoryPerNuma": "8Gi", "gpusPerNuma": 1},
            "kubelet": kubelet}


def _cluster() -> Any:
    groups = []
    for numa, policy, memory in itertools.product((2, 4, 8), ("single-numa-node", "restricted", "best-effort",
                                                              "none"), ("Static", "None")):
        name = f"n{numa}-{policy}-{memory}".lower()
        groups.append({"machine": _machine(numa, policy, memory, name), "count": 1, "namePrefix": name})
    for policy in ("single-numa-node", "restricted"):  # a GPU on two NUMA nodes, one without topology
        spanning = _machine(2, policy, "Static", f"span-{policy}")
        del spanning["shape"]["gpusPerNuma"]
        spanning["devices"] = [{"resource": "nvidia.com/gpu", "id": "g0", "numa": [0, 1]},
                               {"resource": "nvidia.com/gpu", "id": "g1", "numa": [1]},
                               {"resource": "nvidia.com/gpu", "id": "g2"}]
        groups.append({"machine": spanning, "count": 1, "namePrefix": f"span-{policy}"})
    return load_cluster({"nodes": groups}, "bound")


NODES = _cluster()
_SYNTHETIC: list[Pod] = [a.pod for a in parse_workload_spec("synthetic:count=300,seed=11", None, cluster=NODES)]
#: the mix, with its pods that have init containers or sidecars drawn as often as the others
POOL: list[Pod] = _SYNTHETIC + [p for p in _SYNTHETIC if p.init_containers] * 8
#: Guaranteed pods of the mix asking at most 2 CPUs (most fit a NUMA node of these machines)
SMALL_GUARANTEED = [p for p in _SYNTHETIC if p.qos.value == "Guaranteed"
                    and sum(c.requests.get("cpu", 0) for c in p.containers) <= 2000]
SPECS = [None, {"numaTopologyPolicy": "SingleNUMANode"}, {"numaTopologyPolicy": "Restricted"},
         {"numaTopologyPolicy": "BestEffort", "singleNUMANodeExclusive": "Preferred"}]
BINDS = [None, {"preferredCPUBindPolicy": "SpreadByPCPUs"}, {"requiredCPUBindPolicy": "FullPCPUs"}]


def _annotated(pod: Pod, spec: Any, bind: Any, tag: str) -> Pod:
    notes = dict(pod.annotations)
    if spec is not None:
        notes[KOORDINATOR_ANNOTATION] = json.dumps(spec)
    if bind is not None:
        notes[RESOURCE_SPEC] = json.dumps(bind)
    return pod.replace(uid=f"u-{tag}", name=f"p-{tag}", annotations=notes)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_the_bound_is_never_below_the_score(data: st.DataObject) -> None:
    score = KoordinatorNumaScore()
    nodes = [Node(m) for _, m in NODES]
    for n in nodes:
        n.use_mode(Mode.KOORDINATOR)
    for k in range(data.draw(st.integers(0, 40))):
        n = nodes[data.draw(st.integers(0, len(nodes) - 1))]
        pod = _annotated(POOL[data.draw(st.integers(0, len(POOL) - 1))], data.draw(st.sampled_from(SPECS)),
                         data.draw(st.sampled_from(BINDS)), f"fill{k}")
        if koordinator_filter(n, pod).passed:
            n.admit(pod)
    pod = _annotated(POOL[data.draw(st.integers(0, len(POOL) - 1))], data.draw(st.sampled_from(SPECS)),
                     data.draw(st.sampled_from(BINDS)), "new")
    for n in nodes:
        res = koordinator_filter(n, pod)
        if not res.passed:
            continue
        got = score.score_on(n, pod, res.numa_count, 8)
        bound = score.node_bound(n, pod)
        assert bound is not None and got <= bound, (n.machine.name, pod.shape, got, bound)


def _least(requested: int, allocatable: int) -> int:
    return resource_score("LeastAllocated", requested, allocatable)


_AMOUNT = st.integers(0, 64)


def _draw_sets(data: st.DataObject, max_numa: int, min_cpu_weight: int) -> tuple[
        list[int], dict[str, int], dict[int, dict[str, int]], dict[int, dict[str, int]], dict[str, int],
        dict[str, int], list[tuple[int, ...]]]:
    """Random NUMA node ids (1 to ``max_numa``), weights, per-node allocatable and ``before``,
    a request, maybe a fixed cpu ``before``, and every non-empty subset of the ids."""
    ids = list(range(data.draw(st.integers(1, max_numa))))
    weights = {"cpu": data.draw(st.integers(min_cpu_weight, 3)), "memory": data.draw(st.integers(1, 3))}
    alloc = {i: {r: data.draw(_AMOUNT) for r in weights} for i in ids}
    before = {i: {r: data.draw(st.integers(-4, 64)) for r in weights} for i in ids}
    request = {r: data.draw(st.integers(0, 32)) for r in weights}
    fixed = {"cpu": data.draw(st.integers(0, 128))} if data.draw(st.booleans()) else {}
    subsets = [c for k in range(1, len(ids) + 1) for c in itertools.combinations(ids, k)]
    return ids, weights, alloc, before, request, fixed, subsets


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_the_per_resource_search_is_the_best_subset(data: st.DataObject) -> None:
    """:func:`best_ratio_score` is the best LeastAllocated score of one resource over every
    non-empty subset, and :func:`numa_set_bound` without candidates is at least every subset's
    Score (exact when it enumerates)."""
    ids, weights, alloc, before, request, fixed, subsets = _draw_sets(data, max_numa=7, min_cpu_weight=1)
    for r in weights:
        scored = [_least((fixed[r] if r in fixed else sum(before[i][r] for i in c)) + request[r],
                         sum(alloc[i][r] for i in c)) for c in subsets if sum(alloc[i][r] for i in c) > 0]
        assert best_ratio_score(ids, alloc, before, fixed.get(r), request[r], r, _least) == max(scored, default=None)
    every = [subset_score(c, alloc, before, fixed, request, weights, _least) for c in subsets]
    bound = numa_set_bound(None, ids, alloc, before, fixed, request, weights, _least)
    assert bound is not None and bound >= max(every)
    if len(ids) <= 4:
        assert bound == max(every)


def test_a_malformed_annotation_is_the_filters_to_refuse() -> None:
    """The walk reads the bound before any filter: a pod whose ``numa-topology-spec`` does not
    parse has no bound (no error), and every node refuses it with the filter's reason."""
    from numalign.scheduler import Cluster, Scheduler, get_profile

    pod = POOL[0].replace(uid="bad", name="bad", annotations={KOORDINATOR_ANNOTATION: "{not json"})
    node = Node(NODES[0][1])
    node.use_mode(Mode.KOORDINATOR)
    assert KoordinatorNumaScore().node_bound(node, pod) is None
    refused = koordinator_filter(node, pod)
    assert not refused.passed and refused.reason
    out = Scheduler(Cluster(NODES), get_profile("koordinator")).schedule(pod)
    assert out.placement is None and out.reason == refused.reason


def test_init_containers_do_not_count_as_the_app_holdings() -> None:
    """An init container's and a sidecar's CPUs are not what the app containers hold at the end:
    with 3 free CPUs per NUMA node, a pod with a 2-CPU init container, a 1-CPU sidecar and a
    2-CPU app container fits one NUMA node, and the bound is not below its Score there."""
    from numalign.pods import Container, ContainerKind, QOSClass

    def ct(name: str, kind: ContainerKind, cpus: int) -> Container:
        req = {"cpu": cpus * 1000, "memory": 1 << 30}
        return Container(name, kind, requests=req, limits=dict(req))

    pod = Pod("default", "init-pod", "init-uid", QOSClass.GUARANTEED,
              (ct("init", ContainerKind.INIT, 2), ct("side", ContainerKind.SIDECAR, 1), ct("app", ContainerKind.APP, 2)),
              {})
    checked = 0
    for _, machine in NODES:
        if machine.kubelet.topology_manager_policy != "single-numa-node":
            continue
        node = Node(machine)
        node.use_mode(Mode.KOORDINATOR)
        res = koordinator_filter(node, pod)
        if res.passed:
            bound = KoordinatorNumaScore().node_bound(node, pod)
            assert bound is not None and KoordinatorNumaScore().score_on(node, pod, res.numa_count, 8) <= bound
            checked += 1
    assert checked


def _reference_score(node: Node, pod: Pod, strategy: str, weights: dict[str, int]) -> int:
    """NodeNUMAResource's Score read straight from the plan and the node's zones (scoring.go):
    the NUMA nodes the pod's CPUs, memory blocks and devices sit on, summed; the whole node when
    it gets none or the policy is ``none``; every bound CPU when the pod holds a cpuset."""
    from numalign.engine.policies import Policy
    from numalign.node.usage import numa_amounts, numa_memory_held, pod_numa_nodes, pod_usage
    from numalign.pods import effective_pod_requests

    planned = node.plan(pod)[1]
    assert planned is not None
    req = effective_pod_requests(pod)
    used = pod_numa_nodes(node.machine, planned, pod.uid)
    zones = numa_amounts(node)
    scale = {"cpu": 1000}
    if node.policy_for(pod)[0].policy is Policy.NONE or not used:
        requested, _ = node.requested()
        alloc = {r: node.allocatable.get(r, 0) for r in weights}
        before = {r: requested.get(r, 0) for r in weights}
    else:
        held = numa_memory_held(node)
        alloc = {r: sum(zones[i].allocatable.get(r, 0) for i in used) * scale.get(r, 1) for r in weights}
        before = {r: sum(zones[i].allocatable.get(r, 0) - zones[i].available.get(r, 0)
                         + held.get(i, {}).get(r, 0) for i in used) * scale.get(r, 1) for r in weights}
    usage = pod_usage(node.machine, planned, pod.uid)
    if usage is not None and any(c.cpus for c in usage.containers):
        before["cpu"] = sum(z.allocatable.get("cpu", 0) - z.available.get("cpu", 0) for z in zones.values()) * 1000
    scores = {r: resource_score(strategy, before[r] + req.get(r, 0), alloc[r]) for r in weights if alloc[r]}
    total = sum(scores[r] * weights[r] for r in scores)
    weight_sum = sum(weights[r] for r in scores)
    return total // weight_sum if weight_sum else 0


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_the_score_from_the_kept_amounts_is_the_plans(data: st.DataObject) -> None:
    """:meth:`KoordinatorNumaScore.score_on` reads the node's amounts kept per state
    (:mod:`numalign.modes.koordinator.score_amounts`): the same Score as reading the plan and the
    zones directly, for both strategies and random weights, on random nodes filled by random
    pods (the amounts read again after every admission)."""
    weights = {"cpu": data.draw(st.integers(0, 3)), "memory": data.draw(st.integers(1, 3))}
    scores = [KoordinatorNumaScore(s, weights) for s in ("LeastAllocated", "MostAllocated")]
    nodes = [Node(m) for _, m in NODES]
    for n in nodes:
        n.use_mode(Mode.KOORDINATOR)
    for k in range(data.draw(st.integers(0, 60))):  # Guaranteed pods first: many hold cpusets
        n = nodes[data.draw(st.integers(0, len(nodes) - 1))]
        pod = _annotated(data.draw(st.sampled_from(SMALL_GUARANTEED if k % 2 else POOL)),
                         data.draw(st.sampled_from(SPECS)), data.draw(st.sampled_from(BINDS)), f"p{k}")
        if koordinator_filter(n, pod).passed:
            n.admit(pod)
    pod = _annotated(POOL[data.draw(st.integers(0, len(POOL) - 1))], data.draw(st.sampled_from(SPECS)),
                     data.draw(st.sampled_from(BINDS)), "new")
    for n in nodes:
        if koordinator_filter(n, pod).passed:
            for score in scores:
                assert score.score_on(n, pod, 0, 8) == _reference_score(n, pod, score.strategy, weights)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_the_bound_over_kept_sums_is_the_best_subset(data: st.DataObject) -> None:
    """:func:`best_of_sums` over per-resource sums is the highest :func:`subset_score` of the same
    sets, with or without a fixed ``before``."""
    from numalign.modes.koordinator.score_bound import best_of_sums

    _, weights, alloc, before, request, fixed, subsets = _draw_sets(data, max_numa=5, min_cpu_weight=0)
    sets = data.draw(st.lists(st.sampled_from(subsets), max_size=6))
    rs = list(weights)
    sums = [(tuple(sum(alloc[i][r] for i in c) for r in rs), tuple(sum(before[i][r] for i in c) for r in rs))
            for c in sets]
    got = best_of_sums(sums, [request[r] for r in rs], [weights[r] for r in rs], [fixed.get(r) for r in rs], _least)
    want = max((subset_score(c, alloc, before, fixed, request, weights, _least) for c in sets), default=None)
    assert got == want
