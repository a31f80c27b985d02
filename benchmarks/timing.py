"""Small timing helpers shared by the benchmarks, and the description of the machine they ran on.

Speed is measured in CPU time (``time.process_time``: this process only, so other load on a
shared box does not inflate it) and reported as the best and the median of a few runs;
per-call latencies (``measure``) are wall-clock and say so.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def measure(fn: Callable[[], object], *, min_runs: int = 5, budget_s: float = 1.0) -> list[float]:
    """Run ``fn`` repeatedly (at least ``min_runs`` times, about ``budget_s`` seconds); wall
    seconds per call."""
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < min_runs or time.perf_counter() - start < budget_s:
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        if len(times) >= 10_000:
            break
    return times


def cpu_runs(fn: Callable[[], object], runs: int = 3) -> list[float]:
    """CPU seconds (``time.process_time``) of ``runs`` calls of ``fn``."""
    out = []
    for _ in range(runs):
        t0 = time.process_time()
        fn()
        out.append(time.process_time() - t0)
    return out


def best_median(values: list[float]) -> tuple[float, float]:
    """(min, median) of ``values``."""
    return min(values), statistics.median(values)


def median_ms(times: list[float]) -> float:
    return statistics.median(times) * 1e3


def p99_ms(times: list[float]) -> float:
    s = sorted(times)
    return s[min(len(s) - 1, int(len(s) * 0.99))] * 1e3


def peak_rss_mib() -> float:
    """This process's peak resident set size so far (``getrusage`` ``ru_maxrss``; KiB on Linux)."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / (1024 * 1024) if sys.platform == "darwin" else rss / 1024


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith(("model name", "Processor", "cpu model")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def machine_description() -> str:
    """CPU model, cores (all / usable by this process), load, Python: printed above every
    ``make bench`` so its numbers can be read against the box they came from."""
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    try:
        load = "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        load = "load average unknown"
    return (f"machine: {_cpu_model()}, {os.cpu_count()} logical CPUs ({usable} usable), {load}; "
            f"{platform.python_implementation()} {platform.python_version()} on "
            f"{platform.system()} {platform.release()}")


def child_json(module: str, *args: str) -> dict[str, Any]:
    """Run ``python -m module args`` from the repository root (the checkout first on the path)
    and return the JSON object on the last line of its output; its stderr tail on failure."""
    root = Path(__file__).resolve().parents[1]
    path = os.environ.get("PYTHONPATH", "")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(root), path) if p)}
    proc = subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True,
                          env=env, cwd=root, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {proc.stderr.strip()[-2000:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result
