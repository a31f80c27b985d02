"""Admission results shared between nodes in the same situation (the scheduler's hot path).

A cluster has thousands of nodes built from a few machine templates, and a workload has a few
hundred pod shapes: most admissions repeat one already made on another node - same machine,
same free CPUs, memory tables and devices in use, same node-level requests, same pod shape
and container names. :class:`PlanCache` remembers such an admission (:meth:`Node.plan
<numalign.node.admission.Node.plan>`'s result and the state change as a
:class:`~numalign.resources.pod_delta.PodDelta`) and replays it under the new pod's uid and
key. The key holds everything the decision reads (:func:`plan_key`), so a replayed plan is
the plan the engine computes (``tests/test_scheduler_speed_plan_cache.py`` compares them).

Not cached: ``--explain`` runs, rejections whose message names the pod, and changes that are
not a pure delta of the admitted pod (:meth:`PodDelta.between` says so).
"""

from __future__ import annotations

import weakref
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from numalign.machine.model import Machine
from numalign.memo import remember
from numalign.modes.registry import Mode
from numalign.node.state import NodeState, PodRecord
from numalign.pods import Pod
from numalign.resources.pod_delta import PodDelta, decision_key, holds


@dataclass(frozen=True)
class CachedPlan:
    pod: Pod  # the pod the plan was made for
    result: Any  # its PodResult (admission imports this module, not the other way round)
    delta: PodDelta | None  # None: rejected
    record: PodRecord | None
    #: the decision key of the state after admission (None: rejected); a replay leaves a
    #: state with the same key (the same argument that makes the replay exact)
    post_key: Hashable | None = None


class _Key:
    """A decision key that hashes once (plan keys are looked up many times)."""

    __slots__ = ("hash", "key")

    def __init__(self, key: Hashable) -> None:
        self.key = key
        self.hash = hash(key)

    def __hash__(self) -> int:
        return self.hash

    def __eq__(self, other: object) -> bool:
        return self is other or (isinstance(other, _Key) and self.hash == other.hash and self.key == other.key)


#: node states -> their decision key, by identity (a weak reference tells a live state from
#: a dead one whose id was reused); the engine never changes a node's state in place
#: (admission, release and observed usage make new states), so a state's key never changes.
#: Cleared beyond :data:`STATE_KEYS_SIZE` entries.
_STATE_KEYS: dict[int, tuple[weakref.ref[NodeState], _Key]] = {}
STATE_KEYS_SIZE = 1 << 15


def _remember(state: NodeState, key: _Key) -> _Key:
    return remember(_STATE_KEYS, id(state), (weakref.ref(state), key), STATE_KEYS_SIZE)[1]


def _decision_key(state: NodeState) -> _Key:
    """:func:`decision_key` of a node state, remembered for the state."""
    hit = _STATE_KEYS.get(id(state))
    if hit is not None and hit[0]() is state:
        return hit[1]
    return _remember(state, _Key(decision_key(state.cpu, state.memory, state.devices)))


def known_decision_key(state: NodeState) -> Hashable | None:
    """The decision key remembered for ``state`` (one object per distinct key, hashed once), or
    None when none is: never computed here."""
    hit = _STATE_KEYS.get(id(state))
    return hit[1] if hit is not None and hit[0]() is state else None


def share_decision_key(state: NodeState, copy: NodeState) -> None:
    """Remember for ``copy``, a copy of ``state`` with nothing changed since (a cluster's fresh
    nodes copy their machine's first node's empty state), the decision key of ``state``: computed
    once per machine, not once per node."""
    _remember(copy, _decision_key(state))


def plan_key(machine: Machine, mode: Mode, state: NodeState, pod: Pod) -> Hashable:
    """Everything a new pod's admission on a node reads once predicate admission passed
    (node-level requests are only read there): the node's part (:func:`state_key`) and the
    pod's shape (annotations included, so the policy in force follows) and container names."""
    return (state_key(machine, mode, state), pod.shape, tuple(c.name for c in pod.containers))


def state_key(machine: Machine, mode: Mode, state: NodeState) -> Hashable:
    """The part of :func:`plan_key` that belongs to the node: the machine (and with it the
    kubelet configuration and labels), the engine mode (a scheduler profile may set it on a
    node) and the managers' states. Two nodes with equal state keys make the same decision
    for every pod shape once predicate admission passed (the scheduler uses it to know a
    node's answer from another node's, see :class:`numalign.scheduler.scheduler.Scheduler`)."""
    return (id(machine), mode, _decision_key(state))


class PlanCache:
    """Bounded map plan key -> :class:`CachedPlan` (oldest entries dropped first)."""

    def __init__(self, size: int = 8192) -> None:
        self.size = size
        self._entries: dict[Hashable, CachedPlan] = {}
        self._machines: dict[int, Machine] = {}  # keeps the ids in the keys valid
        self.hits = 0
        self.misses = 0

    def get(self, key: Hashable) -> CachedPlan | None:
        hit = self._entries.get(key)
        if hit is None:
            self.misses += 1
        else:
            self.hits += 1
        return hit

    def put(self, key: Hashable, machine: Machine, entry: CachedPlan) -> None:
        if len(self._entries) >= self.size:
            for old in list(self._entries)[: self.size // 4]:
                del self._entries[old]
        self._machines.setdefault(id(machine), machine)
        self._entries[key] = entry

    @staticmethod
    def entry(pod: Pod, result: object, admitted: bool, pre: NodeState,
              planned: NodeState | None, message: str) -> CachedPlan | None:
        """What to remember of one admission; None when it cannot be replayed."""
        if any(s and s in message for s in (pod.uid, pod.name, pod.key)):
            return None
        if not admitted or planned is None:
            return CachedPlan(pod, result, None, None)
        delta = PodDelta.between(
            (pre.cpu, pre.memory, pre.devices), (planned.cpu, planned.memory, planned.devices), pod.uid
        )
        record = planned.pods.get(pod.uid)
        if delta is None or record is None or list(planned.pods) != [*pre.pods, pod.uid]:
            return None
        return CachedPlan(pod, result, delta, record, _decision_key(planned))

    @staticmethod
    def replay(entry: CachedPlan, pod: Pod, state: NodeState) -> NodeState | None:
        """The state after admitting ``pod`` on ``state`` as the cached plan did (None:
        rejected, or ``state`` already holds entries for the pod's uid)."""
        if entry.delta is None or entry.record is None:
            return None
        if holds(pod.uid, state.cpu, state.memory, state.devices):
            return None
        cpu, memory, devices = entry.delta.apply(state.cpu, state.memory, state.devices, pod.uid)
        pods = dict(state.pods)
        pods[pod.uid] = entry.record.replace(uid=pod.uid, key=pod.key,
                                requests=dict(entry.record.requests))
        out = NodeState(cpu, memory, devices, pods)
        if isinstance(entry.post_key, _Key):
            _remember(out, entry.post_key)
        return out


__all__ = ["CachedPlan", "PlanCache", "known_decision_key", "plan_key", "share_decision_key", "state_key"]
