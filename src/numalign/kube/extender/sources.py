"""Where the extender's nodes come from: NodeResourceTopology objects in a directory (polled
by mtime) or from the API server (list + watch), kept in sync with an :class:`ExtenderCore`."""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

import yaml

from numalign.errors import InputError
from numalign.kube.extender.core import ExtenderCore


class DirSource:
    """NRT objects from ``*.yaml``/``*.yml``/``*.json`` files in a directory, polled by mtime.

    A file that cannot be read or parsed keeps its last good object (and is logged)."""

    def __init__(self, path: str | Path, log: Any = sys.stderr) -> None:
        self.path = Path(path)
        self.log = log
        self._files: dict[Path, tuple[tuple[int, int], list[Any]]] = {}

    def scan(self) -> dict[str, Any]:
        if not self.path.is_dir():
            raise InputError("not a directory", str(self.path))
        present: set[Path] = set()
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
            if old is not None and old[0] == key:
                continue
            try:
                with open(p, encoding="utf-8") as f:
                    docs = [d for d in yaml.safe_load_all(f) if d is not None]
                objs: list[Any] = []
                for d in docs:
                    if isinstance(d, dict) and d.get("kind") == "List":
                        objs.extend(d.get("items") or [])
                    else:
                        objs.append(d)
                self._files[p] = (key, objs)
            except (OSError, yaml.YAMLError, UnicodeDecodeError) as e:
                print(f"numalign extender: {p}: cannot read ({str(e).splitlines()[0]}); "
                      "keeping its last good objects", file=self.log)
        for p in list(self._files):
            if p not in present:
                del self._files[p]
        out: dict[str, Any] = {}
        for _, objs in self._files.values():
            for o in objs:
                if isinstance(o, dict) and isinstance(o.get("metadata"), dict):
                    name = o["metadata"].get("name")
                    if isinstance(name, str):
                        out[name] = o
        return out


class ApiSource:
    """NRT objects from the API server: list, then watch until the next resync."""

    def __init__(self, api: Any, log: Any = sys.stderr) -> None:
        self.api = api
        self.log = log

    def list(self) -> dict[str, Any]:
        from numalign.kube.exporter import GROUP, PLURAL, VERSION, k8s

        resp: Any = k8s("client").CustomObjectsApi(self.api).list_cluster_custom_object(GROUP, VERSION, PLURAL)
        return {o["metadata"]["name"]: o for o in resp.get("items") or []}

    def watch(self, core: ExtenderCore, objects: dict[str, Any], seconds: int,
              stop: threading.Event) -> None:
        from numalign.kube.exporter import GROUP, PLURAL, VERSION, k8s

        w = k8s("watch").Watch()
        custom = k8s("client").CustomObjectsApi(self.api)
        for ev in w.stream(custom.list_cluster_custom_object, GROUP, VERSION, PLURAL,
                           timeout_seconds=seconds):
            obj: Any = ev.get("object") or {}
            name = (obj.get("metadata") or {}).get("name")
            if not isinstance(name, str):
                continue
            if ev.get("type") == "DELETED":
                objects.pop(name, None)
            else:
                objects[name] = obj
            core.set_nodes(objects)
            if stop.is_set():
                w.stop()
                return


def run_source(core: ExtenderCore, source: DirSource | ApiSource, stop: threading.Event,
               interval: float = 1.0, log: Any = sys.stderr) -> None:
    """Keep ``core``'s nodes in sync with ``source`` until ``stop``."""
    while not stop.is_set():
        try:
            if isinstance(source, DirSource):
                core.set_nodes(source.scan())
            else:
                objects = source.list()
                core.set_nodes(objects)
                source.watch(core, objects, max(1, int(interval)), stop)
        except Exception as e:  # keep the last nodes; retry
            print(f"numalign extender: node source failed: {type(e).__name__}: {e}", file=log)
        stop.wait(interval)
