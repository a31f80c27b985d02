"""Checks of a sweep's values that need the library, on the client, before any cell runs.

* every profile name (as ``simulate --profiles``);
* every cluster variant (template x policy x scope) loads: the template file, its machines,
  and the kubelet's rules for the overridden policy and scope; scaled node counts stay within
  :data:`MAX_NODES`;
* every workload spec, as the cell will run it (pod limit and seed written in), passes
  :func:`numalign.sim.sources.check_workload_spec`: its source, options, and a trace's path,
  header and first row. A malformed row further down a trace fails its cells only, with the
  row named.

Each error is one line: the sweep file, the axis and the value, then the library's message.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from numalign.errors import InputError
from numalign.sim.cluster import cluster_template, load_cluster, template_variant
from numalign.sim.runner import check_profiles
from numalign.sim.sources import check_workload_spec
from numalign.sim.sweep.grid import Cell, effective_workload
from numalign.sim.sweep.spec import SweepSpec

#: most nodes of one cell's cluster (a template times its scale)
MAX_NODES = 100_000


def _node_count(doc: dict[str, Any]) -> int:
    total = 0
    for entry in doc.get("nodes") or []:
        count = entry.get("count", 1) if isinstance(entry, dict) else 1
        total += count if isinstance(count, int) and not isinstance(count, bool) else 1
    return total


def check_profiles_axis(spec: SweepSpec) -> None:
    try:
        check_profiles(list(spec.axes["profile"]))
    except InputError as e:
        raise InputError(e.problem, f"{spec.source}: axes.profile") from None


def check_clusters(spec: SweepSpec, base_dir: str) -> None:
    for cluster in spec.axes["cluster"]:
        try:
            doc, source, base = cluster_template(cluster, base_dir)
        except InputError as e:
            raise InputError(e.message, f"{spec.source}: axes.cluster {cluster!r}") from None
        nodes = _node_count(doc)
        for scale in spec.axes["scale"]:
            if nodes * scale > MAX_NODES:
                raise InputError(f"{cluster!r} at scale {scale} has {nodes * scale:,} nodes, "
                                 f"more than the cap of {MAX_NODES:,} (MAX_NODES)",
                                 f"{spec.source}: axes.scale")
        for policy in spec.axes["policy"]:
            for scope in spec.axes["scope"]:
                kubelet = {}
                if policy is not None:
                    kubelet["topologyManagerPolicy"] = policy
                if scope is not None:
                    kubelet["topologyManagerScope"] = scope
                try:
                    load_cluster(template_variant(doc, kubelet=kubelet), source, base)
                except InputError as e:
                    what = ", ".join(f"{k}={v}" for k, v in (("policy", policy), ("scope", scope))
                                     if v is not None)
                    at = f"axes.cluster {cluster!r}" + (f" with {what}" if what else "")
                    raise InputError(e.message, f"{spec.source}: {at}") from None


def check_workloads(spec: SweepSpec, cells: Sequence[Cell], shared_dir: str | None,
                    base_dir: str) -> None:
    wanted = {c.params.workload for c in cells}
    checked: set[str] = set()
    for written in spec.axes["workload"]:
        for seed in spec.axes["seed"]:
            run = effective_workload(written, seed, spec.pod_limit)
            if run in checked or run not in wanted:
                continue
            checked.add(run)
            try:
                check_workload_spec(run, shared_dir, base_dir=base_dir)
            except InputError as e:
                as_run = f" (run as {run!r})" if run != written else ""
                raise InputError(e.message,
                                 f"{spec.source}: axes.workload {written!r}{as_run}") from None


def check_sweep(spec: SweepSpec, cells: Sequence[Cell], shared_dir: str | None,
                base_dir: str) -> None:
    """Every check above, cheapest first."""
    check_profiles_axis(spec)
    check_clusters(spec, base_dir)
    check_workloads(spec, cells, shared_dir, base_dir)
