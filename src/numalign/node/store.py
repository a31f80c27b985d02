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
  read-modify-write cycle, so concurrent numalign processes serialise; it waits a bounded time.
* **Trust**: D must belong to the user and not be writable by others (:func:`check_directory`);
  it is created 0700; the lock file is opened without following symlinks. The checksum only
  detects accidents: the payload is validated on load (:meth:`numalign.node.admission.Node.validate_state`).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import stat
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from numalign.errors import InputError, StateError
from numalign.inputs.documents import MAX_DOCUMENT_BYTES, loads_json

FORMAT = "numalign-node-state"
VERSION = 1
STATE_FILE = "state.json"
LOCK_FILE = ".lock"


def canonical(payload: Any) -> bytes:
    return json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()


def checksum(payload: Any) -> str:
    return "sha256:" + hashlib.sha256(canonical(payload)).hexdigest()


#: how long :func:`locked` waits for another numalign process by default (seconds)
DEFAULT_LOCK_TIMEOUT = 60.0
_POLL = 0.05


def default_state_base() -> Path:
    """Where ``numalign run`` and ``ps`` keep state without ``--state-dir``: ``/run/numalign``
    for root, else ``$XDG_RUNTIME_DIR/numalign``, else ``/tmp/numalign-$UID``."""
    if os.geteuid() == 0:
        return Path("/run/numalign")
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg and os.path.isdir(xdg):
        return Path(xdg) / "numalign"
    return Path(f"/tmp/numalign-{os.getuid()}")


def check_directory(state_dir: Path, *, create: bool = True) -> None:
    """Refuse a state directory another user could tamper with.

    It is created (mode 0700) if missing; it must be a real directory (not a symlink), owned
    by the effective user and not writable by group or others. Root is held to the same rule:
    a directory planted by another user is never trusted. Under the default base
    (:func:`default_state_base`, e.g. ``/tmp/numalign-$UID``, which another user could create
    first in a shared ``/tmp``) the base and every directory below it on the way are held to
    the same rule, and created the same way: whoever can write to one of them could swap the
    state directory after it was checked.
    """
    base = default_state_base()
    where = os.path.abspath(state_dir)
    top = os.path.abspath(base)
    if where == top or where.startswith(top.rstrip(os.sep) + os.sep):
        path = Path(top)
        _check_one(path, create)
        for part in Path(where).relative_to(top).parts:
            path = path / part
            _check_one(path, create)
        return
    if create and not os.path.lexists(state_dir):
        try:
            state_dir.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise StateError(f"{state_dir}: cannot use state directory: {e.strerror}") from None
    _check_one(state_dir, create)


def _check_one(path: Path, create: bool) -> None:
    """One directory of a state directory's path: created 0700 if missing, then it must be
    a directory (not a symlink), the user's, and not writable by group or others."""
    try:
        if create and not os.path.lexists(path):
            with contextlib.suppress(FileExistsError):
                os.mkdir(path, 0o700)
        st = os.lstat(path)
    except OSError as e:
        raise StateError(f"{path}: cannot use state directory: {e.strerror}") from None
    if not stat.S_ISDIR(st.st_mode):
        raise StateError(f"{path}: not a directory (a symlink or file is refused)")
    if st.st_uid != os.geteuid():
        raise StateError(
            f"{path}: owned by uid {st.st_uid}, not by you (uid {os.geteuid()}); refusing it"
        )
    if st.st_mode & 0o022:
        raise StateError(
            f"{path}: writable by group or others (mode {stat.S_IMODE(st.st_mode):o}); "
            "refusing it (chmod go-w)"
        )


@contextlib.contextmanager
def locked(
    state_dir: Path, *, wait: bool = True, timeout: float | None = DEFAULT_LOCK_TIMEOUT
) -> Iterator[None]:
    """Hold the state directory's exclusive lock (directory and lock file created if missing).

    Waits at most ``timeout`` seconds (``None``: forever) for another process; ``wait=False``
    does not wait at all. The lock file is opened without following symlinks.
    """
    check_directory(state_dir)
    try:
        fd = os.open(state_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as e:
        raise StateError(f"{state_dir / LOCK_FILE}: cannot open lock file: {e.strerror}") from None
    try:
        if os.fstat(fd).st_uid != os.geteuid():
            raise StateError(f"{state_dir / LOCK_FILE}: lock file owned by another user; refusing it")
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if not wait:
                    raise StateError(f"{state_dir}: locked by another numalign process") from None
                if deadline is not None and time.monotonic() >= deadline:
                    raise StateError(
                        f"{state_dir}: still locked by another numalign process after "
                        f"{timeout:g} s; giving up"
                    ) from None
                time.sleep(_POLL)
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
        with open(path, "rb") as fh:
            raw = fh.read(MAX_DOCUMENT_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise StateError(f"{path}: cannot read: {e.strerror}") from None
    try:
        doc = loads_json(raw, None)
    except InputError as e:
        raise StateError(f"{path}: corrupt state (not JSON: {e.message}); refusing to reset it") from None
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
    check_directory(state_dir)
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
