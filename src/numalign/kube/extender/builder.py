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
"""

from __future__ import annotations

import multiprocessing
import pickle
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from numalign.kube.extender.core import Built, Decision, build_engine
from numalign.pods import Pod
from numalign.scheduler import get_profile

#: the longest one build may take in the worker (seconds) before the node is refused
BUILD_TIMEOUT = 60.0


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


def _timed(profile: str, obj: Any, pods: Sequence[tuple[int, Pod]],
           ) -> tuple[tuple[Built, dict[int, Decision], list[float]], float]:
    """:func:`build_and_decide` and the worker's CPU seconds for it."""
    c0 = time.process_time()
    out = build_and_decide(profile, obj, pods)
    return out, time.process_time() - c0


def _timed_pickled(profile: str, obj: Any, pods: Sequence[tuple[int, Pod]],
                   ) -> tuple[bytes, float]:
    """:func:`_timed` with the result pickled here, in the worker: the server's thread that
    receives it then only takes bytes, and the result is opened where it is installed."""
    c0 = time.process_time()
    out = pickle.dumps(build_and_decide(profile, obj, pods), pickle.HIGHEST_PROTOCOL)
    return out, time.process_time() - c0


class ProcessBuilder:
    """Runs :func:`build_and_decide` in one worker process (``spawn``), started on first use."""

    def __init__(self, profile: str = "numalign", timeout: float = BUILD_TIMEOUT) -> None:
        get_profile(profile)  # a bad name fails here, not in the worker
        self.profile = profile
        self.timeout = timeout
        self._pool: ProcessPoolExecutor | None = None
        self._lock = threading.Lock()
        #: builds done in the worker and the worker's CPU seconds for them
        self.builds = 0
        self.cpu_seconds = 0.0

    def _executor(self) -> ProcessPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ProcessPoolExecutor(
                    max_workers=1, mp_context=multiprocessing.get_context("spawn"))
            return self._pool

    def start(self) -> Future[Any]:
        """Start the worker now (it imports numalign: about a second) rather than on the
        first update; the future is done when the worker answers."""
        return self._executor().submit(build_and_decide, self.profile, None, [])

    def __call__(self, obj: Any, pods: Sequence[tuple[int, Pod]],
                 ) -> tuple[Built, dict[int, Decision], list[float]]:
        pool = self._executor()
        try:
            out, cpu = pool.submit(_timed, self.profile, obj, list(pods)).result(self.timeout)
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
        a refused node, not an exception. Builds run in submission order."""
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
            inner = pool.submit(_timed_pickled, self.profile, obj, list(pods))
        except (BrokenProcessPool, RuntimeError):
            self._restart(pool)
            pool = self._executor()
            inner = pool.submit(_timed_pickled, self.profile, obj, list(pods))
        inner.add_done_callback(done)
        return out

    def _restart(self, pool: ProcessPoolExecutor) -> None:
        with self._lock:
            if self._pool is pool:
                self._pool = None
        pool.shutdown(wait=False, cancel_futures=True)
        for p in list(getattr(pool, "_processes", {}).values()):  # a hung worker
            p.kill()

    def close(self, grace: float = 2.0) -> None:
        """End the worker: queued builds are cancelled, one running is given ``grace``
        seconds, then the worker is killed (the server is stopping: its answer is not
        wanted)."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is None:
            return
        procs = list((getattr(pool, "_processes", None) or {}).values())
        pool.shutdown(wait=False, cancel_futures=True)
        for p in procs:
            p.join(timeout=grace)
            if p.is_alive():
                p.kill()
                p.join(timeout=5)
