"""The grid: one cell per combination of the sweep's axis values, each with a stable id.

A cell is one ``numalign simulate`` run with one profile. Its parameters
(:class:`CellParams`) are the axis values with the workload spec made explicit: the pod limit
and the seed written into it (``synthetic:count=200,seed=2``; a sampled trace's
``...?sample=0.8&seed=2``), options in one order (:func:`numalign.sim.sources.format_spec`).

**Cell id**: the first 16 hex digits of the SHA-256 of the parameters and the numalign
version, as canonical JSON. The same parameters give the same id in any sweep file (axis and
key order do not matter); a new numalign version gives new ids, so results of another
version are never taken for this one's. Files are named by path, not content: after editing a
template or trace in place, use a new output directory.

The grid is ordered with the workload and the cluster outermost, so consecutive cells share
what a worker has loaded (:mod:`numalign.sim.sweep.cell` keeps it).
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from numalign.errors import InputError
from numalign.sim.sources import format_spec, has_randomness, split_spec, with_pod_limit
from numalign.sim.sweep.spec import AXES, SweepSpec

#: expansion order, outermost first (what a worker keeps loaded changes least often)
_ORDER = ("workload", "cluster", "scale", "policy", "scope", "seed", "profile")


@dataclass(frozen=True)
class CellParams:
    """Everything that decides a cell's numbers (and nothing else)."""

    cluster: str
    scale: int
    policy: str | None
    scope: str | None
    profile: str
    #: the workload spec as simulate gets it (pod limit and seed written in)
    workload: str
    seed: int
    recreate: bool

    def axis(self, name: str) -> Any:
        """The cell's value on an axis of :data:`numalign.sim.sweep.spec.AXES`."""
        return getattr(self, name)

    def kubelet(self) -> dict[str, str]:
        """The kubelet overrides applied to every node group."""
        out = {}
        if self.policy is not None:
            out["topologyManagerPolicy"] = self.policy
        if self.scope is not None:
            out["topologyManagerScope"] = self.scope
        return out


def cell_id(params: CellParams, version: str) -> str:
    """16 hex digits naming ``params`` under numalign ``version``."""
    doc = {"numalign": version, "params": asdict(params)}
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()[:16]


@dataclass(frozen=True)
class Cell:
    id: str
    params: CellParams
    #: the cell's value on every axis as the sweep file wrote it (the workload before its pod
    #: limit and seed were written in): what the table and the report group by
    written: tuple[tuple[str, Any], ...] = ()

    def axis(self, name: str) -> Any:
        """The value on axis ``name`` as written in the sweep file."""
        return dict(self.written).get(name, self.params.axis(name))


def effective_workload(spec: str, seed: int, pod_limit: int | None) -> str:
    """The workload spec a cell runs: ``spec`` with at most ``pod_limit`` pods and ``seed``
    (unless the spec sets its own; a workload without randomness keeps none), spelled
    canonically."""
    parsed = split_spec(with_pod_limit(spec, pod_limit) if pod_limit is not None else spec)
    if has_randomness(spec) and "seed" not in parsed.options:
        parsed = replace(parsed, options={**parsed.options, "seed": str(seed)})
    return format_spec(parsed)


def expand(spec: SweepSpec, version: str) -> list[Cell]:
    """Every cell of the grid, in execution order (see the module docstring).

    A seed axis of several values over a workload without randomness (a trace without
    ``sample=F``) is an error: every seed would repeat the same cell."""
    seeds = spec.axes["seed"]
    if len(seeds) > 1:
        for w in spec.axes["workload"]:
            if "seed" in split_spec(w).options:
                raise InputError(
                    f"{len(seeds)} seeds but workload {w!r} sets its own seed: every seed "
                    "would repeat the same cell (remove seed= from the spec)",
                    f"{spec.source}: axes.seed",
                )
            if not has_randomness(w):
                raise InputError(
                    f"{len(seeds)} seeds but workload {w!r} has no randomness: every seed "
                    "would repeat the same cell (sample a trace with sample=F, e.g. "
                    f"{w}{'&' if '?' in w else '?'}sample=0.8)",
                    f"{spec.source}: axes.seed",
                )
    if spec.pod_limit is not None:
        for w in spec.axes["workload"]:
            try:
                with_pod_limit(w, spec.pod_limit)
            except InputError as e:
                raise InputError(f"workload {w!r}: {e.message}", f"{spec.source}: podLimit") from None
    cells: list[Cell] = []
    seen: set[str] = set()
    for combo in itertools.product(*(spec.axes[a] for a in _ORDER)):
        values = dict(zip(_ORDER, combo, strict=True))
        params = CellParams(
            cluster=values["cluster"],
            scale=values["scale"],
            policy=values["policy"],
            scope=values["scope"],
            profile=values["profile"],
            workload=effective_workload(values["workload"], values["seed"], spec.pod_limit),
            seed=values["seed"],
            recreate=spec.recreate,
        )
        cid = cell_id(params, version)
        if cid in seen:  # two spellings of one workload: one cell
            continue
        seen.add(cid)
        cells.append(Cell(cid, params, tuple((a, values[a]) for a in AXES)))
    return cells


def parse_only(items: Sequence[str]) -> dict[str, set[str]]:
    """``--only AXIS=VALUE`` (repeatable; several values of one axis are alternatives)."""
    out: dict[str, set[str]] = {}
    for item in items:
        axis, sep, value = item.partition("=")
        axis = axis.strip()
        if not sep or axis not in AXES:
            raise InputError(f"expected AXIS=VALUE with AXIS one of {', '.join(AXES)}, "
                             f"got {item!r}", "--only")
        out.setdefault(axis, set()).add(value.strip())
    return out


def select(cells: Iterable[Cell], only: Mapping[str, set[str]], spec: SweepSpec) -> list[Cell]:
    """The cells whose axis values are among ``only``'s (values as written in the sweep
    file, compared as text); an error when a value is not on its axis."""
    for axis, wanted in only.items():
        known = {str(v) for v in spec.axes[axis]}
        for value in sorted(wanted - known):
            raise InputError(f"{axis} has no value {value!r} in this sweep (values: "
                             f"{', '.join(sorted(known))})", "--only")
    return [c for c in cells
            if all(str(c.axis(axis)) in wanted for axis, wanted in only.items())]
