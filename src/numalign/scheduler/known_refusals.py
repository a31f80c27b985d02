"""The nodes known to refuse a pod shape in their present state, as arrays: the node-by-node
walk (``Scheduler._select_best_first``) leaves them out once it has looked at
:data:`LOOK` candidates, instead of asking each one's cached answer.

A walk that finds no node for its pod (the cluster is full: the simulator retries such pods) asks
every candidate; most answers are refusals cached per node version and pod shape. The same
refusals are kept here per pod shape as the node version they were given at, so one array
comparison finds them all. A node that holds the pod refuses it too (``UnexpectedAdmissionError``),
so leaving out a known refusal never changes the choice; only the reason of a walk where nothing
passes reads the last candidate, which the walk then asks (see the scheduler)."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import islice
from typing import Any

import numpy as np

from numalign.scheduler.cluster import Cluster

#: candidates a walk looks at one by one before it leaves out the known refusals
LOOK = 64
#: bytes of the arrays kept (8 per node and pod shape); all are dropped beyond it, which costs
#: speed only
MEMO_BYTES = 1 << 24


class KnownRefusals:
    """Per pod shape, per node: the node version at which it refused the shape (-1: none)."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self._at: dict[Any, np.ndarray[Any, Any]] = {}
        self._bytes = 0

    def note(self, i: int, version: int, shape: Any) -> None:
        """Node ``i`` refused ``shape`` at ``version`` (an answer not about a pod it holds)."""
        at = self._at.get(shape)
        if at is None:
            n = len(self.cluster.nodes)
            if self._bytes + 8 * n > MEMO_BYTES:
                self._at.clear()
                self._bytes = 0
            at = self._at[shape] = np.full(n, -1, dtype=np.int64)
            self._bytes += 8 * n
        at[i] = version

    def skipping(self, order: Iterator[int], idx: np.ndarray[Any, Any], shape: Any,
                 skipped: list[int]) -> Iterator[int]:
        """``order``'s candidate positions (into ``idx``): the first :data:`LOOK` as they come,
        then those whose node is not known to refuse ``shape`` now. Appends to ``skipped`` how
        many were left out, if any."""
        yield from islice(order, LOOK)
        rest = np.fromiter(order, dtype=np.int64)
        at = self._at.get(shape)
        if at is not None and rest.size:
            nodes = idx[rest]
            known = at[nodes] == self.cluster.version[nodes]
            if known.any():
                skipped.append(int(np.count_nonzero(known)))
                rest = rest[~known]
        yield from rest.tolist()


__all__ = ["LOOK", "MEMO_BYTES", "KnownRefusals"]
