"""A node backed by a state directory: lock, load, admit or release, save atomically.

The state directory keeps the machine spec next to the allocations, so ``numalign release``
and ``numalign state`` need no ``--machine``; a state written for other hardware is refused.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from numalign.errors import InputError, StateError
from numalign.machine.model import Machine
from numalign.machine.spec import dump_machine, load_machine
from numalign.node.admission import Node, machine_fingerprint
from numalign.node.holdings import PodUsage, pod_usage
from numalign.node.state import NodeState
from numalign.resources.memory import MemoryManager

if TYPE_CHECKING:
    from pathlib import Path


@contextlib.contextmanager
def node_session(
    state_dir: Path | None,
    machine: Machine | None,
    *,
    write: bool = True,
    kubelet_state: str | None = None,
    reconcile: bool = False,
) -> Iterator[Node]:
    """Yield a :class:`Node`; with a state directory, persist its state on clean exit.

    Nothing is written when the body raises, so a failed command leaves the state untouched.
    ``kubelet_state`` starts the node from the kubelet's checkpoints in that directory (refused
    when the state directory already holds allocations). A loaded state is validated (the
    kubelet managers' start-up checks, no CPU or device held twice); memory sizes that
    changed since it was written are adopted when every assignment still fits.
    ``reconcile`` moves a state to ``machine`` even when its topology changed: pods whose
    allocations no longer exist or fit are dropped (:attr:`Node.notes` says which).
    """
    if state_dir is None:
        if machine is None:
            raise InputError("a machine is required (--machine) when there is no --state-dir")
        node = Node(machine)
        _start_from_kubelet(node, kubelet_state)
        yield node
        return
    from numalign.node import store  # file locking and atomic writes: with a state directory only

    with store.locked(state_dir):
        expected = machine_fingerprint(machine) if machine is not None and not reconcile else None
        payload = store.load(state_dir, expected)
        path = state_dir / store.STATE_FILE
        if payload is None:
            if machine is None:
                raise StateError(f"{state_dir}: no numalign state here (admit a pod with --machine first)")
            node = Node(machine)
        else:
            node = _restore(payload, machine, path, reconcile)
        before = node.state.to_dict()
        _start_from_kubelet(node, kubelet_state)
        yield node
        if write and (node.state.to_dict() != before or reconcile):
            store.save(state_dir, machine_fingerprint(node.machine), {
                "machine": dump_machine(node.machine),
                "node": node.state.to_dict(),
            })


def _start_from_kubelet(node: Node, kubelet_state: str | None) -> None:
    if kubelet_state is None:
        return
    from pathlib import Path

    from numalign.node.kubelet_import import import_kubelet_state

    if node.state.pods:
        raise InputError("the state directory already holds allocations", "--kubelet-state")
    node.state = import_kubelet_state(node.machine, Path(kubelet_state))


def _restore(payload: dict[str, Any], machine: Machine | None, path: Path, reconcile: bool) -> Node:
    try:
        stored = load_machine(payload["machine"], "state machine")
        data = payload["node"]
    except KeyError as e:
        raise StateError(f"{path}: state payload is malformed: missing {e}") from None
    except InputError as e:
        raise StateError(f"{path}: state payload is malformed: {e.message}") from None
    try:
        state = NodeState.from_dict(data)
    except StateError as e:
        raise StateError(f"{path}: {e.message}") from None
    # the fingerprint matched (same topology); the given spec may carry a newer kubelet
    # configuration or other memory sizes, which win
    use = machine if machine is not None else stored
    if reconcile:
        node = Node(stored, state)
        _validate(node, path)
        return _moved(node, use)
    node = Node(use, state)
    if _memory_sizes(stored) != _memory_sizes(use):
        short = MemoryManager(use, node.state.memory).rebuild_machine_state()
        if short:
            raise StateError(
                f"{path}: the machine's memory changed and {short[0]}"
                f"{f' (+{len(short) - 1} more)' if len(short) > 1 else ''}; "
                "run `numalign state --reconcile` to drop what no longer fits"
            )
    _validate(node, path)
    return node


def _validate(node: Node, path: Path) -> None:
    try:
        node.validate_state()
    except StateError as e:
        raise StateError(f"{path}: invalid state: {e.message}") from None


def _memory_sizes(m: Machine) -> list[tuple[int, int, list[tuple[int, int]]]]:
    return [(n.id, n.memory, sorted(n.hugepages.items())) for n in m.numa_nodes]


def _moved(old: Node, machine: Machine) -> Node:
    """``old``'s pods moved onto ``machine``: each pod keeps exactly its CPUs, devices and
    memory blocks when they exist, are free and fit there; otherwise it is dropped."""
    node = Node(machine)
    for uid, record in sorted(old.state.pods.items(), key=lambda kv: kv[1].key):
        held = pod_usage(old.machine, old.state, uid)
        work = node.state.copy()
        problem = _transfer(node, work, uid, held) if held is not None else None
        if problem is None:
            try:
                Node(machine, work.copy()).validate_state()
            except StateError as e:
                problem = e.message
        if problem is None:
            work.pods[uid] = record
            node.state = work
            node.notes.append(f"kept {record.key}")
        else:
            node.notes.append(f"dropped {record.key}: {problem}")
    return node


def _transfer(node: Node, work: NodeState, uid: str, held: PodUsage) -> str | None:
    machine = node.machine
    for c in held.containers:
        if c.cpus:
            missing = c.cpus - set(machine.cpu_by_id)
            if missing:
                return f"CPUs {sorted(missing)} do not exist"
            if c.cpus & node.reserved_cpus:
                return f"CPUs {sorted(c.cpus & node.reserved_cpus)} are reserved"
            try:
                work.cpu.occupy(uid, c.name, c.cpus)
            except InputError as e:
                return e.problem
        for res, ids in c.devices.items():
            known = {d.id for d in machine.devices_of(res)}
            if not set(ids) <= known:
                return f"devices {sorted(set(ids) - known)} of {res} do not exist"
            try:
                work.devices.occupy(uid, c.name, res, list(ids))
            except InputError as e:
                return e.message
        if c.memory:
            short = MemoryManager(machine, work.memory).adopt_blocks(uid, c.name, list(c.memory))
            if short:
                return short[0]
    if held.cpu_exclusive is not None:
        work.cpu.hold_exclusive(uid, held.cpu_exclusive)
    return None
