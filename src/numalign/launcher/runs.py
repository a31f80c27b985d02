"""The runs of live launchers in a shared state directory, and ``ps`` data.

A run is the pod ``numalign-run/run-<pid>-<start>``: the launcher's pid and its start time in
clock ticks (:mod:`numalign.launcher.proc`). ``runs.json`` next to the node state (atomic
writes, under the state's lock) keeps each run's command line, boot id and wall-clock start;
it is bookkeeping only, the pod names alone identify the launchers. A run whose launcher is
gone (another pid, another start time, another boot) is reclaimed: its allocation released.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from numalign.errors import InputError, StateError
from numalign.inputs.documents import loads_json
from numalign.launcher.proc import boot_id, proc_start_time, process_age, process_alive
from numalign.node import store
from numalign.node.usage import container_usage

if TYPE_CHECKING:
    from numalign.machine.model import Machine
    from numalign.node.admission import Node

NAMESPACE = "numalign-run"
CONTAINER = "main"
RUNS_FILE = "runs.json"
RUNS_FORMAT = "numalign-runs"


@dataclass(frozen=True)
class Identity:
    """A run: the launcher's pid and start time (clock ticks since boot)."""

    pid: int
    start: int

    @property
    def name(self) -> str:
        return f"run-{self.pid}-{self.start}"

    @property
    def key(self) -> str:
        return f"{NAMESPACE}/{self.name}"

    @staticmethod
    def of_key(key: str) -> Identity | None:
        ns, _, name = key.partition("/")
        parts = name.split("-")
        if ns != NAMESPACE or len(parts) != 3 or parts[0] != "run":
            return None
        try:
            return Identity(int(parts[1]), int(parts[2]))
        except ValueError:
            return None


def self_identity() -> Identity:
    """The identity of this process as a launcher."""
    pid = os.getpid()
    start = proc_start_time(pid)
    if start is None:
        raise StateError("cannot read /proc/self/stat (numalign run needs Linux /proc)")
    return Identity(pid, start)


def run_record(ident: Identity, command: Sequence[str]) -> dict[str, Any]:
    """The bookkeeping of a run in ``runs.json``."""
    return {"pid": ident.pid, "start": ident.start, "argv": list(command), "boot_id": boot_id(),
            "started_at": time.time(), "user": os.getuid()}


# ------------------------------------------------------------------------ state directories


def state_dir_for(explicit: str | Path | None, machine: Machine, live: bool) -> Path:
    """``explicit``; else the default base for the live machine, and a subdirectory per
    machine fingerprint for a spec or a capture (their state never mixes with the host's)."""
    if explicit:
        return Path(explicit)
    base = store.default_state_base()
    if live:
        return base
    from numalign.node.admission import machine_fingerprint

    slug = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in machine_fingerprint(machine))
    return base / "machines" / slug


def state_dirs(explicit: str | Path | None) -> list[Path]:
    """``explicit``, else every state directory under the default base that has a state."""
    if explicit:
        return [Path(explicit)]
    base = store.default_state_base()
    dirs = [base] if (base / "state.json").exists() else []
    machines = base / "machines"
    if machines.is_dir():
        dirs += sorted(d for d in machines.iterdir() if (d / "state.json").exists())
    return dirs


# ------------------------------------------------------------------------------- runs.json


def read_runs(state_dir: Path) -> dict[str, dict[str, Any]]:
    try:
        doc = loads_json((state_dir / RUNS_FILE).read_bytes(), str(state_dir / RUNS_FILE))
    except FileNotFoundError:
        return {}
    except (OSError, InputError):
        return {}  # bookkeeping only: the pod names alone identify the launchers
    runs = doc.get("runs") if isinstance(doc, dict) else None
    return {k: v for k, v in runs.items() if isinstance(v, dict)} if isinstance(runs, dict) else {}


def write_runs(state_dir: Path, runs: Mapping[str, Mapping[str, Any]]) -> None:
    """Atomic replace of ``runs.json`` (temp file, fsync, rename); call under the lock."""
    data = json.dumps({"format": RUNS_FORMAT, "version": 1, "runs": runs}, sort_keys=True, indent=1)
    store.write_atomic(state_dir / RUNS_FILE, data.encode())


def run_is_live(key: str, entry: Mapping[str, Any] | None, boot: str) -> bool:
    """Is the launcher of ``key`` still running? Pods that are not runs count as live."""
    ident = Identity.of_key(key)
    if ident is None:
        return True  # not ours
    if entry is not None and entry.get("boot_id") not in (None, "", boot):
        return False
    return process_alive(ident.pid, ident.start)


# -------------------------------------------------------------------------- what pods hold


@dataclass(frozen=True)
class Holding:
    """What one admitted pod holds for the run's container."""

    key: str | None
    affinity: Any  # the pod's recorded NUMA affinity (node ids) or None
    cpus: frozenset[int]
    memory: tuple[tuple[str, tuple[int, ...], int], ...]  # (type, NUMA nodes, bytes)
    devices: dict[str, list[str]]


def _holdings(node: Node) -> list[Holding]:
    """Every admitted pod of ``node`` (in the state's order) and what its run container holds."""
    out = []
    for uid, record in node.state.pods.items():
        held = container_usage(node.machine, node.state, uid, CONTAINER)
        first = record.containers[0] if record.containers else None
        out.append(Holding(
            key=record.key,
            affinity=None if first is None or first.affinity is None else list(first.affinity),
            cpus=held.cpus,
            memory=tuple((b.type, tuple(b.numa_affinity), b.size) for b in held.memory),
            devices={r: list(ids) for r, ids in held.devices.items()},
        ))
    return out


def reclaim(node: Node, runs: dict[str, dict[str, Any]]) -> list[str]:
    """Release the runs whose launcher is gone; returns their keys (``runs`` is updated)."""
    boot = boot_id()
    gone = [h.key for h in _holdings(node)
            if h.key is not None and not run_is_live(h.key, runs.get(h.key), boot)]
    for key in gone:
        node.release(key)
        runs.pop(key, None)
    keys = {h.key for h in _holdings(node)}
    for key in [k for k in runs if k not in keys]:
        del runs[key]  # bookkeeping of an allocation that is not in the state
    return gone


# ------------------------------------------------------------------------------------- ps


def _memory_by_kind(blocks: Iterable[tuple[str, tuple[int, ...], int]]) -> dict[str, int]:
    memory: dict[str, int] = {}
    for kind, nodes, size in blocks:
        name = f"{kind}@{','.join(map(str, nodes))}"
        memory[name] = memory.get(name, 0) + size
    return memory


def ps_rows(state_dir: Path) -> tuple[list[dict[str, Any]], int]:
    """Live runs in a state directory (``ps`` rows, JSON-ready), and the number of stale ones."""
    from numalign.inputs.cpulist import format_cpulist
    from numalign.node.session import node_session

    if not (state_dir / "state.json").exists():
        return [], 0
    rows: list[dict[str, Any]] = []
    stale = 0
    boot = boot_id()
    with node_session(state_dir, None, write=False) as node:
        runs = read_runs(state_dir)
        for h in sorted(_holdings(node), key=lambda h: str(h.key)):
            ident = Identity.of_key(h.key) if h.key is not None else None
            if ident is None or h.key is None:
                continue
            entry = runs.get(h.key)
            if not run_is_live(h.key, entry, boot):
                stale += 1
                continue
            age = process_age(ident.start)
            rows.append({
                "pid": ident.pid,
                "allocation": h.key,
                "command": (entry or {}).get("argv"),
                "numa_affinity": h.affinity,
                "cpus": format_cpulist(h.cpus),
                "memory": _memory_by_kind(h.memory),
                "devices": h.devices,
                "age_seconds": None if age is None else round(age, 1),
                "state_dir": str(state_dir),
            })
    return rows, stale


def list_runs(explicit: str | Path | None = None) -> tuple[list[dict[str, Any]], int]:
    """``ps`` data over :func:`state_dirs`: live runs and the number of stale ones."""
    rows: list[dict[str, Any]] = []
    stale = 0
    for d in state_dirs(explicit):
        found, n = ps_rows(d)
        rows += found
        stale += n
    return rows, stale
