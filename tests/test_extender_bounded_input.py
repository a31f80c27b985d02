"""Untrusted YAML/JSON reaching the extender goes through numalign.inputs.documents' bounded readers:
the request body, NRT files of the directory source, the API source's list and watch events.
Each hostile document is refused with a one-line message and the service keeps serving."""

from __future__ import annotations

import http.client
import io
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
import yaml

from conftest import REPO
from extender_helpers import api_source_running, wait
from numalign.errors import InputError
from numalign.kube.extender import ApiSource, DirSource, ExtenderCore, serve_in_thread
from numalign.kube.extender.sources import parse_nrt_text
from numalign.kube.topology import build_nrt
from numalign.machine.spec import read_machine_file
from numalign.node.admission import Node

PATH = "/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies"
DEEP_JSON = "[" * 2000 + "]" * 2000


def fig_nrt(name: str, rv: str = "1") -> dict[str, Any]:
    obj = build_nrt(Node(read_machine_file(str(REPO / "examples" / "fig1.yaml"))), name=name)
    obj["metadata"]["resourceVersion"] = rv
    return obj


def kube_pod(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "uid": f"u-{name}"},
            "spec": {"containers": [{"name": "c", "resources": {
                "limits": {"cpu": "1", "memory": "1Gi"}}}]}}


def post(port: int, path: str, body: bytes) -> tuple[int, dict[str, Any]]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("POST", path, body, {"Content-Type": "application/json"})
        r = conn.getresponse()
        return r.status, json.loads(r.read())
    finally:
        conn.close()


@pytest.mark.parametrize("body", [
    DEEP_JSON,
    '{"Pod": ' + '{"a": ' * 2000 + "1" + "}" * 2000 + ', "NodeNames": ["a"]}',
    '{"Pod": {}, "NodeNames": [' + "9" * 5000 + "]}",  # an integer beyond Python's limit
])
def test_hostile_json_body_is_a_one_line_400_and_the_server_keeps_serving(body: str) -> None:
    core = ExtenderCore(log=io.StringIO())
    core.set_nodes({"a": fig_nrt("a"), "b": fig_nrt("b")})
    server = serve_in_thread(core)
    port = server.server_address[1]
    try:
        status, doc = post(port, "/filter", body.encode())
        assert status == 400
        assert doc["Error"].startswith("request body: ")
        assert "\n" not in doc["Error"] and len(doc["Error"]) < 300
        ok = json.dumps({"Pod": kube_pod("p"), "NodeNames": ["a", "b"]}).encode()
        assert post(port, "/filter", ok) == (200, {
            "Nodes": None, "NodeNames": ["a", "b"], "FailedNodes": {},
            "FailedAndUnresolvableNodes": {}, "Error": ""})
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", "/healthz")
        assert conn.getresponse().status == 200
        conn.close()
    finally:
        server.shutdown()
        server.server_close()


def test_nrt_files_are_read_with_the_bounded_reader(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="nested deeper than 100 levels") as e:
        parse_nrt_text(DEEP_JSON, "deep.json")
    assert "\n" not in str(e.value)
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
        for p, c in zip("abcdefg", "bcdefgh", strict=True))
    with pytest.raises(InputError, match="aliases expanded"):
        parse_nrt_text(bomb, "bomb.yaml")
    (tmp_path / "a.yaml").write_text(yaml.safe_dump(fig_nrt("a")))
    (tmp_path / "deep.json").write_text(DEEP_JSON)
    (tmp_path / "bomb.yaml").write_text(bomb)
    (tmp_path / "bigint.json").write_text('{"metadata": {"name": "x"}, "n": ' + "9" * 5000 + "}")
    log = io.StringIO()
    core = ExtenderCore(log=io.StringIO())
    DirSource(tmp_path, log=log).poll(core)
    assert sorted(core.nodes) == ["a"] and core.ready.is_set()
    lines = log.getvalue().splitlines()
    assert len(lines) == 3 and all("cannot read" in line for line in lines)
    assert core.filter(*_pod_and(["a"]))[0] == ["a"]


def _pod_and(names: list[str]) -> tuple[Any, list[str]]:
    from numalign.pods import parse_pods

    return parse_pods({"apiVersion": "v1", "kind": "Pod", **kube_pod("q")})[0], names


class _Api(BaseHTTPRequestHandler):
    """A list (``server.list_body``) and one watch stream of raw lines (``server.lines``)."""

    protocol_version = "HTTP/1.0"
    server: Any

    def log_message(self, format: str, *args: Any) -> None:
        return

    def do_GET(self) -> None:
        url = urlparse(self.path)
        q = {k: v[0] for k, v in parse_qs(url.query).items()}
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        if q.get("watch") not in ("true", "1", "True"):
            self.server.lists += 1
            self.wfile.write(self.server.list_body)
            return
        self.server.watches += 1
        lines, self.server.lines = self.server.lines, []
        for line in lines:
            self.wfile.write(line + b"\n")
            self.wfile.flush()
        time.sleep(0.2)


@pytest.fixture
def api() -> Iterator[tuple[Any, Any]]:
    from kubernetes import client

    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Api)
    srv.daemon_threads = True
    srv.lists = srv.watches = 0  # type: ignore[attr-defined]
    srv.lines = []  # type: ignore[attr-defined]
    threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    cfg = client.Configuration(host=f"http://127.0.0.1:{srv.server_address[1]}")
    try:
        yield srv, client.ApiClient(cfg)
    finally:
        srv.shutdown()
        srv.server_close()


def _list(*objs: dict[str, Any], rv: str = "5") -> bytes:
    return json.dumps({"apiVersion": "topology.node.k8s.io/v1alpha2",
                       "kind": "NodeResourceTopologyList",
                       "metadata": {"resourceVersion": rv}, "items": list(objs)}).encode()


def test_watch_events_are_decoded_with_the_bounded_reader(api: tuple[Any, Any]) -> None:
    srv, client = api
    srv.list_body = _list(fig_nrt("a"), fig_nrt("b"))
    deep_event = b'{"type": "MODIFIED", "object": ' + DEEP_JSON.encode() + b"}"
    changed = fig_nrt("b", rv="7")
    for z in changed["zones"]:
        for r in z["resources"]:
            if r["name"] == "cpu":
                r["available"] = "0"
    srv.lines = [deep_event, b"not json at all",
                 json.dumps({"type": "MODIFIED", "object": changed}).encode(),
                 json.dumps({"type": "ADDED", "object": fig_nrt("c", rv="8")}).encode()]
    core = ExtenderCore(log=io.StringIO())
    log = io.StringIO()
    with api_source_running(core, client, log) as t:
        wait(lambda: "c" in core.nodes)
        assert sorted(core.nodes) == ["a", "b", "c"]
        assert core.nodes["b"].version == 1  # the good MODIFIED after the hostile ones applied
        skipped = [ln for ln in log.getvalue().splitlines() if "skipped a watch event" in ln]
        assert len(skipped) == 2
        assert "nested deeper than 100 levels" in skipped[0]
        assert srv.lists == 1
    assert not t.is_alive()


def test_hostile_list_is_refused_and_the_last_nodes_kept(api: tuple[Any, Any]) -> None:
    srv, client = api
    srv.list_body = _list(fig_nrt("a"))
    core = ExtenderCore(log=io.StringIO())
    source = ApiSource(client, log=io.StringIO())
    objects, rv = source.list_with_version()
    core.set_nodes(objects)
    assert rv == "5"
    srv.list_body = b'{"items": [' + DEEP_JSON.encode() + b"]}"
    with pytest.raises(InputError, match="NodeResourceTopology list: nested deeper") as e:
        source.list_with_version()
    assert "\n" not in str(e.value)
    assert sorted(core.nodes) == ["a"]
