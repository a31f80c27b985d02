"""The scheduler's walk order over candidates: node score descending, then node index
ascending (kube-scheduler breaks ties at random; numalign by node order), produced lazily."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np


def best_first(idx: np.ndarray[Any, Any], scores: np.ndarray[Any, Any], head: int = 32) -> Iterator[int]:
    """Positions of ``idx`` by score, best first, ties by node index - lazily.

    The walk usually stops after a few nodes, so only the nodes scoring at least the
    ``head``-th best score are sorted first (an exact prefix of the full order); the rest is
    sorted only if the walk gets there.
    """
    n = scores.size
    if n <= 2 * head:
        yield from (int(j) for j in np.lexsort((idx, -scores)))
        return
    kth = np.partition(scores, n - head)[n - head]
    top = np.flatnonzero(scores >= kth)
    yield from (int(j) for j in top[np.lexsort((idx[top], -scores[top]))])
    rest = np.flatnonzero(scores < kth)
    yield from (int(j) for j in rest[np.lexsort((idx[rest], -scores[rest]))])


__all__ = ["best_first"]
