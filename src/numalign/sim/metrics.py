"""Simulator metrics: per-profile counters and time series, and the ``summary.json`` shape.

The recorder does no scheduling maths: the runner computes (alignment, utilisation,
fragmentation, latencies) and the recorder keeps them, per scheduler profile.

Events (``time_s`` is simulated time, latencies are wall-clock seconds):

* :meth:`MetricsRecorder.record_arrived` - a pod submitted by the workload (recreated pods
  are not arrivals, see :meth:`~MetricsRecorder.record_retry`);
* :meth:`~MetricsRecorder.record_placed` - a pod bound and admitted by the node, with its
  containers' NUMA affinities (masks) and resources, and ``aligned`` (computed by the caller:
  every resource of the pod within the minimal NUMA mask);
* :meth:`~MetricsRecorder.record_rejected` - bound, then refused by the node (``reason``:
  ``TopologyAffinityError``, ``SMTAlignmentError``, ``UnexpectedAdmissionError`` ...);
  in Kubernetes the pod stays Failed;
* :meth:`~MetricsRecorder.record_pending` - no node passed the filters this cycle; the pod
  stays pending until a later :meth:`~MetricsRecorder.record_placed`,
  :meth:`~MetricsRecorder.record_rejected` or :meth:`~MetricsRecorder.record_dropped`;
* :meth:`~MetricsRecorder.record_retry` - a rejected pod recreated (``--recreate``);
* :meth:`~MetricsRecorder.record_departed` - a running pod finished;
* samples: :meth:`~MetricsRecorder.sample_utilisation` (fraction of capacity in use per
  resource, e.g. ``{"cpu": 0.62, "gpu": 0.9}``), :meth:`~MetricsRecorder.sample_fragmentation`
  (fraction of free capacity that no single-NUMA request can use, per resource),
  :meth:`~MetricsRecorder.record_latency` (one scheduling cycle; also a ``latency_s``
  argument of the three outcome events).

Summary (:meth:`MetricsRecorder.summary`), per profile:

* ``arrived`` (pods the workload submitted), ``scheduled`` (placed and admitted),
  ``topology_affinity_errors`` (rejections with reason ``TopologyAffinityError``),
  ``rejected`` (all reasons) and ``rejections`` by reason, ``pending`` (pods pending now),
  ``dropped`` (pending pods given up), ``unschedulable_attempts`` and
  ``unschedulable_reasons`` (per reason the scheduler gave for a cycle that found no node: the
  filter's refusal of the last node it tried, at most :data:`MAX_UNSCHEDULABLE_REASONS`
  distinct reasons, the others counted under :data:`OTHER_REASONS`), ``retries`` (rejected pods
  recreated), ``departed``. Every submitted pod ends in exactly one outcome, so
  ``arrived + retries == scheduled + rejected + pending + dropped`` (see :func:`unaccounted`);
* ``aligned`` and ``aligned_fraction`` = aligned / scheduled (0 when nothing was scheduled);
  ``numa_nodes_used``: placed pods by the number of NUMA nodes their containers' affinities
  cover together (``"0"``: no NUMA affinity at all, e.g. a Burstable pod);
* ``latency_ms``: ``p50``, ``p90``, ``p99`` (linear interpolation between order statistics),
  ``mean``, ``max`` over the scheduling cycles; ``scheduling_cycles``;
* ``scheduler_cpu_s``: the CPU time the scheduler's thread spent on all its cycles
  (:meth:`~MetricsRecorder.set_cpu_time`; None when not measured), and
  ``scheduled_pods_per_cpu_s`` = scheduled / ``scheduler_cpu_s``: pods placed and admitted per
  second of that time (None when it was not measured or is 0). Cycles that placed nothing
  (a pending pod tried again, a pod the node then rejected) cost time and place no pod. CPU
  time, not wall time: wall time on a shared machine varies between identical runs;
* ``utilisation`` and ``fragmentation``: per resource ``mean`` (time-weighted over the
  samples: each sample holds until the next), ``max`` and ``final``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

TOPOLOGY_AFFINITY_ERROR = "TopologyAffinityError"
#: distinct reasons kept in ``unschedulable_reasons`` (a family's words may name masks: many)
MAX_UNSCHEDULABLE_REASONS = 32
#: where the reasons beyond :data:`MAX_UNSCHEDULABLE_REASONS` are counted
OTHER_REASONS = "(other reasons)"

Point = tuple[float, float]


@dataclass(frozen=True)
class ContainerPlacement:
    """Where one container's resources landed: its NUMA affinity mask (None: none)."""

    name: str
    numa: int | None
    resources: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class PlacedPod:
    """One placed pod as recorded."""

    time_s: float
    pod: str
    node: str | None
    containers: tuple[ContainerPlacement, ...]
    aligned: bool
    numa_nodes: int


@dataclass
class ProfileMetrics:
    """Counters and series of one profile (mutable; filled by :class:`MetricsRecorder`)."""

    name: str
    arrived: int = 0
    scheduled: int = 0
    aligned: int = 0
    rejections: Counter[str] = field(default_factory=Counter)
    unschedulable_attempts: int = 0
    unschedulable_reasons: Counter[str] = field(default_factory=Counter)
    retries: int = 0
    departed: int = 0
    dropped: int = 0
    pending_pods: set[str] = field(default_factory=set)
    numa_nodes_used: Counter[int] = field(default_factory=Counter)
    latencies_s: list[float] = field(default_factory=list)
    cpu_time_s: float | None = None
    #: cumulative TopologyAffinityErrors over time (one point per error, plus time 0)
    errors: list[Point] = field(default_factory=list)
    #: pending pods over time (at every pending change)
    pending: list[Point] = field(default_factory=list)
    utilisation: dict[str, list[Point]] = field(default_factory=dict)
    fragmentation: dict[str, list[Point]] = field(default_factory=dict)
    placed: list[PlacedPod] = field(default_factory=list)
    keep_placements: bool = False
    #: per kubelet release of the node: scheduled, aligned and each rejection reason
    by_release: dict[str, Counter[str]] = field(default_factory=dict)

    @property
    def topology_affinity_errors(self) -> int:
        return self.rejections[TOPOLOGY_AFFINITY_ERROR]

    @property
    def rejected(self) -> int:
        return sum(self.rejections.values())


@dataclass(frozen=True)
class ProfileSeries:
    """Time series of one profile for plots (see :meth:`MetricsRecorder.series`)."""

    errors: list[Point]
    pending: list[Point]
    utilisation: dict[str, list[Point]]
    fragmentation: dict[str, list[Point]]
    numa_nodes_used: dict[int, int]


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-quantile (0-1) with linear interpolation (numpy's default); nan if empty."""
    if not values:
        return math.nan
    if not 0 <= q <= 1:
        raise ValueError(f"quantile must be in [0, 1], got {q}")
    ordered = sorted(values)
    pos = q * (len(ordered) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def time_weighted_mean(points: Sequence[Point]) -> float:
    """Mean of a step function (each sample holds until the next); nan if empty.

    With one sample, or all samples at the same time, the plain mean of the values."""
    if not points:
        return math.nan
    span = points[-1][0] - points[0][0]
    if span <= 0:
        return sum(v for _, v in points) / len(points)
    total = 0.0
    for (t0, v), (t1, _) in pairwise(points):
        total += v * (t1 - t0)
    return total / span


def unaccounted(profile: Mapping[str, Any]) -> int:
    """Pods of a profile summary without an outcome: ``arrived + retries - (scheduled +
    rejected + pending + dropped)``; 0 when the books balance."""
    ins = int(profile.get("arrived", 0)) + int(profile.get("retries", 0))
    outs = sum(int(profile.get(k, 0)) for k in ("scheduled", "rejected", "pending", "dropped"))
    return ins - outs


def downsample(points: Sequence[Point], max_points: int) -> list[Point]:
    """At most ``max_points`` points, evenly strided, always keeping the first and the last."""
    n = len(points)
    if max_points < 2 or n <= max_points:
        return list(points)
    step = (n - 1) / (max_points - 1)
    return [points[round(i * step)] for i in range(max_points)]


def _clean(x: float, digits: int = 6) -> float | None:
    """A JSON-safe float (None for nan/inf)."""
    if not math.isfinite(x):
        return None
    return round(x, digits)


def _series_stats(series: Mapping[str, Sequence[Point]]) -> dict[str, dict[str, float | None]]:
    out: dict[str, dict[str, float | None]] = {}
    for name in sorted(series):
        pts = series[name]
        if not pts:
            continue
        out[name] = {
            "mean": _clean(time_weighted_mean(pts)),
            "max": _clean(max(v for _, v in pts)),
            "final": _clean(pts[-1][1]),
        }
    return out


class MetricsRecorder:
    """Per-profile counters and time series of a simulation (see the module docstring).

    ``keep_placements`` keeps every :class:`PlacedPod` (for tests and replays); off by
    default to keep memory flat on long traces.
    """

    def __init__(self, profiles: Iterable[str] = (), *, keep_placements: bool = False) -> None:
        self.keep_placements = keep_placements
        self.profiles: dict[str, ProfileMetrics] = {}
        for p in profiles:
            self.profile(p)

    def profile(self, name: str) -> ProfileMetrics:
        """The metrics of profile ``name`` (created on first use, in first-use order)."""
        m = self.profiles.get(name)
        if m is None:
            m = self.profiles[name] = ProfileMetrics(name, keep_placements=self.keep_placements)
            m.errors.append((0.0, 0.0))
        return m

    # -- outcomes ------------------------------------------------------------------------

    def _leave_pending(self, m: ProfileMetrics, time_s: float, pod: str) -> None:
        if pod in m.pending_pods:
            m.pending_pods.discard(pod)
            m.pending.append((time_s, float(len(m.pending_pods))))

    def record_arrived(self, profile: str, time_s: float, pod: str) -> None:
        """A pod submitted by the workload (its first scheduling attempt follows)."""
        del time_s, pod
        self.profile(profile).arrived += 1

    def record_placed(
        self,
        profile: str,
        time_s: float,
        pod: str,
        containers: Sequence[ContainerPlacement],
        aligned: bool,
        *,
        node: str | None = None,
        latency_s: float | None = None,
        numa_nodes: int | None = None,
        release: str | None = None,
    ) -> None:
        """A pod bound and admitted. ``numa_nodes`` defaults to the size of the union of the
        containers' NUMA masks (0 when none has one); ``release``: the node's kubelet release."""
        m = self.profile(profile)
        m.scheduled += 1
        if aligned:
            m.aligned += 1
        if numa_nodes is None:
            union = 0
            for c in containers:
                if c.numa is not None:
                    union |= c.numa
            numa_nodes = union.bit_count()
        if release:
            counts = m.by_release.setdefault(release, Counter())
            counts["scheduled"] += 1
            counts["aligned"] += int(aligned)
            counts[f"numa_nodes_{numa_nodes}"] += 1
        m.numa_nodes_used[numa_nodes] += 1
        self._leave_pending(m, time_s, pod)
        if latency_s is not None:
            m.latencies_s.append(latency_s)
        if m.keep_placements:
            m.placed.append(PlacedPod(time_s, pod, node, tuple(containers), aligned, numa_nodes))

    def record_rejected(
        self,
        profile: str,
        time_s: float,
        pod: str,
        reason: str = TOPOLOGY_AFFINITY_ERROR,
        *,
        latency_s: float | None = None,
        release: str | None = None,
    ) -> None:
        """A pod bound to a node whose admission refused it (the kubelet's ``reason``)."""
        m = self.profile(profile)
        m.rejections[reason] += 1
        if release:
            m.by_release.setdefault(release, Counter())[reason] += 1
        if reason == TOPOLOGY_AFFINITY_ERROR:
            m.errors.append((time_s, float(m.topology_affinity_errors)))
        self._leave_pending(m, time_s, pod)
        if latency_s is not None:
            m.latencies_s.append(latency_s)

    def record_pending(
        self, profile: str, time_s: float, pod: str, *, latency_s: float | None = None,
        reason: str | None = None,
    ) -> None:
        """No node passed the filters for ``pod`` in this cycle: it is (still) pending
        (``reason``: the one the scheduler gave, e.g. the last node's filter refusal)."""
        m = self.profile(profile)
        m.unschedulable_attempts += 1
        if reason:
            known = m.unschedulable_reasons
            known[reason if reason in known or len(known) < MAX_UNSCHEDULABLE_REASONS else OTHER_REASONS] += 1
        if pod not in m.pending_pods:
            m.pending_pods.add(pod)
            m.pending.append((time_s, float(len(m.pending_pods))))
        if latency_s is not None:
            m.latencies_s.append(latency_s)

    def record_dropped(self, profile: str, time_s: float, pod: str) -> None:
        """A pending pod given up (e.g. its trace deletion time passed before it ran)."""
        m = self.profile(profile)
        m.dropped += 1
        self._leave_pending(m, time_s, pod)

    def record_retry(self, profile: str, time_s: float, pod: str) -> None:
        """A rejected pod recreated by its controller (``--recreate``)."""
        del time_s, pod
        self.profile(profile).retries += 1

    def record_departed(self, profile: str, time_s: float, pod: str) -> None:
        """A running pod finished and released its resources."""
        del time_s, pod
        self.profile(profile).departed += 1

    def record_latency(self, profile: str, seconds: float) -> None:
        """One scheduling cycle's wall time (when not given with the outcome)."""
        self.profile(profile).latencies_s.append(seconds)

    def set_cpu_time(self, profile: str, seconds: float) -> None:
        """The CPU time the scheduler spent for the profile (thread time, not wall time): the
        denominator of ``scheduled_pods_per_cpu_s``."""
        self.profile(profile).cpu_time_s = seconds

    # -- samples -------------------------------------------------------------------------

    def sample_utilisation(self, profile: str, time_s: float, values: Mapping[str, float]) -> None:
        """Fraction of capacity in use now, per resource (``cpu``, ``gpu``, ``memory`` ...)."""
        series = self.profile(profile).utilisation
        for name, v in values.items():
            series.setdefault(name, []).append((time_s, float(v)))

    def sample_fragmentation(
        self, profile: str, time_s: float, values: Mapping[str, float]
    ) -> None:
        """Fraction of free capacity unusable by a single-NUMA request, per resource."""
        series = self.profile(profile).fragmentation
        for name, v in values.items():
            series.setdefault(name, []).append((time_s, float(v)))

    # -- results -------------------------------------------------------------------------

    def profile_summary(self, name: str) -> dict[str, Any]:
        m = self.profile(name)
        lat = m.latencies_s
        cycles = len(lat)
        cpu = m.cpu_time_s
        per_cpu_s = m.scheduled / cpu if cpu is not None and cpu > 0 else None
        return {
            "arrived": m.arrived,
            "scheduled": m.scheduled,
            "topology_affinity_errors": m.topology_affinity_errors,
            "pending": len(m.pending_pods),
            "aligned": m.aligned,
            "aligned_fraction": _clean(m.aligned / m.scheduled if m.scheduled else 0.0),
            "scheduler_cpu_s": None if cpu is None else _clean(cpu, 4),
            "scheduled_pods_per_cpu_s": None if per_cpu_s is None else _clean(per_cpu_s, 2),
            "latency_ms": {
                "p50": _clean(percentile(lat, 0.50) * 1000, 4),
                "p90": _clean(percentile(lat, 0.90) * 1000, 4),
                "p99": _clean(percentile(lat, 0.99) * 1000, 4),
                "mean": _clean(sum(lat) / cycles * 1000 if cycles else math.nan, 4),
                "max": _clean(max(lat) * 1000 if lat else math.nan, 4),
            },
            "retries": m.retries,
            "rejected": m.rejected,
            "rejections": dict(sorted(m.rejections.items())),
            "unschedulable_attempts": m.unschedulable_attempts,
            "unschedulable_reasons": dict(sorted(m.unschedulable_reasons.items(), key=lambda kv: (-kv[1], kv[0]))),
            "dropped": m.dropped,
            "departed": m.departed,
            "scheduling_cycles": cycles,
            "numa_nodes_used": {str(k): v for k, v in sorted(m.numa_nodes_used.items())},
            "utilisation": _series_stats(m.utilisation),
            "fragmentation": _series_stats(m.fragmentation),
            "by_kubelet_release": {r: dict(sorted(c.items())) for r, c in sorted(m.by_release.items())},
        }

    def summary(self, **extra: Any) -> dict[str, Any]:
        """``{"profiles": {name: {...}}}`` (fields in the module docstring); keyword arguments
        are added at the top level (``workload=...``, ``cluster=...``)."""
        out: dict[str, Any] = {"profiles": {n: self.profile_summary(n) for n in self.profiles}}
        out.update(extra)
        return out

    def series(self, max_points: int = 2000) -> dict[str, ProfileSeries]:
        """Per-profile time series for the report, each at most ``max_points`` long."""
        out: dict[str, ProfileSeries] = {}
        for name, m in self.profiles.items():
            out[name] = ProfileSeries(
                errors=downsample(m.errors, max_points),
                pending=downsample(m.pending, max_points),
                utilisation={k: downsample(v, max_points) for k, v in m.utilisation.items()},
                fragmentation={k: downsample(v, max_points) for k, v in m.fragmentation.items()},
                numa_nodes_used=dict(sorted(m.numa_nodes_used.items())),
            )
        return out
