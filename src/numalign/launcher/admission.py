"""Admission of a run's pod through the node engine, under the shared state's lock.

No alignment logic here: :meth:`numalign.node.admission.Node.admit` decides, in the kubelet's
order - the Topology Manager first, then the predicate admission (``OutOfcpu``: the request
does not fit the machine's allocatable next to the runs already there). Before every try, runs whose
launcher is gone are reclaimed (:func:`numalign.launcher.runs.reclaim`).

A rejection says the kubelet's reason and message, then the cause in words
(:func:`rejection_cause`): what the machine has and what is reserved, which runs hold the
rest (``see numalign ps``), or which policy refused a placement (``try --policy
best-effort``).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from numalign.errors import NumalignError
from numalign.launcher.machine import without_memory
from numalign.launcher.runs import read_runs, reclaim, write_runs

if TYPE_CHECKING:
    from numalign.machine.model import Machine
    from numalign.node.admission import Node, PodResult
    from numalign.pods import Pod

#: called once when a waiting admission first does not fit: ``on_wait(reason, message)``
OnWait = Callable[[str, str], None]


class LaunchRejected(NumalignError):
    """The request does not fit (now, or ever)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason


def _capacity_text(res: str, node: Node) -> str:
    """What the machine has of ``res``, in words."""
    from numalign.inputs.cpulist import format_cpulist
    from numalign.inputs.quantity import format_amount, format_bytes_human

    have = node.allocatable.get(res, 0)
    if res == "cpu":
        reserved = node.reserved_cpus
        text = f"the machine has {have / 1000:g} allocatable CPUs"
        if reserved:
            text += (f" (CPU{'s' if len(reserved) > 1 else ''} {format_cpulist(reserved)} "
                     f"{'are' if len(reserved) > 1 else 'is'} reserved)")
        return text
    if res == "memory":
        return f"the machine has {format_bytes_human(have)} of allocatable memory"
    if res == "pods":
        return f"the machine admits at most {have} pods (maxPods)"
    return f"the machine has {format_amount(res, have)} {res}"


def rejection_cause(result: PodResult, node: Node, runs: Mapping[str, Mapping[str, Any]]) -> str:
    """Why ``result`` was refused, in words (empty when there is nothing to add)."""
    from numalign.node.predicates import fits
    from numalign.pods.model import effective_pod_requests

    parts: list[str] = []
    reason = result.reason or ""
    if reason.startswith("OutOf"):
        parts.append(_capacity_text(reason.removeprefix("OutOf"), node))
    elif reason == "TopologyAffinityError" and result.policy in ("restricted", "single-numa-node"):
        # the kubelet's Topology Manager answers first; say when the request is over the
        # machine's allocatable as well, where no policy would help
        over = fits(node.allocatable, effective_pod_requests(result.pod), {}, 0)
        if over:
            parts.extend(_capacity_text(s.resource, node) for s in over)
        else:
            parts.append(f"the {result.policy} policy allows no placement of this request now; "
                         "try --policy best-effort")
    holders = [(key, rec.get("pid")) for key, rec in sorted(runs.items())
               if any(p.key == key for p in node.state.pods.values())]
    if holders:
        named = ", ".join(f"run {pid}" if pid else key for key, pid in holders[:3])
        more = f" and {len(holders) - 3} more" if len(holders) > 3 else ""
        parts.append(f"held by {named}{more}, see numalign ps")
    return "; ".join(parts)


def _never_fits(machine: Machine, pod: Pod) -> PodResult | None:
    from numalign.node.admission import Node

    empty = Node(machine).admit(pod)
    return None if empty.admitted else empty


def admit(
    machine: Machine, pod: Pod, state_dir: Path | None, *, record: Mapping[str, Any] | None,
    bind_memory: bool = True, explain: bool = False, wait: bool = False,
    timeout: float | None = None, on_wait: OnWait | None = None,
) -> tuple[PodResult, list[str]]:
    """Admit ``pod`` under the state lock, reclaiming dead runs first; returns the result and
    the keys of the runs reclaimed. With ``wait``, retry (lock released between tries,
    exponential back-off up to 1 s) until it fits or ``timeout``; ``on_wait(reason, message)``
    is called once, before the first pause.

    ``machine`` has the launcher's configuration with ``memoryManagerPolicy: Static``, which
    the shared state keeps; a request without memory (``bind_memory`` = False) is admitted
    with the memory manager's ``None`` policy over the same state (it neither reads nor
    changes the memory state), so a CPU or device request spanning NUMA nodes is not refused
    for a nominal memory request that fits one node.

    ``record`` (the run's bookkeeping) is written to ``runs.json`` on admission; None = a dry
    run (nothing is written, a rejection is returned). Raises :class:`LaunchRejected` when it
    does not fit.
    """
    from numalign.node.admission import Node
    from numalign.node.session import node_session

    dry = record is None
    if dry and state_dir is not None and not (state_dir / "state.json").exists():
        state_dir = None  # nothing allocated yet; do not create the directory for a plan
    deadline = None if timeout is None else time.monotonic() + timeout
    delay = 0.05
    told = False
    reclaimed: list[str] = []
    cause = ""
    while True:
        with node_session(state_dir, machine, write=not dry) as node:
            runs = read_runs(state_dir) if state_dir is not None else {}
            before = dict(runs)
            reclaimed += reclaim(node, runs)
            actor = node if bind_memory else Node(without_memory(machine), node.state)
            result = actor.admit(pod, explain=explain)
            if not result.admitted:
                cause = rejection_cause(result, actor, runs)
            node.state = actor.state
            if result.admitted and record is not None:
                runs[pod.key] = dict(record)
            if state_dir is not None and not dry and runs != before:
                write_runs(state_dir, runs)
        if result.admitted or dry:
            return result, reclaimed  # a dry run shows a rejection with its explanation
        reason, message = result.reason or "Rejected", result.message or ""
        if cause:
            message = f"{message} ({cause})"
        if not wait:
            raise LaunchRejected(reason, message)
        never = _never_fits(machine if bind_memory else without_memory(machine), pod)
        if never is not None:
            raise LaunchRejected(never.reason or reason,
                                 f"{never.message} (does not fit even on the empty machine; not waiting)")
        now = time.monotonic()
        if deadline is not None and now >= deadline:
            raise LaunchRejected(reason, f"{message} (still not admitted after waiting {timeout:g}s)")
        if not told and on_wait is not None:
            on_wait(reason, message)
        told = True
        pause = delay * random.uniform(0.5, 1.0)  # jitter, not crypto
        if deadline is not None:
            pause = min(pause, max(0.0, deadline - now))
        time.sleep(pause)
        delay = min(delay * 2, 1.0)


def release(machine: Machine, state_dir: Path, key: str) -> None:
    """Release the run ``key`` and drop its bookkeeping."""
    from numalign.node.session import node_session

    with node_session(state_dir, machine, write=True) as node:
        node.release(key)
        runs = read_runs(state_dir)
        if runs.pop(key, None) is not None:
            write_runs(state_dir, runs)
