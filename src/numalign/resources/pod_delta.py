"""One pod's admission as a *delta* on the three managers' states, to replay on an equivalent
state (the node engine's plan cache, :mod:`numalign.node.plan_cache`).

What the managers decide for a pod that is not on the node yet depends only on:

* CPU manager: the shared pool (``default_set``) and the policy; the pod's own reusable CPUs
  (none for a new pod). Other pods' assignments are read only for the CPUs held under a
  Koordinator exclusive policy (``koordinator`` mode), which the key lists.
* memory manager: the per-NUMA tables (total, reserved, allocatable, free), the NUMA groups
  (``cells``, ``number_of_assignments``) and the policy; other pods' blocks are never read.
* device manager: which devices are in use (by anybody), never by whom.

:func:`decision_key` is exactly that, plus whether other pods' transient reuse entries
(``cpus_to_reuse``, ``reusable``) exist, because an allocation drops them. Two states with equal
keys give the same decisions for the same pod shape, and the state after admission differs
from the state before only by the pod's own entries, the shared pool, the memory tables and
(perhaps) the dropped reuse entries. :meth:`PodDelta.between` extracts that difference and
checks it really is one (``None`` otherwise: the caller then simply does not cache);
:meth:`PodDelta.apply` replays it on another state, under another pod uid.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, TypeVar

from numalign.resources.cpu_state import CpuState
from numalign.resources.devices import DeviceState
from numalign.resources.memory_state import MemoryState, NodeMemoryState, numa_held

V = TypeVar("V")


def decision_key(cpu: CpuState, memory: MemoryState, devices: DeviceState) -> Hashable:
    """What a new pod's admission reads of the managers' states (see the module doc)."""
    tables = tuple(
        (
            n,
            ns.number_of_assignments,
            tuple(ns.cells),
            tuple(
                (r, t.total, t.system_reserved, t.allocatable, t.reserved, t.free)
                for r, t in ns.memory_map.items()
            ),
        )
        for n, ns in memory.machine_state.items()
    )
    held: tuple[tuple[int, str, int], ...] = ()
    if not memory.machine_state and memory.assignments:  # Koordinator's per-NUMA blocks
        held = tuple(sorted((n, r, v) for n, per in numa_held(memory).items() for r, v in per.items()))
    return (
        cpu.policy_name,
        frozenset(cpu.default_set),
        held,
        bool(cpu.cpus_to_reuse),
        frozenset(cpu.exclusive_cpus().items()),  # Koordinator's exclusive policies of held CPUs
        memory.policy_name,
        tables,
        bool(memory.reusable),
        devices.taken(),
        bool(devices.reusable),
    )


def holds(uid: str, cpu: CpuState, memory: MemoryState, devices: DeviceState) -> bool:
    """True if any table has an entry for ``uid``."""
    return any(
        uid in d
        for d in (cpu.assignments, cpu.cpus_to_reuse, cpu.exclusive, memory.assignments, memory.reusable,
                  devices.allocated, devices.reusable)
    )


@dataclass(frozen=True)
class _Entries:
    """The admitted pod's entry in one uid-keyed table, and what became of other pods'."""

    own: Any  # the pod's value (private copy), or None when it has no entry
    others_kept: bool  # False: every other pod's entry was dropped


def _entries(pre: dict[str, V], post: dict[str, V], uid: str, copy: Callable[[V], V],
             persistent: bool) -> _Entries | None:
    if uid in pre:
        return None
    keys = list(post)
    own = None
    if uid in post:
        if keys[-1] != uid:
            return None
        own = copy(post[uid])
        keys.pop()
    if keys == list(pre) and all(post[k] == pre[k] for k in keys):
        return _Entries(own, True)
    if not persistent and not keys:
        return _Entries(own, False)
    return None


def _replay(target: dict[str, V], e: _Entries, uid: str, copy: Callable[[V], V]) -> dict[str, V]:
    out = {k: copy(v) for k, v in target.items()} if e.others_kept else {}
    if e.own is not None:
        out[uid] = copy(e.own)
    return out


def _cpu_entry(v: dict[str, frozenset[int]]) -> dict[str, frozenset[int]]:
    return dict(v)


def _int_set(v: set[int]) -> set[int]:
    return set(v)


def _blocks(v: dict[str, list[Any]]) -> dict[str, list[Any]]:
    return {c: list(b) for c, b in v.items()}


def _mem_reuse(v: dict[int, dict[str, int]]) -> dict[int, dict[str, int]]:
    return {m: dict(r) for m, r in v.items()}


def _dev_entry(v: dict[str, dict[str, list[str]]]) -> dict[str, dict[str, list[str]]]:
    return {c: {r: list(ids) for r, ids in rs.items()} for c, rs in v.items()}


def _dev_reuse(v: dict[str, set[str]]) -> dict[str, set[str]]:
    return {r: set(ids) for r, ids in v.items()}


def _machine_state(v: dict[int, NodeMemoryState]) -> dict[int, NodeMemoryState]:
    return {k: ns.copy() for k, ns in v.items()}


@dataclass(frozen=True)
class PodDelta:
    """The change one pod's admission made to the managers' states (private copies)."""

    default_set: frozenset[int]
    machine_state: dict[int, NodeMemoryState]
    cpu_assignments: _Entries
    cpu_reuse: _Entries
    memory_assignments: _Entries
    memory_reuse: _Entries
    devices_allocated: _Entries
    devices_reuse: _Entries
    cpu_exclusive: _Entries

    @staticmethod
    def between(
        pre: tuple[CpuState, MemoryState, DeviceState],
        post: tuple[CpuState, MemoryState, DeviceState],
        uid: str,
    ) -> PodDelta | None:
        """The delta ``pre`` -> ``post`` made by admitting pod ``uid``; None when the change is
        not of that form (then it cannot be replayed)."""
        (c0, m0, d0), (c1, m1, d1) = pre, post
        if c0.policy_name != c1.policy_name or m0.policy_name != m1.policy_name:
            return None
        parts = (
            _entries(c0.assignments, c1.assignments, uid, _cpu_entry, True),
            _entries(c0.cpus_to_reuse, c1.cpus_to_reuse, uid, _int_set, False),
            _entries(m0.assignments, m1.assignments, uid, _blocks, True),
            _entries(m0.reusable, m1.reusable, uid, _mem_reuse, False),
            _entries(d0.allocated, d1.allocated, uid, _dev_entry, True),
            _entries(d0.reusable, d1.reusable, uid, _dev_reuse, False),
            _entries(c0.exclusive, c1.exclusive, uid, str, True),
        )
        if any(p is None for p in parts):
            return None
        ca, cr, ma, mr, da, dr, ce = parts
        assert ca and cr and ma and mr and da and dr and ce
        return PodDelta(frozenset(c1.default_set), _machine_state(m1.machine_state),
                        ca, cr, ma, mr, da, dr, ce)

    def apply(
        self, cpu: CpuState, memory: MemoryState, devices: DeviceState, uid: str
    ) -> tuple[CpuState, MemoryState, DeviceState]:
        """New states: the given ones (equal :func:`decision_key` to this delta's ``pre``,
        no entry for ``uid``) after admitting pod ``uid`` the same way.

        The new memory state *shares* this delta's per-NUMA tables (``NodeMemoryState``)
        with every other state the delta was replayed into: the engine never changes a
        node's state in place (admission, release and observed usage work on copies, and
        ``MemoryState.copy`` copies the tables), so nobody writes to them."""
        return (
            CpuState(
                set(self.default_set),
                _replay(cpu.assignments, self.cpu_assignments, uid, _cpu_entry),
                _replay(cpu.cpus_to_reuse, self.cpu_reuse, uid, _int_set),
                cpu.policy_name,
                _replay(cpu.exclusive, self.cpu_exclusive, uid, str),
            ),
            MemoryState(
                memory.policy_name,
                dict(self.machine_state),  # shared tables: states are copied before a change
                _replay(memory.assignments, self.memory_assignments, uid, _blocks),
                _replay(memory.reusable, self.memory_reuse, uid, _mem_reuse),
            ),
            DeviceState(
                _replay(devices.allocated, self.devices_allocated, uid, _dev_entry),
                _replay(devices.reusable, self.devices_reuse, uid, _dev_reuse),
            ),
        )


__all__ = ["PodDelta", "decision_key", "holds"]
