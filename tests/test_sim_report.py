"""The report: summary.json, a self-contained report.html with the plots, the terminal table."""

from __future__ import annotations

import base64
import json
from html.parser import HTMLParser
from pathlib import Path

import pytest

from numalign.sim.metrics import ContainerPlacement, MetricsRecorder
from numalign.sim.report import NumaHeatmap, format_summary_table, write_report

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.images: list[dict[str, str | None]] = []
        self.svgs = 0
        self.figures: list[str] = []
        self.external: list[str] = []
        self.table_rows = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "img":
            self.images.append(a)
        elif tag == "svg":
            self.svgs += 1
        elif tag == "figure":
            self.figures.append(a.get("id") or "")
        elif tag == "tr":
            self.table_rows += 1
        if tag in ("script", "link") or (
            tag == "img" and not (a.get("src") or "").startswith("data:")
        ):
            self.external.append(tag)


def _recorder() -> MetricsRecorder:
    r = MetricsRecorder(["default", "numalign"])
    for i in range(60):
        t = i * 10.0
        r.record_placed(
            "numalign",
            t,
            f"ns/p{i}",
            [ContainerPlacement("c", 1, {"cpu": 1000})],
            True,
            latency_s=0.001,
        )
        if i % 3:
            r.record_placed(
                "default",
                t,
                f"ns/p{i}",
                [ContainerPlacement("c", 3, {"cpu": 1000})],
                False,
                latency_s=0.0005,
            )
        else:
            r.record_rejected("default", t, f"ns/p{i}", latency_s=0.0005)
        for p in ("default", "numalign"):
            r.sample_utilisation(p, t, {"cpu": i / 60, "gpu": i / 120})
            r.sample_fragmentation(p, t, {"cpu": 0.2})
        if i == 30:
            r.record_pending("numalign", t, "ns/late")
    return r


def _heatmaps() -> list[NumaHeatmap]:
    cap = {
        0: {"cpu": 64.0, "memory": 512.0, "nvidia.com/gpu": 4.0},
        1: {"cpu": 64.0, "memory": 512.0, "nvidia.com/gpu": 4.0},
    }
    used = {0: {"cpu": 60.0, "memory": 100.0, "nvidia.com/gpu": 4.0}, 1: {"cpu": 8.0}}
    return [
        NumaHeatmap.from_usage("gpu-0", p, used, cap, time_s=300.0) for p in ("default", "numalign")
    ]


def test_write_report(tmp_path: Path) -> None:
    rec = _recorder()
    summary = rec.summary(workload={"description": "test workload"}, cluster={"name": "small"})
    out = tmp_path / "out"
    summary_path, report_path = write_report(out, summary, rec.series(), _heatmaps())
    assert Path(summary_path) == out / "summary.json"
    loaded = json.loads((out / "summary.json").read_text())
    assert loaded["profiles"]["default"]["topology_affinity_errors"] == 20
    assert loaded["profiles"]["numalign"]["topology_affinity_errors"] == 0
    page = Path(report_path).read_text()
    parser = _Collector()
    parser.feed(page)
    assert parser.figures == ["failures", "utilisation", "pending", "alignment", "heatmap"]
    assert len(parser.images) + parser.svgs >= 5
    for img in parser.images:
        src = img["src"] or ""
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1]).startswith(PNG_MAGIC)
    assert parser.external == []  # self-contained
    assert parser.table_rows == 3  # header + 2 profiles
    assert "test workload" in page
    assert not list(out.glob("*.tmp"))


def test_report_without_series_or_heatmap(tmp_path: Path) -> None:
    summary = MetricsRecorder(["numalign"]).summary()
    _, report = write_report(tmp_path, summary, {}, None)
    parser = _Collector()
    parser.feed(Path(report).read_text())
    assert parser.figures == ["alignment"]


def test_heatmap_from_usage() -> None:
    h = _heatmaps()[0]
    assert h.resources == ["cpu", "nvidia.com/gpu", "memory"]
    assert h.numa_nodes == [0, 1]
    assert h.values[0][0] == pytest.approx(60 / 64)
    assert h.values[1][1] == 0.0
    odd = NumaHeatmap.from_usage("n", "p", {}, {0: {"cpu": 4}, 1: {"cpu": 4, "rdma/hca": 2}})
    assert odd.values == [[0.0, None], [0.0, 0.0]]


def test_format_summary_table() -> None:
    table = format_summary_table(_recorder().summary())
    lines = table.splitlines()
    assert lines[0].split()[:3] == ["profile", "scheduled", "topo"]
    assert len(lines) == 4
    default = lines[2].split()
    assert default[0] == "default" and default[1] == "40" and default[2] == "20"
    numalign = lines[3].split()
    assert numalign[:3] == ["numalign", "60", "0"] and "100.0%" in numalign
    assert len({len(line) for line in lines[:2]}) == 1
    assert "(no profiles)" in format_summary_table({"profiles": {}})


def test_heatmap_from_zones_of_a_node() -> None:
    from numalign.node.admission import Node
    from numalign.node.usage import numa_amounts
    from numalign.sim.cluster import builtin_cluster

    name, machine = builtin_cluster("small")[0]
    h = NumaHeatmap.from_zones(name, "numalign", numa_amounts(Node(machine)), time_s=0.0)
    assert h.numa_nodes == [0, 1]
    assert "cpu" in h.resources and "nvidia.com/gpu" in h.resources
    assert all(v in (None, 0.0) for row in h.values for v in row)  # an empty node
