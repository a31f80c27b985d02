"""A node backed by a state directory: lock, load, admit or release, save atomically.

The state directory keeps the machine spec next to the allocations, so ``numalign release``
and ``numalign state`` need no ``--machine``; a state written for other hardware is refused.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from numalign.errors import InputError, StateError
from numalign.machine.model import Machine
from numalign.machine.spec import dump_machine, load_machine
from numalign.node import store
from numalign.node.admission import Node, machine_fingerprint
from numalign.node.state import NodeState


@contextlib.contextmanager
def node_session(
    state_dir: Path | None,
    machine: Machine | None,
    *,
    write: bool = True,
    kubelet_state: str | None = None,
) -> Iterator[Node]:
    """Yield a :class:`Node`; with a state directory, persist its state on clean exit.

    Nothing is written when the body raises, so a failed command leaves the state untouched.
    ``kubelet_state`` starts the node from the kubelet's checkpoints in that directory (refused
    when the state directory already holds allocations).
    """
    if state_dir is None:
        if machine is None:
            raise InputError("a machine is required (--machine) when there is no --state-dir")
        node = Node(machine)
        _start_from_kubelet(node, kubelet_state)
        yield node
        return
    with store.locked(state_dir):
        expected = machine_fingerprint(machine) if machine is not None else None
        payload = store.load(state_dir, expected)
        if payload is None:
            if machine is None:
                raise StateError(f"{state_dir}: no numalign state here (admit a pod with --machine first)")
            node = Node(machine)
        else:
            node = _restore(payload, machine)
        before = node.state.to_dict()
        _start_from_kubelet(node, kubelet_state)
        yield node
        if write and node.state.to_dict() != before:
            store.save(state_dir, machine_fingerprint(node.machine), {
                "machine": dump_machine(node.machine),
                "node": node.state.to_dict(),
            })


def _start_from_kubelet(node: Node, kubelet_state: str | None) -> None:
    if kubelet_state is None:
        return
    from numalign.node.kubelet_import import import_kubelet_state

    if node.state.pods:
        raise InputError("the state directory already holds allocations", "--kubelet-state")
    node.state = import_kubelet_state(node.machine, Path(kubelet_state))


def _restore(payload: dict[str, Any], machine: Machine | None) -> Node:
    try:
        stored = load_machine(payload["machine"], "state machine")
        data = payload["node"]
    except (KeyError, InputError) as e:
        raise StateError(f"state payload is malformed: {e}") from None
    # the fingerprint matched, so the hardware is the same; the given spec may carry a newer
    # kubelet configuration, which wins
    use = machine if machine is not None else stored
    return Node(use, NodeState.from_dict(data))
