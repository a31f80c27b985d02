"""Building node engines in a worker process, outside the server's GIL.

A node update costs about 2 ms of Python to turn an NRT object into an engine and about as
much again per pod shape its snapshot is re-evaluated for. In-process that CPU is taken
from the threads answering ``/filter`` (one interpreter lock), and under a saturating
request load the update thread gets a small share of it: updates fall behind. With a
:class:`ProcessBuilder` the checks, the engine and the shape decisions are made in a worker
process, which also pickles the result; the server unpickles the finished engine (about
0.15-0.3 ms) and swaps it in - on its HTTP loop thread, between requests, when the core's
``install_on`` says so.

A worker that dies (a hostile object that the size checks did not catch) marks only that node
unusable; the next update starts a new worker.

The pool has :func:`default_workers` processes (one per usable CPU, at most
:data:`MAX_WORKERS`): the initial list of thousands of nodes is built in parallel, and a
directory source reads and parses its files there too (:meth:`ProcessBuilder.run`). Updates
of one node may then finish out of order; the core installs only a node's newest. Once the
initial list is in, the workers run niced (:data:`WORKER_NICE`): where they and the serving
process compete for the CPUs, the requests come first and the updates wait.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import pickle
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

from numalign.kube.extender.core import Decision
from numalign.kube.extender.engines import Built, build_engine
from numalign.pods import Pod
from numalign.scheduler import get_profile

T = TypeVar("T")

#: the longest one build may take in the worker (seconds) before the node is refused
BUILD_TIMEOUT = 60.0
#: the workers' niceness once the initial list is in (:meth:`ProcessBuilder.settled`)
WORKER_NICE = 10
#: worker processes at most (each holds its own interpreter and numalign: about 60 MiB)
MAX_WORKERS = 4


def default_workers() -> int:
    """Worker processes for this machine: one per CPU this process may use, 1 to
    :data:`MAX_WORKERS`."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(MAX_WORKERS, cpus or 1))


def build_and_decide(profile: str, obj: Any, pods: Sequence[tuple[int, Pod]],
                     ) -> tuple[Built, dict[int, Decision], list[float]]:
    """(the built engine or why not, decisions of ``pods`` on it by shape id, their
    durations in seconds): one node update's CPU work, wherever it runs."""
    built = build_engine(obj)
    decisions: dict[int, Decision] = {}
    durations: list[float] = []
    if built.node is not None and pods:
        decide = get_profile(profile).filter
        assert decide is not None
        for sid, pod in pods:
            t0 = time.perf_counter()
            res = decide(built.node, pod)
            durations.append(time.perf_counter() - t0)
            decisions[sid] = (res.passed, res.numa_count, res.reason)
    return built, decisions, durations


def _lower(nice: int) -> None:
    """Lower this worker's priority to niceness ``nice`` (never raise it back; -1: leave it)."""
    if nice > 0:
        with contextlib.suppress(OSError):
            now = os.nice(0)
            if now < nice:
                os.nice(nice - now)


def _call(nice: int, fn: Callable[..., T], *args: Any) -> T:
    _lower(nice)
    return fn(*args)


def _timed(profile: str, obj: Any, pods: Sequence[tuple[int, Pod]], nice: int = -1,
           ) -> tuple[tuple[Built, dict[int, Decision], list[float]], float]:
    """:func:`build_and_decide` and the worker's CPU seconds for it."""
    _lower(nice)
    c0 = time.process_time()
    out = build_and_decide(profile, obj, pods)
    return out, time.process_time() - c0


def _timed_pickled(profile: str, obj: Any, pods: Sequence[tuple[int, Pod]], nice: int = -1,
                   ) -> tuple[bytes, float]:
    """:func:`_timed` with the result pickled here, in the worker: the server's thread that
    receives it then only takes bytes, and the result is opened where it is installed."""
    _lower(nice)
    c0 = time.process_time()
    out = pickle.dumps(build_and_decide(profile, obj, pods), pickle.HIGHEST_PROTOCOL)
    return out, time.process_time() - c0


def _timed_many(profile: str, items: Sequence[tuple[Any, Sequence[tuple[int, Pod]]]],
                nice: int = -1) -> tuple[bytes, float]:
    """:func:`build_and_decide` of each item, the list pickled here, and the CPU seconds."""
    _lower(nice)
    c0 = time.process_time()
    out = pickle.dumps([build_and_decide(profile, obj, pods) for obj, pods in items],
                       pickle.HIGHEST_PROTOCOL)
    return out, time.process_time() - c0


class ProcessBuilder:
    """Runs :func:`build_and_decide` in ``workers`` worker processes (``spawn``), started on
    first use."""

    def __init__(self, profile: str = "numalign", timeout: float = BUILD_TIMEOUT,
                 workers: int = 1) -> None:
        get_profile(profile)  # a bad name fails here, not in the worker
        self.profile = profile
        self.timeout = timeout
        self.workers = max(1, workers)
        #: the workers' niceness for the next jobs (-1: as started; see :meth:`settled`)
        self.nice = -1
        self._pool: ProcessPoolExecutor | None = None
        self._lock = threading.Lock()
        self._closed = False
        #: builds done in the worker and the worker's CPU seconds for them
        self.builds = 0
        self.cpu_seconds = 0.0

    def _executor(self) -> ProcessPoolExecutor:
        with self._lock:
            if self._closed:  # the server is stopping: no new worker
                raise RuntimeError("the builder is closed")
            if self._pool is None:
                self._pool = ProcessPoolExecutor(
                    max_workers=self.workers, mp_context=multiprocessing.get_context("spawn"))
            return self._pool

    def start(self) -> Future[Any]:
        """Start the workers now (each imports numalign: about a second) rather than on the
        first updates; the future is done when one worker answers."""
        pool = self._executor()
        first = pool.submit(build_and_decide, self.profile, None, [])
        for _ in range(self.workers - 1):
            pool.submit(build_and_decide, self.profile, None, [])
        return first

    def settled(self) -> None:
        """The initial list is in: from now on the workers run at niceness
        :data:`WORKER_NICE` (an update's build is background work; the serving process,
        answering requests, gets the CPU first where they compete for it)."""
        self.nice = WORKER_NICE

    def run(self, fn: Callable[..., T], *args: Any) -> Future[T]:
        """``fn(*args)`` in a worker (``fn`` and ``args`` picklable, ``fn`` a module-level
        function); the future raises :class:`BrokenProcessPool` if the worker died meanwhile
        (the next call starts a new one)."""
        pool = self._executor()
        try:
            fut = pool.submit(_call, self.nice, fn, *args)
        except (BrokenProcessPool, RuntimeError):
            self._restart(pool)
            pool = self._executor()
            fut = pool.submit(_call, self.nice, fn, *args)

        def died(f: Future[Any]) -> None:
            if not f.cancelled() and isinstance(f.exception(), BrokenProcessPool):
                self._restart(pool)

        fut.add_done_callback(died)
        return fut

    def __call__(self, obj: Any, pods: Sequence[tuple[int, Pod]],
                 ) -> tuple[Built, dict[int, Decision], list[float]]:
        pool = self._executor()
        try:
            out, cpu = pool.submit(_timed, self.profile, obj, list(pods), self.nice).result(self.timeout)
        except (BrokenProcessPool, TimeoutError) as e:
            self._restart(pool)
            why = "timed out" if isinstance(e, TimeoutError) else "worker process died"
            return Built("", None, None, f"unusable NodeResourceTopology: engine build {why}"), {}, []
        self.builds += 1
        self.cpu_seconds += cpu
        return out

    def submit(self, obj: Any, pods: Sequence[tuple[int, Pod]],
               ) -> Future[tuple[Built, dict[int, Decision], list[float]] | bytes]:
        """Queue one build; the future's result is what :meth:`__call__` returns, pickled
        (``bytes``, for ``pickle.loads`` where it is installed), or - when the worker dies -
        a refused node, not an exception. Builds start in submission order; with several
        workers they may finish in another (the core installs only a node's newest)."""
        out: Future[tuple[Built, dict[int, Decision], list[float]] | bytes] = Future()
        pool = self._executor()

        def done(f: Future[Any]) -> None:
            try:
                res, cpu = f.result()
            except Exception:  # the worker died, or the pool was shut down
                self._restart(pool)
                out.set_result((Built("", None, None, "unusable NodeResourceTopology: engine "
                                      "build worker process died"), {}, []))
                return
            self.builds += 1
            self.cpu_seconds += cpu
            out.set_result(res)

        try:
            inner = pool.submit(_timed_pickled, self.profile, obj, list(pods), self.nice)
        except (BrokenProcessPool, RuntimeError):
            self._restart(pool)
            pool = self._executor()
            inner = pool.submit(_timed_pickled, self.profile, obj, list(pods), self.nice)
        inner.add_done_callback(done)
        return out

    def submit_many(self, items: Sequence[tuple[Any, Sequence[tuple[int, Pod]]]],
                    ) -> Future[list[tuple[Built, dict[int, Decision], list[float]]]]:
        """Queue the builds of several updates as one job (the initial list: a job per node
        would cost the serving process more than unpickling its engine); the future's list
        holds what :meth:`__call__` returns for each, opened on the thread that takes it.
        When the worker dies, every item is a refused node."""
        out: Future[list[tuple[Built, dict[int, Decision], list[float]]]] = Future()
        args = (self.profile, [(obj, list(pods)) for obj, pods in items], self.nice)
        pool = self._executor()
        try:
            inner = pool.submit(_timed_many, *args)
        except (BrokenProcessPool, RuntimeError):
            self._restart(pool)
            pool = self._executor()
            inner = pool.submit(_timed_many, *args)

        def done(f: Future[Any]) -> None:
            try:
                data, cpu = f.result()
                got: list[tuple[Built, dict[int, Decision], list[float]]] = pickle.loads(data)
            except Exception:  # the worker died, or the pool was shut down
                self._restart(pool)
                dead = Built("", None, None, "unusable NodeResourceTopology: engine build "
                                             "worker process died")
                out.set_result([(dead, {}, []) for _ in items])
                return
            self.builds += len(got)
            self.cpu_seconds += cpu
            out.set_result(got)

        inner.add_done_callback(done)
        return out

    def _restart(self, pool: ProcessPoolExecutor) -> None:
        with self._lock:
            if self._pool is pool:
                self._pool = None
        procs = list((getattr(pool, "_processes", None) or {}).values())
        pool.shutdown(wait=False, cancel_futures=True)
        for p in procs:  # a hung worker
            p.kill()

    def close(self, grace: float = 2.0) -> None:
        """End the worker: queued builds are cancelled, one running is given ``grace``
        seconds, then the worker is killed (the server is stopping: its answer is not
        wanted)."""
        with self._lock:
            pool, self._pool = self._pool, None
            self._closed = True
        if pool is None:
            return
        procs = list((getattr(pool, "_processes", None) or {}).values())
        pool.shutdown(wait=False, cancel_futures=True)
        for p in procs:
            p.join(timeout=grace)
            if p.is_alive():
                p.kill()
                p.join(timeout=5)
