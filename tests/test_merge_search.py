"""The merge's searches (numalign.engine.merge_search) are exact: they equal the kubelet's fold.

* up to 6 NUMA nodes and 5 providers: rule-generated families of every kind the managers
  build (per-node amounts in several dimensions, devices near several nodes, nodes that must
  be touched, nodes that cannot be used alone, extra masks, socket-aligned preference,
  opaque rules), explicit lists, Narrowest and Closest (asymmetric, grouped and accidental
  distance ties) - against the literal fold, with rule-generated lists never listed out;
* hint sets produced by the real CPU, memory (incl. multi-node groups, hugepages) and device
  managers on machines filled by random admissions;
* 10 to 16 NUMA nodes: a brute force over all 2^N masks (AND-convolution of the families'
  indicator vectors) for the best non-preferred hint.

The oracle for large products is :func:`fold_of_merged_set`: the fold of the kubelet's
``compare`` over the *set* of merged hints (every permutation's AND and preferred flag,
collected by a small state machine instead of a product), which is the product fold because
the fold is a minimum over a total order (tests/test_merge_exact.py checks that on its own;
here it is also checked against the literal product fold where that finishes).
"""

from __future__ import annotations

import functools
import itertools
import random
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import numalign.engine.merge as merge_module
import numalign.engine.merge_budget as budget_module
import numalign.engine.merge_order as order_module
from distance_tables import sgi_like
from numalign.engine.bitmask import ids_of, iterate_masks, mask_of
from numalign.engine.hints import (
    CANNOT_SATISFY,
    Demand,
    GeneratedHints,
    HintList,
    TopologyHint,
    flatten,
)
from numalign.engine.merge import (
    FitOrder,
    MergeTooLarge,
    merge_lists,
    merge_lists_legacy,
    non_preferred_key,
)
from numalign.engine.policies import Policy, PolicyOptions, TopologyPolicy
from numalign.engine.reference import _compare, _narrowest_count, product_fold
from numalign.errors import InputError

SETTINGS = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# --------------------------------------------------------------------------- oracles


def fold_of_merged_set(lists: Sequence[HintList], default: int, fit: FitOrder) -> TopologyHint:
    """The kubelet fold over the set of merged hints of every permutation.

    State per partial permutation: (AND so far, still preferred, the common affinity while
    preferred). Once not preferred the common affinity no longer matters, and while preferred
    the AND is the common affinity (or the default), so there are few states.
    """
    explicit = [h.materialize() if isinstance(h, GeneratedHints) else list(h) for h in lists]
    counts = [c for c in (_narrowest_count(h) for h in explicit) if c is not None]
    bnp = max(counts, default=0)
    states: set[tuple[int, bool, int | None]] = {(default, True, None)}
    for hints in explicit:
        nxt: set[tuple[int, bool, int | None]] = set()
        for acc, pref, first in states:
            for h in hints:
                if h.affinity is None:
                    p = pref and h.preferred
                    nxt.add((acc, p, first if p else None))
                else:
                    f = first if first is not None else h.affinity
                    p = pref and h.preferred and h.affinity == f
                    nxt.add((acc & h.affinity, p, f if p else None))
        states = nxt
    best: TopologyHint | None = None
    for acc, pref, _ in sorted(states, key=lambda s: (s[0], s[1])):
        best = _compare(best, TopologyHint(acc, pref), bnp, fit)
    return best if best is not None else TopologyHint(default, False)


@contextmanager
def search_path() -> Iterator[None]:
    """Never list rule-generated hints out and never take the small-input fold: the path
    every large machine and every long explicit list takes."""
    saved = merge_module.MATERIALIZE_LIMIT, merge_module.SMALL_FOLD_STEPS
    merge_module.MATERIALIZE_LIMIT = 0
    merge_module.SMALL_FOLD_STEPS = 0
    try:
        yield
    finally:
        merge_module.MATERIALIZE_LIMIT, merge_module.SMALL_FOLD_STEPS = saved


# --------------------------------------------------------------------------- strategies


@st.composite
def node_ids(draw: st.DrawFn, max_nodes: int = 6) -> list[int]:
    n = draw(st.integers(1, max_nodes))
    return sorted(draw(st.sets(st.integers(0, 11), min_size=n, max_size=n)))


@st.composite
def distances(draw: st.DrawFn, ids: list[int]) -> dict[int, dict[int, int]]:
    """Asymmetric tables, grouped tables (runs of interchangeable nodes) and coarse ones."""
    style = draw(st.sampled_from(["asymmetric", "grouped", "coarse"]))
    out: dict[int, dict[int, int]] = {i: {} for i in ids}
    group = draw(st.integers(1, 3))
    for a, i in enumerate(ids):
        for b, j in enumerate(ids):
            if i == j:
                out[i][j] = draw(st.sampled_from([10, 10, 10, 11])) if style == "asymmetric" else 10
            elif style == "asymmetric":
                out[i][j] = draw(st.integers(11, 40))
            elif style == "grouped":
                out[i][j] = 20 if a // group == b // group else 30 + 4 * ((a ^ b) >> 2 & 1)
            elif j < i:
                out[i][j] = out[j][i]
            else:
                out[i][j] = draw(st.sampled_from([20, 30]))
    return out


# Strategies that depend on the machine are built once per machine (functools.cache): one
# built inside a draw is validated again on every example, which cost more than the merges.


@functools.cache
def masks(full: int) -> st.SearchStrategy[int]:
    """Masks within ``full`` (0 possible)."""
    return st.integers(1, full).map(lambda m: m & full)


@functools.cache
def near_nodes(full: int) -> st.SearchStrategy[list[tuple[int, int]]]:
    return st.lists(st.tuples(masks(full).filter(bool), st.integers(1, 3)), max_size=3)


@functools.cache
def touched(full: int) -> st.SearchStrategy[list[int]]:
    return st.lists(masks(full).filter(bool), max_size=2)


@functools.cache
def extra_masks(full: int) -> st.SearchStrategy[list[int]]:
    return st.lists(masks(full), max_size=2)


@functools.cache
def explicit_lists(full: int) -> st.SearchStrategy[list[TopologyHint]]:
    hint = st.builds(TopologyHint, masks(full) | st.just(None), st.booleans())
    return st.lists(hint, min_size=1, max_size=5)


@st.composite
def demands(draw: st.DrawFn, ids: list[int]) -> Demand:
    full = mask_of(ids)
    ndim = draw(st.integers(1, 3))
    amounts = {i: [draw(st.sampled_from([0, 0, 1, 2, 3, 4])) for _ in range(ndim)] for i in ids}
    need = [draw(st.integers(-1, 9)) for _ in range(ndim)]
    base = Demand.per_node(amounts, need)
    dims = list(base.dims)
    if draw(st.booleans()):  # devices near several nodes
        dims[0] = dims[0] + tuple(draw(near_nodes(full)))
    touch = tuple(draw(touched(full)))
    lonely = draw(st.integers(0, full)) & full if draw(st.booleans()) else 0
    return Demand(tuple(dims), tuple(need), touch, lonely)


@st.composite
def generated(draw: st.DrawFn, ids: list[int]) -> HintList:
    full = mask_of(ids)
    demand = draw(demands(ids))
    universe = full if draw(st.booleans()) else draw(st.integers(0, full)) & full
    extra = frozenset(m for m in draw(extra_masks(full)) if m)
    size = draw(st.integers(1, len(ids)))
    groups: tuple[int, ...] = ()
    count = 0
    if draw(st.integers(0, 4)) == 0:  # socket-aligned preference (disjoint groups)
        k = draw(st.integers(1, 3))
        parts = [0] * k
        for i in ids:
            parts[draw(st.integers(0, k - 1))] |= 1 << i
        groups = tuple(p for p in parts if p)
        count = draw(st.integers(1, len(groups)))
    opaque = draw(st.integers(0, 4)) == 0
    predicate = None
    if draw(st.integers(0, 6)) == 0:  # an opaque preference predicate (listed out)
        first = ids[0]
        predicate = draw(st.sampled_from([
            lambda m: m.bit_count() % 2 == 0,
            lambda m, first=first: bool(m >> first & 1),
        ]))
    g = GeneratedHints(
        tuple(ids),
        universe,
        demand.feasible,
        size,
        extra,
        is_preferred=predicate,
        demand=None if opaque else demand,
        preferred_groups=groups,
        preferred_group_count=count,
    )
    return list(CANNOT_SATISFY) if g.is_empty() else g


@st.composite
def explicit(draw: st.DrawFn, ids: list[int]) -> HintList:
    return draw(explicit_lists(mask_of(ids)))


@functools.cache
def families(ids: tuple[int, ...]) -> st.SearchStrategy[list[HintList]]:
    """One to five hint lists, two in three rule-generated."""
    one = st.one_of(generated(list(ids)), generated(list(ids)), explicit(list(ids)))
    return st.lists(one, min_size=1, max_size=5)


@st.composite
def merge_cases(draw: st.DrawFn) -> tuple[list[int], list[HintList], FitOrder]:
    ids = draw(node_ids())
    lists = draw(families(tuple(ids)))
    fit = FitOrder(draw(distances(ids))) if draw(st.booleans()) else FitOrder()
    return ids, lists, fit


# --------------------------------------------------------------------------- <= 6 NUMA


@settings(SETTINGS, max_examples=120)
@given(node_ids(4), st.data())
def test_merged_set_fold_is_the_product_fold(ids: list[int], data: st.DataObject) -> None:
    lists = data.draw(st.lists(st.one_of(generated(ids), explicit(ids)), min_size=1, max_size=3))
    fit = FitOrder(data.draw(distances(ids))) if data.draw(st.booleans()) else FitOrder()
    default = mask_of(ids)
    assert fold_of_merged_set(lists, default, fit) == product_fold(lists, default, fit)


@settings(SETTINGS, max_examples=250)
@given(merge_cases())
def test_search_equals_the_fold(case: tuple[list[int], list[HintList], FitOrder]) -> None:
    ids, lists, fit = case
    default = mask_of(ids)
    with search_path():
        got = merge_lists(lists, default, fit)
    assert got == fold_of_merged_set(lists, default, fit)


@settings(SETTINGS, max_examples=120)
@given(merge_cases(), st.sampled_from(list(Policy)))
def test_policies_over_the_search(case: tuple[list[int], list[HintList], FitOrder], policy: Policy) -> None:
    """The policy layer (single-numa-node filtering, admit rule) on top of the search."""
    ids, lists, fit = case
    dist = fit.distances or {i: {j: 10 if i == j else 20 for j in ids} for i in ids}
    tp = TopologyPolicy(policy, tuple(ids), PolicyOptions(prefer_closest=fit.distances is not None), dist)
    providers = [{f"r{i}": h} for i, h in enumerate(lists)]
    with search_path():
        result = tp.merge(providers)
    if policy is Policy.NONE:
        assert result.admit and result.hint == TopologyHint(None, False)
        return
    flat = flatten(providers)
    default = tp.default_mask
    if policy is Policy.SINGLE_NUMA_NODE:
        singles = [
            [
                x
                for x in (h.materialize() if isinstance(h, GeneratedHints) else h)
                if x.preferred and (x.affinity is None or x.affinity.bit_count() == 1)
            ]
            for h in flat
        ]
        best = fold_of_merged_set(singles, default, FitOrder())
        if best.affinity == default:
            best = TopologyHint(None, best.preferred)
        assert (result.hint, result.admit) == (best, best.preferred)
        return
    best = fold_of_merged_set(flat, default, tp.fit)
    assert result.hint == best
    assert result.admit == (policy is Policy.BEST_EFFORT or best.preferred)


@settings(SETTINGS, max_examples=150)
@given(node_ids(), st.data())
def test_small_explicit_inputs_fold_directly(ids: list[int], data: st.DataObject) -> None:
    """The default path (small explicit inputs are folded by the state machine)."""
    lists = data.draw(st.lists(explicit(ids), min_size=1, max_size=4))
    fit = FitOrder(data.draw(distances(ids))) if data.draw(st.booleans()) else FitOrder()
    default = mask_of(ids)
    assert merge_lists(lists, default, fit) == product_fold(lists, default, fit)


def legacy_fold(lists: Sequence[HintList], default: int) -> TopologyHint:
    """Volcano's pre-1.21 rule over the set of merged hints (product of listed hints)."""
    explicit = [h.materialize() if isinstance(h, GeneratedHints) else list(h) for h in lists]

    def reach(preferred_only: bool) -> set[int]:
        out = {default}
        for hints in explicit:
            opts = {default if h.affinity is None else h.affinity & default for h in hints if h.preferred or not preferred_only}
            out = {r & m for r in out for m in opts} - {0}
        return out

    for preferred in (True, False):
        got = reach(preferred)
        if got:
            return TopologyHint(min(got, key=lambda m: (m.bit_count(), m)), preferred)
    return TopologyHint(default, False)


@settings(SETTINGS, max_examples=150)
@given(node_ids(), st.data())
def test_legacy_merge_of_one_rule_list(ids: list[int], data: st.DataObject) -> None:
    """Volcano's shape (one generated list, lists preferring any node) without listing."""
    default = mask_of(ids)
    lists: list[HintList] = [data.draw(generated(ids))]
    lists += data.draw(st.lists(st.just([TopologyHint(None, True)]), max_size=2))
    if data.draw(st.booleans()):
        lists.append(data.draw(explicit(ids)))  # then listing (small) or a clear error
    saved = merge_module.LEGACY_LISTING_LIMIT
    merge_module.LEGACY_LISTING_LIMIT = 0
    try:
        got = merge_lists_legacy(lists, default)
    except MergeTooLarge:
        assert any(not isinstance(h, GeneratedHints) and any(x.preferred and x.affinity is not None and x.affinity & default != default for x in h) for h in lists[1:])
        return
    finally:
        merge_module.LEGACY_LISTING_LIMIT = saved
    assert got == legacy_fold(lists, default)


# --------------------------------------------------------------------------- the managers


@st.composite
def spec_machines(draw: st.DrawFn) -> Any:
    from numalign.machine.spec import load_machine

    sockets = draw(st.integers(1, 2))
    per_socket = draw(st.integers(1, 3))
    policy = draw(st.sampled_from(["best-effort", "restricted"]))
    options: dict[str, str] = {}
    if draw(st.booleans()):
        options["prefer-closest-numa-nodes"] = "true"
    cpu_options: dict[str, str] = {}
    if sockets * per_socket > 1 and draw(st.integers(0, 3)) == 0:
        cpu_options["align-by-socket"] = "true"
    return load_machine({
        "name": "t",
        "shape": {
            "sockets": sockets, "numaPerSocket": per_socket,
            "coresPerNuma": draw(st.integers(1, 3)), "threadsPerCore": 1,
            "memoryPerNuma": "4Gi", "hugepages2MiPerNuma": draw(st.sampled_from(["0", "128Mi"])),
            "gpusPerNuma": draw(st.integers(0, 2)),
        },
        "kubelet": {
            "topologyManagerPolicy": policy,
            "topologyManagerPolicyOptions": options,
            "cpuManagerPolicy": "static", "reservedSystemCPUs": "0",
            "cpuManagerPolicyOptions": cpu_options,
            "memoryManagerPolicy": "Static", "systemReserved": {"memory": "412Mi"},
            "reservedMemory": [{"numaNode": 0, "limits": {"memory": "512Mi"}}],  # + 100Mi eviction
            "featureGates": {"CPUManagerPolicyAlphaOptions": True, "CPUManagerPolicyBetaOptions": True},
        },
    })


@st.composite
def pods(draw: st.DrawFn, name: str) -> Any:
    from numalign.pods import Container, ContainerKind, Pod, QOSClass

    containers = []
    for c in range(draw(st.integers(1, 2))):
        r: dict[str, int] = {
            "cpu": 1000 * draw(st.integers(1, 6)),
            "memory": draw(st.sampled_from([1, 2, 3, 4, 6, 9])) << 29,
        }
        if draw(st.booleans()):
            r["hugepages-2Mi"] = draw(st.sampled_from([2, 32, 96])) << 21
        if draw(st.booleans()):
            r["nvidia.com/gpu"] = draw(st.integers(1, 3))
        containers.append(Container(f"c{c}", ContainerKind.APP, r, r))
    return Pod("ns", name, name, QOSClass.GUARANTEED, tuple(containers))


@settings(SETTINGS, max_examples=120)
@given(st.data())
def test_manager_hints_merge_like_the_fold(data: st.DataObject) -> None:
    """Hint sets of the real managers on machines filled by random admissions."""
    from numalign.engine.policies import parse_options
    from numalign.node.admission import Node

    machine = data.draw(spec_machines())
    node = Node(machine)
    for i in range(data.draw(st.integers(0, 6))):
        node.admit(data.draw(pods(f"p{i}")))
    pod = data.draw(pods("last"))
    providers = node.providers(node.state)
    opts = parse_options(dict(machine.kubelet.topology_manager_policy_options))
    dist = dict(machine.distances) if machine.has_distances else None
    for policy in (Policy.RESTRICTED, Policy.BEST_EFFORT):
        tp = TopologyPolicy(policy, machine.node_ids, opts, dist)
        for hints in ([p.pod_hints(pod) for p in providers], [p.container_hints(pod, pod.containers[0]) for p in providers]):
            flat = flatten(hints)
            for h in flat:
                if isinstance(h, GeneratedHints):  # the rule as data says what the rule says
                    assert h.demand is not None
                    for m in iterate_masks(ids_of(h.universe)):
                        assert h.demand.feasible(m) == h.feasible(m)
            with search_path():
                got = tp.merge(hints)
            expected = fold_of_merged_set(flat, tp.default_mask, tp.fit)
            assert got.hint == expected


# --------------------------------------------------------------------------- 10 to 16 NUMA


def _indicator(h: HintList, n: int) -> tuple[np.ndarray, np.ndarray, bool]:
    """(masks a pick contributes to the AND, non-None affinities of preferred hints, whether
    a preferred None is on the list)."""
    size = 1 << n
    full = size - 1
    every = np.arange(size, dtype=np.int64)
    out = np.zeros(size, dtype=bool)
    pref = np.zeros(size, dtype=bool)
    if isinstance(h, GeneratedHints):
        d = h.demand
        assert d is not None
        ok = (every & ~h.universe) == 0
        ok &= every != 0
        for t in d.touch:
            ok &= (every & t) != 0
        ok &= ~(((every & d.lonely) != 0) & ((every & (every - 1)) == 0))
        for items, need in zip(d.dims, d.need, strict=True):
            if need <= 0:
                continue
            total = np.zeros(size, dtype=np.int64)
            for m, value in items:
                total += np.where((every & m) != 0, value, 0)
            ok &= total >= need
        for e in h.extra:
            ok[e] = True
        popcount = np.array([bin(i).count("1") for i in range(size)])
        return ok, ok & (popcount == h.preferred_size), False
    nil = False
    for x in h:
        out[full if x.affinity is None else x.affinity] = True
        if x.preferred:
            if x.affinity is None:
                nil = True
            else:
                pref[x.affinity] = True
    return out, pref, nil


def _superset_sums(f: np.ndarray, n: int) -> np.ndarray:
    g = f.astype(np.int64).copy()
    for i in range(n):
        g = g.reshape(-1, 2, 1 << i)
        g[:, 0, :] += g[:, 1, :]
        g = g.reshape(-1)
    return g


def _from_superset_sums(g: np.ndarray, n: int) -> np.ndarray:
    f = g.copy()
    for i in range(n):
        f = f.reshape(-1, 2, 1 << i)
        f[:, 0, :] -= f[:, 1, :]
        f = f.reshape(-1)
    return f


def brute_force_merge(lists: Sequence[HintList], n: int, fit: FitOrder) -> TopologyHint:
    """The merge by exhaustion over all 2^n masks (``default`` = all nodes)."""
    size = 1 << n
    full = size - 1
    indicators = [_indicator(h, n) for h in lists]
    # preferred: a non-None M that every list holds as a preferred affinity or skips with a
    # preferred None, picked by at least one list; all preferred None: the default mask
    accept = np.ones(size, dtype=bool)
    picked = np.zeros(size, dtype=bool)
    for _, pref, nil in indicators:
        accept &= pref | nil
        picked |= pref
    cands = [int(m) for m in np.flatnonzero(accept & picked) if m]
    if all(nil for _, _, nil in indicators):
        cands.append(full)
    if cands:
        return TopologyHint(min(cands, key=lambda m: (bin(m).count("1"), *fit.key(m))), True)
    # non-preferred: reachable ANDs by AND-convolution of the pick indicators
    reach = np.zeros(size, dtype=bool)
    reach[full] = True
    for out, _, _ in indicators:
        counts = _from_superset_sums(_superset_sums(reach, n) * _superset_sums(out, n), n)
        reach = counts > 0
    reach[0] = False
    best_count = 0
    for h, (out, _, _) in zip(lists, indicators, strict=True):
        if isinstance(h, GeneratedHints) or any(x.affinity is not None for x in h):
            masks = np.flatnonzero(out) if isinstance(h, GeneratedHints) else [x.affinity for x in h if x.affinity is not None]
            best_count = max(best_count, min(bin(int(m)).count("1") for m in masks))
    found = np.flatnonzero(reach)
    if len(found) == 0:
        return TopologyHint(full, False)
    key = non_preferred_key(fit, best_count)
    # rank by (class, size) first (cheap), fit keys only for the winning group
    def coarse(m: int) -> tuple[int, int]:
        return key(m)[:2] if fit.distances is None else _coarse(m, best_count)

    firsts = min(coarse(int(m)) for m in found)
    group = [int(m) for m in found if coarse(int(m)) == firsts]
    return TopologyHint(min(group, key=key), False)


def _coarse(m: int, best_count: int) -> tuple[int, int]:
    c = bin(m).count("1")
    return (0, 0) if c == best_count else (1, -c) if c < best_count else (2, c)


@st.composite
def wide_cases(draw: st.DrawFn) -> tuple[int, list[HintList], FitOrder]:
    """10-16 nodes; per-node amounts and devices like the managers', few explicit hints."""
    n = draw(st.integers(10, 16))
    ids = list(range(n))
    full = (1 << n) - 1
    lists: list[HintList] = []
    for _ in range(draw(st.integers(1, 4))):
        if draw(st.integers(0, 3)) == 0:
            mask = st.integers(1, full) | st.just(None)
            lists.append(draw(st.lists(st.builds(TopologyHint, mask, st.booleans()), min_size=1, max_size=4)))
            continue
        busy = draw(st.sampled_from([0.0, 0.3, 0.7]))
        free = {i: (0 if draw(st.floats(0, 1)) < busy else draw(st.integers(1, 4)),) for i in ids}
        need = draw(st.integers(1, 4 * n))
        touch = tuple(1 << i for i in draw(st.lists(st.sampled_from(ids), max_size=1)))
        demand = Demand.per_node(free, (need,), touch)
        pref = next((k for k in range(1, n + 1) if 4 * k >= need), n)
        g = GeneratedHints(tuple(ids), full, demand.feasible, pref, demand=demand)
        lists.append(list(CANNOT_SATISFY) if g.is_empty() else g)
    if draw(st.booleans()):
        rows = {i: {j: 10 if i == j else 20 if i // 4 == j // 4 else 30 for j in ids} for i in ids}
        return n, lists, FitOrder(rows)
    return n, lists, FitOrder()


@settings(SETTINGS, max_examples=60)
@given(wide_cases())
def test_wide_machines_against_brute_force(case: tuple[int, list[HintList], FitOrder]) -> None:
    n, lists, fit = case
    got = merge_lists(lists, (1 << n) - 1, fit)
    assert got == brute_force_merge(lists, n, fit)


def test_brute_force_agrees_with_the_fold_on_small_machines() -> None:
    rng = random.Random(7)
    for _ in range(40):
        n = rng.randint(2, 5)
        full = (1 << n) - 1
        lists: list[HintList] = []
        for _ in range(rng.randint(1, 3)):
            if rng.random() < 0.5:
                lists.append([TopologyHint(rng.choice([None, rng.randint(1, full)]), rng.random() < 0.5) for _ in range(rng.randint(1, 4))])
            else:
                d = Demand.per_node({i: (rng.randint(0, 3),) for i in range(n)}, (rng.randint(1, 6),))
                g = GeneratedHints(tuple(range(n)), full, d.feasible, rng.randint(1, n), demand=d)
                lists.append(list(CANNOT_SATISFY) if g.is_empty() else g)
        assert brute_force_merge(lists, n, FitOrder()) == product_fold(lists, full, FitOrder())


# --------------------------------------------------------------------------- prefer-closest


@st.composite
def tables(draw: st.DrawFn) -> tuple[int, dict[int, dict[int, int]]]:
    """Up to 10 nodes: grouped (SLIT-like, nested), coarse symmetric and asymmetric tables."""
    n = draw(st.integers(2, 10))
    style = draw(st.sampled_from(["nested", "parity", "coarse", "asymmetric"]))
    g = draw(st.integers(1, 4))
    out: dict[int, dict[int, int]] = {i: {} for i in range(n)}
    for i in range(n):
        for j in range(n):
            if i == j:
                out[i][j] = 10
            elif style == "nested":
                out[i][j] = 22 if i // g == j // g else 26 if i // (2 * g) == j // (2 * g) else 30
            elif style == "parity":
                out[i][j] = 20 if i // g == j // g else 30 + 4 * ((i ^ j) >> 2 & 1)
            elif style == "coarse":
                out[i][j] = out[j][i] if j < i else draw(st.sampled_from([20, 21, 30]))
            else:
                out[i][j] = draw(st.integers(11, 40))
    return n, out


@settings(SETTINGS, max_examples=250)
@given(tables(), st.data())
def test_closest_search_is_the_exhaustive_minimum(table: tuple[int, dict[int, dict[int, int]]], data: st.DataObject) -> None:
    """Smallest average distance, ties to the smallest integer, over every q-subset."""
    n, dist = table
    q = data.draw(st.integers(1, n))
    fit = FitOrder(dist)
    expected = min((mask_of(c) for c in itertools.combinations(range(n), q)), key=fit.key)
    assert order_module.closest_best((1 << n) - 1, q, None, dist, budget_module.Budget()) == expected


def test_closest_search_on_the_sgi_table_is_fast() -> None:
    """The 64-node SGI table's shape (16 runs of 4 in 4 blocks): wide sizes stay cheap."""
    dist = sgi_like(64, 4)
    for q in (20, 40, 56):
        budget = budget_module.Budget(60_000)
        got = order_module.closest_best((1 << 64) - 1, q, None, dist, budget)
        assert got is not None and got.bit_count() == q


# --------------------------------------------------------------------------- caps


def test_too_large_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """An opaque rule on 64 nodes whose narrowest mask is large exhausts the step budget."""
    monkeypatch.setattr(budget_module, "STEP_LIMIT", 5_000)
    nodes = tuple(range(64))
    full = (1 << 64) - 1

    def needs_many(m: int) -> bool:  # opaque: no Demand, the search cannot see amounts
        return m.bit_count() >= 40 and m & 0xFF == 0xFF

    g = GeneratedHints(nodes, full, needs_many, 40)
    other = GeneratedHints(nodes, full, lambda m: m.bit_count() >= 1, 1)
    with pytest.raises(MergeTooLarge) as err:
        merge_lists([g, other], full)
    assert isinstance(err.value, InputError)
    assert "search steps" in str(err.value)


def test_identical_large_families_do_not_explode() -> None:
    """Interchangeable nodes form one class: 64 identical nodes are a handful of steps."""
    nodes = tuple(range(64))
    full = (1 << 64) - 1
    d = Demand.per_node({i: (4,) for i in nodes}, (4 * 33,))
    wide = GeneratedHints(nodes, full, d.feasible, 33, demand=d)
    d1 = Demand.per_node({i: (8,) for i in nodes}, (8 * 20,))
    other = GeneratedHints(nodes, full, d1.feasible, 20, demand=d1)
    saved = budget_module.STEP_LIMIT
    budget_module.STEP_LIMIT = 20_000
    try:
        got = merge_lists([wide, other], full)
    finally:
        budget_module.STEP_LIMIT = saved
    assert got == TopologyHint((1 << 33) - 1, False)


# --------------------------------------------------------------------------- the cases


def _family(n: int, free: Sequence[int], need: int, pref: int) -> GeneratedHints:
    d = Demand.per_node({i: (free[i],) for i in range(n)}, (need,))
    return GeneratedHints(tuple(range(n)), (1 << n) - 1, d.feasible, pref, demand=d)


def _grouped(n: int) -> dict[int, dict[int, int]]:
    return {i: {j: 10 if i == j else 22 if i // 4 == j // 4 else 26 if i // 16 == j // 16 else 30 for j in range(n)} for i in range(n)}


@pytest.mark.parametrize("n", [8, 16, 32, 64])
def test_merge_scaling_cases(n: int) -> None:
    full = (1 << n) - 1
    for k in (3, 4, 8):
        got = merge_lists([_family(n, [4] * n, 4 * k, k), _family(n, [4] * n, 1, 1)], full)
        assert got == TopologyHint((1 << k) - 1, False)
    both = [_family(n, [4] * n, 16, 4), _family(n, [8] * n, 32, 4)]
    assert merge_lists(both, full, FitOrder(_grouped(n))) == TopologyHint(0b1111, True)
    busy = [_family(n, [0] * (n - 3) + [4, 4, 4], 12, 3), _family(n, [4] * n, 1, 1)]
    assert merge_lists(busy, full) == TopologyHint(0b111, False)


def test_adversarial_all_but_one_lists() -> None:
    full = (1 << 64) - 1
    lists: list[HintList] = [[TopologyHint(full & ~(1 << i), False) for i in range(64)] for _ in range(5)]
    assert merge_lists(lists, full) == TopologyHint(full & ~(1 << 63), False)


def test_random_explicit_lists_against_the_fold() -> None:
    """Explicit non-preferred lists on 20 nodes (the fold over the set of ANDs)."""
    rng = random.Random(3)
    full = (1 << 20) - 1
    for _ in range(5):
        lists: list[HintList] = [[TopologyHint(rng.randint(1, full), False) for _ in range(40)] for _ in range(3)]
        assert merge_lists(lists, full) == fold_of_merged_set(lists, full, FitOrder())


def test_merged_set_oracle_is_order_free() -> None:
    ids = [0, 1, 2]
    lists: list[HintList] = [[TopologyHint(0b011, True), TopologyHint(None, False)], [TopologyHint(0b110, False)]]
    for perm in itertools.permutations(lists):
        assert fold_of_merged_set(list(perm), mask_of(ids), FitOrder()) == product_fold(list(perm), mask_of(ids), FitOrder())
    assert ids_of(0b110) == [1, 2]


# --------------------------------------------------------------------------- memory findBestHint


@settings(SETTINGS, max_examples=150)
@given(node_ids(), st.data())
def test_memory_best_hint_is_the_narrowest_feasible_superset(ids: list[int], data: st.DataObject) -> None:
    """The memory manager's findBestHint (allocation time) without listing masks."""
    from numalign.resources.memory import _narrowest

    g = data.draw(generated(ids))
    if not isinstance(g, GeneratedHints):
        return
    within = data.draw(st.integers(0, mask_of(ids))) & mask_of(ids) if data.draw(st.booleans()) else 0
    expected = min((m for m in g.masks() if m & within == within), key=lambda m: (m.bit_count(), m), default=None)
    assert _narrowest(g, within) == expected


def test_memory_best_hint_on_64_nodes() -> None:
    from numalign.resources.memory import _narrowest

    nodes = tuple(range(64))
    full = (1 << 64) - 1
    d = Demand.per_node({i: (8 if i % 3 else 1,) for i in nodes}, (60,))
    g = GeneratedHints(nodes, full, d.feasible, 8, demand=d)
    within = (1 << 0) | (1 << 63)
    got = _narrowest(g, within)
    assert got is not None and got & within == within and d.feasible(got)
    # nodes 0 and 63 hold 1 each; 58 more need 8 nodes of 8 (the lowest non-multiples of 3)
    assert got == within | mask_of([1, 2, 4, 5, 7, 8, 10, 11])


# --------------------------------------------------------------------------- the 64-NUMA capture


@pytest.fixture(scope="module")
def sgi64() -> Any:
    from conftest import shared_path
    from numalign.machine.sysfs import load_sysfs

    return load_sysfs(shared_path("topologies", "hwloc", "linux", "256ia64-64n2s2c.tar.bz2")).machine


def _on(machine: Any, policy: str, closest: bool = False) -> Any:

    from numalign.machine.model import KubeletConfig, ReservedMemory

    options = {"max-allowable-numa-nodes": "64"}
    if closest:
        options["prefer-closest-numa-nodes"] = "true"
    return machine.replace(kubelet=KubeletConfig(
        topology_manager_policy=policy, topology_manager_policy_options=options,
        cpu_manager_policy="static", memory_manager_policy="Static",
        system_reserved={"memory": 1 << 30, "cpu": 1000},
        reserved_memory=(ReservedMemory(0, {"memory": 1 << 30}),),
    ))


@pytest.mark.parametrize(
    ("cpus", "memory_gi", "affinity"),
    [(8, 1, 0b11), (12, 1, 0b111), (16, 1, 0xF), (100, 1, (1 << 25) - 1), (4, 4, 0b10), (20, 4, 0x1F)],
)
def test_sgi64_guaranteed_pods(sgi64: Any, cpus: int, memory_gi: int, affinity: int) -> None:
    """Issue 14's table: CPUs need several nodes, memory one, so no merged hint is preferred
    (restricted rejects, best-effort admits on the lowest nodes) - unless both fit one node
    (then node 1: node 0 has a reserved CPU)."""
    from numalign.node.admission import Node
    from numalign.pods import Container, ContainerKind, Pod, QOSClass

    r = {"cpu": cpus * 1000, "memory": memory_gi << 30}
    pod = Pod("t", "p", "u", QOSClass.GUARANTEED, (Container("c", ContainerKind.APP, r, r),))
    for policy in ("restricted", "best-effort"):
        result = Node(_on(sgi64, policy)).admit(pod)
        assert result.admitted == (policy == "best-effort" or affinity.bit_count() == 1)
        if result.admitted:
            assert result.containers[0].affinity == affinity


def test_sgi64_prefer_closest(sgi64: Any) -> None:
    from numalign.node.admission import Node
    from numalign.pods import Container, ContainerKind, Pod, QOSClass

    r = {"cpu": 16_000, "memory": 1 << 30}
    pod = Pod("t", "p", "u", QOSClass.GUARANTEED, (Container("c", ContainerKind.APP, r, r),))
    result = Node(_on(sgi64, "best-effort", closest=True)).admit(pod)
    assert result.admitted and result.containers[0].affinity == 0b1111  # a group at distance 22
