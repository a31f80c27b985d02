"""Issue 12, the extender's control plane: hostile NRT objects and files mark only their own
node unusable and never hold the core's lock; updates cost one node; the filter cache and the
remembered pods are bounded; slow or idle connections cannot keep ``/healthz`` from
answering; other methods get 405 with ``Allow``; metrics carry numalign's prefix."""

from __future__ import annotations

import copy
import http.client
import io
import json
import os
import select
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import REPO
from extender_helpers import count_engine_builds
from numalign.kube.extender import DirSource, ExtenderCore, serve_in_thread
from numalign.kube.extender import core as core_module
from numalign.kube.extender import engines as engines_module
from numalign.kube.extender.core import CACHE_PER_NODE, MAX_REMEMBERED_PODS
from numalign.kube.extender.limits import check_nrt
from numalign.kube.topology import build_nrt
from numalign.machine.spec import read_machine_file
from numalign.node.admission import Node
from numalign.pods import Pod, parse_pods

EXAMPLES = REPO / "examples"


def fig_nrt(name: str) -> dict[str, Any]:
    return build_nrt(Node(read_machine_file(str(EXAMPLES / "fig1.yaml"))), name=name)


def pod(name: str = "p", cpu: str = "2", annotations: dict[str, str] | None = None,
        uid: str | None = None) -> Pod:
    return parse_pods({"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": name, "namespace": "ns", "uid": uid or f"u-{name}",
                                    "annotations": annotations or {}},
                       "spec": {"containers": [{"name": "c", "resources": {
                           "limits": {"cpu": cpu, "memory": "1Gi"}}}]}})[0]


def with_resource(obj: dict[str, Any], zone: int, name: str, **values: Any) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    res = out["zones"][zone]["resources"]
    for r in res:
        if r["name"] == name:
            r.update(values)
            return out
    res.append({"name": name, **values})
    return out


def hostile_objects() -> dict[str, Any]:
    good = fig_nrt("x")
    huge_gpus = with_resource(good, 0, "gpu-vendor.com/gpu", capacity="1e18",
                              allocatable="1e18", available="1e18")
    huge_int = with_resource(good, 0, "gpu-vendor.com/gpu", capacity=10**18,
                             allocatable=10**18, available=10**18)
    huge_exponent = with_resource(good, 0, "memory", capacity="1e999999",
                                  allocatable="1e999999", available="1e999999")
    huge_cpus = with_resource(good, 0, "cpu", capacity="100000000", allocatable="100000000",
                              available="100000000")
    cpulist = copy.deepcopy(good)
    cpulist["attributes"].append({"name": "numalign.io/reservedSystemCPUs", "value": "0-4000000000"})
    deep: Any = "x"
    for _ in range(2000):
        deep = {"a": deep}
    nested = copy.deepcopy(good)
    nested["zones"][0]["attributes"] = [{"name": "deep", "value": deep}]
    mixed = copy.deepcopy(good)
    mixed["zones"][0][1] = "int key"
    many_zones = copy.deepcopy(good)
    many_zones["zones"] = [copy.deepcopy(good["zones"][0]) for _ in range(5000)]
    return {"huge-gpus": huge_gpus, "huge-int": huge_int, "huge-exponent": huge_exponent,
            "huge-cpus": huge_cpus, "cpulist": cpulist, "deep": nested, "mixed-keys": mixed,
            "many-zones": many_zones, "not-a-mapping": ["zones"], "none": None}


@pytest.mark.parametrize("case", sorted(hostile_objects()))
def test_hostile_object_marks_only_its_node(case: str) -> None:
    core = ExtenderCore(log=io.StringIO())
    t0 = time.monotonic()
    core.set_nodes({"good-a": fig_nrt("good-a"), case: hostile_objects()[case],
                    "good-b": fig_nrt("good-b")})
    assert time.monotonic() - t0 < 5
    passed, failed = core.filter(pod(), ["good-a", case, "good-b"])
    assert passed == ["good-a", "good-b"]
    assert failed[case].startswith("unusable NodeResourceTopology")
    assert core.metrics.broken_nodes._value.get() == 1
    # the same object again is not rebuilt; a good one heals the node
    core.update_node(case, fig_nrt(case))
    assert core.filter(pod("q"), [case])[0] == [case]


def test_hostile_files_leave_the_directory_served(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(yaml.safe_dump(fig_nrt("a")))
    (tmp_path / "b.json").write_text(json.dumps(fig_nrt("b")))
    (tmp_path / "mixed.yaml").write_text(
        "apiVersion: topology.node.k8s.io/v1alpha2\nkind: NodeResourceTopology\n"
        "metadata: {name: mixed}\nzones: [{1: one, name: node-0, type: Node}]\n")
    (tmp_path / "flow-deep.yaml").write_text("[" * 2000 + "]" * 2000)
    (tmp_path / "block-deep.yaml").write_text(
        "metadata: {name: blockdeep}\nzones:\n" + "".join(
            "  " * (i + 1) + "- \n" for i in range(2000)))
    (tmp_path / "garbage.json").write_text("{not json")
    (tmp_path / "binary.yaml").write_bytes(b"\xff\xfe\x00")
    (tmp_path / "noname.yaml").write_text("kind: NodeResourceTopology\nzones: []\n")
    core = ExtenderCore(log=io.StringIO())
    src = DirSource(tmp_path, log=io.StringIO())
    src.poll(core)
    assert core.ready.is_set()
    assert sorted(core.nodes) == ["a", "b"]
    assert core.filter(pod(), ["a", "b", "mixed"])[0] == ["a", "b"]
    assert "mixed" in core.broken


def test_engine_build_never_holds_the_lock(monkeypatch: pytest.MonkeyPatch) -> None:
    core = ExtenderCore(log=io.StringIO())
    core.set_nodes({"a": fig_nrt("a")})
    real = engines_module.engine_from_nrt
    started = threading.Event()

    def slow(obj: object) -> Node:
        started.set()
        time.sleep(1.0)
        return real(obj)

    monkeypatch.setattr(engines_module, "engine_from_nrt", slow)
    t = threading.Thread(target=core.update_node, args=("b", fig_nrt("b")))
    t.start()
    assert started.wait(5)
    t0 = time.monotonic()
    assert core.filter(pod(), ["a"])[0] == ["a"]
    assert time.monotonic() - t0 < 0.5  # not behind the 1 s build
    t.join()
    assert sorted(core.nodes) == ["a", "b"]


def test_one_update_rebuilds_one_node(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    builds = count_engine_builds(monkeypatch)
    old = time.time_ns() - 60 * 10**9  # written a minute ago: their keys are not "racy"
    for i in range(50):
        (tmp_path / f"n{i}.yaml").write_text(yaml.safe_dump(fig_nrt(f"n{i}")))
        os.utime(tmp_path / f"n{i}.yaml", ns=(old, old))
    core = ExtenderCore(log=io.StringIO())
    src = DirSource(tmp_path, log=io.StringIO())
    src.poll(core)
    assert len(builds) == 50 and src.files_read == 50
    builds.clear()
    assert src.poll(core) == 0 and builds == [] and src.files_read == 50
    changed = with_resource(fig_nrt("n7"), 0, "cpu", available="2")
    (tmp_path / "n7.yaml").write_text(yaml.safe_dump(changed))
    assert src.poll(core) == 1
    assert builds == ["n7"] and src.files_read == 51
    (tmp_path / "n8.yaml").unlink()
    assert src.poll(core) == 1 and "n8" not in core.nodes and len(core.nodes) == 49
    # set_nodes with the same objects rebuilds nothing
    builds.clear()
    core.set_nodes(src.scan())
    assert builds == []


def test_filter_cache_is_keyed_by_the_engine_shape_and_bounded() -> None:
    core = ExtenderCore(log=io.StringIO())
    core.set_nodes({"a": fig_nrt("a")})
    for i in range(500):
        core.filter(pod(f"p{i}", annotations={"random/annotation": f"v{i}" * 50}), ["a"])
    assert len(core.nodes["a"].cache) == 1
    assert all(not p.annotations for p in core._pods.values())
    for i in range(CACHE_PER_NODE * 3):
        core.filter(pod(f"m{i}", cpu=f"{1 + i % 3}", uid=f"m{i}",
                        annotations={"volcano.sh/numa-topology-policy": "best-effort",
                                     "x": str(i)}) if i % 2 else
                    pod(f"m{i}", cpu=f"{1000 + i}m"), ["a"])
    assert len(core.nodes["a"].cache) <= CACHE_PER_NODE
    # the policy annotation is engine-relevant: kept
    kept = core._pods["m1"]
    assert dict(kept.annotations) == {"volcano.sh/numa-topology-policy": "best-effort"}
    for i in range(MAX_REMEMBERED_PODS + 10):
        core.filter(pod(f"r{i}"), [])
    assert len(core._pods) == MAX_REMEMBERED_PODS


@settings(max_examples=30, deadline=None)
@given(st.dictionaries(st.text(min_size=1, max_size=20), st.text(max_size=30), max_size=5),
       st.sampled_from(["1", "2", "3", "5"]))
def test_unrelated_annotations_never_change_the_decision(ann: dict[str, str], cpu: str) -> None:
    ann = {k: v for k, v in ann.items() if k not in core_module.ENGINE_ANNOTATIONS}
    core = ExtenderCore(log=io.StringIO())
    core.set_nodes({"a": fig_nrt("a")})
    plain = core.filter(pod("p", cpu=cpu, uid="u1"), ["a"])
    fresh = ExtenderCore(log=io.StringIO())
    fresh.set_nodes({"a": fig_nrt("a")})
    assert fresh.filter(pod("p", cpu=cpu, uid="u1", annotations=ann), ["a"]) == plain


# ------------------------------------------------------------------------------ HTTP


def raw_request(port: int, data: bytes, timeout: float = 5.0) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        out = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return out
            out += chunk


def status_of(port: int, method: str, path: str, timeout: float = 5.0) -> tuple[int, dict[str, str]]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(method, path, body=b"{}" if method in ("POST", "PUT", "PATCH") else None)
        r = conn.getresponse()
        r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}
    finally:
        conn.close()


@pytest.fixture
def ready_core() -> ExtenderCore:
    core = ExtenderCore(log=io.StringIO())
    core.set_nodes({"a": fig_nrt("a")})
    return core


def test_405_with_allow(ready_core: ExtenderCore) -> None:
    server = serve_in_thread(ready_core)
    port = server.server_address[1]
    try:
        assert status_of(port, "GET", "/filter")[0] == 405
        assert status_of(port, "GET", "/filter")[1]["allow"] == "POST"
        for method in ("PUT", "DELETE", "PATCH", "OPTIONS"):
            code, headers = status_of(port, method, "/numa/prioritize")
            assert (code, headers["allow"]) == (405, "POST")
            code, headers = status_of(port, method, "/healthz")
            assert (code, headers["allow"]) == (405, "GET, HEAD")
        code, headers = status_of(port, "POST", "/metrics")
        assert (code, headers["allow"]) == (405, "GET, HEAD")
        assert status_of(port, "HEAD", "/healthz")[0] == 200
        assert status_of(port, "PUT", "/nothing")[0] == 404
    finally:
        server.shutdown()
        server.server_close()


def test_slow_headers_are_cut_at_the_deadline(ready_core: ExtenderCore) -> None:
    server = serve_in_thread(ready_core, timeout=5.0, header_timeout=0.5)
    port = server.server_address[1]
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        t0 = time.monotonic()
        s.sendall(b"GET /healthz HTTP/1.1\r\nX-Slow: ")
        closed_after = None
        while time.monotonic() - t0 < 5:
            time.sleep(0.05)  # one byte every 50 ms: each recv is quick, the whole is not
            try:
                s.send(b"a")
            except OSError:
                closed_after = time.monotonic() - t0
                break
            if select.select([s], [], [], 0)[0]:
                try:
                    data = s.recv(1024)
                except OSError:
                    data = b""
                if data == b"":
                    closed_after = time.monotonic() - t0
                    break
        assert closed_after is not None and 0.4 < closed_after < 2.0
        s.close()
    finally:
        server.shutdown()
        server.server_close()


def test_slowloris_and_idle_connections_keep_healthz_answering(ready_core: ExtenderCore) -> None:
    server = serve_in_thread(ready_core, max_connections=16, timeout=30.0, header_timeout=20.0)
    port = server.server_address[1]
    held: list[socket.socket] = []
    try:
        for i in range(300):  # 16 hold the worker slots, the rest wait in the overflow
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            if i % 2:
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: a")  # never finished
            held.append(s)
        time.sleep(0.3)
        for _ in range(5):
            t0 = time.monotonic()
            code, _ = status_of(port, "GET", "/healthz")
            assert code == 200 and time.monotonic() - t0 < 1.0
        assert status_of(port, "GET", "/readyz")[0] == 200
        reply = raw_request(port, b"POST /filter HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}")
        assert reply.startswith(b"HTTP/1.1 503") and b"Retry-After: 1" in reply
        assert ready_core.metrics.overflow.labels("health")._value.get() >= 6
    finally:
        for s in held:
            s.close()
        server.shutdown()
        server.server_close()


def test_health_only_listener(ready_core: ExtenderCore) -> None:
    server = serve_in_thread(ready_core, serve_verbs=False)
    port = server.server_address[1]
    try:
        assert status_of(port, "GET", "/healthz")[0] == 200
        assert status_of(port, "GET", "/metrics")[0] == 200
        assert status_of(port, "POST", "/filter")[0] == 404
    finally:
        server.shutdown()
        server.server_close()


def test_metrics_carry_numalign_prefix_and_process_metrics(ready_core: ExtenderCore) -> None:
    ready_core.filter(pod(), ["a"])
    text = ready_core.metrics.exposition().decode()
    names = {line.split("{")[0].split(" ")[0] for line in text.splitlines()
             if line and not line.startswith("#")}
    ours = {n for n in names if not n.startswith(("process_", "python_"))}
    assert ours and all(n.startswith("numalign_extender_") for n in ours), ours
    assert "process_resident_memory_bytes" in names
    assert not any(n.startswith(("kubelet_", "topology_manager_")) for n in names)
    assert "numalign_extender_topology_manager_admission_requests_total 1.0" in text


def test_check_nrt_accepts_real_objects() -> None:
    check_nrt(fig_nrt("a"))
    foreign = yaml.safe_load((REPO / "tests" / "test_kube_extender.py").read_text()
                             .split('FOREIGN_NRT = """', 1)[1].split('"""', 1)[0]) \
        if 'FOREIGN_NRT = """' in (REPO / "tests" / "test_kube_extender.py").read_text() else None
    if foreign is not None:
        check_nrt(foreign)
