"""An upper bound of NodeNUMAResource's Score on one node, read from the node's NUMA amounts
without planning the pod (:meth:`KoordinatorNumaScore.node_bound
<numalign.modes.koordinator.scheduling.KoordinatorNumaScore.node_bound>`).

The Score (:meth:`~numalign.modes.koordinator.scheduling.KoordinatorNumaScore.score_on`) reads
the plan only through the NUMA nodes ``S`` the pod gets there (its CPUs', memory blocks' and
devices' NUMA nodes) and whether it holds a cpuset: per weighted resource ``r`` it scores
``resource_score(before_r(S) + request_r, allocatable_r(S))`` with sums over ``S`` of the zones'
amounts, or the node-level amounts when the pod gets nothing NUMA-bound or the policy is
``none``. This module maximises that over every ``S`` the plan could pick:

* ``S`` holds the pod's exclusive CPUs, so its zones have at least as many available CPUs as
  the app containers' exclusive CPUs together;
* under ``single-numa-node`` a pod with exclusive CPUs gets a single NUMA node (the merged hint
  is one NUMA node, CPUs, memory and devices are taken inside it);
* LeastAllocated's resource score falls as ``before + request`` over ``allocatable`` rises
  (integer division included), so over many subsets each resource's best ratio is searched
  apart (the best subset for ``(request + sum b) / sum a`` is a prefix of the zones in
  ``b / a`` order) and the weighted mean of the per-resource bests bounds the mean of any one
  subset. (MostAllocated has no bound here.)

Exactness of the grouped walk rests on bound >= Score wherever the filter passes;
``tests/test_koordinator_score_bound.py`` checks it on random nodes and pods.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from fractions import Fraction

#: subsets of at most this many NUMA nodes are enumerated; beyond, each resource apart
ENUMERATE_NUMA = 4

#: a resource score: (requested, allocatable) -> 0..100
ResourceScore = Callable[[int, int], int]


def weighted(scores: Mapping[str, int], weights: Mapping[str, int]) -> int:
    """The Score's weighted integer mean over the resources that have a score."""
    return _weighted_mean((scores[r], w) for r, w in weights.items() if r in scores)


def _weighted_mean(scored: Iterable[tuple[int, int]]) -> int:
    """The Score's weighted integer mean of ``(score, weight)`` pairs (0 without a weight)."""
    total = weight_sum = 0
    for s, w in scored:
        total += s * w
        weight_sum += w
    return total // weight_sum if weight_sum else 0


def subset_score(
    subset: Sequence[int], alloc: Mapping[int, Mapping[str, int]], before: Mapping[int, Mapping[str, int]],
    fixed_before: Mapping[str, int], request: Mapping[str, int], weights: Mapping[str, int],
    score: ResourceScore,
) -> int:
    """The Score where the pod gets NUMA nodes ``subset``: per resource the zones' summed
    allocatable and ``before`` (``fixed_before`` replaces the sum for the resources it has)."""
    return sums_score(
        [sum(alloc[i].get(r, 0) for i in subset) for r in weights],
        [sum(before[i].get(r, 0) for i in subset) for r in weights],
        [fixed_before.get(r) for r in weights], [request.get(r, 0) for r in weights],
        list(weights.values()), score)


def sums_score(alloc: Sequence[int], before: Sequence[int], fixed: Sequence[int | None],
               request: Sequence[int], weights: Sequence[int], score: ResourceScore) -> int:
    """The Score of a set of NUMA nodes given per resource (all in one order) as its summed
    allocatable and ``before``, the resource's fixed ``before`` or None, the pod's request and
    the weight: :func:`weighted` over the resources with an allocatable."""
    return _weighted_mean((score((b if f is None else f) + q, a), w)
                          for a, b, f, q, w in zip(alloc, before, fixed, request, weights, strict=True) if a != 0)


def best_ratio_score(
    ids: Sequence[int], alloc: Mapping[int, Mapping[str, int]], before: Mapping[int, Mapping[str, int]],
    fixed: int | None, req: int, r: str, score: ResourceScore,
) -> int | None:
    """The highest LeastAllocated score of resource ``r`` over non-empty subsets of ``ids``
    with a non-zero allocatable (None: no such subset). The score falls as ``(before + req) /
    allocatable`` rises; with a ``fixed`` before only the allocatable varies."""
    zones = [(alloc[i].get(r, 0), before[i].get(r, 0)) for i in ids]
    positive = [(a, b) for a, b in zones if a > 0]
    if not positive:
        return None
    if fixed is not None:  # before is the node's: the ratio moves with the allocatable only
        total = sum(a for a, _ in positive)
        return max(score(fixed + req, total), max(score(fixed + req, a) for a, _ in positive))
    # the least (req + sum b) / sum a over subsets: zones without allocatable only add to
    # before (those with a negative one lower it), and the best set of the others is a prefix
    # in b / a order (a zone belongs to an optimum iff its b / a is below the optimum's ratio)
    base = req + sum(b for a, b in zones if a == 0 and b < 0)
    best: int | None = None
    sa = sb = 0
    for a, b in _by_ratio(tuple(positive)):
        sa += a
        sb += b
        s = score(base + sb, sa)
        best = s if best is None else max(best, s)
    return best


@functools.lru_cache(maxsize=1 << 12)
def _by_ratio(zones: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
    """``(a, b)`` pairs (``a > 0``) in ascending ``b / a`` order, exactly (a node's amounts
    repeat on many nodes and pods: remembered)."""
    return tuple(sorted(zones, key=lambda ab: Fraction(ab[1], ab[0])))


def best_of_sums(
    sets: Iterable[tuple[Sequence[int], Sequence[int]]], request: Sequence[int], weights: Sequence[int],
    fixed: Sequence[int | None], score: ResourceScore,
) -> int | None:
    """:func:`sums_score`'s highest value over ``sets`` (each an ``(allocatable sums, before
    sums)`` pair; ``request``, ``weights`` and ``fixed`` in the same resource order); None
    without a set."""
    return max((sums_score(alloc, before, fixed, request, weights, score) for alloc, before in sets),
               default=None)


def numa_set_bound(
    candidates: Sequence[Sequence[int]] | None, ids: Sequence[int],
    alloc: Mapping[int, Mapping[str, int]], before: Mapping[int, Mapping[str, int]],
    fixed_before: Mapping[str, int], request: Mapping[str, int], weights: Mapping[str, int],
    score: ResourceScore,
) -> int | None:
    """The highest Score over the NUMA node sets ``candidates`` (None: every non-empty subset
    of ``ids``); None when there is no candidate."""
    if candidates is None and len(ids) <= ENUMERATE_NUMA:
        candidates = [c for k in range(1, len(ids) + 1) for c in itertools.combinations(ids, k)]
    if candidates is not None:
        return max((subset_score(c, alloc, before, fixed_before, request, weights, score) for c in candidates),
                   default=None)
    per: dict[str, int] = {}
    for r in weights:
        s = best_ratio_score(ids, alloc, before, fixed_before.get(r), request.get(r, 0), r, score)
        if s is not None:
            per[r] = s
    if not per:
        return 0
    # the weighted mean of the per-resource bests bounds every subset's mean when every subset
    # scores every one of these resources; else a subset may score fewer: the best single one
    always = all(all(alloc[i].get(r, 0) > 0 for i in ids) for r in per)
    return weighted(per, weights) if always else max(per.values())


__all__ = ["ENUMERATE_NUMA", "best_of_sums", "best_ratio_score", "numa_set_bound", "subset_score", "sums_score",
           "weighted"]
