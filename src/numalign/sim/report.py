"""The simulator's report: ``summary.json``, a self-contained ``report.html``, a terminal table.

:func:`write_report` writes, in ``out_dir``:

* ``summary.json`` - the summary as given (:meth:`MetricsRecorder.summary
  <numalign.sim.metrics.MetricsRecorder.summary>` shape: ``{"profiles": {...}, ...}``);
* ``report.html`` - one file, no external resources: the summary table and plots rendered
  with matplotlib (Agg backend) as PNG images embedded in base64 ``data:`` URIs:

  1. topology affinity errors over time (cumulative), one line per profile;
  2. utilisation over time per resource (cpu, gpu, memory ...), one line per profile;
  3. pending pods over time per profile (and fragmentation when sampled);
  4. alignment distribution: the fraction of scheduled pods by the number of NUMA nodes
     their resources use (``none``: no NUMA affinity, e.g. Burstable pods in the shared pool);
  5. NUMA heat map of one node per profile: NUMA node x resource utilisation.

:func:`format_summary_table` gives the same numbers as a plain-text table for the terminal.
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from numalign.sim.metrics import Point, ProfileSeries

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: Fixed colours for the profiles the project compares (others get tab10 colours).
PROFILE_COLORS: Mapping[str, str] = {
    "default": "#d62728",
    "nrt-snn": "#ff7f0e",
    "volcano": "#9467bd",
    "numalign": "#2ca02c",
}
_FALLBACK_COLORS = ("#1f77b4", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")
_RESOURCE_ORDER = ("cpu", "gpu", "nvidia.com/gpu", "memory", "rdma/hca", "hugepages-1Gi")


@dataclass(frozen=True)
class NumaHeatmap:
    """Utilisation (0-1) of one node: ``values[i][j]`` is NUMA node ``numa_nodes[i]``,
    resource ``resources[j]``; ``None`` where the NUMA node has none of that resource."""

    node: str
    profile: str
    numa_nodes: Sequence[int]
    resources: Sequence[str]
    values: Sequence[Sequence[float | None]]
    time_s: float | None = None

    @classmethod
    def from_usage(
        cls,
        node: str,
        profile: str,
        used: Mapping[int, Mapping[str, float]],
        capacity: Mapping[int, Mapping[str, float]],
        *,
        resources: Sequence[str] | None = None,
        time_s: float | None = None,
    ) -> NumaHeatmap:
        """From per-NUMA-node used and capacity amounts (same units per resource)."""
        numa = sorted(capacity)
        names = (
            list(resources)
            if resources is not None
            else _ordered({r for c in capacity.values() for r, v in c.items() if v > 0})
        )
        values: list[list[float | None]] = []
        for n in numa:
            row: list[float | None] = []
            for r in names:
                cap = capacity[n].get(r, 0)
                row.append(None if cap <= 0 else min(1.0, used.get(n, {}).get(r, 0) / cap))
            values.append(row)
        return cls(node, profile, numa, names, values, time_s)

    @classmethod
    def from_zones(
        cls,
        node: str,
        profile: str,
        zones: Mapping[int, _Zone],
        *,
        resources: Sequence[str] | None = None,
        time_s: float | None = None,
    ) -> NumaHeatmap:
        """From per-NUMA ``allocatable``/``available`` amounts (the shape of
        :func:`numalign.node.usage.numa_amounts`): used = allocatable - available."""
        used = {
            n: {r: a - z.available.get(r, 0) for r, a in z.allocatable.items()}
            for n, z in zones.items()
        }
        capacity = {n: dict(z.allocatable) for n, z in zones.items()}
        return cls.from_usage(node, profile, used, capacity, resources=resources, time_s=time_s)


class _Zone(Protocol):
    @property
    def allocatable(self) -> Mapping[str, int]: ...
    @property
    def available(self) -> Mapping[str, int]: ...


def _ordered(names: Sequence[str] | set[str]) -> list[str]:
    rank = {r: i for i, r in enumerate(_RESOURCE_ORDER)}
    return sorted(names, key=lambda r: (rank.get(r, len(rank)), r))


def _colors(profiles: Sequence[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    spare = iter(_FALLBACK_COLORS * (1 + len(profiles)))
    for p in profiles:
        out[p] = PROFILE_COLORS.get(p) or next(spare)
    return out


def _time_unit(t_max: float) -> tuple[float, str]:
    if t_max <= 900:
        return 1.0, "s"
    if t_max <= 36_000:
        return 60.0, "min"
    if t_max <= 5 * 86_400:
        return 3600.0, "h"
    return 86_400.0, "days"


def _t_max(series: Mapping[str, ProfileSeries]) -> float:
    t = 0.0
    for s in series.values():
        for pts in (s.errors, s.pending, *s.utilisation.values(), *s.fragmentation.values()):
            if pts:
                t = max(t, pts[-1][0])
    return t


def _extend(points: Sequence[Point], t_end: float) -> list[Point]:
    """A step series held at its last value up to ``t_end``."""
    pts = list(points)
    if pts and pts[-1][0] < t_end:
        pts.append((t_end, pts[-1][1]))
    return pts


def _png(fig: Figure) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _style_axes(ax: Any) -> None:
    ax.grid(True, color="#e5e5e5", linewidth=0.8)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


# --------------------------------------------------------------------------------------------
# Figures (each returns a matplotlib Figure; render_figures turns them into PNGs)
# --------------------------------------------------------------------------------------------


def figure_failures(series: Mapping[str, ProfileSeries]) -> Figure:
    import matplotlib.pyplot as plt

    t_end = _t_max(series)
    scale, unit = _time_unit(t_end)
    colors = _colors(list(series))
    fig, ax = plt.subplots(figsize=(8.5, 3.8))
    for name, s in series.items():
        pts = _extend(s.errors or [(0.0, 0.0)], t_end)
        ax.step(
            [t / scale for t, _ in pts],
            [v for _, v in pts],
            where="post",
            color=colors[name],
            linewidth=2.2 if name == "numalign" else 1.6,
            label=f"{name} ({int(pts[-1][1])})",
        )
    ax.set_xlabel(f"simulated time ({unit})")
    ax.set_ylabel("TopologyAffinityErrors (cumulative)")
    ax.set_title("Pods rejected by the node's Topology Manager after binding")
    ax.set_ylim(bottom=0)
    ax.set_xlim(left=0)
    _style_axes(ax)
    ax.legend(frameon=False, loc="upper left")
    fig.tight_layout()
    return fig


def figure_utilisation(series: Mapping[str, ProfileSeries]) -> Figure:
    import matplotlib.pyplot as plt

    resources = _ordered({r for s in series.values() for r in s.utilisation})
    t_end = _t_max(series)
    scale, unit = _time_unit(t_end)
    colors = _colors(list(series))
    n = max(1, len(resources))
    fig, axes = plt.subplots(n, 1, figsize=(8.5, 2.4 * n + 0.6), sharex=True, squeeze=False)
    for ax, res in zip(axes[:, 0], resources or ["cpu"], strict=False):
        for name, s in series.items():
            raw = s.utilisation.get(res)
            if not raw:
                continue
            pts = _extend(raw, t_end)
            ax.step(
                [t / scale for t, _ in pts],
                [100 * v for _, v in pts],
                where="post",
                color=colors[name],
                linewidth=1.4,
                label=name,
            )
        ax.set_ylabel(f"{res} in use (%)")
        ax.set_ylim(0, 105)
        ax.set_xlim(left=0)
        _style_axes(ax)
    axes[0, 0].set_title("Cluster utilisation over time")
    axes[0, 0].legend(frameon=False, loc="lower right", ncol=min(4, len(series)))
    axes[-1, 0].set_xlabel(f"simulated time ({unit})")
    fig.tight_layout()
    return fig


def figure_pending(series: Mapping[str, ProfileSeries]) -> Figure:
    import matplotlib.pyplot as plt

    frag = _ordered({r for s in series.values() for r in s.fragmentation})
    t_end = _t_max(series)
    scale, unit = _time_unit(t_end)
    colors = _colors(list(series))
    rows = 1 + len(frag)
    fig, axes = plt.subplots(rows, 1, figsize=(8.5, 2.4 * rows + 0.6), sharex=True, squeeze=False)
    ax = axes[0, 0]
    for name, s in series.items():
        pts = _extend([(0.0, 0.0), *s.pending], t_end)
        ax.step(
            [t / scale for t, _ in pts],
            [v for _, v in pts],
            where="post",
            color=colors[name],
            linewidth=1.4,
            label=name,
        )
    ax.set_ylabel("pending pods")
    ax.set_ylim(bottom=0)
    ax.set_title("Pending pods (no node passes the filters)")
    ax.legend(frameon=False, loc="upper left", ncol=min(4, len(series)))
    _style_axes(ax)
    for ax, res in zip(axes[1:, 0], frag, strict=False):
        for name, s in series.items():
            raw = s.fragmentation.get(res)
            if raw:
                pts = _extend(raw, t_end)
                ax.step(
                    [t / scale for t, _ in pts],
                    [100 * v for _, v in pts],
                    where="post",
                    color=colors[name],
                    linewidth=1.4,
                )
        ax.set_ylabel(f"{res} fragmented (%)")
        ax.set_ylim(0, 105)
        _style_axes(ax)
    axes[-1, 0].set_xlabel(f"simulated time ({unit})")
    axes[-1, 0].set_xlim(left=0)
    fig.tight_layout()
    return fig


def _numa_label(k: int) -> str:
    return "none" if k == 0 else str(k)


def figure_alignment(summary: Mapping[str, Any]) -> Figure:
    import matplotlib.pyplot as plt

    profiles: Mapping[str, Any] = summary.get("profiles", {})
    counts = {
        name: {int(k): int(v) for k, v in (p.get("numa_nodes_used") or {}).items()}
        for name, p in profiles.items()
    }
    keys = sorted({k for c in counts.values() for k in c}, key=lambda k: (k == 0, k))
    colors = _colors(list(profiles))
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(10, 3.8), gridspec_kw={"width_ratios": [2.2, 1]})
    n = max(1, len(profiles))
    width = 0.8 / n
    for i, name in enumerate(profiles):
        total = sum(counts[name].values())
        fr = [counts[name].get(k, 0) / total if total else 0.0 for k in keys]
        xs = [j + (i - (n - 1) / 2) * width for j in range(len(keys))]
        ax.bar(xs, [100 * f for f in fr], width=width * 0.95, color=colors[name], label=name)
    ax.set_xticks(range(len(keys)), [_numa_label(k) for k in keys])
    ax.set_xlabel("NUMA nodes used by the pod")
    ax.set_ylabel("scheduled pods (%)")
    ax.set_title("Alignment distribution")
    ax.set_ylim(0, 105)
    _style_axes(ax)
    ax.legend(frameon=False)
    names = list(profiles)
    fracs = [100 * float(profiles[p].get("aligned_fraction") or 0.0) for p in names]
    bars = ax2.bar(range(len(names)), fracs, color=[colors[p] for p in names])
    for b, f in zip(bars, fracs, strict=True):
        ax2.text(b.get_x() + b.get_width() / 2, f + 1.5, f"{f:.1f}%", ha="center", fontsize=9)
    ax2.set_xticks(range(len(names)), names, rotation=20)
    ax2.set_ylim(0, 112)
    ax2.set_ylabel("aligned (%)")
    ax2.set_title("Pods with every resource\nin the minimal NUMA mask", fontsize=10)
    _style_axes(ax2)
    fig.tight_layout()
    return fig


def figure_heatmaps(heatmaps: Sequence[NumaHeatmap]) -> Figure:
    import matplotlib.pyplot as plt
    import numpy as np

    n = len(heatmaps)
    cols = min(n, 2)
    rows = math.ceil(n / cols)
    width = max(3.2, 0.9 * max(len(h.resources) for h in heatmaps) + 1.6)
    height = max(2.4, 0.55 * max(len(h.numa_nodes) for h in heatmaps) + 1.6)
    fig, axes = plt.subplots(
        rows,
        cols,
        figsize=(width * cols + 0.8, height * rows),
        squeeze=False,
        layout="constrained",
    )
    cmap = plt.get_cmap("YlOrRd").with_extremes(bad="#eeeeee")
    image = None
    for k, ax in enumerate(axes.flat):
        if k >= n:
            ax.axis("off")
            continue
        h = heatmaps[k]
        data = np.array(
            [[math.nan if v is None else float(v) for v in row] for row in h.values], dtype=float
        ).reshape(len(h.numa_nodes), len(h.resources))
        image = ax.imshow(np.ma.masked_invalid(data), cmap=cmap, vmin=0.0, vmax=1.0, aspect="auto")
        for i in range(data.shape[0]):
            for j in range(data.shape[1]):
                v = data[i, j]
                text = "n/a" if math.isnan(v) else f"{100 * v:.0f}%"
                color = "white" if not math.isnan(v) and v > 0.6 else "#333333"
                ax.text(j, i, text, ha="center", va="center", fontsize=9, color=color)
        ax.set_xticks(range(len(h.resources)), [_short(r) for r in h.resources], rotation=20)
        ax.set_yticks(range(len(h.numa_nodes)), [f"NUMA {i}" for i in h.numa_nodes])
        ax.set_title(f"{h.profile}: {h.node}", fontsize=10)
    if image is not None:
        fig.colorbar(image, ax=axes.ravel().tolist(), shrink=0.85, label="utilisation")
    return fig


def _short(resource: str) -> str:
    return {"nvidia.com/gpu": "gpu", "rdma/hca": "rdma", "hugepages-1Gi": "hp-1Gi"}.get(
        resource, resource
    )


def render_figures(
    summary: Mapping[str, Any],
    series: Mapping[str, ProfileSeries],
    heatmap: NumaHeatmap | Sequence[NumaHeatmap] | None = None,
) -> list[tuple[str, str, str]]:
    """The report's figures as ``(id, caption, base64 PNG)``."""
    import matplotlib

    matplotlib.use("Agg")
    out: list[tuple[str, str, str]] = []
    if series:
        out.append(
            (
                "failures",
                "TopologyAffinityErrors over time (cumulative): pods the scheduler bound to a node "
                "whose Topology Manager then rejected them.",
                _png(figure_failures(series)),
            )
        )
        if any(s.utilisation for s in series.values()):
            out.append(
                (
                    "utilisation",
                    "Share of the cluster's capacity allocated to running pods, per resource.",
                    _png(figure_utilisation(series)),
                )
            )
        out.append(
            (
                "pending",
                "Pods waiting for a node (and, when sampled, free capacity that no single-NUMA "
                "request can use).",
                _png(figure_pending(series)),
            )
        )
    if summary.get("profiles"):
        out.append(
            (
                "alignment",
                "Scheduled pods by the number of NUMA nodes their CPUs, memory and devices use "
                "(none: no NUMA affinity, e.g. Burstable pods), and the aligned fraction.",
                _png(figure_alignment(summary)),
            )
        )
    maps: list[NumaHeatmap]
    if heatmap is None:
        maps = []
    elif isinstance(heatmap, NumaHeatmap):
        maps = [heatmap]
    else:
        maps = list(heatmap)
    if maps:
        when = maps[0].time_s
        at = f" at t = {when:g} s" if when is not None else ""
        out.append(
            (
                "heatmap",
                f"NUMA heat map{at}: allocated share of each NUMA node's CPUs, memory and "
                "devices on one node.",
                _png(figure_heatmaps(maps)),
            )
        )
    return out


# --------------------------------------------------------------------------------------------
# Tables, HTML, files
# --------------------------------------------------------------------------------------------

_COLUMNS: tuple[tuple[str, str], ...] = (
    ("profile", "profile"),
    ("scheduled", "scheduled"),
    ("topology_affinity_errors", "topo errors"),
    ("rejected", "rejected"),
    ("pending", "pending"),
    ("retries", "retries"),
    ("aligned_fraction", "aligned"),
    ("throughput_pods_per_s", "pods/s"),
    ("p50", "p50 ms"),
    ("p99", "p99 ms"),
)


def _cells(name: str, p: Mapping[str, Any]) -> list[str]:
    lat = p.get("latency_ms") or {}

    def num(v: Any, fmt: str) -> str:
        return "-" if v is None else format(v, fmt)

    return [
        name,
        str(p.get("scheduled", 0)),
        str(p.get("topology_affinity_errors", 0)),
        str(p.get("rejected", p.get("topology_affinity_errors", 0))),
        str(p.get("pending", 0)),
        str(p.get("retries", 0)),
        "-" if p.get("aligned_fraction") is None else f"{100 * p['aligned_fraction']:.1f}%",
        num(p.get("throughput_pods_per_s"), ",.0f"),
        num(lat.get("p50"), ".2f"),
        num(lat.get("p99"), ".2f"),
    ]


def format_summary_table(summary: Mapping[str, Any]) -> str:
    """The per-profile summary as an aligned plain-text table (no trailing newline)."""
    profiles: Mapping[str, Any] = summary.get("profiles", {})
    header = [label for _, label in _COLUMNS]
    rows = [_cells(name, p) for name, p in profiles.items()]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        parts = [cells[0].ljust(widths[0])]
        parts += [c.rjust(w) for c, w in zip(cells[1:], widths[1:], strict=True)]
        return "  ".join(parts).rstrip()

    out = [line(header), "  ".join("-" * w for w in widths)]
    out += [line(r) for r in rows]
    if not rows:
        out.append("(no profiles)")
    return "\n".join(out)


_CSS = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 2rem auto;
       max-width: 1000px; color: #222; line-height: 1.45; padding: 0 1rem; }
h1 { font-size: 1.6rem; margin-bottom: 0.2rem; }
h2 { font-size: 1.15rem; margin-top: 2rem; border-bottom: 1px solid #ddd; padding-bottom: .2rem; }
.meta { color: #555; font-size: 0.92rem; }
table { border-collapse: collapse; font-size: 0.92rem; margin-top: .6rem; }
th, td { padding: .3rem .7rem; border-bottom: 1px solid #e4e4e4; text-align: right; }
th:first-child, td:first-child { text-align: left; }
th { background: #f6f6f6; }
td.bad { color: #b30000; font-weight: 600; }
td.good { color: #1a7f1a; font-weight: 600; }
figure { margin: 1rem 0 1.6rem; }
figure img { max-width: 100%; height: auto; }
figcaption { color: #555; font-size: 0.88rem; }
"""


def _html_table(summary: Mapping[str, Any]) -> str:
    profiles: Mapping[str, Any] = summary.get("profiles", {})
    head = "".join(f"<th>{html.escape(label)}</th>" for _, label in _COLUMNS)
    body = []
    for name, p in profiles.items():
        cells = _cells(name, p)
        tds = []
        for (key, _), c in zip(_COLUMNS, cells, strict=True):
            cls = ""
            if key == "topology_affinity_errors":
                cls = ' class="bad"' if c not in ("0", "-") else ' class="good"'
            tds.append(f"<td{cls}>{html.escape(c)}</td>")
        body.append("<tr>" + "".join(tds) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _meta_html(summary: Mapping[str, Any]) -> str:
    items = []
    for key in ("workload", "cluster", "seed", "generated"):
        v = summary.get(key)
        if v is None:
            continue
        if isinstance(v, Mapping):
            text = v.get("description") or v.get("name") or json.dumps(v, sort_keys=True)
        else:
            text = str(v)
        items.append(f"<div><b>{html.escape(key)}</b>: {html.escape(str(text))}</div>")
    return "".join(items)


def render_html(
    summary: Mapping[str, Any],
    figures: Sequence[tuple[str, str, str]],
    title: str = "numalign simulation report",
) -> str:
    """The report page: summary table and embedded PNG figures."""
    figs = "".join(
        f'<figure id="{html.escape(fid)}"><img alt="{html.escape(fid)}" '
        f'src="data:image/png;base64,{data}"><figcaption>{html.escape(caption)}</figcaption>'
        "</figure>"
        for fid, caption, data in figures
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>"
        f'<h1>{html.escape(title)}</h1><div class="meta">{_meta_html(summary)}</div>'
        f"<h2>Summary</h2>{_html_table(summary)}"
        '<p class="meta">topo errors: pods bound by the scheduler and then rejected by the '
        "node with TopologyAffinityError; aligned: share of scheduled pods whose resources all "
        "lie within the minimal NUMA mask; latency: one scheduling cycle (wall clock).</p>"
        f"<h2>Plots</h2>{figs}</body></html>\n"
    )


def write_report(
    out_dir: str | os.PathLike[str],
    summary: Mapping[str, Any],
    series: Mapping[str, ProfileSeries],
    heatmap: NumaHeatmap | Sequence[NumaHeatmap] | None = None,
    *,
    title: str = "numalign simulation report",
) -> tuple[str, str]:
    """Write ``summary.json`` and ``report.html`` into ``out_dir`` (created if needed).

    Returns the two paths."""
    out = os.fspath(out_dir)
    os.makedirs(out, exist_ok=True)
    summary_path = os.path.join(out, "summary.json")
    report_path = os.path.join(out, "report.html")
    _write_atomic(summary_path, json.dumps(summary, indent=2, sort_keys=False) + "\n")
    figures = render_figures(summary, series, heatmap)
    _write_atomic(report_path, render_html(summary, figures, title))
    return summary_path, report_path


def _write_atomic(path: str, text: str) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)
