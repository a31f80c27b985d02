"""The extender's HTTP service: ``POST /filter``, ``/prioritize``, ``/bind``; ``GET /metrics``,
``/healthz``, ``/readyz``, ``/openapi.json``; connection limits.

The connections, framing and deadlines are :mod:`~numalign.kube.extender.http_loop`'s (one
event-loop thread); this module routes each request (:class:`ExtenderHandler`).
``extender serve`` (flags, TLS, worker processes, the node source) is
:mod:`~numalign.kube.extender.serving`'s."""

from __future__ import annotations

import json
import ssl
import sys
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from numalign.errors import InputError, NumalignError
from numalign.inputs.documents import loads_json
from numalign.kube.extender import wire
from numalign.kube.extender.bounded import (
    DEFAULT_BUDGET,
    Evaluator,
    filter_bounded,
    prioritize_bounded,
)
from numalign.kube.extender.core import ExtenderCore
from numalign.kube.extender.http_loop import (
    MAX_HEADER_LINE,
    MAX_HEADERS,
    MAX_OVERFLOW_CONNECTIONS,
    OVERFLOW_DEADLINE,
    HttpLoop,
    Request,
    Response,
)
from numalign.kube.extender.node_release import kubelet_texts
from numalign.kube.extender.podcache import PodCache
from numalign.kube.extender.wire import BadRequest
from numalign.kube.metrics import CONTENT_TYPE
from numalign.kube.openapi import openapi_document

__all__ = ["DEFAULT_MAX_BODY", "DEFAULT_MAX_CONNECTIONS", "GET_PATHS", "HEALTH_PATHS",
           "MAX_HEADERS", "MAX_HEADER_LINE", "MAX_OVERFLOW_CONNECTIONS", "OVERFLOW_DEADLINE",
           "POST_VERBS", "ExtenderHandler", "ExtenderServer", "serve_in_thread"]

DEFAULT_MAX_BODY = 8 * 1024 * 1024
DEFAULT_MAX_CONNECTIONS = 256
#: threads for ``/bind`` calls that go to the API server (the only handler that waits)
BIND_WORKERS = 4
#: what each path answers to (``Allow`` of a 405)
POST_VERBS = ("filter", "prioritize", "bind")
GET_PATHS = ("metrics", "healthz", "readyz", "openapi.json")
HEALTH_PATHS = ("healthz", "readyz", "metrics")
OTHER_METHODS = ("PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "CONNECT")


def _verb(path: str) -> str:
    """The last path segment, without the query: ``/numa/filter?x`` -> ``filter``."""
    path = path.split("?", 1)[0].rstrip("/")
    return path.rsplit("/", 1)[-1] if path else ""


def _json(status: int, doc: Any, *, close: bool = False,
          headers: Mapping[str, str] | None = None) -> Response:
    return Response(status, json.dumps(doc, separators=(",", ":")).encode(),
                    headers=headers or {}, close=close)


class ExtenderServer(HttpLoop):
    """The extender's HTTP server on one event-loop thread (:class:`HttpLoop`)."""

    def __init__(self, address: tuple[str, int], core: ExtenderCore, *,
                 max_body: int = DEFAULT_MAX_BODY, timeout: float = 10.0,
                 ssl_context: ssl.SSLContext | None = None,
                 max_connections: int = DEFAULT_MAX_CONNECTIONS,
                 header_timeout: float | None = None, body_timeout: float | None = None,
                 serve_verbs: bool = True, request_budget: float = DEFAULT_BUDGET,
                 bounded: bool = True, evaluate_in_process: bool = False) -> None:
        """``timeout``: the longest wait for an answer to be taken by the client, and the
        default of the others; ``header_timeout``: for the request line and headers of each
        request, counted from when the connection was accepted or the previous answer was
        sent (idle keep-alive included); ``body_timeout``: for the whole body.
        ``serve_verbs=False``: only the GET endpoints (a health/metrics listener).
        ``request_budget``: seconds from a ``/filter`` or ``/prioritize`` body to its answer
        at most; ``bounded=False``: every decision on the loop, however long it takes
        (:mod:`~numalign.kube.extender.bounded`); ``evaluate_in_process``: large engines are
        decided on the evaluator's thread, not in its worker process."""
        self.core = core
        self.serve_verbs = serve_verbs
        self.request_budget = request_budget
        #: first-time decisions too costly for the loop (None: all made on the loop)
        self.evaluator = (Evaluator(core, remote=not evaluate_in_process)
                          if serve_verbs and bounded else None)
        #: the ExtenderArgs pods, parsed once per engine shape
        self.pod_cache = PodCache(core.shape_id)
        #: (code, verb) -> the labelled metric children, looked up once
        self._children: dict[tuple[str, str], tuple[Any, Any]] = {}
        self.handler = ExtenderHandler(self)
        self._bind_pool: ThreadPoolExecutor | None = None
        super().__init__(address, self.handler, timeout=timeout, header_timeout=header_timeout,
                         body_timeout=body_timeout, max_body=max_body,
                         max_connections=max_connections, ssl_context=ssl_context)
        if serve_verbs:  # built node updates are installed on this loop's thread
            core.install_on = self.call_soon

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

    def bind_pool(self) -> ThreadPoolExecutor:
        """The bounded pool where ``/bind`` waits for the API server, off the event loop."""
        if self._bind_pool is None:
            self._bind_pool = ThreadPoolExecutor(BIND_WORKERS, thread_name_prefix="numalign-bind")
        return self._bind_pool

    def server_close(self) -> None:
        if self.core.install_on == self.call_soon:
            self.core.install_on = None
        super().server_close()
        if self.evaluator is not None:
            self.evaluator.close()
        if self._bind_pool is not None:
            self._bind_pool.shutdown(wait=False, cancel_futures=True)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        scheme = "https" if self.ssl_context else "http"
        return f"{scheme}://{host!s}:{port}"


class ExtenderHandler:
    """Routes the requests of one :class:`ExtenderServer` (the loop's ``HttpApp``): GET
    endpoints, 405 with ``Allow``, 404, and the POST verbs with their JSON bodies."""

    def __init__(self, server: ExtenderServer) -> None:
        self.server = server

    # ------------------------------------------------------------ HttpApp

    def begin(self, req: Request) -> Response | None:
        method, verb = req.method, _verb(req.path)
        serve_verbs = self.server.serve_verbs
        if method == "POST":
            if verb in POST_VERBS and serve_verbs:
                return None  # the body is read, then finish()
            if verb in GET_PATHS:
                return self._not_allowed(req, "GET, HEAD")
            if verb in POST_VERBS:  # a health-only listener
                return _json(404, wire.error_result(f"no such resource {req.path!r}"), close=True)
            resp = _json(404, wire.error_result(f"no such verb {verb!r}"), close=True)
            count, _ = self.server.request_metrics("404", "other")
            count.inc()
            return resp
        if method in ("GET", "HEAD"):
            if verb in HEALTH_PATHS:
                status, body = self.server.health(verb)
                return Response(status, body, CONTENT_TYPE if verb == "metrics" else "text/plain")
            if verb == "openapi.json":
                return _json(200, openapi_document())
            if verb in POST_VERBS and serve_verbs:
                return self._not_allowed(req, "POST")
            return _json(404, wire.error_result(f"no such resource {req.path!r}"))
        if method in OTHER_METHODS:
            if verb in POST_VERBS and serve_verbs:
                return self._not_allowed(req, "POST")
            if verb in GET_PATHS:
                return self._not_allowed(req, "GET, HEAD")
            return _json(404, wire.error_result(f"no such resource {req.path!r}"), close=True)
        return _json(501, wire.error_result(f"unsupported method {method[:50]!r}"), close=True)

    def finish(self, req: Request, t0: float) -> Response | Future[Response]:
        if _verb(req.path) == "bind" and self.server.core.binder is not None:
            # binding calls the API server: wait for it on the bind pool, not on the loop
            return self.server.bind_pool().submit(self._answer_now, req)
        return self.answer(req)

    def _answer_now(self, req: Request) -> Response:
        got = self.answer(req)
        assert isinstance(got, Response)  # /bind is answered at once
        return got

    def answer(self, req: Request) -> Response | Future[Response]:
        """The answer to a POST verb with its body (a future when the request's first-time
        decisions wait for the evaluator)."""
        verb = _verb(req.path)
        doc: Any
        try:
            try:
                args = loads_json(req.body, "request body")
            except InputError as e:  # bounded: size, depth, values, integer digits
                raise BadRequest(400, e.message[:300]) from None
            if not isinstance(args, dict):
                raise BadRequest(400, "expected a JSON object")
            if verb == "filter":
                got = self._filter(args)
            elif verb == "prioritize":
                got = self._prioritize(args)
            else:
                status, doc = self._bind(args)
                return _json(status, doc)
            if isinstance(got, Future):
                return _then(got, verb)
            status, doc = 200, got
        except BadRequest as e:
            status, doc = e.status, wire.error_result(e.message)
        except NumalignError as e:
            status, doc = 400, wire.error_result(e.message)
        except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as e:
            status, doc = 400, wire.error_result(f"invalid request: {type(e).__name__}: {e}"[:500])
        except Exception as e:  # a bug: answer, never hang
            status, doc = 500, wire.error_result(f"internal error: {type(e).__name__}")
            print(f"numalign extender: internal error on {verb}: {e!r}", file=sys.stderr)
        return _json(status, doc)

    def answered(self, req: Request, resp: Response, t0: float) -> None:
        verb = _verb(req.path)
        count, duration = self.server.request_metrics(
            str(resp.status), verb if verb in POST_VERBS else "other")
        count.inc()
        duration.observe(time.perf_counter() - t0)

    def error_response(self, status: int, message: str) -> Response:
        return _json(status, wire.error_result(message))

    def overflow_response(self, method: str, path: str) -> Response:
        """Every worker slot is busy: ``GET /healthz`` (and ``/readyz``, ``/metrics``) as
        usual, everything else ``503`` with ``Retry-After``."""
        verb = _verb(path)
        if method in ("GET", "HEAD") and verb in HEALTH_PATHS:
            status, body = self.server.health(verb)
            self.overflow_outcome("health")
            return Response(status, body, CONTENT_TYPE if verb == "metrics" else "text/plain",
                            close=True)
        self.overflow_outcome("busy")
        return Response(503, b'{"Error":"too many connections"}', headers={"Retry-After": "1"},
                        close=True)

    def overflow_outcome(self, outcome: str) -> None:
        self.server.core.metrics.overflow.labels(outcome).inc()

    # -------------------------------------------------------------- routes

    def _not_allowed(self, req: Request, allow: str) -> Response:
        # close: a body may follow that we do not read
        return _json(405, wire.error_result(
            f"method {req.method} not allowed on {req.path.split('?', 1)[0]!r}"),
            headers={"Allow": allow}, close=True)

    def _filter(self, args: Mapping[str, Any]) -> Any:
        names, items = wire.node_args(args)
        pod, shape = self.server.pod_cache.parse(args)
        if items is not None:  # the Node objects' kubelet releases decide (node_release.py)
            self.server.core.use_node_versions(kubelet_texts(names, items))
        srv = self.server
        got = filter_bounded(srv.core, srv.evaluator, pod, names, shape, srv.request_budget)
        if isinstance(got, Future):
            return _mapped(got, lambda r: wire.filter_result(args, names, items, *r))
        return wire.filter_result(args, names, items, *got)

    def _prioritize(self, args: Mapping[str, Any]) -> Any:
        names, items = wire.node_args(args)
        pod, shape = self.server.pod_cache.parse(args)
        if items is not None:
            self.server.core.use_node_versions(kubelet_texts(names, items))
        srv = self.server
        got = prioritize_bounded(srv.core, srv.evaluator, pod, names, shape, srv.request_budget)
        if isinstance(got, Future):
            return _mapped(got, wire.host_priority_list)
        return wire.host_priority_list(got)

    def _bind(self, args: Mapping[str, Any]) -> tuple[int, dict[str, Any]]:
        b = wire.binding_args(args)
        try:
            err = self.server.core.bind(b.namespace, b.name, b.uid, b.node)
        except LookupError as e:
            return 404, wire.error_result(f"node {b.node}: {e.args[0]}")
        return 200, wire.error_result(err)


def _mapped(fut: Future[Any], fn: Callable[[Any], Any]) -> Future[Any]:
    """A future of ``fn(fut.result())`` (made on the thread that completes ``fut``)."""
    out: Future[Any] = Future()

    def done(f: Future[Any]) -> None:
        try:
            out.set_result(fn(f.result()))
        except BaseException as e:
            out.set_exception(e)

    fut.add_done_callback(done)
    return out


def _then(fut: Future[Any], verb: str) -> Future[Response]:
    """The response to a verb whose document comes later (errors as :meth:`answer` makes
    them)."""

    def respond(doc: Any) -> Response:
        return _json(200, doc)

    out: Future[Response] = Future()

    def done(f: Future[Any]) -> None:
        try:
            out.set_result(respond(f.result()))
        except NumalignError as e:
            out.set_result(_json(400, wire.error_result(e.message)))
        except Exception as e:  # a bug: answer, never hang
            print(f"numalign extender: internal error on {verb}: {e!r}", file=sys.stderr)
            out.set_result(_json(500, wire.error_result(f"internal error: {type(e).__name__}")))

    fut.add_done_callback(done)
    return out


def serve_in_thread(core: ExtenderCore, host: str = "127.0.0.1", port: int = 0,
                    **kw: Any) -> ExtenderServer:
    """Start an extender server on a daemon thread (tests, benchmarks, embedding);
    stop it with ``server.shutdown(); server.server_close()``."""
    server = ExtenderServer((host, port), core, **kw)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                     daemon=True, name="numalign-extender-loop").start()
    server.wait_serving(5.0)
    return server
