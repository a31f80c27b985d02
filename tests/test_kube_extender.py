"""The extender as a real HTTP server on loopback, driven with kube-scheduler-shaped bodies.

Its answers are checked against the scheduler core run directly on the same machines and
states: the numalign profile's exact filter per node, and ``Scheduler.select``.
"""

from __future__ import annotations

import http.client
import io
import json
import socket
import ssl
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import REPO
from numalign.kube.extender import DirSource, ExtenderCore, ExtenderServer, serve_in_thread
from numalign.kube.topology import build_nrt
from numalign.machine.spec import read_machine_file
from numalign.node.admission import Node
from numalign.pods import Pod, parse_pods
from numalign.scheduler import Cluster, Scheduler, get_profile
from numalign.scheduler.scorers import least_numa_nodes

EXAMPLES = REPO / "examples"

# ------------------------------------------------------------------ kube-scheduler shapes


def kube_pod(name: str, containers: list[dict[str, dict[str, str]]], uid: str | None = None,
             namespace: str = "default") -> dict[str, Any]:
    """A v1.Pod as kube-scheduler serialises it from its informer: no TypeMeta, status set."""
    return {
        "metadata": {
            "name": name, "namespace": namespace, "uid": uid or f"uid-{namespace}-{name}",
            "resourceVersion": "1234", "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {"app": name},
        },
        "spec": {
            "containers": [
                {"name": f"c{i}", "image": "registry.example.com/app:1", "resources": res,
                 "terminationMessagePolicy": "File", "imagePullPolicy": "IfNotPresent"}
                for i, res in enumerate(containers)
            ],
            "restartPolicy": "Always", "schedulerName": "numalign-scheduler",
            "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
            "securityContext": {}, "priority": 0,
        },
        "status": {"phase": "Pending", "qosClass": "Guaranteed"},
    }


def kube_node(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "uid": f"node-{name}", "labels": {"kubernetes.io/hostname": name}},
        "spec": {"podCIDR": "10.0.0.0/24"},
        "status": {"capacity": {"cpu": "64", "memory": "256Gi"},
                   "allocatable": {"cpu": "62", "memory": "250Gi"},
                   "conditions": [{"type": "Ready", "status": "True"}]},
    }


def args(pod: dict[str, Any], names: list[str], cache_capable: bool) -> dict[str, Any]:
    if cache_capable:
        return {"Pod": pod, "Nodes": None, "NodeNames": names}
    return {"Pod": pod, "Nodes": {"metadata": {"resourceVersion": "99"},
                                  "items": [kube_node(n) for n in names]}, "NodeNames": None}


def engine_pod(doc: dict[str, Any]) -> Pod:
    return parse_pods({"apiVersion": "v1", "kind": "Pod", **doc})[0]


def guaranteed(cpu: str, memory: str, **extra: str) -> dict[str, dict[str, str]]:
    limits = {"cpu": cpu, "memory": memory, **extra}
    return {"limits": limits, "requests": dict(limits)}


class Client:
    def __init__(self, server: ExtenderServer) -> None:
        self.port = server.server_address[1]
        self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)

    def post(self, path: str, body: Any) -> tuple[int, Any]:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        try:
            self.conn.request("POST", path, body=data, headers={"Content-Type": "application/json"})
            r = self.conn.getresponse()
        except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
            # the server closes a keep-alive connection left idle longer than its header
            # timeout (2 s in the fixtures): on a loaded machine the test's own work between
            # two requests can take that long. Open a new connection and send again, as an
            # HTTP client does when the server closed an idle connection before answering.
            self.conn.close()
            self.conn.request("POST", path, body=data, headers={"Content-Type": "application/json"})
            r = self.conn.getresponse()
        raw = r.read()
        if r.getheader("Connection") == "close":
            self.conn.close()
        return r.status, json.loads(raw)

    def get(self, path: str) -> tuple[int, str]:
        self.conn.request("GET", path)
        r = self.conn.getresponse()
        return r.status, r.read().decode()


# ---------------------------------------------------------------------------- cluster


def reference_nodes() -> dict[str, Node]:
    """Engines standing for the real nodes (their kubelets), some partly allocated."""
    gpu = read_machine_file(str(EXAMPLES / "gpu-8x-rdma.yaml"))
    ds = read_machine_file(str(EXAMPLES / "dual-socket-ht.yaml"))
    fig = read_machine_file(str(EXAMPLES / "fig1.yaml"))
    nodes = {"gpu-a": Node(gpu), "gpu-b": Node(gpu), "ds-a": Node(ds), "ds-b": Node(ds),
             "fig-a": Node(fig)}
    preload = {
        "gpu-b": [kube_pod("train", [guaranteed("30", "100Gi", **{"nvidia.com/gpu": "2"})]),
                  kube_pod("train2", [guaranteed("16", "64Gi", **{"nvidia.com/gpu": "2"})])],
        "ds-b": [kube_pod("big", [guaranteed("28", "64Gi")]),
                 kube_pod("mid", [guaranteed("20", "32Gi")])],
        "fig-a": [kube_pod("small", [guaranteed("2", "1Gi")])],
    }
    for name, pods in preload.items():
        for p in pods:
            assert nodes[name].admit(engine_pod(p)).admitted, (name, p["metadata"]["name"])
    return nodes


WORKLOAD = [
    kube_pod("web", [{"requests": {"cpu": "500m", "memory": "256Mi"}}]),  # Burstable
    kube_pod("g4", [guaranteed("4", "8Gi")]),
    kube_pod("g30", [guaranteed("30", "64Gi")]),
    kube_pod("g40", [guaranteed("40", "64Gi")]),
    kube_pod("gpu2", [guaranteed("8", "32Gi", **{"nvidia.com/gpu": "2"})]),
    kube_pod("gpu3", [guaranteed("8", "32Gi", **{"nvidia.com/gpu": "3"})]),
    kube_pod("odd", [guaranteed("3", "1Gi")]),  # full-pcpus-only: SMTAlignmentError on ds-*
    kube_pod("two", [guaranteed("2", "1Gi"), guaranteed("2", "1Gi")]),
    kube_pod("fig-gpu", [guaranteed("2", "1Gi", **{"gpu-vendor.com/gpu": "1",
                                                    "nic-vendor.com/nic": "1"})]),
    kube_pod("huge", [guaranteed("4", "4Gi", **{"hugepages-1Gi": "8Gi"})]),
]


def extended_resources(pod: Any) -> set[str]:
    return {r for c in pod.containers for r in c.limits if "/" in r}


def device_resources(node: Node) -> set[str]:
    return {d.resource for d in node.machine.devices}


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[ExtenderServer, dict[str, Node], Path]]:
    nodes = reference_nodes()
    nrt_dir = tmp_path / "nrt"
    nrt_dir.mkdir()
    for name, node in nodes.items():
        (nrt_dir / f"{name}.yaml").write_text(yaml.safe_dump(build_nrt(node, name=name)))
    core = ExtenderCore(log=io.StringIO())
    core.set_nodes(DirSource(nrt_dir, log=io.StringIO()).scan())
    server = serve_in_thread(core, timeout=2.0)
    try:
        yield server, nodes, nrt_dir
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("cache_capable", [True, False], ids=["NodeNames", "Nodes"])
def test_filter_and_prioritize_agree_with_scheduler_core(
    cluster: tuple[ExtenderServer, dict[str, Node], Path], cache_capable: bool
) -> None:
    server, ref, _ = cluster
    client = Client(server)
    names = [*sorted(ref), "not-a-node"]
    exact = get_profile("numalign").filter
    assert exact is not None
    max_numa = max(len(n.machine.numa_nodes) for n in ref.values())
    for doc in WORKLOAD:
        pod = engine_pod(doc)
        expected = {n: exact(node, pod) for n, node in ref.items()}
        status, res = client.post("/numa/filter", args(doc, names, cache_capable))
        assert status == 200
        assert set(res) == {"Nodes", "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes", "Error"}
        assert res["Error"] == ""
        if cache_capable:
            assert res["Nodes"] is None
            passed = res["NodeNames"]
        else:
            assert res["NodeNames"] is None
            passed = [it["metadata"]["name"] for it in res["Nodes"]["items"]]
            # the items come back as sent
            assert all(it == kube_node(it["metadata"]["name"]) for it in res["Nodes"]["items"])
        want = [n for n in sorted(ref) if expected[n].passed]
        assert passed == want, doc["metadata"]["name"]
        assert set(res["FailedNodes"]) == {n for n in names if n not in want}
        assert "NodeResourceTopology" in res["FailedNodes"]["not-a-node"]
        for n in ref:
            if not expected[n].passed:
                assert res["FailedNodes"][n] == expected[n].reason

        # prioritize: LeastNUMANodes of the exact filter's NUMA count, 0..10
        status, scores = client.post("/numa/prioritize", args(doc, names, cache_capable))
        assert status == 200
        assert [s["Host"] for s in scores] == names
        got = {s["Host"]: s["Score"] for s in scores}
        for n in ref:
            want_score = (least_numa_nodes(expected[n].numa_count, max_numa) * 10 // 100
                          if expected[n].passed else 0)
            assert got[n] == want_score
            assert 0 <= got[n] <= 10
        assert got["not-a-node"] == 0

        # Scheduler.select on the same machines and states picks a node the extender passed
        cl = Cluster([(n, ref[n].machine) for n in sorted(ref)])
        for cn in cl.nodes:
            cn.node.state = ref[cn.name].state.copy()
        placement, _, _ = Scheduler(cl, get_profile("numalign")).select(pod)
        # kube-scheduler's NodeResourcesFit runs before the extender: a node without the
        # extended resource at all never reaches /filter (the kubelet itself would admit it)
        fit = [n for n in want if extended_resources(pod) <= device_resources(ref[n])]
        assert (placement is None) == (not fit)
        if placement is not None:
            assert placement.name in fit
            assert got[placement.name] == max(got[n] for n in fit)
        if len(want) == 1:  # the extender assumed it there; so does the reference
            assert ref[want[0]].admit(pod).admitted


def test_bind_assumes_until_the_nrt_shows_the_pod(
    cluster: tuple[ExtenderServer, dict[str, Node], Path]
) -> None:
    server, ref, nrt_dir = cluster
    core = server.core
    client = Client(server)
    names = ["gpu-a"]
    # 4 pods x 2 GPUs fill the 8 GPUs of gpu-a, one NUMA node each
    for i in range(4):
        doc = kube_pod(f"t{i}", [guaranteed("8", "16Gi", **{"nvidia.com/gpu": "2"})])
        status, res = client.post("/filter", args(doc, ["gpu-a", "gpu-b"], True))
        assert "gpu-a" in res["NodeNames"]
        status, res = client.post("/bind", {"PodName": f"t{i}", "PodNamespace": "default",
                                            "PodUID": doc["metadata"]["uid"], "Node": "gpu-a"})
        assert (status, res) == (200, {"Error": ""})
        assert ref["gpu-a"].admit(engine_pod(doc)).admitted
    doc = kube_pod("t4", [guaranteed("8", "16Gi", **{"nvidia.com/gpu": "1"})])
    status, res = client.post("/filter", args(doc, names, True))
    assert res["NodeNames"] == []
    assert "gpu-a" in res["FailedNodes"]
    # unknown node on bind: 404 with a JSON error
    status, res = client.post("/bind", {"PodName": "x", "PodNamespace": "d", "PodUID": "u",
                                        "Node": "nowhere"})
    assert status == 404 and "nowhere" in res["Error"]
    assert sum(len(e.assumed) for e in core.nodes.values()) == 4
    # the exporter republishes gpu-a with the 4 pods: assumptions end, the NRT accounts them
    time.sleep(0.01)
    (nrt_dir / "gpu-a.yaml").write_text(yaml.safe_dump(build_nrt(ref["gpu-a"], name="gpu-a")))
    core.set_nodes(DirSource(nrt_dir, log=io.StringIO()).scan())
    assert sum(len(e.assumed) for e in core.nodes.values()) == 0
    status, res = client.post("/filter", args(doc, names, True))
    assert res["NodeNames"] == []
    # the pods leave: a fresh NRT frees the node
    (nrt_dir / "gpu-a.yaml").write_text(yaml.safe_dump(build_nrt(Node(ref["gpu-a"].machine),
                                                                 name="gpu-a")))
    core.set_nodes(DirSource(nrt_dir, log=io.StringIO()).scan())
    status, res = client.post("/filter", args(doc, names, True))
    assert res["NodeNames"] == ["gpu-a"]


def test_assumption_expires_after_ttl() -> None:
    now = [0.0]
    core = ExtenderCore(assume_ttl=30.0, clock=lambda: now[0], log=io.StringIO())
    fig = read_machine_file(str(EXAMPLES / "fig1.yaml"))
    core.set_nodes({"f": build_nrt(Node(fig), name="f")})
    big = engine_pod(kube_pod("a", [guaranteed("3", "1Gi")]))
    assert core.filter(big, ["f"])[0] == ["f"]  # one node passes: assumed there
    again = engine_pod(kube_pod("b", [guaranteed("3", "1Gi")]))
    assert core.filter(again, ["f"])[0] == ["f"]  # NUMA 0 still has 4 CPUs - no: 3 + ...
    third = engine_pod(kube_pod("c", [guaranteed("3", "1Gi")]))
    assert core.filter(third, ["f"])[0] == []  # 4 + 3 CPUs (7 reserved): no third 3-CPU block
    now[0] = 31.0
    assert core.filter(third, ["f"])[0] == ["f"]  # the others expired


def test_health_ready_metrics_openapi(cluster: tuple[ExtenderServer, dict[str, Node], Path]) -> None:
    server, _, _ = cluster
    client = Client(server)
    assert client.get("/healthz") == (200, "ok")
    assert client.get("/readyz") == (200, "ok")
    client.post("/filter", args(WORKLOAD[1], ["gpu-a", "zz"], True))
    client.post("/prioritize", args(WORKLOAD[1], ["gpu-a"], True))
    status, text = client.get("/metrics")
    assert status == 200
    for name in ("topology_manager_admission_requests_total",
                 "topology_manager_admission_errors_total",
                 "topology_manager_admission_duration_seconds_bucket",
                 'numalign_extender_requests_total{code="200",verb="filter"} 1',
                 'numalign_extender_requests_total{code="200",verb="prioritize"} 1',
                 'numalign_extender_request_duration_seconds_count{verb="filter"} 1',
                 "numalign_extender_nodes 5"):
        assert name in text
    status, body = client.get("/openapi.json")
    doc = json.loads(body)
    assert {"/filter", "/prioritize", "/bind", "/metrics"} <= set(doc["paths"])
    # not ready before the first node sync
    fresh = serve_in_thread(ExtenderCore(log=io.StringIO()))
    try:
        assert Client(fresh).get("/readyz")[0] == 503
    finally:
        fresh.shutdown()
        fresh.server_close()


def raw_exchange(port: int, data: bytes, timeout: float = 5.0) -> tuple[int, dict[str, Any]]:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        buf = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
            head, _, body = buf.partition(b"\r\n\r\n")
            if b"Content-Length:" in head:
                n = int(head.split(b"Content-Length:")[1].split(b"\r\n")[0])
                if len(body) >= n:
                    break
    status = int(buf.split(b" ", 2)[1])
    return status, json.loads(buf.partition(b"\r\n\r\n")[2] or b"null")


def test_safety_answers(cluster: tuple[ExtenderServer, dict[str, Node], Path]) -> None:
    server, _, _ = cluster
    port = server.server_address[1]
    client = Client(server)
    assert client.post("/filter", b"{not json")[0] == 400
    assert client.post("/filter", b"[1, 2]")[0] == 400
    assert client.post("/filter", {"Pod": "x", "NodeNames": []})[0] == 400
    assert client.post("/filter", {"Pod": WORKLOAD[0], "NodeNames": "gpu-a"})[0] == 400
    assert client.post("/filter", {"Pod": WORKLOAD[0]})[0] == 400
    assert client.post("/filter", {"Pod": {"metadata": {}}, "NodeNames": []})[0] == 400
    assert client.post("/bind", {"PodName": 3})[0] == 400
    assert client.post("/preempt", {})[0] == 404
    assert client.post("/filter", b"[" * 100000 + b"]" * 100000)[0] == 400
    # body limit, without reading the body
    status, res = raw_exchange(port, b"POST /filter HTTP/1.1\r\nHost: x\r\nContent-Length: 999999999\r\n\r\n")
    assert status == 413 and "Error" in res
    status, res = raw_exchange(port, b"POST /filter HTTP/1.1\r\nHost: x\r\n\r\n")
    assert status == 411
    status, res = raw_exchange(port, b"POST /filter HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n{}")
    assert status == 408  # the client stopped sending: answered at the socket timeout
    # a silent client does not block others
    idle = socket.create_connection(("127.0.0.1", port))
    try:
        t0 = time.monotonic()
        assert Client(server).post("/filter", args(WORKLOAD[0], ["gpu-a"], True))[0] == 200
        assert time.monotonic() - t0 < 1.0
    finally:
        idle.close()


def test_tls(tmp_path: Path) -> None:
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    try:
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                        "-subj", "/CN=127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                       check=True, capture_output=True, timeout=30)
    except (FileNotFoundError, subprocess.CalledProcessError):
        pytest.skip("openssl is needed to make a test certificate")
    from numalign.kube.extender import tls_context

    core = ExtenderCore(log=io.StringIO())
    core.set_nodes({"f": build_nrt(Node(read_machine_file(str(EXAMPLES / "fig1.yaml"))), name="f")})
    server = serve_in_thread(core, ssl_context=tls_context(str(cert), str(key)), timeout=2.0)
    try:
        assert server.url.startswith("https://")
        ctx = ssl.create_default_context(cafile=str(cert))
        ctx.check_hostname = False
        conn = http.client.HTTPSConnection("127.0.0.1", server.server_address[1], context=ctx,
                                           timeout=10)
        conn.request("POST", "/filter", body=json.dumps(args(WORKLOAD[1], ["f"], True)))
        r = conn.getresponse()
        assert r.status == 200 and json.loads(r.read())["NodeNames"] == ["f"]
        # a plain-HTTP client gets no answer and does not hang the server
        with socket.create_connection(("127.0.0.1", server.server_address[1]), timeout=5) as s:
            s.sendall(b"GET /healthz HTTP/1.1\r\n\r\n")
            assert b"200" not in s.recv(100)
    finally:
        server.shutdown()
        server.server_close()


def test_load_2000_filter_calls_over_100_nodes(tmp_path: Path) -> None:
    ds = read_machine_file(str(EXAMPLES / "dual-socket-ht.yaml"))
    base = Node(ds)
    objs = {}
    for i in range(100):
        node = Node(ds, base.state.copy())
        node.admit(engine_pod(kube_pod(f"pre{i}", [guaranteed(str(2 * (i % 14)), "1Gi")]))) if i % 14 else None
        objs[f"n{i:03d}"] = build_nrt(node, name=f"n{i:03d}")
    core = ExtenderCore(log=io.StringIO())
    core.set_nodes(objs)
    server = serve_in_thread(core)
    names = sorted(objs)
    shapes = [kube_pod(f"p{k}", [guaranteed(str(2 * (k % 8 + 1)), "2Gi")]) for k in range(8)]
    bodies = [json.dumps(args(s, names, True)).encode() for s in shapes]
    try:
        client = Client(server)
        errors = 0
        lat: list[float] = []
        t0 = time.perf_counter()
        for k in range(2000):
            t = time.perf_counter()
            status, res = client.post("/filter", bodies[k % len(bodies)])
            lat.append(time.perf_counter() - t)
            if status != 200 or res["Error"] or len(res["NodeNames"]) + len(res["FailedNodes"]) != 100:
                errors += 1
        elapsed = time.perf_counter() - t0
    finally:
        server.shutdown()
        server.server_close()
    assert errors == 0
    lat.sort()
    print(f"2000 filter calls: {2000 / elapsed:.0f} req/s, p99 {lat[int(0.99 * len(lat))] * 1000:.2f} ms")


def test_connection_limit() -> None:
    core = ExtenderCore(log=io.StringIO())
    core.set_nodes({"f": build_nrt(Node(read_machine_file(str(EXAMPLES / "fig1.yaml"))), name="f")})
    server = serve_in_thread(core, max_connections=2, timeout=5.0)
    port = server.server_address[1]
    try:
        idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(2)]
        time.sleep(0.2)  # both accepted and holding their slots
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        # issue 12: /healthz is answered even then (test_kube_extender_hardening); other paths
        # get the 503
        conn.request("GET", "/openapi.json")
        r = conn.getresponse()
        assert r.status == 503 and json.loads(r.read())["Error"] == "too many connections"
        for s in idle:
            s.close()
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                if Client(server).get("/healthz") == (200, "ok"):
                    break
            except (OSError, http.client.HTTPException):
                pass
            time.sleep(0.05)
        assert Client(server).get("/healthz") == (200, "ok")
    finally:
        server.shutdown()
        server.server_close()


FOREIGN_NRT = """
apiVersion: topology.node.k8s.io/v1alpha2
kind: NodeResourceTopology
metadata:
  name: worker-gpu-01
topologyPolicies: ["SingleNUMANodePodLevel"]
attributes:
  - {name: topologyManagerPolicy, value: single-numa-node}
  - {name: topologyManagerScope, value: pod}
  - {name: topologyManagerMaxNUMANodes, value: "8"}
  - {name: nodeTopologyPodsFingerprint, value: pfp0v0019a8c6e32c1f1d6b}
  - {name: nodeTopologyPodsFingerprintMethod, value: with-exclusive-resources}
zones:
  - name: node-0
    type: Node
    costs: [{name: node-0, value: 10}, {name: node-1, value: 21}]
    resources:
      - {name: cpu, capacity: "32", allocatable: "30", available: "22"}
      - {name: memory, capacity: "134217728Ki", allocatable: "130023424Ki", available: "113246208Ki"}
      - {name: hugepages-1Gi, capacity: "16Gi", allocatable: "16Gi", available: "8Gi"}
      - {name: nvidia.com/gpu, capacity: "1", allocatable: "1", available: "0"}
      - {name: mellanox.com/rdma_vf, capacity: "8", allocatable: "8", available: "7"}
  - name: node-1
    type: Node
    costs: [{name: node-0, value: 21}, {name: node-1, value: 10}]
    resources:
      - {name: cpu, capacity: "32", allocatable: "32", available: "32"}
      - {name: memory, capacity: "134217728Ki", allocatable: "134217728Ki", available: "134217728Ki"}
      - {name: hugepages-1Gi, capacity: "16Gi", allocatable: "16Gi", available: "16Gi"}
      - {name: nvidia.com/gpu, capacity: "1", allocatable: "1", available: "1"}
      - {name: mellanox.com/rdma_vf, capacity: "8", allocatable: "8", available: "8"}
"""


def test_nrt_from_another_producer() -> None:
    """The spec's RTE-style example: no numalign attributes; policies are inferred (static
    CPU manager: node-0 has 2 reserved CPUs) and the published availability is honoured."""
    from numalign.node.usage import numa_amounts

    core = ExtenderCore(log=io.StringIO())
    core.set_nodes({"worker-gpu-01": yaml.safe_load(FOREIGN_NRT)})
    node = core.nodes["worker-gpu-01"].node
    amounts = numa_amounts(node)
    assert (amounts[0].available["cpu"], amounts[1].available["cpu"]) == (22, 32)
    assert amounts[0].available["nvidia.com/gpu"] == 0
    assert amounts[0].available["mellanox.com/rdma_vf"] == 7
    assert node.machine.kubelet.cpu_manager_policy == "static"

    def check(name: str, **limits: str) -> list[str]:
        pod = engine_pod(kube_pod(name, [guaranteed(limits.pop("cpu"), "1Gi", **limits)]))
        return core.filter(pod, ["worker-gpu-01"])[0]

    assert check("a", cpu="30", **{"nvidia.com/gpu": "1"}) == ["worker-gpu-01"]  # node-1
    assert check("b", cpu="33") == []  # no single NUMA node has 33 CPUs
    assert check("c", cpu="2", **{"nvidia.com/gpu": "2"}) == []  # GPUs on two nodes
