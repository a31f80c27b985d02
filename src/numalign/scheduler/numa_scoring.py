"""The scheduler's NUMA score per node: its values, and the bounds its walks prune with.

A profile's NUMA score (:mod:`numalign.scheduler.scorers`) is either a function of the NUMA
count alone (absolute scores such as LeastNUMANodes: kept by count) or reads the node
(node-aware scores: kept per node version and pod shape, like the filter's answers). Its bound
per node is the highest weighted score a pod could get there: from the fewest NUMA nodes its
NUMA-bound requests need on that machine (the per-node demand model, the prefilter's) and what
the node's policy and scope allow (:meth:`~numalign.scheduler.scorers.NumaScore.rules_bound`),
kept per pod shape; and, for one walk, from the free amounts now (:meth:`NumaScoring.tight_bounds`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from numalign.pods import Pod
from numalign.scheduler.cluster import Cluster
from numalign.scheduler.prefilter import NumaPrefilter

if TYPE_CHECKING:
    from numalign.scheduler.profiles import Profile


class NumaScoring:
    """A profile's NUMA score and its bounds on the nodes of one cluster."""

    def __init__(self, cluster: Cluster, profile: Profile, demand_model: NumaPrefilter | None) -> None:
        self.cluster = cluster
        self.profile = profile
        #: the per-node NUMA demand model behind an absolute NUMA score's bounds
        self.demand_model = demand_model
        #: node-aware NUMA scores per node: pod shape -> (node version, score)
        self._score_cache: list[dict[Any, tuple[int, int]]] = [{} for _ in cluster.nodes]
        #: pod shape -> per node, the weighted bound (:meth:`bounds`)
        self._bounds: dict[Any, np.ndarray[Any, Any]] = {}
        #: pod shape -> the value of :meth:`bounds` when it is the same on every node
        self.bound_uniform: dict[Any, float | None] = {}
        #: an absolute NUMA score (not node-aware) by NUMA count
        self.score_of_count: dict[int, int] = {}

    def tight_bounds(self, pod: Pod, idx: np.ndarray[Any, Any], bound: Any,
                     prefilter: NumaPrefilter | None) -> np.ndarray[Any, Any]:
        """Per candidate position, the weighted NUMA score bound from the free amounts now
        (``prefilter``'s, refreshed on every bind; ``bound``: :meth:`bounds`)."""
        numa = self.profile.numa_score
        assert numa is not None and prefilter is not None
        w = self.profile.numa_weight
        fewest = prefilter.min_numa_nodes_now(pod, idx)
        by_k = {int(k): w * numa.bound(int(k), self.cluster.max_numa) for k in np.unique(fewest)}
        out: np.ndarray[Any, Any] = np.minimum(
            bound[idx], np.array([by_k[int(k)] for k in fewest], dtype=np.float64)
        )
        return out

    def score(self, i: int, pod: Pod, shape: Any, count: int) -> int:
        """The profile's NUMA score of node ``i`` (a node-aware score is cached per node
        version and pod shape, like the filter)."""
        numa = self.profile.numa_score
        assert numa is not None
        if not numa.node_aware:  # a function of the count alone (absolute scores)
            score = self.score_of_count.get(count)
            if score is None:
                score = self.score_of_count[count] = numa.scores((count,), self.cluster.max_numa)[0]
            return score
        version = int(self.cluster.version[i])
        hit = self._score_cache[i].get(shape)
        if hit is not None and hit[0] == version:
            return hit[1]
        score = numa.score_on(self.cluster.nodes[i].node, pod, count, self.cluster.max_numa)
        self._score_cache[i][shape] = (version, score)
        return score

    def bounds(self, pod: Pod, shape: Any) -> np.ndarray[Any, Any]:
        """Per node, the highest weighted NUMA score the pod could get there.

        A pod that gets NUMA-bound resources on a node (exclusive CPUs, static memory,
        devices with topology) uses at least one NUMA node there; one that gets none scores
        100 for sure.
        """
        hit = self._bounds.get(shape)
        if hit is not None:
            return hit
        assert self.demand_model is not None and self.profile.numa_score is not None
        numa = self.profile.numa_score
        c = self.cluster
        out = np.empty(len(c.nodes), dtype=np.float64)
        for members in c.rules_groups()[0]:
            node = c.nodes[int(members[0])].node
            fewest = self.demand_model.min_numa_nodes(node, pod)
            top = numa.bound(fewest, c.max_numa)
            by_rules = numa.rules_bound(node, pod)
            if by_rules is not None:
                top = min(top, by_rules)
            out[members] = float(top) * self.profile.numa_weight
        self._bounds[shape] = out
        # the same bound on every node (one machine, or machines alike): its maximum over
        # any candidates is that value
        self.bound_uniform[shape] = float(out[0]) if out.size and bool((out == out[0]).all()) else None
        return out


__all__ = ["NumaScoring"]
