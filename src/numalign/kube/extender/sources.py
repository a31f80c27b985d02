"""Where the extender's nodes come from, kept in sync with an :class:`ExtenderCore` one node at
a time.

* :class:`~numalign.kube.extender.dirsource.DirSource` - NRT objects in
  ``*.yaml``/``*.yml``/``*.json`` files in a directory, followed by change events
  (:mod:`~numalign.kube.extender.dirwatch`): only the files an event names are looked at,
  only those whose size or times changed are read (in a worker process), and only the
  objects that changed are applied.
* :class:`ApiSource` - an informer: list once, then watch from the list's resourceVersion;
  each event rebuilds one node; a watch that ends is resumed from the last resourceVersion
  seen; a watch that expired (410 Gone) leads to a re-list, at most once per back-off period.

A file or object that cannot be read marks only its node unusable (see
:meth:`ExtenderCore.update_node`); nothing here holds the core's lock.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

from numalign.errors import InputError
from numalign.inputs.documents import loads_json
from numalign.kube.extender.core import ExtenderCore
from numalign.kube.extender.dirsource import (
    MAX_FILE_BYTES,
    DirSource,
    parse_nrt_text,
)
from numalign.kube.extender.dirsource import name_of as _name_of
from numalign.kube.extender.dirwatch import run_directory

__all__ = ["MAX_FILE_BYTES", "ApiSource", "DirSource", "WatchExpired", "parse_nrt_text",
           "run_source"]

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

    ``interval``: for a directory, the retry period of its first read and the poll period
    where it cannot be watched (:mod:`~numalign.kube.extender.dirwatch`); for the API, the
    shortest time between two watches that end at once and between two lists (the back-off
    doubles on each failure up to ``max_backoff``). ``watch_seconds``: how long one watch
    request may run."""
    backoff = interval
    if isinstance(source, DirSource):
        run_directory(core, source, stop, interval, log)
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
