"""The metrics of a sweep's table: one number per cell, read from the cell's profile summary
(the ``summary.json`` shape of :meth:`numalign.sim.metrics.MetricsRecorder.profile_summary`).

``timing`` metrics are wall-clock or CPU times: they differ between two runs of the same cell
(and between machines); the others are exact functions of the cell's parameters.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Metric:
    name: str
    label: str
    #: what it is, for the report's legend
    text: str
    #: the keys into the profile summary (nested)
    path: tuple[str, ...]
    timing: bool = False
    #: shown as a percentage in tables
    percent: bool = False


METRICS: tuple[Metric, ...] = (
    Metric("scheduled", "scheduled", "pods placed and admitted by their node", ("scheduled",)),
    Metric("pending", "pending", "pods waiting for a node at the end of the replay", ("pending",)),
    Metric("topology_affinity_errors", "TopologyAffinityErrors",
           "pods bound to a node whose Topology Manager then rejected them",
           ("topology_affinity_errors",)),
    Metric("rejected", "rejected", "pods refused by their node, every reason", ("rejected",)),
    Metric("dropped", "dropped", "pending pods given up when their trace deletion time passed",
           ("dropped",)),
    Metric("aligned_fraction", "aligned", "share of scheduled pods whose resources lie on the "
           "fewest NUMA nodes that can hold them", ("aligned_fraction",), percent=True),
    Metric("fragmentation_cpu", "CPU fragmentation", "time-weighted mean share of free CPU that "
           "no single-NUMA request can use", ("fragmentation", "cpu", "mean"), percent=True),
    Metric("fragmentation_gpu", "GPU fragmentation", "the same for GPUs (clusters with GPUs)",
           ("fragmentation", "gpu", "mean"), percent=True),
    Metric("utilisation_cpu", "CPU utilisation", "time-weighted mean share of CPU allocated",
           ("utilisation", "cpu", "mean"), percent=True),
    Metric("latency_p50_ms", "p50 ms", "median wall-clock time of one scheduling cycle",
           ("latency_ms", "p50"), timing=True),
    Metric("latency_p99_ms", "p99 ms", "99th percentile wall-clock time of one scheduling cycle",
           ("latency_ms", "p99"), timing=True),
    Metric("scheduler_cpu_s", "scheduler CPU s", "CPU time the scheduler spent on all its "
           "cycles", ("scheduler_cpu_s",), timing=True),
)
BY_NAME: Mapping[str, Metric] = {m.name: m for m in METRICS}
#: the report's plots unless the sweep file names its own (the issue's list)
DEFAULT_PLOTS = ("scheduled", "pending", "topology_affinity_errors", "aligned_fraction",
                 "fragmentation_cpu", "latency_p50_ms", "latency_p99_ms", "scheduler_cpu_s")
#: the keys of a profile summary that are timings (excluded when two runs are compared)
TIMING_KEYS = ("latency_ms", "scheduled_pods_per_cpu_s", "scheduler_cpu_s")


def metric_value(profile: Mapping[str, Any], metric: Metric) -> float | None:
    """The metric's number in a profile summary (None when absent, e.g. no GPUs)."""
    value: Any = profile
    for key in metric.path:
        if not isinstance(value, Mapping) or key not in value:
            return None
        value = value[key]
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value


def cell_metrics(profile: Mapping[str, Any]) -> dict[str, float | None]:
    """Every metric of one cell, by name."""
    return {m.name: metric_value(profile, m) for m in METRICS}


def without_timings(profile: Mapping[str, Any]) -> dict[str, Any]:
    """A profile summary without its timing keys: what is equal between two runs."""
    return {k: v for k, v in profile.items() if k not in TIMING_KEYS}
