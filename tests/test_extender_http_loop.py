"""Issue 12, the extender's event-loop HTTP server (``kube/extender/http_loop.py``): pipelined
requests answered in order, requests split across packets at any byte, many keep-alive
connections at once, clients that vanish mid-request, header bounds, idle and write
deadlines, ``Expect: 100-continue``, TLS keep-alive and stalled handshakes."""

from __future__ import annotations

import http.client
import io
import itertools
import json
import select
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import REPO
from numalign.kube.extender import ExtenderCore, ExtenderServer, serve_in_thread
from numalign.kube.extender.http_loop import MAX_HEADER_LINE, MAX_HEADERS
from numalign.kube.topology import build_nrt
from numalign.machine.spec import read_machine_file
from numalign.node.admission import Node

EXAMPLES = REPO / "examples"


def kube_pod(name: str, cpu: str = "2") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "uid": f"u-{name}"},
            "spec": {"containers": [{"name": "c", "resources": {
                "limits": {"cpu": cpu, "memory": "1Gi"}, "requests": {"cpu": cpu, "memory": "1Gi"}}}]}}


def filter_body(name: str = "p", cpu: str = "2", nodes: tuple[str, ...] = ("a", "b")) -> bytes:
    return json.dumps({"Pod": kube_pod(name, cpu), "NodeNames": list(nodes)}).encode()


def post(path: str, body: bytes, extra: bytes = b"") -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n".encode()
            + extra + b"\r\n" + body)


def get(path: str, extra: bytes = b"") -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: x\r\n".encode() + extra + b"\r\n"


def read_response(sock: socket.socket, buf: bytearray) -> tuple[int, dict[str, str], bytes]:
    """One Content-Length framed answer from ``sock`` (bytes after it stay in ``buf``)."""
    while True:
        end = buf.find(b"\r\n\r\n")
        if end >= 0:
            lines = bytes(buf[:end]).decode("latin-1").split("\r\n")
            headers = {k.strip().lower(): v.strip()
                       for k, _, v in (line.partition(":") for line in lines[1:])}
            n = int(headers.get("content-length", "0"))
            if len(buf) >= end + 4 + n:
                body = bytes(buf[end + 4:end + 4 + n])
                del buf[:end + 4 + n]
                return int(lines[0].split()[1]), headers, body
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError(f"closed with {bytes(buf[:200])!r} unread")
        buf.extend(chunk)


def closed_by_server(sock: socket.socket, within: float) -> bool:
    """True if the server closes ``sock`` within ``within`` seconds (what it sends first is
    skipped)."""
    end = time.monotonic() + within
    while time.monotonic() < end:
        if select.select([sock], [], [], max(0.0, end - time.monotonic()))[0]:
            try:
                if sock.recv(65536) == b"":
                    return True
            except ConnectionError:
                return True
    return False


@pytest.fixture(scope="module")
def core() -> ExtenderCore:
    c = ExtenderCore(log=io.StringIO())
    fig = read_machine_file(str(EXAMPLES / "fig1.yaml"))
    c.set_nodes({"a": build_nrt(Node(fig), name="a"), "b": build_nrt(Node(fig), name="b")})
    return c


@pytest.fixture
def server(core: ExtenderCore) -> Iterator[ExtenderServer]:
    srv = serve_in_thread(core, timeout=5.0)
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()


def connect(server: ExtenderServer, timeout: float = 5.0) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", server.server_address[1]), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def wait_for(cond: Any, within: float = 5.0) -> bool:
    end = time.monotonic() + within
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.02)
    return bool(cond())


# ------------------------------------------------------------------------- framing


def test_pipelined_requests_are_answered_in_order(server: ExtenderServer) -> None:
    stream = (get("/healthz") + post("/filter", filter_body("p1", "2"))
              + post("/filter", filter_body("p2", "999")) + get("/nothing")
              + post("/prioritize", filter_body("p3")) + get("/readyz"))
    with connect(server) as s:
        s.sendall(stream)
        buf = bytearray()
        answers = [read_response(s, buf) for _ in range(6)]
        # still open for more after the pipeline
        s.sendall(get("/healthz"))
        assert read_response(s, buf)[0] == 200
    assert [a[0] for a in answers] == [200, 200, 200, 404, 200, 200]
    assert answers[0][2] == b"ok" and answers[5][2] == b"ok"
    assert json.loads(answers[1][2])["NodeNames"] == ["a", "b"]
    assert json.loads(answers[2][2])["NodeNames"] == []  # 999 CPUs fit nowhere
    assert {h["Host"] for h in json.loads(answers[4][2])} == {"a", "b"}
    assert all("connection" not in a[1] for a in answers)


def test_a_long_pipeline_is_answered_completely(server: ExtenderServer) -> None:
    n = 200  # more than one batch per turn of the loop
    with connect(server) as s:
        s.sendall(b"".join(post("/filter", filter_body(f"q{k}", str(1 + k % 4)))
                           for k in range(n)))
        buf = bytearray()
        answers = [read_response(s, buf) for _ in range(n)]
    assert all(a[0] == 200 for a in answers)
    assert [json.loads(a[2])["NodeNames"] for a in answers] == [["a", "b"]] * n


SPLIT_STREAM = (post("/filter", filter_body("split", "2")) + get("/healthz")
                + post("/prioritize", filter_body("split2")))


@settings(max_examples=25, deadline=None)
@given(cuts=st.lists(st.integers(1, len(SPLIT_STREAM) - 1), max_size=6, unique=True))
def test_requests_split_across_packets_at_any_byte(core: ExtenderCore, cuts: list[int]) -> None:
    server = serve_in_thread(core, timeout=5.0)
    try:
        with connect(server) as s:
            edges = [0, *sorted(cuts), len(SPLIT_STREAM)]
            for a, b in itertools.pairwise(edges):
                s.sendall(SPLIT_STREAM[a:b])
                time.sleep(0.003)  # separate segments, separate reads on the server
            buf = bytearray()
            answers = [read_response(s, buf) for _ in range(3)]
    finally:
        server.shutdown()
        server.server_close()
    assert [a[0] for a in answers] == [200, 200, 200]
    assert json.loads(answers[0][2])["NodeNames"] == ["a", "b"]
    assert answers[1][2] == b"ok"
    assert len(json.loads(answers[2][2])) == 2


def test_bare_newlines_and_leading_empty_lines(server: ExtenderServer) -> None:
    with connect(server) as s:
        s.sendall(b"\r\n\r\nGET /healthz HTTP/1.1\nHost: x\n\n")
        buf = bytearray()
        assert read_response(s, buf)[:3:2] == (200, b"ok")


def test_head_has_no_body_and_keeps_the_connection(server: ExtenderServer) -> None:
    with connect(server) as s:
        s.sendall(b"HEAD /healthz HTTP/1.1\r\nHost: x\r\n\r\n" + get("/readyz"))
        data = b""
        while data.count(b"\r\n\r\n") < 2 or not data.endswith(b"ok"):
            chunk = s.recv(65536)
            assert chunk
            data += chunk
    first, _, rest = data.partition(b"\r\n\r\n")
    assert first.startswith(b"HTTP/1.1 200") and b"Content-Length: 2" in first
    assert rest.startswith(b"HTTP/1.1 200")  # the HEAD answer carried no body


def test_expect_100_continue(server: ExtenderServer) -> None:
    body = filter_body("cont")
    with connect(server) as s:
        s.sendall(post("/filter", b"", b"Expect: 100-continue\r\n").replace(
            b"Content-Length: 0", f"Content-Length: {len(body)}".encode()))
        interim = s.recv(65536)
        assert interim == b"HTTP/1.1 100 Continue\r\n\r\n"
        s.sendall(body)
        status, _, out = read_response(s, bytearray())
    assert status == 200 and json.loads(out)["NodeNames"] == ["a", "b"]


def test_http10_closes_unless_keep_alive(server: ExtenderServer) -> None:
    with connect(server) as s:
        s.sendall(b"GET /healthz HTTP/1.0\r\n\r\n")
        status, headers, _ = read_response(s, bytearray())
        assert status == 200 and headers["connection"] == "close"
        assert closed_by_server(s, 2.0)
    with connect(server) as s:
        buf = bytearray()
        for _ in range(2):
            s.sendall(b"GET /healthz HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
            status, headers, _ = read_response(s, buf)
            assert status == 200 and headers["connection"] == "keep-alive"


# -------------------------------------------------------------------------- bounds


@pytest.mark.parametrize(("data", "status"), [
    (b"GET /healthz HTTP/1.1\r\n" + b"X-H: v\r\n" * (MAX_HEADERS + 1) + b"\r\n", 431),
    (b"GET /healthz HTTP/1.1\r\nX-Long: " + b"a" * MAX_HEADER_LINE + b"\r\n\r\n", 431),
    (b"GET /" + b"a" * MAX_HEADER_LINE + b" HTTP/1.1\r\n\r\n", 414),
    (b"POST /filter HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n{}", 400),
    (b"POST /filter HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400),
    (b"POST /filter HTTP/1.1\r\nContent-Length: 1_0\r\n\r\n", 400),
    (b"POST /filter HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 411),
    (b"GET /healthz HTTP/2.0\r\n\r\n", 505),
    (b"GET /healthz HTTP/x\r\n\r\n", 400),
    (b"GET /healthz\r\n\r\n", 400),
    (b"GET /healthz HTTP/1.1\r\nno colon here\r\n\r\n", 400),
    (b"BREW /healthz HTTP/1.1\r\n\r\n", 501),
])
def test_bad_requests_are_refused_and_closed(server: ExtenderServer, data: bytes,
                                             status: int) -> None:
    with connect(server) as s:
        s.sendall(data)
        got, headers, body = read_response(s, bytearray())
        assert got == status
        assert headers["connection"] == "close" and "Error" in json.loads(body)
        assert closed_by_server(s, 2.0)


def test_exactly_the_limits_are_accepted(server: ExtenderServer) -> None:
    with connect(server) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\n" + b"X-H: v\r\n" * MAX_HEADERS + b"\r\n")
        assert read_response(s, bytearray())[0] == 200
    with connect(server) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\nX-Long: " + b"a" * (MAX_HEADER_LINE - 10) + b"\r\n\r\n")
        assert read_response(s, bytearray())[0] == 200


def test_an_endless_header_line_is_cut_at_the_bound_not_the_deadline(core: ExtenderCore) -> None:
    server = serve_in_thread(core, timeout=30.0)  # the deadline is far away
    try:
        with connect(server, timeout=10) as s:
            t0 = time.monotonic()
            s.sendall(b"GET /healthz HTTP/1.1\r\nX-Endless: " + b"a" * (MAX_HEADER_LINE + 100))
            status, headers, _ = read_response(s, bytearray())
            assert (status, headers["connection"]) == (431, "close")
            assert time.monotonic() - t0 < 5 and closed_by_server(s, 2.0)
        with connect(server, timeout=10) as s:  # the same for a request line
            s.sendall(b"GET /" + b"a" * (MAX_HEADER_LINE + 100))
            assert read_response(s, bytearray())[0] == 414
    finally:
        server.shutdown()
        server.server_close()


# ------------------------------------------------------------ connections, deadlines


def test_many_keep_alive_connections_at_once(server: ExtenderServer) -> None:
    socks = [connect(server) for _ in range(200)]
    bufs = [bytearray() for _ in socks]
    try:
        for rnd in range(3):  # every connection has a request in flight at the same time
            for k, s in enumerate(socks):
                s.sendall(post("/filter", filter_body(f"c{k}", str(1 + (k + rnd) % 4))))
            for s, buf in zip(socks, bufs, strict=True):
                status, headers, body = read_response(s, buf)
                assert status == 200 and "connection" not in headers
                assert json.loads(body)["NodeNames"] == ["a", "b"]
        assert server.connections == (200, 0)
    finally:
        for s in socks:
            s.close()
    assert wait_for(lambda: server.connections == (0, 0))


def test_clients_that_vanish_mid_request(server: ExtenderServer) -> None:
    body = filter_body("gone")
    cuts = [b"GET /heal", b"GET /healthz HTTP/1.1\r\nHost:", post("/filter", body)[:-5],
            post("/filter", body) + post("/filter", body)[:40]]
    for data in cuts:
        s = connect(server)
        s.sendall(data)
        if data.count(b"POST") == 2:
            assert read_response(s, bytearray())[0] == 200
        s.close()
    # a reset mid-request too
    s = connect(server)
    s.sendall(post("/filter", body)[:60])
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    s.close()
    assert wait_for(lambda: server.connections == (0, 0))
    with connect(server) as s:
        s.sendall(post("/filter", body))
        assert read_response(s, bytearray())[0] == 200


def test_idle_keep_alive_connection_is_closed_after_the_header_timeout(
        core: ExtenderCore) -> None:
    server = serve_in_thread(core, timeout=5.0, header_timeout=0.4)
    try:
        with connect(server) as s:
            s.sendall(get("/healthz"))
            assert read_response(s, bytearray())[0] == 200
            t0 = time.monotonic()
            assert closed_by_server(s, 3.0)
            assert 0.3 < time.monotonic() - t0 < 2.0
        assert wait_for(lambda: server.connections == (0, 0))
    finally:
        server.shutdown()
        server.server_close()


def test_a_client_that_never_reads_does_not_block_others(core: ExtenderCore) -> None:
    server = serve_in_thread(core, timeout=1.0)
    try:
        hog = connect(server)
        hog.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        # thousands of pipelined answers it never reads: the server's writes block
        hog.sendall(get("/openapi.json") * 2000)
        time.sleep(0.2)
        for k in range(20):
            t0 = time.monotonic()
            with connect(server) as s:
                s.sendall(post("/filter", filter_body(f"o{k}")))
                assert read_response(s, bytearray())[0] == 200
            assert time.monotonic() - t0 < 1.0
        # the stalled answer is dropped at the write deadline
        assert wait_for(lambda: server.connections == (0, 0), within=5.0)
        hog.close()
    finally:
        server.shutdown()
        server.server_close()


def test_overflow_connections_answer_health_and_close(core: ExtenderCore) -> None:
    server = serve_in_thread(core, max_connections=3, timeout=5.0)
    held = [connect(server) for _ in range(3)]
    try:
        assert wait_for(lambda: server.connections == (3, 0))
        extra = [connect(server) for _ in range(5)]
        assert wait_for(lambda: server.connections == (3, 5))
        for k, s in enumerate(extra):
            s.sendall(get("/healthz") if k % 2 else post("/filter", b"{}"))
            status, headers, _ = read_response(s, bytearray())
            assert status == (200 if k % 2 else 503) and headers["connection"] == "close"
            s.close()
        # the held slots still work, with keep-alive
        buf = bytearray()
        for _ in range(3):
            held[0].sendall(get("/readyz"))
            assert read_response(held[0], buf)[0] == 200
    finally:
        for s in held:
            s.close()
        server.shutdown()
        server.server_close()


def test_shutdown_and_close_release_everything(core: ExtenderCore) -> None:
    server = serve_in_thread(core)
    socks = [connect(server) for _ in range(5)]
    assert wait_for(lambda: server.connections == (5, 0))
    server.shutdown()
    server.server_close()
    for s in socks:
        assert closed_by_server(s, 2.0)
        s.close()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", server.server_address[1]), timeout=1).close()


def test_concurrent_http_client_threads(server: ExtenderServer) -> None:
    errors: list[str] = []

    def worker(k: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=10)
        try:
            for i in range(30):
                conn.request("POST", "/numa/filter", body=filter_body(f"t{k}-{i}"))
                r = conn.getresponse()
                if r.status != 200 or json.loads(r.read())["NodeNames"] != ["a", "b"]:
                    errors.append(f"{k}/{i}: {r.status}")
        except Exception as e:
            errors.append(repr(e))
        finally:
            conn.close()

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []


# --------------------------------------------------------------------------- TLS


@pytest.fixture(scope="module")
def cert(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("tls")
    crt, key = d / "tls.crt", d / "tls.key"
    try:
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                        "-subj", "/CN=127.0.0.1", "-keyout", str(key), "-out", str(crt)],
                       check=True, capture_output=True, timeout=30)
    except (FileNotFoundError, subprocess.CalledProcessError):
        pytest.skip("openssl is needed to make a test certificate")
    return crt, key


def test_tls_keep_alive_pipelining_and_a_stalled_handshake(core: ExtenderCore,
                                                           cert: tuple[Path, Path]) -> None:
    from numalign.kube.extender import tls_context

    server = serve_in_thread(core, ssl_context=tls_context(str(cert[0]), str(cert[1])),
                             timeout=5.0, header_timeout=1.0)
    ctx = ssl.create_default_context(cafile=str(cert[0]))
    ctx.check_hostname = False
    try:
        stalled = connect(server)  # TCP only, never says hello
        stalled.sendall(b"\x16\x03\x01")  # and a partial record
        t0 = time.monotonic()
        with connect(server) as raw, ctx.wrap_socket(raw) as s:
            buf = bytearray()
            s.sendall(post("/filter", filter_body("tls1")) + get("/healthz"))
            assert read_response(s, buf)[0] == 200
            assert read_response(s, buf)[2] == b"ok"
            big = filter_body("tls2", nodes=tuple(["a", "b"] * 5000))
            s.sendall(post("/filter", big))
            status, _, body = read_response(s, buf)
            assert status == 200 and len(json.loads(body)["NodeNames"]) == 10000
        assert time.monotonic() - t0 < 1.0  # the stalled handshake did not hold us
        assert closed_by_server(stalled, 3.0)  # cut at the header deadline
        stalled.close()
    finally:
        server.shutdown()
        server.server_close()


# ------------------------------------------------------------------- deferred /bind


def test_a_slow_api_binding_does_not_stall_the_loop() -> None:
    bound: list[tuple[str, str, str, str]] = []
    release = threading.Event()

    def binder(namespace: str, name: str, uid: str, node: str) -> None:
        release.wait(5)  # the API server takes its time
        bound.append((namespace, name, uid, node))

    c = ExtenderCore(log=io.StringIO(), binder=binder)
    fig = read_machine_file(str(EXAMPLES / "fig1.yaml"))
    c.set_nodes({"a": build_nrt(Node(fig), name="a"), "b": build_nrt(Node(fig), name="b")})
    server = serve_in_thread(c, timeout=5.0)
    try:
        with connect(server) as s, connect(server) as other:
            buf = bytearray()
            s.sendall(post("/filter", filter_body("tobind")))
            assert read_response(s, buf)[0] == 200
            bind = json.dumps({"PodName": "tobind", "PodNamespace": "ns", "PodUID": "u-tobind",
                               "Node": "a"}).encode()
            s.sendall(post("/bind", bind) + get("/healthz"))  # pipelined behind the bind
            time.sleep(0.1)
            obuf = bytearray()
            t0 = time.monotonic()
            for k in range(10):  # others are served while the binding waits
                other.sendall(post("/filter", filter_body(f"meanwhile{k}")))
                assert read_response(other, obuf)[0] == 200
            assert time.monotonic() - t0 < 2.0 and not bound
            assert not select.select([s], [], [], 0.1)[0]  # nothing answered on s yet
            release.set()
            status, _, body = read_response(s, buf)
            assert (status, json.loads(body)) == (200, {"Error": ""})
            assert read_response(s, buf)[2] == b"ok"  # then the pipelined request, in order
        assert bound == [("ns", "tobind", "u-tobind", "a")]
    finally:
        release.set()
        server.shutdown()
        server.server_close()
