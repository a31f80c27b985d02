"""``numalign export --apply`` and the extender's API source, through the official
``kubernetes`` client, against a minimal in-process fake of the Kubernetes API.

The fake implements GET (one, list, an empty watch), POST and PUT of
``/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies[/name]`` with resourceVersion
conflicts, and POST of pod bindings. It proves the client calls, URLs, bodies, auth header
and create-then-update flow; it does not prove server-side validation, admission, RBAC,
structural-schema pruning or a real watch (see docs/kubernetes.md).
"""

from __future__ import annotations

import io
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from conftest import REPO
from numalign.cli import main
from numalign.kube.exporter import Exporter, ExportSources, api_client, apply_nrt, run_loop
from numalign.kube.extender import ApiSource, ExtenderCore, api_binder, run_source
from numalign.machine.spec import read_machine_file
from numalign.node.admission import Node

pytest.importorskip("kubernetes")

EXAMPLES = REPO / "examples"
PREFIX = "/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies"
TOKEN = "test-token-123"


class FakeApi(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.requests: list[tuple[str, str, Any]] = []
        self.bindings: list[dict[str, Any]] = []
        self.fail_writes = False
        #: Node name -> uid served at /api/v1/nodes/<name>; ``None``: 403 (no RBAC for nodes)
        self.nodes: dict[str, str] | None = {}
        self.rv = 0
        self.lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), FakeApiHandler)


class FakeApiHandler(BaseHTTPRequestHandler):
    server: FakeApi
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _reply(self, status: int, doc: Any) -> None:
        data = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _status(self, code: int, reason: str, message: str) -> None:
        self._reply(code, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                           "reason": reason, "message": message, "code": code})

    def _auth(self) -> bool:
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            self._status(401, "Unauthorized", "bad token")
            return False
        return True

    def _body(self) -> Any:
        n = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(n)) if n else None

    def _record(self, body: Any = None) -> None:
        with self.server.lock:
            self.server.requests.append((self.command, self.path, json.loads(json.dumps(body))))

    def do_GET(self) -> None:
        self._record()
        if not self._auth():
            return
        path, _, query = self.path.partition("?")
        if path.startswith("/api/v1/nodes/"):
            name = path.removeprefix("/api/v1/nodes/")
            if self.server.nodes is None:
                self._status(403, "Forbidden", f'nodes "{name}" is forbidden')
            elif name not in self.server.nodes:
                self._status(404, "NotFound", f'nodes "{name}" not found')
            else:
                self._reply(200, {"apiVersion": "v1", "kind": "Node",
                                  "metadata": {"name": name, "uid": self.server.nodes[name]}})
            return
        if path == PREFIX:
            if "watch=true" in query or "watch=1" in query:
                # an empty watch: the stream ends at once, the client re-lists
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            items = list(self.server.objects.values())
            self._reply(200, {"apiVersion": "topology.node.k8s.io/v1alpha2",
                              "kind": "NodeResourceTopologyList",
                              "metadata": {"resourceVersion": str(self.server.rv)}, "items": items})
            return
        if path.startswith(PREFIX + "/"):
            name = path.removeprefix(PREFIX + "/")
            obj = self.server.objects.get(name)
            if obj is None:
                self._status(404, "NotFound", f'noderesourcetopologies "{name}" not found')
            else:
                self._reply(200, obj)
            return
        self._status(404, "NotFound", "no such path")

    def do_POST(self) -> None:
        body = self._body()
        self._record(body)
        if not self._auth():
            return
        path = self.path.partition("?")[0]
        if path.startswith("/api/v1/namespaces/") and path.endswith("/binding"):
            self.server.bindings.append(body)
            self._reply(201, {"kind": "Status", "status": "Success"})
            return
        if path != PREFIX:
            self._status(404, "NotFound", "no such path")
            return
        if self.server.fail_writes:
            self._status(500, "InternalError", "etcd is on fire")
            return
        name = body["metadata"]["name"]
        with self.server.lock:
            if name in self.server.objects:
                self._status(409, "AlreadyExists", "exists")
                return
            self.server.rv += 1
            body["metadata"]["resourceVersion"] = str(self.server.rv)
            self.server.objects[name] = body
        self._reply(201, body)

    def do_PUT(self) -> None:
        body = self._body()
        self._record(body)
        if not self._auth():
            return
        path = self.path.partition("?")[0]
        name = path.removeprefix(PREFIX + "/")
        if self.server.fail_writes:
            self._status(500, "InternalError", "etcd is on fire")
            return
        with self.server.lock:
            cur = self.server.objects.get(name)
            if cur is None:
                self._status(404, "NotFound", "gone")
                return
            if body["metadata"].get("resourceVersion") != cur["metadata"]["resourceVersion"]:
                self._status(409, "Conflict", "the object has been modified")
                return
            self.server.rv += 1
            body["metadata"]["resourceVersion"] = str(self.server.rv)
            self.server.objects[name] = body
        self._reply(200, body)


@pytest.fixture
def api(tmp_path: Path) -> Iterator[tuple[FakeApi, str]]:
    srv = FakeApi()
    threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    kc = tmp_path / "kubeconfig"
    kc.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "fake",
        "clusters": [{"name": "fake", "cluster": {
            "server": f"http://127.0.0.1:{srv.server_address[1]}"}}],
        "users": [{"name": "exporter", "user": {"token": TOKEN}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "exporter"}}],
    }))
    try:
        yield srv, str(kc)
    finally:
        srv.shutdown()
        srv.server_close()


def crd_schema() -> Any:
    crd = yaml.safe_load((REPO / "deploy" / "crd" / "noderesourcetopology-crd.yaml").read_text())
    (v1alpha2,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1alpha2"]
    return v1alpha2["schema"]["openAPIV3Schema"]


def strip(obj: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(json.dumps(obj))
    out["metadata"].pop("resourceVersion", None)
    return out


def test_apply_creates_then_updates(api: tuple[FakeApi, str], tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    srv, kc = api
    spec = str(EXAMPLES / "gpu-8x-rdma.yaml")
    assert main(["export", "--apply", "--kubeconfig", kc, "-m", spec, "--node-name", "w1"]) == 0
    assert "created noderesourcetopology/w1" in capsys.readouterr().err
    stored = srv.objects["w1"]
    jsonschema.validate(stored, crd_schema())
    expected = Exporter(ExportSources(machine=spec, node_name="w1")).collect()
    assert strip(stored) == strip(expected)
    methods = [(m, p.partition("?")[0]) for m, p, _ in srv.requests]
    assert methods == [("GET", "/api/v1/nodes/w1"), ("GET", f"{PREFIX}/w1"), ("POST", PREFIX)]
    # second run: an update carrying the current resourceVersion
    srv.requests.clear()
    assert main(["export", "--apply", "--kubeconfig", kc, "-m", spec, "--node-name", "w1"]) == 0
    assert "updated noderesourcetopology/w1" in capsys.readouterr().err
    assert [m for m, _, _ in srv.requests] == ["GET", "GET", "PUT"]
    assert srv.requests[2][2]["metadata"]["resourceVersion"] == "1"
    assert srv.objects["w1"]["metadata"]["resourceVersion"] == "2"


def test_the_nrt_is_owned_by_its_node(api: tuple[FakeApi, str],
                                      capsys: pytest.CaptureFixture[str]) -> None:
    """The exporter reads the Node's uid and publishes the NRT with an ownerReference to it,
    so the garbage collector deletes the NRT with the node; a node recreated under the same
    name (a new uid) gets the reference renewed on the next update."""
    srv, kc = api
    spec = str(EXAMPLES / "fig1.yaml")
    assert srv.nodes is not None
    srv.nodes["w3"] = "0c6f7a52-0000-4000-8000-000000000001"
    assert main(["export", "--apply", "--kubeconfig", kc, "-m", spec, "--node-name", "w3"]) == 0
    owner = {"apiVersion": "v1", "kind": "Node", "name": "w3",
             "uid": "0c6f7a52-0000-4000-8000-000000000001"}
    assert srv.objects["w3"]["metadata"]["ownerReferences"] == [owner]
    jsonschema.validate(srv.objects["w3"], crd_schema())
    assert "warning" not in capsys.readouterr().err
    srv.nodes["w3"] = "0c6f7a52-0000-4000-8000-000000000002"
    assert main(["export", "--apply", "--kubeconfig", kc, "-m", spec, "--node-name", "w3"]) == 0
    assert srv.objects["w3"]["metadata"]["ownerReferences"] == [
        {**owner, "uid": "0c6f7a52-0000-4000-8000-000000000002"}]


@pytest.mark.parametrize("nodes, why", [(None, "403 Forbidden"), ({}, "404 Not Found")])
def test_without_the_node_the_nrt_goes_unowned_and_says_so(
        api: tuple[FakeApi, str], capsys: pytest.CaptureFixture[str],
        nodes: dict[str, str] | None, why: str) -> None:
    srv, kc = api
    srv.nodes = nodes
    assert main(["export", "--apply", "--kubeconfig", kc, "-m", str(EXAMPLES / "fig1.yaml"),
                 "--node-name", "w4"]) == 0
    assert "ownerReferences" not in srv.objects["w4"]["metadata"]
    err = capsys.readouterr().err
    (warning,) = [line for line in err.splitlines() if "warning" in line]
    assert warning.startswith(f"numalign export: warning: cannot read node/w4 ({why}): the "
                              "NodeResourceTopology is published without an ownerReference")


def test_broken_source_publishes_nothing(api: tuple[FakeApi, str], tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    srv, kc = api
    bad = tmp_path / "kubelet"
    bad.mkdir()
    (bad / "cpu_manager_state").write_text("{truncated")
    rc = main(["export", "--apply", "--kubeconfig", kc, "-m", str(EXAMPLES / "fig1.yaml"),
               "--kubelet-state", str(bad)])
    assert rc == 1
    assert srv.requests == []
    assert "cannot read a source" in capsys.readouterr().err


def test_loop_keeps_last_good_and_survives_api_errors(api: tuple[FakeApi, str],
                                                      tmp_path: Path) -> None:
    srv, kc = api
    spec = str(EXAMPLES / "fig1.yaml")
    m = read_machine_file(spec)
    kdir = tmp_path / "kubelet"
    kdir.mkdir()
    state_file = kdir / "cpu_manager_state"
    state_file.write_text(json.dumps(Node(m).state.cpu.to_dict()))
    client = api_client(kc)
    log = io.StringIO()
    stop = threading.Event()
    exporter = Exporter(ExportSources(machine=spec, kubelet_state=str(kdir), node_name="w2"))
    t = threading.Thread(target=run_loop, args=(exporter, lambda o: apply_nrt(client, o)),
                         kwargs={"interval": 30.0, "poll": 0.02, "stop": stop, "log": log})
    t.start()

    def wait(cond: Any) -> None:
        deadline = time.monotonic() + 10
        while not cond() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert cond()

    try:
        wait(lambda: "w2" in srv.objects)
        good = strip(srv.objects["w2"])
        n_writes = len([r for r in srv.requests if r[0] in ("POST", "PUT")])
        time.sleep(0.03)
        state_file.write_text('{"policyName": "static", "defaultCpuSet": "0-')  # half-written
        wait(lambda: "cannot read a source" in log.getvalue())
        assert len([r for r in srv.requests if r[0] in ("POST", "PUT")]) == n_writes
        assert strip(srv.objects["w2"]) == good
        # the API fails: logged, the loop goes on
        srv.fail_writes = True
        time.sleep(0.03)
        node = Node(m)
        state_file.write_text(json.dumps(node.state.cpu.to_dict()))
        wait(lambda: "publish failed" in log.getvalue())
        srv.fail_writes = False
        time.sleep(0.03)
        state_file.write_text(json.dumps(node.state.cpu.to_dict()))
        wait(lambda: srv.objects["w2"]["metadata"]["resourceVersion"] == "2")
    finally:
        stop.set()
        t.join(10)
    assert not t.is_alive()


def test_extender_lists_nrts_and_binds_through_the_api(api: tuple[FakeApi, str]) -> None:
    srv, kc = api
    fig = read_machine_file(str(EXAMPLES / "fig1.yaml"))
    client = api_client(kc)
    for name in ("a", "b"):
        from numalign.kube.topology import build_nrt

        apply_nrt(client, build_nrt(Node(fig), name=name))
    core = ExtenderCore(log=io.StringIO(), binder=api_binder(client))
    stop = threading.Event()
    t = threading.Thread(target=run_source, args=(core, ApiSource(client), stop, 0.05),
                         kwargs={"log": io.StringIO()})
    t.start()
    try:
        assert core.ready.wait(10)
        assert sorted(core.nodes) == ["a", "b"]
        from numalign.pods import parse_pods

        pod = parse_pods({"apiVersion": "v1", "kind": "Pod",
                          "metadata": {"name": "p", "namespace": "ns", "uid": "u-1"},
                          "spec": {"containers": [{"name": "c", "resources": {
                              "limits": {"cpu": "2", "memory": "1Gi"}}}]}})[0]
        assert core.filter(pod, ["a", "b"])[0] == ["a", "b"]
        assert core.bind("ns", "p", "u-1", "b") == ""
        assert srv.bindings[0]["target"]["name"] == "b"
        assert srv.bindings[0]["metadata"]["name"] == "p"
    finally:
        stop.set()
        t.join(10)
