"""The kubelet's literal product fold: the oracle for tests and the baseline of benchmarks.

This is ``HintMerger`` as the kubelet runs it - enumerate every permutation, merge, fold
with ``compare`` - restated from ``spec/kubelet.md`` section 2.5. It is exponential on
purpose; numalign's engine (:mod:`numalign.engine.merge`) never calls it.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import product

from numalign.engine.hints import GeneratedHints, HintList, TopologyHint
from numalign.engine.merge import FitOrder


def _narrowest_count(hints: Sequence[TopologyHint]) -> int | None:
    best: int | None = None
    for h in hints:
        if h.affinity is None:
            continue
        if best is None or h.affinity.bit_count() < best:
            best = h.affinity.bit_count()
    return best


def _fitter(current: TopologyHint, candidate: TopologyHint, fit: FitOrder) -> TopologyHint:
    a, b = current.affinity, candidate.affinity
    assert a is not None and b is not None
    if a == b:
        return current
    if fit.distances is not None and a.bit_count() == b.bit_count():
        da, db = fit.average_distance(a), fit.average_distance(b)
        winner = (a if a < b else b) if da == db else (a if da < db else b)
    else:
        ca, cb = a.bit_count(), b.bit_count()
        winner = (a if a < b else b) if ca == cb else (a if ca < cb else b)
    return current if winner == a else candidate


def product_fold(lists: Sequence[HintList], default: int, fit: FitOrder) -> TopologyHint:
    """The kubelet's ``HintMerger.Merge`` over flattened lists, permutation by permutation."""
    explicit = [h.materialize() if isinstance(h, GeneratedHints) else list(h) for h in lists]
    counts = [c for c in (_narrowest_count(h) for h in explicit) if c is not None]
    bnp = max(counts, default=0)
    best: TopologyHint | None = None
    for perm in product(*explicit):
        affinity = default
        preferred = True
        first: int | None = None
        for h in perm:
            if not h.preferred:
                preferred = False
            if h.affinity is not None:
                affinity &= h.affinity
                if first is None:
                    first = h.affinity
                elif h.affinity != first:
                    preferred = False
        best = _compare(best, TopologyHint(affinity, preferred), bnp, fit)
    return best if best is not None else TopologyHint(default, False)


def _compare(
    current: TopologyHint | None, candidate: TopologyHint, bnp: int, fit: FitOrder
) -> TopologyHint | None:
    assert candidate.affinity is not None
    if candidate.affinity.bit_count() == 0:
        return current
    if current is None:
        return candidate
    if not current.preferred and candidate.preferred:
        return candidate
    if current.preferred and not candidate.preferred:
        return current
    if current.preferred and candidate.preferred:
        return _fitter(current, candidate, fit)
    assert current.affinity is not None
    c, k = current.affinity.bit_count(), candidate.affinity.bit_count()
    if c > bnp:
        return _fitter(current, candidate, fit)
    if c == bnp:
        return current if k != bnp else _fitter(current, candidate, fit)
    if k > bnp:
        return current
    if k == bnp:
        return candidate
    if k > c:
        return candidate
    if k < c:
        return current
    return _fitter(current, candidate, fit)
