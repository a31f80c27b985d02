"""The ``volcano`` profile's node choice, vectorised: the scheduler's relative walk with
Volcano's predicate answered for every candidate at once.

The scheduler's relative walk (:meth:`numalign.scheduler.scheduler.Scheduler._select_relative`)
asks the NUMA filter about candidates best node score first until ``nodes_to_score`` passed,
then adds the relative NUMA score and keeps the best total (ties: the earlier candidate). On
5,000 nodes that is ~900 filter probes per pod in Python. :class:`VolcanoSelect` gives the same
placement, pending reason and NUMA count:

* the predicate's policy checks (:func:`~numalign.scheduler.filters.volcano_policy_check`)
  depend on the pod and on the node's policy and CPU manager policy only: answered once per
  such class of nodes;
* the admission's answer is looked up per candidate in the predicate's memo
  (:mod:`numalign.scheduler.volcano_fast`) through each node's key, kept per node and
  refreshed when ``cluster.version`` says the node changed; answers the memo lacks are
  computed with the reference admission only for candidates the walk reaches (best first,
  until ``nodes_to_score`` candidates passed), once per distinct key;
* a node whose CPU state already holds the pod's uid is asked directly (no memo).

``checked`` in the outcome counts the admissions computed (memo misses).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from numalign.node.admission import Node
from numalign.pods import Pod
from numalign.resources.cpu import POLICY_STATIC as CPU_STATIC
from numalign.scheduler.cluster import Cluster
from numalign.scheduler.filters import (
    VOLCANO_MEMO,
    FilterResult,
    volcano_admission,
    volcano_policy_check,
)
from numalign.scheduler.scorers import NumaScore, VolcanoNumaAware, volcano_numa_aware_array
from numalign.scheduler.volcano_fast import AnswerTable, VolcanoMemo, counts_suffice

I64 = npt.NDArray[np.int64]
UNKNOWN, FAILED, PASSED = -1, 0, 1

#: the chosen node: (index in the cluster, NUMA count there, total score)
Pick = tuple[int, int, float]


class _ProfileView(Protocol):
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


@dataclass
class _View:
    """Per cluster: node classes for the policy checks and each node's memo keys."""

    generation: int
    #: ``cluster.version`` the keys below were taken at (-1: never)
    seen: I64
    counts_key: I64
    exact_key: I64
    #: node -> index into ``class_nodes`` (same topology policy and CPU manager policy)
    policy_class: I64
    class_nodes: list[Node]
    #: pod uid -> nodes whose CPU state held it when their keys were taken
    holders: dict[str, set[int]]
    row_pods: list[frozenset[str]]


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
    )


class VolcanoSelect:
    """``Profile.relative_select`` of the ``volcano`` profile (see the module docstring)."""

    def __init__(self, memo: VolcanoMemo[FilterResult] = VOLCANO_MEMO) -> None:
        self.memo = memo
        self._views: weakref.WeakKeyDictionary[Cluster, _View] = weakref.WeakKeyDictionary()

    def _view(self, cluster: Cluster) -> _View:
        view = self._views.get(cluster)
        if view is None or view.generation != self.memo.generation or len(view.seen) != len(cluster.nodes):
            view = self._views[cluster] = _new_view(cluster, self.memo.generation)
        return view

    def _refresh(self, cluster: Cluster, view: _View, nodes: I64) -> None:
        """Take the keys of the nodes that changed since they were last looked at."""
        version = cluster.version
        for i in nodes[version[nodes] != view.seen[nodes]].tolist():
            nk = self.memo.node_key(cluster.nodes[i].node)
            view.counts_key[i] = nk.counts
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

    def __call__(
        self, sched: SchedulerView, pod: Pod, idx: npt.NDArray[Any], scores: npt.NDArray[Any]
    ) -> tuple[Pick | None, str | None, int]:
        c = sched.cluster
        p = sched.profile
        numa_score = p.numa_score
        assert numa_score is not None
        memo = self.memo
        memo.bound_memory()
        view = self._view(c)
        want = sched.nodes_to_score
        # the policy checks, per class of nodes: an answer, or None (the admission decides)
        early = [volcano_policy_check(rep, pod) for rep in view.class_nodes]
        admit_cls = np.array([r is None for r in early], dtype=np.bool_)
        early_pass = np.array([r is not None and r.passed for r in early], dtype=np.bool_)
        early_count = np.array([0 if r is None else r.numa_count for r in early], dtype=np.int64)
        shape = memo.shape(pod)
        table = memo.table(shape)
        use_counts = counts_suffice(shape)
        checks = 0
        found: list[tuple[I64, I64]] = []  # (positions in idx, NUMA counts), best first
        found_n = 0
        last_answer: FilterResult | None = None
        for block in _ranked_blocks(idx, scores, 2 * want):
            nodes = idx[block].astype(np.int64)
            cls = view.policy_class[nodes]
            passed = np.where(early_pass[cls], PASSED, FAILED).astype(np.int8)
            count = early_count[cls]
            keys = np.full(block.size, -1, dtype=np.int64)
            direct: dict[int, FilterResult] = {}
            adm = np.flatnonzero(admit_cls[cls])
            if adm.size:
                an = nodes[adm]
                self._refresh(c, view, an)
                keys[adm] = np.where(view.counts_key[an] >= 0, view.counts_key[an], view.exact_key[an]) \
                    if use_counts else view.exact_key[an]
                passed[adm] = UNKNOWN
                held = view.holders.get(pod.uid)
                if held:
                    for j in adm[np.isin(an, list(held))].tolist():
                        own = direct[j] = volcano_admission(c.nodes[int(nodes[j])].node, pod)
                        checks += 1
                        passed[j] = PASSED if own.passed else FAILED
                        count[j] = own.numa_count
                need = want - found_n
                while True:
                    _gather(table, keys, passed, count)
                    ok = np.cumsum(passed == PASSED)
                    stop = block.size if ok[-1] < need else int(np.searchsorted(ok, need)) + 1
                    todo = np.flatnonzero(passed[:stop] == UNKNOWN)
                    if todo.size == 0:
                        break
                    _, first = np.unique(keys[todo], return_index=True)
                    for j in todo[np.sort(first)].tolist():
                        table.put(int(keys[j]), volcano_admission(c.nodes[int(nodes[j])].node, pod))
                        checks += 1
            take = np.flatnonzero(passed == PASSED)[: want - found_n]
            found.append((block[take], count[take]))
            found_n += take.size
            if found_n >= want:
                break
            last = block.size - 1
            if last in direct:
                last_answer = direct[last]
            elif keys[last] >= 0:
                last_answer = table.answers[int(keys[last])]
            else:
                last_answer = early[int(cls[last])]
        if found_n == 0:
            assert last_answer is not None
            return None, last_answer.reason, checks
        pos = np.concatenate([f[0] for f in found])
        counts = np.concatenate([f[1] for f in found])
        w = p.numa_weight
        if isinstance(numa_score, VolcanoNumaAware):
            numa = (w * volcano_numa_aware_array(counts)).astype(np.float64)
        else:
            numa = np.asarray([w * v for v in numa_score.scores(counts.tolist(), c.max_numa)], dtype=np.float64)
        totals = scores[pos] + numa
        best = int(np.argmax(totals))  # the first maximum: ties go to the earlier candidate
        j = int(pos[best])
        return (int(idx[j]), int(counts[best]), float(scores[j]) + float(numa[best])), None, checks


def _gather(table: AnswerTable[FilterResult], keys: I64, passed: npt.NDArray[np.int8], count: I64) -> None:
    """Fill unknown answers from the memo table."""
    todo = np.flatnonzero(passed == UNKNOWN)
    if todo.size == 0:
        return
    k = keys[todo]
    inside = k < table.known.size
    todo, k = todo[inside], k[inside]
    hit = table.known[k]
    todo, k = todo[hit], k[hit]
    passed[todo] = np.where(table.passed[k], PASSED, FAILED)
    count[todo] = table.numa_count[k]


def _ranked_blocks(idx: npt.NDArray[Any], scores: npt.NDArray[Any], head: int) -> Iterator[I64]:
    """Positions of ``idx`` by node score, best first, ties by node index (the scheduler's
    walk order), in two blocks: the ``head`` best (and whatever ties the last of them), then
    the rest - sorted only if the walk gets there."""
    n = scores.size
    if n <= 2 * head:
        yield np.lexsort((idx, -scores)).astype(np.int64)
        return
    kth = np.partition(scores, n - head)[n - head]
    top = np.flatnonzero(scores >= kth)
    yield top[np.lexsort((idx[top], -scores[top]))]
    rest = np.flatnonzero(scores < kth)
    if rest.size:
        yield rest[np.lexsort((idx[rest], -scores[rest]))]


__all__ = ["Pick", "SchedulerView", "VolcanoSelect"]
