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
from numalign.scheduler.group_arrays import group_heads
from numalign.scheduler.scorers import NumaScore

#: distinct node keys (and their answers) remembered; all are dropped beyond it
KEYS_SIZE = 1 << 16  # at most 2^16: group_arrays sorts key numbers as uint16
#: answers remembered (per key number, pod shape and container names); dropped beyond it
ANSWERS_SIZE = 1 << 17
#: cells of the tables' refusal arrays (:attr:`ShapeTable.refusals`, one byte per key number
#: and table) held over all tables; all tables are dropped beyond it
ARRAY_CELLS = 1 << 25

NodeKey = Callable[[Node], Hashable]
#: (pod shape, container names): what a group's answers are kept under, with its key number
ShapeKey = tuple[Any, tuple[str, ...]]


@dataclass
class Answer:
    """A group's answer to one pod shape: the filter's, and the node-aware NUMA score once
    asked (None until then)."""

    result: FilterResult
    score: int | None = None


@dataclass
class ShapeTable:
    """The groups' answers to one pod shape (and container names), by key number: a walk looks
    its pod's table up once, then each group by its number."""

    answers: dict[int, Answer] = field(default_factory=dict)
    #: the NUMA score's node bound per key number
    bounds: dict[int, int | None] = field(default_factory=dict)
    #: per key number: whether :attr:`answers` holds a refusal (an array, so that a walk over
    #: many candidates drops those of such groups in one step: :meth:`NodeGroups.refused`)
    refusals: np.ndarray[Any, Any] = field(default_factory=lambda: np.zeros(0, dtype=np.bool_))

    def cover(self, top: int) -> int:
        """Grow :attr:`refusals` to hold key number ``top``; returns the cells added."""
        have = self.refusals.size
        if top < have:
            return 0
        grown = np.zeros(max(top + 1, 2 * have, 64), dtype=np.bool_)
        grown[:have] = self.refusals
        self.refusals = grown
        return grown.size - have

    def keep(self, number: int, answer: Answer) -> int:
        """Remember ``answer`` of group ``number``; returns the array cells added."""
        self.answers[number] = answer
        added = self.cover(number)
        self.refusals[number] = not answer.result.passed
        return added

    def clear(self) -> None:
        self.answers.clear()
        self.bounds.clear()
        self.refusals = np.zeros(0, dtype=np.bool_)


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
        self._cells = 0  # cells of all tables' refusal arrays

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
        pods = node.state.pod_names()
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

    def refused(self, table: ShapeTable, numbers: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        """Per key number in ``numbers``: whether the table holds a refusal for it."""
        top = int(numbers.max()) if numbers.size else -1
        if top >= table.refusals.size:
            if self._cells >= ARRAY_CELLS:
                self._drop_tables()
            self._cells += table.cover(top)
        out: np.ndarray[Any, Any] = table.refusals[numbers]
        return out

    def bound(self, table: ShapeTable, number: int, score: NumaScore, node: Node, pod: Pod) -> int | None:
        """``score``'s node bound (:meth:`~numalign.scheduler.scorers.NumaScore.node_bound`)
        of group ``number`` for the table's pod shape, read on ``node`` (one of the group) once."""
        bounds = table.bounds
        if number in bounds:
            return bounds[number]
        if self._bounds >= ANSWERS_SIZE:
            self._drop_tables()
        out = bounds[number] = score.node_bound(node, pod)
        self._bounds += 1
        return out


__all__ = ["ANSWERS_SIZE", "ARRAY_CELLS", "KEYS_SIZE", "Answer", "NodeGroups", "NodeKey", "ShapeKey", "ShapeTable", "group_heads"]
