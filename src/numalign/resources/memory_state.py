"""The memory manager's state (kubelet ``memorymanager/state``): blocks, per-NUMA tables,
the machine state and the assignments, with the reader methods everyone else uses and the
writer used for usage observed elsewhere. Decisions live in :mod:`numalign.resources.memory`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from numalign.errors import InputError
from numalign.record import Record, set_field

POLICY_NONE = "None"
POLICY_STATIC = "Static"


class Block(Record, frozen=True):
    """A container's memory of one type on a set of NUMA nodes (kubelet ``state.Block``)."""

    __slots__ = ("numa_affinity", "type", "size")
    numa_affinity: tuple[int, ...]
    type: str
    size: int

    def __init__(self, numa_affinity: tuple[int, ...], type: str, size: int) -> None:
        set_field(self, "numa_affinity", numa_affinity)
        set_field(self, "type", type)
        set_field(self, "size", size)

    def to_dict(self) -> dict[str, Any]:
        return {"numaAffinity": list(self.numa_affinity), "type": self.type, "size": self.size}

    @staticmethod
    def from_dict(d: Mapping[str, Any]) -> Block:
        try:
            return Block(tuple(whole(i, "numaAffinity", signed=True) for i in d["numaAffinity"]),
                         str(d["type"]), whole(d["size"], "size"))
        except (KeyError, TypeError, ValueError) as e:
            raise InputError(f"invalid memory block: {e}") from None


def whole(value: Any, name: str, *, signed: bool = False) -> int:
    """``value`` as the kubelet's checkpoint types it: a JSON integer within ``uint64`` (bytes)
    or, ``signed``, ``int`` (counts, NUMA ids). A float (``1.5``, ``1e300``), a string or a
    boolean is refused, as Go's decoder refuses it; raises ``ValueError`` naming ``name``."""
    if type(value) is not int:
        raise ValueError(f"{name}: expected an integer, got {type(value).__name__} {value!r:.40}")
    low, high = (-(1 << 63), 1 << 63) if signed else (0, 1 << 64)
    if not low <= value < high:
        raise ValueError(f"{name}: {value!r:.40} is out of range "
                         f"({'int64' if signed else 'uint64'})")
    return value


class MemoryTable(Record):
    """One resource on one NUMA node (kubelet ``state.MemoryTable``), bytes."""

    __slots__ = ("total", "system_reserved", "allocatable", "reserved", "free")
    total: int
    system_reserved: int
    allocatable: int
    reserved: int
    free: int

    def __init__(
        self,
        total: int,
        system_reserved: int,
        allocatable: int,
        reserved: int,
        free: int,
    ) -> None:
        self.total = total
        self.system_reserved = system_reserved
        self.allocatable = allocatable
        self.reserved = reserved
        self.free = free

    def copy(self) -> MemoryTable:
        return MemoryTable(
            self.total, self.system_reserved, self.allocatable, self.reserved, self.free
        )

    def to_dict(self) -> dict[str, int]:
        return {
            "total": self.total,
            "systemReserved": self.system_reserved,
            "allocatable": self.allocatable,
            "reserved": self.reserved,
            "free": self.free,
        }

    @staticmethod
    def from_dict(d: Mapping[str, Any]) -> MemoryTable:
        return MemoryTable(
            whole(d.get("total", 0), "total"),
            whole(d.get("systemReserved", 0), "systemReserved"),
            whole(d.get("allocatable", 0), "allocatable"),
            whole(d.get("reserved", 0), "reserved"),
            whole(d.get("free", 0), "free"),
        )


class NodeMemoryState(Record):
    """One NUMA node (kubelet ``state.NUMANodeState``)."""

    __slots__ = ("number_of_assignments", "memory_map", "cells")
    number_of_assignments: int
    memory_map: dict[str, MemoryTable]
    cells: list[int]

    def __init__(
        self,
        number_of_assignments: int = 0,
        memory_map: dict[str, MemoryTable] | None = None,
        cells: list[int] | None = None,
    ) -> None:
        self.number_of_assignments = number_of_assignments
        self.memory_map = {} if memory_map is None else memory_map
        self.cells = [] if cells is None else cells

    def copy(self) -> NodeMemoryState:
        return NodeMemoryState(
            self.number_of_assignments,
            {k: v.copy() for k, v in self.memory_map.items()},
            list(self.cells),
        )

    def table(self, resource: str) -> MemoryTable | None:
        return self.memory_map.get(resource)

    def free(self, resource: str) -> int:
        t = self.memory_map.get(resource)
        return t.free if t is not None else 0

    def allocatable(self, resource: str) -> int:
        t = self.memory_map.get(resource)
        return t.allocatable if t is not None else 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "numberOfAssignments": self.number_of_assignments,
            "memoryMap": {k: self.memory_map[k].to_dict() for k in sorted(self.memory_map)},
            "cells": list(self.cells),
        }

    @staticmethod
    def from_dict(d: Mapping[str, Any]) -> NodeMemoryState:
        mm = d.get("memoryMap") or {}
        return NodeMemoryState(
            whole(d.get("numberOfAssignments", 0), "numberOfAssignments", signed=True),
            {str(k): MemoryTable.from_dict(v) for k, v in mm.items()},
            [whole(c, "cells", signed=True) for c in (d.get("cells") or [])],
        )


class MemoryState(Record):
    """The memory manager's mutable state (kubelet ``memory_manager_state``).

    ``reusable`` is the kubelet policy's in-memory ``initContainersReusableMemory`` (pod ->
    mask -> resource -> bytes): it lives only while a pod is being admitted, is copied with
    the state (so scheduler "assume" copies behave like the node) and, as in the kubelet, is
    not part of the checkpoint.
    """

    __slots__ = ("policy_name", "machine_state", "assignments", "reusable")
    policy_name: str
    machine_state: dict[int, NodeMemoryState]
    assignments: dict[str, dict[str, list[Block]]]
    reusable: dict[str, dict[int, dict[str, int]]]

    def __init__(
        self,
        policy_name: str = POLICY_STATIC,
        machine_state: dict[int, NodeMemoryState] | None = None,
        assignments: dict[str, dict[str, list[Block]]] | None = None,
        reusable: dict[str, dict[int, dict[str, int]]] | None = None,
    ) -> None:
        self.policy_name = policy_name
        self.machine_state = {} if machine_state is None else machine_state
        self.assignments = {} if assignments is None else assignments
        self.reusable = {} if reusable is None else reusable

    def copy(self) -> MemoryState:
        return MemoryState(
            self.policy_name,
            {k: v.copy() for k, v in self.machine_state.items()},
            {p: {c: list(b) for c, b in cs.items()} for p, cs in self.assignments.items()},
            {p: {m: dict(r) for m, r in ms.items()} for p, ms in self.reusable.items()},
        )

    def blocks(self, pod_uid: str, container: str) -> list[Block] | None:
        return self.assignments.get(pod_uid, {}).get(container)

    # -- readers (the kubelet's state.Reader): nobody outside resources/ reads the tables --

    def pod_blocks(self, pod_uid: str) -> dict[str, list[Block]]:
        """Container name -> memory blocks of one pod (kubelet ``GetMemoryBlocks``)."""
        return {c: list(bs) for c, bs in self.assignments.get(pod_uid, {}).items()}

    def pod_uids(self) -> frozenset[str]:
        return frozenset(self.assignments)

    def numa_ids(self) -> tuple[int, ...]:
        """The NUMA nodes of the machine state (empty under the ``None`` policy)."""
        return tuple(sorted(self.machine_state))

    def amounts(self, numa: int, resource: str) -> tuple[int, int] | None:
        """``(allocatable, free)`` bytes of ``resource`` on ``numa``; None without a table."""
        ns = self.machine_state.get(numa)
        t = ns.table(resource) if ns is not None else None
        return None if t is None else (t.allocatable, t.free)

    def resources_of(self, numa: int) -> tuple[str, ...]:
        ns = self.machine_state.get(numa)
        return () if ns is None else tuple(sorted(ns.memory_map))

    def group(self, numa: int) -> tuple[tuple[int, ...], int]:
        """``(cells, assignments)`` of ``numa``: the NUMA group its memory assignments span
        (``()`` when none) and how many assignments it counts (kubelet ``NUMANodeState``)."""
        ns = self.machine_state.get(numa)
        if ns is None or ns.number_of_assignments == 0:
            return (), 0
        return tuple(sorted(ns.cells)), ns.number_of_assignments

    # -- writers used for usage observed elsewhere (an NRT, a checkpoint) ------------------

    def observe(
        self,
        pod_uid: str,
        used: Mapping[int, Mapping[str, int]],
        groups: Mapping[int, tuple[tuple[int, ...], int]],
    ) -> None:
        """Apply memory in use that numalign did not allocate itself.

        ``used``: NUMA node -> resource -> bytes in use; ``groups``: NUMA node -> (cells,
        assignments) as :meth:`group` reports them. A node with memory in use and no group
        counts as one single-node assignment (the kubelet's state for memory pinned to one
        node). The tables' ``free``/``reserved`` change as observed (at most what is free), the NUMA
        groups as reported, and the pod ``pod_uid`` holds one block per (group, resource).
        """
        ms = self.machine_state
        cells_of: dict[int, tuple[tuple[int, ...], int]] = dict(groups)
        for nid, per in used.items():
            if any(v > 0 for v in per.values()) and nid not in cells_of:
                cells_of[nid] = ((nid,), 1)
        for nid, (cells, count) in cells_of.items():
            if nid not in ms or any(c not in ms for c in cells) or nid not in cells:
                raise InputError(f"NUMA group {list(cells)} is not on this machine", f"memory.{nid}")
            if count > 0:
                group_node = ms[nid]
                group_node.number_of_assignments = max(group_node.number_of_assignments, count)
                group_node.cells = list(cells)
        per_block: dict[tuple[tuple[int, ...], str], int] = {}
        for nid, per in sorted(used.items()):
            node_state = ms.get(nid)
            if node_state is None:
                raise InputError("NUMA node is not on this machine", f"memory.{nid}")
            for res, amount in sorted(per.items()):
                if amount <= 0:
                    continue
                t = node_state.table(res)
                if t is None:
                    raise InputError(f"no {res} on this NUMA node", f"memory.{nid}")
                amount = min(amount, t.free)  # an observer cannot use more than is free
                t.free -= amount
                t.reserved += amount
                key = (cells_of[nid][0], res)
                per_block[key] = per_block.get(key, 0) + amount
        if per_block:
            held = self.assignments.setdefault(pod_uid, {})
            for (cells, res), size in sorted(per_block.items()):
                held.setdefault(f"node-{cells[0]}", []).append(Block(cells, res, size))

    def to_dict(self) -> dict[str, Any]:
        """The kubelet checkpoint's JSON shape (without ``checksum``)."""
        out: dict[str, Any] = {
            "policyName": self.policy_name,
            "machineState": {
                str(n): self.machine_state[n].to_dict() for n in sorted(self.machine_state)
            },
        }
        entries = {
            p: {c: [b.to_dict() for b in bs] for c, bs in cs.items()}
            for p, cs in self.assignments.items()
        }
        if entries:  # Go: `json:"entries,omitempty"`
            out["entries"] = entries
        return out

    @staticmethod
    def from_dict(d: Mapping[str, Any]) -> MemoryState:
        if not isinstance(d, Mapping):
            raise InputError("memory manager state must be an object")
        try:
            ms = {
                int(k): NodeMemoryState.from_dict(v)
                for k, v in (d.get("machineState") or {}).items()
            }
        except (TypeError, ValueError, AttributeError) as e:
            raise InputError(f"invalid value: {e}", "machineState") from None
        entries: dict[str, dict[str, list[Block]]] = {}
        for p, cs in (d.get("entries") or {}).items():
            entries[str(p)] = {
                str(c): [Block.from_dict(b) for b in (bs or [])] for c, bs in cs.items()
            }
        return MemoryState(str(d.get("policyName", POLICY_STATIC)), ms, entries, {})


def numa_held(state: MemoryState) -> dict[int, dict[str, int]]:
    """NUMA node -> memory resource -> bytes the pods' single-node blocks hold (the
    ``koordinator`` mode's per-NUMA accounting under the ``None`` policy, whose machine state
    is empty)."""
    out: dict[int, dict[str, int]] = {}
    for containers in state.assignments.values():
        for blocks in containers.values():
            for b in blocks:
                if len(b.numa_affinity) == 1 and b.size > 0:
                    per = out.setdefault(b.numa_affinity[0], {})
                    per[b.type] = per.get(b.type, 0) + b.size
    return out
