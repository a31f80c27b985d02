"""Starting and stopping ``numalign extender serve``: the flags checked, the node source,
the builder's worker processes, the HTTP listeners, SIGTERM.

:func:`start` wires everything and returns a :class:`Running` (the loop not yet running);
:func:`serve` runs its loop on the calling thread until SIGTERM or an interrupt. The
benchmarks start the same :class:`Running` and run its loop on a thread.
"""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import os
import signal
import socket
import ssl
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from numalign.errors import InputError
from numalign.kube.extender.bounded import DEFAULT_BUDGET
from numalign.kube.extender.builder import ProcessBuilder, default_workers
from numalign.kube.extender.core import ExtenderCore
from numalign.kube.extender.dirsource import DirSource
from numalign.kube.extender.gcfreeze import FreezePolicy
from numalign.kube.extender.server import DEFAULT_MAX_BODY, DEFAULT_MAX_CONNECTIONS, ExtenderServer
from numalign.kube.extender.sources import ApiSource, run_source
from numalign.scheduler import get_profile

__all__ = ["Running", "api_binder", "serve", "start", "tls_context"]


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


def _process_builder(core: ExtenderCore, workers: int) -> ProcessBuilder | None:
    """Worker processes for node updates when the core's profile can be rebuilt there by
    name (its filter is the registered one); else ``None`` (build on the update thread)."""
    try:
        same = get_profile(core.profile.name).filter is core.profile.filter
    except InputError:
        return None
    return ProcessBuilder(core.profile.name, workers=workers) if same else None


@dataclass
class Running:
    """A started extender: its core, listeners, builder and node source (on its thread).
    :attr:`server`'s loop is not running yet: :func:`serve` runs it on the calling thread."""

    core: ExtenderCore
    server: ExtenderServer
    source: DirSource | ApiSource
    builder: ProcessBuilder | None
    stop: threading.Event
    thread: threading.Thread
    #: listeners besides :attr:`server` (health and metrics), each on its own thread
    others: list[ExtenderServer] = field(default_factory=list)

    def builder_cpu(self) -> float:
        """CPU seconds the builder's workers spent in builds so far."""
        return self.builder.cpu_seconds if self.builder is not None else 0.0

    def close(self) -> None:
        """Stop the source, the listeners (:attr:`server`'s loop must have returned or never
        run) and the worker processes."""
        self.stop.set()
        for srv in [*self.others, self.server]:
            with contextlib.suppress(Exception):
                if srv is not self.server or srv._running.is_set():
                    srv.shutdown()
                srv.server_close()
        if self.builder is not None:
            self.builder.close()


def start(
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
    request_budget: float = DEFAULT_BUDGET,
    workers: int | None = None,
    log: Any = None,
) -> Running:
    """Check the flags (an :class:`InputError`, one line, before anything starts), then
    start the builder's worker processes (``workers``, default :func:`default_workers`),
    the listeners and the node source on its thread. ``log``: where the source reports."""
    from numalign.kube import apiconfig

    log = sys.stderr if log is None else log
    if (tls_cert is None) != (tls_key is None):
        raise InputError("give both --tls-cert and --tls-key")
    for flag, value in (("--timeout", timeout), ("--resync", resync), ("--assume-ttl", assume_ttl),
                        ("--request-budget", request_budget)):
        if not value > 0:
            raise InputError("must be positive", flag)
    if max_body <= 0:
        raise InputError("must be positive", "--max-body")
    if max_connections <= 0:
        raise InputError("must be positive", "--max-connections")
    ctx = tls_context(tls_cert, tls_key) if tls_cert and tls_key else None
    binder = None
    api = None
    if nrt_dir:
        if not os.path.isdir(nrt_dir):
            raise InputError("no such directory" if not os.path.exists(nrt_dir)
                             else "not a directory", f"--nrt-dir {nrt_dir}")
    elif kubeconfig or in_cluster:
        api = apiconfig.from_kubeconfig(kubeconfig) if kubeconfig else apiconfig.in_cluster()
        binder = api_binder(api)
    else:
        raise InputError("give --nrt-dir DIR or --kubeconfig FILE (or --in-cluster)")
    try:
        chosen = get_profile(profile)
    except InputError as e:
        raise InputError(e.problem, "--profile") from None
    # the serving process holds every node's engine: keep the garbage collector off them
    core = ExtenderCore(chosen, assume_ttl=assume_ttl, binder=binder, freeze=FreezePolicy(),
                        log=log)
    builder = _process_builder(core, default_workers() if workers is None else workers)
    server = _listen(host, port, "--port", lambda addr: ExtenderServer(
        addr, core, max_body=max_body, timeout=timeout, ssl_context=ctx,
        max_connections=max_connections, request_budget=request_budget))
    others: list[ExtenderServer] = []
    if health_port is not None:
        try:
            others.append(_listen(health_host, health_port, "--health-port",
                                  lambda addr: ExtenderServer(addr, core, timeout=timeout,
                                                              serve_verbs=False)))
        except InputError:
            server.server_close()
            raise
    if builder is not None:  # node updates are built in worker processes, outside our GIL
        builder.start()
        core.builder = builder
    source: DirSource | ApiSource
    if nrt_dir:  # files are read and parsed in the builder's workers too
        source = DirSource(nrt_dir, log=log, reader=builder.run if builder else None)
    else:
        source = ApiSource(api, log=log)
    stop = threading.Event()
    t = threading.Thread(target=run_source, args=(core, source, stop, resync),
                         kwargs={"log": log}, daemon=True, name="numalign-node-source")
    t.start()
    for extra in others:
        threading.Thread(target=extra.serve_forever, daemon=True).start()
    return Running(core, server, source, builder, stop, t, others)


def serve(**flags: Any) -> int:
    """``numalign extender serve``: :func:`start`, then answer on this thread until SIGTERM
    or an interrupt (the flags are :func:`start`'s)."""
    running = start(**flags)
    server = running.server
    for extra in running.others:
        print(f"numalign extender: health and metrics on {extra.url}", file=sys.stderr)
    print(f"numalign extender: serving on {server.url}", file=sys.stderr)
    # SIGTERM (the kubelet stopping the container, systemd, kill): stop serving and end what
    # this process started - the builder's and the evaluator's worker processes, and with them
    # multiprocessing's resource tracker - instead of dying with them left running
    previous = _on_sigterm(server.stop_soon)
    try:
        server.serve_forever()
    finally:
        running.close()
        _restore_sigterm(previous)
    print("numalign extender: stopped", file=sys.stderr)
    return 0


def _on_sigterm(stop: Callable[[], None]) -> Any:
    """Call ``stop`` on SIGTERM (main thread only); returns the previous disposition to put
    back with :func:`_restore_sigterm` (None: nothing was changed)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, lambda _signum, _frame: stop())


def _restore_sigterm(previous: Any) -> None:
    if previous is not None:
        signal.signal(signal.SIGTERM, previous)
