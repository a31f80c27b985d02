"""A single-threaded HTTP/1.1 server: one ``selectors`` loop over non-blocking sockets.

The loop accepts connections, reads and frames requests (request line and headers parsed here
under strict bounds, bodies by ``Content-Length`` only), hands each complete request to an
:class:`HttpApp` and writes the answers in order, keep-alive and pipelining included. It never
blocks on a client: every connection has a deadline for the whole request (headers, then
body), an idle keep-alive deadline and a write deadline, checked every
:data:`SWEEP_INTERVAL`. Beyond ``max_connections`` a connection is served by the app's
overflow answer (``overflow_response``), at most :data:`MAX_OVERFLOW_CONNECTIONS` at once, each
for at most :data:`OVERFLOW_DEADLINE`. TLS handshakes run non-blocking on the same loop.

Handlers run inline: they must be short (the extender's are sub-millisecond with warm caches).
A handler that may wait (a call to another service) returns a ``Future`` instead, run on a
bounded pool of the app's: the connection is then not read until the answer is written, and
the loop serves the others meanwhile.

Other threads hand short work to the loop thread with :meth:`HttpLoop.call_soon` (run between
requests): work done on another thread of the process would make the loop wait for the
interpreter lock after each of its system calls, for as long as that thread keeps it.
"""

from __future__ import annotations

import contextlib
import email.utils
import errno
import ipaddress
import selectors
import socket
import ssl
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Protocol

#: request header lines: the longest one and the most of them (as ``http.client``)
MAX_HEADER_LINE = 65536
MAX_HEADERS = 100
#: connections answered by the overflow responder at once, and the time each gets
MAX_OVERFLOW_CONNECTIONS = 4096
OVERFLOW_DEADLINE = 2.0
#: an overflow connection is answered once its headers end or this many bytes came
OVERFLOW_HEAD_BYTES = 8192
#: how often deadlines are checked (seconds)
SWEEP_INTERVAL = 0.05
#: requests answered from one connection's buffer before the others get a turn
PIPELINE_BATCH = 16
RECV_SIZE = 65536
ACCEPTS_PER_EVENT = 128
SERVER_NAME = "numalign-extender"
REASONS = {100: "Continue", 200: "OK", 400: "Bad Request", 404: "Not Found",
           405: "Method Not Allowed", 408: "Request Timeout", 411: "Length Required",
           413: "Content Too Large", 414: "URI Too Long",
           431: "Request Header Fields Too Large", 500: "Internal Server Error",
           501: "Not Implemented", 503: "Service Unavailable",
           505: "HTTP Version Not Supported"}
_NO_BODY_STATUSES = frozenset({204, 304})


@dataclass(slots=True)
class Request:
    """One request's line and headers (names in lower case, repeated ones joined with
    ``", "``); ``body`` is set once it has been read."""

    method: str
    path: str
    version: str
    fields: dict[str, str]
    body: bytes = b""


@dataclass(slots=True)
class Response:
    status: int
    body: bytes
    ctype: str = "application/json"
    headers: Mapping[str, str] = field(default_factory=dict)
    #: close the connection after this answer (a body may follow that was not read)
    close: bool = False


class HttpApp(Protocol):
    def begin(self, req: Request) -> Response | None:
        """The answer from the request line and headers alone, or ``None`` when the body is
        needed (then :meth:`finish` is called with it)."""

    def finish(self, req: Request, t0: float) -> Response | Future[Response]:
        """The answer to a request whose body has been read (``t0``: ``perf_counter`` when
        its headers were parsed), or a ``Future`` of it for work that may wait."""

    def answered(self, req: Request, resp: Response, t0: float) -> None:
        """Called after the answer to a request with a body went out (metrics)."""

    def error_response(self, status: int, message: str) -> Response:
        """The answer to a request that could not be framed or timed out."""

    def overflow_response(self, method: str, path: str) -> Response:
        """The answer on a connection beyond ``max_connections``."""

    def overflow_outcome(self, outcome: str) -> None:
        """A connection beyond ``max_connections`` was ``dropped`` or timed out (``timeout``)."""


class _Framing(Exception):
    """The request cannot be framed: answered with ``status`` and the connection closed."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


_date_cache: tuple[int, str] = (0, "")


def http_date() -> str:
    """The ``Date`` header, formatted once per second."""
    global _date_cache
    now = int(time.time())
    if _date_cache[0] != now:
        _date_cache = (now, email.utils.formatdate(now, usegmt=True))
    return _date_cache[1]


def encode_response(resp: Response, *, head_only: bool, close: bool, keep_alive_10: bool = False,
                    ) -> bytes:
    """The whole answer as one buffer (headers and body go out in one segment)."""
    head = (f"HTTP/1.1 {resp.status} {REASONS.get(resp.status, 'Error')}\r\n"
            f"Server: {SERVER_NAME}\r\nDate: {http_date()}\r\n"
            f"Content-Type: {resp.ctype}\r\nContent-Length: {len(resp.body)}\r\n")
    for k, v in resp.headers.items():
        head += f"{k}: {v}\r\n"
    if close:
        head += "Connection: close\r\n"
    elif keep_alive_10:
        head += "Connection: keep-alive\r\n"
    data = (head + "\r\n").encode("latin-1")
    return data if head_only or resp.status in _NO_BODY_STATUSES else data + resp.body


def find_head_end(buf: bytearray, start: int) -> tuple[int, int]:
    """(end of the header block, where the body starts) or (-1, -1): the first empty line
    (``\\r\\n`` or a bare ``\\n``) at or after ``start``."""
    a = buf.find(b"\n\r\n", start)
    b = buf.find(b"\n\n", start)
    if a < 0 and b < 0:
        return -1, -1
    if b < 0 or 0 <= a < b:
        return a, a + 3
    return b, b + 2


def parse_head(head: bytes) -> Request:
    """Parse the request line and headers (``head``: up to, not including, the newline that
    ends the last header line). Raises :class:`_Framing` on anything out of bounds."""
    lines = head.split(b"\n")
    line = lines[0].rstrip(b"\r")
    if len(line) + 2 > MAX_HEADER_LINE:
        raise _Framing(414, "request line too long")
    words = line.split()
    if len(words) != 3:
        raise _Framing(400, "bad request line")
    version = words[2]
    if version not in (b"HTTP/1.1", b"HTTP/1.0"):
        major = version[5:].split(b".", 1)[0] if version.startswith(b"HTTP/") else b""
        if major.isdigit() and int(major) >= 2 and len(major) < 4:
            raise _Framing(505, f"HTTP version {version.decode('latin-1')} not supported")
        raise _Framing(400, "bad request version")
    if len(lines) - 1 > MAX_HEADERS:
        raise _Framing(431, "too many headers")
    fields: dict[str, str] = {}
    for raw in lines[1:]:
        if len(raw) + 1 > MAX_HEADER_LINE:
            raise _Framing(431, "header line too long")
        name, sep, value = raw.decode("latin-1").partition(":")
        name = name.strip().lower()
        if not sep or not name:
            raise _Framing(400, "bad header line")
        value = value.strip()
        if name in fields:
            if name in ("content-length", "transfer-encoding", "host"):
                raise _Framing(400, f"repeated {name} header")
            value = f"{fields[name]}, {value}"
        fields[name] = value
    return Request(words[0].decode("latin-1"), words[1].decode("latin-1"),
                   version.decode("latin-1"), fields)


def body_length(req: Request, max_body: int) -> int:
    """The request body's length from ``Content-Length`` (chunked bodies are refused)."""
    if req.fields.get("transfer-encoding"):
        raise _Framing(411, "chunked bodies are not accepted; send Content-Length")
    raw_len = req.fields.get("content-length")
    if raw_len is None:
        raise _Framing(411, "Content-Length required")
    if not raw_len.isdigit() or not raw_len.isascii():
        raise _Framing(400, "bad Content-Length")
    length = int(raw_len)
    if length > max_body:
        raise _Framing(413, f"body larger than {max_body} bytes")
    return length


_HANDSHAKE, _HEAD, _BODY, _WAIT, _CLOSED = range(5)


class _Conn:
    """One client connection's state on the loop."""

    __slots__ = ("close_after", "deadline", "events", "inbuf", "need", "out", "overflow", "req",
                 "scan", "sock", "state", "t0", "tls")

    def __init__(self, sock: socket.socket, overflow: bool, tls: bool, deadline: float) -> None:
        self.sock = sock
        self.inbuf = bytearray()
        self.scan = 0  # where the search for the end of the headers resumes
        self.state = _HANDSHAKE if tls else _HEAD
        self.deadline = deadline
        self.req: Request | None = None
        self.need = 0  # body bytes the request carries
        self.t0 = 0.0
        self.out: memoryview | None = None  # what is still to be written
        self.close_after = False
        self.overflow = overflow
        self.events = selectors.EVENT_READ
        self.tls = tls


class HttpLoop:
    """The server: bind and listen in the constructor (``OSError`` if that fails), run with
    :meth:`serve_forever`, stop with :meth:`shutdown` (from another thread) and
    :meth:`server_close`. ``timeout``: the write deadline of an answer; ``header_timeout``:
    the request line and headers of each request, counted from the accept or the previous
    answer (so also the idle keep-alive limit); ``body_timeout``: the whole body."""

    def __init__(self, address: tuple[str, int], app: HttpApp, *, timeout: float = 10.0,
                 header_timeout: float | None = None, body_timeout: float | None = None,
                 max_body: int = 8 * 1024 * 1024, max_connections: int = 256,
                 ssl_context: ssl.SSLContext | None = None, backlog: int = 1024) -> None:
        self.app = app
        self.socket_timeout = timeout
        self.header_timeout = timeout if header_timeout is None else header_timeout
        self.body_timeout = timeout if body_timeout is None else body_timeout
        self.max_body = max_body
        self.max_connections = max_connections
        self.ssl_context = ssl_context
        host = address[0]
        family = socket.AF_INET
        with contextlib.suppress(ValueError):
            if ipaddress.ip_address(host).version == 6:
                family = socket.AF_INET6
        self.socket = socket.socket(family, socket.SOCK_STREAM)
        try:
            self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self.socket.bind(address)
            self.socket.listen(backlog)
            self.socket.setblocking(False)
        except BaseException:
            self.socket.close()
            raise
        self.server_address: tuple[str, int] = self.socket.getsockname()[:2]
        self._sel = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._sel.register(self.socket, selectors.EVENT_READ, None)
        self._sel.register(self._wake_r, selectors.EVENT_READ, self._wake_r)
        self._conns: dict[socket.socket, _Conn] = {}
        self._active = 0  # connections within max_connections
        self._overflowing = 0
        self._ready: list[_Conn] = []  # connections with buffered requests left to answer
        #: deferred answers finished on other threads, for the loop to write
        self._finished: list[tuple[_Conn, Request, Future[Response]]] = []
        self._finished_lock = threading.Lock()
        #: work handed to the loop thread (call_soon), under _finished_lock
        self._soon: list[Callable[[], None]] = []
        self._accepting_soon = False
        self._accept_paused_until = 0.0
        self._stop = False
        self._running = threading.Event()
        self._stopped = threading.Event()
        self._stopped.set()
        self._closed = False

    # ------------------------------------------------------------------ lifecycle

    def serve_forever(self, poll_interval: float = 0.5) -> None:
        self._stopped.clear()
        with self._finished_lock:
            self._accepting_soon = True
        self._running.set()
        if self._closed:
            self._stop = True
        try:
            next_sweep = time.monotonic() + SWEEP_INTERVAL
            while not self._stop:
                timeout = 0.0 if self._ready else min(poll_interval, SWEEP_INTERVAL)
                for key, mask in self._sel.select(timeout):
                    data = key.data
                    if data is None:
                        self._accept()
                    elif data is self._wake_r:
                        with contextlib.suppress(OSError):
                            self._wake_r.recv(4096)
                        self._write_finished()
                    else:
                        self._on_event(data, mask)
                if self._ready:
                    ready, self._ready = self._ready, []
                    for conn in ready:
                        if conn.state != _CLOSED:
                            self._process(conn)
                now = time.monotonic()
                if now >= next_sweep:
                    self._sweep(now)
                    next_sweep = now + SWEEP_INTERVAL
        finally:
            with self._finished_lock:
                self._accepting_soon = False
                left, self._soon = self._soon, []
            for fn in left:  # handed over before the loop stopped: run here
                self._call(fn)
            self._stop = False
            self._running.clear()
            self._stopped.set()

    def call_soon(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the loop thread, between requests (in the order handed over); on
        this thread, now, when the loop is not running. An exception is printed, not raised."""
        with self._finished_lock:
            queued = self._accepting_soon
            if queued:
                self._soon.append(fn)
        if not queued:
            self._call(fn)
            return
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")

    @staticmethod
    def _call(fn: Callable[[], None]) -> None:
        try:
            fn()
        except Exception:  # a bug in the work handed over: report it, keep serving
            traceback.print_exc(file=sys.stderr)

    def stop_soon(self) -> None:
        """Make :meth:`serve_forever` return after its current turn, without waiting for it
        (safe from a signal handler on the loop's own thread)."""
        self._stop = True
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")

    def shutdown(self) -> None:
        """Stop :meth:`serve_forever` and wait for it (call from another thread). Before it
        started, it makes the next :meth:`serve_forever` return at once."""
        self._stop = True
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")
        self._stopped.wait()

    def wait_serving(self, timeout: float) -> bool:
        """Wait until :meth:`serve_forever` runs (True) or ``timeout`` passes."""
        return self._running.wait(timeout)

    def server_close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for conn in list(self._conns.values()):
            self._close(conn)
        with contextlib.suppress(Exception):
            self._sel.close()
        for s in (self.socket, self._wake_r, self._wake_w):
            with contextlib.suppress(OSError):
                s.close()

    @property
    def connections(self) -> tuple[int, int]:
        """(connections served, connections in the overflow responder)."""
        return self._active, self._overflowing

    # --------------------------------------------------------------- connections

    def _accept(self) -> None:
        now = time.monotonic()
        if now < self._accept_paused_until:
            return
        for _ in range(ACCEPTS_PER_EVENT):
            try:
                sock, _ = self.socket.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                if e.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    # out of descriptors: stop accepting for a moment (the backlog waits)
                    self._accept_paused_until = now + 0.1
                    with contextlib.suppress(KeyError, ValueError):
                        self._sel.unregister(self.socket)
                return
            self._admit(sock, now)

    def _admit(self, sock: socket.socket, now: float) -> None:
        overflow = self._active >= self.max_connections
        if overflow and (self.ssl_context is not None
                         or self._overflowing >= MAX_OVERFLOW_CONNECTIONS):
            if self.ssl_context is None:
                self.app.overflow_outcome("dropped")
            with contextlib.suppress(OSError):
                sock.close()
            return
        try:
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.ssl_context is not None:
                sock = self.ssl_context.wrap_socket(sock, server_side=True,
                                                    do_handshake_on_connect=False)
        except (OSError, ValueError):
            with contextlib.suppress(OSError):
                sock.close()
            return
        deadline = now + (OVERFLOW_DEADLINE if overflow else self.header_timeout)
        conn = _Conn(sock, overflow, self.ssl_context is not None, deadline)
        try:
            self._sel.register(sock, selectors.EVENT_READ, conn)
        except (OSError, ValueError):
            with contextlib.suppress(OSError):
                sock.close()
            return
        self._conns[sock] = conn
        if overflow:
            self._overflowing += 1
        else:
            self._active += 1
        if conn.tls:
            self._handshake(conn)

    def _close(self, conn: _Conn) -> None:
        if conn.state == _CLOSED:
            return
        conn.state = _CLOSED
        self._conns.pop(conn.sock, None)
        if conn.overflow:
            self._overflowing -= 1
        else:
            self._active -= 1
        with contextlib.suppress(KeyError, ValueError, OSError):
            self._sel.unregister(conn.sock)
        # unread input makes close() send a reset, which can overtake the answer: read what
        # is there (bytes as they are, past any TLS layer), then FIN, then close
        with contextlib.suppress(OSError, ValueError):
            socket.socket.recv(conn.sock, RECV_SIZE, socket.MSG_DONTWAIT)
        with contextlib.suppress(OSError, ValueError):
            socket.socket.shutdown(conn.sock, socket.SHUT_WR)
        with contextlib.suppress(OSError):
            conn.sock.close()
        conn.inbuf = bytearray()
        conn.out = None

    def _want(self, conn: _Conn, events: int) -> None:
        if conn.events != events:
            conn.events = events
            try:
                self._sel.modify(conn.sock, events, conn)
            except (OSError, ValueError, KeyError):
                self._close(conn)

    def _sweep(self, now: float) -> None:
        if self._accept_paused_until and now >= self._accept_paused_until:
            self._accept_paused_until = 0.0
            with contextlib.suppress(KeyError, ValueError, OSError):
                self._sel.register(self.socket, selectors.EVENT_READ, None)
        for conn in [c for c in self._conns.values() if c.deadline <= now]:
            if conn.overflow and conn.out is None:
                self.app.overflow_outcome("timeout")
                self._close(conn)
            elif conn.state == _BODY and conn.out is None:
                # the body stopped arriving: 408, then close
                resp = self.app.error_response(408, "timed out reading the body")
                req, conn.req = conn.req, None
                self._respond(conn, resp, req, close=True)
                if req is not None:
                    self.app.answered(req, resp, conn.t0)
            else:  # idle, slow headers, a stalled handshake, an answer nobody reads
                self._close(conn)

    # ------------------------------------------------------------------- events

    def _on_event(self, conn: _Conn, mask: int) -> None:
        if conn.state == _HANDSHAKE:
            self._handshake(conn)
            return
        if conn.out is not None:
            if mask & selectors.EVENT_WRITE:
                self._flush(conn)
                if conn.out is None and conn.state != _CLOSED:
                    self._process(conn)
            return
        if mask & selectors.EVENT_READ:
            self._read(conn)

    def _handshake(self, conn: _Conn) -> None:
        sock = conn.sock
        assert isinstance(sock, ssl.SSLSocket)
        try:
            sock.do_handshake()
        except ssl.SSLWantReadError:
            self._want(conn, selectors.EVENT_READ)
            return
        except ssl.SSLWantWriteError:
            self._want(conn, selectors.EVENT_WRITE)
            return
        except (ssl.SSLError, OSError, ValueError):
            self._close(conn)
            return
        conn.state = _HEAD
        conn.deadline = time.monotonic() + self.header_timeout
        self._want(conn, selectors.EVENT_READ)
        if sock.pending():
            self._read(conn)

    def _read(self, conn: _Conn) -> None:
        sock = conn.sock
        try:
            data = sock.recv(RECV_SIZE)
            if conn.tls and data:
                assert isinstance(sock, ssl.SSLSocket)
                while sock.pending():  # decrypted bytes the selector will not report
                    more = sock.recv(RECV_SIZE)
                    if not more:
                        break
                    data += more
        except (BlockingIOError, InterruptedError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
            return
        except (OSError, ValueError):
            self._close(conn)
            return
        if not data:  # the client closed (mid-request or idle): nothing to answer
            self._close(conn)
            return
        conn.inbuf += data
        self._process(conn)

    def _flush(self, conn: _Conn) -> None:
        out = conn.out
        assert out is not None
        try:
            n = conn.sock.send(out)
        except (BlockingIOError, InterruptedError, ssl.SSLWantWriteError):
            n = 0
        except ssl.SSLWantReadError:
            n = 0
        except (OSError, ValueError):
            self._close(conn)
            return
        if n < len(out):
            conn.out = out[n:]
            self._want(conn, selectors.EVENT_WRITE)
            return
        conn.out = None
        if conn.close_after:
            self._close(conn)
            return
        conn.deadline = time.monotonic() + (OVERFLOW_DEADLINE if conn.overflow
                                            else self.header_timeout)
        self._want(conn, selectors.EVENT_READ)

    def _respond(self, conn: _Conn, resp: Response, req: Request | None, *, close: bool) -> None:
        """Queue ``resp`` and write what the socket takes now."""
        keep_10 = False
        if req is not None and not close:
            conn_field = req.fields.get("connection", "").lower()
            if req.version == "HTTP/1.1":
                close = "close" in conn_field
            else:
                close = "keep-alive" not in conn_field
                keep_10 = not close
        close = close or resp.close
        data = encode_response(resp, head_only=req is not None and req.method == "HEAD",
                               close=close, keep_alive_10=keep_10)
        conn.close_after = close
        conn.out = memoryview(data)
        conn.deadline = time.monotonic() + self.socket_timeout
        self._flush(conn)

    # ------------------------------------------------------------------ requests

    def _process(self, conn: _Conn) -> None:
        """Answer the complete requests in the connection's buffer, in order."""
        for _ in range(PIPELINE_BATCH):
            if conn.state in (_CLOSED, _WAIT) or conn.out is not None:
                return
            if conn.state == _HEAD:
                if not self._take_head(conn):
                    return
                if conn.state != _BODY:
                    continue
            if conn.state == _BODY:
                if len(conn.inbuf) < conn.need:
                    return
                req = conn.req
                assert req is not None
                req.body = bytes(conn.inbuf[:conn.need])
                del conn.inbuf[:conn.need]
                conn.req = None
                conn.state = _HEAD
                conn.scan = 0
                try:
                    got = self.app.finish(req, conn.t0)
                except Exception as e:  # a bug: answer, never stop the loop
                    got = self.app.error_response(500, f"internal error: {type(e).__name__}")
                if isinstance(got, Future):
                    self._defer(conn, req, got)
                    return
                self._respond(conn, got, req, close=False)
                self.app.answered(req, got, conn.t0)
            if not conn.inbuf:
                return
        if conn.inbuf and conn.state != _CLOSED:
            self._ready.append(conn)

    def _defer(self, conn: _Conn, req: Request, fut: Future[Response]) -> None:
        """Wait for ``fut`` off the loop: the connection is not read (nor timed out) meanwhile."""
        conn.state = _WAIT
        conn.deadline = float("inf")
        conn.events = 0
        with contextlib.suppress(KeyError, ValueError, OSError):
            self._sel.unregister(conn.sock)

        def done(f: Future[Response]) -> None:
            with self._finished_lock:
                self._finished.append((conn, req, f))
            with contextlib.suppress(OSError):
                self._wake_w.send(b"x")

        fut.add_done_callback(done)

    def _write_finished(self) -> None:
        with self._finished_lock:
            finished, self._finished = self._finished, []
            soon, self._soon = self._soon, []
        for fn in soon:
            self._call(fn)
        for conn, req, fut in finished:
            if conn.state != _WAIT:
                continue  # closed meanwhile
            try:
                resp = fut.result()
            except Exception as e:
                resp = self.app.error_response(500, f"internal error: {type(e).__name__}")
            conn.state = _HEAD
            try:
                self._sel.register(conn.sock, selectors.EVENT_READ, conn)
                conn.events = selectors.EVENT_READ
            except (OSError, ValueError, KeyError):
                self._close(conn)
                continue
            self._respond(conn, resp, req, close=False)
            self.app.answered(req, resp, conn.t0)
            if conn.state != _CLOSED and conn.out is None and conn.inbuf:
                self._ready.append(conn)

    def _take_head(self, conn: _Conn) -> bool:
        """Parse the next request's head if it is complete and act on it; False if more
        bytes are needed (or the connection was closed)."""
        buf = conn.inbuf
        while conn.scan == 0 and buf.startswith((b"\r", b"\n")):
            # empty lines before a request line are ignored (RFC 9112 2.2)
            if buf.startswith(b"\r\n"):
                del buf[:2]
            elif buf.startswith(b"\n"):
                del buf[:1]
            else:
                break
        if conn.overflow:
            return self._overflow_head(conn)
        end, body_at = find_head_end(buf, max(conn.scan - 2, 0))
        if end < 0:
            conn.scan = len(buf)
            last_nl = buf.rfind(b"\n")
            if len(buf) - last_nl - 1 > MAX_HEADER_LINE:
                self._refuse(conn, 414 if last_nl < 0 else 431,
                             "request line too long" if last_nl < 0 else "header line too long")
            elif buf.count(b"\n") > MAX_HEADERS + 1:
                self._refuse(conn, 431, "too many headers")
            return False
        head = bytes(buf[:end])
        del buf[:body_at]
        conn.scan = 0
        try:
            req = parse_head(head)
        except _Framing as e:
            self._refuse(conn, e.status, e.message)
            return False
        conn.t0 = time.perf_counter()
        try:
            resp = self.app.begin(req)
        except Exception as e:  # a bug: answer, never stop the loop
            resp = self.app.error_response(500, f"internal error: {type(e).__name__}")
        if resp is not None:
            # answered without the body: a body that may follow is not read
            carries = req.fields.get("content-length", "0") not in ("", "0") \
                or "transfer-encoding" in req.fields
            self._respond(conn, resp, req, close=carries)
            return conn.state != _CLOSED
        try:
            conn.need = body_length(req, self.max_body)
        except _Framing as e:
            resp = self.app.error_response(e.status, e.message)
            self._respond(conn, resp, req, close=True)
            self.app.answered(req, resp, conn.t0)
            return False
        conn.req = req
        conn.state = _BODY
        conn.deadline = time.monotonic() + self.body_timeout
        if (req.version == "HTTP/1.1" and len(buf) < conn.need
                and req.fields.get("expect", "").lower() == "100-continue"):
            with contextlib.suppress(OSError, ssl.SSLError, ValueError):
                conn.sock.send(b"HTTP/1.1 100 Continue\r\n\r\n")
        return True

    def _refuse(self, conn: _Conn, status: int, message: str) -> None:
        self._respond(conn, self.app.error_response(status, message), None, close=True)

    def _overflow_head(self, conn: _Conn) -> bool:
        buf = conn.inbuf
        if b"\r\n\r\n" not in buf and b"\n\n" not in buf and len(buf) <= OVERFLOW_HEAD_BYTES:
            return False
        words = bytes(buf[:buf.find(b"\n") if b"\n" in buf else len(buf)]).split()
        method = words[0].decode("latin-1") if words else ""
        path = words[1].decode("latin-1") if len(words) > 1 else ""
        try:
            resp = self.app.overflow_response(method, path)
        except Exception as e:  # a bug: answer, never stop the loop
            resp = self.app.error_response(500, f"internal error: {type(e).__name__}")
        buf.clear()
        self._respond(conn, resp, Request(method, path, "HTTP/1.1", {}), close=True)
        return False
