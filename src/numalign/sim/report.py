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
  5. NUMA heat map of one node per profile: NUMA node x resource utilisation, each captioned
     with its node and time.

  The time plots share one x-axis range (0 to the end of the simulation) and the same axes
  geometry, so they line up on the page. The page has a viewport meta and a scrolling table:
  no horizontal overflow on a phone.

:func:`format_summary_table` gives the same numbers as a plain-text table for the terminal and
:func:`format_summary_legend` explains its columns (the HTML shows the same legend).
:func:`cluster_overview` describes the modelled cluster for the report (node groups by
machine type and Topology Manager configuration).
"""

from __future__ import annotations

import base64
import errno
import html
import io
import json
import math
import os
import tempfile
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from numalign.scheduler.gc_pause import collector_paused
from numalign.sim.metrics import Point, ProfileSeries
from numalign.sim.release_summary import release_lines

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from numalign.machine.model import Machine

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
    """The latest time of any point of any series: the common end of every time axis."""
    t = 0.0
    for s in series.values():
        for pts in (s.errors, s.pending, *s.utilisation.values(), *s.fragmentation.values()):
            for when, _ in pts:
                t = max(t, when)
    return t


def format_time(t: float, t_max: float | None = None) -> str:
    """``t`` in the unit the plots use for an axis ending at ``t_max`` (default: ``t``)."""
    scale, unit = _time_unit(t if t_max is None else t_max)
    return f"{t / scale:.3g} {unit}"


#: Time figures: one width and fixed axes margins (inches), so their x-axes line up on the page.
_TIME_FIG_WIDTH = 8.5
#: The top margin holds the title and, under it, the legend (never over the data).
_MARGIN_LEFT, _MARGIN_RIGHT, _MARGIN_TOP, _MARGIN_BOTTOM = 0.9, 0.25, 0.8, 0.6


def _figure(**kwargs: Any) -> Figure:
    """A figure drawn by the Agg renderer, without :mod:`matplotlib.pyplot` (its import, its
    figure manager and backend selection cost the report a second of start-up)."""
    from matplotlib.figure import Figure

    return Figure(**kwargs)


def _time_figure(rows: int, row_height: float = 2.4) -> tuple[Figure, Any]:
    height = row_height * rows + _MARGIN_TOP + _MARGIN_BOTTOM
    fig = _figure(figsize=(_TIME_FIG_WIDTH, height))
    axes = fig.subplots(rows, 1, sharex=True, squeeze=False)
    fig.subplots_adjust(
        left=_MARGIN_LEFT / _TIME_FIG_WIDTH,
        right=1 - _MARGIN_RIGHT / _TIME_FIG_WIDTH,
        top=1 - _MARGIN_TOP / height,
        bottom=_MARGIN_BOTTOM / height,
        hspace=0.25,
    )
    return fig, axes


def _time_header(fig: Figure, axes: Any, title: str) -> None:
    """Title and legend (of the top axes' lines) above the plots, aligned with the axes."""
    height = float(fig.get_size_inches()[1])
    left = _MARGIN_LEFT / _TIME_FIG_WIDTH
    fig.suptitle(title, x=left, y=1 - 0.08 / height, ha="left", va="top", fontsize=12)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    if handles:
        fig.legend(
            handles,
            labels,
            loc="upper left",
            bbox_to_anchor=(left, 1 - 0.36 / height),
            ncol=min(6, len(handles)),
            frameon=False,
            borderaxespad=0.0,
            handlelength=1.6,
            columnspacing=1.4,
        )


def _time_axis(ax: Any, t_end: float, scale: float, unit: str, *, label: bool) -> None:
    ax.set_xlim(0, max(t_end, 1e-9) / scale)
    if label:
        ax.set_xlabel(f"simulated time ({unit})")


def _extend(points: Sequence[Point], t_end: float) -> list[Point]:
    """A step series held at its last value up to ``t_end``."""
    pts = list(points)
    if pts and pts[-1][0] < t_end:
        pts.append((t_end, pts[-1][1]))
    return pts


def _png(fig: Figure) -> str:
    """The figure as base64 PNG, at the figure's own size and margins: one draw (every figure
    lays itself out: fixed margins, ``tight_layout`` or the constrained layout; cropping to
    ``bbox_inches="tight"`` would draw it twice)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _style_axes(ax: Any) -> None:
    ax.grid(True, color="#e5e5e5", linewidth=0.8)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


# --------------------------------------------------------------------------------------------
# Figures (each returns a matplotlib Figure; render_figures turns them into PNGs)
# --------------------------------------------------------------------------------------------


def figure_failures(series: Mapping[str, ProfileSeries], t_end: float | None = None) -> Figure:
    t_end = _t_max(series) if t_end is None else t_end
    scale, unit = _time_unit(t_end)
    colors = _colors(list(series))
    fig, axes = _time_figure(1, 2.8)
    ax = axes[0, 0]
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
    ax.set_ylabel("TopologyAffinityErrors\n(cumulative)")
    ax.set_ylim(bottom=0)
    _time_axis(ax, t_end, scale, unit, label=True)
    _style_axes(ax)
    _time_header(fig, axes, "Pods rejected by the node's Topology Manager after binding")
    return fig


def figure_utilisation(series: Mapping[str, ProfileSeries], t_end: float | None = None) -> Figure:
    resources = _ordered({r for s in series.values() for r in s.utilisation})
    t_end = _t_max(series) if t_end is None else t_end
    scale, unit = _time_unit(t_end)
    colors = _colors(list(series))
    n = max(1, len(resources))
    fig, axes = _time_figure(n)
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
        _time_axis(ax, t_end, scale, unit, label=ax is axes[-1, 0])
        _style_axes(ax)
    _time_header(fig, axes, "Cluster utilisation over time")
    return fig


def figure_pending(series: Mapping[str, ProfileSeries], t_end: float | None = None) -> Figure:
    frag = _ordered({r for s in series.values() for r in s.fragmentation})
    t_end = _t_max(series) if t_end is None else t_end
    scale, unit = _time_unit(t_end)
    colors = _colors(list(series))
    rows = 1 + len(frag)
    fig, axes = _time_figure(rows)
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
    _time_axis(ax, t_end, scale, unit, label=rows == 1)
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
        _time_axis(ax, t_end, scale, unit, label=ax is axes[-1, 0])
        _style_axes(ax)
    _time_header(fig, axes, "Pending pods (no node passes the filters) and fragmentation")
    return fig


def _numa_label(k: int) -> str:
    return "none" if k == 0 else str(k)


def figure_alignment(summary: Mapping[str, Any]) -> Figure:
    profiles: Mapping[str, Any] = summary.get("profiles", {})
    counts = {
        name: {int(k): int(v) for k, v in (p.get("numa_nodes_used") or {}).items()}
        for name, p in profiles.items()
    }
    keys = sorted({k for c in counts.values() for k in c}, key=lambda k: (k == 0, k))
    colors = _colors(list(profiles))
    fig = _figure(figsize=(10, 3.8))
    ax, ax2 = fig.subplots(1, 2, gridspec_kw={"width_ratios": [2.2, 1]})
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


def figure_heatmaps(heatmaps: Sequence[NumaHeatmap], t_end: float | None = None) -> Figure:
    import matplotlib
    import numpy as np

    n = len(heatmaps)
    cols = min(n, 2) if n else 1
    rows = math.ceil(n / cols)
    # panels sized so that the whole figure stays near the page width (text keeps its size)
    width = max(3.0, 0.62 * max(len(h.resources) for h in heatmaps) + 1.2)
    height = max(2.2, 0.5 * max(len(h.numa_nodes) for h in heatmaps) + 1.3)
    fig = _figure(figsize=(width * cols + 0.8, height * rows), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False)
    cmap = matplotlib.colormaps["YlOrRd"].with_extremes(bad="#eeeeee")
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
        ax.set_title(_heatmap_label(h, t_end, sep="\n"), fontsize=10)
    if image is not None:
        fig.colorbar(image, ax=axes.ravel().tolist(), shrink=0.85, label="utilisation")
    return fig


def _heatmap_label(h: NumaHeatmap, t_end: float | None, sep: str = " ") -> str:
    when = "" if h.time_s is None else f"{sep}at t = {format_time(h.time_s, t_end)}"
    return f"{h.profile}: node {h.node}{when}"


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
    t_end = _t_max(series)
    span = (
        f" Time axis: 0 to the end of the simulation ({format_time(t_end)}), the same on every "
        "time plot; where lines coincide, the later profile is drawn on top."
    )
    if series:
        out.append(
            (
                "failures",
                "TopologyAffinityErrors over time (cumulative): pods the scheduler bound to a node "
                "whose Topology Manager then rejected them." + span,
                _png(figure_failures(series, t_end)),
            )
        )
        if any(s.utilisation for s in series.values()):
            out.append(
                (
                    "utilisation",
                    "Share of the cluster's capacity allocated to running pods, per resource "
                    "(after the last arrival the running pods finish and the cluster drains)."
                    + span,
                    _png(figure_utilisation(series, t_end)),
                )
            )
        out.append(
            (
                "pending",
                "Pods waiting for a node (and, when sampled, the share of free capacity that no "
                "single-NUMA request can use: free capacity outside each node's emptiest NUMA "
                "node; an empty node with n equal NUMA nodes scores 1 - 1/n)." + span,
                _png(figure_pending(series, t_end)),
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
        which = "; ".join(_heatmap_label(h, t_end or None) for h in maps)
        out.append(
            (
                "heatmap",
                "NUMA heat maps, one node per profile: allocated share of each NUMA node's CPUs, "
                "memory and devices on the node with the highest CPU share, at the sample where "
                f"that profile's cluster was busiest ({which}).",
                _png(figure_heatmaps(maps, t_end or None)),
            )
        )
    return out


# --------------------------------------------------------------------------------------------
# Cluster description
# --------------------------------------------------------------------------------------------


def _gib(n_bytes: int) -> str:
    gib = n_bytes / (1 << 30)
    return f"{gib:.0f} GiB" if gib >= 10 else f"{gib:.3g} GiB"


def _machine_hardware(m: Machine) -> str:
    parts = [
        f"{len(m.sockets)} socket{'s' if len(m.sockets) != 1 else ''}",
        f"{len(m.numa_nodes)} NUMA node{'s' if len(m.numa_nodes) != 1 else ''}",
        f"{len(m.online_cpus)} CPUs ({m.cpus_per_core} per core)",
        _gib(sum(n.memory for n in m.numa_nodes)) + " memory",
    ]
    devices: dict[str, int] = {}
    for d in m.devices:
        if d.healthy:
            devices[d.resource] = devices.get(d.resource, 0) + 1
    parts += [f"{n} {r}" for r, n in sorted(devices.items())]
    return ", ".join(parts)


def cluster_overview(nodes: Sequence[tuple[str, Machine]], source: str) -> dict[str, Any]:
    """A JSON-friendly description of a cluster for the report: ``nodes``, ``source``,
    ``groups`` (nodes of one machine type and kubelet configuration: ``count``, ``machine``,
    ``hardware``, ``topology_manager``, ``cpu_manager``, ``memory_manager``, ``example``) and a
    one-line ``description``."""
    groups: dict[tuple[str, str, str, str, str, str], dict[str, Any]] = {}
    for name, m in nodes:
        k = m.kubelet
        tm = f"{k.topology_manager_policy} (scope {k.topology_manager_scope})"
        version = str(k.kubelet_version) if k.kubelet_version else "newest modelled"
        key = (m.name, _machine_hardware(m), tm, k.cpu_manager_policy, k.memory_manager_policy,
               version)
        g = groups.get(key)
        if g is None:
            groups[key] = {
                "count": 1,
                "machine": m.name,
                "hardware": key[1],
                "topology_manager": tm,
                "cpu_manager": k.cpu_manager_policy,
                "memory_manager": k.memory_manager_policy,
                "kubelet_version": version,
                "example": name,
            }
        else:
            g["count"] += 1
    ordered = sorted(groups.values(), key=lambda g: (-g["count"], g["machine"], g["example"]))
    machines: dict[str, int] = {}
    for g in ordered:
        machines[g["machine"]] = machines.get(g["machine"], 0) + g["count"]
    kinds = ", ".join(f"{n} x {m}" for m, n in machines.items())
    return {
        "nodes": len(nodes),
        "source": source,
        "description": f"{len(nodes)} nodes from {source}: {kinds}" if nodes else "no nodes",
        "groups": ordered,
    }


# --------------------------------------------------------------------------------------------
# Tables, HTML, files
# --------------------------------------------------------------------------------------------

#: (summary key, column label, what it means) - the table and its legend.
_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("profile", "profile", "the scheduler replayed (see Profiles below)"),
    ("scheduled", "scheduled", "pods bound to a node and admitted by it"),
    (
        "topology_affinity_errors",
        "topo errors",
        "of the rejected, those the node's Topology Manager refused (TopologyAffinityError)",
    ),
    (
        "rejected",
        "rejected",
        "pods bound to a node that then refused them (any kubelet reason); they fail",
    ),
    ("pending", "pending", "pods no node could take, still waiting at the end of the simulation"),
    (
        "dropped",
        "dropped",
        "pending pods given up because their end time (e.g. the trace's deletion) passed first",
    ),
    ("arrived", "arrived", "pods the workload submitted"),
    ("retries", "recreated", "rejected pods recreated by their controller (--recreate)"),
    (
        "aligned_fraction",
        "aligned",
        "share of scheduled pods whose CPUs, memory and devices lie on the fewest NUMA nodes "
        "that can hold them",
    ),
    (
        "scheduler_cpu_s",
        "CPU s",
        "CPU time the scheduler spent on all its cycles (thread time; steadier than wall time)",
    ),
    ("p50", "p50 ms", "median wall-clock time of one scheduling cycle"),
    ("p99", "p99 ms", "99th percentile wall-clock time of one scheduling cycle"),
)

#: Why rows add up (shown under the table).
ACCOUNTING_NOTE = "scheduled + rejected + pending + dropped = arrived + recreated"

_PROFILE_NOTES: Mapping[str, str] = {
    "default": "kube-scheduler without NUMA awareness; the node's Topology Manager decides "
    "after binding",
    "nrt-snn": "scheduler-plugins NodeResourceTopologyMatch (single-numa-node nodes filtered "
    "against per-NUMA free amounts)",
    "volcano": "Volcano numa-aware predicate and score",
    "numalign": "the node's own admission as the filter (exact), fewest NUMA nodes preferred",
}


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
        str(p.get("dropped", 0)),
        str(p.get("arrived", "-")),
        str(p.get("retries", 0)),
        "-" if p.get("aligned_fraction") is None else f"{100 * p['aligned_fraction']:.1f}%",
        num(p.get("scheduler_cpu_s"), ".2f"),
        num(lat.get("p50"), ".2f"),
        num(lat.get("p99"), ".2f"),
    ]


def format_summary_table(summary: Mapping[str, Any]) -> str:
    """The per-profile summary as an aligned plain-text table (no trailing newline)."""
    profiles: Mapping[str, Any] = summary.get("profiles", {})
    header = [label for _, label, _ in _COLUMNS]
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
    return "\n".join(out + release_lines(summary))


_LEGEND_WIDTH = 96


def format_summary_legend(summary: Mapping[str, Any] | None = None) -> str:
    """What the table's columns mean, one per line, and why the rows add up (no trailing
    newline). With a summary, only the profiles it has are described."""
    width = max(len(label) for _, label, _ in _COLUMNS[1:])

    def entry(label: str, text: str) -> list[str]:
        return textwrap.wrap(
            text,
            width=_LEGEND_WIDTH,
            initial_indent=f"  {label.rjust(width)}: ",
            subsequent_indent=" " * (width + 4),
        )

    lines = ["columns:"]
    for _, label, text in _COLUMNS[1:]:
        lines += entry(label, text)
    lines += entry("rows", ACCOUNTING_NOTE)
    names = list((summary or {}).get("profiles", {})) or list(_PROFILE_NOTES)
    lines.append("profiles:")
    for n in names:
        if n in _PROFILE_NOTES:
            lines += entry(n, _PROFILE_NOTES[n])
    return "\n".join(lines)


_CSS = """
*, *::before, *::after { box-sizing: border-box; }
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 2rem auto;
       max-width: 1000px; color: #222; line-height: 1.45; padding: 0 1rem;
       overflow-wrap: anywhere; }
h1 { font-size: 1.6rem; margin-bottom: 0.2rem; }
h2 { font-size: 1.15rem; margin-top: 2rem; border-bottom: 1px solid #ddd; padding-bottom: .2rem; }
.meta { color: #555; font-size: 0.92rem; }
.meta ul { margin: .2rem 0 .4rem; padding-left: 1.2rem; }
.scroll { overflow-x: auto; max-width: 100%; }
table { border-collapse: collapse; font-size: 0.92rem; margin-top: .6rem; }
th, td { padding: .3rem .6rem; border-bottom: 1px solid #e4e4e4; text-align: right;
         white-space: nowrap; overflow-wrap: normal; }
th:first-child, td:first-child { text-align: left; }
th { background: #f6f6f6; }
td.bad { color: #b30000; font-weight: 600; }
td.good { color: #1a7f1a; font-weight: 600; }
dl.legend { font-size: 0.88rem; color: #444; display: grid; grid-template-columns: max-content 1fr;
            gap: .15rem .8rem; margin: .8rem 0; }
dl.legend dt { font-weight: 600; }
dl.legend dd { margin: 0; }
figure { margin: 1rem 0 1.6rem; }
figure img { display: block; max-width: 100%; height: auto; }
figcaption { color: #555; font-size: 0.88rem; }
td:first-child, th:first-child { position: sticky; left: 0; background: #fff; }
th:first-child { background: #f6f6f6; }
@media (max-width: 600px) {
  body { margin: 1rem auto; padding: 0 .6rem; }
  table { font-size: .8rem; }
  th, td { padding: .25rem .4rem; }
  h1 { font-size: 1.3rem; }
  dl.legend { grid-template-columns: 1fr; }
  dl.legend dd { margin-bottom: .3rem; }
}
"""


def _html_table(summary: Mapping[str, Any]) -> str:
    profiles: Mapping[str, Any] = summary.get("profiles", {})
    head = "".join(
        f'<th title="{html.escape(text)}">{html.escape(label)}</th>' for _, label, text in _COLUMNS
    )
    body = []
    for name, p in profiles.items():
        cells = _cells(name, p)
        tds = []
        for (key, _, _), c in zip(_COLUMNS, cells, strict=True):
            cls = ""
            if key == "topology_affinity_errors":
                cls = ' class="bad"' if c not in ("0", "-") else ' class="good"'
            tds.append(f"<td{cls}>{html.escape(c)}</td>")
        body.append("<tr>" + "".join(tds) + "</tr>")
    return (
        f'<div class="scroll"><table><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )


def _html_legend(summary: Mapping[str, Any]) -> str:
    items = [
        f"<dt>{html.escape(label)}</dt><dd>{html.escape(text)}</dd>"
        for _, label, text in _COLUMNS[1:]
    ]
    items.append(f"<dt>rows</dt><dd>{html.escape(ACCOUNTING_NOTE)}</dd>")
    names = [n for n in summary.get("profiles", {}) if n in _PROFILE_NOTES]
    profiles = "".join(
        f"<dt>{html.escape(n)}</dt><dd>{html.escape(_PROFILE_NOTES[n])}</dd>" for n in names
    )
    out = f'<dl class="legend">{"".join(items)}</dl>'
    if profiles:
        out += f'<h3 class="meta">Profiles</h3><dl class="legend">{profiles}</dl>'
    return out


def _plain(value: Any) -> str:
    """A readable one-line rendering of a JSON-like value (no braces or quotes)."""
    if isinstance(value, Mapping):
        return ", ".join(f"{k}: {_plain(v)}" for k, v in value.items() if v not in (None, "", {}))
    if isinstance(value, (list, tuple)):
        return ", ".join(_plain(v) for v in value)
    return str(value)


def _cluster_html(cluster: Mapping[str, Any]) -> str:
    text = cluster.get("description") or _plain(
        {k: v for k, v in cluster.items() if k != "groups"}
    )
    groups = cluster.get("groups") or []
    items = "".join(
        "<li>"
        + html.escape(
            f"{g.get('count')} x {g.get('machine')}: {g.get('hardware')}; Topology Manager "
            f"{g.get('topology_manager')}, CPU manager {g.get('cpu_manager')}, memory manager "
            f"{g.get('memory_manager')} (e.g. {g.get('example')})"
        )
        + "</li>"
        for g in groups
        if isinstance(g, Mapping)
    )
    return html.escape(str(text)) + (f"<ul>{items}</ul>" if items else "")


def _meta_html(summary: Mapping[str, Any]) -> str:
    items = []
    for key in ("workload", "cluster", "seed", "generated"):
        v = summary.get(key)
        if v is None:
            continue
        if key == "cluster" and isinstance(v, Mapping):
            body = _cluster_html(v)
        elif isinstance(v, Mapping):
            body = html.escape(str(v.get("description") or v.get("name") or _plain(v)))
            spec = v.get("spec")
            if spec and v.get("description"):
                body += f" <code>{html.escape(str(spec))}</code>"
        else:
            body = html.escape(str(v))
        items.append(f"<div><b>{html.escape(key)}</b>: {body}</div>")
    return "".join(items)


#: said (stderr, report.html) when the plotting library is not installed
NO_PLOTS = "no plots: they need matplotlib (pip install 'numalign[report]')"


def plotting_available() -> bool:
    """Whether the plotting library (the ``report`` extra) is installed."""
    import importlib.util

    return importlib.util.find_spec("matplotlib") is not None


def render_html(
    summary: Mapping[str, Any],
    figures: Sequence[tuple[str, str, str]],
    title: str = "numalign simulation report",
) -> str:
    """The report page: summary table with its legend, and embedded PNG figures (or, without
    the plotting library, a line saying how to get them)."""
    figs = "".join(
        f'<figure id="{html.escape(fid)}"><img alt="{html.escape(fid)}" '
        f'src="data:image/png;base64,{data}"><figcaption>{html.escape(caption)}</figcaption>'
        "</figure>"
        for fid, caption, data in figures
    ) if plotting_available() else f'<p class="meta">{html.escape(NO_PLOTS)}</p>'
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>"
        f'<h1>{html.escape(title)}</h1><div class="meta">{_meta_html(summary)}</div>'
        f"<h2>Summary</h2>{_html_table(summary)}{_html_legend(summary)}"
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
    with collector_paused():  # the caller's heap (a replay's) is not walked figure after figure
        figures = render_figures(summary, series, heatmap) if plotting_available() else []
    _write_atomic(report_path, render_html(summary, figures, title))
    return summary_path, report_path


def check_writable_dir(out_dir: str | os.PathLike[str]) -> None:
    """Raise ``OSError`` unless ``out_dir`` is (or can be created as) a directory this process
    can write files in: it is created, and a probe file written and removed."""
    out = os.fspath(out_dir)
    if os.path.exists(out) and not os.path.isdir(out):
        raise NotADirectoryError(errno.ENOTDIR, "exists and is not a directory", out)
    os.makedirs(out, exist_ok=True)
    fd, probe = tempfile.mkstemp(prefix=".numalign-probe-", dir=out)
    os.close(fd)
    os.unlink(probe)


def _write_atomic(path: str, text: str) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)
