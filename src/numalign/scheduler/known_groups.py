"""The part of a grouped walk that other pods of the shape already answered, in array steps.

``Scheduler._select_grouped`` chooses, among the candidate groups that pass the profile's
filter (:mod:`numalign.scheduler.node_groups`), the first one in walk order of highest total
(node score plus weighted NUMA score). A group whose answer and NUMA score are kept in the pod
shape's :class:`~numalign.scheduler.node_groups.ShapeTable` needs no question: its total is
known. So, before any group is asked in Python:

* candidates of groups known to refuse are dropped (:func:`without_refused`); they cannot be
  chosen, and a group's candidates are dropped all or none, so the other groups' first
  candidates stay what they were. Only the reason of a walk where nothing passes reads them:
  the last candidate's group (:func:`walk_last`, computed before they are dropped);
* the known totals give the best known group at once (:func:`best_known`: the first maximum
  in walk order), and only the groups left whose bound can still beat it (or equal it earlier
  in walk order) are asked (:func:`still_open`).

The chosen group is the one the walk over every group chooses: a group left out can at most
equal the best total later in walk order, and a group asked gets its exact total
(``tests/test_scheduler_known_groups.py`` compares both walks on random pods and releases).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from numalign.scheduler.node_groups import PASSED, REFUSED

Array = np.ndarray[Any, Any]


def walk_last(idx: Array, scores: Array, numbers: Array) -> int:
    """The key number of the walk's last candidate (lowest score, then highest node index;
    NaN scores last), as :func:`~numalign.scheduler.node_groups.group_heads` answers it."""
    nan = np.isnan(scores)
    pick = nan if nan.any() else scores == scores.min()
    at = np.flatnonzero(pick)
    return int(numbers[at[int(np.argmax(idx[at]))]])


def without_refused(idx: Array, scores: Array, numbers: Array, status: Array) -> tuple[Array, Array, Array] | None:
    """The candidates whose group is not known to refuse (``status``: per candidate), or None
    when none is known to refuse (nothing to drop)."""
    keep = status != REFUSED
    if bool(keep.all()):
        return None
    return idx[keep], scores[keep], numbers[keep]


def best_known(head_scores: Array, status: Array, score: Array, weight: int, scored: bool) -> tuple[int, float, Array]:
    """Over the groups (first candidates in walk order: their node scores, and the table's
    ``status`` and NUMA ``score``): the position of the first group of highest known total
    (-1: none known), that total, and which groups are still to be asked (not known to refuse,
    and without a known total). ``scored``: the profile has a NUMA score (else a group's total
    is its node score). With a NaN node score every group is asked (no array shortcut)."""
    passed = status == PASSED
    if scored:
        passed &= ~np.isnan(score)
    ask = ~passed & (status != REFUSED)
    if not passed.any() or bool(np.isnan(head_scores).any()):
        return -1, 0.0, ask | passed
    totals = head_scores + weight * score if scored else head_scores.copy()
    totals[~passed] = -np.inf
    at = int(np.argmax(totals))  # the first maximum: walk order breaks ties
    return at, float(totals[at]), ask


def still_open(bounds: Array, ask: Array, best_total: float, best_at: int) -> Array:
    """The positions of the groups to ask (``ask``) whose bound (node score plus NUMA score
    bound) can beat ``best_total`` of the group at ``best_at``, or equal it earlier in walk
    order (every one when ``best_at`` is -1)."""
    if best_at < 0:
        return np.flatnonzero(ask)
    pos = np.arange(bounds.size)
    can = (bounds > best_total) | ((bounds == best_total) & (pos < best_at))
    return np.flatnonzero(ask & can)


__all__ = ["best_known", "still_open", "walk_last", "without_refused"]
