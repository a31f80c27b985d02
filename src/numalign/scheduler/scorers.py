"""Scoring strategies: small interchangeable pieces a :class:`~numalign.scheduler.Profile`
holds (scheduler-plugins style). All scores are 0-100 before the profile's weight.

* **Node scores** (:data:`NodeScore`) are functions ``(cluster, idx, vec) -> scores``,
  vectorised over the candidate node indices ``idx`` of a :class:`Cluster`, for a pod whose
  node-level request vector is ``vec``: kube-scheduler's ``NodeResourcesFit`` strategies over
  cpu and memory, *after* placing the pod.
* **NUMA scores** (:class:`NumaScore`) score the number of NUMA nodes the pod would use on
  each candidate that passed the NUMA filter. An *absolute* one (LeastNUMANodes) scores each
  candidate on its own, so the scheduler can search best-first with :meth:`NumaScore.bound`;
  a *relative* one (Volcano's) needs every feasible candidate's count first.

* **NRT scores** (:class:`NrtZoneScore`, :class:`NrtLeastNumaNodes`) are NUMA scores that
  look at the node itself (``node_aware``): they score the zones the node's
  NodeResourceTopology would publish (:func:`nrt_zones`, from
  :func:`numalign.node.usage.numa_amounts` - ``available`` - and the machine's distances), with
  scheduler-plugins' own arithmetic (:mod:`numalign.scheduler.nrt_scores`).

To add a strategy: write it here (a function, or a :class:`NumaScore` subclass), and name it
in a profile in :mod:`numalign.scheduler.profiles`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, cast

import numpy as np
import numpy.typing as npt

from numalign.engine.policies import Policy, Scope
from numalign.memo import remember
from numalign.node.usage import Zones, numa_amounts, zones_of
from numalign.pods import QOSClass, effective_pod_requests
from numalign.scheduler import nrt_scores
from numalign.scheduler.nrt_requests import nrt_pod_requests
from numalign.scheduler.nrt_scores import NumaZone

if TYPE_CHECKING:
    from numalign.node.admission import Node
    from numalign.pods import Pod
    from numalign.scheduler.cluster import Cluster

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]

#: ``(cluster, candidate node indices, pod request vector) -> 0..100 per candidate``
NodeScore = Callable[["Cluster", I64, I64], F64]


# ------------------------------------------------------------------------- node level


def least_allocated(cluster: Cluster, idx: I64, vec: I64) -> F64:
    """kube-scheduler NodeResourcesFit LeastAllocated: the mean over cpu and memory of
    ``(allocatable - requested) / allocatable x 100`` after placement (0 where nothing of a
    resource is allocatable)."""
    cpu_col, mem_col = cluster.score_cols
    free = cluster.free
    cpu = (free[idx, cpu_col] - vec[cpu_col]) * cluster.percent_of_allocatable(cpu_col)[idx]
    mem = (free[idx, mem_col] - vec[mem_col]) * cluster.percent_of_allocatable(mem_col)[idx]
    # clip to 0..100 in place (np.clip's own wrapper costs more than the work here)
    for part in (cpu, mem):
        np.maximum(part, 0.0, out=part)
        np.minimum(part, 100.0, out=part)
    out: F64 = cpu
    out += mem
    out *= 0.5
    return out


def most_allocated(cluster: Cluster, idx: I64, vec: I64) -> F64:
    """MostAllocated (bin packing) over cpu and memory, after placement."""
    out: F64 = 100.0 - least_allocated(cluster, idx, vec)
    return out


def balanced_allocation(cluster: Cluster, idx: I64, vec: I64) -> F64:
    """BalancedAllocation: (1 - std of the cpu and memory utilisation fractions) x 100,
    after placement."""
    cols = list(cluster.score_cols)
    a = cluster.allocatable[idx][:, cols].astype(np.float64)
    r = (cluster.requested[idx] + vec)[:, cols].astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        frac = np.where(a > 0, r / a, 0.0)
    out: F64 = (1.0 - frac.std(axis=1)) * 100.0
    return out


# ------------------------------------------------------------------------- NUMA level


def volcano_numa_aware(counts: Sequence[int], weight: int = 1) -> list[int]:
    """Volcano numa-aware: weight x (100 - 100 x count // max count over the candidates)."""
    top = max(counts, default=0)
    if top == 0:
        return [100 * weight for _ in counts]
    return [(100 - (100 * c) // top) * weight for c in counts]


def volcano_numa_aware_array(counts: I64) -> I64:
    """:func:`volcano_numa_aware` with weight 1 over an array of counts (same integers)."""
    top = int(counts.max()) if counts.size else 0
    if top == 0:
        return np.full(counts.size, 100, dtype=np.int64)
    out: I64 = 100 - (100 * counts) // top
    return out


def least_numa_nodes(count: int, max_numa_nodes: int, optimal_distance: bool = False) -> int:
    """scheduler-plugins LeastNUMANodes: 100 - count x (100 // max) (+ half a step if the
    chosen NUMA set has the minimal average distance). A pod bound to no NUMA node scores 100."""
    if count == 0:
        return 100
    step = 100 // max(1, max_numa_nodes)
    return 100 - count * step + (step // 2 if optimal_distance else 0)


class NumaScore(ABC):
    """How a profile scores the NUMA nodes a pod would use on the candidates (0..100).

    ``counts`` are the NUMA node counts on the candidates that passed the NUMA filter (0:
    the pod gets nothing NUMA-bound there); ``max_numa`` is the most NUMA nodes any node of
    the cluster has.
    """

    #: True when a candidate's score depends on the other candidates' counts
    relative: ClassVar[bool]
    #: True when the score reads the node itself (:meth:`score_on`), not only the count
    node_aware: ClassVar[bool] = False

    @abstractmethod
    def scores(self, counts: Sequence[int], max_numa: int) -> list[int]:
        """One score per count, in order."""

    @abstractmethod
    def bound(self, fewest: int, max_numa: int) -> int:
        """The highest score a candidate can get where the pod needs at least ``fewest``
        NUMA nodes (0: possibly none). Used to stop a best-first search early."""

    def score_on(self, node: Node, pod: Pod, count: int, max_numa: int) -> int:
        """The score of one candidate node that passed the filter, the pod using ``count``
        NUMA nodes there. Count-based scores ignore the node; node-aware ones read it."""
        return self.scores((count,), max_numa)[0]

    def pod_bound(self, pod: Pod) -> int | None:
        """The highest score ``pod`` can get on any node, when the pod alone says more than
        :meth:`bound` (None: it does not). Also used to stop a search early."""
        return None

    def node_bound(self, node: Node, pod: Pod) -> int | None:
        """The highest score ``pod`` can get on ``node``, read cheaply from the node (never
        more than :meth:`score_on` answers there; None: nothing better than the bounds above;
        negative: the profile's filter refuses the pod on that node). A node-aware score's
        bound reads only what the profile's node key holds."""
        return None

    def rules_bound(self, node: Node, pod: Pod) -> int | None:
        """The highest score ``pod`` can get on any node with ``node``'s machine, Topology
        Manager policy and scope, whatever its state (never more than :meth:`score_on` answers
        on such a node; None: nothing better than :meth:`bound`). It reads nothing else, so the
        scheduler asks one node per (machine, policy, scope) and pod shape."""
        return None


class AbsoluteNumaScore(NumaScore):
    """A NUMA score of each candidate on its own, never rising with the count."""

    relative: ClassVar[bool] = False

    @abstractmethod
    def score(self, count: int, max_numa: int) -> int:
        """The score of one candidate where the pod uses ``count`` NUMA nodes."""

    def scores(self, counts: Sequence[int], max_numa: int) -> list[int]:
        return [self.score(c, max_numa) for c in counts]

    def bound(self, fewest: int, max_numa: int) -> int:
        return self.score(fewest, max_numa)


@dataclass(frozen=True)
class LeastNumaNodes(AbsoluteNumaScore):
    """scheduler-plugins ``LeastNUMANodes`` (see :func:`least_numa_nodes`)."""

    def score(self, count: int, max_numa: int) -> int:
        return least_numa_nodes(count, max_numa)


@dataclass(frozen=True)
class VolcanoNumaAware(NumaScore):
    """Volcano ``numa-aware`` (see :func:`volcano_numa_aware`): relative to the largest count
    among the feasible candidates."""

    relative: ClassVar[bool] = True

    def scores(self, counts: Sequence[int], max_numa: int) -> list[int]:
        return volcano_numa_aware(counts)

    def bound(self, fewest: int, max_numa: int) -> int:
        return 100


# ------------------------------------------------------------------- NRT (scheduler-plugins)


def nrt_zones(node: Node) -> list[NumaZone]:
    """The ``type: Node`` zones the node's NodeResourceTopology publishes: ``available``
    amounts (cpu converted to millicores, see :mod:`numalign.scheduler.nrt_scores`) and the
    SLIT distances as costs (none published when the machine has no distance table)."""
    m = node.machine
    costs = m.distances if m.has_distances else {}
    return [NumaZone(nid, _published_units(amounts.available), dict(costs.get(nid, {})))
            for nid, amounts in numa_amounts(node).items()]


def _published_units(amounts: Mapping[str, int]) -> dict[str, int]:
    """Zone amounts in the NRT scores' units: cpu in millicores (see
    :mod:`numalign.scheduler.nrt_scores`), everything else as it is."""
    return {r: (v * 1000 if r == "cpu" else v) for r, v in amounts.items()}


#: :func:`nrt_zones` by (machine identity, :func:`~numalign.node.usage.available_key`), with
#: the machine (a reused id never matches); cleared beyond :data:`PUBLISHED_SIZE` entries
_PUBLISHED: dict[Hashable, tuple[object, tuple[NumaZone, ...]]] = {}
PUBLISHED_SIZE = 1 << 14


def published_zones(node: Node) -> Sequence[NumaZone]:
    """:func:`nrt_zones`, shared by nodes alike and not to be changed: it reads only the
    machine (ids, distances) and the zones' available amounts, so it is computed once per
    (machine, :func:`~numalign.node.usage.available_key`), and kept with the node state's zones
    (:func:`~numalign.node.usage.zones_of`) for the next question."""
    held = zones_of(node)
    got = held.derived.get("nrt_zones")
    if got is not None:
        return cast("tuple[NumaZone, ...]", got)
    key = (id(node.machine), held.available)
    hit = _PUBLISHED.get(key)
    if hit is not None and hit[0] is node.machine:
        zones = hit[1]
    else:
        zones = tuple(nrt_zones(node))
        remember(_PUBLISHED, key, (node.machine, zones), PUBLISHED_SIZE)
    held.remember("nrt_zones", zones)
    return zones


def _container_requests(pod: Pod) -> list[dict[str, int]]:
    return [dict(c.requests) for c in pod.containers]


#: zone scores by (strategy, weights, request, zone amounts): a zone score reads nothing else,
#: and the zones of nodes in different states are mostly alike (a bind changes one zone);
#: cleared beyond :data:`ZONE_SCORES_SIZE` entries
_ZONE_SCORES: dict[Hashable, int] = {}
ZONE_SCORES_SIZE = 1 << 16


def _zone_items(held: Zones, zones: Sequence[NumaZone]) -> tuple[tuple[tuple[str, int], ...], ...]:
    """Each published zone's amounts as a tuple of pairs (in their order, as the strategies read
    them): part of the zone scores' memo key, made once per node state's zones."""
    got = held.derived.get("nrt_zone_items")
    if got is None:
        got = tuple(tuple(z.resources.items()) for z in zones)
        held.remember("nrt_zone_items", got)
    return cast("tuple[tuple[tuple[str, int], ...], ...]", got)


def _lowest_zone_score(strategy: str, weights: tuple[tuple[str, int], ...], requested: Mapping[str, int],
                       zones: Sequence[NumaZone], zone_items: Sequence[tuple[tuple[str, int], ...]]) -> int:
    """:func:`~numalign.scheduler.nrt_scores.score_for_each_numa` of the strategy (the smallest
    non-zero zone score), each zone score remembered per request and zone amounts
    (:data:`_ZONE_SCORES`)."""
    fn = nrt_scores.ZONE_STRATEGIES[strategy]
    asked = tuple(requested.items())

    def zone_score(z: NumaZone, items: tuple[tuple[str, int], ...]) -> int:
        key = (strategy, weights, asked, items)
        got = _ZONE_SCORES.get(key)
        if got is None:
            got = remember(_ZONE_SCORES, key, fn(requested, z.resources, dict(weights)), ZONE_SCORES_SIZE)
        return got

    return nrt_scores.lowest_non_zero(zone_score(z, items) for z, items in zip(zones, zone_items, strict=True))


@dataclass(frozen=True)
class NrtZoneScore(NumaScore):
    """scheduler-plugins ``NodeResourceTopologyMatch`` with ``scoringStrategy.type``
    LeastAllocated / MostAllocated / BalancedAllocation (``score.go``): per NUMA zone of the
    published NRT, single-numa-node nodes only (others 0), non-Guaranteed pods 100."""

    strategy: str = "LeastAllocated"
    weights: tuple[tuple[str, int], ...] = ()

    relative: ClassVar[bool] = False
    node_aware: ClassVar[bool] = True

    def __post_init__(self) -> None:
        if self.strategy not in nrt_scores.ZONE_STRATEGIES:
            raise ValueError(f"unknown NRT scoring strategy {self.strategy!r}")

    def scores(self, counts: Sequence[int], max_numa: int) -> list[int]:
        # without the node there is nothing to score: no preference between candidates
        return [0 for _ in counts]

    def bound(self, fewest: int, max_numa: int) -> int:
        return nrt_scores.MAX_NODE_SCORE

    def node_bound(self, node: Node, pod: Pod) -> int | None:
        """The score itself: :meth:`score_on` reads the zones, the policy, the scope and the
        pod, never the NUMA count the filter found, so it needs no filter run (0 in place of
        a negative score, which would read as a refusal; the score is ``int64(NaN)`` where
        BalancedAllocation has a single resource to weigh)."""
        return max(0, self.score_on(node, pod, 0, 0))

    def rules_bound(self, node: Node, pod: Pod) -> int | None:
        """Exactly 0 on a node that is not ``single-numa-node``, for a Guaranteed pod:
        :meth:`score_on` answers 0 there before it reads anything else of the node."""
        if pod.qos is QOSClass.GUARANTEED and node.node_policy is not Policy.SINGLE_NUMA_NODE:
            return 0
        return None

    def score_on(self, node: Node, pod: Pod, count: int, max_numa: int) -> int:
        if pod.qos is not QOSClass.GUARANTEED:
            return nrt_scores.MAX_NODE_SCORE
        if node.node_policy is not Policy.SINGLE_NUMA_NODE:
            return 0
        # the score reads the zones, the scope and the pod's requests only: kept with the zones
        held = zones_of(node)
        key = ("nrt_zone_score", self.strategy, self.weights, node.node_scope, nrt_pod_requests(pod).key)
        got = held.derived.get(key)
        if got is not None:
            return cast(int, got)
        # nrt_scores' pod_scope_score / container_scope_score, the zone scores remembered
        zones = published_zones(node)
        items = _zone_items(held, zones)
        if node.node_scope is Scope.POD:
            score = _lowest_zone_score(self.strategy, self.weights, effective_pod_requests(pod), zones, items)
        else:
            score = nrt_scores.container_mean([_lowest_zone_score(self.strategy, self.weights, c.requests, zones,
                                                                  items) for c in pod.containers])
        held.remember(key, score)
        return score


def _zone_count_bound(node: Node, pod: Pod, zones: Sequence[NumaZone],
                      descending: Mapping[str, Sequence[int]] | None) -> int:
    """LeastNUMANodes' score for the fewest of ``zones`` that can hold the pod's request (pod
    scope) or its largest container's (container scope: containers only take from the zones,
    so each needs at least as many zones as on the full ones), with the distance bonus: no
    combination of fewer zones holds it (:func:`~numalign.scheduler.nrt_scores.fewest_zones`;
    ``descending``: its sorted amounts, when kept)."""
    if node.node_scope is Scope.POD:
        fewest = nrt_scores.fewest_zones(pod.qos, zones, effective_pod_requests(pod), descending)
    else:
        fewest = max(nrt_scores.fewest_zones(pod.qos, zones, req, descending) for req in _container_requests(pod))
    return nrt_scores.normalize_score(max(1, fewest), True)


@dataclass(frozen=True)
class NrtLeastNumaNodes(NumaScore):
    """scheduler-plugins ``LeastNUMANodes`` exactly (``least_numa.go``): on every policy,
    from the published ``available`` and costs; normalised by 8 NUMA nodes, half a step more at
    minimal average distance; container scope takes the largest per-container count.

    Without the node (:meth:`scores`, e.g. an extender that only has counts) the count is
    normalised the same way, without the distance bonus."""

    relative: ClassVar[bool] = False
    node_aware: ClassVar[bool] = True

    def scores(self, counts: Sequence[int], max_numa: int) -> list[int]:
        return [nrt_scores.MAX_NODE_SCORE if c == 0 else nrt_scores.normalize_score(c, False) for c in counts]

    def bound(self, fewest: int, max_numa: int) -> int:
        # the published view may need fewer zones than the engine (non-Guaranteed pods'
        # cpu/memory fit anywhere there), so only the trivial bound is safe
        return nrt_scores.MAX_NODE_SCORE

    def pod_bound(self, pod: Pod) -> int | None:
        """A Guaranteed pod asking for cpu or memory, which every zone publishes
        (:func:`nrt_zones`), needs at least one zone in both scopes: at most
        ``normalize_score(1, True)``."""
        if pod.qos is not QOSClass.GUARANTEED:
            return None
        if not any(r in c.requests for c in pod.containers for r in ("cpu", "memory")):
            return None
        return nrt_scores.normalize_score(1, True)

    def rules_bound(self, node: Node, pod: Pod) -> int | None:
        """For such a pod, :meth:`node_bound` over the zones' allocatable amounts, which is
        what they publish as available with nothing held: a zone never publishes more, and
        :func:`~numalign.scheduler.nrt_scores.fewest_zones` needs no more zones for larger
        amounts, so no state of the machine needs fewer. It reads the machine and the scope
        only."""
        if self.pod_bound(pod) is None:
            return None
        zones = [NumaZone(nid, _published_units(amounts.allocatable)) for nid, amounts in numa_amounts(node).items()]
        return _zone_count_bound(node, pod, zones, None)

    def node_bound(self, node: Node, pod: Pod) -> int | None:
        """For such a pod, :func:`~numalign.scheduler.nrt_scores.fewest_zones` of the
        node's zones: no combination of fewer zones holds the request (pod scope) or the largest
        container's (container scope: containers only take from the zones, so each needs at
        least as many zones as on the full ones)."""
        if self.pod_bound(pod) is None:
            return None
        # it reads the zones, the scope and the pod's requests only: kept with the zones
        kept = zones_of(node)
        key = ("nrt_least_bound", node.node_scope, nrt_pod_requests(pod).key)
        got = kept.derived.get(key)
        if got is not None:
            return cast(int, got)
        zones = published_zones(node)
        descending = kept.derived.get("nrt_descending")
        if descending is None:
            descending = nrt_scores.descending_amounts(zones)
            kept.remember("nrt_descending", descending)
        bound = _zone_count_bound(node, pod, zones, cast("dict[str, tuple[int, ...]]", descending))
        kept.remember(key, bound)
        return bound

    def score_on(self, node: Node, pod: Pod, count: int, max_numa: int) -> int:
        if pod.qos is not QOSClass.GUARANTEED:
            return nrt_scores.MAX_NODE_SCORE
        # it reads the zones (amounts and costs), the scope and the pod's requests only
        kept = zones_of(node)
        key = ("nrt_least_score", node.node_scope, nrt_pod_requests(pod).key)
        got = kept.derived.get(key)
        if got is not None:
            return cast(int, got)
        zones = published_zones(node)
        if node.node_scope is Scope.POD:
            score = nrt_scores.least_numa_pod_scope_score(pod.qos, effective_pod_requests(pod), zones)
        else:
            score = nrt_scores.least_numa_container_scope_score(pod.qos, _container_requests(pod), zones)
        kept.remember(key, score)
        return score

__all__ = [
    "AbsoluteNumaScore",
    "LeastNumaNodes",
    "NodeScore",
    "NrtLeastNumaNodes",
    "NrtZoneScore",
    "NumaScore",
    "VolcanoNumaAware",
    "balanced_allocation",
    "least_allocated",
    "least_numa_nodes",
    "most_allocated",
    "nrt_zones",
    "published_zones",
    "volcano_numa_aware",
    "volcano_numa_aware_array",
]
