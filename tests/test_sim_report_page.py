"""The report page explains itself: viewport, readable cluster, column legend, heat-map captions
naming their node and time, and one time axis for every time plot."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from numalign.sim.cluster import builtin_cluster
from numalign.sim.metrics import MetricsRecorder, ProfileSeries
from numalign.sim.report import (
    NumaHeatmap,
    cluster_overview,
    figure_failures,
    figure_pending,
    figure_utilisation,
    format_summary_legend,
    format_summary_table,
    render_figures,
    render_html,
    write_report,
)

COLUMNS = ["profile", "scheduled", "topo errors", "rejected", "pending", "dropped", "arrived",
           "recreated", "aligned", "CPU s", "p50 ms", "p99 ms"]


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.meta: list[dict[str, str | None]] = []
        self.th: list[str] = []
        self.dt: list[str] = []
        self.captions: dict[str, str] = {}
        self._in: str | None = None
        self._figure = ""
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "meta":
            self.meta.append(a)
        if tag == "figure":
            self._figure = a.get("id") or ""
        if tag in ("th", "dt", "figcaption"):
            self._in = tag

    def handle_endtag(self, tag: str) -> None:
        if tag == self._in:
            self._in = None

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        if self._in == "th":
            self.th.append(data)
        elif self._in == "dt":
            self.dt.append(data)
        elif self._in == "figcaption":
            self.captions[self._figure] = self.captions.get(self._figure, "") + data


def _recorder() -> MetricsRecorder:
    r = MetricsRecorder(["default", "numalign"])
    for i in range(40):
        t = 30.0 * i
        for p in ("default", "numalign"):
            r.record_arrived(p, t, f"ns/p{i}")
            r.record_placed(p, t, f"ns/p{i}", [], True, latency_s=0.001)
            r.sample_utilisation(p, t, {"cpu": i / 40})
            r.sample_fragmentation(p, t, {"cpu": 0.3})
    r.record_arrived("default", 100.0, "ns/x")
    r.record_rejected("default", 100.0, "ns/x")  # errors end early: its series is short
    r.record_arrived("numalign", 200.0, "ns/y")
    r.record_pending("numalign", 200.0, "ns/y")
    r.record_dropped("numalign", 300.0, "ns/y")
    return r


def _heatmaps() -> list[NumaHeatmap]:
    cap = {0: {"cpu": 8.0}, 1: {"cpu": 8.0}}
    return [
        NumaHeatmap.from_usage("gpu-3", "default", {0: {"cpu": 4.0}}, cap, time_s=600.0),
        NumaHeatmap.from_usage("cpu-1", "numalign", {1: {"cpu": 8.0}}, cap, time_s=900.0),
    ]


def _page(summary_extra: dict[str, object] | None = None) -> tuple[str, _Page]:
    rec = _recorder()
    summary = rec.summary(**(summary_extra or {}))
    html = render_html(summary, render_figures(summary, rec.series(), _heatmaps()))
    parser = _Page()
    parser.feed(html)
    return html, parser


def test_viewport_meta_and_no_raw_json() -> None:
    nodes = builtin_cluster("small")
    html, page = _page({"cluster": cluster_overview(nodes, "builtin:small"),
                        "workload": {"spec": "synthetic:count=40", "description": "forty pods"}})
    viewport = [m for m in page.meta if m.get("name") == "viewport"]
    assert viewport and "width=device-width" in (viewport[0].get("content") or "")
    body = html.split("<body>", 1)[1]
    head_text = re.sub(r"<[^>]+>", " ", body.split("<h2>", 1)[0])  # the visible meta lines
    assert "{" not in head_text and '"' not in head_text  # no JSON
    assert "4 nodes from builtin:small" in head_text
    assert "2 x gpu-2numa" in head_text and "Topology Manager single-numa-node" in head_text


def test_cluster_overview_groups_nodes() -> None:
    nodes = builtin_cluster("default")
    o = cluster_overview(nodes, "builtin:default")
    assert o["nodes"] == len(nodes) == sum(g["count"] for g in o["groups"])
    assert {g["machine"] for g in o["groups"]} == {m.name for _, m in nodes}
    g = o["groups"][0]
    assert "NUMA nodes" in g["hardware"] and "CPUs" in g["hardware"]
    assert "scope" in g["topology_manager"]
    assert o["description"].startswith(f"{len(nodes)} nodes from builtin:default: ")


def test_table_columns_each_explained_in_html_and_text() -> None:
    _, page = _page()
    assert page.th == COLUMNS
    for label in COLUMNS[1:]:
        assert label in page.dt
    assert "rows" in page.dt
    legend = format_summary_legend()
    for label in COLUMNS[1:]:
        assert re.search(rf"^\s+{re.escape(label)}: ", legend, re.M), label
    assert "scheduled + rejected + pending + dropped = arrived + recreated" in legend
    assert all(len(line) <= 100 for line in legend.splitlines())


def test_text_table_rows_add_up() -> None:
    table = format_summary_table(_recorder().summary())
    rows = [line.split() for line in table.splitlines()[2:]]
    header = table.splitlines()[0]
    assert "dropped" in header and "pods/s" not in header
    for r in rows:
        scheduled, _topo, rejected, pending, dropped, arrived, recreated = map(int, r[1:8])
        assert scheduled + rejected + pending + dropped == arrived + recreated


def test_heatmap_captions_name_each_node_and_time() -> None:
    _, page = _page()
    cap = page.captions["heatmap"]
    assert "default: node gpu-3 at t = 10 min" in cap
    assert "numalign: node cpu-1 at t = 15 min" in cap
    assert "one node." not in cap


def test_time_plots_share_x_range_and_geometry() -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = _recorder().series()
    t_end = max(t for s in series.values() for t, _ in s.utilisation["cpu"])
    figs = [f(series) for f in (figure_failures, figure_utilisation, figure_pending)]
    try:
        limits = {ax.get_xlim() for fig in figs for ax in fig.axes}
        assert limits == {(0.0, t_end / 60)}  # minutes; the errors series ends at 100 s
        boxes = {(round(ax.get_position().x0, 6), round(ax.get_position().x1, 6))
                 for fig in figs for ax in fig.axes}
        assert len(boxes) == 1  # the x-axes line up on the page
        assert len({float(fig.get_size_inches()[0]) for fig in figs}) == 1
    finally:
        for fig in figs:
            plt.close(fig)


def test_time_axis_ends_at_the_latest_point_not_the_last_of_a_series() -> None:
    """A series whose points are not the latest at its end still sets the common range."""
    s = ProfileSeries(errors=[(0.0, 0.0)], pending=[(50.0, 1.0), (20.0, 0.0)],
                      utilisation={"cpu": [(0.0, 0.1)]}, fragmentation={}, numa_nodes_used={})
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = figure_failures({"p": s})
    try:
        assert fig.axes[0].get_xlim() == (0.0, 50.0)
    finally:
        plt.close(fig)


def test_written_report_has_legend_and_scroll_wrapper(tmp_path: Path) -> None:
    rec = _recorder()
    _, report = write_report(tmp_path, rec.summary(), rec.series(), _heatmaps())
    html = Path(report).read_text()
    assert '<div class="scroll"><table>' in html
    assert '<dl class="legend">' in html


@pytest.mark.parametrize("n", [1, 3])
def test_heatmap_figure_any_count(n: int) -> None:
    maps = (_heatmaps() * 2)[:n]
    figs = render_figures({"profiles": {}}, {}, maps)
    assert [f[0] for f in figs] == ["heatmap"]
