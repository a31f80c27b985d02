"""Volcano's numa-aware predicate without an admission per probe: a memo keyed by what the
answer depends on.

The predicate (:func:`numalign.modes.volcano.predicate.volcano_filter_reference`) runs a CPU-only
admission of the pod's app containers under the node's policy with the legacy merge. Its
answer - passed, the NUMA count of the CPUs it would take, the reason - reads nothing but

* the node's configuration: the machine, its topology policy and options, the reserved CPUs;
* the pod's Volcano shape (:func:`volcano_shape`): the task policy annotation and each app
  container's exclusive CPUs (:func:`numalign.pods.guaranteed_cpus`); names and uid only reach
  the CPU state, where a pod that is not on the node has nothing;
* the CPU manager's available CPUs (shared pool minus reserved).

So the answer is memoised per Volcano shape on a *node key* - the configuration and the
available CPUs, interned as a small integer - and computed by the reference once per distinct
key: identical nodes (a cluster template's thousands of empty nodes) share one admission.

**Per-NUMA counts are enough** for a pod with at most one app container that gets exclusive
CPUs, on a static CPU manager without ``full-pcpus-only`` or ``align-by-socket``: the hints
(``generateCPUTopologyHints``) are a function of the available CPUs per NUMA node, so the
merged affinity ``M`` and the decision are; the allocation takes the ``n`` CPUs out of the
available CPUs of ``M`` (there are at least ``n``: ``M`` is a feasible mask), and they touch
exactly ``|M|`` NUMA nodes - a set on fewer nodes would sit in a narrower mask holding ``n``
CPUs, while ``M`` is the narrowest feasible mask (non-preferred), or as narrow as
``minAffinitySize`` over the *total* CPUs (preferred). When the merge gives no feasible mask,
the allocation fails with a message made of counts. Every other case (several CPU
containers, SMT / socket alignment options) is keyed by the exact available CPU set.
``tests/test_volcano_speed.py`` checks the memo against the reference on random clusters.

A node's key is cached against its CPU state object (the engine never changes a state in
place: admission, release and observed usage all work on copies) and the pods that state
holds, so a probe of an unchanged node costs a dictionary lookup.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from numalign.machine.model import Machine
from numalign.node.admission import Node
from numalign.pods import Pod, guaranteed_cpus
from numalign.pods.annotations import VOLCANO_ANNOTATION
from numalign.resources.cpu import CpuManager
from numalign.resources.cpu_state import CpuState

#: node keys interned before the memo starts over (a bound on memory, not on correctness)
MAX_KEYS = 100_000

#: (task policy annotation, exclusive CPUs of each app container)
VolcanoShape = tuple[str, tuple[int, ...]]


class Answer(Protocol):
    """What the memo keeps per (shape, node key): a filter result."""

    @property
    def passed(self) -> bool: ...

    @property
    def numa_count(self) -> int: ...


A = TypeVar("A", bound=Answer)


def volcano_shape(pod: Pod) -> VolcanoShape:
    """What the predicate's admission reads of a Guaranteed pod."""
    return (
        pod.annotations.get(VOLCANO_ANNOTATION, ""),
        tuple(guaranteed_cpus(pod, c) for c in pod.app_containers),
    )


def counts_suffice(shape: VolcanoShape) -> bool:
    """At most one app container with exclusive CPUs: per-NUMA counts decide (module doc)."""
    return sum(1 for n in shape[1] if n > 0) <= 1


@dataclass(frozen=True)
class _Config:
    """What the predicate reads of a node besides its CPU state."""

    ident: int
    machine: Machine  # kept alive: its id stays unique while the entry lives
    cpus_by_numa: tuple[frozenset[int], ...]
    reserved: frozenset[int]
    #: the per-NUMA counts of the available CPUs decide single-CPU-container pods
    counts_decide: bool


@dataclass(frozen=True)
class NodeKey:
    """A node's keys for one CPU state: ``counts`` (configuration + available CPUs per NUMA
    node; -1 where counts do not decide on this node) and ``exact`` (configuration + the
    available CPU set), and the uids of the pods that state holds."""

    state: CpuState
    pods: frozenset[str]
    counts: int
    exact: int

    def for_shape(self, shape: VolcanoShape) -> int:
        return self.counts if self.counts >= 0 and counts_suffice(shape) else self.exact


#: :attr:`AnswerTable.verdict` values
UNKNOWN, FAILED, PASSED = -1, 0, 1


class AnswerTable(Generic[A]):
    """The answers for one Volcano shape, by node key; also as arrays for vectorised
    lookups: ``verdict`` (:data:`UNKNOWN` / :data:`FAILED` / :data:`PASSED`) and
    ``numa_count``."""

    def __init__(self) -> None:
        self.answers: dict[int, A] = {}
        self.verdict: npt.NDArray[np.int8] = np.full(64, UNKNOWN, dtype=np.int8)
        self.numa_count: npt.NDArray[np.int64] = np.zeros(64, dtype=np.int64)

    def ensure(self, size: int) -> None:
        """Make the arrays at least ``size`` long (new keys unknown)."""
        if size > self.verdict.size:
            size = max(size, 2 * self.verdict.size)
            verdict = np.full(size, UNKNOWN, dtype=np.int8)
            verdict[: self.verdict.size] = self.verdict
            count = np.zeros(size, dtype=np.int64)
            count[: self.numa_count.size] = self.numa_count
            self.verdict, self.numa_count = verdict, count

    def put(self, key: int, answer: A) -> None:
        self.ensure(key + 1)
        self.answers[key] = answer
        self.verdict[key] = PASSED if answer.passed else FAILED
        self.numa_count[key] = answer.numa_count


class VolcanoMemo(Generic[A]):
    """Answers of the Volcano predicate per (Volcano shape, node key)."""

    def __init__(self) -> None:
        #: bumped when the memo starts over; holders of node keys must drop theirs
        self.generation = 0
        self._configs: dict[tuple[object, ...], _Config] = {}
        self._node_config: weakref.WeakKeyDictionary[Node, tuple[tuple[object, ...], _Config]] = (
            weakref.WeakKeyDictionary()
        )
        self._node_keys: weakref.WeakKeyDictionary[Node, NodeKey] = weakref.WeakKeyDictionary()
        self._keys: dict[tuple[object, ...], int] = {}
        self._tables: dict[VolcanoShape, AnswerTable[A]] = {}
        self._pod: Pod | None = None
        self._pod_shape: VolcanoShape = ("", ())

    # ------------------------------------------------------------------ keys

    def _config(self, node: Node) -> _Config:
        m = node.machine
        key = (id(m), node.node_policy, node.options, node.reserved_cpus)
        hit = self._node_config.get(node)
        if hit is not None:
            old = hit[0]  # the same objects (the usual case) or equal ones
            if (old[0] == key[0] and old[1] is key[1] and old[2] is key[2] and old[3] is key[3]) or old == key:
                return hit[1]
        cfg = self._configs.get(key)
        if cfg is None:
            opts = CpuManager(m, reserved=node.reserved_cpus).options
            cfg = _Config(
                ident=len(self._configs),
                machine=m,
                cpus_by_numa=tuple(m.cpus_by_numa.get(i, frozenset()) for i in m.node_ids),
                reserved=node.reserved_cpus,
                counts_decide=not (opts.full_pcpus_only or opts.align_by_socket),
            )
            self._configs[key] = cfg
        self._node_config[node] = (key, cfg)
        return cfg

    def _intern(self, key: tuple[object, ...]) -> int:
        got = self._keys.get(key)
        if got is None:
            got = self._keys[key] = len(self._keys)
        return got

    def node_key(self, node: Node) -> NodeKey:
        """The node's keys for its current CPU state."""
        state = node.state.cpu
        pods = state.pod_uids()
        hit = self._node_keys.get(node)
        if hit is not None and hit.state is state and hit.pods == pods:
            return hit
        cfg = self._config(node)
        cpus = state.shared_pool() - cfg.reserved
        counts = (
            self._intern((cfg.ident, tuple(len(cpus & numa) for numa in cfg.cpus_by_numa)))
            if cfg.counts_decide else -1
        )
        got = NodeKey(state, pods, counts, self._intern((cfg.ident, cpus)))
        self._node_keys[node] = got
        return got

    @property
    def key_count(self) -> int:
        """How many node keys are interned (keys are ``0 .. key_count - 1``)."""
        return len(self._keys)

    def bound_memory(self) -> None:
        """Start over once :data:`MAX_KEYS` node keys are interned (call between lookups:
        node keys handed out before are void afterwards, see :attr:`generation`)."""
        if len(self._keys) >= MAX_KEYS:
            self.clear()

    def shape(self, pod: Pod) -> VolcanoShape:
        """:func:`volcano_shape`, remembered for the last pod asked about."""
        if pod is not self._pod:
            self._pod_shape = volcano_shape(pod)
            self._pod = pod
        return self._pod_shape

    def table(self, shape: VolcanoShape) -> AnswerTable[A]:
        got = self._tables.get(shape)
        if got is None:
            got = self._tables[shape] = AnswerTable()
        return got

    # ---------------------------------------------------------------- lookup

    def answer(self, node: Node, pod: Pod, compute: Callable[[], A]) -> A:
        """The memoised answer for ``pod`` on ``node``; ``compute`` (the reference) runs on a
        miss, and always for a pod whose uid the node's CPU state already holds."""
        self.bound_memory()
        nk = self.node_key(node)
        if pod.uid in nk.pods:
            return compute()  # the state's own records of this pod take part: no memo
        shape = self.shape(pod)
        key = nk.for_shape(shape)
        table = self.table(shape)
        hit = table.answers.get(key)
        if hit is not None:
            return hit
        out = compute()
        table.put(key, out)
        return out

    def clear(self) -> None:
        self.generation += 1
        self._tables.clear()
        self._keys.clear()
        self._node_keys.clear()
        self._node_config.clear()
        self._configs.clear()
        self._pod = None


__all__ = ["FAILED", "MAX_KEYS", "PASSED", "UNKNOWN", "Answer", "AnswerTable", "NodeKey", "VolcanoMemo", "VolcanoShape",
           "counts_suffice", "volcano_shape"]
