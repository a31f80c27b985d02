"""One cell, as a Dask worker runs it: load (or reuse) the cluster and the workload, then the
same :func:`numalign.sim.cli_run.simulation_summary` that ``numalign simulate`` runs.

**Per-worker cache.** A worker process keeps what it loaded for the cells of one sweep run
(:attr:`CellTask.run`): the cluster of each (template, scale, policy, scope) and the workload
of each spec (a trace's sampled variants share its one load; a synthetic workload is
generated for its cluster, as ``simulate`` does). The grid's order keeps cells that share
them together, so a worker reads each trace or template once. Entries of another run are never
used (a file may have changed in between); at most :data:`MAX_WORKLOADS` workloads and
:data:`MAX_CLUSTERS` clusters are kept, least recently used first out.

**Errors.** A cell whose input is wrong (an :class:`~numalign.errors.InputError`, e.g. a
malformed row deep in a trace) returns a failed result with the message: retrying it would
fail again. Any other exception propagates to Dask, which retries the cell (``retries``) and
then reports the exception.

**Start events.** Each start is logged on the Dask scheduler under the topic :data:`TOPIC`
(``{"run", "cell", "worker", "pid"}``): the client counts a cell that started twice as a
rerun (its worker was lost, or it raised and was retried).
"""

from __future__ import annotations

import os
import resource
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from numalign.errors import NumalignError
from numalign.machine.model import Machine
from numalign.sim.cli_run import simulation_summary
from numalign.sim.cluster import cluster_template, load_cluster, template_variant
from numalign.sim.sources import SOURCES, format_spec, load_spec, split_sampling, split_spec
from numalign.sim.sweep.grid import Cell
from numalign.sim.workloads import Workload

#: the Dask event topic of cell starts
TOPIC = "numalign-sweep"
MAX_WORKLOADS = 4
MAX_CLUSTERS = 16

Nodes = list[tuple[str, Machine]]
T = TypeVar("T")


@dataclass(frozen=True)
class CellTask:
    """What the client sends a worker for one cell."""

    cell: Cell
    #: the client's working directory: relative paths are taken from there
    base_dir: str
    #: the directory holding traces/ (absolute), if any
    shared_dir: str | None
    #: this sweep run (a fresh token per ``numalign sweep`` invocation)
    run: str


class _Lru:
    """A small least-recently-used map (one per kind of entry)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.items: OrderedDict[Hashable, Any] = OrderedDict()

    def get(self, key: Hashable, load: Callable[[], T]) -> tuple[T, bool]:
        """The value for ``key`` and whether it was cached (else ``load()`` makes it)."""
        if key in self.items:
            self.items.move_to_end(key)
            value: T = self.items[key]
            return value, True
        value = load()
        self.items[key] = value
        while len(self.items) > self.size:
            self.items.popitem(last=False)
        return value, False


_LOCK = threading.Lock()
_CLUSTERS = _Lru(MAX_CLUSTERS)
_WORKLOADS = _Lru(MAX_WORKLOADS)


def cell_nodes(task: CellTask) -> tuple[Nodes, bool]:
    """The cell's cluster (the template with the cell's scale and kubelet overrides), and
    whether this worker had it already."""
    p = task.cell.params
    key = ("cluster", task.run, task.base_dir, p.cluster, p.scale, p.policy, p.scope)

    def load() -> Nodes:
        doc, source, base = cluster_template(p.cluster, task.base_dir)
        return load_cluster(template_variant(doc, scale=p.scale, kubelet=p.kubelet()), source,
                            base)

    return _CLUSTERS.get(key, load)


def cell_workload(task: CellTask, nodes: Sequence[tuple[str, Machine]]) -> tuple[Workload, bool]:
    """The cell's workload (as :func:`numalign.sim.sources.parse_workload_spec` builds it),
    and whether this worker had its unsampled load already."""
    p = task.cell.params
    base, sampling = split_sampling(split_spec(p.workload))
    scaled = not SOURCES[base.source].takes_path  # a generator: made for this cluster
    key = ("workload", task.run, task.base_dir, task.shared_dir, format_spec(base),
           (p.cluster, p.scale, p.policy, p.scope) if scaled else None)
    workload, hit = _WORKLOADS.get(
        key, lambda: load_spec(base, task.shared_dir, cluster=nodes, base_dir=task.base_dir)
    )
    return (sampling.apply(workload) if sampling is not None else workload), hit


def peak_rss_mib() -> float:
    """This process's peak resident set size (``getrusage``; KiB on Linux, bytes on macOS)."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / (1024 * 1024) if sys.platform == "darwin" else rss / 1024


def _announce(task: CellTask) -> str | None:
    """Log the start on the scheduler (when running on a Dask worker); the worker's address."""
    try:
        from distributed import get_worker
    except ImportError:  # pragma: no cover - the sweep extra is missing
        return None
    try:
        worker = get_worker()
    except ValueError:  # not on a worker: called directly
        return None
    worker.log_event(TOPIC, {"run": task.run, "cell": task.cell.id, "worker": worker.address,
                             "pid": os.getpid()})
    return str(worker.address)


def numalign_version() -> str:
    """The installed distribution's version, else the package's own (as ``--version``)."""
    from importlib import metadata

    try:
        return metadata.version("numalign")
    except metadata.PackageNotFoundError:
        from numalign import __version__

        return __version__


def run_cell(task: CellTask) -> dict[str, Any]:
    """Run one cell; its result document (see :mod:`numalign.sim.sweep.store`)."""
    worker = _announce(task)
    p = task.cell.params
    start = time.perf_counter()
    out: dict[str, Any] = {"id": task.cell.id, "worker": worker, "pid": os.getpid()}
    try:
        with _LOCK:
            nodes, cluster_hit = cell_nodes(task)
            workload, workload_hit = cell_workload(task, nodes)
        summary, _ = simulation_summary(
            nodes, workload, [p.profile], spec=p.workload, cluster_label=p.cluster,
            recreate=p.recreate,
        )
    except NumalignError as e:
        out.update(status="failed", error=e.message)
    else:
        out.update(status="ok", summary=summary["profiles"][p.profile], pods=len(workload),
                   nodes=len(nodes), cache={"cluster": cluster_hit, "workload": workload_hit})
    out.update(wall_s=round(time.perf_counter() - start, 3), peak_rss_mib=round(peak_rss_mib(), 1))
    return out
