"""The sweep file: which axes a grid of simulations spans, and what its report compares.

A sweep file is one YAML (or JSON) document, read with the project's bounded reader
(:func:`numalign.inputs.documents.read_yaml`: size, depth, encoding)::

    name: policies              # optional: names the default output directory
    description: ...            # optional: shown in the report
    axes:                       # every axis is a value or a list of values
      cluster: builtin:small    # cluster templates (builtin:NAME or a template file)
      scale: [1, 2]             # node-group counts multiplied by this
      policy: [restricted, single-numa-node]   # topologyManagerPolicy, every node group
      scope: pod                # topologyManagerScope, every node group
      profile: [default, numalign]
      workload: synthetic:count=200
      seed: [1, 2, 3]
    podLimit: 500               # optional: at most this many pods per workload
    recreate: false             # optional: simulate --recreate
    report:                     # optional: how report.html lays out the grid
      x: policy
      series: profile
      panels: [scale]
      metrics: [scheduled, topology_affinity_errors]

Everything here is checked before any cell runs; an error is one line naming the field. The
grid is capped at :data:`MAX_CELLS` cells. Profile names, policy and scope names, templates
and workload specs are checked by :mod:`numalign.sim.sweep.checks` (they need the library).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from math import prod
from typing import Any

from numalign.errors import InputError
from numalign.inputs.documents import read_yaml
from numalign.sim.sweep.metrics import BY_NAME, DEFAULT_PLOTS

#: axis name -> (value type, what it is); the order is the order of the table's columns
AXES: Mapping[str, tuple[type, str]] = {
    "cluster": (str, "cluster template: builtin:NAME or a template file"),
    "scale": (int, "every node group's count multiplied by this"),
    "policy": (str, "topologyManagerPolicy of every node group"),
    "scope": (str, "topologyManagerScope of every node group"),
    "profile": (str, "scheduler profile"),
    "workload": (str, "workload spec, as numalign simulate --workload"),
    "seed": (int, "seed of the synthetic generator or of a sampled trace"),
}
#: what an axis the file leaves out stands at (None: the template's own setting)
DEFAULTS: Mapping[str, tuple[Any, ...]] = {
    "cluster": ("builtin:default",),
    "scale": (1,),
    "policy": (None,),
    "scope": (None,),
    "profile": ("default", "nrt-snn", "volcano", "numalign"),
    "workload": ("synthetic",),
    "seed": (1,),
}
TOP_KEYS = ("name", "description", "axes", "podLimit", "recreate", "report")
REPORT_KEYS = ("x", "series", "panels", "metrics")

#: most cells one sweep may have (split a larger grid into several sweeps)
MAX_CELLS = 10_000
#: largest ``scale``
MAX_SCALE = 1_000
#: longest string value (a template path or a workload spec)
MAX_VALUE_CHARS = 4_096
_MAX_SEED = 2**63 - 1


@dataclass(frozen=True)
class ReportLayout:
    """How report.html places the axes: ``x`` on the horizontal axis, one line per
    ``series`` value, one panel per combination of ``panels``; seeds are the error bars."""

    x: str | None = None
    series: str | None = None
    panels: tuple[str, ...] = ()
    metrics: tuple[str, ...] = DEFAULT_PLOTS


@dataclass(frozen=True)
class SweepSpec:
    """A parsed sweep file: the values of every axis (defaults filled in)."""

    name: str
    axes: Mapping[str, tuple[Any, ...]]
    #: the axes the file names (the others stand at their defaults)
    given: tuple[str, ...] = ()
    description: str = ""
    pod_limit: int | None = None
    recreate: bool = False
    report: ReportLayout = field(default_factory=ReportLayout)
    source: str = "sweep"

    @property
    def cell_count(self) -> int:
        return prod(len(v) for v in self.axes.values())

    def varying(self) -> list[str]:
        """The axes with more than one value, in :data:`AXES` order."""
        return [a for a in AXES if len(self.axes[a]) > 1]


def _err(source: str, field: str, problem: str) -> InputError:
    return InputError(problem, f"{source}: {field}")


def _values(source: str, axis: str, raw: Any) -> tuple[Any, ...]:
    kind, _ = AXES[axis]
    at = f"axes.{axis}"
    items = list(raw) if isinstance(raw, list) else [raw]
    if not items:
        raise _err(source, at, "empty list: the grid would have no cell")
    seen: set[Any] = set()
    out: list[Any] = []
    for i, value in enumerate(items):
        where = f"{at}[{i}]" if isinstance(raw, list) else at
        if kind is int:
            if isinstance(value, bool) or not isinstance(value, int):
                raise _err(source, where, f"expected a whole number, got {value!r}")
            low, high = (1, MAX_SCALE) if axis == "scale" else (0, _MAX_SEED)
            if not low <= value <= high:
                raise _err(source, where, f"must be {low} to {high}, got {value}")
        else:
            if not isinstance(value, str) or not value.strip():
                raise _err(source, where, f"expected a non-empty string, got {value!r}")
            if len(value) > MAX_VALUE_CHARS:
                raise _err(source, where, f"longer than {MAX_VALUE_CHARS} characters")
            value = value.strip()
        if value in seen:
            raise _err(source, where, f"{value!r} given twice")
        seen.add(value)
        out.append(value)
    return tuple(out)


def _axis_name(source: str, where: str, value: Any, known: Sequence[str]) -> str:
    if not isinstance(value, str) or value not in known:
        raise _err(source, where, f"unknown axis {value!r} (known: {', '.join(known)})")
    return value


def _report(source: str, raw: Any, axes: Mapping[str, tuple[Any, ...]]) -> ReportLayout:
    """The report layout: named axes placed, every other varying axis (but seed) a panel."""
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise _err(source, "report", f"expected a mapping, got {type(raw).__name__}")
    for key in raw:
        if key not in REPORT_KEYS:
            raise _err(source, f"report.{key}", f"unknown field (known: {', '.join(REPORT_KEYS)})")
    placeable = [a for a in AXES if a != "seed"]
    x = raw.get("x")
    series = raw.get("series")
    if x is not None:
        x = _axis_name(source, "report.x", x, placeable)
    if series is not None:
        series = _axis_name(source, "report.series", series, placeable)
    panels_raw = raw.get("panels", [])
    if isinstance(panels_raw, str):
        panels_raw = [panels_raw]
    if not isinstance(panels_raw, list):
        raise _err(source, "report.panels", f"expected a list of axes, got {panels_raw!r}")
    panels = [_axis_name(source, f"report.panels[{i}]", p, placeable)
              for i, p in enumerate(panels_raw)]
    placed = [a for a in (x, series, *panels) if a is not None]
    if len(set(placed)) != len(placed):
        raise _err(source, "report", "an axis is placed twice (x, series, panels)")
    varying = [a for a in placeable if len(axes[a]) > 1 and a not in placed]
    if x is None and varying:
        x = varying.pop(0)
    if series is None and varying:
        series = varying.pop(0)
    panels += varying  # every varying axis has a place: nothing is averaged but seeds
    metrics_raw = raw.get("metrics", list(DEFAULT_PLOTS))
    if isinstance(metrics_raw, str):
        metrics_raw = [metrics_raw]
    if not isinstance(metrics_raw, list) or not metrics_raw:
        raise _err(source, "report.metrics", "expected a non-empty list of metric names")
    metrics: list[str] = []
    for i, m in enumerate(metrics_raw):
        if not isinstance(m, str) or m not in BY_NAME:
            raise _err(source, f"report.metrics[{i}]",
                       f"unknown metric {m!r} (known: {', '.join(BY_NAME)})")
        if m not in metrics:
            metrics.append(m)
    return ReportLayout(x, series, tuple(panels), tuple(metrics))


def parse_sweep(doc: Any, source: str = "sweep", default_name: str = "sweep") -> SweepSpec:
    """Check a parsed sweep document (see the module docstring)."""
    if not isinstance(doc, Mapping):
        raise InputError(f"expected a mapping with 'axes', got {type(doc).__name__}", source)
    for key in doc:
        if key not in TOP_KEYS:
            raise _err(source, str(key), f"unknown field (known: {', '.join(TOP_KEYS)})")
    name = doc.get("name", default_name)
    if not isinstance(name, str) or not name.strip() or len(name) > 200:
        raise _err(source, "name", f"expected a short non-empty string, got {name!r}")
    if "/" in name or "\\" in name or name.strip() in (".", ".."):
        raise _err(source, "name", f"must not be a path (it names a directory), got {name!r}")
    description = doc.get("description", "")
    if not isinstance(description, str) or len(description) > MAX_VALUE_CHARS:
        raise _err(source, "description", "expected a string of at most "
                   f"{MAX_VALUE_CHARS} characters")
    raw_axes = doc.get("axes")
    if raw_axes is None:
        raise _err(source, "axes", "missing required field (a mapping of axis -> values)")
    if not isinstance(raw_axes, Mapping):
        raise _err(source, "axes", f"expected a mapping, got {type(raw_axes).__name__}")
    if not raw_axes:
        raise _err(source, "axes", "no axis given: the grid would be a single default cell; "
                   f"name at least one of {', '.join(AXES)}")
    for key in raw_axes:
        _axis_name(source, f"axes.{key}", key, list(AXES))
    # the grid's size is known from the list lengths: checked before any value is looked at
    lengths = [len(v) if isinstance(v, list) else 1 for v in raw_axes.values()]
    lengths += [len(DEFAULTS[a]) for a in AXES if a not in raw_axes]
    if prod(lengths) > MAX_CELLS:
        raise _err(source, "axes", f"the grid has {prod(lengths):,} cells, more than the cap of "
                   f"{MAX_CELLS:,} (MAX_CELLS): split it into several sweeps")
    axes = {a: _values(source, a, raw_axes[a]) if a in raw_axes else DEFAULTS[a] for a in AXES}
    limit = doc.get("podLimit")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise _err(source, "podLimit", f"expected a whole number >= 1, got {limit!r}")
    recreate = doc.get("recreate", False)
    if not isinstance(recreate, bool):
        raise _err(source, "recreate", f"expected true or false, got {recreate!r}")
    return SweepSpec(
        name=name.strip(),
        axes=axes,
        given=tuple(a for a in AXES if a in raw_axes),
        description=description.strip(),
        pod_limit=limit,
        recreate=recreate,
        report=_report(source, doc.get("report"), axes),
        source=source,
    )


def read_sweep(path: str) -> SweepSpec:
    """Read and check a sweep file; its name defaults to the file name without extension."""
    doc = read_yaml(path, "sweep file")
    if doc is None:
        raise InputError("empty sweep file", path)
    stem = os.path.splitext(os.path.basename(path))[0] or "sweep"
    return parse_sweep(doc, path, stem)
