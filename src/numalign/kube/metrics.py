"""A small, thread-safe Prometheus text exposition (format 0.0.4) for the extender.

Hand-written rather than ``prometheus_client``: three metric types with labels are all the
service needs, and it keeps the extender free of dependencies beyond the standard library.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence

#: the kubelet's topology manager histogram buckets (seconds)
ADMISSION_BUCKETS = (
    0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
)
REQUEST_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)

Labels = tuple[tuple[str, str], ...]


def _escape(v: str) -> str:
    return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(labels: Labels, extra: Labels = ()) -> str:
    items = labels + extra
    if not items:
        return ""
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in items) + "}"


def _num(v: float) -> str:
    if math.isinf(v):
        return "+Inf"
    return repr(float(v)) if not float(v).is_integer() else str(int(v))


class Metric:
    kind = "untyped"

    def __init__(self, name: str, help_text: str) -> None:
        self.name = name
        self.help = help_text
        self._lock = threading.Lock()

    def lines(self) -> list[str]:
        raise NotImplementedError


class Counter(Metric):
    kind = "counter"

    def __init__(self, name: str, help_text: str) -> None:
        super().__init__(name, help_text)
        self._values: dict[Labels, float] = {}

    def inc(self, amount: float = 1.0, **labels: str) -> None:
        key = tuple(sorted(labels.items()))
        with self._lock:
            self._values[key] = self._values.get(key, 0.0) + amount

    def value(self, **labels: str) -> float:
        return self._values.get(tuple(sorted(labels.items())), 0.0)

    def lines(self) -> list[str]:
        with self._lock:
            items = sorted(self._values.items())
        if not items:
            items = [((), 0.0)]
        return [f"{self.name}{_labels(k)} {_num(v)}" for k, v in items]


class Gauge(Counter):
    kind = "gauge"

    def set(self, value: float, **labels: str) -> None:
        with self._lock:
            self._values[tuple(sorted(labels.items()))] = value


class Histogram(Metric):
    kind = "histogram"

    def __init__(self, name: str, help_text: str, buckets: Sequence[float]) -> None:
        super().__init__(name, help_text)
        self.buckets = tuple(sorted(buckets))
        self._series: dict[Labels, tuple[list[int], list[float]]] = {}  # counts, [sum, count]

    def observe(self, value: float, **labels: str) -> None:
        key = tuple(sorted(labels.items()))
        with self._lock:
            counts, total = self._series.setdefault(key, ([0] * len(self.buckets), [0.0, 0.0]))
            for i, b in enumerate(self.buckets):
                if value <= b:
                    counts[i] += 1
            total[0] += value
            total[1] += 1

    def count(self, **labels: str) -> int:
        s = self._series.get(tuple(sorted(labels.items())))
        return int(s[1][1]) if s else 0

    def lines(self) -> list[str]:
        with self._lock:
            items = sorted((k, (list(c), list(t))) for k, (c, t) in self._series.items())
        if not items:
            items = [((), ([0] * len(self.buckets), [0.0, 0.0]))]
        out: list[str] = []
        for key, (counts, total) in items:
            for b, c in zip(self.buckets, counts, strict=True):
                out.append(f"{self.name}_bucket{_labels(key, (('le', _num(b)),))} {c}")
            out.append(f"{self.name}_bucket{_labels(key, (('le', '+Inf'),))} {_num(total[1])}")
            out.append(f"{self.name}_sum{_labels(key)} {_num(total[0])}")
            out.append(f"{self.name}_count{_labels(key)} {_num(total[1])}")
        return out


class Registry:
    def __init__(self) -> None:
        self.metrics: list[Metric] = []

    def add(self, metric: Metric) -> Metric:
        self.metrics.append(metric)
        return metric

    def counter(self, name: str, help_text: str) -> Counter:
        m = Counter(name, help_text)
        self.add(m)
        return m

    def gauge(self, name: str, help_text: str) -> Gauge:
        m = Gauge(name, help_text)
        self.add(m)
        return m

    def histogram(self, name: str, help_text: str, buckets: Sequence[float]) -> Histogram:
        m = Histogram(name, help_text, buckets)
        self.add(m)
        return m

    def exposition(self) -> str:
        out: list[str] = []
        for m in self.metrics:
            out.append(f"# HELP {m.name} {m.help}")
            out.append(f"# TYPE {m.name} {m.kind}")
            out.extend(m.lines())
        return "\n".join(out) + "\n"


class ExtenderMetrics:
    """The extender's metrics: the kubelet's topology-manager names plus per-verb requests."""

    def __init__(self) -> None:
        r = self.registry = Registry()
        self.admission_requests = r.counter(
            "topology_manager_admission_requests_total",
            "Number of admission requests (numalign: node admissions evaluated by the extender).")
        self.admission_errors = r.counter(
            "topology_manager_admission_errors_total",
            "Number of admission request failures (numalign: nodes that refused the pod).")
        self.admission_duration = r.histogram(
            "topology_manager_admission_duration_seconds",
            "Duration in seconds of one node admission evaluation.", ADMISSION_BUCKETS)
        self.requests = r.counter(
            "numalign_extender_requests_total", "HTTP requests by verb and status code.")
        self.request_duration = r.histogram(
            "numalign_extender_request_duration_seconds", "HTTP request latency by verb.",
            REQUEST_BUCKETS)
        self.nodes = r.gauge("numalign_extender_nodes", "Nodes known from NodeResourceTopology.")
        self.assumed = r.gauge("numalign_extender_assumed_pods", "Pods assumed on nodes.")
