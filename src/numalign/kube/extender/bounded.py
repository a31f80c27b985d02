"""A bounded amount of work per request: one costly ``/filter`` never stalls the others.

The extender answers on one event-loop thread (:mod:`~numalign.kube.extender.http_loop`). A
decision a node's snapshot already holds is a dictionary lookup; a *first-time* decision (a pod
shape the node has not seen) is a node admission, whose cost grows with the node's engine: about
a millisecond on a 2-socket node, 10-25 ms on a node with thousands of GPUs, a second for a pod
taking 8,000 of 16,384 CPUs. Made on the loop, that time is added to every other request.
So, per request (:func:`filter_bounded`, :func:`prioritize_bounded`):

* first-time decisions on **small** engines (at most :data:`INLINE_SIZE` CPUs + devices) are
  made on the loop for at most :data:`INLINE_SLICE` seconds; the others - a large engine, or
  beyond the slice - go to the :class:`Evaluator`'s thread, and the request's answer waits;
* the :class:`Evaluator` decides node after node, **round robin** over the requests waiting
  (one node of each in turn), so a request with hundreds of costly nodes delays another's few
  by a node evaluation each, not by all of them; while it works, the interpreter's switch
  interval is :data:`SWITCH_INTERVAL` (0.5 ms instead of 5 ms), so the loop thread gets the GIL
  back within that after each of its system calls;
* each request has a **deadline** (``budget`` seconds after its body was read; ``extender
  serve --request-budget``, default :data:`DEFAULT_BUDGET`, inside kube-scheduler's extender
  ``httpTimeout`` whose default is 5 s). At the deadline a watchdog thread answers with the
  decisions made so far; every node still undecided fails with :data:`NOT_EVALUATED` (for
  ``/prioritize``: scores 0). An evaluation already running finishes (it cannot be
  interrupted) and is kept in the node's cache, so the next attempt finds it decided; the
  request's other nodes are dropped from the queue;
* at most :data:`MAX_WAITING` requests wait for the evaluator; beyond that a request's costly
  nodes fail with :data:`NOT_EVALUATED` at once.

When exactly one node passes a filter, the pod is assumed on it (as
:meth:`~numalign.kube.extender.core.ExtenderCore.filter` does): on the loop for a small engine,
on the evaluator's thread for a large one - and not at all if the deadline comes first (the
answer is then sent without the assumption; ``/bind`` still assumes).
"""

from __future__ import annotations

import contextlib
import copy
import heapq
import itertools
import multiprocessing
import os
import sys
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from concurrent.futures import CancelledError, Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from typing import Any, TypeVar

from numalign.errors import InputError
from numalign.kube.extender.core import Decision, ExtenderCore, NodeEntry
from numalign.kube.extender.engines import LARGE_ENGINE, build_engine
from numalign.kube.extender.engines import engine_size as core_engine_size
from numalign.node.admission import Node
from numalign.pods import Pod
from numalign.scheduler import get_profile

#: engines with at most this many CPUs + devices are decided on the loop (a pod filling such
#: a node takes about 3 ms; a 2-socket, 8-GPU node has about 270)
INLINE_SIZE = LARGE_ENGINE
#: seconds of first-time decisions one request makes on the loop before the rest go to the
#: evaluator
INLINE_SLICE = 0.0005
#: seconds from a request's body to its answer, at most (kube-scheduler's extender
#: ``httpTimeout`` defaults to 5 s: ``DefaultExtenderTimeout``, pkg/scheduler/extender.go)
DEFAULT_BUDGET = 3.0
#: requests waiting for the evaluator at once
MAX_WAITING = 64
#: the interpreter's switch interval while the evaluator works (seconds; CPython's default 0.005)
SWITCH_INTERVAL = 0.0001

T = TypeVar("T")


def engine_size(entry: NodeEntry) -> int:
    """CPUs + devices of the node's engine: what a first-time decision's cost grows with."""
    return core_engine_size(entry.node)


#: large engines kept by the evaluation worker process (by NRT digest), least recent dropped
WORKER_ENGINES = 4
#: the longest one first-time decision may take in the worker (seconds); beyond, the node
#: fails for that pod shape and the worker is replaced
WORKER_TIMEOUT = 60.0
_worker_engines: OrderedDict[str, Node] = OrderedDict()


#: ``nice`` increment of the evaluation worker process
WORKER_NICE = 10


def _lower_priority() -> None:
    with contextlib.suppress(OSError):
        os.nice(WORKER_NICE)


def evaluate_in_worker(profile: str, digest: str, obj: Any, assumed: list[Pod], pod: Pod,
                       ) -> tuple[Decision, float]:
    """In the evaluation worker process: the decision on the node ``obj`` describes, with the
    extender's ``assumed`` pods admitted first (the server's snapshot), and its seconds."""
    node = _worker_engines.get(digest)
    if node is None:
        built = build_engine(obj)
        if built.node is None:
            return (False, 0, built.error), 0.0
        node = _worker_engines[digest] = built.node
        while len(_worker_engines) > WORKER_ENGINES:
            _worker_engines.popitem(last=False)
    _worker_engines.move_to_end(digest)
    work = copy.copy(node)  # shares the machine; admit replaces the state
    for p in assumed:
        work.admit(p)
    decide = get_profile(profile).filter
    assert decide is not None
    t0 = time.perf_counter()
    res = decide(work, pod)
    return (res.passed, res.numa_count, res.reason), time.perf_counter() - t0


@dataclass(eq=False)
class Job:
    """One request's first-time decisions left over from its first pass: ``small`` ones the
    loop makes in later turns (a slice each), ``large`` ones the evaluator makes. ``final(known,
    complete)`` makes the answer from the decisions made - all of them (``complete``) or, at
    the deadline, those made so far; ``heavy(answer)``: its last step (an assumption on a large
    engine) is for the evaluator's thread, not the loop's."""

    pod: Pod
    shape: int
    small: deque[NodeEntry]
    large: deque[NodeEntry]
    deadline: float
    final: Callable[[dict[str, Decision], bool], Any]
    heavy: Callable[[dict[str, Decision]], bool] = lambda known: False
    out: Future[Any] = field(default_factory=Future)
    known: dict[str, Decision] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    closed: bool = False
    #: the evaluator has this job (its large decisions, or its last step)
    on_evaluator: bool = False
    #: the evaluator has made the job's large decisions (``lock``)
    large_done: bool = False
    #: the answer is given (``lock``)
    answered: bool = False

    def close(self, complete: bool) -> None:
        """Answer, once: the loop, the evaluator and the watchdog may each try. ``final`` may
        take time (an assumption); the watchdog may answer meanwhile, and the first answer
        wins (an assumption made after it stays, as after any filter)."""
        if self.closed:
            return
        if not complete:
            self.closed = True  # stop the work left
        try:
            answer = self.final(dict(self.known), complete)
        except BaseException as e:  # reported to the request, never to the thread
            if self._first():
                self.out.set_exception(e)
            return
        if self._first():
            self.out.set_result(answer)

    def fail(self, error: BaseException) -> None:
        """Answer with ``error`` (a decision raised it), unless answered already."""
        if self._first():
            self.out.set_exception(error)

    def _first(self) -> bool:
        with self.lock:
            if self.answered:
                return False
            self.answered = self.closed = True
            return True


class Evaluator:
    """A thread that makes first-time decisions off the HTTP loop (round robin over the
    waiting requests) and a watchdog thread that answers each request at its deadline.
    Threads start on the first :meth:`submit`; :meth:`close` stops them."""

    def __init__(self, core: ExtenderCore, *, clock: Callable[[], float] = time.monotonic,
                 max_waiting: int = MAX_WAITING, remote: bool = True) -> None:
        """``remote=False``: large engines are decided on the evaluator's thread (in this
        process) rather than in the evaluation worker process."""
        self.core = core
        self.clock = clock
        self.max_waiting = max_waiting
        self._cond = threading.Condition()
        self._queue: deque[Job] = deque()
        self._deadlines: list[tuple[float, int, Job]] = []
        self._seq = itertools.count()
        self._threads: list[threading.Thread] = []
        self._stop = False
        self._interval: float | None = None
        #: node decisions made here, and requests answered at their deadline
        self.evaluated = 0
        self.expired = 0
        #: of the evaluated, those made in the worker process
        self.in_worker = 0
        #: large engines are decided in a worker process when the profile can be named there
        self.profile_name = _named_profile(core) if remote else None
        self._pool: ProcessPoolExecutor | None = None

    def watch(self, job: Job) -> None:
        """Answer ``job`` at its deadline if it is not answered by then."""
        with self._cond:
            self._start()
            heapq.heappush(self._deadlines, (job.deadline, next(self._seq), job))
            self._cond.notify_all()

    def submit(self, job: Job) -> bool:
        """Queue ``job`` for its large decisions or its last step; ``False`` when
        :data:`max_waiting` requests wait already (or the evaluator is closed)."""
        with self._cond:
            if self._stop or len(self._queue) >= self.max_waiting:
                return False
            self._start()
            job.on_evaluator = True
            self._queue.append(job)
            self._cond.notify_all()
        return True

    def _start(self) -> None:
        if not self._threads:
            for target, name in ((self._run, "numalign-evaluator"),
                                 (self._watch, "numalign-deadlines")):
                t = threading.Thread(target=target, name=name, daemon=True)
                t.start()
                self._threads.append(t)

    def close(self) -> None:
        """Stop both threads and the worker process (waiting requests are answered as at
        their deadline)."""
        with self._cond:
            self._stop = True
            left = list(self._queue)
            self._queue.clear()
            self._cond.notify_all()
        for job in left:
            job.close(False)
        self._stop_pool(self._pool)
        for t in self._threads:
            if t is not threading.current_thread():
                t.join(timeout=5)

    # -------------------------------------------------------------- the worker process

    def _executor(self) -> ProcessPoolExecutor:
        if self._pool is None:
            # niced: on a busy machine the serving process gets the CPU first
            self._pool = ProcessPoolExecutor(max_workers=1, initializer=_lower_priority,
                                             mp_context=multiprocessing.get_context("spawn"))
        return self._pool

    def _stop_pool(self, pool: ProcessPoolExecutor | None) -> None:
        """Shut ``pool`` down and end its worker (one busy with a long decision is killed:
        its answer is not wanted any more)."""
        if pool is None:
            return
        if self._pool is pool:
            self._pool = None
        procs = list((getattr(pool, "_processes", None) or {}).values())
        pool.shutdown(wait=False, cancel_futures=True)
        for p in procs:
            p.join(timeout=2)
            if p.is_alive():
                p.kill()
                p.join(timeout=5)

    def decide_large(self, entry: NodeEntry, pod: Pod) -> Decision:
        """A first-time decision on a large engine: in the worker process (which rebuilds
        the engine from the NRT object, kept there for the next decisions), else here."""
        if entry.source is None or self.profile_name is None or self._stop:
            return self.core._evaluate(entry.node, pod)
        pool = self._executor()
        assumed = [a.pod for a in entry.assumed.values()]
        try:
            decision, seconds = pool.submit(evaluate_in_worker, self.profile_name, entry.digest,
                                            entry.source, assumed, pod).result(WORKER_TIMEOUT)
        except TimeoutError:
            self._stop_pool(pool)
            return (False, 0, f"numalign: the decision took more than {WORKER_TIMEOUT:.0f} s")
        except (BrokenProcessPool, CancelledError, RuntimeError):
            # the worker died or the pool was shut down: decide here
            self._stop_pool(pool)
            return self.core._evaluate(entry.node, pod)
        self.core._count_evaluation(seconds, decision[0])
        self.in_worker += 1
        return decision

    # -------------------------------------------------------------- threads

    def _switch(self, busy: bool) -> None:
        if busy and self._interval is None:
            self._interval = sys.getswitchinterval()
            sys.setswitchinterval(SWITCH_INTERVAL)
        elif not busy and self._interval is not None:
            sys.setswitchinterval(self._interval)
            self._interval = None

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._stop:
                    self._switch(False)
                    self._cond.wait()
                if self._stop:
                    self._switch(False)
                    return
                self._switch(True)
                job = self._queue.popleft()
            if job.closed:
                continue
            if job.large:
                entry = job.large.popleft()
                if entry.name not in job.known:
                    try:
                        job.known[entry.name] = self.core._miss(entry, job.pod, job.shape,
                                                                self.decide_large)
                    except Exception as e:  # answered as the request's error, as on the loop
                        job.fail(e)
                        continue
                    self.evaluated += 1
                if job.large and not job.closed:
                    with self._cond:
                        self._queue.append(job)  # its next node after the others' turn
                    continue
            with job.lock:
                job.large_done = True
                last = not job.small  # else the loop hands the last step back when done
            if last:
                job.close(True)

    def _watch(self) -> None:
        while True:
            with self._cond:
                while not self._stop:
                    if self._deadlines and self._deadlines[0][2].closed:
                        heapq.heappop(self._deadlines)
                        continue
                    wait = self._deadlines[0][0] - self.clock() if self._deadlines else None
                    if wait is not None and wait <= 0:
                        break
                    self._cond.wait(wait)
                if self._stop:
                    return
                _, _, job = heapq.heappop(self._deadlines)
            if not job.closed:
                self.expired += 1
                job.close(False)


def _named_profile(core: ExtenderCore) -> str | None:
    """The core's profile name when a worker process gets the same decisions from it (its
    filter is the registered one), else None."""
    try:
        same = get_profile(core.profile.name).filter is core.profile.filter
    except InputError:
        return None
    return core.profile.name if same else None


# ------------------------------------------------------------------ the verbs


def _assume_one(core: ExtenderCore, pod: Pod, passed: list[str], failed: dict[str, str]) -> None:
    """As ``ExtenderCore.filter``: the pod is assumed on the only node that passes."""
    if len(passed) == 1:
        why = core._assume(passed[0], pod)
        if why:
            failed[passed.pop()] = why


def _bounded(core: ExtenderCore, evaluator: Evaluator | None, pod: Pod, shape: int,
             budget: float, run: Callable[[Callable[[NodeEntry], Decision | None]], T],
             finish: Callable[[T, bool], T], heavy: Callable[[T], bool] | None = None,
             ) -> T | Future[T]:
    """``finish(run(cold), True)`` with the loop's share of first-time decisions made in the
    first pass; what is left is made later (small engines: by the loop in further turns;
    large ones: by the evaluator) and the answer is then a future of ``finish(run(known),
    complete)``. ``heavy(answer)``: ``finish`` would assume on a large engine."""
    schedule = core.install_on
    slice_end = time.perf_counter() + INLINE_SLICE
    small: dict[str, NodeEntry] = {}
    large: dict[str, NodeEntry] = {}

    def cold(entry: NodeEntry) -> Decision | None:
        if evaluator is None:
            return core._miss(entry, pod, shape)
        if engine_size(entry) > INLINE_SIZE:
            large.setdefault(entry.name, entry)
        elif schedule is None or time.perf_counter() < slice_end:
            return core._miss(entry, pod, shape)
        else:
            small.setdefault(entry.name, entry)
        return None

    first = run(cold)
    if evaluator is None or not (small or large or (heavy is not None and heavy(first))):
        return finish(first, True)

    def final(known: dict[str, Decision], complete: bool) -> T:
        return finish(run(lambda e: known.get(e.name)), complete)

    def is_heavy(known: dict[str, Decision]) -> bool:
        return heavy is not None and heavy(run(lambda e: known.get(e.name)))

    job = Job(pod, shape, deque(small.values()), deque(large.values()),
              evaluator.clock() + budget, final, is_heavy)
    # large decisions, or only a last step on a large engine: the evaluator's
    if (job.large or not job.small) and not evaluator.submit(job):
        return final({}, False)
    evaluator.watch(job)
    if job.small:
        assert schedule is not None
        schedule(lambda: _loop_turn(job, core, evaluator, schedule))
    return job.out


def _loop_turn(job: Job, core: ExtenderCore, evaluator: Evaluator,
               schedule: Callable[[Callable[[], None]], None]) -> None:
    """One turn of the loop on ``job``'s small first-time decisions (a slice), the next turn
    queued behind the requests that came meanwhile. When they are done: the evaluator answers
    if it still has the job's large decisions to make (or gets the last step back if it made
    them already); otherwise the loop answers - unless the last step is an assumption on a
    large engine, which goes to the evaluator."""
    end = time.perf_counter() + INLINE_SLICE
    first = True  # one decision per turn at least
    while True:
        if job.closed:
            return
        with job.lock:
            if not job.small:
                evaluator_done = job.large_done
                break
            entry = job.small[0]
        if not first and time.perf_counter() >= end:
            schedule(lambda: _loop_turn(job, core, evaluator, schedule))
            return
        first = False
        if entry.name not in job.known:
            try:
                job.known[entry.name] = core._miss(entry, job.pod, job.shape)
            except Exception as e:  # answered as the request's error, as without a job
                job.fail(e)
                return
        with job.lock:
            job.small.popleft()
    if job.on_evaluator:
        if evaluator_done and not evaluator.submit(job):
            job.close(False)
        return
    if job.heavy(job.known):
        if not evaluator.submit(job):
            job.close(False)
        return
    job.close(True)


def filter_bounded(core: ExtenderCore, evaluator: Evaluator | None, pod: Pod,
                   names: Sequence[str], shape: int, budget: float = DEFAULT_BUDGET,
                   ) -> tuple[list[str], dict[str, str]] | Future[tuple[list[str], dict[str, str]]]:
    """``core.filter`` within the request's work budget (see the module notes); with no
    evaluator, everything is decided here, as ``core.filter`` does."""
    Result = tuple[list[str], dict[str, str]]

    def run(cold: Callable[[NodeEntry], Decision | None]) -> Result:
        return core.filter(pod, names, shape=shape, cold=cold, assume=False)

    def heavy(res: Result) -> bool:
        entry = core.nodes.get(res[0][0]) if len(res[0]) == 1 else None
        return entry is not None and engine_size(entry) > INLINE_SIZE

    def finish(res: Result, complete: bool) -> Result:
        passed, failed = res
        if complete:
            _assume_one(core, pod, passed, failed)
        return passed, failed

    return _bounded(core, evaluator, pod, shape, budget, run, finish, heavy)


def prioritize_bounded(core: ExtenderCore, evaluator: Evaluator | None, pod: Pod,
                       names: Sequence[str], shape: int, budget: float = DEFAULT_BUDGET,
                       ) -> list[tuple[str, int]] | Future[list[tuple[str, int]]]:
    """``core.prioritize`` within the request's work budget (an undecided node scores 0)."""

    def run(cold: Callable[[NodeEntry], Decision | None]) -> list[tuple[str, int]]:
        return core.prioritize(pod, names, shape=shape, cold=cold)

    return _bounded(core, evaluator, pod, shape, budget, run, lambda res, _complete: res)


__all__ = ["DEFAULT_BUDGET", "INLINE_SIZE", "INLINE_SLICE", "MAX_WAITING", "SWITCH_INTERVAL",
           "Evaluator", "Job", "engine_size", "filter_bounded", "prioritize_bounded"]
