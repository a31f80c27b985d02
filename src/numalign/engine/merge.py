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

2. **Preferred merged hints: a common mask.** A permutation merges to a preferred hint iff
   each list contributes a preferred hint whose affinity is ``None`` or one common mask
   ``M``. So the candidates are the masks ``M`` that every list accepts as preferred (or
   skips with a preferred ``None``), plus "all ``None``" = the default mask.

   * If some explicit list has no preferred ``None``, ``M`` is one of its preferred masks:
     a finite pool, checked against every list (linear in the number of hints). Extra
     masks of generated lists are such a finite pool too.
   * Otherwise every generated list must hold ``M`` in its monotone part as a preferred
     mask. Preference there is a popcount (``preferred_size``), or touching exactly ``g``
     of some groups (``align-by-socket``). Lists with different preferred sizes (the CPU
     manager's 2 nodes, the memory manager's 1 - the usual case on a large machine) have
     no common preferred mask: answered at once. With one common size ``q`` the best
     ``M`` is the best ``q``-subset that every family admits (step 4, with the
     *joint* oracle :func:`~numalign.engine.merge_search.joint_reach`: "can the required nodes
     grow by at most ``q - |required|`` allowed nodes into a mask every family accepts?").

3. **Non-preferred: the best reachable AND.** With no preferred merged hint the answer is
   the minimum of the reachable ANDs under the non-preferred ranking. The search chooses,
   list by list, one *fixed* option (an explicit mask, ``None`` = the default, or an extra
   mask of a generated list) or a generated list's *monotone part*; a depth-first search
   over these choices keeps the AND of the fixed ones (``cap``), de-duplicates states, and
   cuts every branch whose lower bound - the best rank any non-empty subset of what can
   still be kept could have - is no better than the best found (children are visited best
   bound first). At a leaf whose lists all picked fixed masks the AND is the candidate. At
   a leaf where families ``J`` picked their monotone part the reachable ANDs are
   ``{cap ∩ P_j ...}`` over feasible picks ``P_j``, and those are **up-closed** inside
   ``W = cap ∩ ⋂ U_j``: if picks AND to ``X``, the picks ``P_j | Y`` (still feasible,
   monotone) AND to ``X | Y`` for any ``Y ⊆ W``. Hence

   * ``W`` itself is reachable, and if ``|W| <= B`` it is the answer (the largest
     reachable mask and the only one of its size);
   * if anything of size ``<= B`` is reachable then so is a mask of exactly ``B`` nodes
     (the first class of the ranking), else the answer has the smallest reachable size
     ``c > B`` (binary search; reachability of a size is monotone);
   * among masks of that size the fit order decides (step 4) with the oracle
     :func:`~numalign.engine.merge_search.and_reach`: "can one feasible pick per family AND to a
     mask that holds the required nodes, avoids the excluded ones and has at most ``c``
     nodes?" - each node is assigned to a family that drops it from its pick, or kept.
     First asked with every node excluded: if the empty AND is reachable (a small family
     and a wide one with disjoint picks - the usual case), every non-empty subset of ``W``
     is, and no oracle is needed at all.

4. **The best subset of one size.** ``Narrowest``: integer order among masks of one
   popcount compares the highest element first, so the answer is built from the top by
   at most ``min(n, q log n)`` oracle calls (:func:`~numalign.engine.merge_order.colex_best`).
   ``Closest``: a branch and bound in increasing integer order over runs of
   interchangeable nodes (:func:`~numalign.engine.merge_order.closest_best`); when every subset is
   admitted and more than half of the nodes are wanted it chooses the complement instead
   (a shifted diagonal, the largest integer first), a much smaller tree.

If nothing is reachable (every permutation ANDs to the empty mask, or a list is empty) the
result is the kubelet's ``(default mask, not preferred)``.

Exactness
=========
Every shortcut above is an equivalence, not a heuristic: the oracles decide their question
exactly (their searches only prune by valid bounds, by memoised failures and by exchanging
interchangeable nodes), and every cut in the outer searches compares a valid lower bound
with a candidate actually reached. The hypothesis tests in ``tests/test_merge_search.py``
compare the result with the kubelet's fold on up to 6 NUMA nodes and 5 providers (rule
families of every kind the managers build, the managers' own hint sets on machines filled by
random admissions, explicit lists, Narrowest and Closest), and with a brute force over all
2^N masks on 10 to 16 NUMA nodes.

Cost
====
* Explicit lists only: small inputs (at most :data:`SMALL_FOLD_STEPS` steps to build the
  set of reachable ANDs list by list; on nodes ``0..n-1`` with ``n <= 8`` the sets are
  bitmaps, one step per option) take the intersection of step 2 and that set directly -
  8-20 us for products of 770-3,400 permutations, where the Go fold's estimate is 26-115
  us (below ~500 permutations the Go estimate, 0.1-8 us, is under Python's fixed cost of
  5-15 us); otherwise the depth-first search
  visits at most the distinct partial ANDs (never more than the product, nor than ``2^N``
  per list) and in practice a small part of them: 3 lists of 300 random masks on 32 nodes
  take 8-25 ms where the kubelet's fold walks 27 million permutations (~0.9 s in Go); 5
  lists of 64 "all nodes but one" masks on 64 nodes take < 1 ms (the fold: 10^9
  permutations). ``make bench`` (``benchmarks/merge_bench.py``) prints both side by side.
* Rule-generated lists: polynomial in the number of nodes when the oracles' first tries
  succeed (one family does the dropping alone, the empty AND is reachable, the classes of
  interchangeable nodes are few): the merge-scaling cases of issue 14 take 0.2-4 ms on
  8-64 nodes, a Guaranteed pod on the 64-node SGI capture 1-11 ms, random loaded 64-node
  machines with 2-5 providers a median of 8 ms. The oracles embed NP-hard problems
  (deciding whether two capacity families can drop disjoint halves of the machine is
  PARTITION; the closest subset is a minimum-sum k-subgraph), so they are exponential in
  the worst case, which is bounded by the step budget below; the slowest real shape found
  is prefer-closest with a pod spanning 20-45 of 64 nodes: at most 2,200 steps, 10-30 ms
  (was 50-170 ms before the complement search).

Caps
====
Every search step of one merge is counted; more than
:data:`numalign.engine.merge_budget.STEP_LIMIT` (100,000: seconds of CPU, ten times the
heaviest realistic merge measured) raises
:class:`MergeTooLarge`, an :class:`~numalign.errors.InputError` naming the search that ran
out, instead of hanging. Generated lists without a :class:`~numalign.engine.hints.Demand` (an
opaque ``feasible``) are merged exactly but every node is its own class, so on large
machines they may hit the cap; the managers always describe their rules. The legacy
(Volcano) merge lists rule-generated lists out up to :data:`LEGACY_LISTING_LIMIT` nodes and
handles larger machines in the one shape Volcano produces (one generated list), else raises
:class:`MergeTooLarge`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from numalign.engine.bitmask import ids_of, masks_of_size
from numalign.engine.hints import GeneratedHints, HintList, TopologyHint
from numalign.engine.merge_budget import Budget, MergeTooLarge
from numalign.engine.merge_order import CachedOracle, closest_best, colex_best
from numalign.engine.merge_search import (
    Family,
    Groups,
    best_and,
    joint_reach,
    joint_witness,
    min_size,
    signature,
)
from numalign.engine.merge_tiny import fold_tiny, tiny_permutations
from numalign.record import Record, set_field

__all__ = [
    "LEGACY_LISTING_LIMIT",
    "MATERIALIZE_LIMIT",
    "NARROWEST",
    "FitOrder",
    "MergeTooLarge",
    "merge_lists",
    "merge_lists_legacy",
    "non_preferred_key",
    "preferred_key",
]

#: Rule-generated lists on machines with at most this many NUMA nodes are listed out for
#: the non-preferred search (15 masks: listing is then cheaper than reasoning).
MATERIALIZE_LIMIT = 4

#: The legacy (Volcano) merge lists rule-generated lists out up to this many NUMA nodes.
LEGACY_LISTING_LIMIT = 12


class FitOrder(Record, frozen=True):
    """How two masks of one popcount compare (kubelet ``Narrowest`` or ``Closest``).

    ``distances`` is None for Narrowest; for Closest it maps node id -> node id -> distance.
    """

    __slots__ = ("distances",)
    distances: Mapping[int, Mapping[int, int]] | None

    def __init__(self, distances: Mapping[int, Mapping[int, int]] | None = None) -> None:
        set_field(self, "distances", distances)

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

NonPreferredKey = tuple[int, int, float, int]


def preferred_key(fit: FitOrder) -> Callable[[int], tuple[int, float, int]]:
    def key(mask: int) -> tuple[int, float, int]:
        d, m = fit.key(mask)
        return (mask.bit_count(), d, m)

    return key


def non_preferred_key(fit: FitOrder, best_count: int) -> Callable[[int], NonPreferredKey]:
    """The non-preferred ranking of the module docstring, as a sort key."""

    def key(mask: int) -> NonPreferredKey:
        c = mask.bit_count()
        d, m = fit.key(mask)
        if c == best_count:
            return (0, 0, d, m)
        if c < best_count:
            return (1, -c, d, m)
        return (2, c, d, m)

    return key


def _lowest_bits(mask: int, k: int) -> int:
    """The ``k`` lowest set bits of ``mask``: the smallest integer among its k-subsets."""
    c = mask.bit_count()
    if c <= k:
        return mask
    if k <= c - k:
        out = 0
        for _ in range(k):
            low = mask & -mask
            out |= low
            mask ^= low
        return out
    for _ in range(c - k):
        mask ^= 1 << (mask.bit_length() - 1)
    return mask


def non_preferred_bound(
    fit: FitOrder, best_count: int
) -> Callable[[int], NonPreferredKey]:
    """A lower bound of the ranking key over the non-empty subsets of a mask."""
    key = non_preferred_key(fit, best_count)

    def bound(mask: int) -> NonPreferredKey:
        c = mask.bit_count()
        if best_count == 0:
            return (2, 1, 0.0, mask & -mask)
        if c >= best_count:
            return (0, 0, 0.0, _lowest_bits(mask, best_count))
        return key(mask)  # a smaller subset ranks lower: the mask itself is the best

    return bound


# --------------------------------------------------------------------------- list views


class _View:
    """What the merge needs to know about one hint list."""

    __slots__ = ("family", "gen", "has_nil", "masks", "pref_masks", "pref_nil")

    def __init__(self, hints: HintList, shared: dict[int, Family | None] | None = None) -> None:
        self.gen: GeneratedHints | None = None
        self.family: Family | None = None
        self.pref_nil = False
        self.has_nil = False
        self.masks: set[int] = set()
        self.pref_masks: set[int] = set()
        if isinstance(hints, GeneratedHints):
            self.gen = hints
            # one Family per rule object: the memory manager hands the same rule to every
            # memory resource (memory, hugepages-*)
            if shared is not None and id(hints) in shared:
                self.family = shared[id(hints)]
                return
            u = hints.universe
            if u and hints.feasible(u):
                self.family = Family(hints)
            if shared is not None:
                shared[id(hints)] = self.family
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

    def narrowest_count(self, budget: Budget | None = None) -> int | None:
        """popcount of the narrowest non-None affinity (None if the list has none)."""
        if self.gen is not None:
            best: int | None = min((m.bit_count() for m in self.gen.extra), default=None)
            if self.family is not None:
                k = min_size(self.family, budget or Budget())
                if k is not None and (best is None or k < best):
                    best = k
            return best
        if not self.masks:
            return None
        return min(m.bit_count() for m in self.masks)

    def options(self, default: int) -> list[int]:
        """The distinct non-empty masks a pick can contribute (None -> default)."""
        if self.gen is not None:
            out = {m & default for m in self.gen.extra}
        else:
            out = {m & default for m in self.masks}
            if self.has_nil:
                out.add(default)
        out.discard(0)
        return sorted(out)


# --------------------------------------------------------------------------- the merge


def merge_lists(
    lists: Sequence[HintList], default: int, fit: FitOrder = NARROWEST
) -> TopologyHint:
    """The kubelet HintMerger result for flattened hint lists (see module docstring).

    Raises :class:`MergeTooLarge` (an InputError) when the exact answer would need more
    than :data:`numalign.engine.merge_budget.STEP_LIMIT` search steps.
    """
    if fit.distances is None and tiny_permutations(lists):
        return fold_tiny(lists, default)  # type: ignore[arg-type]  # all explicit
    kind = _small_explicit(lists, default)
    if kind == _EMPTY:
        return TopologyHint(default, False)  # an empty list: empty product
    if kind == _SMALL:
        return _fold_small(lists, default, fit)  # type: ignore[arg-type]  # all explicit
    budget = Budget()
    shared: dict[int, Family | None] = {}
    views = [_View(h, shared) for h in lists]

    best = _best_preferred(views, default, fit, budget)
    if best is not None:
        return TopologyHint(best, True)

    if default.bit_count() <= MATERIALIZE_LIMIT:
        views = [_View(v.gen.materialize()) if v.gen is not None else v for v in views]
    sizes: dict[int, int | None] = {}
    counts = []
    for v in views:
        if v.gen is not None and id(v.gen) in sizes:
            c = sizes[id(v.gen)]
        else:
            c = v.narrowest_count(budget)
            if v.gen is not None:
                sizes[id(v.gen)] = c
        if c is not None:
            counts.append(c)
    found = _best_non_preferred(views, default, max(counts, default=0), fit, budget)
    return TopologyHint(default if found is None else found, False)


# --------------------------------------------------------------------------- small inputs

#: Explicit inputs whose set of reachable ANDs takes at most this many AND operations to
#: build are merged directly (cheaper than setting up the searches).
SMALL_FOLD_STEPS = 3000


_LARGE, _SMALL, _EMPTY = 0, 1, 2


def _small_explicit(lists: Sequence[HintList], default: int) -> int:
    """``_EMPTY`` if a list is empty (the product is), ``_SMALL`` if every list is explicit
    and the small-input fold costs at most :data:`SMALL_FOLD_STEPS` steps, else ``_LARGE``.

    A step is one AND of a reachable mask with an option; on nodes ``0..n-1`` with ``n <=``
    :data:`BITMAP_NODES` one option costs a lookup (``n <=`` :data:`CHUNKED_NODES`) or ``n``
    shifts of a bitmap, whatever the number of reachable masks."""
    n = default.bit_count()
    bitmap = n <= BITMAP_NODES and default & (default + 1) == 0
    per_option = 1 if n <= CHUNKED_NODES else n
    states = 1
    cap = 2 * (1 << n) + 1 if n < 20 else 1 << 62
    steps = 0
    small = True
    for h in lists:
        if isinstance(h, GeneratedHints):
            small = False
            continue
        k = len(h)
        if k == 0:
            return _EMPTY
        if small:
            steps += k * per_option if bitmap else states * k
            if steps > SMALL_FOLD_STEPS:
                small = False
            states = min(states * k, cap)
    return _SMALL if small else _LARGE


def _fold_small(lists: Sequence[Sequence[TopologyHint]], default: int, fit: FitOrder) -> TopologyHint:
    """Small explicit inputs: the preferred candidates by intersection (module docstring, 2),
    else the minimum of the set of reachable ANDs, built list by list.

    Written for the least interpreter work per hint (this path serves the kubelet's own
    input sizes, where the Go fold costs only microseconds): one pass per list, the largest
    option set taken first (its AND with the default is itself), and the Narrowest ranking
    by popcount without building sort keys."""
    # preferred: a mask every list without a preferred None holds as a preferred affinity
    prefs = [{h.affinity for h in hints if h.preferred} for hints in lists]
    strict = [p for p in prefs if None not in p]
    candidates: set[int]
    if strict:
        pool = min(strict, key=len) if len(strict) > 1 else strict[0]
        others = [p for p in strict if p is not pool]
        candidates = {m & default for m in pool if all(m in p for p in others)}  # type: ignore[operator]
    else:
        candidates = {m & default for p in prefs for m in p if m is not None}
        candidates.add(default)
    candidates.discard(0)
    if candidates:
        if len(candidates) == 1:
            return TopologyHint(candidates.pop(), True)
        if fit.distances is None:
            return TopologyHint(min([(m.bit_count(), m) for m in candidates])[1], True)
        return TopologyHint(min(candidates, key=preferred_key(fit)), True)
    # not preferred: the reachable ANDs
    options: list[set[int]] = []
    dense = default & (default + 1) == 0  # nodes 0..n-1: a mask inside it is <= default
    best_count = 0
    for hints in lists:
        masks = {h.affinity for h in hints}
        nil = None in masks
        if nil:
            masks.discard(None)
        opts: set[int] = masks  # type: ignore[assignment]  # None was discarded
        if opts:
            narrowest = min(map(int.bit_count, opts))
            if narrowest > best_count:
                best_count = narrowest
            if not dense or max(opts) > default:  # a node outside the default, maybe
                opts = {m & default for m in opts}
        if nil:
            opts.add(default)
        options.append(opts)
    n = default.bit_count()
    product = 1
    for opts in options:
        product *= len(opts)
    if product > 64 and dense and n <= BITMAP_NODES:
        found = _reach_by_bitmaps(options, n, best_count, fit)
        return TopologyHint(default if found is None else found, False)
    if product > 64:
        options.sort(key=len, reverse=True)  # the first set is free: the largest
    reach = options[0]
    for opts in options[1:]:
        reach = {r & m for r in reach for m in opts}
        reach.discard(0)
        if not reach:
            return TopologyHint(default, False)
    if 0 in reach:  # a hint without a node of the default
        reach = reach - {0}
        if not reach:
            return TopologyHint(default, False)
    if fit.distances is not None:
        return TopologyHint(min(reach, key=non_preferred_key(fit, best_count)), False)
    return TopologyHint(_narrowest_non_preferred(reach, best_count), False)


#: Machines with NUMA ids ``0..n-1`` for ``n`` up to this keep sets of masks as bitmaps
#: (bit ``x`` of an integer stands for mask ``x``) in the small-input fold.
BITMAP_NODES = 8

_BITMAP_TABLES: dict[int, tuple[list[int], list[int]]] = {}


def _bitmap_tables(n: int) -> tuple[list[int], list[int]]:
    """Per node ``i``: the bitmap of the masks without ``i``; per popcount ``c``: the bitmap of
    the masks with ``c`` nodes (masks of ``n`` nodes, ``0..2^n - 1``)."""
    got = _BITMAP_TABLES.get(n)
    if got is None:
        without = [sum(1 << x for x in range(1 << n) if not x >> i & 1) for i in range(n)]
        by_count = [sum(1 << x for x in range(1 << n) if x.bit_count() == c) for c in range(n + 1)]
        got = _BITMAP_TABLES[n] = (without, by_count)
    return got


#: Up to this many nodes (16 masks, a 16-bit set) the image of a set under ``AND m`` is
#: looked up in per-byte tables.
CHUNKED_NODES = 4

_CHUNKS: dict[int, list[tuple[list[int], list[int]]]] = {}


def _image_chunks(n: int) -> list[tuple[list[int], list[int]]]:
    """Per mask ``m`` of ``n <= 4`` nodes: the bitmap ``{x & m}`` of every set of masks held
    in one byte of a set's bitmap (low byte: masks 0..7, high byte: masks 8..15)."""
    got = _CHUNKS.get(n)
    if got is None:
        got = []
        for m in range(1 << n):
            tables: list[list[int]] = []
            for shift in (0, 8):
                row = [0] * 256
                for b in range(1, 256):
                    low = b & -b
                    x = low.bit_length() - 1 + shift
                    row[b] = row[b ^ low] | (1 << (x & m) if x < 1 << n else 0)
                tables.append(row)
            got.append((tables[0], tables[1]))
        _CHUNKS[n] = got
    return got


def _reach_by_bitmaps(options: list[set[int]], n: int, best_count: int, fit: FitOrder) -> int | None:
    """The best reachable AND (non-preferred ranking) on ``n`` nodes ``0..n-1``, the sets of
    reachable ANDs kept as bitmaps: ANDing every mask of a set with ``m`` clears the nodes
    outside ``m`` one by one, and clearing node ``i`` moves the masks holding ``i`` onto their
    counterparts without it (a shift by ``2^i``) - a few integer operations per option,
    however many masks the set holds."""
    without, by_count = _bitmap_tables(n)
    full = (1 << n) - 1
    options.sort(key=len, reverse=True)
    reach = 0
    for m in options[0]:
        reach |= 1 << m
    chunks = _image_chunks(n) if n <= CHUNKED_NODES else None
    for opts in options[1:]:
        nxt = 0
        if chunks is not None:
            # the image is OR-linear in the set: look it up byte by byte
            low_byte, high_byte = reach & 0xFF, reach >> 8
            for m in opts:
                t = chunks[m]
                nxt |= t[0][low_byte] | t[1][high_byte]
            reach = nxt & ~1
            if not reach:
                return None
            continue
        for m in opts:
            image = reach
            out = full & ~m
            while out:
                low = out & -out
                out ^= low
                z = without[low.bit_length() - 1]
                image = (image & z) | (image & ~z) >> low
            nxt |= image
        reach = nxt & ~1
        if not reach:
            return None
    reach &= ~1
    if not reach:
        return None
    group = reach & by_count[best_count] if best_count <= n else 0
    if not group:
        for c in range(min(best_count, n + 1) - 1, 0, -1):
            group = reach & by_count[c]
            if group:
                break
        else:
            for c in range(best_count + 1, n + 1):
                group = reach & by_count[c]
                if group:
                    break
    if fit.distances is None:
        return (group & -group).bit_length() - 1
    masks = []
    while group:
        low = group & -group
        group ^= low
        masks.append(low.bit_length() - 1)
    return min(masks, key=fit.key)


def _narrowest_non_preferred(masks: set[int], best_count: int) -> int:
    """The first of ``masks`` under the non-preferred ranking with ``Narrowest``: popcount
    ``best_count``, else the largest popcount below it, else the smallest above it; ties to
    the smallest integer. The rank ``b - c`` (``c <= b``) or ``c`` (``c > b``) orders the
    popcounts ``c`` that way."""
    b = best_count
    return min([(b - c if (c := m.bit_count()) <= b else c, m) for m in masks])[1]


# --------------------------------------------------------------------------- preferred


def _best_preferred(views: list[_View], default: int, fit: FitOrder, budget: Budget) -> int | None:
    key = preferred_key(fit)
    candidates: set[int] = set()
    explicit = [v for v in views if v.gen is None]
    generated = [v for v in views if v.gen is not None]
    strict = [v for v in explicit if not v.pref_nil]
    if strict:
        # every preferred permutation picks one of this list's preferred masks
        pool: set[int] = min((v.pref_masks for v in strict), key=len)
    else:
        if not generated and default:
            candidates.add(default)  # every list can pick a preferred None
        pool = set().union(*(v.pref_masks for v in explicit))
        for v in generated:
            assert v.gen is not None
            pool |= v.gen.extra
    for m in pool:
        merged = m & default
        if merged and all(v.accepts_preferred(m) for v in views):
            candidates.add(merged)
    best = min(candidates, key=key) if candidates else None
    if generated and not strict:
        limit = None if best is None else best.bit_count()
        found = _best_monotone_preferred(generated, default, fit, budget, limit)
        if found is not None and (best is None or key(found) < key(best)):
            best = found
    return best


def _best_monotone_preferred(
    views: list[_View], default: int, fit: FitOrder, budget: Budget, limit: int | None
) -> int | None:
    """The best mask every generated list holds in its monotone part, as a preferred hint."""
    fams: list[Family] = []
    w = default
    for v in views:
        if v.family is None:
            return None  # that list offers only its extra masks (in the finite pool)
        fams.append(v.family)
        w &= v.family.universe
    if w == 0:
        return None
    gens = [v.gen for v in views if v.gen is not None]
    free_size = [g for g in gens if g.is_preferred is not None or g.preferred_groups]
    fixed = {g.preferred_size for g in gens if g not in free_size}
    if len(fixed) > 1:
        return None  # a mask has one popcount: no common preferred size
    sizes = sorted(fixed) if fixed else range(1, w.bit_count() + 1)
    for q in sizes:
        if limit is not None and q > limit:
            break  # a finite candidate is narrower already
        if q < 1 or q > w.bit_count():
            continue
        loose = [g for g in free_size if g.preferred_size != q]
        found = _preferred_of_size(fams, loose, w, q, fit, budget)
        if found is not None:
            return found
    return None


def _disjoint(masks: Sequence[int]) -> bool:
    seen = 0
    for m in masks:
        if seen & m:
            return False
        seen |= m
    return True


def _preferred_of_size(
    fams: list[Family],
    loose: list[GeneratedHints],
    w: int,
    q: int,
    fit: FitOrder,
    budget: Budget,
) -> int | None:
    """Best ``q``-mask inside ``w`` feasible for every family and preferred by the
    ``loose`` lists (preferred at other sizes only through groups or a predicate)."""
    groups: Groups | None = None
    if loose:
        g = loose[0]
        if len(loose) > 1 or g.is_preferred is not None or not _disjoint(g.preferred_groups):
            return _preferred_by_listing(fams, loose, w, q, fit, budget)
        groups = Groups(g.preferred_groups, g.preferred_group_count)

    exists: Callable[[int, int], bool]
    if groups is None:
        exists = CachedOracle(
            q, lambda inc, allowed: joint_witness(fams, inc, allowed & ~inc, q - inc.bit_count(), budget)
        )
    else:

        def exists(inc: int, allowed: int) -> bool:
            if allowed.bit_count() < q:
                return False
            return joint_reach(fams, inc, allowed & ~inc, q - inc.bit_count(), budget, groups, q)

    if not exists(0, w):
        return None
    narrowest = colex_best(w, q, exists)
    if fit.distances is None:
        return narrowest
    return closest_best(w, q, exists, fit.distances, budget, signature(fams, groups), narrowest)


def _preferred_by_listing(
    fams: list[Family],
    loose: list[GeneratedHints],
    w: int,
    q: int,
    fit: FitOrder,
    budget: Budget,
) -> int | None:
    """Opaque preference predicates: list the ``q``-masks (counted against the budget)."""
    hits: list[int] = []
    for m in masks_of_size(ids_of(w), q):
        budget.tick("listing preferred masks")
        if all(f.feasible(m) for f in fams) and all(g.preferred(m) for g in loose):
            if fit.distances is None:
                return m
            hits.append(m)
    return min(hits, key=fit.key) if hits else None


# --------------------------------------------------------------------------- non-preferred


def _best_non_preferred(
    views: list[_View], default: int, best_count: int, fit: FitOrder, budget: Budget
) -> int | None:
    """The best reachable AND under the non-preferred ranking (module docstring, 3)."""
    key = non_preferred_key(fit, best_count)
    bound = non_preferred_bound(fit, best_count)
    # one entry per list: its fixed options, and its monotone part (a family) if any
    entries: list[tuple[list[int], int]] = []  # (options, family index or -1)
    fams: list[Family] = []
    for v in views:
        opts = v.options(default)
        fi = -1
        if v.family is not None and v.family.universe & default:
            fi = len(fams)
            fams.append(v.family)
        if not opts and fi < 0:
            return None  # every pick of this list ANDs to the empty mask
        entries.append((opts, fi))
    if not any(fi >= 0 for _, fi in entries) and all(opts == [default] for opts, _ in entries):
        return default
    entries.sort(key=lambda e: (e[1] < 0, len(e[0])))
    n = len(entries)
    reach_after = [default] * (n + 1)  # what the remaining lists can still keep
    for i in range(n - 1, -1, -1):
        opts, fi = entries[i]
        u = fams[fi].universe if fi >= 0 else 0
        for m in opts:
            u |= m
        reach_after[i] = reach_after[i + 1] & u

    best_key: list[NonPreferredKey | None] = [None]
    best_mask = [0]
    seen: set[tuple[int, int, int]] = set()

    def offer(mask: int) -> None:
        k = key(mask)
        cur = best_key[0]
        if cur is None or k < cur:
            best_key[0] = k
            best_mask[0] = mask

    def beaten(k: NonPreferredKey) -> bool:
        cur = best_key[0]
        return cur is not None and k >= cur

    def leaf(cap: int, used: int) -> None:
        if used == 0:
            offer(cap)
            return
        chosen = [fams[i] for i in range(len(fams)) if used >> i & 1]

        def give_up(c: int) -> bool:
            cur = best_key[0]
            if cur is None:
                return False
            cls = (0, 0) if c == best_count else (1, -c) if c < best_count else (2, c)
            return cls > cur[:2]

        found = best_and(chosen, cap, best_count, fit.distances, budget, give_up)
        if found is not None:
            offer(found)

    def go(i: int, cap: int, used: int) -> None:
        budget.tick("hint lists")
        if i == n:
            leaf(cap, used)
            return
        opts, fi = entries[i]
        after = reach_after[i + 1]
        if i == n - 1 and fi < 0 and used == 0:
            budget.tick("hint lists", len(opts))
            for m in opts:
                x = cap & m
                if x:
                    offer(x)
            return
        children: list[tuple[NonPreferredKey, int, int]] = []
        if fi >= 0:
            c2 = cap & fams[fi].universe
            if c2 & after:
                children.append((bound(c2 & after), c2, used | 1 << fi))
        for m in opts:
            c2 = cap & m
            if c2 & after:
                children.append((bound(c2 & after), c2, used))
        children.sort()
        for lb, c2, u2 in children:
            if beaten(lb):
                break
            state = (i + 1, c2, u2)
            if state in seen:
                continue
            seen.add(state)
            go(i + 1, c2, u2)

    go(0, default, 0)
    return best_mask[0] if best_key[0] is not None else None


# ------------------------------------------------------------- the pre-1.21 merge rule


def merge_lists_legacy(lists: Sequence[HintList], default: int) -> TopologyHint:
    """The old kubelet fold that Volcano's ``numa-aware`` plugin still runs.

    A merged hint is preferred iff every picked hint is preferred (no equal-mask rule) and the
    fold keeps the narrowest hint of the best preference class (no
    ``bestNonPreferredAffinityCount`` ranking). The result is again a minimum over a total
    order (preferred first, then narrowness), so it is the narrowest reachable AND of the
    preferred picks, else of all picks: the non-preferred search with a best count of 0
    (whose ranking is then plain narrowness).

    A generated list's preferred masks are not a monotone family (they have one popcount),
    so the preferred part handles rule-generated lists on large machines only in the shape
    Volcano produces - one generated list, every other list preferring only "any node" - and
    lists them out up to :data:`LEGACY_LISTING_LIMIT` NUMA nodes; beyond that it raises
    :class:`MergeTooLarge`.
    """
    if any(not isinstance(h, GeneratedHints) and len(h) == 0 for h in lists):
        return TopologyHint(default, False)
    budget = Budget()
    small = default.bit_count() <= LEGACY_LISTING_LIMIT
    preferred: list[list[TopologyHint]] = []
    rules: list[GeneratedHints] = []
    for h in lists:
        if isinstance(h, GeneratedHints) and not small:
            rules.append(h)
            continue
        hints = h.materialize() if isinstance(h, GeneratedHints) else h
        preferred.append([x for x in hints if x.preferred])
    best: int | None = None
    if all(len(h) for h in preferred):
        if not rules:
            views = [_View(h) for h in preferred]
            best = _best_non_preferred(views, default, 0, NARROWEST, budget)
        elif len(rules) == 1 and all(_View(h).options(default) == [default] for h in preferred):
            view = _View(rules[0])
            finite = {m & default for m in rules[0].extra if rules[0].preferred(m)} - {0}
            cands = set(finite)
            limit = min((m.bit_count() for m in finite), default=None)
            found = _best_monotone_preferred([view], default, NARROWEST, budget, limit)
            if found is not None:
                cands.add(found)
            best = min(cands, key=lambda m: (m.bit_count(), m)) if cands else None
        else:
            raise MergeTooLarge(
                f"legacy merge of {len(rules)} rule-generated lists on "
                f"{default.bit_count()} NUMA nodes"
            )
    if best is not None:
        return TopologyHint(best, True)
    found = _best_non_preferred([_View(h) for h in lists], default, 0, NARROWEST, budget)
    return TopologyHint(default if found is None else found, False)
