"""The grouped walk's array steps (``Scheduler._select_grouped``, :mod:`numalign.scheduler.node_groups`):
the first candidate of each group in walk order, the walk's last candidate, and dropping the
candidates of groups known to refuse the pod.

Walk order is node score descending, then node index ascending (NaN scores last). A group's
first candidate in that order stands for the group. Two ways to find them, with the same
answer (``tests/test_scheduler_group_arrays.py`` compares them with sorting every candidate):

* :func:`heads_by_sorting` - every candidate sorted in walk order (``lexsort``), then each key
  number's first occurrence (a stable sort of the key numbers as ``uint16``, which NumPy does
  by radix: key numbers stay below :data:`~numalign.scheduler.node_groups.KEYS_SIZE` = 2^16);
* :func:`heads_by_group` - the candidates sorted by key number only (radix), then per group its
  highest score (``fmax.reduceat``: NaN only when all are) and the lowest node index at it
  (``minimum.reduceat``), and only those heads sorted in walk order: linear in the candidates
  past the radix sort, cheaper from about :data:`HEADS_BY_GROUP_FROM` candidates (walks over
  every node when the sample refuses), dearer below (more steps of fixed cost).

A walk over many candidates first drops those whose group is known to refuse the pod
(:func:`without_refused`, from :data:`DROP_FROM` candidates): they cannot be chosen, a group's
candidates go all or none (the other groups' first candidates stay what they were), and only
the reason of a walk where nothing passes reads them - its last candidate's group
(:func:`walk_last`, taken before they are dropped).
"""

from __future__ import annotations

from typing import Any

import numpy as np

Array = np.ndarray[Any, Any]
Heads = tuple[Array, Array, Array, int]

#: from this many candidates :func:`group_heads` uses :func:`heads_by_group`
HEADS_BY_GROUP_FROM = 3000
#: from this many candidates a walk drops those of groups known to refuse (:func:`without_refused`)
DROP_FROM = 1000
_NO_NODE = np.iinfo(np.int64).max


def _by_number(numbers: Array) -> tuple[Array, Array, Array]:
    """The stable order of ``numbers`` by key number (radix: numbers below 2^16), the numbers in
    that order, and where each number's run starts (a bool per position)."""
    perm = np.argsort(numbers.astype(np.uint16), kind="stable")
    ordered = numbers[perm]
    new = np.empty(ordered.size, dtype=np.bool_)
    new[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=new[1:])
    return perm, ordered, new


def first_of_each(numbers: Array) -> Array:
    """The positions of each key number's first occurrence in ``numbers``, ascending (what
    ``np.unique(numbers, return_index=True)[1]`` sorted gives; numbers below 2^16)."""
    perm, _, new = _by_number(numbers)
    first = perm[new]
    first.sort()
    return first


def heads_by_sorting(idx: Array, scores: Array, numbers: Array) -> Heads:
    """:func:`group_heads` by sorting every candidate in walk order."""
    order = np.lexsort((idx, -scores))
    ordered = numbers[order]
    first = first_of_each(ordered)
    heads = order[first]
    return scores[heads], idx[heads], ordered[first], int(ordered[-1])


def heads_by_group(idx: Array, scores: Array, numbers: Array) -> Heads:
    """:func:`group_heads` by sorting the candidates by key number, then only the heads."""
    perm, by_number, new = _by_number(numbers)
    starts = np.flatnonzero(new)
    group_scores = scores[perm]
    top = np.fmax.reduceat(group_scores, starts)  # NaN only for a group of NaN scores
    at_top = top[np.cumsum(new) - 1]
    best = (group_scores == at_top) | np.isnan(at_top)
    first_idx = np.minimum.reduceat(np.where(best, idx[perm], _NO_NODE), starts)
    walk = np.lexsort((first_idx, -top))
    return top[walk], first_idx[walk], by_number[starts][walk], walk_last(idx, scores, numbers)


def group_heads(idx: Array, scores: Array, numbers: Array) -> Heads:
    """The first candidate of each group in walk order (node score descending, then node index
    ascending) - its highest score, and the lowest node index among that score's candidates -
    listed in walk order: their scores, node indices and key numbers; and the key number of the
    walk's last candidate (lowest score, then highest node index). At least one candidate."""
    if idx.size >= HEADS_BY_GROUP_FROM:
        return heads_by_group(idx, scores, numbers)
    return heads_by_sorting(idx, scores, numbers)


def last_position(idx: Array, scores: Array) -> int:
    """The position of the walk's last candidate (the lowest score, NaN lowest of all; then
    the highest node index). At least one candidate."""
    nan = np.isnan(scores)
    pick = nan if nan.any() else scores == scores.min()
    at = np.flatnonzero(pick)
    return int(at[int(np.argmax(idx[at]))])


def walk_last(idx: Array, scores: Array, numbers: Array) -> int:
    """The key number of the walk's last candidate (:func:`last_position`)."""
    return int(numbers[last_position(idx, scores)])


def without_refused(idx: Array, scores: Array | None, numbers: Array,
                    refused: Array) -> tuple[Array, Array | None, Array] | None:
    """The candidates whose group is not known to refuse (``refused``: per candidate), or None
    when none is known to refuse (nothing to drop). ``scores`` may be None (not computed yet:
    the scheduler then scores only the candidates kept)."""
    if not refused.any():
        return None
    keep = ~refused
    return idx[keep], None if scores is None else scores[keep], numbers[keep]


__all__ = ["DROP_FROM", "HEADS_BY_GROUP_FROM", "first_of_each", "group_heads", "heads_by_group",
           "heads_by_sorting", "last_position", "walk_last", "without_refused"]
