"""The extender's informer against an in-process API server (loopback) that serves NRT list +
watch with resourceVersion and answers an expired resourceVersion with 410 Gone: one list,
then one node rebuilt per event, ADDED/MODIFIED/DELETED applied, a hostile object marks only
its node, and an expired watch leads to exactly one re-list."""

from __future__ import annotations

import copy
import io
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from conftest import REPO
from extender_helpers import api_source_running, count_engine_builds, wait
from numalign.kube.extender import ExtenderCore
from numalign.kube.topology import build_nrt
from numalign.machine.spec import read_machine_file
from numalign.node.admission import Node

PATH = "/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies"


def fig_nrt(name: str) -> dict[str, Any]:
    return build_nrt(Node(read_machine_file(str(REPO / "examples" / "fig1.yaml"))), name=name)


class Store:
    """Objects, an event log with resourceVersions, and a compaction point."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.rv = 0
        self.objects: dict[str, dict[str, Any]] = {}
        self.events: list[tuple[int, str, dict[str, Any]]] = []
        self.compacted = 0  # watches from a resourceVersion below this get 410
        self.generation = 0  # bumped to end every open watch
        self.lists = 0
        self.watches: list[str | None] = []

    def put(self, kind: str, obj: dict[str, Any]) -> None:
        with self.cond:
            self.rv += 1
            obj = copy.deepcopy(obj)
            obj["metadata"]["resourceVersion"] = str(self.rv)
            name = obj["metadata"]["name"]
            if kind == "DELETED":
                self.objects.pop(name, None)
            else:
                self.objects[name] = obj
            self.events.append((self.rv, kind, obj))
            self.cond.notify_all()

    def expire(self) -> None:
        with self.cond:
            self.compacted = self.rv + 1
            self.generation += 1
            self.cond.notify_all()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"  # the watch stream ends when the connection closes
    server: Any

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_GET(self) -> None:
        url = urlparse(self.path)
        if url.path != PATH:
            self.send_error(404)
            return
        q = {k: v[0] for k, v in parse_qs(url.query).items()}
        store: Store = self.server.store
        if q.get("watch") not in ("true", "1", "True"):
            with store.cond:
                store.lists += 1
                body = json.dumps({"apiVersion": "topology.node.k8s.io/v1alpha2",
                                   "kind": "NodeResourceTopologyList",
                                   "metadata": {"resourceVersion": str(store.rv)},
                                   "items": list(store.objects.values())}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        rv = int(q.get("resourceVersion") or 0)
        store.watches.append(q.get("resourceVersion"))
        deadline = time.monotonic() + float(q.get("timeoutSeconds") or 5)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        with store.cond:
            if rv < store.compacted:
                status = {"kind": "Status", "apiVersion": "v1", "metadata": {},
                          "status": "Failure", "message": "too old resource version",
                          "reason": "Expired", "code": 410}
                self.wfile.write(json.dumps({"type": "ERROR", "object": status}).encode() + b"\n")
                return
            gen = store.generation
            while time.monotonic() < deadline and gen == store.generation:
                pending = [e for e in store.events if e[0] > rv]
                for erv, kind, obj in pending:
                    self.wfile.write(json.dumps({"type": kind, "object": obj}).encode() + b"\n")
                    self.wfile.flush()
                    rv = erv
                store.cond.wait(0.05)


@pytest.fixture
def api() -> Iterator[tuple[Store, Any]]:
    from kubernetes import client

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    srv.store = Store()  # type: ignore[attr-defined]
    threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    cfg = client.Configuration(host=f"http://127.0.0.1:{srv.server_address[1]}")
    try:
        yield srv.store, client.ApiClient(cfg)  # type: ignore[attr-defined]
    finally:
        with srv.store.cond:  # type: ignore[attr-defined]
            srv.store.generation += 1  # type: ignore[attr-defined]
            srv.store.cond.notify_all()  # type: ignore[attr-defined]
        srv.shutdown()
        srv.server_close()


def test_list_once_then_one_node_per_event(api: tuple[Store, Any],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    store, client = api
    builds = count_engine_builds(monkeypatch)
    for name in ("a", "b", "c"):
        store.put("ADDED", fig_nrt(name))
    core = ExtenderCore(log=io.StringIO())
    log = io.StringIO()
    with api_source_running(core, client, log) as t:
        assert core.ready.wait(10)
        assert sorted(core.nodes) == ["a", "b", "c"] and sorted(builds) == ["a", "b", "c"]
        wait(lambda: len(store.watches) >= 1)
        assert store.watches[0] == "3"  # watched from the list's resourceVersion
        builds.clear()
        version = core.nodes["b"].version
        changed = fig_nrt("b")
        changed["zones"][0]["resources"][0]["available"] = "2"
        store.put("MODIFIED", changed)
        wait(lambda: core.nodes["b"].version > version)
        assert builds == ["b"]
        store.put("ADDED", fig_nrt("d"))
        wait(lambda: "d" in core.nodes)
        store.put("DELETED", fig_nrt("a"))
        wait(lambda: "a" not in core.nodes)
        assert sorted(builds) == ["b", "d"]
        # a hostile object through the watch: only that node is refused
        hostile = fig_nrt("c")
        hostile["zones"][0]["resources"][2].update(capacity="1e18", allocatable="1e18",
                                                   available="1e18")
        store.put("MODIFIED", hostile)
        wait(lambda: "c" in core.broken)
        assert sorted(core.nodes) == ["b", "d"]
        assert store.lists == 1
        assert core.metrics.relists._value.get() == 1
        # the watch's resourceVersion expires: exactly one re-list, then watching again
        store.expire()
        store.put("ADDED", fig_nrt("e"))
        wait(lambda: "e" in core.nodes)
        wait(lambda: store.lists == 2)
        time.sleep(0.5)
        assert store.lists == 2
        assert "410" in log.getvalue() or "expired" in log.getvalue()
        assert sorted(core.nodes) == ["b", "d", "e"] and "c" in core.broken
    assert not t.is_alive()
