"""The exporter's ``/metrics``: the export loop's health (last success, errors by stage, round
duration, objects published) next to the process metrics, scraped over HTTP after a good
export, after a failing collect and after a failing publish. The names are the ones
docs/kubernetes.md lists."""

from __future__ import annotations

import io
import re
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import REPO
from numalign.kube import metrics as metrics_module
from numalign.kube.exporter import Exporter, ExportSources, run_loop
from numalign.kube.metrics import ExporterMetrics, serve_exporter_metrics

SPEC = str(REPO / "examples" / "fig1.yaml")


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[ExporterMetrics, str]]:
    monkeypatch.setattr(metrics_module, "_active", None)
    m = ExporterMetrics()
    server = serve_exporter_metrics("127.0.0.1", 0, m)
    try:
        assert metrics_module.active_exporter_metrics() is m
        yield m, f"http://127.0.0.1:{server.server_address[1]}/metrics"
    finally:
        server.shutdown()
        server.server_close()


def scrape(url: str) -> dict[str, float]:
    with urllib.request.urlopen(url, timeout=10) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        m = re.match(r"^(numalign_exporter_[a-z_]+(?:\{[^}]*\})?) (\S+)$", line)
        if m:
            out[m.group(1)] = float(m.group(2))
    assert "process_resident_memory_bytes" in text or "python_info" in text
    return out


def test_scrape_after_good_and_failing_exports(served: tuple[ExporterMetrics, str],
                                               tmp_path: Path) -> None:
    _, url = served
    before = scrape(url)
    assert before["numalign_exporter_last_success_timestamp_seconds"] == 0
    assert before['numalign_exporter_errors_total{stage="collect"}'] == 0
    assert before['numalign_exporter_errors_total{stage="publish"}'] == 0
    assert before["numalign_exporter_objects_published_total"] == 0
    assert any(k.startswith("numalign_exporter_info{") for k in before)

    published: list[dict[str, Any]] = []
    t0 = time.time()
    assert run_loop(Exporter(ExportSources(machine=SPEC)), published.append, interval=None,
                    log=io.StringIO()) == 0  # the default: the metrics being served
    good = scrape(url)
    assert len(published) == 1
    assert good["numalign_exporter_objects_published_total"] == 1
    assert t0 - 1 <= good["numalign_exporter_last_success_timestamp_seconds"] <= time.time() + 1
    assert good["numalign_exporter_export_duration_seconds_count"] == 1
    assert good["numalign_exporter_export_duration_seconds_sum"] > 0
    assert good['numalign_exporter_errors_total{stage="collect"}'] == 0

    # a source that cannot be read: a collect error, the last success unchanged
    missing = ExportSources(machine=str(tmp_path / "missing.yaml"))
    assert run_loop(Exporter(missing), published.append, interval=None, log=io.StringIO()) == 1
    failed = scrape(url)
    assert failed['numalign_exporter_errors_total{stage="collect"}'] == 1
    assert failed["numalign_exporter_objects_published_total"] == 1
    assert (failed["numalign_exporter_last_success_timestamp_seconds"]
            == good["numalign_exporter_last_success_timestamp_seconds"])
    assert failed["numalign_exporter_export_duration_seconds_count"] == 2

    # the API refuses the object: a publish error
    def refuse(obj: dict[str, Any]) -> None:
        raise RuntimeError("forbidden")

    assert run_loop(Exporter(ExportSources(machine=SPEC)), refuse, interval=None,
                    log=io.StringIO()) == 1
    refused = scrape(url)
    assert refused['numalign_exporter_errors_total{stage="publish"}'] == 1
    assert refused["numalign_exporter_objects_published_total"] == 1
    assert refused["numalign_exporter_export_duration_seconds_count"] == 3


def test_docs_list_the_exporter_series() -> None:
    doc = (REPO / "docs" / "kubernetes.md").read_text()
    m = ExporterMetrics()
    names = {metric.name for metric in m.registry.collect() if metric.name.startswith("numalign_")}
    assert names == {"numalign_exporter", "numalign_exporter_last_success_timestamp_seconds",
                     "numalign_exporter_errors", "numalign_exporter_export_duration_seconds",
                     "numalign_exporter_objects_published"}
    for series in ("numalign_exporter_info{version}",
                   "numalign_exporter_last_success_timestamp_seconds",
                   "numalign_exporter_errors_total{stage}",
                   "numalign_exporter_export_duration_seconds",
                   "numalign_exporter_objects_published_total"):
        assert f"`{series}`" in doc, series


def test_without_metrics_port_the_loop_records_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metrics_module, "_active", None)
    published: list[dict[str, Any]] = []
    assert run_loop(Exporter(ExportSources(machine=SPEC)), published.append, interval=None,
                    log=io.StringIO()) == 0
    assert len(published) == 1
