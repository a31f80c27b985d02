"""Scoring strategies: small interchangeable functions (scheduler-plugins style).

Node-level scores are vectorised over candidate nodes; NUMA-level scores take the number of
NUMA nodes each candidate would use. All scores are 0-100 before weighting.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

F64 = npt.NDArray[np.float64]


def least_allocated(alloc: npt.NDArray[np.int64], requested: npt.NDArray[np.int64], cols: Sequence[int]) -> F64:
    """kube-scheduler NodeResourcesFit LeastAllocated over ``cols`` (cpu, memory), after placement."""
    a = alloc[:, cols].astype(np.float64)
    r = requested[:, cols].astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        per = np.where(a > 0, (a - r) * 100.0 / a, 0.0)
    out: F64 = np.clip(per, 0, 100).mean(axis=1)
    return out


def most_allocated(alloc: npt.NDArray[np.int64], requested: npt.NDArray[np.int64], cols: Sequence[int]) -> F64:
    """MostAllocated (bin packing) over ``cols``, after placement."""
    out: F64 = 100.0 - least_allocated(alloc, requested, cols)
    return out


def balanced_allocation(alloc: npt.NDArray[np.int64], requested: npt.NDArray[np.int64], cols: Sequence[int]) -> F64:
    """BalancedAllocation: (1 - std of utilisation fractions) x 100."""
    a = alloc[:, cols].astype(np.float64)
    r = requested[:, cols].astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        frac = np.where(a > 0, r / a, 0.0)
    out: F64 = (1.0 - frac.std(axis=1)) * 100.0
    return out


def volcano_numa_aware(counts: Sequence[int], weight: int = 1) -> list[int]:
    """Volcano numa-aware: weight x (100 - 100 x count // max count over the candidates)."""
    top = max(counts, default=0)
    if top == 0:
        return [100 * weight for _ in counts]
    return [(100 - (100 * c) // top) * weight for c in counts]


def least_numa_nodes(count: int, max_numa_nodes: int, optimal_distance: bool = False) -> int:
    """scheduler-plugins LeastNUMANodes: 100 - count x (100 // max) (+ half a step if the
    chosen NUMA set has the minimal average distance). A pod bound to no NUMA node scores 100."""
    if count == 0:
        return 100
    step = 100 // max(1, max_numa_nodes)
    return 100 - count * step + (step // 2 if optimal_distance else 0)


__all__ = [
    "balanced_allocation",
    "least_allocated",
    "least_numa_nodes",
    "most_allocated",
    "volcano_numa_aware",
]
