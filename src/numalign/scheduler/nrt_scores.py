"""scheduler-plugins ``NodeResourceTopologyMatch`` scoring, exactly as upstream computes it.

Read from kubernetes-sigs/scheduler-plugins ``pkg/noderesourcetopology``:

* ``least_allocated.go`` / ``most_allocated.go`` / ``balanced_allocation.go`` - the per-NUMA-zone
  strategies (:func:`least_allocated_zone`, :func:`most_allocated_zone`,
  :func:`balanced_allocation_zone`);
* ``score.go`` - ``scoreForEachNUMANode`` (the node gets the smallest *non-zero* zone score:
  :func:`score_for_each_numa`), pod scope (the pod's effective request) and container scope
  (the integer part of the mean over init + app containers): :func:`pod_scope_score`,
  :func:`container_scope_score`; the strategies apply to ``single-numa-node`` nodes only;
* ``least_numa.go`` - ``LeastNUMANodes``: the fewest NUMA zones whose summed ``available``
  covers the request (:func:`numa_nodes_required`), normalised by 8 NUMA nodes with half a step
  more when the chosen zones have the minimal average distance among all same-size
  combinations (:func:`normalize_score`); a missing cost counts as 255; container scope takes
  the largest per-container count, subtracting each container from the zones it used.

Units: amounts are integers with ``cpu`` in millicores (as :class:`numalign.pods.Container`
holds requests) and everything else in its own unit. ``Quantity.Cmp`` compares exactly
(:func:`cmp` on these integers); ``Quantity.Value()`` rounds up to whole units
(:func:`value`: a 500m cpu request is worth 1).

Deliberate differences: none in the arithmetic. ``subtractFromNUMAs`` upstream indexes the zone
list by NUMA id (equal to the position only when ids are 0..n-1 in order); here zones are looked
up by id, which is what upstream means and gives the same result on every NRT the kubelet's
exporters publish.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache
from itertools import combinations
from math import comb

import numpy as np
import numpy.typing as npt

from numalign.errors import InputError
from numalign.inputs.quantity import CPU, is_hugepages_resource
from numalign.inputs.quantity import MEMORY as _MEMORY
from numalign.memo import remember
from numalign.pods import QOSClass

#: framework.MaxNodeScore
MAX_NODE_SCORE = 100
#: ``highestNUMAID``: LeastNUMANodes normalises by 8 NUMA nodes whatever the node has
HIGHEST_NUMA_ID = 8
#: ACPI SLIT "unknown distance": a cost the NRT does not publish
MAX_DISTANCE_VALUE = 255

Amounts = Mapping[str, int]
ZoneScoreFn = Callable[[Amounts, Amounts, Mapping[str, int]], int]


@dataclass
class NumaZone:
    """One ``type: Node`` zone of an NRT: its NUMA id, ``available`` amounts and costs."""

    numa_id: int
    resources: dict[str, int] = field(default_factory=dict)
    costs: dict[int, int] = field(default_factory=dict)


# --------------------------------------------------------------------------- units


def value(resource: str, amount: int) -> int:
    """``Quantity.Value()``: whole units, rounded up (cpu is held in millicores)."""
    if resource == CPU:
        return -(-amount // 1000)
    return amount


def is_numa_affine(resource: str) -> bool:
    """``isNUMAAffineResource``: cpu, memory and hugepages are bound to NUMA nodes."""
    return resource in (CPU, _MEMORY) or is_hugepages_resource(resource)


def is_resource_set_suitable(qos: QOSClass, resource: str, quantity: int, numa_quantity: int) -> bool:
    """``isResourceSetSuitable``: a non-Guaranteed pod's NUMA-affine requests fit anywhere."""
    if qos is not QOSClass.GUARANTEED and is_numa_affine(resource):
        return True
    return numa_quantity >= quantity


def _weight(weights: Mapping[str, int], resource: str) -> int:
    w = weights.get(resource, 1)
    return w if w >= 1 else 1


# ------------------------------------------------------------------- zone strategies


def _least_one(resource: str, requested: int, capacity: int) -> int:
    if capacity == 0 or requested > capacity:
        return 0
    cap = value(resource, capacity)
    return (cap - value(resource, requested)) * MAX_NODE_SCORE // cap


def _most_one(resource: str, requested: int, capacity: int) -> int:
    if capacity == 0 or requested > capacity:
        return 0
    return value(resource, requested) * MAX_NODE_SCORE // value(resource, capacity)


def _weighted(one: Callable[[str, int, int], int], requested: Amounts, zone: Amounts, weights: Mapping[str, int]) -> int:
    total = 0
    weight_sum = 0
    for res, qty in requested.items():
        w = _weight(weights, res)
        total += one(res, qty, zone.get(res, 0)) * w
        weight_sum += w
    if weight_sum == 0:
        return 0  # upstream divides by zero here (a pod with no requests is never Guaranteed)
    return total // weight_sum


def least_allocated_zone(requested: Amounts, zone: Amounts, weights: Mapping[str, int]) -> int:
    """``leastAllocatedScoreStrategy``: weighted mean of ``(avail - req) x 100 / avail``."""
    return _weighted(_least_one, requested, zone, weights)


def most_allocated_zone(requested: Amounts, zone: Amounts, weights: Mapping[str, int]) -> int:
    """``mostAllocatedScoreStrategy``: weighted mean of ``req x 100 / avail``."""
    return _weighted(_most_one, requested, zone, weights)


def balanced_allocation_zone(requested: Amounts, zone: Amounts, weights: Mapping[str, int]) -> int:
    """``balancedAllocationScoreStrategy``: ``(1 - sample variance of req/avail) x 100``
    (weights unused; 0 if any fraction exceeds 1; a zone without the resource counts 1)."""
    fractions: list[float] = []
    for res, qty in requested.items():
        cap = value(res, zone.get(res, 0))
        frac = 1.0 if cap == 0 else value(res, qty) / cap
        if frac > 1:
            return 0
        fractions.append(frac)
    var = exact_variance(fractions) if len(fractions) > 1 else float("nan")
    if var != var:  # gonum's Variance of fewer than two values is NaN; int64(NaN) in Go
        return _go_int64_of_nan()
    return int((1 - var) * MAX_NODE_SCORE)


def exact_variance(values: Sequence[float]) -> float:
    """``statistics.variance`` of two or more finite floats, the same float, faster.

    ``statistics.variance`` computes the sample variance exactly (as a fraction) and rounds it to
    a float once. So does this: each float is ``a / 2**k`` exactly (``as_integer_ratio``), so over
    the largest denominator ``D`` (a multiple of the others) the values are integers ``a_i``, and
    the variance is ``(n * sum(a_i**2) - sum(a_i)**2) / (n * (n - 1) * D**2)``, an integer quotient
    that Python's ``int / int`` rounds correctly - the float ``Fraction`` gives for that ratio."""
    ratios = [v.as_integer_ratio() for v in values]
    den = max(d for _, d in ratios)
    nums = [a * (den // d) for a, d in ratios]
    n = len(nums)
    total = sum(nums)
    return (n * sum(a * a for a in nums) - total * total) / (n * (n - 1) * den * den)


def _go_int64_of_nan() -> int:
    # Go's int64(NaN) is implementation-defined; on amd64 it is math.MinInt64
    return -(2**63)


ZONE_STRATEGIES: dict[str, ZoneScoreFn] = {
    "LeastAllocated": least_allocated_zone,
    "MostAllocated": most_allocated_zone,
    "BalancedAllocation": balanced_allocation_zone,
}


def lowest_non_zero(scores: Iterable[int]) -> int:
    """``scoreForEachNUMANode``'s choice among the zone scores: the smallest non-zero one (0 if
    every zone scores 0)."""
    low = 0
    for s in scores:
        if low == 0 or (s != 0 and s < low):
            low = s
    return low


def score_for_each_numa(requested: Amounts, zones: Sequence[NumaZone], fn: ZoneScoreFn, weights: Mapping[str, int]) -> int:
    """``scoreForEachNUMANode``: the smallest non-zero zone score (0 if every zone scores 0)."""
    return lowest_non_zero(fn(requested, z.resources, weights) for z in zones)


def pod_scope_score(effective: Amounts, zones: Sequence[NumaZone], fn: ZoneScoreFn, weights: Mapping[str, int]) -> int:
    return score_for_each_numa(effective, zones, fn, weights)


def container_scope_score(
    containers: Sequence[Amounts], zones: Sequence[NumaZone], fn: ZoneScoreFn, weights: Mapping[str, int]
) -> int:
    """The integer part of the mean over all containers (init then app) of their node score."""
    return container_mean([score_for_each_numa(c, zones, fn, weights) for c in containers])


def container_mean(scores: Sequence[int]) -> int:
    """The container scope's node score from the containers' scores: ``int64(stat.Mean(...))``,
    the integer part of their mean (``int64(NaN)`` for no container)."""
    if not scores:
        return _go_int64_of_nan()  # stat.Mean of nothing is NaN
    return int(sum(scores) / len(scores))


# ---------------------------------------------------------------------- LeastNUMANodes


def normalize_score(count: int, min_avg_distance: bool) -> int:
    """``normalizeScore``: 100 - count x (100 // 8), plus half a step at minimal distance."""
    step = MAX_NODE_SCORE // HIGHEST_NUMA_ID
    score = MAX_NODE_SCORE - count * step
    return score + step // 2 if min_avg_distance else score


def nodes_avg_distance(zones: Sequence[NumaZone], combo: Sequence[int]) -> Fraction:
    """Mean cost over all ordered pairs (self pairs included) of the zones at these list
    positions; a cost the zone does not publish is 255."""
    if not combo:
        return Fraction(MAX_DISTANCE_VALUE)
    total = 0
    for a in combo:
        for b in combo:
            total += zones[a].costs.get(zones[b].numa_id, MAX_DISTANCE_VALUE)
    return Fraction(total, len(combo) * len(combo))


def min_avg_distance_in_combinations(zones: Sequence[NumaZone], combos: Iterable[Sequence[int]]) -> Fraction:
    low = Fraction(MAX_DISTANCE_VALUE)
    for combo in combos:
        d = nodes_avg_distance(zones, combo)
        if d < low:
            low = d
    return low


def _valid_combination(zones: Sequence[NumaZone], resources: Amounts, combo: Sequence[int]) -> bool:
    """``isValidCombineResources``: every requested resource is published by every zone."""
    return all(res in zones[i].resources for i in combo for res in resources)


def _fits(qos: QOSClass, resources: Amounts, zones: Sequence[NumaZone], combo: Sequence[int]) -> bool:
    for res, qty in resources.items():
        if qty == 0:
            continue
        have = sum(zones[i].resources.get(res, 0) for i in combo)
        if not is_resource_set_suitable(qos, res, qty, have):
            return False
    return True


def find_suitable_combination(
    qos: QOSClass, zones: Sequence[NumaZone], resources: Amounts, combos: Sequence[Sequence[int]]
) -> tuple[Sequence[int] | None, bool]:
    """``findSuitableCombination``: the first fitting combination at the minimal average
    distance over *all* combinations (optimal), else the fitting one with the least distance."""
    best_all = min_avg_distance_in_combinations(zones, combos)
    chosen: Sequence[int] | None = None
    chosen_distance = Fraction(MAX_DISTANCE_VALUE + 1)
    for combo in combos:
        if not _valid_combination(zones, resources, combo) or not _fits(qos, resources, zones, combo):
            continue
        d = nodes_avg_distance(zones, combo)
        if d == best_all:
            return combo, True
        if d < chosen_distance:
            chosen_distance, chosen = d, combo
    return chosen, False


def numa_nodes_required(qos: QOSClass, zones: Sequence[NumaZone], resources: Amounts) -> tuple[frozenset[int] | None, bool]:
    """``numaNodesRequired``: the NUMA ids of the smallest fitting combination (None: none
    fits) and whether it has the minimal average distance.

    :func:`find_suitable_combination` on the combinations of each size in turn, with the
    distances of one size compared as integers: every combination of ``size`` zones has the
    same denominator ``size * size``, so its mean cost compares as its total cost does; the
    totals depend only on the zones' ids and costs and are computed once per layout
    (:func:`_distance_totals`). The answer depends only on the pod's QoS class, the zones (ids,
    amounts, costs) and the request, and is remembered by them (nodes alike ask alike)."""
    key = (qos, tuple((z.numa_id, tuple(sorted(z.resources.items())), tuple(sorted(z.costs.items())))
                      for z in zones), tuple(sorted(resources.items())))
    hit = _REQUIRED.get(key)
    if hit is None:
        hit = remember(_REQUIRED, key, _numa_nodes_required(qos, zones, resources), REQUIRED_SIZE)
    return hit


#: :func:`numa_nodes_required`'s answers by (QoS class, zones, request); cleared beyond
#: :data:`REQUIRED_SIZE` entries
_REQUIRED: dict[Hashable, tuple[frozenset[int] | None, bool]] = {}
REQUIRED_SIZE = 1 << 14
#: the most k-combinations of a node's zones :func:`numa_nodes_required` compares for one k
#: (C(34, 4) = 46,376 fits; C(34, 5) = 278,256 does not)
MAX_COMBINATIONS = 100_000


def _numa_nodes_required(qos: QOSClass, zones: Sequence[NumaZone], resources: Amounts) -> tuple[frozenset[int] | None, bool]:
    layout = tuple((z.numa_id, tuple(sorted(z.costs.items()))) for z in zones)
    # _valid_combination: the zones that publish every requested resource
    publishes = np.array([all(res in z.resources for res in resources) for z in zones], dtype=np.bool_)
    # _fits: the requests is_resource_set_suitable checks, with every zone's amount
    needs = [(np.array([z.resources.get(res, 0) for z in zones], dtype=np.int64), qty)
             for res, qty in resources.items()
             if qty != 0 and not (qos is not QOSClass.GUARANTEED and is_numa_affine(res))]
    # A combination fits only if every zone in it publishes every requested resource and its
    # amounts add up to each request; a subset of the publishing zones never adds up to more
    # than all of them together. When even all of them fall short (or none publishes), no
    # combination of any size fits: the answer without enumerating 2^n combinations (on a
    # 34-zone GB200 tray, a pod asking for a resource no zone has would otherwise walk all).
    eligible = np.flatnonzero(publishes)
    if eligible.size == 0 or any(int(np.clip(have[eligible], 0, None).sum()) < qty for have, qty in needs):
        return None, False
    for size in range(1, len(zones) + 1):
        count = comb(len(zones), size)
        if count > MAX_COMBINATIONS:
            raise InputError(
                f"LeastNUMANodes would compare {count:,} combinations of {size} of the "
                f"{len(zones)} NUMA zones (scheduler-plugins enumerates every one), more than the "
                f"cap of {MAX_COMBINATIONS:,} (nrt_scores.MAX_COMBINATIONS)", "zones")
        combos, totals, lowest = _distance_totals(layout, size)
        ok = publishes[combos].all(axis=1)
        for have, qty in needs:
            ok &= have[combos].sum(axis=1) >= qty
        fitting = np.flatnonzero(ok)
        if not fitting.size:
            continue
        at = totals[fitting]
        optimal = np.flatnonzero(at == lowest)
        if optimal.size:  # the first fitting combination at the lowest distance of all
            return frozenset(zones[int(i)].numa_id for i in combos[fitting[optimal[0]]]), True
        first = int(np.argmin(at))  # else the first fitting one at the least distance
        if int(at[first]) < (MAX_DISTANCE_VALUE + 1) * size * size:
            return frozenset(zones[int(i)].numa_id for i in combos[fitting[first]]), False
    return None, False


@lru_cache(maxsize=256)
def _distance_totals(
    layout: tuple[tuple[int, tuple[tuple[int, int], ...]], ...], size: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], int]:
    """Every combination of ``size`` zone positions, one row each (``itertools.combinations``
    order), its total cost over all ordered pairs (:func:`nodes_avg_distance` times
    ``size * size``), and the lowest total, capped like :func:`min_avg_distance_in_combinations`
    at 255 each."""
    ids = [nid for nid, _ in layout]
    costs = [dict(c) for _, c in layout]
    rows = list(combinations(range(len(layout)), size))
    totals = [sum(costs[a].get(ids[b], MAX_DISTANCE_VALUE) for a in combo for b in combo) for combo in rows]
    cap = MAX_DISTANCE_VALUE * size * size
    combos = np.array(rows, dtype=np.int64).reshape(len(rows), size)
    return combos, np.array(totals, dtype=np.int64), min(min(totals, default=cap), cap)


def fewest_zones(qos: QOSClass, zones: Sequence[NumaZone], resources: Amounts,
                 descending: Mapping[str, Sequence[int]] | None = None) -> int:
    """A lower bound of the zone count :func:`numa_nodes_required` answers (when it answers
    one): for every request :func:`_fits` checks, the fewest zones whose largest amounts add
    up to it (0 for a request with nothing to check; the zone count when even all fall short).
    ``descending``: each resource's amounts over the zones, largest first
    (:func:`descending_amounts` of ``zones``), when the caller keeps them."""
    fewest = 0
    for res, qty in resources.items():
        if qty == 0 or (qos is not QOSClass.GUARANTEED and is_numa_affine(res)):
            continue
        amounts = descending.get(res) if descending is not None else None
        if amounts is None:
            amounts = sorted((z.resources.get(res, 0) for z in zones), reverse=True)
        total = k = 0
        for have in amounts:
            if total >= qty:
                break
            total += have
            k += 1
        fewest = max(fewest, k if total >= qty else len(zones))
    return fewest


def descending_amounts(zones: Sequence[NumaZone]) -> dict[str, tuple[int, ...]]:
    """Per resource any zone publishes, its amount on every zone (0 where a zone lacks it),
    largest first: what :func:`fewest_zones` sorts."""
    names = {r for z in zones for r in z.resources}
    return {r: tuple(sorted((z.resources.get(r, 0) for z in zones), reverse=True)) for r in names}


def only_non_numa_resources(zones: Sequence[NumaZone], resources: Amounts) -> bool:
    """``onlyNonNUMAResources``: no zone publishes any of the requested resources."""
    return not any(res in z.resources for res in resources for z in zones)


def subtract_from_numas(resources: Amounts, zones: Sequence[NumaZone], numa_ids: Iterable[int]) -> None:
    """``subtractFromNUMAs``: take each request from the given zones in id order, draining
    a zone before moving to the next."""
    by_id = {z.numa_id: z for z in zones}
    for res, qty in resources.items():
        left = qty
        for nid in sorted(numa_ids):
            if left == 0:
                break
            avail = by_id[nid].resources
            if res not in avail:
                continue
            if left >= avail[res]:
                left -= avail[res]
                avail[res] = 0
            else:
                avail[res] -= left
                left = 0


def least_numa_container_scope_score(qos: QOSClass, containers: Sequence[Amounts], zones: Sequence[NumaZone]) -> int:
    """``leastNUMAContainerScopeScore``: containers in admission order (init, then app)."""
    work = [NumaZone(z.numa_id, dict(z.resources), dict(z.costs)) for z in zones]
    largest = 0
    all_optimal = True
    for req in containers:
        if only_non_numa_resources(work, req):
            continue
        ids, optimal = numa_nodes_required(qos, work, req)
        if ids is None:
            return 0
        all_optimal = all_optimal and optimal
        largest = max(largest, len(ids))
        subtract_from_numas(req, work, ids)
    if largest == 0:
        return MAX_NODE_SCORE
    return normalize_score(largest, all_optimal)


def least_numa_pod_scope_score(qos: QOSClass, effective: Amounts, zones: Sequence[NumaZone]) -> int:
    """``leastNUMAPodScopeScore``: the pod's effective request at once."""
    if only_non_numa_resources(zones, effective):
        return MAX_NODE_SCORE
    ids, optimal = numa_nodes_required(qos, zones, effective)
    if ids is None:
        return 0
    return normalize_score(len(ids), optimal)


__all__ = [
    "HIGHEST_NUMA_ID",
    "MAX_DISTANCE_VALUE",
    "ZONE_STRATEGIES",
    "NumaZone",
    "balanced_allocation_zone",
    "container_scope_score",
    "descending_amounts",
    "exact_variance",
    "fewest_zones",
    "find_suitable_combination",
    "least_allocated_zone",
    "least_numa_container_scope_score",
    "least_numa_pod_scope_score",
    "min_avg_distance_in_combinations",
    "most_allocated_zone",
    "nodes_avg_distance",
    "normalize_score",
    "numa_nodes_required",
    "only_non_numa_resources",
    "pod_scope_score",
    "score_for_each_numa",
    "subtract_from_numas",
    "value",
]
