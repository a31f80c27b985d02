"""Helpers of the sweep tests: a small trace in the Alibaba 2025 format, and a real Dask
cluster on localhost - one ``dask scheduler`` process and ``dask worker`` processes (each a
nanny with one single-threaded worker process) over TCP on ports the OS picks, started and
stopped by the test, cleaned up even when the test fails."""

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


HEADER = ("instance_sn,role,app_name,cpu_request,cpu_limit,gpu_request,gpu_limit,rdma_request,"
          "rdma_limit,memory_request,memory_limit,disk_request,disk_limit,max_instance_per_node,"
          "creation_time,scheduled_time,deletion_time")


def write_trace(path: Path, rows: int, bad_row: int | None = None) -> Path:
    """A small trace in the Alibaba 2025 format: GPU (HN) and CPU (CN) instances arriving
    every 5 s, each running 120-300 s; data row ``bad_row`` (1-based, file line
    ``bad_row + 1``) has a CPU limit below its request."""
    lines = [HEADER]
    for i in range(1, rows + 1):
        hn = i % 3 != 0
        cpu, gpu, rdma, mem = (8, 1, 25, 64) if hn else (16, 0, 0, 128)
        limit = cpu - 4 if i == bad_row else cpu
        t = 5 * i
        lines.append(f"instance_{i},{'HN' if hn else 'CN'},app,{cpu},{limit},{gpu},{gpu},{rdma},"
                     f"{rdma},{mem},{mem},10,10,1,{t},{t + 1},{t + 120 + 60 * (i % 4)}")
    path.write_text("\n".join(lines) + "\n")
    return path


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
        with suppress(subprocess.TimeoutExpired):
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
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
