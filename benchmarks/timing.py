"""Small timing helpers shared by the benchmarks."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def measure(fn: Callable[[], object], *, min_runs: int = 5, budget_s: float = 1.0) -> list[float]:
    """Run ``fn`` repeatedly (at least ``min_runs`` times, about ``budget_s`` seconds)."""
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < min_runs or time.perf_counter() - start < budget_s:
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        if len(times) >= 10_000:
            break
    return times


def median_ms(times: list[float]) -> float:
    return statistics.median(times) * 1e3


def p99_ms(times: list[float]) -> float:
    s = sorted(times)
    return s[min(len(s) - 1, int(len(s) * 0.99))] * 1e3
