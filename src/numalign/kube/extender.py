"""The kube-scheduler extender: ``POST /filter``, ``/prioritize``, ``/bind`` on numalign's engine.

Wire format: ``k8s.io/kube-scheduler/extender/v1`` (Go structs without JSON tags, so the field
names are the Go names): ExtenderArgs ``{Pod, Nodes, NodeNames}``; ExtenderFilterResult
``{Nodes, NodeNames, FailedNodes, FailedAndUnresolvableNodes, Error}``; HostPriorityList
``[{Host, Score}]`` with scores 0..10 (MaxExtenderPriority); ExtenderBindingArgs ``{PodName,
PodNamespace, PodUID, Node}`` -> ExtenderBindingResult ``{Error}``. Both node-list forms are
served: ``NodeNames`` in -> ``NodeNames`` out (``nodeCacheCapable: true``), ``Nodes`` (a v1
NodeList) in -> ``Nodes`` out (the same items, filtered).

Nodes are NodeResourceTopology objects (a directory of YAML/JSON files polled by mtime, or the
API: list + watch), each turned into a node engine with the published availability applied
(:func:`numalign.kube.topology.engine_from_nrt`). The decision per node is the ``numalign``
scheduler profile's filter - the node's own admission (``Node.plan``), i.e. what the kubelet
will decide. Prioritize scores the NUMA part only (scheduler-plugins LeastNUMANodes, 0..100
scaled to 0..10); kube-scheduler adds its own node-level scores.

**Assume**: a pod the extender binds (``/bind``), or whose filter leaves exactly one node,
is admitted into that node's engine state, so the next pods see its CPUs, memory and devices
gone. The assumption ends when the node's NRT shows a new pod-set fingerprint (the exporter
has seen the pod change) or after ``assume_ttl`` seconds.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import socket
import ssl
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

from numalign.errors import InputError, NumalignError
from numalign.kube.metrics import ExtenderMetrics
from numalign.kube.openapi import openapi_document
from numalign.kube.topology import engine_from_nrt, fingerprint_of
from numalign.node.admission import Node
from numalign.pods import Pod, parse_pods
from numalign.scheduler import Profile, get_profile
from numalign.scheduler.scorers import least_numa_nodes

MAX_EXTENDER_PRIORITY = 10
DEFAULT_MAX_BODY = 8 * 1024 * 1024
DEFAULT_MAX_CONNECTIONS = 256
UNKNOWN_NODE = "node has no NodeResourceTopology known to the numalign extender"


def pod_shape(pod: Pod) -> Any:
    """What a filter decision depends on (see :attr:`numalign.pods.Pod.shape`)."""
    return pod.shape


@dataclass
class Assumed:
    pod: Pod
    fingerprint: str | None
    since: float
    numa_count: int


@dataclass
class NodeEntry:
    name: str
    digest: str
    fingerprint: str | None
    node: Node
    version: int = 0
    assumed: dict[str, Assumed] = field(default_factory=dict)
    cache: dict[Any, tuple[int, bool, int, str]] = field(default_factory=dict)


def _digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


class ExtenderCore:
    """The extender's logic without HTTP: node engines, assumptions, filter/score/bind."""

    def __init__(
        self,
        profile: Profile | None = None,
        *,
        assume_ttl: float = 120.0,
        metrics: ExtenderMetrics | None = None,
        binder: Callable[[str, str, str, str], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        log: Any = sys.stderr,
    ) -> None:
        self.profile = profile or get_profile("numalign")
        if self.profile.filter is None:
            raise InputError(f"profile {self.profile.name!r} has no NUMA filter")
        self.assume_ttl = assume_ttl
        self.metrics = metrics or ExtenderMetrics()
        self.binder = binder
        self.clock = clock
        self.log = log
        self.nodes: dict[str, NodeEntry] = {}
        self.broken: dict[str, str] = {}
        self.ready = threading.Event()
        self.max_numa = 1
        self._lock = threading.RLock()
        self._pods: OrderedDict[str, Pod] = OrderedDict()  # uid -> last pod seen (for /bind)

    # ---------------------------------------------------------------------- nodes

    def set_nodes(self, objects: Mapping[str, Any]) -> None:
        """Replace the node set with these NRT objects (name -> object); unchanged objects
        keep their engines and assumptions."""
        with self._lock:
            for name in list(self.nodes):
                if name not in objects:
                    del self.nodes[name]
            for name in list(self.broken):
                if name not in objects:
                    del self.broken[name]
            for name, obj in objects.items():
                self._update(name, obj)
            self.max_numa = max((len(e.node.machine.numa_nodes) for e in self.nodes.values()),
                                default=1)
            self.metrics.nodes.set(len(self.nodes))
            self.ready.set()

    def _update(self, name: str, obj: Any) -> None:
        digest = _digest(obj)
        old = self.nodes.get(name)
        if old is not None and old.digest == digest:
            return
        try:
            node = engine_from_nrt(obj)
        except Exception as e:  # one bad object must not stop the others
            msg = e.message if isinstance(e, NumalignError) else f"{type(e).__name__}: {e}"
            self.broken[name] = f"unusable NodeResourceTopology: {msg}"
            self.nodes.pop(name, None)
            print(f"numalign extender: node {name}: {self.broken[name]}", file=self.log)
            return
        self.broken.pop(name, None)
        fp = fingerprint_of(obj) if isinstance(obj, dict) else None
        entry = NodeEntry(name, digest, fp, node, (old.version + 1) if old else 0)
        if old is not None:
            now = self.clock()
            for uid, a in old.assumed.items():
                # the NRT now reflects a new pod set: it accounts for the assumed pod
                if fp is not None and fp != a.fingerprint:
                    continue
                if now - a.since > self.assume_ttl:
                    continue
                if node.admit(a.pod).admitted:
                    entry.assumed[uid] = Assumed(a.pod, fp, a.since, a.numa_count)
        self.nodes[name] = entry
        self._count_assumed()

    def _count_assumed(self) -> None:
        self.metrics.assumed.set(sum(len(e.assumed) for e in self.nodes.values()))

    def _expire(self) -> None:
        now = self.clock()
        for e in self.nodes.values():
            for uid in [u for u, a in e.assumed.items() if now - a.since > self.assume_ttl]:
                e.node.release(uid)
                del e.assumed[uid]
                e.version += 1
        self._count_assumed()

    # --------------------------------------------------------------------- decide

    def _check(self, entry: NodeEntry, pod: Pod, shape: Any) -> tuple[bool, int, str]:
        a = entry.assumed.get(pod.uid)
        if a is not None:
            return True, a.numa_count, ""
        hit = entry.cache.get(shape)
        if hit is not None and hit[0] == entry.version:
            return hit[1], hit[2], hit[3]
        assert self.profile.filter is not None
        t0 = time.perf_counter()
        res = self.profile.filter(entry.node, pod)
        self.metrics.admission_duration.observe(time.perf_counter() - t0)
        self.metrics.admission_requests.inc()
        if not res.passed:
            self.metrics.admission_errors.inc()
        entry.cache[shape] = (entry.version, res.passed, res.numa_count, res.reason)
        return res.passed, res.numa_count, res.reason

    def _remember(self, pod: Pod) -> None:
        self._pods[pod.uid] = pod
        self._pods.move_to_end(pod.uid)
        while len(self._pods) > 10000:
            self._pods.popitem(last=False)

    def filter(self, pod: Pod, names: Sequence[str]) -> tuple[list[str], dict[str, str]]:
        """(names that pass, failed name -> reason)."""
        with self._lock:
            if any(e.assumed for e in self.nodes.values()):
                self._expire()
            self._remember(pod)
            shape = pod_shape(pod)
            passed: list[str] = []
            failed: dict[str, str] = {}
            for name in names:
                entry = self.nodes.get(name)
                if entry is None:
                    failed[name] = self.broken.get(name, UNKNOWN_NODE)
                    continue
                ok, _, reason = self._check(entry, pod, shape)
                if ok:
                    passed.append(name)
                else:
                    failed[name] = reason or "TopologyAffinityError"
            if len(passed) == 1:
                self._assume(self.nodes[passed[0]], pod)
            return passed, failed

    def prioritize(self, pod: Pod, names: Sequence[str]) -> list[tuple[str, int]]:
        with self._lock:
            shape = pod_shape(pod)
            out: list[tuple[str, int]] = []
            for name in names:
                entry = self.nodes.get(name)
                score = 0
                if entry is not None:
                    ok, count, _ = self._check(entry, pod, shape)
                    if ok:
                        score = least_numa_nodes(count, self.max_numa) * MAX_EXTENDER_PRIORITY // 100
                out.append((name, max(0, min(MAX_EXTENDER_PRIORITY, score))))
            return out

    def _assume(self, entry: NodeEntry, pod: Pod) -> bool:
        if pod.uid in entry.assumed:
            return True
        result = entry.node.admit(pod)
        if not result.admitted:
            return False
        count = len({
            c for r in result.containers if r.affinity is not None
            for c in range(r.affinity.bit_length()) if r.affinity >> c & 1
        })
        entry.assumed[pod.uid] = Assumed(pod, entry.fingerprint, self.clock(), count)
        entry.version += 1
        self._count_assumed()
        return True

    def bind(self, namespace: str, name: str, uid: str, node: str) -> str:
        """Assume the pod on ``node`` and bind it through the API (when configured);
        returns the ExtenderBindingResult error ("" = success)."""
        with self._lock:
            entry = self.nodes.get(node)
            if entry is None:
                raise LookupError(self.broken.get(node, UNKNOWN_NODE))
            pod = self._pods.get(uid)
            if pod is None:
                return f"pod {namespace}/{name} ({uid}) was not filtered by this extender"
            for other in self.nodes.values():  # assumed elsewhere (single-node filter)
                if other is not entry and uid in other.assumed:
                    other.node.release(uid)
                    del other.assumed[uid]
                    other.version += 1
            if not self._assume(entry, pod):
                return f"node {node} no longer admits pod {namespace}/{name}"
        if self.binder is not None:
            try:
                self.binder(namespace, name, uid, node)
            except Exception as e:
                return f"binding failed: {type(e).__name__}: {e}"
        return ""


# ------------------------------------------------------------------------- sources


class DirSource:
    """NRT objects from ``*.yaml``/``*.yml``/``*.json`` files in a directory, polled by mtime.

    A file that cannot be read or parsed keeps its last good object (and is logged)."""

    def __init__(self, path: str | Path, log: Any = sys.stderr) -> None:
        self.path = Path(path)
        self.log = log
        self._files: dict[Path, tuple[tuple[int, int], list[Any]]] = {}

    def scan(self) -> dict[str, Any]:
        if not self.path.is_dir():
            raise InputError("not a directory", str(self.path))
        present: set[Path] = set()
        for p in sorted(self.path.iterdir()):
            if p.suffix not in (".yaml", ".yml", ".json") or p.name.startswith("."):
                continue
            present.add(p)
            try:
                st = p.stat()
            except OSError:
                continue
            key = (st.st_mtime_ns, st.st_size)
            old = self._files.get(p)
            if old is not None and old[0] == key:
                continue
            try:
                with open(p, encoding="utf-8") as f:
                    docs = [d for d in yaml.safe_load_all(f) if d is not None]
                objs: list[Any] = []
                for d in docs:
                    if isinstance(d, dict) and d.get("kind") == "List":
                        objs.extend(d.get("items") or [])
                    else:
                        objs.append(d)
                self._files[p] = (key, objs)
            except (OSError, yaml.YAMLError, UnicodeDecodeError) as e:
                print(f"numalign extender: {p}: cannot read ({str(e).splitlines()[0]}); "
                      "keeping its last good objects", file=self.log)
        for p in list(self._files):
            if p not in present:
                del self._files[p]
        out: dict[str, Any] = {}
        for _, objs in self._files.values():
            for o in objs:
                if isinstance(o, dict) and isinstance(o.get("metadata"), dict):
                    name = o["metadata"].get("name")
                    if isinstance(name, str):
                        out[name] = o
        return out


class ApiSource:
    """NRT objects from the API server: list, then watch until the next resync."""

    def __init__(self, api: Any, log: Any = sys.stderr) -> None:
        self.api = api
        self.log = log

    def list(self) -> dict[str, Any]:
        from numalign.kube.exporter import GROUP, PLURAL, VERSION, k8s

        resp: Any = k8s("client").CustomObjectsApi(self.api).list_cluster_custom_object(GROUP, VERSION, PLURAL)
        return {o["metadata"]["name"]: o for o in resp.get("items") or []}

    def watch(self, core: ExtenderCore, objects: dict[str, Any], seconds: int,
              stop: threading.Event) -> None:
        from numalign.kube.exporter import GROUP, PLURAL, VERSION, k8s

        w = k8s("watch").Watch()
        custom = k8s("client").CustomObjectsApi(self.api)
        for ev in w.stream(custom.list_cluster_custom_object, GROUP, VERSION, PLURAL,
                           timeout_seconds=seconds):
            obj: Any = ev.get("object") or {}
            name = (obj.get("metadata") or {}).get("name")
            if not isinstance(name, str):
                continue
            if ev.get("type") == "DELETED":
                objects.pop(name, None)
            else:
                objects[name] = obj
            core.set_nodes(objects)
            if stop.is_set():
                w.stop()
                return


def run_source(core: ExtenderCore, source: DirSource | ApiSource, stop: threading.Event,
               interval: float = 1.0, log: Any = sys.stderr) -> None:
    """Keep ``core``'s nodes in sync with ``source`` until ``stop``."""
    while not stop.is_set():
        try:
            if isinstance(source, DirSource):
                core.set_nodes(source.scan())
            else:
                objects = source.list()
                core.set_nodes(objects)
                source.watch(core, objects, max(1, int(interval)), stop)
        except Exception as e:  # keep the last nodes; retry
            print(f"numalign extender: node source failed: {type(e).__name__}: {e}", file=log)
        stop.wait(interval)


# ---------------------------------------------------------------------------- HTTP


class BadRequest(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _pod_of(args: Mapping[str, Any]) -> Pod:
    raw = args.get("Pod")
    if not isinstance(raw, dict):
        raise BadRequest(400, "Pod: expected a v1.Pod object")
    body = dict(raw)
    # kube-scheduler's pods come from an informer: TypeMeta is usually empty
    body.setdefault("kind", "Pod")
    body.setdefault("apiVersion", "v1")
    if body.get("kind") in (None, ""):
        body["kind"] = "Pod"
    if body.get("apiVersion") in (None, ""):
        body["apiVersion"] = "v1"
    if body.get("kind") != "Pod":
        raise BadRequest(400, f"Pod: unexpected kind {body.get('kind')!r}")
    pods = parse_pods(body, "Pod")
    if len(pods) != 1:
        raise BadRequest(400, "Pod: expected exactly one pod")
    return pods[0]


def _node_args(args: Mapping[str, Any]) -> tuple[list[str], list[Any] | None]:
    """(node names, the NodeList items when the Nodes form is used)."""
    names = args.get("NodeNames")
    if names is not None:
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise BadRequest(400, "NodeNames: expected a list of strings")
        return list(names), None
    nodes = args.get("Nodes")
    if nodes is None:
        raise BadRequest(400, "one of Nodes or NodeNames is required")
    if not isinstance(nodes, dict):
        raise BadRequest(400, "Nodes: expected a v1.NodeList object")
    items = nodes.get("items")
    if items is None:
        items = []
    if not isinstance(items, list):
        raise BadRequest(400, "Nodes.items: expected a list")
    out: list[str] = []
    for i, item in enumerate(items):
        meta = item.get("metadata") if isinstance(item, dict) else None
        name = meta.get("name") if isinstance(meta, dict) else None
        if not isinstance(name, str):
            raise BadRequest(400, f"Nodes.items[{i}].metadata.name: expected a string")
        out.append(name)
    return out, items


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
            self._json(404, {"Error": f"no such resource {self.path!r}"})

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
            status, doc = e.status, {"Error": e.message}
        except NumalignError as e:
            status, doc = 400, {"Error": e.message}
        except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as e:
            status, doc = 400, {"Error": f"invalid request: {type(e).__name__}: {e}"[:500]}
        except Exception as e:  # a bug: answer, never hang
            status, doc = 500, {"Error": f"internal error: {type(e).__name__}"}
            print(f"numalign extender: internal error on {verb}: {e!r}", file=sys.stderr)
        self._json(status, doc)
        label = verb if verb in ("filter", "prioritize", "bind") else "other"
        core.metrics.requests.inc(verb=label, code=str(status))
        core.metrics.request_duration.observe(time.perf_counter() - t0, verb=label)

    def _filter(self, args: Mapping[str, Any]) -> dict[str, Any]:
        names, items = _node_args(args)
        pod = _pod_of(args)
        passed, failed = self.server.core.filter(pod, names)
        ok = set(passed)
        if items is None:
            return {"Nodes": None, "NodeNames": passed, "FailedNodes": failed,
                    "FailedAndUnresolvableNodes": {}, "Error": ""}
        kept = [it for it, n in zip(items, names, strict=True) if n in ok]
        node_list = dict(args["Nodes"])
        node_list["items"] = kept
        return {"Nodes": node_list, "NodeNames": None, "FailedNodes": failed,
                "FailedAndUnresolvableNodes": {}, "Error": ""}

    def _prioritize(self, args: Mapping[str, Any]) -> list[dict[str, Any]]:
        names, _ = _node_args(args)
        pod = _pod_of(args)
        return [{"Host": n, "Score": s} for n, s in self.server.core.prioritize(pod, names)]

    def _bind(self, args: Mapping[str, Any]) -> tuple[int, dict[str, Any]]:
        fields = {}
        for key in ("PodName", "PodNamespace", "PodUID", "Node"):
            v = args.get(key)
            if not isinstance(v, str) or not v:
                raise BadRequest(400, f"{key}: expected a non-empty string")
            fields[key] = v
        try:
            err = self.server.core.bind(fields["PodNamespace"], fields["PodName"],
                                        fields["PodUID"], fields["Node"])
        except LookupError as e:
            return 404, {"Error": f"node {fields['Node']}: {e.args[0]}"}
        return 200, {"Error": err}


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
