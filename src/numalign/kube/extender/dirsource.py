"""``extender serve --nrt-dir``: NodeResourceTopology objects from the files of a directory,
kept in sync one file at a time.

Files: ``*.yaml``, ``*.yml`` and ``*.json`` not starting with ``.`` (so an exporter's
temporary ``.NAME.yaml.tmp`` is never read); each holds one object, several YAML documents or
a ``List``. A ``.json`` file is read as strict JSON (:func:`numalign.inputs.documents.loads_json`:
about 20 times cheaper than the YAML reader), the others as YAML.

:class:`DirSource` knows each file by its *key* (inode, size, mtime and ctime in nanoseconds)
and the digests of the objects it last read from it (not the objects: the engines hold what
is needed). :meth:`DirSource.apply` checks only the files it is given - those an event named
(:mod:`~numalign.kube.extender.dirwatch`) - and reads a file only when its key changed; then
only the objects whose digest changed go to the core, and the names that left the directory
are removed. :meth:`DirSource.poll` checks every file the same way (``stat`` only for the
unchanged ones); :meth:`DirSource.scan` reads every file (the initial list).

Reading and parsing run in the builder's worker processes when the source is given a
``reader`` (``extender serve`` gives its :class:`~numalign.kube.extender.builder.ProcessBuilder`'s
:meth:`~numalign.kube.extender.builder.ProcessBuilder.run`): parsing a YAML file costs about
2 ms of Python, which on a thread of the serving process would take the interpreter lock from
the thread answering ``/filter``. Without one, files are read on the calling thread.

A file that cannot be read or parsed keeps its last good objects (and is logged), and so
does an empty one: a writer that rewrites a file in place (``open``, which truncates it,
then ``write``) makes it empty for a moment, and an event can name it then; deleting the
file removes its objects. Nothing here holds the core's lock.
"""

from __future__ import annotations

import os
import pickle
import stat
import sys
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from numalign.errors import InputError
from numalign.inputs.documents import decode_text, load_yaml_all, loads_json
from numalign.kube.extender.core import ExtenderCore
from numalign.kube.extender.engines import nrt_digests

#: largest NRT file read (bytes); a real object is a few KiB
MAX_FILE_BYTES = 16 * 1024 * 1024
SUFFIXES = (".yaml", ".yml", ".json")
#: files read per job handed to a worker process
READ_BATCH = 64
#: a file read less than this long after its mtime is read again at its next check, even
#: with an unchanged key (see :class:`_Known`); 2 s covers the coarsest common file times
RACY_NS = 2_000_000_000

#: runs ``fn(*args)`` elsewhere (a worker process) and returns its future
Reader = Callable[..., "Future[Any]"]
#: a file's identity and version: (inode, size, mtime ns, ctime ns)
Key = tuple[int, int, int, int]


def is_nrt_file(name: str) -> bool:
    """Whether the directory entry ``name`` is read as an NRT file."""
    return name.endswith(SUFFIXES) and not name.startswith(".")


def parse_nrt_text(text: str, where: str, *, json_text: bool = False) -> list[Any]:
    """The objects of one NRT file (``List`` kinds expanded); :class:`InputError` if it cannot
    be parsed within the bounds of :mod:`numalign.inputs.documents` (size, nesting depth,
    values); each object is held to :func:`~numalign.kube.extender.limits.check_nrt` when
    built. ``json_text``: the text is one strict JSON document (a ``.json`` file)."""
    if len(text) > MAX_FILE_BYTES:
        raise InputError(f"larger than {MAX_FILE_BYTES} bytes", where)
    if json_text:
        docs = [loads_json(text, where)]
    else:
        try:  # the bounded reader: depth, values (aliases expanded), integer digits
            docs = [d for d in load_yaml_all(text, where, invalid="malformed YAML")
                    if d is not None]
        except (TypeError, ValueError, RecursionError) as e:  # defensive: a constructor's own
            raise InputError(f"malformed YAML: {type(e).__name__}", where) from None
    objs: list[Any] = []
    for d in docs:
        if isinstance(d, dict) and d.get("kind") == "List":
            items = d.get("items")
            objs.extend(items if isinstance(items, list) else [])
        else:
            objs.append(d)
    return objs


def name_of(obj: Any) -> str | None:
    """The object's ``metadata.name``, if it is a non-empty string."""
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    name = meta.get("name") if isinstance(meta, dict) else None
    return name if isinstance(name, str) and name else None


def file_key(st: os.stat_result) -> Key:
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


@dataclass
class FileRead:
    """One file as read: its key (``None``: gone), its objects by name and their digests, or
    why it could not be read (``error``: the file keeps its last good objects)."""

    name: str
    key: Key | None
    objects: dict[str, Any] = field(default_factory=dict)
    digests: dict[str, str] = field(default_factory=dict)
    error: str = ""
    notes: list[str] = field(default_factory=list)
    #: read within :data:`RACY_NS` of its mtime (see :class:`_Known`)
    racy: bool = False


def _digest(obj: Any) -> str:
    try:
        return nrt_digests(obj)[0]
    except (TypeError, ValueError, RecursionError):
        return ""  # the build refuses it; "" differs from every digest


def read_file(directory: str, name: str) -> FileRead:
    """Read and parse ``directory/name`` (bounded; a FIFO or a device is refused unopened)."""
    path = os.path.join(directory, name)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return FileRead(name, None)
    except OSError as e:
        return FileRead(name, (0, 0, 0, 0), error=e.strerror or str(e))
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fd)
        key = file_key(st)
        if not stat.S_ISREG(st.st_mode):
            return FileRead(name, key, error="not a regular file")
        if st.st_size > MAX_FILE_BYTES:
            return FileRead(name, key, error=f"larger than {MAX_FILE_BYTES} bytes")
        if st.st_size == 0:  # a writer truncating it in place has not written it yet
            return FileRead(name, key, error="empty")
        try:
            data = fh.read(MAX_FILE_BYTES + 1)
        except OSError as e:
            return FileRead(name, key, error=e.strerror or str(e))
    out = FileRead(name, key, racy=time.time_ns() - st.st_mtime_ns < RACY_NS)
    try:
        if len(data) > MAX_FILE_BYTES:
            raise InputError(f"larger than {MAX_FILE_BYTES} bytes", path)
        objs = parse_nrt_text(decode_text(data, path), path, json_text=name.endswith(".json"))
    except InputError as e:
        out.error = e.problem if e.field == path else e.message
        return out
    for i, o in enumerate(objs):
        obj_name = name_of(o)
        if obj_name is None:
            out.notes.append(f"object {i} has no metadata.name; skipped")
        else:
            out.objects[obj_name] = o
            out.digests[obj_name] = _digest(o)
    return out


def read_files(directory: str, names: list[str]) -> bytes:
    """:func:`read_file` of each name, pickled (run in a worker process: the serving process
    then only unpickles)."""
    return pickle.dumps([read_file(directory, n) for n in names], pickle.HIGHEST_PROTOCOL)


@dataclass
class _Known:
    """A file as last read: its key and its objects' digests. ``racy``: it was read within
    :data:`RACY_NS` of its mtime, so a rewrite in the same clock tick (file times are taken
    from a coarse clock) could leave the same key on other content: its next check reads it
    even with the key unchanged (as git treats "racily clean" index entries)."""

    key: Key
    digests: dict[str, str]
    racy: bool = False


class DirSource:
    """NRT objects from the ``*.yaml``/``*.yml``/``*.json`` files of a directory (see the
    module notes). ``reader``: where files are read and parsed (a worker process), else on
    the calling thread."""

    def __init__(self, path: str | Path, log: Any = sys.stderr, *,
                 reader: Reader | None = None) -> None:
        self.path = Path(path)
        self.log = log
        self.reader = reader
        self._files: dict[str, _Known] = {}
        #: object name -> the files holding it; the digest last given to the core
        self._owners: dict[str, set[str]] = {}
        self._applied: dict[str, str] = {}
        #: files (re)parsed so far, and files whose key was checked: the cost of keeping up
        self.files_read = 0
        self.files_checked = 0
        self._audit_at = 0

    # ------------------------------------------------------------------ reading

    def names(self) -> list[str]:
        """The NRT file names in the directory now."""
        try:
            with os.scandir(self.path) as it:
                return sorted(e.name for e in it if is_nrt_file(e.name))
        except NotADirectoryError:
            raise InputError("not a directory", str(self.path)) from None
        except OSError as e:
            raise InputError(f"cannot list: {e.strerror or e}", str(self.path)) from None

    @property
    def known(self) -> list[str]:
        """The files read so far (in the order first seen)."""
        return list(self._files)

    def _read(self, names: list[str]) -> list[FileRead]:
        if not names:
            return []
        self.files_read += len(names)
        directory = str(self.path)
        if self.reader is None:
            return [read_file(directory, n) for n in names]
        jobs = [(names[i:i + READ_BATCH], self.reader(read_files, directory,
                                                      names[i:i + READ_BATCH]))
                for i in range(0, len(names), READ_BATCH)]
        out: list[FileRead] = []
        for batch, job in jobs:
            try:
                out.extend(pickle.loads(job.result()))
            except Exception as e:  # the worker died or the pool is stopping: read them here
                print(f"numalign extender: reading {len(batch)} files in a worker process "
                      f"failed ({type(e).__name__}); reading them in this one", file=self.log)
                out.extend(read_file(directory, n) for n in batch)
        return out

    def _stat(self, name: str) -> Key | None:
        """The file's key now; ``None`` if it is gone (or not a file any more)."""
        self.files_checked += 1
        try:
            st = os.stat(self.path / name)
        except OSError:
            return None
        return file_key(st) if stat.S_ISREG(st.st_mode) else None

    def _log(self, r: FileRead) -> None:
        where = self.path / r.name
        for note in r.notes:
            print(f"numalign extender: {where}: {note}", file=self.log)
        if r.error:
            print(f"numalign extender: {where}: cannot read ({r.error}); keeping its last good "
                  "objects", file=self.log)

    # ------------------------------------------------------------------ whole directory

    def scan(self) -> dict[str, Any]:
        """Every object of the directory now (name -> object), every file read: the initial
        list, which the caller gives the core (:meth:`ExtenderCore.set_nodes`). A file that
        cannot be read contributes its last good objects only if it was read before."""
        reads = self._read(self.names())
        previous = self._files
        self._files, self._owners, self._applied = {}, {}, {}
        out: dict[str, Any] = {}
        for r in reads:
            self._log(r)
            if r.key is None:
                continue
            old = previous.get(r.name)
            if r.error:
                digests = old.digests if old is not None else {}
                self._files[r.name] = _Known(r.key, digests)
            else:
                digests = dict(r.digests)
                self._files[r.name] = _Known(r.key, digests, r.racy)
                out.update(r.objects)
            for obj_name, digest in digests.items():
                self._owners.setdefault(obj_name, set()).add(r.name)
                self._applied[obj_name] = digest
        return out

    def poll(self, core: ExtenderCore) -> int:
        """Apply every change since the last look to ``core`` (every file's key checked, the
        changed ones read); the core is ready after it. Returns how many nodes changed."""
        changed = self.apply(core, set(self.names()) | set(self._files))
        core.mark_ready()
        return changed

    def audit(self, core: ExtenderCore, count: int) -> int:
        """Check the keys of the next ``count`` known files (round robin), as if an event had
        named them: what a lost event (an inotify queue overflow) missed is found within
        the time it takes to go round."""
        files = list(self._files)
        if not files or count <= 0:
            return 0
        start = self._audit_at % len(files)
        names = (files[start:] + files[:start])[:count]
        self._audit_at = start + len(names)
        return self.apply(core, names)

    # ------------------------------------------------------------------ one change

    def apply(self, core: ExtenderCore, names: Iterable[str]) -> int:
        """Check the files ``names`` (an event named them), read those whose key changed and
        apply to ``core`` the objects whose digest changed and the removals; returns how many
        nodes changed. Updates are queued (:meth:`ExtenderCore.update_node_async`) and
        published as they are built. The work is that of the files named, whatever the size
        of the directory."""
        to_read: list[str] = []
        orphans: set[str] = set()  # objects that lost a file holding them
        for name in sorted(set(names)):
            if not is_nrt_file(name):
                continue
            key = self._stat(name)
            old = self._files.get(name)
            if key is None:
                if old is not None:
                    orphans.update(self._forget(name, self._files.pop(name).digests))
            elif old is None or old.key != key or old.racy:
                to_read.append(name)
        touched: dict[str, tuple[str, Any]] = {}
        for r in self._read(to_read):
            self._log(r)
            old = self._files.pop(r.name, None)
            before = old.digests if old is not None else {}
            if r.key is None:  # gone between the stat and the read
                orphans.update(self._forget(r.name, before))
                continue
            if r.error:  # keeps its last good objects; read again when it changes
                self._files[r.name] = _Known(r.key, before)
                continue
            orphans.update(self._forget(r.name, [n for n in before if n not in r.digests]))
            for obj_name, digest in r.digests.items():
                self._owners.setdefault(obj_name, set()).add(r.name)
                if self._applied.get(obj_name) != digest or not digest:
                    touched[obj_name] = (digest, r.objects[obj_name])
            self._files[r.name] = _Known(r.key, dict(r.digests), r.racy)
        removed = sorted(n for n in orphans if n not in self._owners)
        for obj_name in removed:
            self._applied.pop(obj_name, None)
            core.remove_node(obj_name)
            core.metrics.node_updates.labels("deleted").inc()
        for obj_name, (digest, obj) in touched.items():
            self._applied[obj_name] = digest
            core.update_node_async(obj_name, obj)
            core.metrics.node_updates.labels("modified").inc()
        return len(touched) + len(removed)

    def _forget(self, file: str, objects: Iterable[str]) -> list[str]:
        """``file`` no longer holds ``objects``; returns those no file holds any more."""
        out = []
        for obj_name in objects:
            owners = self._owners.get(obj_name)
            if owners is not None:
                owners.discard(file)
                if not owners:
                    del self._owners[obj_name]
                    out.append(obj_name)
        return out
