"""Hint merging: the kubelet's product fold, computed without enumerating the product.

The kubelet (``topologymanager.HintMerger``) walks the cartesian product of the per-resource
hint lists, merges each permutation (AND of the non-``None`` affinities with the all-nodes
default mask; preferred iff every picked hint is preferred *and* every non-``None`` affinity
equals the first one), and folds the merged hints with ``compare``. At 8 NUMA nodes and 4
providers of 255 hints that is 4.2 billion permutations.

Why an exact shortcut exists
============================
1. **The fold is a minimum over a total order.** Read case by case, ``compare(current,
   candidate)`` always returns whichever of the two is smaller under one fixed total order
   on merged hints (empty merged masks never win and are dropped):

   * preferred before non-preferred;
   * preferred hints: by ``fitter`` - popcount first, then (``prefer-closest-numa-nodes``)
     the average distance, then the integer value (``Narrowest``/``Closest``; identical
     masks keep ``current``, and identical masks give identical hints anyway);
   * non-preferred hints, with ``B = bestNonPreferredAffinityCount``: popcount ``== B``
     first; then popcounts below ``B``, larger first; then popcounts above ``B``, smaller
     first; equal popcounts by ``fitter``.

   Checking the 7 branches of ``compare`` against this order is mechanical (the
   hypothesis test ``tests/test_merge_exact.py`` checks it on random inputs too). A fold
   that keeps the smaller of two under a total order returns the global minimum, so the
   result depends only on the **set** of merged hints, not on the enumeration order - and
   not on Go's random map order of resources.

2. **The preferred merged hints are found by intersection.** A permutation merges to a
   preferred hint iff each list contributes a preferred hint whose affinity is ``None`` or
   one common mask ``M``. So the candidates are the masks ``M`` that every list accepts as
   preferred (or as a preferred ``None``), plus "all ``None``" = the default mask. That is a
   set intersection, linear in the total number of hints; for a
   :class:`~numalign.hints.GeneratedHints` list the preferred masks (all of popcount
   ``preferred_size``) are enumerated in increasing integer order, which for one popcount is
   the kubelet's narrowness order, so the first common one is the answer.

3. **Otherwise every merged hint is non-preferred** and the answer is the best reachable
   AND. The set of reachable ANDs is built list by list (``R := {r & m}``), de-duplicated:
   its size is bounded by the number of distinct masks (``2^N``), not by the product of the
   list lengths, and masks that became empty are dropped at once. For machines larger than
   :data:`MATERIALIZE_LIMIT` nodes with rule-generated lists, candidates ``X`` are visited
   in the order of the non-preferred ranking and the first reachable one is returned;
   reachability of ``X`` is decided exactly by a search that chooses one option per list
   and must exclude every node outside ``X`` (monotone rules make "can this list also drop
   node b" a single feasibility test). This last search is exponential in the worst case;
   it is reached only when no preferred hint exists on a machine above the limit.

If nothing is reachable (every permutation ANDs to the empty mask, or a list is empty) the
result is the kubelet's ``(default mask, not preferred)``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from numalign.bitmask import ids_of, masks_of_size
from numalign.hints import GeneratedHints, HintList, TopologyHint

#: Rule-generated lists on machines with at most this many NUMA nodes are listed out.
MATERIALIZE_LIMIT = 10


@dataclass(frozen=True)
class FitOrder:
    """How two masks of one popcount compare (kubelet ``Narrowest`` or ``Closest``).

    ``distances`` is None for Narrowest; for Closest it maps node id -> node id -> distance.
    """

    distances: Mapping[int, Mapping[int, int]] | None = None

    def average_distance(self, mask: int) -> float:
        """kubelet ``CalculateAverageFor``: mean over ordered pairs, float64 arithmetic."""
        if self.distances is None or mask == 0:
            return 0.0
        bits = ids_of(mask)
        total = 0.0
        n = 0
        for i in bits:
            row = self.distances[i]
            for j in bits:
                total += float(row[j])
                n += 1
        return total / n

    def key(self, mask: int) -> tuple[float, int]:
        """Sort key among masks of equal popcount."""
        if self.distances is None:
            return (0.0, mask)
        return (self.average_distance(mask), mask)


NARROWEST = FitOrder()


def preferred_key(fit: FitOrder) -> Callable[[int], tuple[int, float, int]]:
    def key(mask: int) -> tuple[int, float, int]:
        d, m = fit.key(mask)
        return (mask.bit_count(), d, m)

    return key


def non_preferred_key(fit: FitOrder, best_count: int) -> Callable[[int], tuple[int, int, float, int]]:
    """The non-preferred ranking of the module docstring, as a sort key."""

    def key(mask: int) -> tuple[int, int, float, int]:
        c = mask.bit_count()
        d, m = fit.key(mask)
        if c == best_count:
            return (0, 0, d, m)
        if c < best_count:
            return (1, -c, d, m)
        return (2, c, d, m)

    return key


# --------------------------------------------------------------------------- list views


class _View:
    """What the merge needs to know about one hint list."""

    __slots__ = ("gen", "has_nil", "masks", "pref_masks", "pref_nil")

    def __init__(self, hints: HintList) -> None:
        self.gen: GeneratedHints | None = None
        self.pref_nil = False
        self.has_nil = False
        self.masks: set[int] = set()
        self.pref_masks: set[int] = set()
        if isinstance(hints, GeneratedHints):
            self.gen = hints
            return
        for h in hints:
            if h.affinity is None:
                self.has_nil = True
                self.pref_nil = self.pref_nil or h.preferred
            else:
                self.masks.add(h.affinity)
                if h.preferred:
                    self.pref_masks.add(h.affinity)

    def accepts_preferred(self, mask: int) -> bool:
        if self.gen is not None:
            return self.gen.contains(mask) and self.gen.preferred(mask)
        return self.pref_nil or mask in self.pref_masks

    def narrowest_count(self) -> int | None:
        """popcount of the narrowest non-None affinity (None if the list has none)."""
        if self.gen is not None:
            g = self.gen
            best: int | None = min((m.bit_count() for m in g.extra), default=None)
            if g.universe and g.feasible(g.universe):
                limit = g.universe.bit_count() if best is None else best - 1
                universe_ids = ids_of(g.universe)
                for k in range(1, limit + 1):
                    if any(g.feasible(m) for m in masks_of_size(universe_ids, k)):
                        return k
                if best is None:
                    best = g.universe.bit_count()
            return best
        if not self.masks:
            return None
        return min(m.bit_count() for m in self.masks)

    def options(self, default: int) -> set[int]:
        """Explicit lists: the distinct masks a pick can contribute (None -> default)."""
        out = {m & default for m in self.masks}
        if self.has_nil:
            out.add(default)
        return out


# --------------------------------------------------------------------------- the merge


def merge_lists(
    lists: Sequence[HintList], default: int, fit: FitOrder = NARROWEST
) -> TopologyHint:
    """The kubelet HintMerger result for flattened hint lists (see module docstring)."""
    if any(not isinstance(h, GeneratedHints) and len(h) == 0 for h in lists):
        return TopologyHint(default, False)  # an empty list: empty product
    views = [_View(h) for h in lists]

    best = _best_preferred(views, default, fit)
    if best is not None:
        return TopologyHint(best, True)

    # No preferred merged hint: on small machines list generated sets out (2^N masks each)
    if default.bit_count() <= MATERIALIZE_LIMIT:
        views = [_View(v.gen.materialize()) if v.gen is not None else v for v in views]
    counts = [c for c in (v.narrowest_count() for v in views) if c is not None]
    best_count = max(counts, default=0)
    key = non_preferred_key(fit, best_count)
    if all(v.gen is None for v in views):
        found = _best_reachable_explicit(views, default, key)
    else:
        found = _best_reachable_search(views, default, best_count, fit)
    if found is None:
        return TopologyHint(default, False)
    return TopologyHint(found, False)


def _best_preferred(views: list[_View], default: int, fit: FitOrder) -> int | None:
    key = preferred_key(fit)
    candidates: set[int] = set()
    explicit = [v for v in views if v.gen is None]
    generated = [v for v in views if v.gen is not None]
    sources = [v for v in explicit if not v.pref_nil]
    if sources:
        # every preferred permutation picks one of this list's preferred masks
        pool: set[int] = min((v.pref_masks for v in sources), key=len)
    else:
        if not generated and default:
            candidates.add(default)  # every list can pick a preferred None
        pool = set().union(*(v.pref_masks for v in explicit))
        if generated:
            pool |= set(_generated_preferred_candidates(generated[0], views, fit))
    for m in pool:
        merged = m & default
        if merged and all(v.accepts_preferred(m) for v in views):
            candidates.add(merged)
    return min(candidates, key=key) if candidates else None


def _generated_preferred_candidates(
    source: _View, views: list[_View], fit: FitOrder
) -> Iterator[int]:
    g = source.gen
    assert g is not None
    ordered = g.preferred_masks()
    if ordered is None:
        for m in g.masks():
            if g.preferred(m) and all(v.accepts_preferred(m) for v in views):
                yield m
        return
    for m in ordered:
        if all(v.accepts_preferred(m) for v in views):
            yield m
            if fit.distances is None and m not in g.extra:
                return  # increasing integer order at one popcount: the first is the best


def _best_reachable_explicit(
    views: list[_View], default: int, key: Callable[[int], tuple[int, int, float, int]]
) -> int | None:
    reach = {default}
    # Lists with few distinct options first keeps the reachable set small.
    for opts in sorted((v.options(default) for v in views), key=len):
        if default in opts and len(opts) == 1:
            continue
        reach = {r & m for r in reach for m in opts}
        reach.discard(0)
        if not reach:
            return None
    return min(reach, key=key)


# ------------------------------------------------ large machines with generated lists


def _best_reachable_search(
    views: list[_View], default: int, best_count: int, fit: FitOrder
) -> int | None:
    support = default
    for v in views:
        if v.gen is not None:
            support &= v.gen.universe | _or_all(v.gen.extra)
        elif not v.has_nil:
            support &= _or_all(v.masks)
    ids = ids_of(support)
    n = len(ids)
    order: list[int] = []
    if 1 <= best_count <= n:
        order.append(best_count)
    order += [c for c in range(min(best_count - 1, n), 0, -1)]
    order += list(range(max(best_count + 1, 1), n + 1))
    for size in order:
        hits: list[int] = []
        for x in masks_of_size(ids, size):
            if _reachable(x, views, default):
                if fit.distances is None:
                    return x
                hits.append(x)
        if hits:
            return min(hits, key=fit.key)
    return None


def _or_all(masks: Iterable[int]) -> int:
    out = 0
    for m in masks:
        out |= m
    return out


def _reachable(x: int, views: list[_View], default: int) -> bool:
    """Can one pick per list AND to exactly ``x``?"""
    fixed: list[list[int]] = []  # per explicit list: exclusion masks of picks containing x
    gens: list[GeneratedHints] = []
    for v in views:
        if v.gen is None:
            excl = [default & ~m for m in v.options(default) if m & x == x]
            if not excl:
                return False
            fixed.append(excl)
        else:
            gens.append(v.gen)
    target = default & ~x

    def choose_gen(i: int, covered: int, monotone: list[GeneratedHints]) -> bool:
        if i == len(gens):
            return _cover(target & ~covered, x, monotone)
        g = gens[i]
        # the monotone part: its largest option excludes everything outside the universe
        if (
            x & ~g.universe == 0
            and g.feasible(g.universe)
            and choose_gen(i + 1, covered | (default & ~g.universe), [*monotone, g])
        ):
            return True
        return any(
            choose_gen(i + 1, covered | (default & ~e), monotone)
            for e in g.extra
            if e & x == x
        )

    def choose_fixed(i: int, covered: int) -> bool:
        if i == len(fixed):
            return choose_gen(0, covered, [])
        return any(choose_fixed(i + 1, covered | e) for e in fixed[i])

    return choose_fixed(0, 0)


def _cover(rest: int, x: int, gens: list[GeneratedHints]) -> bool:
    """Assign every node of ``rest`` to a generated list that can still drop it."""
    if rest == 0:
        return True
    if not gens:
        return False
    bits = ids_of(rest)
    excluded = [0] * len(gens)

    def go(k: int) -> bool:
        if k == len(bits):
            return True
        b = 1 << bits[k]
        for i, g in enumerate(gens):
            if not g.universe & b:
                continue
            e = excluded[i] | b
            if g.feasible(g.universe & ~e):
                excluded[i] = e
                if go(k + 1):
                    return True
                excluded[i] = e & ~b
        return False

    return go(0)


# ------------------------------------------------------------- the pre-1.21 merge rule


def merge_lists_legacy(lists: Sequence[HintList], default: int) -> TopologyHint:
    """The old kubelet fold that Volcano's ``numa-aware`` plugin still runs.

    A merged hint is preferred iff every picked hint is preferred (no equal-mask rule) and the
    fold keeps the narrowest hint of the best preference class (no
    ``bestNonPreferredAffinityCount`` ranking). The result is again a minimum over a total
    order (preferred first, then narrowness), so it is computed from reachable ANDs.
    """
    if any(not isinstance(h, GeneratedHints) and len(h) == 0 for h in lists):
        return TopologyHint(default, False)
    explicit = [h.materialize() if isinstance(h, GeneratedHints) else list(h) for h in lists]

    def reach(pick_preferred: bool) -> set[int]:
        out = {default}
        for hints in explicit:
            opts = {
                default if h.affinity is None else h.affinity & default
                for h in hints
                if h.preferred or not pick_preferred
            }
            out = {r & m for r in out for m in opts}
            out.discard(0)
            if not out:
                break
        return out

    preferred = reach(True)
    if preferred:
        return TopologyHint(min(preferred, key=lambda m: (m.bit_count(), m)), True)
    anything = reach(False)
    if anything:
        return TopologyHint(min(anything, key=lambda m: (m.bit_count(), m)), False)
    return TopologyHint(default, False)
