"""Nodes that answer alike, grouped: a profile's filter and NUMA score asked once per group.

A cluster is built from a few machine templates and fills up by replayed admissions (the plan
cache), so most nodes share their situation with many others: at 5,000 nodes a pod's sampled
candidates fall in 5 to 15 distinct situations. A profile whose filter and node-aware NUMA score
read a node only through a *node key* (:attr:`numalign.scheduler.profiles.Profile.node_key`:
every input of both, as a hashable value) gets the same answers from every node of one key, for
one pod. :class:`NodeGroups` numbers the keys (each node's number kept per node version, so a
key is computed once per node change, not once per pod) and remembers answers per pod shape and
container names, then key number (a walk looks its table up once).

The scheduler's walk over such groups (``Scheduler._select_grouped``) chooses the node the
node-by-node walk chooses: candidates in walk order (score, then node index), the first
candidate of each group stands for the group - it has the group's best node score and comes
first among equals - and the chosen node is the first candidate of highest total among the
groups that pass, exactly as the node-by-node walk keeps the first strictly better total.

Two things a node key cannot hold are handled apart:

* an answer that names the pod (its uid, name or key, e.g. a pod already on the node) belongs
  to that pod only: it is used for the rest of the pod's walk and not remembered for others;
* a node that already holds the pod (by uid or ``namespace/name``) answers differently from its
  group: a walk where a candidate holds the pod is not grouped (:meth:`NodeGroups.holds_pod`).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from numalign.node.admission import Node
from numalign.pods import Pod
from numalign.scheduler.cluster import Cluster
from numalign.scheduler.filters import FilterResult
from numalign.scheduler.scorers import NumaScore

#: distinct node keys (and their answers) remembered; all are dropped beyond it
KEYS_SIZE = 1 << 16
#: answers remembered (per key number, pod shape and container names); dropped beyond it
ANSWERS_SIZE = 1 << 17
#: array cells (one per key number and table: :attr:`ShapeTable.status`, ``score`` and ``own``,
#: 17 bytes)
#: held over all tables; all tables are dropped beyond it
ARRAY_CELLS = 1 << 23

NodeKey = Callable[[Node], Hashable]
#: (pod shape, container names): what a group's answers are kept under, with its key number
ShapeKey = tuple[Any, tuple[str, ...]]


@dataclass
class Answer:
    """A group's answer to one pod shape: the filter's, and the node-aware NUMA score once
    asked (None until then)."""

    result: FilterResult
    score: int | None = None


def group_heads(
    idx: np.ndarray[Any, Any], scores: np.ndarray[Any, Any], numbers: np.ndarray[Any, Any]
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any], np.ndarray[Any, Any], int]:
    """The first candidate of each group in walk order (node score descending, then node index
    ascending) - its highest score, and the lowest node index among that score's candidates -
    listed in walk order: their scores, node indices and key numbers; and the key number of the
    walk's last candidate (lowest score, then highest node index).

    Every candidate sorted in walk order once (``lexsort``, NaN scores last), then each key
    number's first occurrence (``np.unique``'s first indices), kept in walk order. (An
    O(candidates + largest key number) variant with ``ufunc.at`` took 4 to 6 times as long on
    the benchmark's walks: 200 us for 500 candidates, 1.1 ms for 4,500, NumPy 2.4.)"""
    order = np.lexsort((idx, -scores))
    ordered = numbers[order]
    _, first = np.unique(ordered, return_index=True)
    first.sort()
    heads = order[first]
    return scores[heads], idx[heads], ordered[first], int(ordered[-1])


#: :attr:`ShapeTable.status` values
UNKNOWN, PASSED, REFUSED = 0, 1, 2


def _empty_status() -> np.ndarray[Any, Any]:
    return np.zeros(0, dtype=np.int8)


def _empty_score() -> np.ndarray[Any, Any]:
    return np.zeros(0, dtype=np.float64)


@dataclass
class ShapeTable:
    """The groups' answers to one pod shape (and container names), by key number: a walk looks
    its pod's table up once, then each group by its number.

    :attr:`answers` and :attr:`bounds` are also held as arrays indexed by key number
    (:meth:`lookup`), so that a walk reads what is known of all its groups in one step:
    :attr:`status` (:data:`UNKNOWN`, :data:`PASSED`, :data:`REFUSED`), :attr:`score` (the NUMA
    score of a group that passed, NaN until asked) and :attr:`own` (the group's NUMA score
    bound, NaN until asked, +inf for none). They change only through :meth:`keep`,
    :meth:`keep_score`, :meth:`keep_bound` and :meth:`clear`."""

    answers: dict[int, Answer] = field(default_factory=dict)
    #: the NUMA score's node bound per key number
    bounds: dict[int, int | None] = field(default_factory=dict)
    status: np.ndarray[Any, Any] = field(default_factory=_empty_status)
    score: np.ndarray[Any, Any] = field(default_factory=_empty_score)
    own: np.ndarray[Any, Any] = field(default_factory=_empty_score)

    def cover(self, top: int) -> int:
        """Grow the arrays to hold key number ``top``; returns the cells added."""
        have = self.status.size
        if top < have:
            return 0
        size = max(top + 1, 2 * have, 64)
        status = np.zeros(size, dtype=np.int8)
        status[:have] = self.status
        score = np.full(size, np.nan)
        score[:have] = self.score
        own = np.full(size, np.nan)
        own[:have] = self.own
        self.status, self.score, self.own = status, score, own
        return size - have

    def keep(self, number: int, answer: Answer) -> int:
        """Remember ``answer`` of group ``number``; returns the array cells added."""
        self.answers[number] = answer
        added = self.cover(number)
        self.status[number] = PASSED if answer.result.passed else REFUSED
        self.score[number] = np.nan if answer.score is None else float(answer.score)
        return added

    def keep_score(self, number: int, answer: Answer) -> None:
        """``answer.score`` was just set: into :attr:`score` if ``answer`` is the table's."""
        if answer.score is not None and self.answers.get(number) is answer:
            self.score[number] = float(answer.score)

    def keep_bound(self, number: int, bound: int | None) -> int:
        """Remember group ``number``'s NUMA score bound; returns the array cells added."""
        self.bounds[number] = bound
        added = self.cover(number)
        self.own[number] = np.inf if bound is None else float(bound)
        return added


    def clear(self) -> None:
        self.answers.clear()
        self.bounds.clear()
        self.status = _empty_status()
        self.score = _empty_score()
        self.own = _empty_score()


class NodeGroups:
    """Node key numbers per node (kept per node version) and the answers per key number."""

    def __init__(self, cluster: Cluster, node_key: NodeKey) -> None:
        n = len(cluster.nodes)
        self.cluster = cluster
        self.node_key = node_key
        #: per node: its key number, and the node version it was computed at (-1: never)
        self.number = np.full(n, -1, dtype=np.int64)
        self.number_version = np.full(n, -1, dtype=np.int64)
        self._numbers: dict[Hashable, int] = {}
        #: per node: the uids and keys of the pods on it when its number was computed
        self._pods: list[frozenset[str]] = [frozenset()] * n
        #: pod uid or key -> nodes that held it when their numbers were computed
        self._holders: dict[str, set[int]] = {}
        #: answers and bounds per pod shape and container names, then key number
        self.tables: dict[ShapeKey, ShapeTable] = {}
        self._answers = 0  # answers held in all tables
        self._bounds = 0  # bounds held in all tables
        self._cells = 0  # array cells of all tables (ShapeTable.status and score)

    def refresh(self, idx: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        """The key numbers of nodes ``idx`` now (computing those of nodes changed since)."""
        version = self.cluster.version
        stale = idx[self.number_version[idx] != version[idx]]
        if stale.size:
            if len(self._numbers) + stale.size > KEYS_SIZE:
                self._numbers.clear()
                self._drop_tables()
                self.number_version.fill(-1)
                stale = idx
            for i in stale.tolist():
                self._renumber(i, int(version[i]))
        out: np.ndarray[Any, Any] = self.number[idx]
        return out

    def _renumber(self, i: int, version: int) -> None:
        node = self.cluster.nodes[i].node
        key = self.node_key(node)
        self.number[i] = self._numbers.setdefault(key, len(self._numbers))
        self.number_version[i] = version
        pods = frozenset(x for p in node.state.pods.values() for x in (p.uid, p.key))
        old = self._pods[i]
        if pods != old:
            for x in old - pods:
                holders = self._holders.get(x)
                if holders is not None:
                    holders.discard(i)
                    if not holders:
                        del self._holders[x]
            for x in pods - old:
                self._holders.setdefault(x, set()).add(i)
            self._pods[i] = pods

    def holds_pod(self, pod: Pod, idx: np.ndarray[Any, Any]) -> bool:
        """Does one of the (refreshed) nodes ``idx`` hold ``pod`` (its uid or key)?"""
        holders = self._holders.get(pod.uid, set()) | self._holders.get(pod.key, set())
        return bool(holders) and bool(np.isin(idx, np.fromiter(holders, dtype=np.int64)).any())

    def table(self, shape: Any, names: tuple[str, ...]) -> ShapeTable:
        """The answers and bounds kept for a pod shape and container names."""
        key = (shape, names)
        out = self.tables.get(key)
        if out is None:
            out = self.tables[key] = ShapeTable()
        return out

    def _drop_tables(self) -> None:
        for t in self.tables.values():  # a walk may hold one: it forgets too
            t.clear()
        self.tables.clear()
        self._answers = self._bounds = self._cells = 0

    def remember(self, table: ShapeTable, number: int, answer: Answer, pod: Pod) -> None:
        """Keep ``answer`` of group ``number`` for other pods of the shape, unless it names
        ``pod``."""
        reason = answer.result.reason
        if reason and any(s and s in reason for s in (pod.uid, pod.name, pod.key)):
            return
        if self._answers >= ANSWERS_SIZE or self._cells >= ARRAY_CELLS:
            self._drop_tables()
        self._cells += table.keep(number, answer)
        self._answers += 1

    def lookup(self, table: ShapeTable, numbers: np.ndarray[Any, Any]) -> tuple[
            np.ndarray[Any, Any], np.ndarray[Any, Any], np.ndarray[Any, Any]]:
        """Per key number in ``numbers``: the table's :attr:`~ShapeTable.status`,
        :attr:`~ShapeTable.score` and :attr:`~ShapeTable.own` (the arrays grown to reach them:
        a number not reached yet is unknown)."""
        top = int(numbers.max()) if numbers.size else -1
        if top >= table.status.size:
            if self._cells >= ARRAY_CELLS:
                self._drop_tables()
            self._cells += table.cover(top)
        return table.status[numbers], table.score[numbers], table.own[numbers]

    def bound(self, table: ShapeTable, number: int, score: NumaScore, node: Node, pod: Pod) -> int | None:
        """``score``'s node bound (:meth:`~numalign.scheduler.scorers.NumaScore.node_bound`)
        of group ``number`` for the table's pod shape, read on ``node`` (one of the group) once."""
        bounds = table.bounds
        if number in bounds:
            return bounds[number]
        if self._bounds >= ANSWERS_SIZE or self._cells >= ARRAY_CELLS:
            self._drop_tables()
        out = score.node_bound(node, pod)
        self._cells += table.keep_bound(number, out)
        self._bounds += 1
        return out


__all__ = ["ANSWERS_SIZE", "ARRAY_CELLS", "KEYS_SIZE", "PASSED", "REFUSED", "UNKNOWN", "Answer", "NodeGroups", "NodeKey", "ShapeKey", "ShapeTable", "group_heads"]
