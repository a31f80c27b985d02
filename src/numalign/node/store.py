"""Crash-safe persistence of a node state document in a state directory.

Layout of a state directory::

    D/state.json   {"format": "numalign-node-state", "version": 1, "machine": <fingerprint>,
                    "checksum": "sha256:<hex of the canonical payload>", "payload": {...}}
    D/.lock        flock(2) target: one numalign process at a time changes D

* **Atomic writes**: the new document goes to a temporary file in D, is flushed and fsynced,
  then renamed over ``state.json`` and the directory is fsynced. A reader (or a crash at any
  instant) sees the old document or the new one, never a mix.
* **Checksum**: SHA-256 of the canonical JSON of ``payload`` (sorted keys, no spaces). A
  mismatch means corruption: the state is refused, never silently reset.
* **Foreign state**: the document records the machine fingerprint; loading it for another
  machine is refused.
* **Lock**: :func:`locked` holds an exclusive ``flock`` on ``D/.lock`` for a
  read-modify-write cycle, so concurrent numalign processes serialise.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from numalign.errors import StateError

FORMAT = "numalign-node-state"
VERSION = 1
STATE_FILE = "state.json"
LOCK_FILE = ".lock"


def canonical(payload: Any) -> bytes:
    return json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()


def checksum(payload: Any) -> str:
    return "sha256:" + hashlib.sha256(canonical(payload)).hexdigest()


@contextlib.contextmanager
def locked(state_dir: Path, *, wait: bool = True) -> Iterator[None]:
    """Hold the state directory's exclusive lock (created if missing)."""
    try:
        state_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(state_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        raise StateError(f"{state_dir}: cannot open state directory: {e.strerror}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            raise StateError(f"{state_dir}: locked by another numalign process") from None
        for stale in state_dir.glob(".state.*.tmp"):  # left by a writer killed mid-write
            with contextlib.suppress(OSError):
                stale.unlink()
        yield
    finally:
        os.close(fd)  # closing releases the lock


def load(state_dir: Path, machine: str | None) -> dict[str, Any] | None:
    """The stored payload, ``None`` if there is no state yet; refuses corrupt or foreign state.

    ``machine`` is the expected machine fingerprint; ``None`` accepts the stored one.
    """
    path = state_dir / STATE_FILE
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise StateError(f"{path}: cannot read: {e.strerror}") from None
    try:
        doc = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise StateError(f"{path}: corrupt state (not JSON); refusing to reset it") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise StateError(f"{path}: not a numalign node state (format field missing or wrong)")
    if doc.get("version") != VERSION:
        raise StateError(f"{path}: unsupported state version {doc.get('version')!r}")
    payload = doc.get("payload")
    if doc.get("checksum") != checksum(payload):
        raise StateError(f"{path}: checksum mismatch: corrupt state; refusing to reset it")
    if machine is not None and doc.get("machine") != machine:
        raise StateError(
            f"{path}: state belongs to another machine ({doc.get('machine')}, "
            f"this one is {machine}); use another --state-dir"
        )
    if not isinstance(payload, dict):
        raise StateError(f"{path}: payload must be an object")
    return payload


def save(state_dir: Path, machine: str, payload: dict[str, Any]) -> None:
    """Atomically replace the stored state (temp file, fsync, rename, fsync dir)."""
    doc = {
        "format": FORMAT,
        "version": VERSION,
        "machine": machine,
        "checksum": checksum(payload),
        "payload": payload,
    }
    state_dir.mkdir(parents=True, exist_ok=True)
    write_atomic(state_dir / STATE_FILE, json.dumps(doc, sort_keys=True, indent=1).encode())


def write_atomic(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically: temp file beside it, fsync, rename, fsync dir.

    Temp files are named ``.<name>.*.tmp``; one left by a killed writer is never read.
    """
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    dfd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)
