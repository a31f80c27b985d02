"""Sure refusals (``Profile.refuses_always``): the nodes a profile's filter refuses whatever they
hold are not feasible, so they do not count in a pod's sample, as kube-scheduler does not count a
node its filter plugins refuse.

The reference here is the scheduling cycle written out plainly, node by node, from the
scheduler's round-robin start: the nodes that fit and are not sure to refuse, in scan order; the
sample is the first ``nodes_to_score`` of them; the choice is the first of the sample in walk
order (node score, then node index) whose filter passes (``nrt-snn`` has no NUMA score), else the
first such of the other feasible nodes; with none, the reason is the last refusal of that walk,
and with no feasible node at all, the filter's on the last node that fits, in walk order."""

from __future__ import annotations

import random
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from numa2_template import numa2_template
from numalign.pods import Pod, parse_pods
from numalign.scheduler import Cluster, Scheduler, get_profile, sure_refusals
from numalign.scheduler.sure_refusals import SureRefusals
from numalign.sim.cluster import load_cluster


def _cpu_pod(step: int, cpu: int) -> Pod:
    return parse_pods({"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": f"p{step}", "namespace": "ns", "uid": f"u{step}"},
                       "spec": {"containers": [{"name": "c", "resources": {
                           "limits": {"cpu": str(cpu), "memory": "1Gi"}}}]}})[0]


def _snn_first() -> list[tuple[str, Any]]:
    """single-numa-node 2-NUMA nodes (zones of 7 and 8 allocatable CPUs) ahead of restricted
    ones, which the NRT filter passes whatever the pod."""
    nodes = load_cluster(numa2_template("restricted", 6, 6, "rst"), "sure")
    return [n for n in nodes if n[0].startswith("snn")] + [n for n in nodes if not n[0].startswith("snn")]


def _snn_both_scopes() -> list[tuple[str, Any]]:
    """single-numa-node 2-NUMA nodes only, container scope and pod scope in turn: the NRT
    filter's refusal reads "cannot align container c" on the ones, "cannot align pod" on the
    others."""
    template = numa2_template("single-numa-node", 4, 4, "ctr")
    pod_scope = template["nodes"][1]
    machine = pod_scope["machine"]
    pod_scope["machine"] = {**machine, "name": "numa2-snn-pod",
                            "kubelet": {**machine["kubelet"], "topologyManagerScope": "pod"}}
    nodes = load_cluster(template, "scopes")
    ctr, pod = nodes[:4], nodes[4:]
    return [n for pair in zip(ctr, pod, strict=True) for n in pair]


def _reference(sched: Scheduler, pod: Pod) -> tuple[int | None, str | None]:
    """(chosen node or None, reason) of the cycle written out node by node (module doc)."""
    profile, c = sched.profile, sched.cluster
    assert profile.filter is not None and profile.refuses_always is not None
    vec = c.request_vector(pod)
    assert vec is not None
    n = len(c.nodes)
    fits = c.fits(vec)
    scan = [(sched._next_start + k) % n for k in range(n)]
    fitting = [i for i in scan if fits[i]]
    if not fitting:
        return None, "Insufficient resources (NodeResourcesFit)"

    def walk_order(rows: list[int]) -> list[int]:
        scores = profile.node_score(c, np.array(rows, dtype=np.int64), vec)
        return [i for _, i in sorted(zip((-float(s) for s in scores), rows, strict=True))]

    feasible = [i for i in fitting if not profile.refuses_always(c.nodes[i].node, pod)]
    if not feasible:
        return None, profile.filter(c.nodes[walk_order(fitting)[-1]].node, pod).reason
    sample = feasible[:sched.nodes_to_score]
    reason = None
    for part in (sample, [i for i in feasible if i not in sample]):
        for i in walk_order(part) if part else []:
            res = profile.filter(c.nodes[i].node, pod)
            if res.passed:
                return i, None
            reason = res.reason
    return None, reason


@pytest.mark.parametrize("cluster", [_snn_first, _snn_both_scopes])
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), nodes_to_score=st.sampled_from([None, 2, 3]))
def test_the_sample_leaves_sure_refusals_out(cluster: Any, seed: int, nodes_to_score: int | None) -> None:
    """``nrt-snn`` grouped and node by node: every choice and reason is the reference's, over
    random pods (pods wider than any zone among them) and releases; the reference's sure
    refusals and choices both occur."""
    rng = random.Random(seed)
    nodes = cluster()
    grouped = Scheduler(Cluster(nodes), get_profile("nrt-snn"), nodes_to_score)
    plain = Scheduler(Cluster(nodes), replace(get_profile("nrt-snn"), node_key=None), nodes_to_score)
    running: list[tuple[int, Pod]] = []
    sure = placed = 0
    for step in range(40):
        if running and rng.random() < 0.2:
            node, pod = running.pop(rng.randrange(len(running)))
            grouped.release(pod, node)
            plain.release(pod, node)
        pod = _cpu_pod(step, 9 if step == 0 else rng.choice([1, 2, 4, 7, 8, 9, 12]))  # the first: too wide
        want = _reference(grouped, pod)
        assert _reference(plain, pod) == want
        sure += pod.containers[0].requests["cpu"] > 8000
        for sched in (grouped, plain):
            out = sched.schedule(pod)
            got = (None if out.placement is None else out.placement.node, None if out.placement else out.reason)
            assert got == want, (cluster.__name__, seed, step)
        placed += want[0] is not None
        if want[0] is not None and out.admitted:
            running.append((want[0], pod))
    assert sure and placed
    for x, y in zip(grouped.cluster.nodes, plain.cluster.nodes, strict=True):
        assert x.node.state.to_dict() == y.node.state.to_dict()
@pytest.mark.parametrize("profile", ["nrt-snn", "nrt-snn-least-numa", "nrt-snn-most-allocated"])
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), nodes_to_score=st.sampled_from([None, 3]))
def test_sure_refusals_left_out_decide_like_the_node_by_node_walk(profile: str, seed: int,
                                                                  nodes_to_score: int | None) -> None:
    """Pods wider than any zone's allocatable CPUs are refused by every node whatever it holds
    (the grouped walk leaves such nodes out), 8-CPU pods only by the nodes whose zones filled
    up: the same placements, reasons (the walk's last candidate's, which scope's wording) and
    states as the node-by-node walk."""
    nodes = _snn_both_scopes()
    rng = random.Random(seed)
    grouped = Scheduler(Cluster(nodes), get_profile(profile), nodes_to_score)
    plain = Scheduler(Cluster(nodes), replace(get_profile(profile), node_key=None), nodes_to_score)
    running: list[tuple[int, Pod]] = []
    reasons: set[str] = set()
    for step in range(50):
        if running and rng.random() < 0.2:
            node, pod = running.pop(rng.randrange(len(running)))
            grouped.release(pod, node)
            plain.release(pod, node)
        # the first pod is wider than any zone on empty nodes: refused everywhere for sure
        pod = _cpu_pod(step, 9 if step == 0 else rng.choice([1, 2, 4, 7, 8, 8, 9, 12]))
        a, b = grouped.schedule(pod), plain.schedule(pod)
        assert (a.placement, a.admitted, a.reason) == (b.placement, b.admitted, b.reason), (profile, seed, step)
        reasons.add(str(a.reason))
        if a.admitted and a.placement is not None:
            running.append((a.placement.node, pod))
    assert {"cannot align pod", "cannot align container c"} & reasons  # the first pod at least
    for x, y in zip(grouped.cluster.nodes, plain.cluster.nodes, strict=True):
        assert x.node.state.to_dict() == y.node.state.to_dict()


@pytest.mark.parametrize("cap", ["MEMO_SIZE", "MEMO_BYTES"])
def test_the_masks_memo_starts_over_and_answers_alike(cap: str) -> None:
    """Beyond its cap the memo of masks starts over: the same masks, from fresh questions."""
    cluster = Cluster(_snn_first())
    sure = get_profile("nrt-snn").refuses_always
    assert sure is not None
    pods = [_cpu_pod(k, cpu) for k, cpu in enumerate([9, 2, 12, 9])]
    want = [None if not any(sure(cn.node, p) for cn in cluster.nodes)
            else np.array([sure(cn.node, p) for cn in cluster.nodes]) for p in pods]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sure_refusals, cap, 1 if cap == "MEMO_SIZE" else len(cluster.nodes))
        masks = SureRefusals(cluster, sure)
        for _ in range(2):
            for p, w in zip(pods, want, strict=True):
                got = masks.mask(p, p.shape)
                assert (got is None and w is None) or (got is not None and w is not None and (got == w).all())
        assert len(masks._masks) <= 2
