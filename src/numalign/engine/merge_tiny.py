"""The kubelet's product fold itself, for explicit inputs of a few permutations.

``HintMerger.Merge`` walks the cartesian product of the hint lists and folds the merged hints
with ``compare`` (:mod:`numalign.engine.merge`, module docstring, 1). On the kubelet's everyday
inputs - 2 NUMA nodes, two or three providers of 3 hints, a handful of permutations - walking
the product is the cheapest exact way: no set is built, no search is set up. The merge takes
this path for inputs of at most :data:`TINY_PERMUTATIONS` permutations under the Narrowest fit
(``prefer-closest-numa-nodes`` orders masks of one size by distance: the small-input fold
handles it); ``benchmarks/merge_bench.py`` measures where the crossover lies.

It is the same fold as :func:`numalign.engine.reference.product_fold` (the tests hold it to
it), written for the least interpreter work per permutation: masks and flags as ints and
bools, no hint object per permutation, ``compare``'s branches on popcounts.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import product

from numalign.engine.hints import TopologyHint

#: explicit inputs of at most this many permutations are folded permutation by permutation:
#: about where the fold's per-permutation cost meets the small-input fold's set-up cost (2 to
#: 6 lists, ``benchmarks/merge_bench.py``)
TINY_PERMUTATIONS = 40


def tiny_permutations(lists: Sequence[object]) -> int:
    """The number of permutations when every list is explicit (a list or tuple of hints) and
    there are at most :data:`TINY_PERMUTATIONS`; 0 otherwise (or when a list is empty)."""
    count = 1
    for hints in lists:
        if type(hints) is not list and type(hints) is not tuple:
            return 0
        count *= len(hints)
        if count > TINY_PERMUTATIONS:
            return 0
    return count


def fold_tiny(lists: Sequence[Sequence[TopologyHint]], default: int) -> TopologyHint:
    """``HintMerger.Merge`` under the Narrowest fit, permutation by permutation."""
    # bestNonPreferredAffinityCount: the largest of the lists' narrowest affinities
    bnp = 0
    for hints in lists:
        narrowest = None  # an empty mask (0 nodes) counts too
        for h in hints:
            a = h.affinity
            if a is not None and (narrowest is None or a.bit_count() < narrowest):
                narrowest = a.bit_count()
        if narrowest is not None and narrowest > bnp:
            bnp = narrowest
    best = 0  # 0: none yet (an empty merged mask never wins)
    best_pref = False
    best_count = 0
    for perm in product(*lists):
        mask = default
        pref = True
        first = None
        for h in perm:
            if not h.preferred:
                pref = False
            a = h.affinity
            if a is not None:
                mask &= a
                if first is None:
                    first = a
                elif a != first:
                    pref = False
        if mask == 0:
            continue
        count = mask.bit_count()
        # compare(best, candidate): True when the candidate replaces the best
        if best == 0 or (pref and not best_pref):
            take = True
        elif best_pref != pref:
            take = False
        elif pref or best_count > bnp:  # fitter: narrower, then the lower mask
            take = count < best_count or (count == best_count and mask < best)
        elif best_count == bnp:
            take = count == bnp and mask < best
        elif count >= bnp:
            take = count == bnp
        else:
            take = count > best_count or (count == best_count and mask < best)
        if take:
            best, best_pref, best_count = mask, pref, count
    return TopologyHint(best, best_pref) if best else TopologyHint(default, False)
