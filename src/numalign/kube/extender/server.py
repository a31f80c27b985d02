"""The extender's HTTP service: ``POST /filter``, ``/prioritize``, ``/bind``; ``GET /metrics``,
``/healthz``, ``/readyz``, ``/openapi.json``; TLS, connection limits, and ``serve``."""

from __future__ import annotations

import contextlib
import json
import socket
import ssl
import sys
import threading
import time
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from numalign.errors import InputError, NumalignError
from numalign.kube.extender import wire
from numalign.kube.extender.core import ExtenderCore
from numalign.kube.extender.sources import ApiSource, DirSource, run_source
from numalign.kube.extender.wire import BadRequest
from numalign.kube.openapi import openapi_document

DEFAULT_MAX_BODY = 8 * 1024 * 1024
DEFAULT_MAX_CONNECTIONS = 256


class ExtenderServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], core: ExtenderCore, *,
                 max_body: int = DEFAULT_MAX_BODY, timeout: float = 10.0,
                 ssl_context: ssl.SSLContext | None = None,
                 max_connections: int = DEFAULT_MAX_CONNECTIONS) -> None:
        self.core = core
        self.max_body = max_body
        self.socket_timeout = timeout
        self.ssl_context = ssl_context
        self._slots = threading.BoundedSemaphore(max_connections)
        super().__init__(address, ExtenderHandler)

    def process_request(self, request: Any, client_address: Any) -> None:
        # one thread per connection, but never more than max_connections at once
        if not self._slots.acquire(blocking=False):
            with contextlib.suppress(OSError):
                request.settimeout(1.0)
                if not isinstance(request, ssl.SSLSocket):
                    body = b'{"Error":"too many connections"}'
                    request.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: "
                                    b"application/json\r\nConnection: close\r\nContent-Length: "
                                    + str(len(body)).encode() + b"\r\n\r\n" + body)
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def get_request(self) -> tuple[socket.socket, Any]:
        sock, addr = super().get_request()
        if self.ssl_context is not None:
            # the handshake runs in the handler thread, under the socket timeout
            sock = self.ssl_context.wrap_socket(sock, server_side=True,
                                                do_handshake_on_connect=False)
        return sock, addr

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        scheme = "https" if self.ssl_context else "http"
        return f"{scheme}://{host!s}:{port}"


class ExtenderHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in separate writes
    server: ExtenderServer
    server_version = "numalign-extender"

    def setup(self) -> None:
        self.request.settimeout(self.server.socket_timeout)
        super().setup()

    def handle(self) -> None:
        try:
            if isinstance(self.connection, ssl.SSLSocket):
                self.connection.do_handshake()
            super().handle()
        except (TimeoutError, ConnectionError, ssl.SSLError, OSError):
            self.close_connection = True

    def log_message(self, format: str, *args: Any) -> None:
        return

    # --------------------------------------------------------------- responses

    def _send(self, status: int, body: bytes, ctype: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, status: int, doc: Any) -> None:
        self._send(status, json.dumps(doc, separators=(",", ":")).encode())

    def _verb(self) -> str:
        path = self.path.split("?", 1)[0].rstrip("/")
        return path.rsplit("/", 1)[-1] if path else ""

    # ------------------------------------------------------------------- GET

    def do_GET(self) -> None:
        verb = self._verb()
        core = self.server.core
        if verb == "metrics":
            text = core.metrics.registry.exposition().encode()
            self._send(200, text, "text/plain; version=0.0.4; charset=utf-8")
        elif verb == "healthz":
            self._send(200, b"ok", "text/plain")
        elif verb == "readyz":
            if core.ready.is_set():
                self._send(200, b"ok", "text/plain")
            else:
                self._send(503, b"nodes not loaded yet", "text/plain")
        elif verb == "openapi.json":
            self._json(200, openapi_document())
        else:
            self._json(404, wire.error_result(f"no such resource {self.path!r}"))

    # ------------------------------------------------------------------ POST

    def _body(self) -> Any:
        if self.headers.get("Transfer-Encoding"):
            self.close_connection = True
            raise BadRequest(411, "chunked bodies are not accepted; send Content-Length")
        raw_len = self.headers.get("Content-Length")
        if raw_len is None:
            self.close_connection = True
            raise BadRequest(411, "Content-Length required")
        try:
            length = int(raw_len)
        except ValueError:
            self.close_connection = True
            raise BadRequest(400, "bad Content-Length") from None
        if length < 0:
            self.close_connection = True
            raise BadRequest(400, "bad Content-Length")
        if length > self.server.max_body:
            self.close_connection = True
            raise BadRequest(413, f"body larger than {self.server.max_body} bytes")
        try:
            data = self.rfile.read(length)
        except (TimeoutError, OSError):
            self.close_connection = True
            raise BadRequest(408, "timed out reading the body") from None
        if len(data) != length:
            self.close_connection = True
            raise BadRequest(400, "truncated body")
        try:
            return json.loads(data)
        except (ValueError, RecursionError) as e:
            raise BadRequest(400, f"malformed JSON: {str(e)[:200]}") from None

    def do_POST(self) -> None:
        verb = self._verb()
        core = self.server.core
        t0 = time.perf_counter()
        status = 500
        doc: Any
        try:
            if verb not in ("filter", "prioritize", "bind"):
                # drain what we can, then answer
                self.close_connection = True
                raise BadRequest(404, f"no such verb {verb!r}")
            args = self._body()
            if not isinstance(args, dict):
                raise BadRequest(400, "expected a JSON object")
            if verb == "filter":
                status, doc = 200, self._filter(args)
            elif verb == "prioritize":
                status, doc = 200, self._prioritize(args)
            else:
                status, doc = self._bind(args)
        except BadRequest as e:
            status, doc = e.status, wire.error_result(e.message)
        except NumalignError as e:
            status, doc = 400, wire.error_result(e.message)
        except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as e:
            status, doc = 400, wire.error_result(f"invalid request: {type(e).__name__}: {e}"[:500])
        except Exception as e:  # a bug: answer, never hang
            status, doc = 500, wire.error_result(f"internal error: {type(e).__name__}")
            print(f"numalign extender: internal error on {verb}: {e!r}", file=sys.stderr)
        self._json(status, doc)
        label = verb if verb in ("filter", "prioritize", "bind") else "other"
        core.metrics.requests.inc(verb=label, code=str(status))
        core.metrics.request_duration.observe(time.perf_counter() - t0, verb=label)

    def _filter(self, args: Mapping[str, Any]) -> dict[str, Any]:
        names, items = wire.node_args(args)
        pod = wire.pod_of(args)
        passed, failed = self.server.core.filter(pod, names)
        return wire.filter_result(args, names, items, passed, failed)

    def _prioritize(self, args: Mapping[str, Any]) -> list[dict[str, Any]]:
        names, _ = wire.node_args(args)
        pod = wire.pod_of(args)
        return wire.host_priority_list(self.server.core.prioritize(pod, names))

    def _bind(self, args: Mapping[str, Any]) -> tuple[int, dict[str, Any]]:
        b = wire.binding_args(args)
        try:
            err = self.server.core.bind(b.namespace, b.name, b.uid, b.node)
        except LookupError as e:
            return 404, wire.error_result(f"node {b.node}: {e.args[0]}")
        return 200, wire.error_result(err)


# ---------------------------------------------------------------------------- serve


def tls_context(cert: str, key: str) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as e:
        raise InputError(f"cannot load TLS certificate/key: {e}", "--tls-cert") from None
    return ctx


def api_binder(api: Any) -> Callable[[str, str, str, str], None]:
    """Bind through the API (a v1 Binding, as kube-scheduler's default binder does)."""
    from numalign.kube.exporter import k8s

    client = k8s("client")
    core = client.CoreV1Api(api)

    def bind(namespace: str, name: str, uid: str, node: str) -> None:
        body = client.V1Binding(
            metadata=client.V1ObjectMeta(name=name, namespace=namespace, uid=uid),
            target=client.V1ObjectReference(api_version="v1", kind="Node", name=node),
        )
        core.create_namespaced_pod_binding(name, namespace, body, _preload_content=False)

    return bind


def serve(
    *,
    host: str = "127.0.0.1",
    port: int = 8888,
    nrt_dir: str | None = None,
    kubeconfig: str | None = None,
    in_cluster: bool = False,
    tls_cert: str | None = None,
    tls_key: str | None = None,
    max_body: int = DEFAULT_MAX_BODY,
    timeout: float = 10.0,
    resync: float = 1.0,
    assume_ttl: float = 120.0,
) -> int:
    """``numalign extender serve``: run until interrupted."""
    if (tls_cert is None) != (tls_key is None):
        raise InputError("give both --tls-cert and --tls-key")
    ctx = tls_context(tls_cert, tls_key) if tls_cert and tls_key else None
    source: DirSource | ApiSource
    binder = None
    if nrt_dir:
        source = DirSource(nrt_dir)
    elif kubeconfig or in_cluster:
        from numalign.kube.exporter import api_client

        api = api_client(kubeconfig)
        source = ApiSource(api)
        binder = api_binder(api)
    else:
        raise InputError("give --nrt-dir DIR or --kubeconfig FILE (or --in-cluster)")
    core = ExtenderCore(assume_ttl=assume_ttl, binder=binder)
    server = ExtenderServer((host, port), core, max_body=max_body, timeout=timeout,
                            ssl_context=ctx)
    stop = threading.Event()
    t = threading.Thread(target=run_source, args=(core, source, stop, resync), daemon=True)
    t.start()
    print(f"numalign extender: serving on {server.url}", file=sys.stderr)
    try:
        server.serve_forever()
    finally:
        stop.set()
        with contextlib.suppress(Exception):
            server.server_close()
    return 0


def serve_in_thread(core: ExtenderCore, host: str = "127.0.0.1", port: int = 0,
                    **kw: Any) -> ExtenderServer:
    """Start an extender server on a daemon thread (tests, benchmarks, embedding);
    stop it with ``server.shutdown(); server.server_close()``."""
    server = ExtenderServer((host, port), core, **kw)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                     daemon=True).start()
    return server
