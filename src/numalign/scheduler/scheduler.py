"""One scheduling cycle per pod: fit, score, NUMA filter, pick, reserve, bind.

1. **Fit** (necessary condition, vectorised): kube-scheduler's NodeResourcesFit, and for the
   exact profile the NUMA prefilter (:mod:`numalign.scheduler.prefilter`); for a profile with
   sure refusals (:attr:`~numalign.scheduler.profiles.Profile.refuses_always`), not the nodes
   its filter refuses whatever they hold (kube-scheduler does not count a node its filter
   plugins refuse as feasible). Like
   kube-scheduler's ``findNodesThatPassFilters``, nodes are looked at from a round-robin
   start index (``nextStartNodeIndex``) until ``nodes_to_score`` feasible ones are found
   (``numFeasibleNodesToFind``, the adaptive ``percentageOfNodesToScore``: every node under
   100 nodes, 10 % at 5,000, 5 % from 5,625); the next pod starts after the last node looked
   at. (Volcano's relative score keeps every fitting node: its own walk below.)
2. **Node-level score** (vectorised) for those nodes; candidates ordered best first (ties by
   node order; kube-scheduler breaks ties at random).
3. **NUMA filter** of the profile on candidates in that order, cached per (node, node
   version, pod shape): a node that refused a pod shape is not asked again until it changes.
   With an absolute NUMA score (LeastNUMANodes), or none, the walk is branch-and-bound: it
   stops once no later candidate can beat the best total even with the best NUMA score it
   could get there (:meth:`~numalign.scheduler.scorers.NumaScore.bound`), so the chosen node
   is the best-scoring node of the sample that passes the filter - the same node as
   filtering the whole sample first. If none does, the nodes outside the sample are searched
   the same way (kube-scheduler would have gone on looking for feasible nodes). The exact
   filter's answer depends only on the node's state key (:func:`numalign.node.plan_cache.
   state_key`: machine, engine mode and what the managers' decisions read) and the pod
   shape, once the node's predicate admission passes; so the NUMA count a node in the same
   state gave for the shape is the node's own count, and an upper bound of its NUMA score
   (a node failing predicate admission only drops out). The walk skips a candidate whose
   state already answered and cannot beat the best total with that answer - without this,
   on best-effort 64-NUMA nodes (loose bounds, many identical nodes) every candidate with
   the same node score was admitted in full. Still exact: the chosen node is unchanged. With a
   relative NUMA score (Volcano's), ``nodes_to_score`` feasible nodes are collected first,
   then scored.
4. **Reserve/bind**: the node's own admission runs (for the exact profile, the state planned
   in the filter is committed - it is what the node computes); a rejection is the kubelet's
   rejection (``TopologyAffinityError`` ...), reported to the caller.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import islice
from typing import Any

import numpy as np

from numalign.engine.merge_budget import MergeTooLarge
from numalign.engine.policies import Policy
from numalign.node.admission import PodResult
from numalign.node.plan_cache import state_key
from numalign.pods import Pod
from numalign.scheduler.cluster import Cluster
from numalign.scheduler.filters import FilterResult, exact_filter
from numalign.scheduler.group_arrays import (
    DROP_FROM,
    group_heads,
    last_position,
    walk_last,
    without_refused,
)
from numalign.scheduler.known_refusals import KnownRefusals
from numalign.scheduler.node_groups import Answer, NodeGroups, ShapeTable
from numalign.scheduler.numa_scoring import NumaScoring
from numalign.scheduler.prefilter import NumaPrefilter
from numalign.scheduler.profiles import Profile
from numalign.scheduler.sure_refusals import SureRefusals
from numalign.scheduler.walk_order import best_first as _best_first

MIN_FEASIBLE_NODES_TO_FIND = 100
#: at most this many distinct node states (and their known NUMA counts) are remembered; the
#: memo starts over beyond it
STATE_MEMO_SIZE = 1 << 16
#: the sampling walk's first window: the nodes the last walk needed, times this, plus
#: :data:`WINDOW_MIN`
WINDOW_SLACK = 1.125
WINDOW_MIN = 32
#: a grouped walk over many candidates without a NUMA score first looks for the choice among
#: this many best candidates, before it sorts out every group's first candidate
FIRST_PASSING_LOOK = 64


def num_feasible_nodes_to_find(n: int) -> int:
    """kube-scheduler's adaptive percentageOfNodesToScore."""
    if n < MIN_FEASIBLE_NODES_TO_FIND:
        return n
    pct = max(5, 50 - n // 125)
    return max(MIN_FEASIBLE_NODES_TO_FIND, n * pct // 100)


def pod_shape(pod: Pod) -> Any:
    """What a filter decision depends on (see :attr:`numalign.pods.Pod.shape`)."""
    return pod.shape


@dataclass(frozen=True)
class Placement:
    node: int  # index in the cluster
    name: str
    numa_count: int
    score: float


@dataclass(frozen=True)
class Outcome:
    """What happened to one pod: placed and admitted, rejected by the node, or pending."""

    pod: Pod
    placement: Placement | None
    admitted: bool
    reason: str | None = None
    result: PodResult | None = None
    checked: int = 0  # NUMA filter evaluations this cycle (cache misses)


class Scheduler:
    def __init__(self, cluster: Cluster, profile: Profile, nodes_to_score: int | None = None) -> None:
        self.cluster = cluster
        self.profile = profile
        for cn in cluster.nodes:  # the profile's engine mode, before the prefilter reads the nodes
            cn.node.use_mode(profile.mode)
        cluster.rules_changed()
        self.nodes_to_score = nodes_to_score or num_feasible_nodes_to_find(len(cluster.nodes))
        self._cache: list[dict[Any, tuple[int, FilterResult]]] = [{} for _ in cluster.nodes]
        #: per node: (version, the uids and keys of its pods then), for :meth:`_holds`
        self._held: list[tuple[int, frozenset[str]] | None] = [None] * len(cluster.nodes)
        #: the refusals of :attr:`_cache` as arrays per pod shape, for long walks
        self._refusals = KnownRefusals(cluster)
        self._last_vec: np.ndarray[Any, Any] = np.zeros(len(cluster.resources), dtype=np.int64)
        #: the engine's necessary condition, vectorised (exact profile only)
        self.prefilter = NumaPrefilter([n.node for n in cluster.nodes]) if profile.exact else None
        numa = profile.numa_score
        #: the NUMA score's values and bounds per node; its bounds read the per-node NUMA demand
        #: model of an absolute NUMA score (the prefilter's)
        self.numa_scoring = NumaScoring(cluster, profile, self.prefilter or (
            NumaPrefilter([n.node for n in cluster.nodes]) if numa is not None and not numa.relative else None
        ))
        #: node -> (version, pod uid, exact filter result) of the last plan made this cycle
        self._planned: dict[int, tuple[int, str, FilterResult]] = {}
        #: nodes grouped by the profile's node key: its filter and score asked once per group
        #: (:mod:`numalign.scheduler.node_groups`; profiles without a relative NUMA score)
        self._groups = (NodeGroups(cluster, profile.node_key)
                        if profile.node_key is not None and profile.filter is not None
                        and not (numa is not None and numa.relative) else None)
        if self._groups is not None:
            # every node's key number up front (like kube-scheduler's node info cache, filled as
            # nodes are added), not in the middle of a pod's cycle; later only changed nodes'
            self._groups.refresh(np.arange(len(cluster.nodes)))
        if profile.relative_select is not None and profile.filter is not None and numa is not None and numa.relative:
            # the relative choice's per-node keys, up front like the groups' key numbers above
            profile.relative_select.prepare(cluster)
        #: per pod shape, the nodes the filter refuses whatever they hold: not feasible (step 1;
        #: the exact profile's prefilter is its own such condition)
        self._sure = (SureRefusals(cluster, profile.refuses_always)
                      if profile.refuses_always is not None and self.prefilter is None else None)
        #: the vectorised necessary condition of the sample besides NodeResourcesFit, if any
        self._necessary: NumaPrefilter | SureRefusals | None = (
            self.prefilter if self.prefilter is not None else self._sure)
        #: kube-scheduler's ``nextStartNodeIndex``: where the next pod's node search starts
        self._next_start = 0
        #: nodes looked at per feasible node found by the last sampling walk (sizes the next
        #: walk's first window)
        self._scan_per_found = 1.0
        #: the exact filter's answers shared by nodes in the same state (see step 3 above):
        #: per node (version, state number); state key -> state number; (state number, pod
        #: shape) -> NUMA count of a node of that state that passed the filter
        self._by_state = profile.filter is exact_filter
        self._state_of: list[tuple[int, int] | None] = [None] * len(cluster.nodes)
        self._state_ids: dict[Any, int] = {}
        self._state_counts: dict[tuple[int, Any], int] = {}
        #: filter passes not yet filed under a state number: (node, version, shape, count)
        self._answered: list[tuple[int, int, Any, int]] = []
        if self._by_state:
            # nodes whose Topology Manager admits every alignment (best-effort, none): no
            # prefilter condition, loose bounds, so walks there meet many nodes of equal score;
            # their state numbers are made up front (like the scheduler's node info cache),
            # not in the middle of a pod's cycle. Elsewhere they are made when first needed.
            for i, cn in enumerate(cluster.nodes):
                if cn.node.node_policy not in (Policy.RESTRICTED, Policy.SINGLE_NUMA_NODE):
                    self._state_id(i)

    # --------------------------------------------------------------------- filter

    def _filter(self, i: int, pod: Pod, shape: Any) -> tuple[FilterResult, bool]:
        version = int(self.cluster.version[i])
        node = self.cluster.nodes[i].node
        held = self._holds(i, version, pod)  # a node holding the pod answers for it alone
        hit = None if held else self._cache[i].get(shape)
        if hit is not None and hit[0] == version:
            return hit[1], False
        assert self.profile.filter is not None
        res = self.profile.filter(node, pod)
        if not held:
            self._cache[i][shape] = (version, FilterResult(res.passed, res.numa_count, res.reason))
            if not res.passed:
                self._refusals.note(i, version, shape)
        if res.planned is not None:
            self._planned[i] = (version, pod.uid, res)
        return res, True

    def _holds(self, i: int, version: int, pod: Pod) -> bool:
        """``NodeState.holds`` of node ``i`` (at ``version``) for the pod: its pods' uids and
        keys are read once per node version, like the filter's answers, not once per ask."""
        hit = self._held[i]
        if hit is None or hit[0] != version:
            hit = self._held[i] = (version, self.cluster.nodes[i].node.state.pod_names())
        return pod.uid in hit[1] or pod.key in hit[1]

    def _state_id(self, i: int) -> int:
        """A number for node ``i``'s state key (equal numbers: equal keys), cached per version."""
        version = int(self.cluster.version[i])
        hit = self._state_of[i]
        if hit is not None and hit[0] == version:
            return hit[1]
        if len(self._state_ids) >= STATE_MEMO_SIZE:  # start over (numbers would be reused)
            self._state_ids.clear()
            self._state_counts.clear()
            self._state_of = [None] * len(self.cluster.nodes)
        node = self.cluster.nodes[i].node
        key = state_key(node.machine, node.mode, node.state)
        sid = self._state_ids.setdefault(key, len(self._state_ids))
        self._state_of[i] = (version, sid)
        return sid

    def _known_count(self, i: int, shape: Any) -> int | None:
        """The NUMA count node ``i`` gives the pod shape if it passes predicate admission,
        when a node in the same state has already answered; else None.

        Answers are filed under their node's state number only here, when one is asked for
        (:meth:`_remember`), so a walk that never needs them never computes a state key."""
        if self._answered:
            for j, version, shp, count in self._answered:
                if int(self.cluster.version[j]) == version:
                    self._state_counts[(self._state_id(j), shp)] = count
            self._answered.clear()
        return self._state_counts.get((self._state_id(i), shape))

    def _remember(self, i: int, shape: Any, count: int) -> None:
        """Node ``i`` (now) passed the exact filter for ``shape`` with ``count`` NUMA nodes."""
        if len(self._answered) >= STATE_MEMO_SIZE:
            del self._answered[: STATE_MEMO_SIZE // 4]
        self._answered.append((i, int(self.cluster.version[i]), shape, count))

    def _fresh_filter_result(self, i: int, shape: Any) -> FilterResult | None:
        """The cached filter result of node ``i`` for ``shape`` if the node has not changed."""
        hit = self._cache[i].get(shape)
        return hit[1] if hit is not None and hit[0] == int(self.cluster.version[i]) else None

    def _node_scores(self, idx: np.ndarray[Any, Any], vec: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        p = self.profile
        out: np.ndarray[Any, Any] = p.node_score(self.cluster, idx, vec)
        return out if p.node_weight == 1 else out * p.node_weight

    # ----------------------------------------------------------------- schedule

    def select(self, pod: Pod) -> tuple[Placement | None, str | None, int]:
        """Pick a node for ``pod`` (no state change); returns (placement, why not, checks)."""
        c = self.cluster
        vec = c.request_vector(pod)
        if vec is None:
            return None, "no node has a requested resource", 0
        self._last_vec = vec
        p = self.profile
        numa = p.numa_score
        relative = numa is not None and numa.relative
        if relative and p.filter is not None and p.relative_select is not None:
            # the profile's own (same) choice of fit, node score and walk, e.g. vectorised
            pick, why, checks = p.relative_select(self, pod, vec)
            at = None if pick is None else Placement(pick[0], c.nodes[pick[0]].name, pick[1], pick[2])
            return at, why, checks
        if self.prefilter is not None and self.prefilter.never_passes(pod):
            # no node of any machine can hold the pod's NUMA-bound requests, whatever its
            # state: the walk would look at every node and find none (the round-robin start
            # stays where it is after a walk over all nodes)
            if not relative and self.nodes_to_score < len(c.nodes):  # as that walk leaves it
                self._scan_per_found = len(c.nodes) / self.nodes_to_score
            if not c.any_fits(vec):
                return None, "Insufficient resources (NodeResourcesFit)", 0
            return None, "no NUMA node combination can hold the pod (TopologyAffinity)", 0
        idx, fitting = self._sample(pod, vec) if not relative else self._all_feasible(pod, vec)
        if idx.size == 0:
            if not fitting:
                return None, "Insufficient resources (NodeResourcesFit)", 0
            if self._sure is not None:
                # every node that fits refuses for sure: the last of them in walk order says why
                return None, self._last_refusal(pod, vec), 1
            return None, "no NUMA node combination can hold the pod (TopologyAffinity)", 0
        scores = self._node_scores(idx, vec)
        order = _best_first(idx, scores)
        if p.filter is None:
            j = next(order)
            return Placement(int(idx[j]), c.nodes[int(idx[j])].name, 0, float(scores[j])), None, 0
        shape = pod_shape(pod)
        if relative:
            return self._select_relative(pod, shape, idx, scores, order)
        found = self._walk(pod, shape, idx, vec, scores)
        if found[0] is None and idx.size < len(c.nodes):
            # nobody in the sample passed the exact filter: kube-scheduler would have gone on
            # looking for feasible nodes, so go on with every node not sampled yet (their node
            # scores computed by the walk: a grouped walk scores only those it keeps)
            rest, _ = self._all_feasible(pod, vec, exclude=idx)
            if rest.size:
                more = self._walk(pod, shape, rest, vec, None)
                return more[0], more[1], found[2] + more[2]
        return found

    def _walk(
        self, pod: Pod, shape: Any, idx: np.ndarray[Any, Any], vec: np.ndarray[Any, Any],
        scores: np.ndarray[Any, Any] | None,
    ) -> tuple[Placement | None, str | None, int]:
        """The best candidate: by groups of alike nodes where the profile has a node key and
        no candidate holds the pod already, else node by node (the same choice). ``scores``:
        the candidates' node scores, or None to have them computed here."""
        groups = self._groups
        if groups is not None:
            numbers = groups.refresh(idx)
            if not groups.holds_pod(pod, idx):
                return self._select_grouped(pod, shape, idx, vec, scores, numbers)
        if scores is None:
            scores = self._node_scores(idx, vec)
        return self._select_best_first(pod, shape, idx, scores, _best_first(idx, scores))

    def _last_refusal(self, pod: Pod, vec: np.ndarray[Any, Any]) -> str:
        """The filter's reason on the last node that fits, in walk order (node score, then node
        index): a walk over every such node, all refusing, ends with its refusal."""
        fit = np.flatnonzero(self.cluster.fits(vec))
        i = int(fit[last_position(fit, self._node_scores(fit, vec))])
        assert self.profile.filter is not None
        return self.profile.filter(self.cluster.nodes[i].node, pod).reason

    def _select_grouped(
        self, pod: Pod, shape: Any, idx: np.ndarray[Any, Any], vec: np.ndarray[Any, Any],
        scores: np.ndarray[Any, Any] | None, numbers: np.ndarray[Any, Any],
    ) -> tuple[Placement | None, str | None, int]:
        """:meth:`_select_best_first`'s choice, the filter and score asked once per node key
        (``numbers``: the candidates' key numbers). In walk order (score, then node index) the
        first candidate of a group has the group's best score and comes first among equals, so
        the first candidate of highest total over the groups that pass is the node the
        node-by-node walk keeps; with none passing, that walk's last refusal is the last
        candidate's, its group's reason. Groups are asked best bound first (below), which finds
        that node with fewer filter runs than asking them in walk order."""
        groups = self._groups
        assert groups is not None and self.profile.filter is not None
        c = self.cluster
        numa = self.profile.numa_score
        w = self.profile.numa_weight
        table = groups.table(shape, tuple(ct.name for ct in pod.containers))
        local: dict[int, Answer] = {}  # this pod's answers (some may name it: not for others)
        every = (idx, scores, numbers)  # every candidate: the walk's last one is read from them
        kept = without_refused(idx, scores, numbers, groups.refused(table, numbers)) if idx.size >= DROP_FROM else None
        if kept is not None:  # groups known to refuse dropped first (scheduler/group_arrays.py)
            idx, scores, numbers = kept
            if not idx.size:  # every group known to refuse: the last one's answer is the reason
                known = self._known_answer(table, local, self._walk_last(every, vec))
                assert known is not None
                return None, known.result.reason, 0
        if scores is None:  # the node scores of the candidates kept only
            scores = self._node_scores(idx, vec)
        checks = 0
        if numa is None and kept is not None:  # a walk over many candidates: the best few first
            look = islice(_best_first(idx, scores), FIRST_PASSING_LOOK)
            found, checks = self._first_passing(pod, table, local, look, idx, scores, numbers)
            if found is not None:
                return found, None, checks
        head_scores, head_idx, head_numbers, head_last = group_heads(idx, scores, numbers)
        heap: list[tuple[float, int, bool]] = []
        if numa is None:  # the groups' first candidates, in walk order
            found, ran = self._first_passing(pod, table, local, range(head_idx.size), head_idx, head_scores,
                                             head_numbers)
            checks += ran
            if found is not None:
                return found, None, checks
        else:
            # groups by the most they can total (node score plus NUMA score bound: its first
            # candidate's, whose answers are the group's), then walk order; a group's own bound
            # (:meth:`NodeGroups.bound`) replaces the common one when it comes up first, so only
            # groups that can still win have it read. A group is asked once nothing left can
            # total more than its bound, and the walk ends when nothing left can beat the best
            # total (or equal it earlier in walk order): the first group of highest total. A
            # group's own bound already known (another pod of the shape read it) is its key from
            # the start, as if it had come up (one with a negative one refuses: not walked).
            head_bound = self.numa_scoring.bounds(pod, shape)[head_idx]
            own = numa.pod_bound(pod)
            if own is not None:
                np.minimum(head_bound, float(w * own), out=head_bound)
            bounds = table.bounds
            for j, (s, top, number) in enumerate(zip(head_scores.tolist(), head_bound.tolist(),
                                                     head_numbers.tolist(), strict=True)):
                if number not in bounds:
                    heap.append((-(s + top), j, False))
                    continue
                mine = bounds[number]
                if mine is None:
                    heap.append((-(s + top), j, True))
                elif mine >= 0:
                    heap.append((-min(s + top, s + w * mine), j, True))
            heapq.heapify(heap)
        best: Placement | None = None
        best_total = 0.0
        best_at = -1  # the best group's position in walk order
        while heap:
            key, j, refined = heapq.heappop(heap)
            if best is not None and (-key < best_total or (-key == best_total and j > best_at)):
                break  # nothing left can beat the best total
            s, i, number = float(head_scores[j]), int(head_idx[j]), int(head_numbers[j])
            known = self._known_answer(table, local, number)
            if known is not None and not known.result.passed:
                continue  # a refusal already known: nothing to bound
            # a known score is the group's exact score, never above its bound: no need to ask it
            if not refined and (known is None or known.score is None):
                assert numa is not None
                own = groups.bound(table, number, numa, c.nodes[i].node, pod)
                if own is not None and own < 0:
                    continue  # the filter refuses the pod there (asked below if its reason is needed)
                if own is not None and s + w * own < -key:
                    heapq.heappush(heap, (-(s + w * own), j, True))
                    continue
            answer = self._group_answer(table, local, number, i, pod)
            checks += answer[1]
            res = answer[0].result
            if not res.passed:
                continue
            total = s + w * self._group_score(answer[0], i, pod, shape)
            if best is None or total > best_total or (total == best_total and j < best_at):
                best = Placement(i, c.nodes[i].name, res.numa_count, total)
                best_total, best_at = total, j
        if best is None:
            # the walk's last refusal: its group's (the last kept candidate's when none was dropped)
            last = head_last if kept is None else self._walk_last(every, vec)
            if self._known_answer(table, local, last) is None:
                j = int(np.flatnonzero(head_numbers == last)[0])
                checks += self._group_answer(table, local, last, int(head_idx[j]), pod)[1]
            return None, local[last].result.reason, checks
        return best, None, checks

    def _first_passing(self, pod: Pod, table: ShapeTable, local: dict[int, Answer], positions: Iterable[int],
                       idx: np.ndarray[Any, Any], scores: np.ndarray[Any, Any],
                       numbers: np.ndarray[Any, Any]) -> tuple[Placement | None, int]:
        """Without a NUMA score, the first candidate in walk order whose group passes is the
        choice: it is that group's first candidate, and every group before it refuses. Looked
        for at ``positions`` (candidates in walk order: the best few, or the groups' first
        candidates), each group asked on its first one there (as the walk by groups asks it);
        None if none passes. With the filter runs."""
        checks = 0
        for j in positions:
            i = int(idx[j])
            answer, ran = self._group_answer(table, local, int(numbers[j]), i, pod)
            checks += ran
            if answer.result.passed:
                return Placement(i, self.cluster.nodes[i].name, answer.result.numa_count, float(scores[j])), checks
        return None, checks

    def _walk_last(self, every: tuple[np.ndarray[Any, Any], np.ndarray[Any, Any] | None, np.ndarray[Any, Any]],
                   vec: np.ndarray[Any, Any]) -> int:
        """The key number of the last of the candidates ``(idx, scores or None, numbers)`` in
        walk order (their node scores computed when not given)."""
        idx, scores, numbers = every
        return walk_last(idx, self._node_scores(idx, vec) if scores is None else scores, numbers)

    def _group_answer(self, table: ShapeTable, local: dict[int, Answer], number: int, i: int,
                      pod: Pod) -> tuple[Answer, int]:
        """Group ``number``'s filter answer for ``pod`` (node ``i`` asked when no pod of the
        shape has asked the group yet), and whether the filter ran."""
        answer = self._known_answer(table, local, number)
        if answer is not None:
            return answer, 0
        groups = self._groups
        assert groups is not None and self.profile.filter is not None
        c = self.cluster
        res = self.profile.filter(c.nodes[i].node, pod)
        if res.planned is not None:
            self._planned[i] = (int(c.version[i]), pod.uid, res)
        answer = Answer(FilterResult(res.passed, res.numa_count, res.reason))
        groups.remember(table, number, answer, pod)
        local[number] = answer
        return answer, 1

    @staticmethod
    def _known_answer(table: ShapeTable, local: dict[int, Answer], number: int) -> Answer | None:
        """Group ``number``'s answer if this pod or another of its shape has it (taken into
        ``local``), else ``None``: the filter does not run."""
        answer = local.get(number)
        if answer is None:
            answer = table.answers.get(number)
            if answer is not None:
                local[number] = answer
        return answer

    def _group_score(self, answer: Answer, i: int, pod: Pod, shape: Any) -> int:
        """The NUMA score of a group that passed (node ``i`` stands for it), asked once."""
        numa = self.profile.numa_score
        assert numa is not None
        if answer.score is None:
            count = answer.result.numa_count
            answer.score = (numa.score_on(self.cluster.nodes[i].node, pod, count, self.cluster.max_numa)
                            if numa.node_aware else self.numa_scoring.score(i, pod, shape, count))
        return answer.score

    def _feasible(self, pod: Pod, vec: np.ndarray[Any, Any], rows: np.ndarray[Any, Any]) -> tuple[
            np.ndarray[Any, Any], int]:
        """Of the node indices ``rows``: those passing the vectorised filters (NodeResourcesFit,
        and the exact profile's NUMA prefilter), and how many fit at all."""
        fit = rows[self.cluster.fits(vec)[rows]]
        if self._necessary is not None and fit.size:
            return fit[self._necessary.passing(pod, fit)], int(fit.size)
        return fit, int(fit.size)

    def _all_feasible(self, pod: Pod, vec: np.ndarray[Any, Any],
                      exclude: np.ndarray[Any, Any] | None = None) -> tuple[np.ndarray[Any, Any], int]:
        rows = np.arange(len(self.cluster.nodes))
        if exclude is not None:
            keep = np.ones(rows.size, dtype=np.bool_)
            keep[exclude] = False
            rows = rows[keep]
        return self._feasible(pod, vec, rows)

    def _sample(self, pod: Pod, vec: np.ndarray[Any, Any]) -> tuple[np.ndarray[Any, Any], int]:
        """kube-scheduler's ``findNodesThatPassFilters``: nodes in order from a round-robin
        start index, until ``nodes_to_score`` feasible ones are found (every node in clusters
        under 100 nodes); the next pod starts after the last node looked at
        (``nextStartNodeIndex``). Returns the feasible nodes (in scan order) and how many
        nodes looked at fit at all."""
        c = self.cluster
        n = len(c.nodes)
        want = self.nodes_to_score
        if want >= n:
            return self._feasible(pod, vec, np.arange(n))
        start = self._next_start
        necessary = self._necessary
        parts: list[np.ndarray[Any, Any]] = []
        found = fitting = scanned = 0
        # the first window: as many nodes as the last walk looked at per feasible node found
        # (and some), so that one window usually does; the windows double after it (the
        # walk's answer does not depend on their sizes, only its cost does)
        window = min(n, int(want * self._scan_per_found * WINDOW_SLACK) + WINDOW_MIN)
        while scanned < n and found < want:
            a = (start + scanned) % n
            b = min(n, a + window, a + n - scanned)
            fits = c.fits_range(vec, a, b)
            if necessary is not None:
                fitting += int(np.count_nonzero(fits))
                good = (fits & necessary.passing_range(pod, a, b)).nonzero()[0] + a
            else:
                good = fits.nonzero()[0] + a
                fitting += int(good.size)
            need = want - found
            if good.size >= need:
                parts.append(good[:need])
                found = want
                scanned += int(good[need - 1]) - a + 1  # up to the need-th feasible node
                break
            parts.append(good)
            found += int(good.size)
            scanned += b - a
            window *= 2
        self._next_start = (start + scanned) % n
        self._scan_per_found = scanned / found if found else n / want
        idx = parts[0] if len(parts) == 1 else np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
        return idx, fitting

    def _select_relative(
        self, pod: Pod, shape: Any, idx: np.ndarray[Any, Any], scores: np.ndarray[Any, Any], order: Iterator[int]
    ) -> tuple[Placement | None, str | None, int]:
        """Collect ``nodes_to_score`` feasible nodes, then score them all (Volcano)."""
        c = self.cluster
        p = self.profile
        assert p.numa_score is not None
        checks = 0
        reason = "no node passed the NUMA filter"
        found: list[tuple[int, float, int]] = []
        for j in order:
            i = int(idx[j])
            res, miss = self._filter(i, pod, shape)
            checks += miss
            if res.passed:
                found.append((i, float(scores[j]), res.numa_count))
                if len(found) >= self.nodes_to_score:
                    break
            else:
                reason = res.reason
        if not found:
            return None, reason, checks
        w = p.numa_weight
        numa = [w * v for v in p.numa_score.scores([f[2] for f in found], c.max_numa)]
        best = max(range(len(found)), key=lambda k: (found[k][1] + numa[k], -k))
        i, s, n = found[best]
        return Placement(i, c.nodes[i].name, n, s + numa[best]), None, checks

    def _select_best_first(
        self, pod: Pod, shape: Any, idx: np.ndarray[Any, Any], scores: np.ndarray[Any, Any], order: Iterator[int]
    ) -> tuple[Placement | None, str | None, int]:
        """Branch and bound over the candidates, best node score first (absolute or no NUMA
        score: without one, every bound is 0 and the first node that passes wins)."""
        c = self.cluster
        numa = self.profile.numa_score
        w = self.profile.numa_weight
        checks = 0
        reason = "no node passed the NUMA filter"
        bound = self.numa_scoring.bounds(pod, shape) if numa is not None else None
        bound_max = 0.0
        if bound is not None:
            uniform = self.numa_scoring.bound_uniform.get(shape)
            bound_max = uniform if uniform is not None else float(bound[idx].max())
        # per candidate: the best weighted NUMA score it can still get, from its free amounts
        # now (exact profile: its prefilter is refreshed on every bind); computed only once a
        # second candidate has to be looked at
        tight: np.ndarray[Any, Any] | None = None
        use_tight = bound is not None and numa is not None and self.prefilter is not None
        best_placement: Placement | None = None
        skipped: list[int] = []  # known refusals left out after the first few candidates
        for j in self._refusals.skipping(order, idx, shape, skipped):
            s = float(scores[j])
            # stop once no remaining node can beat the best total, even with its best NUMA score
            if best_placement is not None and s + bound_max <= best_placement.score:
                break
            i = int(idx[j])
            if best_placement is not None and use_tight:
                if tight is None:
                    tight = self.numa_scoring.tight_bounds(pod, idx, bound, self.prefilter)
                if s + tight[j] <= best_placement.score:
                    continue
            if best_placement is not None and bound is not None and s + bound[i] <= best_placement.score:
                continue
            if (best_placement is not None and numa is not None and self._by_state
                    and not numa.node_aware and self._fresh_filter_result(i, shape) is None):
                # a node in the same state answered: this node's count, if it passes at all
                known = self._known_count(i, shape)
                if known is not None and s + w * self.numa_scoring.score(i, pod, shape, known) <= best_placement.score:
                    continue
            res, miss = self._filter(i, pod, shape)
            checks += miss
            if not res.passed:
                reason = res.reason
                continue
            if self._by_state and miss:
                self._remember(i, shape, res.numa_count)
            total = s
            if numa is not None:
                total += w * self.numa_scoring.score(i, pod, shape, res.numa_count)
            if best_placement is None or total > best_placement.score:
                best_placement = Placement(i, c.nodes[i].name, res.numa_count, total)
        if best_placement is None:
            if skipped:  # the last candidate may have been left out: its refusal is the reason
                res, miss = self._filter(int(idx[last_position(idx, scores)]), pod, shape)
                return None, res.reason, checks + miss
            return None, reason, checks
        return best_placement, None, checks

    def schedule(self, pod: Pod) -> Outcome:
        """Select a node, bind, and let the node admit (the kubelet's decision)."""
        placement, why, checks = self.select(pod)
        if placement is None:
            return Outcome(pod, None, False, why, checked=checks)
        vec = self._last_vec
        cn = self.cluster.nodes[placement.node]
        planned = self._planned.pop(placement.node, None)
        self._planned.clear()
        version = int(self.cluster.version[placement.node])
        if (
            planned is not None
            and planned[0] == version
            and planned[1] == pod.uid
            and planned[2].planned is not None
            and planned[2].result is not None
        ):
            # the plan was made on this very state: it is what the node's admission computes
            cn.node.commit(planned[2].planned)
            result = planned[2].result
        else:
            try:
                result = cn.node.admit(pod)
            except MergeTooLarge as e:  # the merge's step cap: a rejection with its reason
                return Outcome(pod, placement, False, e.reason, checked=checks)
        if not result.admitted:
            # kubelet rejected after binding: the pod fails; nothing stays allocated
            return Outcome(pod, placement, False, result.reason, result, checks)
        self.cluster.bind(placement.node, pod, vec)
        if self.prefilter is not None:
            self.prefilter.refresh(placement.node, result)
        return Outcome(pod, placement, True, None, result, checks)

    def release(self, pod: Pod, node: int) -> None:
        self.cluster.unbind(node, pod)
        if self.prefilter is not None:
            self.prefilter.refresh(node)
