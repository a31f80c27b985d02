"""The extender's HTTP service: ``POST /filter``, ``/prioritize``, ``/bind``; ``GET /metrics``,
``/healthz``, ``/readyz``, ``/openapi.json``; TLS, connection limits, and ``serve``."""

from __future__ import annotations

import contextlib
import email.utils
import errno
import io
import ipaddress
import json
import os
import selectors
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
from numalign.kube.extender.builder import ProcessBuilder
from numalign.kube.extender.core import ExtenderCore
from numalign.kube.extender.podcache import PodCache
from numalign.kube.extender.sources import ApiSource, DirSource, run_source
from numalign.kube.extender.wire import BadRequest
from numalign.kube.metrics import CONTENT_TYPE
from numalign.kube.openapi import openapi_document
from numalign.scheduler import get_profile
from numalign.yamlfiles import loads_json

DEFAULT_MAX_BODY = 8 * 1024 * 1024
DEFAULT_MAX_CONNECTIONS = 256
#: connections the overflow responder holds at once (each for at most OVERFLOW_DEADLINE)
MAX_OVERFLOW_CONNECTIONS = 4096
OVERFLOW_DEADLINE = 2.0
#: what each path answers to (``Allow`` of a 405)
POST_VERBS = ("filter", "prioritize", "bind")
GET_PATHS = ("metrics", "healthz", "readyz", "openapi.json")
HEALTH_PATHS = ("healthz", "readyz", "metrics")
#: request header lines: the longest one and the most of them (as ``http.client``)
MAX_HEADER_LINE = 65536
MAX_HEADERS = 100
_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
            408: "Request Timeout", 411: "Length Required", 413: "Content Too Large",
            500: "Internal Server Error", 503: "Service Unavailable"}
_date_cache: tuple[int, str] = (0, "")


def _http_date() -> str:
    """The ``Date`` header, formatted once per second."""
    global _date_cache
    now = int(time.time())
    if _date_cache[0] != now:
        _date_cache = (now, email.utils.formatdate(now, usegmt=True))
    return _date_cache[1]


class _DeadlineIO(io.RawIOBase):
    """A socket's reading side under a deadline for the whole request (headers, then body),
    not only per ``recv``: a client dribbling one byte a second cannot hold a worker."""

    def __init__(self, sock: socket.socket, per_read: float) -> None:
        super().__init__()
        self.sock = sock
        self.per_read = per_read
        self.deadline: float | None = None

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        timeout = self.per_read
        if self.deadline is not None:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("request deadline passed")
            timeout = min(timeout, left)
        self.sock.settimeout(timeout)
        return self.sock.recv_into(b)


class _Overflow:
    """Answers connections that find every worker slot busy, on one thread with a selector:
    ``GET /healthz`` (and ``/readyz``, ``/metrics``) as usual, everything else ``503`` with
    ``Retry-After``. Each connection gets :data:`OVERFLOW_DEADLINE` seconds to send its
    request line and headers; at most :data:`MAX_OVERFLOW_CONNECTIONS` are held."""

    def __init__(self, server: ExtenderServer) -> None:
        self.server = server
        self.sel = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self.sel.register(self._wake_r, selectors.EVENT_READ, None)
        self._pending: list[socket.socket] = []
        self._lock = threading.Lock()
        self._conns: dict[socket.socket, tuple[float, bytearray]] = {}
        self._closed = False
        self.thread = threading.Thread(target=self._run, name="numalign-overflow", daemon=True)
        self.thread.start()

    def offer(self, sock: socket.socket) -> None:
        with self._lock:
            if self._closed or len(self._conns) + len(self._pending) >= MAX_OVERFLOW_CONNECTIONS:
                self.server.core.metrics.overflow.labels("dropped").inc()
                with contextlib.suppress(OSError):
                    sock.close()
                return
            self._pending.append(sock)
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")

    def close(self) -> None:
        with self._lock:
            self._closed = True
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")
        self.thread.join(5)
        if not self.thread.is_alive():
            self.sel.close()
            self._wake_r.close()
            self._wake_w.close()

    def _answer(self, sock: socket.socket, head: bytes) -> None:
        line = head.split(b"\r\n", 1)[0].split(b" ")
        method = line[0] if line else b""
        path = line[1].split(b"?", 1)[0].rstrip(b"/").rsplit(b"/", 1)[-1] if len(line) > 1 else b""
        verb = path.decode("latin-1")
        ctype = "text/plain"
        if method in (b"GET", b"HEAD") and verb in HEALTH_PATHS:
            status, body = self.server.health(verb)
            ctype = CONTENT_TYPE if verb == "metrics" else "text/plain"
            outcome = "health"
        else:
            status, body = 503, b'{"Error":"too many connections"}'
            ctype = "application/json"
            outcome = "busy"
        self.server.core.metrics.overflow.labels(outcome).inc()
        reason = {200: "OK", 503: "Service Unavailable"}.get(status, "Error")
        out = (f"HTTP/1.1 {status} {reason}\r\nContent-Type: {ctype}\r\n"
               f"Content-Length: {len(body)}\r\nConnection: close\r\n"
               + ("Retry-After: 1\r\n" if status == 503 else "") + "\r\n").encode()
        if method != b"HEAD":
            out += body
        with contextlib.suppress(OSError):
            sock.setblocking(True)
            sock.settimeout(0.5)
            sock.sendall(out)

    def _drop(self, sock: socket.socket) -> None:
        self._conns.pop(sock, None)
        with contextlib.suppress(KeyError, ValueError, OSError):
            self.sel.unregister(sock)
        with contextlib.suppress(OSError):
            sock.close()

    def _run(self) -> None:
        while True:
            with self._lock:
                pending, self._pending = self._pending, []
                closed = self._closed
            if closed:
                for sock in list(self._conns) + pending:
                    self._drop(sock)
                return
            now = time.monotonic()
            for sock in pending:
                try:
                    sock.setblocking(False)
                    self.sel.register(sock, selectors.EVENT_READ, sock)
                    self._conns[sock] = (now + OVERFLOW_DEADLINE, bytearray())
                except (OSError, ValueError):
                    with contextlib.suppress(OSError):
                        sock.close()
            for key, _ in self.sel.select(timeout=0.1):
                if key.data is None:
                    with contextlib.suppress(OSError):
                        self._wake_r.recv(4096)
                    continue
                sock = key.data
                try:
                    chunk = sock.recv(4096)
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError:
                    chunk = b""
                entry = self._conns.get(sock)
                if not chunk or entry is None:
                    self._drop(sock)
                    continue
                entry[1].extend(chunk)
                if b"\r\n\r\n" in entry[1] or len(entry[1]) > 8192:
                    self._answer(sock, bytes(entry[1]))
                    self._drop(sock)
            now = time.monotonic()
            for sock, (deadline, _) in list(self._conns.items()):
                if now > deadline:
                    self.server.core.metrics.overflow.labels("timeout").inc()
                    self._drop(sock)


class ExtenderServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], core: ExtenderCore, *,
                 max_body: int = DEFAULT_MAX_BODY, timeout: float = 10.0,
                 ssl_context: ssl.SSLContext | None = None,
                 max_connections: int = DEFAULT_MAX_CONNECTIONS,
                 header_timeout: float | None = None, body_timeout: float | None = None,
                 serve_verbs: bool = True) -> None:
        """``timeout``: the longest wait for one ``recv``/``send``; ``header_timeout``: for
        the request line and headers of each request, counted from when the connection was
        accepted or the previous answer was sent (idle keep-alive included; default
        ``timeout``); ``body_timeout``: for the whole body (default ``timeout``).
        ``serve_verbs=False``: only the GET endpoints (a health/metrics listener)."""
        self.core = core
        self.max_body = max_body
        self.socket_timeout = timeout
        self.header_timeout = timeout if header_timeout is None else header_timeout
        self.body_timeout = timeout if body_timeout is None else body_timeout
        self.ssl_context = ssl_context
        self.serve_verbs = serve_verbs
        self._slots = threading.BoundedSemaphore(max_connections)
        #: the ExtenderArgs pods, parsed once per engine shape
        self.pod_cache = PodCache(core.shape_id)
        #: (code, verb) -> the labelled metric children, looked up once
        self._children: dict[tuple[str, str], tuple[Any, Any]] = {}
        super().__init__(address, ExtenderHandler)
        self._overflow = _Overflow(self)

    def request_metrics(self, code: str, verb: str) -> tuple[Any, Any]:
        """(requests counter, duration histogram) children for ``code`` and ``verb``."""
        key = (code, verb)
        got = self._children.get(key)
        if got is None:
            m = self.core.metrics
            got = self._children[key] = (m.requests.labels(code, verb),
                                         m.request_duration.labels(verb))
        return got

    def health(self, verb: str) -> tuple[int, bytes]:
        """(status, body) of ``GET /healthz``, ``/readyz`` or ``/metrics``."""
        if verb == "metrics":
            return 200, self.core.metrics.exposition()
        if verb == "readyz" and not self.core.ready.is_set():
            return 503, b"nodes not loaded yet"
        return 200, b"ok"

    def server_close(self) -> None:
        overflow = getattr(self, "_overflow", None)  # absent when the bind failed
        if overflow is not None:
            overflow.close()
        super().server_close()

    def process_request(self, request: Any, client_address: Any) -> None:
        # one thread per connection, but never more than max_connections at once; the
        # others go to the overflow responder (health answered, the rest 503)
        if not self._slots.acquire(blocking=False):
            if isinstance(request, ssl.SSLSocket):
                self.shutdown_request(request)
            else:
                self._overflow.offer(request)
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
    #: the request's headers, names in lower case (repeated ones joined with ", ")
    fields: dict[str, str]
    raw_requestline: bytes

    def setup(self) -> None:
        self.request.settimeout(self.server.socket_timeout)
        super().setup()
        self._raw = _DeadlineIO(self.connection, self.server.socket_timeout)
        self.rfile = io.BufferedReader(self._raw)

    def handle_one_request(self) -> None:
        # the request line and headers must all arrive within header_timeout
        self._raw.deadline = time.monotonic() + self.server.header_timeout
        super().handle_one_request()

    def parse_request(self) -> bool:
        """The request line and headers. ``METHOD PATH HTTP/1.x`` is parsed here, headers
        into a plain dict (``http.client``'s e-mail parser costs more than a cached filter);
        any other request line goes to the standard parser, which answers the errors."""
        words = self.raw_requestline.split()
        if len(words) != 3 or words[2] not in (b"HTTP/1.1", b"HTTP/1.0"):
            ok = super().parse_request()
            self.fields = {k.lower(): v for k, v in self.headers.items()} if ok else {}
            return ok
        self.command = words[0].decode("latin-1")
        self.path = words[1].decode("latin-1")
        self.request_version = version = words[2].decode("latin-1")
        self.requestline = f"{self.command} {self.path} {version}"
        self.close_connection = True
        fields: dict[str, str] = {}
        self.fields = fields
        for _ in range(MAX_HEADERS + 1):
            line = self.rfile.readline(MAX_HEADER_LINE + 1)
            if len(line) > MAX_HEADER_LINE:
                self.send_error(431, "Line too long")
                return False
            if line in (b"\r\n", b"\n", b""):
                break
            name, sep, value = line.decode("latin-1").partition(":")
            name = name.strip().lower()
            if not sep or not name:
                self.send_error(400, "Bad header line")
                return False
            if name in fields and name in ("content-length", "transfer-encoding", "host"):
                self.send_error(400, f"Repeated {name} header")
                return False
            fields[name] = value.strip() if name not in fields else f"{fields[name]}, {value.strip()}"
        else:
            self.send_error(431, "Too many headers")
            return False
        conn = fields.get("connection", "").lower()
        if version == "HTTP/1.1":
            self.close_connection = "close" in conn
        else:
            self.close_connection = "keep-alive" not in conn
        if version == "HTTP/1.1" and fields.get("expect", "").lower() == "100-continue":
            return self.handle_expect_100()
        return True

    def finish(self) -> None:
        super().finish()
        with contextlib.suppress(Exception):
            self._raw.close()

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

    def _send(self, status: int, body: bytes, ctype: str = "application/json",
              headers: Mapping[str, str] | None = None) -> None:
        """The whole answer in one write (headers and body in one segment)."""
        self.connection.settimeout(self.server.socket_timeout)
        head = (f"{self.protocol_version} {status} {_REASONS.get(status, 'Error')}\r\n"
                f"Server: {self.server_version}\r\nDate: {_http_date()}\r\n"
                f"Content-Type: {ctype}\r\nContent-Length: {len(body)}\r\n")
        for k, v in (headers or {}).items():
            head += f"{k}: {v}\r\n"
        if self.close_connection:
            head += "Connection: close\r\n"
        data = (head + "\r\n").encode("latin-1")
        self.wfile.write(data if self.command == "HEAD" else data + body)

    def _json(self, status: int, doc: Any) -> None:
        self._send(status, json.dumps(doc, separators=(",", ":")).encode())

    def _verb(self) -> str:
        path = self.path.split("?", 1)[0].rstrip("/")
        return path.rsplit("/", 1)[-1] if path else ""

    # ------------------------------------------------------------------- GET

    def do_GET(self) -> None:
        verb = self._verb()
        if verb in HEALTH_PATHS:
            status, body = self.server.health(verb)
            self._send(status, body, CONTENT_TYPE if verb == "metrics" else "text/plain")
        elif verb == "openapi.json":
            self._json(200, openapi_document())
        elif verb in POST_VERBS and self.server.serve_verbs:
            self._not_allowed("POST")
        else:
            self._json(404, wire.error_result(f"no such resource {self.path!r}"))

    do_HEAD = do_GET

    def _not_allowed(self, allow: str) -> None:
        self.close_connection = True  # a body may follow that we do not read
        self._send(405, json.dumps(wire.error_result(
            f"method {self.command} not allowed on {self.path.split('?', 1)[0]!r}")).encode(),
            headers={"Allow": allow})

    def _other_method(self) -> None:
        verb = self._verb()
        if verb in POST_VERBS and self.server.serve_verbs:
            self._not_allowed("POST")
        elif verb in GET_PATHS:
            self._not_allowed("GET, HEAD")
        else:
            self.close_connection = True
            self._json(404, wire.error_result(f"no such resource {self.path!r}"))

    do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_TRACE = do_CONNECT = _other_method

    # ------------------------------------------------------------------ POST

    def _body(self) -> Any:
        if self.fields.get("transfer-encoding"):
            self.close_connection = True
            raise BadRequest(411, "chunked bodies are not accepted; send Content-Length")
        raw_len = self.fields.get("content-length")
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
            self._raw.deadline = time.monotonic() + self.server.body_timeout
            data = self.rfile.read(length)
        except (TimeoutError, OSError):
            self.close_connection = True
            raise BadRequest(408, "timed out reading the body") from None
        if len(data) != length:
            self.close_connection = True
            raise BadRequest(400, "truncated body")
        try:
            return loads_json(data, "request body")
        except InputError as e:  # bounded: size, depth, values, integer digits
            raise BadRequest(400, e.message[:300]) from None

    def do_POST(self) -> None:
        verb = self._verb()
        t0 = time.perf_counter()
        status = 500
        doc: Any
        if verb in GET_PATHS or (verb in POST_VERBS and not self.server.serve_verbs):
            if verb in GET_PATHS:
                self._not_allowed("GET, HEAD")
            else:
                self.close_connection = True
                self._json(404, wire.error_result(f"no such resource {self.path!r}"))
            return
        try:
            if verb not in POST_VERBS:
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
        count, duration = self.server.request_metrics(
            str(status), verb if verb in POST_VERBS else "other")
        count.inc()
        duration.observe(time.perf_counter() - t0)

    def _filter(self, args: Mapping[str, Any]) -> dict[str, Any]:
        names, items = wire.node_args(args)
        pod, shape = self.server.pod_cache.parse(args)
        passed, failed = self.server.core.filter(pod, names, shape=shape)
        return wire.filter_result(args, names, items, passed, failed)

    def _prioritize(self, args: Mapping[str, Any]) -> list[dict[str, Any]]:
        names, _ = wire.node_args(args)
        pod, shape = self.server.pod_cache.parse(args)
        return wire.host_priority_list(self.server.core.prioritize(pod, names, shape=shape))

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


def _listen(host: str, port: int, flag: str, make: Callable[[tuple[str, int]], ExtenderServer],
            ) -> ExtenderServer:
    if not 0 <= port <= 65535:
        raise InputError(f"port {port} is out of range (0-65535)", flag)
    try:
        ipaddress.ip_address(host)
    except ValueError:
        try:
            socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (socket.gaierror, UnicodeError) as e:
            raise InputError(f"cannot resolve {host!r}: {getattr(e, 'strerror', None) or e}",
                             "--host") from None
    try:
        return make((host, port))
    except OSError as e:
        why = e.strerror or str(e)
        where = "--host" if e.errno == errno.EADDRNOTAVAIL and flag == "--port" else flag
        raise InputError(f"cannot listen on {host}:{port}: {why}", where) from None


def _process_builder(core: ExtenderCore) -> ProcessBuilder | None:
    """A worker process for node updates when the core's profile can be rebuilt there by
    name (its filter is the registered one); else ``None`` (build on the update thread)."""
    try:
        same = get_profile(core.profile.name).filter is core.profile.filter
    except InputError:
        return None
    return ProcessBuilder(core.profile.name) if same else None


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
    health_host: str = "0.0.0.0",
    health_port: int | None = None,
    max_connections: int = DEFAULT_MAX_CONNECTIONS,
    profile: str = "numalign",
) -> int:
    """``numalign extender serve``: run until interrupted. Every bad flag or configuration is
    an :class:`InputError` (one line, exit 2) before anything starts."""
    from numalign.kube import apiconfig

    if (tls_cert is None) != (tls_key is None):
        raise InputError("give both --tls-cert and --tls-key")
    for flag, value in (("--timeout", timeout), ("--resync", resync), ("--assume-ttl", assume_ttl)):
        if not value > 0:
            raise InputError("must be positive", flag)
    if max_body <= 0:
        raise InputError("must be positive", "--max-body")
    if max_connections <= 0:
        raise InputError("must be positive", "--max-connections")
    ctx = tls_context(tls_cert, tls_key) if tls_cert and tls_key else None
    source: DirSource | ApiSource
    binder = None
    if nrt_dir:
        if not os.path.isdir(nrt_dir):
            raise InputError("no such directory" if not os.path.exists(nrt_dir)
                             else "not a directory", f"--nrt-dir {nrt_dir}")
        source = DirSource(nrt_dir)
    elif kubeconfig or in_cluster:
        api = apiconfig.from_kubeconfig(kubeconfig) if kubeconfig else apiconfig.in_cluster()
        source = ApiSource(api)
        binder = api_binder(api)
    else:
        raise InputError("give --nrt-dir DIR or --kubeconfig FILE (or --in-cluster)")
    from numalign.scheduler import get_profile

    try:
        chosen = get_profile(profile)
    except InputError as e:
        raise InputError(e.problem, "--profile") from None
    core = ExtenderCore(chosen, assume_ttl=assume_ttl, binder=binder)
    builder = _process_builder(core)
    server = _listen(host, port, "--port", lambda addr: ExtenderServer(
        addr, core, max_body=max_body, timeout=timeout, ssl_context=ctx,
        max_connections=max_connections))
    servers = [server]
    if health_port is not None:
        try:
            servers.append(_listen(health_host, health_port, "--health-port",
                                   lambda addr: ExtenderServer(addr, core, timeout=timeout,
                                                               serve_verbs=False)))
        except InputError:
            server.server_close()
            raise
    if builder is not None:  # node updates are built in a worker process, outside our GIL
        builder.start()
        core.builder = builder
    stop = threading.Event()
    t = threading.Thread(target=run_source, args=(core, source, stop, resync), daemon=True)
    t.start()
    for extra in servers[1:]:
        threading.Thread(target=extra.serve_forever, daemon=True).start()
        print(f"numalign extender: health and metrics on {extra.url}", file=sys.stderr)
    print(f"numalign extender: serving on {server.url}", file=sys.stderr)
    try:
        server.serve_forever()
    finally:
        stop.set()
        if builder is not None:
            builder.close()
        for srv in servers:
            with contextlib.suppress(Exception):
                if srv is not server:
                    srv.shutdown()
                srv.server_close()
    return 0


def serve_in_thread(core: ExtenderCore, host: str = "127.0.0.1", port: int = 0,
                    **kw: Any) -> ExtenderServer:
    """Start an extender server on a daemon thread (tests, benchmarks, embedding);
    stop it with ``server.shutdown(); server.server_close()``."""
    server = ExtenderServer((host, port), core, **kw)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                     daemon=True).start()
    return server
