"""A real Dask cluster on localhost for the sweep tests: one ``dask scheduler`` process and
``dask worker`` processes (each a nanny with one single-threaded worker process) over TCP on
ports the OS picks, started and stopped by the test, cleaned up even when the test fails."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from conftest import REPO

ENV = {**os.environ, "PYTHONPATH": str(REPO / "src")}
START_TIMEOUT_S = 60.0


def _dask() -> list[str]:
    exe = Path(sys.executable).with_name("dask")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "dask"]


@dataclass
class LocalDask:
    address: str
    scheduler: subprocess.Popen[bytes]
    nannies: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def worker_pids(self) -> list[int]:
        """The worker processes (the nannies' children) now alive."""
        import psutil

        out = []
        for nanny in self.nannies:
            with suppress(psutil.NoSuchProcess):
                out += [c.pid for c in psutil.Process(nanny.pid).children(recursive=True)
                        if "resource_tracker" not in " ".join(c.cmdline())]
        return out


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for p in procs:  # the whole session: a nanny's worker process too
        with suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    for p in procs:
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    for p in procs:
        with suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGKILL)
        with suppress(subprocess.TimeoutExpired):
            p.wait(timeout=5)


@contextmanager
def local_dask(tmp: Path, workers: int = 2) -> Iterator[LocalDask]:
    pytest.importorskip("distributed", reason="the sweep extra (dask[distributed]) is not installed")
    from distributed import Client

    info = tmp / "scheduler.json"
    logs = tmp / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    procs: list[subprocess.Popen[bytes]] = []

    def spawn(args: list[str], log: str) -> subprocess.Popen[bytes]:
        with open(logs / log, "wb") as out:
            p = subprocess.Popen([*_dask(), *args], stdout=out, stderr=subprocess.STDOUT,
                                 env=ENV, start_new_session=True, cwd=tmp)
        procs.append(p)
        return p

    try:
        scheduler = spawn(["scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                           "--scheduler-file", str(info)], "scheduler.log")
        deadline = time.monotonic() + START_TIMEOUT_S
        while not info.exists():
            if scheduler.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("dask scheduler did not start: "
                                   + (logs / "scheduler.log").read_text()[-2000:])
            time.sleep(0.05)
        address = json.loads(info.read_text())["address"]
        cluster = LocalDask(address, scheduler)
        for i in range(workers):
            cluster.nannies.append(spawn(
                ["worker", address, "--host", "127.0.0.1", "--nworkers", "1", "--nthreads", "1",
                 "--no-dashboard", "--name", f"w{i}", "--memory-limit", "0"], f"worker{i}.log"))
        with Client(address, timeout=START_TIMEOUT_S) as client:
            client.wait_for_workers(workers, timeout=START_TIMEOUT_S)
        yield cluster
    finally:
        _stop(procs[::-1])
