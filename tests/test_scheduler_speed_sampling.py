"""kube-scheduler's node sampling (``findNodesThatPassFilters`` + ``percentageOfNodesToScore``)
as the scheduler does it, against a slow node-by-node reference; and the vectorised NUMA
prefilter stays a necessary condition of the node's admission."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from numa2_template import numa2_template
from numalign.scheduler import Cluster, Scheduler, get_profile
from numalign.scheduler.scheduler import num_feasible_nodes_to_find
from numalign.sim.cluster import load_cluster
from numalign.sim.sources import parse_workload_spec


def _template(count: int) -> dict[str, Any]:
    return numa2_template("restricted", count // 2, count - count // 2, "rst")


def _reference(sched: Scheduler, pod: Any) -> tuple[int | None, int]:
    """The node kube-scheduler's loop picks, one node at a time, and the next start index."""
    c = sched.cluster
    n = len(c.nodes)
    want = num_feasible_nodes_to_find(n)
    vec = c.request_vector(pod)
    assert vec is not None
    fits = c.fits(vec)
    start = sched._next_start
    feasible: list[int] = []
    processed = 0
    for off in range(n):
        i = (start + off) % n
        processed += 1
        ok = bool(fits[i])
        if ok and sched.prefilter is not None:
            ok = bool(sched.prefilter.passing(pod, np.array([i]))[0])
        if ok:
            feasible.append(i)
            if len(feasible) == want:
                break
    next_start = (start + processed) % n if want < n else start
    scores = sched._node_scores(np.arange(n), vec)

    def best(cands: list[int]) -> int | None:
        p = sched.profile
        if p.filter is None:
            return max(cands, key=lambda i: (scores[i], -i), default=None)
        ranked = []
        for i in cands:
            res = p.filter(c.nodes[i].node, pod)
            if res.passed:
                assert p.numa_score is not None
                total = scores[i] + p.numa_weight * p.numa_score.scores([res.numa_count], c.max_numa)[0]
                ranked.append(((total, scores[i], -i), i))
        return max(ranked)[1] if ranked else None

    chosen = best(feasible)
    if chosen is None and sched.profile.filter is not None:
        # nobody sampled passed the exact filter: every other node that fits is looked at
        rest = [i for i in range(n) if i not in set(feasible) and fits[i]
                and (sched.prefilter is None or sched.prefilter.passing(pod, np.array([i]))[0])]
        chosen = best(rest)
    return chosen, next_start


@pytest.mark.parametrize("profile", ["default", "numalign"])
def test_sampling_picks_what_kube_schedulers_loop_picks(profile: str) -> None:
    nodes = load_cluster(_template(260), "sampling")
    pods = [a.pod for a in parse_workload_spec("synthetic:count=500,seed=4", None, cluster=nodes)]
    sched = Scheduler(Cluster(nodes), get_profile(profile))
    assert sched.nodes_to_score < len(nodes)  # sampling is on
    starts = set()
    for pod in pods:
        want, next_start = _reference(sched, pod)
        placement, _, _ = sched.select(pod)
        assert (placement.node if placement else None) == want
        assert sched._next_start == next_start
        starts.add(next_start)
        sched.schedule(pod)  # (selects again from the new start: the state moves on)
    assert len(starts) > 10  # the start index really went round


def test_small_clusters_score_every_node() -> None:
    nodes = load_cluster(_template(60), "small")
    sched = Scheduler(Cluster(nodes), get_profile("default"))
    assert sched.nodes_to_score == 60
    pod = parse_workload_spec("synthetic:count=5,seed=1", None, cluster=nodes)[1].pod
    idx, fitting = sched._sample(pod, sched.cluster.request_vector(pod))  # type: ignore[arg-type]
    assert list(idx) == list(np.flatnonzero(sched.cluster.fits(sched.cluster.request_vector(pod))))  # type: ignore[arg-type]
    assert fitting == len(idx)


def test_prefilter_never_drops_a_node_that_admits() -> None:
    nodes = load_cluster(_template(40), "prefilter")
    pods = [a.pod for a in parse_workload_spec("synthetic:count=300,seed=8", None, cluster=nodes)]
    sched = Scheduler(Cluster(nodes), get_profile("numalign"))
    assert sched.prefilter is not None
    dropped = 0
    for k, pod in enumerate(pods):
        every = np.arange(len(nodes))
        ok = sched.prefilter.passing(pod, every)
        if k % 10 == 0:
            for i in every:
                admitted = sched.cluster.nodes[int(i)].node.plan(pod)[0].admitted
                assert ok[i] or not admitted
                dropped += not ok[i]
        sched.schedule(pod)
    assert dropped > 0  # the prefilter did drop nodes
