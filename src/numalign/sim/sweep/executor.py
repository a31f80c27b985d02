"""Running cells on Dask distributed: the one module of numalign that imports Dask (and only
when it connects: checking an address imports nothing).

**Where.** By default a ``LocalCluster`` on this machine: one worker process per core
(``threads_per_worker=1``: a cell is pure Python and holds the GIL), its HTTP endpoint on a
free localhost port. With an
address (``--scheduler tcp://HOST:PORT``, else ``$DASK_SCHEDULER_ADDRESS``) the cells go to
that cluster's workers, which need the same numalign version (checked) and the same files at
the same paths.

**Failures.** Each cell is one task (:func:`numalign.sim.sweep.cell.run_cell`). A worker lost
while it runs a cell (killed, out of memory, its machine gone) makes the scheduler run the
cell again on another worker; a cell whose workers died more than Dask's
``distributed.scheduler.allowed-failures`` times (default 3) fails with ``KilledWorker``. A
cell that raises is run again ``retries`` times (``client.submit(..., retries=N)``) before
its error is reported; input errors are results, not exceptions, so they are not retried.
Every start of a cell is an event on the scheduler (topic ``numalign-sweep``): a cell that
started more than once was rerun, and the scheduler's own ``remove-worker`` events (topic
``all``) count the workers lost during the sweep.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from numalign.errors import InputError, one_line
from numalign.sim.sweep.cell import TOPIC, CellTask, numalign_version, run_cell

if TYPE_CHECKING:
    from distributed import Client, LocalCluster

ADDRESS_ENV = "DASK_SCHEDULER_ADDRESS"
_ADDRESS = re.compile(r"(tcp|tls|ws|wss|ucx)://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):([0-9]{1,5})")
#: how long finished cells' start events may lag behind their results
_EVENT_GRACE_S = 2.0


@dataclass
class Connection:
    client: Client
    #: the LocalCluster this process started (None: an existing cluster by address)
    local: LocalCluster | None
    address: str
    workers: int


def default_workers() -> int:
    """One worker per core this process may use."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def check_address(address: str) -> str:
    """``SCHEME://HOST:PORT`` (tcp, tls, ws, wss, ucx), or a one-line error."""
    address = address.strip()
    m = _ADDRESS.fullmatch(address)
    if m is None or not 1 <= int(m.group(3)) <= 65535:
        raise InputError(f"expected a Dask scheduler address like tcp://HOST:8786, got "
                         f"{address[:200]!r}", "--scheduler")
    return address


def scheduler_address(given: str | None, environ: Mapping[str, str] = os.environ,
                      ) -> tuple[str | None, str]:
    """The scheduler to use (``--scheduler``, else ``$DASK_SCHEDULER_ADDRESS``; None: a
    LocalCluster) and where it came from, checked."""
    address, where = (given, "--scheduler") if given is not None else (
        environ.get(ADDRESS_ENV) or None, ADDRESS_ENV)
    if address is None:
        return None, where
    try:
        return check_address(address), where
    except InputError as e:
        raise InputError(e.problem, where) from None


def connect(address: str | None, *, where: str = "--scheduler", workers: int | None,
            timeout_s: float) -> Connection:
    """A client on the scheduler at ``address`` (see :func:`scheduler_address`; ``where``
    names it in errors), or on a new LocalCluster of ``workers`` processes (default: one per
    core). Errors (unreachable scheduler, no worker, another numalign version on a worker)
    are one-line InputErrors."""
    from distributed import Client, LocalCluster

    if address is None:
        n = workers or default_workers()
        # the scheduler's HTTP server (and dashboard, with bokeh) on a free localhost port:
        # None would still bind the default 8787, taken by another cluster
        local = LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                             dashboard_address="127.0.0.1:0", silence_logs=logging.ERROR)
        client = Client(local)
        conn = Connection(client, local, str(local.scheduler_address), n)
    else:
        try:
            client = Client(address, timeout=timeout_s)
        except (OSError, ValueError) as e:
            raise InputError(f"cannot reach the Dask scheduler at {address}: {one_line(str(e))}",
                             where) from None
        try:
            client.wait_for_workers(1, timeout=timeout_s)
        except TimeoutError:
            client.close()
            raise InputError(f"no worker connected to the Dask scheduler at {address} within "
                             f"{timeout_s:g} s", where) from None
        conn = Connection(client, None, address, len(client.scheduler_info()["workers"]))
    try:
        _check_versions(conn.client)
    except BaseException:
        close(conn)
        raise
    return conn


def _check_versions(client: Client) -> None:
    ours = numalign_version()
    try:
        theirs = client.run(numalign_version)
    except Exception as e:
        raise InputError(f"a worker cannot run numalign ({type(e).__name__}: "
                         f"{one_line(str(e))[:200]}); install numalign[sweep] {ours} on every "
                         "worker", "workers") from None
    for addr, version in sorted(theirs.items()):
        if version != ours:
            raise InputError(f"worker {addr} runs numalign {version}, this client {ours}: "
                             "cells would not match; install the same version", "workers")


def close(conn: Connection) -> None:
    with suppress(Exception):
        conn.client.close()
    if conn.local is not None:
        with suppress(Exception):
            conn.local.close()


@dataclass
class RunStats:
    #: cell id -> how many times it started (from the workers' start events)
    starts: Counter[str] = field(default_factory=Counter)
    #: addresses of workers lost during the sweep
    lost_workers: set[str] = field(default_factory=set)

    @property
    def reruns(self) -> int:
        return sum(n - 1 for n in self.starts.values() if n > 1)


@contextmanager
def _events(client: Client, run: str, stats: RunStats,
            started: Callable[[str], None]) -> Iterator[None]:
    lock = threading.Lock()

    def on_start(event: tuple[float, Any]) -> None:
        msg = event[1]
        if isinstance(msg, dict) and msg.get("run") == run:
            with lock:
                stats.starts[str(msg.get("cell"))] += 1
            started(str(msg.get("cell")))

    def on_all(event: tuple[float, Any]) -> None:
        msg = event[1]
        if isinstance(msg, dict) and msg.get("action") == "remove-worker" and not msg.get("expected"):
            with lock:
                stats.lost_workers.add(str(msg.get("worker")))

    client.subscribe_topic(TOPIC, on_start)
    client.subscribe_topic("all", on_all)
    try:
        yield
    finally:
        for topic in (TOPIC, "all"):
            with suppress(Exception):
                client.unsubscribe_topic(topic)


def run_cells(
    conn: Connection,
    tasks: Sequence[CellTask],
    *,
    retries: int,
    on_start: Callable[[str], None],
    on_result: Callable[[CellTask, dict[str, Any]], None],
    on_error: Callable[[CellTask, str], None],
) -> RunStats:
    """Submit every task, and call ``on_result`` (a finished cell's result document, failed
    or not) or ``on_error`` (an exception Dask reports after its retries) as each completes,
    in completion order, on this thread. Ctrl-C cancels the cells not finished and
    re-raises."""
    from distributed import as_completed

    stats = RunStats()
    if not tasks:
        return stats
    run = tasks[0].run
    client = conn.client
    with _events(client, run, stats, on_start):
        futures = {
            client.submit(run_cell, task, key=f"numalign-cell-{task.cell.id}-{run[:8]}",
                          retries=retries, pure=False): task
            for task in tasks
        }
        try:
            for fut in as_completed(list(futures)):
                task = futures.pop(fut)
                if fut.status == "finished":
                    on_result(task, fut.result())
                else:
                    try:
                        exc = fut.exception()
                    except Exception as e:  # cancelled on the scheduler
                        exc = e
                    on_error(task, f"{type(exc).__name__}: {one_line(str(exc))}")
                fut.release()
        except BaseException:
            with suppress(Exception):
                client.cancel(list(futures), force=True)
            raise
        _await_start_events(stats, [t.cell.id for t in tasks])
    return stats


def _await_start_events(stats: RunStats, ids: Sequence[str]) -> None:
    """Start events travel apart from results: wait (briefly) until every cell has one."""
    deadline = time.monotonic() + _EVENT_GRACE_S
    while time.monotonic() < deadline and any(stats.starts[i] < 1 for i in ids):
        time.sleep(0.05)
