"""A sweep's ``report.html``: each metric plotted over the axes the sweep file names.

One figure per metric (``report.metrics``): the ``x`` axis's values along the horizontal
axis, one line per value of ``series``, one panel per combination of ``panels``; each point
is the mean over the seeds and its error bar spans the lowest to the highest seed. Failed
cells are left out (and listed). Below the plots, the table of those means (at most
:data:`MAX_TABLE_ROWS` rows; ``sweep.csv`` has every cell).

One self-contained file, as the simulate report: PNGs rendered with matplotlib's Agg backend
embedded as ``data:`` URIs, no script. Without matplotlib the page says how to get the plots.
"""

from __future__ import annotations

import base64
import html
import io
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from numalign.sim.report import NO_PLOTS, PROFILE_COLORS, plotting_available
from numalign.sim.sweep.metrics import BY_NAME, Metric
from numalign.sim.sweep.spec import AXES, SweepSpec

if TYPE_CHECKING:
    from matplotlib.figure import Figure

MAX_PANELS = 12
MAX_TABLE_ROWS = 500
MAX_FAILURES_LISTED = 50
_COLORS = ("#2ca02c", "#d62728", "#1f77b4", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf")

Key = tuple[Any, ...]


def _label(value: Any, width: int = 28) -> str:
    text = "template's" if value is None else str(value)
    return text if len(text) <= width else text[: width - 1] + "…"


def _stats(values: Sequence[float]) -> tuple[float, float, float, int]:
    return sum(values) / len(values), min(values), max(values), len(values)


def aggregate(
    rows: Sequence[Mapping[str, Any]], spec: SweepSpec, metric: str
) -> dict[Key, dict[Any, dict[Any, tuple[float, float, float, int]]]]:
    """panel key -> series value -> x value -> (mean, min, max, seeds) over the ok cells."""
    layout = spec.report
    groups: dict[Key, dict[Any, dict[Any, list[float]]]] = {}
    for row in rows:
        value = row.get(metric)
        if row.get("status") not in ("ok", "resumed") or value is None:
            continue
        panel = tuple(row[a] for a in layout.panels)
        series = row[layout.series] if layout.series else None
        x = row[layout.x] if layout.x else None
        groups.setdefault(panel, {}).setdefault(series, {}).setdefault(x, []).append(float(value))
    return {p: {s: {x: _stats(v) for x, v in xs.items()} for s, xs in ss.items()}
            for p, ss in groups.items()}


def _ordered(spec: SweepSpec, axis: str | None, present: Sequence[Any]) -> list[Any]:
    if axis is None:
        return [None]
    return [v for v in spec.axes[axis] if v in present]


def _panel_title(spec: SweepSpec, key: Key) -> str:
    return ", ".join(f"{a}={_label(v, 40)}" for a, v in zip(spec.report.panels, key, strict=True))


def figure_metric(spec: SweepSpec, metric: Metric,
                  data: Mapping[Key, Mapping[Any, Mapping[Any, tuple[float, float, float, int]]]],
                  ) -> Figure:
    import matplotlib.pyplot as plt

    layout = spec.report
    panels = [k for k in _panel_keys(spec) if k in data][:MAX_PANELS] or list(data)[:MAX_PANELS]
    ncols = max(1, min(3, len(panels)))
    nrows = math.ceil(len(panels) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(8.5, 0.6 + 3.0 * nrows), squeeze=False,
                             sharey=True)
    scale = 100.0 if metric.percent else 1.0
    series_values = _ordered(spec, layout.series, [s for d in data.values() for s in d])
    fixed = dict(PROFILE_COLORS) if layout.series == "profile" else {}  # as the simulate report
    spare = iter([c for c in _COLORS if c not in fixed.values()] * (1 + len(series_values)))
    colors = {s: fixed[s] if s in fixed else next(spare) for s in series_values}
    xs = _ordered(spec, layout.x, [x for d in data.values() for s in d.values() for x in s])
    dodge = 0.5 / max(1, len(series_values))
    for i, key in enumerate(panels):
        ax = axes[i // ncols][i % ncols]
        for j, s in enumerate(series_values):
            points = data[key].get(s, {})
            pos = [k + (j - (len(series_values) - 1) / 2) * dodge
                   for k, x in enumerate(xs) if x in points]
            stats = [points[x] for x in xs if x in points]
            if not stats:
                continue
            means = [st[0] * scale for st in stats]
            low = [(st[0] - st[1]) * scale for st in stats]
            high = [(st[2] - st[0]) * scale for st in stats]
            ax.errorbar(pos, means, yerr=[low, high], color=colors[s], marker="o",
                        markersize=4, linewidth=1.4, capsize=3,
                        label=_label(s) if layout.series else metric.label)
        ax.set_xticks(range(len(xs)), [_label(x, 18) for x in xs],
                      rotation=25 if len(xs) > 3 else 0, ha="right" if len(xs) > 3 else "center",
                      fontsize=8)
        ax.set_xlim(-0.5, len(xs) - 0.5)
        if layout.panels:
            ax.set_title(_panel_title(spec, key), fontsize=8)
        if i % ncols == 0:
            ax.set_ylabel(metric.label + (" (%)" if metric.percent else ""), fontsize=9)
        if i // ncols == nrows - 1 and layout.x:
            ax.set_xlabel(layout.x, fontsize=9)
        ax.grid(True, color="#e5e5e5", linewidth=0.8)
        ax.set_axisbelow(True)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
    for k in range(len(panels), nrows * ncols):
        axes[k // ncols][k % ncols].set_visible(False)
    handles, labels = axes[0][0].get_legend_handles_labels()
    if handles and layout.series:
        fig.legend(handles, labels, loc="upper center", ncol=min(5, len(handles)), frameon=False,
                   fontsize=8, title=layout.series, title_fontsize=8)
    fig.tight_layout(rect=(0, 0, 1, 0.86 if layout.series else 1))
    return fig


def _panel_keys(spec: SweepSpec) -> list[Key]:
    import itertools

    return list(itertools.product(*(spec.axes[a] for a in spec.report.panels)))


def _png(fig: Figure) -> str:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def render_figures(spec: SweepSpec, rows: Sequence[Mapping[str, Any]]) -> list[tuple[str, str, str]]:
    """``(metric name, caption, base64 PNG)`` per metric that has a value in some cell."""
    import matplotlib

    matplotlib.use("Agg")
    layout = spec.report
    out = []
    for name in layout.metrics:
        metric = BY_NAME[name]
        data = aggregate(rows, spec, name)
        if not data:
            continue
        seeds = max(st[3] for d in data.values() for xs in d.values() for st in xs.values())
        spread = (f" Points are means over up to {seeds} seeds; error bars span the lowest to the "
                  "highest seed." if seeds > 1 else " One seed per point: no spread to show.")
        panels = len([k for k in _panel_keys(spec) if k in data])
        where = (f" x: {layout.x}" if layout.x else "") + (f"; lines: {layout.series}"
                                                           if layout.series else "")
        if layout.panels:
            where += f"; one panel per {', '.join(layout.panels)}"
            if panels > MAX_PANELS:
                where += f" (the first {MAX_PANELS} of {panels})"
        timing = " Wall-clock or CPU time: it varies between runs." if metric.timing else ""
        caption = f"{metric.label}: {metric.text}.{where}.{spread}{timing}"
        out.append((name, caption, _png(figure_metric(spec, metric, data))))
    return out


_CSS = """
*, *::before, *::after { box-sizing: border-box; }
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 2rem auto;
       max-width: 1000px; color: #222; line-height: 1.45; padding: 0 1rem;
       overflow-wrap: anywhere; }
h1 { font-size: 1.6rem; margin-bottom: .2rem; }
h2 { font-size: 1.15rem; margin-top: 2rem; border-bottom: 1px solid #ddd; padding-bottom: .2rem; }
.meta { color: #555; font-size: .92rem; }
.scroll { overflow-x: auto; max-width: 100%; }
table { border-collapse: collapse; font-size: .85rem; margin-top: .6rem; }
th, td { padding: .25rem .5rem; border-bottom: 1px solid #e4e4e4; text-align: right;
         white-space: nowrap; overflow-wrap: normal; }
th { background: #f6f6f6; }
td.axis, th.axis { text-align: left; }
figure { margin: 1rem 0 1.6rem; }
figure img { display: block; max-width: 100%; height: auto; }
figcaption { color: #555; font-size: .88rem; }
ul.failed { font-size: .88rem; }
code { font-size: .85rem; }
@media (max-width: 600px) {
  body { margin: 1rem auto; padding: 0 .6rem; }
  table { font-size: .75rem; }
  h1 { font-size: 1.3rem; }
}
"""


def _fmt(value: float, metric: Metric) -> str:
    if metric.percent:
        return f"{100 * value:.1f}%"
    if abs(value) >= 100 or float(value).is_integer():
        return f"{value:,.0f}" if abs(value) >= 100 else f"{value:g}"
    return f"{value:.3g}"


def _table_html(spec: SweepSpec, rows: Sequence[Mapping[str, Any]]) -> str:
    """Means over seeds of every metric, one row per combination of the other axes."""
    axes = [a for a in AXES if a != "seed" and len(spec.axes[a]) > 1]
    groups: dict[Key, list[Mapping[str, Any]]] = {}
    for row in rows:
        if row.get("status") in ("ok", "resumed"):
            groups.setdefault(tuple(row[a] for a in axes), []).append(row)
    metrics = [m for m in BY_NAME.values()
               if any(r.get(m.name) is not None for g in groups.values() for r in g)]
    head = "".join(f'<th class="axis">{html.escape(a)}</th>' for a in axes)
    head += "".join(f'<th title="{html.escape(m.text)}">{html.escape(m.label)}</th>'
                    for m in metrics) + "<th>seeds</th>"
    body = []
    for key, group in list(groups.items())[:MAX_TABLE_ROWS]:
        cells = "".join(f'<td class="axis">{html.escape(_label(v, 48))}</td>' for v in key)
        for m in metrics:
            vals = [float(r[m.name]) for r in group if r.get(m.name) is not None]
            cells += f"<td>{html.escape(_fmt(sum(vals) / len(vals), m)) if vals else '-'}</td>"
        body.append(f"<tr>{cells}<td>{len(group)}</td></tr>")
    note = ""
    if len(groups) > MAX_TABLE_ROWS:
        note = (f'<p class="meta">The first {MAX_TABLE_ROWS} of {len(groups)} rows; sweep.csv '
                "has every cell.</p>")
    return (f'<div class="scroll"><table><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(body)}</tbody></table></div>{note}")


def _failures_html(rows: Sequence[Mapping[str, Any]]) -> str:
    failed = [r for r in rows if r.get("status") == "failed"]
    if not failed:
        return ""
    items = "".join(
        f"<li><code>{html.escape(str(r['id']))}</code> "
        f"{html.escape(', '.join(f'{a}={_label(r[a], 60)}' for a in AXES if r.get(a) is not None))}"
        f": {html.escape(str(r.get('error') or ''))}</li>"
        for r in failed[:MAX_FAILURES_LISTED]
    )
    more = (f"<p class='meta'>and {len(failed) - MAX_FAILURES_LISTED} more (sweep.csv)</p>"
            if len(failed) > MAX_FAILURES_LISTED else "")
    return f'<h2>Failed cells ({len(failed)})</h2><ul class="failed">{items}</ul>{more}'


def _meta_html(spec: SweepSpec, run: Mapping[str, Any]) -> str:
    parts = []
    if spec.description:
        parts.append(f"<div>{html.escape(spec.description)}</div>")
    axes = "; ".join(f"{a}: {', '.join(_label(v, 60) for v in spec.axes[a])}" for a in AXES)
    parts.append(f"<div><b>axes</b>: {html.escape(axes)}</div>")
    facts = ", ".join(f"{k.replace('_', ' ')}: {v}" for k, v in run.items()
                      if isinstance(v, int | float | str) and not isinstance(v, bool))
    parts.append(f"<div><b>run</b>: {html.escape(facts)}</div>")
    return "".join(parts)


def render_html(spec: SweepSpec, rows: Sequence[Mapping[str, Any]], run: Mapping[str, Any],
                figures: Sequence[tuple[str, str, str]]) -> str:
    title = f"numalign sweep: {spec.name}"
    if not plotting_available():
        figs = f'<p class="meta">{html.escape(NO_PLOTS)}</p>'
    elif not figures:
        figs = '<p class="meta">no cell finished: nothing to plot</p>'
    else:
        figs = "".join(
            f'<figure id="{html.escape(name)}"><img alt="{html.escape(name)}" '
            f'src="data:image/png;base64,{data}"><figcaption>{html.escape(caption)}</figcaption>'
            "</figure>"
            for name, caption, data in figures
        )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>"
        f'<h1>{html.escape(title)}</h1><div class="meta">{_meta_html(spec, run)}</div>'
        f"<h2>Plots</h2>{figs}<h2>Means over seeds</h2>{_table_html(spec, rows)}"
        f"{_failures_html(rows)}</body></html>\n"
    )


def report_html(spec: SweepSpec, rows: Sequence[Mapping[str, Any]], run: Mapping[str, Any]) -> str:
    """The whole page (plots only when matplotlib is installed)."""
    figures = render_figures(spec, rows) if plotting_available() else []
    return render_html(spec, rows, run, figures)
