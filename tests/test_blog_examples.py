"""Worked examples of the Topology Manager blog post and the task page (shared/seeds)."""

from __future__ import annotations

from itertools import product

from numalign.cli.demo import BLOG_CONTAINERS, walkthrough
from numalign.engine.bitmask import mask_of
from numalign.engine.hints import TopologyHint, flatten
from numalign.engine.policies import Policy, PolicyOptions, TopologyPolicy

N0, N1, BOTH = mask_of([0]), mask_of([1]), mask_of([0, 1])


def test_blog_cross_product_table() -> None:
    """The blog's table of 12 permutations and their merged hints (container0)."""
    lists = flatten(BLOG_CONTAINERS[0][1])
    merged = []
    for perm in product(*lists):
        aff = BOTH
        for h in perm:
            aff &= h.affinity if h.affinity is not None else BOTH
        merged.append(TopologyHint(aff, all(h.preferred for h in perm)))
    # the blog lists {00: False} for mixed masks; the AND is empty and never wins
    assert merged[0] == TopologyHint(N0, True)
    assert merged[7] == TopologyHint(N1, True)
    assert merged[8] == TopologyHint(N0, False)
    assert merged[11] == TopologyHint(N1, False)
    assert sum(1 for m in merged if m.affinity == 0) == 8


def test_blog_container0_admitted_on_node0_by_every_policy() -> None:
    for policy in (Policy.BEST_EFFORT, Policy.RESTRICTED, Policy.SINGLE_NUMA_NODE):
        r = TopologyPolicy(policy, (0, 1)).merge(BLOG_CONTAINERS[0][1])
        assert r.admit and r.hint == TopologyHint(N0, True)


def test_blog_container1_goes_to_node1() -> None:
    for policy in (Policy.BEST_EFFORT, Policy.RESTRICTED, Policy.SINGLE_NUMA_NODE):
        r = TopologyPolicy(policy, (0, 1)).merge(BLOG_CONTAINERS[1][1])
        assert r.admit and r.hint == TopologyHint(N1, True)


def test_blog_only_non_preferred_cpu_hint() -> None:
    """Blog: 2 CPUs requested, only one free per node -> only {11: False}: restricted rejects."""
    providers = [{"cpu": [TopologyHint(BOTH, False)]}]
    assert TopologyPolicy(Policy.BEST_EFFORT, (0, 1)).merge(providers).admit
    assert TopologyPolicy(Policy.BEST_EFFORT, (0, 1)).merge(providers).hint == TopologyHint(BOTH, False)
    assert not TopologyPolicy(Policy.RESTRICTED, (0, 1)).merge(providers).admit
    assert not TopologyPolicy(Policy.SINGLE_NUMA_NODE, (0, 1)).merge(providers).admit


def test_blog_two_devices_only_on_different_nodes_is_preferred_wide() -> None:
    """Blog: {0011: True} when the only way is to span; restricted admits, SNN rejects."""
    nodes = (0, 1, 2, 3)
    hints = [TopologyHint(mask_of([0, 1]), True), TopologyHint(mask_of([0, 1, 2]), False),
             TopologyHint(mask_of([0, 1, 3]), False), TopologyHint(mask_of([0, 1, 2, 3]), False)]
    r = TopologyPolicy(Policy.RESTRICTED, nodes).merge([{"dev": hints}])
    assert r.admit and r.hint == TopologyHint(mask_of([0, 1]), True)
    assert not TopologyPolicy(Policy.SINGLE_NUMA_NODE, nodes).merge([{"dev": hints}]).admit


def test_task_page_pod_without_preferences_default_hint() -> None:
    """Task page: BestEffort pods get the default hint (nobody cares)."""
    assert TopologyPolicy(Policy.RESTRICTED, (0, 1)).merge([None, {}]).hint == TopologyHint(BOTH, True)
    snn = TopologyPolicy(Policy.SINGLE_NUMA_NODE, (0, 1)).merge([None, {"cpu": None}])
    assert snn.admit and snn.hint == TopologyHint(None, True)


def test_task_page_prefer_closest_picks_near_pair() -> None:
    """prefer-closest-numa-nodes: among 2-node sets, the one with the shortest distance."""
    nodes = (0, 1, 2, 3)
    d = {0: {0: 10, 1: 12, 2: 20, 3: 20}, 1: {0: 12, 1: 10, 2: 20, 3: 20},
         2: {0: 20, 1: 20, 2: 10, 3: 11}, 3: {0: 20, 1: 20, 2: 11, 3: 10}}
    pairs = [TopologyHint(mask_of(p), True) for p in ([0, 1], [0, 2], [2, 3])]
    plain = TopologyPolicy(Policy.RESTRICTED, nodes).merge([{"cpu": pairs}])
    closest = TopologyPolicy(Policy.RESTRICTED, nodes, PolicyOptions(prefer_closest=True), d).merge([{"cpu": pairs}])
    assert plain.hint.affinity == mask_of([0, 1])
    assert closest.hint.affinity == mask_of([2, 3])


def test_demo_text_tells_the_story() -> None:
    text = walkthrough()
    assert "container0" in text and "container1" in text
    assert "single-numa-node  -> merged {0}" in text
    assert "single-numa-node  -> merged {1}" in text
