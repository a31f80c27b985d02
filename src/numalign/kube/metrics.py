"""The extender's and the exporter's Prometheus metrics, with ``prometheus_client``.

Every name carries numalign's own prefix: the extender evaluates node admissions the way the
kubelet's Topology Manager would, but it is not the kubelet, and its series must not be mistaken
for the kubelet's (``kubelet_topology_manager_admission_requests_total``,
``..._errors_total``, ``..._duration_ms`` with buckets ``ExponentialBuckets(0.05, 2, 15)`` ms).
The names mirror the kubelet's where the meaning matches, with SI units (seconds).

Each :class:`ExtenderMetrics` has its own registry (so several extenders can live in one
process, as in the tests) with the process and platform collectors registered: CPU seconds,
RSS, open file descriptors and the Python version come free.
"""

from __future__ import annotations

import importlib
from typing import Any

from numalign.errors import InputError


def _prometheus() -> Any:
    """``prometheus_client`` (in the ``kube`` extra), imported when an extender starts."""
    try:
        return importlib.import_module("prometheus_client")
    except ImportError:  # pragma: no cover - optional dependency
        raise InputError("the extender needs prometheus-client (pip install 'numalign[kube]')") from None


#: buckets of one node admission (seconds): 10 us .. ~2.6 s, a factor of 4 apart
ADMISSION_BUCKETS = tuple(0.00001 * 4**k for k in range(10))
#: buckets of one HTTP request (seconds)
REQUEST_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
#: the Content-Type of :meth:`ExtenderMetrics.exposition` (the text format 0.0.4, which
#: ``generate_latest`` writes)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
PREFIX = "numalign_extender"


class ExtenderMetrics:
    """The extender's metrics (see the module docstring for the naming rule)."""

    def __init__(self) -> None:
        pc = self._client = _prometheus()
        Counter, Gauge, Histogram = pc.Counter, pc.Gauge, pc.Histogram
        r = self.registry = pc.CollectorRegistry()
        pc.ProcessCollector(registry=r)
        pc.PlatformCollector(registry=r)
        self.admission_requests = Counter(
            f"{PREFIX}_topology_manager_admission_requests",
            "Node admissions the extender evaluated (as the kubelet's Topology Manager would).",
            registry=r)
        self.admission_errors = Counter(
            f"{PREFIX}_topology_manager_admission_errors",
            "Node admissions the extender evaluated that refused the pod.", registry=r)
        self.admission_duration = Histogram(
            f"{PREFIX}_topology_manager_admission_duration_seconds",
            "Duration of one node admission evaluation, in seconds.",
            buckets=ADMISSION_BUCKETS, registry=r)
        self.requests = Counter(
            f"{PREFIX}_requests", "HTTP requests by verb and status code.", ["code", "verb"],
            registry=r)
        self.request_duration = Histogram(
            f"{PREFIX}_request_duration_seconds", "HTTP request latency by verb, in seconds.",
            ["verb"], buckets=REQUEST_BUCKETS, registry=r)
        self.nodes = Gauge(f"{PREFIX}_nodes", "Nodes known from NodeResourceTopology.",
                           registry=r)
        self.broken_nodes = Gauge(
            f"{PREFIX}_unusable_nodes",
            "Nodes whose NodeResourceTopology could not be used (refused with the reason).",
            registry=r)
        self.assumed = Gauge(f"{PREFIX}_assumed_pods", "Pods assumed on nodes.", registry=r)
        self.node_updates = Counter(
            f"{PREFIX}_node_updates", "NodeResourceTopology changes applied, by kind of event.",
            ["event"], registry=r)
        self.relists = Counter(
            f"{PREFIX}_relists", "Full lists of NodeResourceTopology objects (start, expiry).",
            registry=r)
        self.overflow = Counter(
            f"{PREFIX}_overflow_connections",
            "Connections answered by the overflow responder (all worker slots busy), by outcome.",
            ["outcome"], registry=r)

    def exposition(self) -> bytes:
        """The registry in the Prometheus text format."""
        text: bytes = self._client.generate_latest(self.registry)
        return text


#: buckets of one export round, collect and publish (seconds)
EXPORT_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
EXPORTER_PREFIX = "numalign_exporter"


class ExporterMetrics:
    """The exporter's metrics: liveness (process collectors, ``numalign_exporter_info``) and
    the export loop's health (last success, errors by stage, round duration, objects
    published)."""

    def __init__(self) -> None:
        pc = self._client = _prometheus()
        r = self.registry = pc.CollectorRegistry()
        pc.ProcessCollector(registry=r)
        pc.PlatformCollector(registry=r)
        from numalign import __version__

        pc.Info(EXPORTER_PREFIX, "The numalign NodeResourceTopology exporter.",
                registry=r).info({"version": __version__})
        self.last_success = pc.Gauge(
            f"{EXPORTER_PREFIX}_last_success_timestamp_seconds",
            "Unix time of the last export round that collected and published its object "
            "(0: none yet).", registry=r)
        self.errors = pc.Counter(
            f"{EXPORTER_PREFIX}_errors",
            "Export rounds that failed, by stage (collect: a source could not be read; "
            "publish: the object could not be applied or written).", ["stage"], registry=r)
        for stage in ("collect", "publish"):
            self.errors.labels(stage)
        self.duration = pc.Histogram(
            f"{EXPORTER_PREFIX}_export_duration_seconds",
            "Duration of one export round (collect and publish), in seconds.",
            buckets=EXPORT_BUCKETS, registry=r)
        self.published = pc.Counter(
            f"{EXPORTER_PREFIX}_objects_published",
            "Objects (NodeResourceTopology or Numatopology) published.", registry=r)

    def exposition(self) -> bytes:
        text: bytes = self._client.generate_latest(self.registry)
        return text


_active: ExporterMetrics | None = None


def active_exporter_metrics() -> ExporterMetrics | None:
    """The metrics :func:`serve_exporter_metrics` serves in this process (``None``: no
    ``--metrics-port``); the export loop records into them."""
    return _active


def serve_exporter_metrics(host: str, port: int,
                           metrics: ExporterMetrics | None = None) -> Any:
    """Serve the exporter's ``/metrics`` (:class:`ExporterMetrics`) on a daemon thread - what
    its DaemonSet probes and scrapes - and make them the ones the export loop records into.
    Returns the HTTP server."""
    global _active
    if not 0 <= port <= 65535:
        raise InputError(f"port {port} is out of range (0-65535)", "--metrics-port")
    m = metrics or ExporterMetrics()
    try:
        server, _ = m._client.start_http_server(port, addr=host, registry=m.registry)
    except OSError as e:
        raise InputError(f"cannot listen on {host}:{port}: {e.strerror or e}", "--metrics-port") from None
    _active = m
    return server
