"""The nodes a profile's NUMA filter refuses a pod on whatever they hold (its sure refusals,
:attr:`~numalign.scheduler.profiles.Profile.refuses_always`): per pod shape, a mask over the
cluster's nodes. The scheduler does not count such a node as feasible, as kube-scheduler does not
count a node its filter plugins refuse (``findNodesThatPassFilters``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from numalign.node.admission import Node
from numalign.pods import Pod
from numalign.scheduler.cluster import Cluster

#: pod shapes kept, one byte per node for a shape some node refuses for sure: all are dropped
#: beyond this many shapes or :data:`MEMO_BYTES` bytes (which costs speed only)
MEMO_SIZE = 1 << 12
MEMO_BYTES = 1 << 24


class SureRefusals:
    """``refuses_always`` (node, pod -> bool, reading the node's machine, policy and scope only)
    asked on one node of each such group of ``cluster``'s nodes, per pod shape."""

    def __init__(self, cluster: Cluster, refuses_always: Callable[[Node, Pod], bool]) -> None:
        self.cluster = cluster
        self.refuses_always = refuses_always
        self._masks: dict[Any, np.ndarray[Any, Any] | None] = {}
        self._bytes = 0

    def mask(self, pod: Pod, shape: Any) -> np.ndarray[Any, Any] | None:
        """Per node, whether the filter refuses ``pod`` (of ``shape``) there whatever the node
        holds; None when it refuses it nowhere so."""
        if shape in self._masks:
            return self._masks[shape]
        c = self.cluster
        parts, of = c.rules_groups()
        flags = np.array([self.refuses_always(c.nodes[int(m[0])].node, pod) for m in parts], dtype=np.bool_)
        out = flags[of] if flags.any() else None
        if len(self._masks) >= MEMO_SIZE or self._bytes + len(c.nodes) > MEMO_BYTES:
            self._masks.clear()
            self._bytes = 0
        self._masks[shape] = out
        self._bytes += 0 if out is None else out.size
        return out

    def passing(self, pod: Pod, candidates: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        """For each candidate node index, False where the filter refuses ``pod`` for sure (the
        prefilter's interface: the sample's necessary condition)."""
        sure = self.mask(pod, pod.shape)
        return np.ones(candidates.size, dtype=np.bool_) if sure is None else ~sure[candidates]

    def passing_range(self, pod: Pod, a: int, b: int) -> np.ndarray[Any, Any]:
        """:meth:`passing` for the nodes ``a .. b-1``."""
        sure = self.mask(pod, pod.shape)
        return np.ones(b - a, dtype=np.bool_) if sure is None else ~sure[a:b]


__all__ = ["MEMO_BYTES", "MEMO_SIZE", "SureRefusals"]
