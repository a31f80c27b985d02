"""Where the extender's nodes come from, kept in sync with an :class:`ExtenderCore` one node at
a time.

* :class:`DirSource` - NRT objects in ``*.yaml``/``*.yml``/``*.json`` files in a directory;
  each poll re-reads only the files whose mtime or size changed, and applies only the objects
  that changed.
* :class:`ApiSource` - an informer: list once, then watch from the list's resourceVersion;
  each event rebuilds one node; a watch that ends is resumed from the last resourceVersion
  seen; a watch that expired (410 Gone) leads to a re-list, at most once per back-off period.

A file or object that cannot be read marks only its node unusable (see
:meth:`ExtenderCore.update_node`); nothing here holds the core's lock.
"""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from numalign.errors import InputError
from numalign.inputs.documents import load_yaml_all, loads_json, read_text
from numalign.kube.extender.core import ExtenderCore

#: largest NRT file read (bytes); a real object is a few KiB
MAX_FILE_BYTES = 16 * 1024 * 1024


def parse_nrt_text(text: str, where: str) -> list[Any]:
    """The objects of one NRT file (``List`` kinds expanded); :class:`InputError` if it cannot
    be parsed within the bounds of :mod:`numalign.inputs.documents` (size, nesting depth, values);
    each object is held to :func:`~numalign.kube.extender.limits.check_nrt` when built."""
    if len(text) > MAX_FILE_BYTES:
        raise InputError(f"larger than {MAX_FILE_BYTES} bytes", where)
    try:  # the bounded reader: depth, values (aliases expanded), integer digits
        docs = [d for d in load_yaml_all(text, where, invalid="malformed YAML") if d is not None]
    except (TypeError, ValueError, RecursionError) as e:  # defensive: a constructor's own error
        raise InputError(f"malformed YAML: {type(e).__name__}", where) from None
    objs: list[Any] = []
    for d in docs:
        if isinstance(d, dict) and d.get("kind") == "List":
            items = d.get("items")
            objs.extend(items if isinstance(items, list) else [])
        else:
            objs.append(d)
    return objs


def _name_of(obj: Any) -> str | None:
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    name = meta.get("name") if isinstance(meta, dict) else None
    return name if isinstance(name, str) and name else None


@dataclass
class _File:
    key: tuple[int, int]
    objects: dict[str, Any] = field(default_factory=dict)


class DirSource:
    """NRT objects from ``*.yaml``/``*.yml``/``*.json`` files in a directory, polled by mtime.

    A file that cannot be read or parsed keeps its last good objects (and is logged)."""

    def __init__(self, path: str | Path, log: Any = sys.stderr) -> None:
        self.path = Path(path)
        self.log = log
        self._files: dict[Path, _File] = {}
        self.files_read = 0  # files (re)parsed so far: the cost of the scans

    def _changed(self) -> tuple[dict[Path, _File], list[Path]]:
        """(files whose content changed -> their new state, files gone)."""
        if not self.path.is_dir():
            raise InputError("not a directory", str(self.path))
        present: set[Path] = set()
        changed: dict[Path, _File] = {}
        for p in sorted(self.path.iterdir()):
            if p.suffix not in (".yaml", ".yml", ".json") or p.name.startswith("."):
                continue
            present.add(p)
            try:
                st = p.stat()
            except OSError:
                continue
            key = (st.st_mtime_ns, st.st_size)
            old = self._files.get(p)
            if old is not None and old.key == key:
                continue
            state = _File(key, dict(old.objects) if old is not None else {})
            try:
                if st.st_size > MAX_FILE_BYTES:
                    raise InputError(f"larger than {MAX_FILE_BYTES} bytes", str(p))
                self.files_read += 1
                objs = parse_nrt_text(read_text(str(p), "NodeResourceTopology file"), str(p))
                state.objects = {}
                for i, o in enumerate(objs):
                    name = _name_of(o)
                    if name is None:
                        print(f"numalign extender: {p}: object {i} has no metadata.name; "
                              "skipped", file=self.log)
                    else:
                        state.objects[name] = o
            except (OSError, UnicodeDecodeError, InputError) as e:
                msg = e.message if isinstance(e, InputError) else str(e).splitlines()[0]
                print(f"numalign extender: {p}: cannot read ({msg}); keeping its last good "
                      "objects", file=self.log)
            changed[p] = state
        gone = [p for p in self._files if p not in present]
        return changed, gone

    def scan(self) -> dict[str, Any]:
        """Every object of the directory now (name -> object), re-reading changed files only."""
        changed, gone = self._changed()
        self._files.update(changed)
        for p in gone:
            del self._files[p]
        out: dict[str, Any] = {}
        for f in self._files.values():
            out.update(f.objects)
        return out

    def poll(self, core: ExtenderCore) -> int:
        """Apply the changes since the last poll to ``core``; returns how many nodes changed."""
        changed, gone = self._changed()
        touched: dict[str, Any] = {}
        removed: set[str] = set()
        for p in gone:
            removed.update(self._files.pop(p).objects)
        for p, state in changed.items():
            old = self._files.get(p)
            if old is not None:
                removed.update(n for n in old.objects if n not in state.objects)
            for name, obj in state.objects.items():
                if old is None or old.objects.get(name) is not obj:
                    touched[name] = obj
            self._files[p] = state
        still = {n for f in self._files.values() for n in f.objects}
        for name in sorted(removed - still):
            core.remove_node(name)
            core.metrics.node_updates.labels("deleted").inc()
        for name, obj in touched.items():
            core.update_node(name, obj)
            core.metrics.node_updates.labels("modified").inc()
        core.mark_ready()
        return len(touched) + len(removed - still)


def _event(line: str) -> tuple[str, Any]:
    """(type, object) of one watch event line, decoded with the bounded reader."""
    ev = loads_json(line, "watch event")
    if not isinstance(ev, dict) or not isinstance(ev.get("type"), str):
        raise InputError("expected {type, object}", "watch event")
    return ev["type"], ev.get("object")


class WatchExpired(Exception):
    """The watch's resourceVersion is too old (HTTP 410 Gone): list again."""


class ApiSource:
    """NRT objects from the API server: an informer (list, then watch from resourceVersion)."""

    def __init__(self, api: Any, log: Any = sys.stderr) -> None:
        self.api = api
        self.log = log

    def _custom(self) -> Any:
        from numalign.kube.exporter import k8s

        return k8s("client").CustomObjectsApi(self.api)

    def list_with_version(self) -> tuple[dict[str, Any], str | None]:
        """(name -> object, the list's resourceVersion)."""
        from numalign.kube.exporter import GROUP, PLURAL, VERSION

        raw: Any = self._custom().list_cluster_custom_object(GROUP, VERSION, PLURAL,
                                                             _preload_content=False)
        try:
            resp = loads_json(raw.data, "NodeResourceTopology list")  # the bounded reader
        finally:
            raw.release_conn()
        if not isinstance(resp, dict):
            raise InputError("expected a NodeResourceTopologyList", "NodeResourceTopology list")
        objects: dict[str, Any] = {}
        for o in resp.get("items") or []:
            name = _name_of(o)
            if name is not None:
                objects[name] = o
        rv = (resp.get("metadata") or {}).get("resourceVersion")
        return objects, rv if isinstance(rv, str) and rv else None

    def list(self) -> dict[str, Any]:
        return self.list_with_version()[0]

    def _apply_event(self, core: ExtenderCore, line: str, rv: str | None) -> str | None:
        """Apply one watch event line; returns the resourceVersion seen since. An event that
        cannot be decoded within the bounds is logged and skipped; ``ERROR`` 410 raises
        :class:`WatchExpired`."""
        try:
            kind, obj = _event(line)
        except InputError as e:
            print(f"numalign extender: skipped a watch event: {e.message}", file=self.log)
            return rv
        if kind == "ERROR":
            status = obj if isinstance(obj, dict) else {}
            if status.get("code") == 410:
                raise WatchExpired(str(status.get("message") or "410 Gone"))
            raise RuntimeError(f"watch error: {str(status.get('message'))[:200]}")
        meta = obj.get("metadata") if isinstance(obj, dict) else None
        if isinstance(meta, dict) and isinstance(meta.get("resourceVersion"), str):
            rv = meta["resourceVersion"]
        name = _name_of(obj)
        if kind == "BOOKMARK" or name is None:
            return rv
        if kind == "DELETED":
            core.remove_node(name)
            core.metrics.node_updates.labels("deleted").inc()
        elif kind in ("ADDED", "MODIFIED"):
            # queued when the core builds in a worker process: the watch reads on meanwhile
            core.update_node_async(name, obj)
            core.metrics.node_updates.labels(kind.lower()).inc()
        return rv

    def watch(self, core: ExtenderCore, resource_version: str | None, seconds: int,
              stop: threading.Event) -> str | None:
        """Apply watch events from ``resource_version`` for up to ``seconds``; returns the last
        resourceVersion seen. Raises :class:`WatchExpired` on 410 Gone."""
        from numalign.kube.exporter import GROUP, PLURAL, VERSION, k8s

        api_exception = k8s("client.rest").ApiException
        lines = k8s("watch.watch").iter_resp_lines  # the client's own line splitter
        rv = resource_version
        kwargs: dict[str, Any] = {"timeout_seconds": seconds, "allow_watch_bookmarks": True}
        if rv is not None:
            kwargs["resource_version"] = rv
        try:
            resp: Any = self._custom().list_cluster_custom_object(
                GROUP, VERSION, PLURAL, watch=True, _preload_content=False, **kwargs)
        except api_exception as e:
            if getattr(e, "status", None) == 410:
                raise WatchExpired(str(e)) from None
            raise
        try:
            for line in lines(resp):
                rv = self._apply_event(core, line, rv)
                if stop.is_set():
                    break
        finally:
            resp.close()
            resp.release_conn()
        return rv


def run_source(core: ExtenderCore, source: DirSource | ApiSource, stop: threading.Event,
               interval: float = 1.0, log: Any = sys.stderr, *,
               watch_seconds: int = 300, max_backoff: float = 30.0) -> None:
    """Keep ``core``'s nodes in sync with ``source`` until ``stop``.

    ``interval``: the directory poll period; for the API, the shortest time between two
    watches that end at once and between two lists (the back-off doubles on each failure up
    to ``max_backoff``). ``watch_seconds``: how long one watch request may run."""
    backoff = interval
    if isinstance(source, DirSource):
        while not stop.is_set():
            try:
                source.poll(core)
            except Exception as e:  # keep the last nodes; retry
                print(f"numalign extender: node source failed: {type(e).__name__}: {e}", file=log)
            stop.wait(interval)
        return
    while not stop.is_set():
        try:
            objects, rv = source.list_with_version()
        except Exception as e:  # keep the last nodes; retry after the back-off
            print(f"numalign extender: listing NodeResourceTopology failed: "
                  f"{type(e).__name__}: {e}", file=log)
            stop.wait(backoff)
            backoff = min(max_backoff, backoff * 2)
            continue
        core.metrics.relists.inc()
        core.set_nodes(objects)
        backoff = interval
        while not stop.is_set():
            try:
                rv = source.watch(core, rv, watch_seconds, stop)
                stop.wait(interval)  # an empty watch that ends at once must not spin
            except WatchExpired:
                print("numalign extender: watch expired (410 Gone); listing again", file=log)
                break
            except Exception as e:
                print(f"numalign extender: watch failed: {type(e).__name__}: {e}", file=log)
                stop.wait(backoff)
                backoff = min(max_backoff, backoff * 2)
                break
        stop.wait(interval)
