"""The engine's merge equals the kubelet's literal product fold, on random inputs."""

from __future__ import annotations

import functools
from itertools import product

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from numalign.engine.bitmask import mask_of
from numalign.engine.hints import (
    CANNOT_SATISFY,
    GeneratedHints,
    ProviderHints,
    TopologyHint,
    flatten,
)
from numalign.engine.merge import FitOrder, merge_lists
from numalign.engine.policies import Policy, PolicyOptions, TopologyPolicy
from numalign.engine.reference import product_fold


@st.composite
def machines(draw: st.DrawFn) -> tuple[list[int], dict[int, dict[int, int]]]:
    n = draw(st.integers(1, 6))
    # sparse ids sometimes, as on real machines
    ids = sorted(draw(st.sets(st.integers(0, 12), min_size=n, max_size=n)))
    dist: dict[int, dict[int, int]] = {}
    for i in ids:
        dist[i] = {}
    for i in ids:
        for j in ids:
            if i == j:
                dist[i][j] = 10
            elif j < i:
                dist[i][j] = dist[j][i] if draw(st.booleans()) else draw(st.integers(11, 40))
            else:
                dist[i][j] = draw(st.sampled_from([11, 12, 20, 21, 21, 30, 32]))
    return ids, dist


def hint_lists(ids: list[int]) -> st.SearchStrategy[ProviderHints]:
    return _hint_lists(tuple(ids))


@functools.cache
def _hint_lists(ids: tuple[int, ...]) -> st.SearchStrategy[ProviderHints]:
    """Built once per id set: a strategy built inside a draw is validated again every time,
    which cost more than the merge under test."""
    full = mask_of(ids)
    mask = st.integers(0, full).map(lambda m: m & full) | st.just(None)
    hint = st.builds(TopologyHint, mask, st.booleans())
    answer = st.none() | st.just([]) | st.lists(hint, min_size=1, max_size=6)
    return st.none() | st.dictionaries(st.sampled_from(["a", "b", "c"]), answer, max_size=2)


@st.composite
def cases(draw: st.DrawFn) -> tuple[Policy, list[int], dict[int, dict[int, int]], bool, list[ProviderHints]]:
    ids, dist = draw(machines())
    providers = draw(st.lists(hint_lists(ids), min_size=1, max_size=4))
    policy = draw(st.sampled_from(list(Policy)))
    closest = draw(st.booleans())
    return policy, ids, dist, closest, providers


def oracle(policy: TopologyPolicy, providers: list[ProviderHints]) -> tuple[TopologyHint, bool]:
    """Policy semantics around the literal product fold (spec/kubelet.md 2.6)."""
    if policy.policy is Policy.NONE:
        return TopologyHint(None, False), True
    lists = flatten(providers)
    default = policy.default_mask
    if policy.policy is Policy.SINGLE_NUMA_NODE:
        filtered = [
            [h for h in lst if h.preferred and (h.affinity is None or h.affinity.bit_count() == 1)]
            for lst in lists
            if not isinstance(lst, GeneratedHints)
        ]
        best = product_fold(filtered, default, FitOrder())
        if best.affinity == default:
            best = TopologyHint(None, best.preferred)
        return best, best.preferred
    best = product_fold(lists, default, policy.fit)
    return best, (True if policy.policy is Policy.BEST_EFFORT else best.preferred)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_merge_equals_product_fold(case: tuple[Policy, list[int], dict[int, dict[int, int]], bool, list[ProviderHints]]) -> None:
    policy_name, ids, dist, closest, providers = case
    policy = TopologyPolicy(policy_name, tuple(ids), PolicyOptions(prefer_closest=closest), dist)
    result = policy.merge(providers)
    expected_hint, expected_admit = oracle(policy, providers)
    assert (result.hint, result.admit) == (expected_hint, expected_admit)


@settings(max_examples=200, deadline=None)
@given(machines(), st.data())
def test_resource_order_does_not_matter(machine: tuple[list[int], dict[int, dict[int, int]]], data: st.DataObject) -> None:
    """Go iterates resources in random map order; the fold's answer never depends on it."""
    ids, dist = machine
    lists = flatten(data.draw(st.lists(hint_lists(ids), min_size=1, max_size=4)))
    shuffled = data.draw(st.permutations(lists))
    fit = FitOrder(dist)
    default = mask_of(ids)
    assert product_fold(list(shuffled), default, fit) == product_fold(lists, default, fit)


@st.composite
def generated_cases(draw: st.DrawFn) -> tuple[list[int], list[GeneratedHints | list[TopologyHint]]]:
    """Rule-generated lists (capacity thresholds) mixed with explicit ones."""
    ids = sorted(draw(st.sets(st.integers(0, 9), min_size=1, max_size=6)))
    full = mask_of(ids)
    out: list[GeneratedHints | list[TopologyHint]] = []
    for _ in range(draw(st.integers(1, 4))):
        if draw(st.booleans()):
            weights = {i: draw(st.integers(0, 4)) for i in ids}
            need = draw(st.integers(1, 8))
            universe = draw(st.integers(0, full)) & full
            extra = frozenset(draw(st.sets(st.integers(1, full).map(lambda m: m & full), max_size=2)) - {0})

            def feasible(m: int, w: dict[int, int] = weights, n: int = need) -> bool:
                return sum(w[i] for i in ids if m >> i & 1) >= n

            cap = sorted(weights.values(), reverse=True)
            size = next((k for k in range(1, len(cap) + 1) if sum(cap[:k]) >= need), len(ids))
            g = GeneratedHints(tuple(ids), universe, feasible, size, extra)
            out.append(list(CANNOT_SATISFY) if g.is_empty() else g)
        else:
            mask = st.integers(1, full).map(lambda m: m & full) | st.just(None)
            out.append(draw(st.lists(st.builds(TopologyHint, mask, st.booleans()), min_size=1, max_size=5)))
    return ids, out


@settings(max_examples=300, deadline=None)
@given(generated_cases(), st.booleans())
def test_generated_lists_merge_like_their_materialized_form(case: tuple[list[int], list[GeneratedHints | list[TopologyHint]]], closest: bool) -> None:
    ids, lists = case
    default = mask_of(ids)
    fit = FitOrder({i: {j: 10 if i == j else 10 + abs(i - j) * 3 for j in ids} for i in ids}) if closest else FitOrder()
    expected = product_fold(lists, default, fit)
    assert merge_lists(lists, default, fit) == expected


@settings(max_examples=150, deadline=None)
@given(generated_cases(), st.booleans())
def test_large_machine_search_path_matches_materialized(case: tuple[list[int], list[GeneratedHints | list[TopologyHint]]], closest: bool) -> None:
    """Force the search path used above MATERIALIZE_LIMIT and compare with the DP path."""
    import numalign.engine.merge as merge_module

    ids, lists = case
    default = mask_of(ids)
    fit = FitOrder({i: {j: 10 if i == j else 10 + abs(i - j) * 3 for j in ids} for i in ids}) if closest else FitOrder()
    expected = merge_lists(lists, default, fit)
    saved = merge_module.MATERIALIZE_LIMIT
    merge_module.MATERIALIZE_LIMIT = 0
    try:
        got = merge_lists(lists, default, fit)
    finally:
        merge_module.MATERIALIZE_LIMIT = saved
    assert got == expected


def legacy_fold(lists: list[list[TopologyHint]], default: int) -> TopologyHint:
    """The pre-1.21 kubelet fold, literally (spec/cluster-schedulers.md section 0)."""
    best = TopologyHint(default, False)
    for perm in product(*lists):
        aff = default
        for h in perm:
            aff &= default if h.affinity is None else h.affinity
        merged = TopologyHint(aff, all(h.preferred for h in perm))
        if aff == 0:
            continue
        if merged.preferred and not best.preferred:
            best = merged
            continue
        if not merged.preferred and best.preferred:
            continue
        assert best.affinity is not None
        if (aff.bit_count(), aff) < (best.affinity.bit_count(), best.affinity):
            best = merged
    return best


@settings(max_examples=300, deadline=None)
@given(machines(), st.data())
def test_legacy_merge_equals_old_fold(machine: tuple[list[int], dict[int, dict[int, int]]], data: st.DataObject) -> None:
    from numalign.engine.merge import merge_lists_legacy

    ids, _ = machine
    lists = [list(x) for x in flatten(data.draw(st.lists(hint_lists(ids), min_size=1, max_size=4))) if not isinstance(x, GeneratedHints)]
    default = mask_of(ids)
    assert merge_lists_legacy(lists, default) == legacy_fold(lists, default)


def test_legacy_rule_differs_from_kubelet_on_unequal_preferred_masks() -> None:
    """Volcano: {0} preferred AND {0,1} preferred -> {0} preferred; kubelet: not preferred."""
    hints: list[ProviderHints] = [{"cpu": [TopologyHint(0b01, True)]}, {"gpu": [TopologyHint(0b11, True)]}]
    new = TopologyPolicy(Policy.RESTRICTED, (0, 1)).merge(hints)
    old = TopologyPolicy(Policy.RESTRICTED, (0, 1), legacy_merge=True).merge(hints)
    assert new.hint == TopologyHint(0b01, False) and not new.admit
    assert old.hint == TopologyHint(0b01, True) and old.admit
