"""The ``volcano`` profile's node choice, vectorised: fit, node score and Volcano's predicate
for every node at once, the same choice as the scheduler's relative walk.

The scheduler's relative walk (:meth:`numalign.scheduler.scheduler.Scheduler._select_relative`)
takes every node that fits (NodeResourcesFit; Volcano does not sample nodes), asks the NUMA
filter about them best node score first (ties: lower node index) until ``nodes_to_score``
passed, then adds the relative NUMA score and keeps the best total (ties: the earlier
candidate). On 5,000 nodes that is ~900 filter probes per pod in Python.
:class:`VolcanoSelect` gives the same placement, score, NUMA count and pending reason with a
few passes over per-node arrays:

* fit and the node score (LeastAllocated) are computed over every node's row, element by
  element as :meth:`~numalign.scheduler.cluster.Cluster.fits` and the profile's node score
  compute them for the fitting nodes (nodes that do not fit are then left out);
* the predicate's policy checks (:func:`~numalign.modes.volcano.predicate.volcano_policy_check`)
  depend on the pod and on the node's policy and CPU manager policy only: answered once per
  such class of nodes (the per-node arrays of one pattern of class answers are kept);
* the admission's answer is looked up for every node in the predicate's memo
  (:mod:`numalign.modes.volcano.fast`) through each node's key, kept per node and
  refreshed when ``cluster.version`` says the node changed; answers the memo lacks are
  computed with the reference admission only for fitting nodes the walk reaches (ranked no
  later than the ``nodes_to_score``-th that passed), once per distinct key;
* the walk's order is never sorted: the ``nodes_to_score``-th passing node is found by
  partitioning on (score, node index), and ties of the best total go to the higher node
  score, then the lower node index - the earlier candidate of the walk;
* a node whose CPU state already holds the pod's uid is asked directly (no memo).

``checks`` in the outcome counts the admissions computed (memo misses).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import numpy.typing as npt

from numalign.modes.volcano.fast import FAILED, PASSED, UNKNOWN, VolcanoMemo, counts_suffice
from numalign.modes.volcano.predicate import VOLCANO_MEMO, volcano_admission, volcano_policy_check
from numalign.node.admission import Node
from numalign.pods import Pod
from numalign.resources.cpu import POLICY_STATIC as CPU_STATIC
from numalign.scheduler.cluster import Cluster
from numalign.scheduler.filters import FilterResult
from numalign.scheduler.scorers import (
    NumaScore,
    VolcanoNumaAware,
    least_allocated,
    volcano_numa_aware,
)

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
B = npt.NDArray[np.bool_]

#: the chosen node: (index in the cluster, NUMA count there, total score)
Pick = tuple[int, int, float]

#: the policy checks' answers of one pod, per class of nodes: None (the admission decides) or
#: (passed, NUMA count)
_Pattern = tuple[tuple[bool, int] | None, ...]

INSUFFICIENT = "Insufficient resources (NodeResourcesFit)"
#: integers below this are exact in float64
_EXACT = 2**53
#: changed nodes up to this many are refreshed row by row
_FEW = 8


class _ProfileView(Protocol):
    @property
    def node_score(self) -> Callable[[Cluster, I64, I64], F64]: ...

    @property
    def node_weight(self) -> int: ...

    @property
    def numa_score(self) -> NumaScore | None: ...

    @property
    def numa_weight(self) -> int: ...


class SchedulerView(Protocol):
    """What the node choice reads of a :class:`~numalign.scheduler.scheduler.Scheduler`."""

    @property
    def cluster(self) -> Cluster: ...

    @property
    def profile(self) -> _ProfileView: ...

    @property
    def nodes_to_score(self) -> int: ...


@dataclass(frozen=True)
class _Classes:
    """Per node, what one pattern of policy-check answers says: whether the admission
    decides (``admit``), else the answer (``verdict``, ``count``)."""

    admit: B
    verdict: npt.NDArray[np.int8]
    count: I64


@dataclass
class _View:
    """Per cluster: node classes for the policy checks and each node's memo keys."""

    generation: int
    #: ``cluster.version`` the keys below were taken at (-1: never)
    seen: I64
    #: the key for pods whose per-NUMA counts decide (the counts key where the node has one)
    counts_key: I64
    exact_key: I64
    #: node -> index into ``class_nodes`` (same topology policy and CPU manager policy)
    policy_class: I64
    class_nodes: list[Node]
    #: pod uid -> nodes whose CPU state held it when their keys were taken
    holders: dict[str, set[int]]
    row_pods: list[frozenset[str]]
    rows: I64
    #: the nodes' free amounts (``cluster.free`` transposed: a row per resource), kept up to
    #: date with the keys
    free_t: I64
    patterns: dict[_Pattern, _Classes] = field(default_factory=dict)
    #: per-node percent of allocatable of the score's cpu and memory columns
    percent: F64 | None = None
    #: the free cpu and memory (``Cluster.score_cols``) as floats - exact while every amount
    #: is an integer below 2**53 (else None, and the score is computed in integers first)
    score_free: F64 | None = None


def _new_view(cluster: Cluster, generation: int) -> _View:
    n = len(cluster.nodes)
    classes: dict[tuple[object, bool], int] = {}
    class_nodes: list[Node] = []
    policy_class = np.empty(n, dtype=np.int64)
    for i, cn in enumerate(cluster.nodes):
        node = cn.node
        key = (node.node_policy, node.machine.kubelet.cpu_manager_policy == CPU_STATIC)
        k = classes.get(key)
        if k is None:
            k = classes[key] = len(class_nodes)
            class_nodes.append(node)
        policy_class[i] = k
    return _View(
        generation,
        np.full(n, -1, dtype=np.int64),
        np.full(n, -1, dtype=np.int64),
        np.full(n, -1, dtype=np.int64),
        policy_class,
        class_nodes,
        {},
        [frozenset()] * n,
        np.arange(n, dtype=np.int64),
        cluster.free.T.copy(),
    )


def _classes(view: _View, pattern: _Pattern) -> _Classes:
    got = view.patterns.get(pattern)
    if got is None:
        admit = np.array([a is None for a in pattern], dtype=np.bool_)
        verdict = np.array([UNKNOWN if a is None else PASSED if a[0] else FAILED for a in pattern], dtype=np.int8)
        count = np.array([0 if a is None else a[1] for a in pattern], dtype=np.int64)
        cls = view.policy_class
        got = view.patterns[pattern] = _Classes(admit[cls], verdict[cls], count[cls])
    return got


class VolcanoSelect:
    """``Profile.relative_select`` of the ``volcano`` profile (see the module docstring)."""

    def __init__(self, memo: VolcanoMemo[FilterResult] = VOLCANO_MEMO) -> None:
        self.memo = memo
        self._views: weakref.WeakKeyDictionary[Cluster, _View] = weakref.WeakKeyDictionary()
        self._lut: dict[tuple[int, int], F64] = {}

    def _view(self, cluster: Cluster) -> _View:
        view = self._views.get(cluster)
        if view is None or view.generation != self.memo.generation or len(view.seen) != len(cluster.nodes):
            view = self._views[cluster] = _new_view(cluster, self.memo.generation)
        return view

    def prepare(self, cluster: Cluster) -> None:
        """Every node's keys and free amounts, taken when a scheduler is built (the first pod's
        cycle would otherwise take them all); later cycles take only the nodes that changed."""
        self._refresh(cluster, self._view(cluster))

    def _refresh(self, cluster: Cluster, view: _View) -> None:
        """Take the keys and free amounts of the nodes that changed since they were last
        looked at."""
        version = cluster.version
        changed = np.flatnonzero(version != view.seen)
        if changed.size == 0:
            return
        if changed.size > _FEW:
            view.free_t[:, changed] = cluster.free[changed].T
            if view.score_free is not None:
                part = view.free_t[np.asarray(cluster.score_cols)[:, None], changed]
                if np.abs(part).max() < _EXACT:
                    view.score_free[:, changed] = part
                else:
                    view.score_free = None
        rows = changed.tolist()
        cols = cluster.score_cols
        for i in rows:
            if changed.size <= _FEW:  # a few nodes (a bind): row by row
                free = cluster.free[i]
                view.free_t[:, i] = free
                if view.score_free is not None:
                    amounts = [int(free[col]) for col in cols]
                    if max(abs(a) for a in amounts) < _EXACT:
                        view.score_free[:, i] = amounts
                    else:
                        view.score_free = None
            nk = self.memo.node_key(cluster.nodes[i].node)
            view.counts_key[i] = nk.counts if nk.counts >= 0 else nk.exact
            view.exact_key[i] = nk.exact
            old = view.row_pods[i]
            if old != nk.pods:
                for uid in old - nk.pods:
                    held = view.holders.get(uid)
                    if held is not None:
                        held.discard(i)
                        if not held:
                            del view.holders[uid]
                for uid in nk.pods - old:
                    view.holders.setdefault(uid, set()).add(i)
                view.row_pods[i] = nk.pods
            view.seen[i] = version[i]

    def _fits(self, view: _View, vec: I64) -> B:
        """:meth:`Cluster.fits <numalign.scheduler.cluster.Cluster.fits>` of every node (the
        same comparisons, one requested column at a time)."""
        ok: B | None = None
        for col in np.flatnonzero(vec).tolist():
            here = view.free_t[col] >= vec[col]
            ok = here if ok is None else np.logical_and(ok, here, out=ok)
        return np.ones(view.seen.size, dtype=np.bool_) if ok is None else ok

    def _scores(self, sched: SchedulerView, vec: I64, view: _View) -> F64:
        """The profile's weighted node score of every node (meaningful where the pod fits):
        LeastAllocated with :func:`~numalign.scheduler.scorers.least_allocated`'s arithmetic,
        element by element (so the same floats)."""
        p = sched.profile
        c = sched.cluster
        if p.node_score is least_allocated:
            cols = list(c.score_cols)
            if view.percent is None:
                view.percent = np.stack([c.percent_of_allocatable(col) for col in cols])
                if np.abs(view.free_t[cols]).max() < _EXACT:
                    view.score_free = view.free_t[cols].astype(np.float64)
            want = [int(vec[col]) for col in cols]
            if view.score_free is not None and max(abs(v) for v in want) < _EXACT:
                # (free - request) of integers below 2**53 is exact in floats: the same values
                part = view.score_free - np.array(want, dtype=np.float64)[:, None]
                part *= view.percent
            else:
                part = (view.free_t[cols] - np.array(want, dtype=np.int64)[:, None]) * view.percent
            np.clip(part, 0.0, 100.0, out=part)
            out: F64 = part[0] + part[1]
            out *= 0.5
        else:
            out = p.node_score(c, view.rows, vec)
        return out if p.node_weight == 1 else out * p.node_weight

    def __call__(self, sched: SchedulerView, pod: Pod, vec: I64) -> tuple[Pick | None, str | None, int]:
        """(the chosen node or None, why not, admissions computed) for ``pod`` with node-level
        request ``vec``."""
        c = sched.cluster
        memo = self.memo
        memo.bound_memory()
        view = self._view(c)
        self._refresh(c, view)
        fit = self._fits(view, vec)
        if not fit.any():
            return None, INSUFFICIENT, 0
        scores = self._scores(sched, vec, view)
        # the policy checks, per class of nodes: an answer, or None (the admission decides)
        early = [volcano_policy_check(rep, pod) for rep in view.class_nodes]
        classes = None if all(r is None for r in early) else _classes(
            view, tuple(None if r is None else (r.passed, r.numa_count) for r in early))
        shape = memo.shape(pod)
        table = memo.table(shape)
        table.ensure(memo.key_count)
        keys = view.counts_key if counts_suffice(shape) else view.exact_key
        st = table.verdict[keys]
        if classes is not None:
            st = np.where(classes.admit, st, classes.verdict)
        direct: dict[int, FilterResult] = {}
        checks = 0
        held = view.holders.get(pod.uid)
        if held:
            for i in sorted(held):
                if fit[i] and (classes is None or classes.admit[i]):
                    own = direct[i] = volcano_admission(c.nodes[i].node, pod)
                    checks += 1
                    st[i] = PASSED if own.passed else FAILED
        st *= fit  # only fitting nodes are candidates: the others FAILED (0)
        want = sched.nodes_to_score
        # answer the candidates the walk reaches: those ranked no later than the want-th that
        # passed (all of them while fewer pass), computing what the memo lacks
        while True:
            ok = np.flatnonzero(st == PASSED)
            cut = _Cut(ok, want, scores) if ok.size >= want else None
            unknown = np.flatnonzero(st == UNKNOWN)
            if unknown.size and cut is not None:
                unknown = unknown[cut.reaches(unknown, scores)]
            if unknown.size == 0:
                break
            uk = keys[unknown]
            _, first = np.unique(uk, return_index=True)
            for j in unknown[first].tolist():
                table.put(int(keys[j]), volcano_admission(c.nodes[j].node, pod))
                checks += 1
            st[unknown] = table.verdict[uk]
        if ok.size == 0:
            # the walk ended on the last fitting node: lowest score, then highest node index
            f = np.flatnonzero(fit)
            fs = scores[f]
            last = int(f[fs == fs.min()].max())
            if last in direct:
                why = direct[last].reason
            elif classes is None or classes.admit[last]:
                why = table.answers[int(keys[last])].reason
            else:
                said = early[int(view.policy_class[last])]
                assert said is not None
                why = said.reason
            return None, why, checks
        if cut is not None:
            ok, ok_scores = ok[cut.taken], cut.scores[cut.taken]
        else:
            ok_scores = scores[ok]
        counts = table.numa_count[keys[ok]]
        if classes is not None:
            counts = np.where(classes.admit[ok], counts, classes.count[ok])
        for i, own in direct.items():
            at = int(np.searchsorted(ok, i))
            if at < ok.size and int(ok[at]) == i:
                counts[at] = own.numa_count
        return self._pick(sched, ok, counts, ok_scores), None, checks

    def _pick(self, sched: SchedulerView, ok: I64, counts: I64, s: F64) -> Pick:
        """The best total among the passing nodes ``ok`` (ascending node indices) that the
        walk collected, with their NUMA counts and node scores ``s``."""
        p = sched.profile
        numa_score = p.numa_score
        assert numa_score is not None
        w = p.numa_weight
        if isinstance(numa_score, VolcanoNumaAware):
            numa = self._volcano_scores(int(counts.max()), w)[counts]
        else:
            order = np.lexsort((ok, -s))  # the walk's order, for any relative score
            ok, counts, s = ok[order], counts[order], s[order]
            numa = np.asarray([w * v for v in numa_score.scores(counts.tolist(), sched.cluster.max_numa)],
                              dtype=np.float64)
        totals = s + numa
        # the best total; ties go to the earlier candidate (higher node score, then lower index)
        top = np.flatnonzero(totals == totals.max())
        if top.size > 1:
            top = top[s[top] == s[top].max()]
        best = int(top[np.argmin(ok[top])]) if top.size > 1 else int(top[0])
        return int(ok[best]), int(counts[best]), float(s[best]) + float(numa[best])

    def _volcano_scores(self, top: int, weight: int) -> F64:
        """``weight`` x Volcano's numa-aware score of each count 0..``top`` (the largest count
        among the candidates), as floats."""
        got = self._lut.get((top, weight))
        if got is None:
            got = np.array([float(weight * v) for v in volcano_numa_aware(list(range(top + 1)))], dtype=np.float64)
            self._lut[(top, weight)] = got
        return got


class _Cut:
    """Where the walk stops: the ``k``-th of the passing nodes ``ok`` (ascending) in the
    walk's order (node score descending, node index ascending)."""

    def __init__(self, ok: I64, k: int, scores: F64) -> None:
        s = scores[ok]
        at = ok.size - k
        kth = np.partition(s, at)[at]
        taken = s >= kth
        over = int(np.count_nonzero(taken)) - k
        #: the k-th node's score, and its index once known (None: the highest index scoring
        #: ``score`` among ``ok``, found when asked for)
        self.score = float(kth)
        self._last: int | None = None
        if over:  # more than k score at least the k-th score: the ties after the k-th go
            tied = np.flatnonzero(s == kth)
            keep = tied.size - over
            taken[tied[keep:]] = False
            self._last = int(ok[tied[keep - 1]])
        self._ok = ok
        #: scores of ``ok``; which of ``ok`` the walk takes (exactly k)
        self.scores = s
        self.taken = taken

    def last(self) -> int:
        """The node index of the k-th node."""
        if self._last is None:
            self._last = int(self._ok[np.flatnonzero(self.scores == self.score)[-1]])
        return self._last

    def reaches(self, nodes: I64, scores: F64) -> B:
        """Which of ``nodes`` come no later than the k-th node in the walk's order."""
        s = scores[nodes]
        out: B = (s > self.score) | ((s == self.score) & (nodes <= self.last()))
        return out


__all__ = ["Pick", "SchedulerView", "VolcanoSelect"]
