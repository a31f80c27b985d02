"""``numalign sweep SWEEP.yaml``: check the grid, skip finished cells, run the rest on Dask,
write the table and the report.

Order, so that a bad input costs nothing: the sweep file and every value in it are checked
(one-line errors, exit 2), then the finished cells are read from the output directory, then
(only when cells are left) Dask is reached, then the output directory is prepared and the cells
run. Exit status: 0 every cell done, 1 some cells failed (the others are done and written),
2 bad input, 130 interrupted (finished cells are kept: run the same command to resume).
"""

from __future__ import annotations

import importlib.util
import os
import sys
import time
import uuid
from collections.abc import Sequence
from typing import Any

from numalign.errors import InputError
from numalign.sim.cli_run import find_shared
from numalign.sim.report import NO_PLOTS, plotting_available
from numalign.sim.sweep import store
from numalign.sim.sweep.cell import CellTask, numalign_version
from numalign.sim.sweep.checks import check_sweep
from numalign.sim.sweep.executor import scheduler_address
from numalign.sim.sweep.grid import Cell, expand, parse_only, select
from numalign.sim.sweep.metrics import METRICS
from numalign.sim.sweep.progress import Progress, format_duration
from numalign.sim.sweep.report import report_html
from numalign.sim.sweep.spec import AXES, SweepSpec, read_sweep

NO_DASK = "needs Dask distributed: pip install 'numalign[sweep]'"


def describe(cell: Cell, spec: SweepSpec) -> str:
    """The cell's values on the axes that vary (what tells it apart in a log line)."""
    parts = [f"{a}={cell.axis(a)}" for a in spec.varying()]
    return " ".join(parts) or cell.params.profile


def _dry_run(spec: SweepSpec, cells: Sequence[Cell], done: set[str], out: str) -> int:
    for cell in cells:
        state = "done" if cell.id in done else "to run"
        print(f"{cell.id}  {state:<6}  {describe(cell, spec)}  (runs {cell.params.workload})")
    print(f"{len(cells)} cells: {len(done)} done in {out}, {len(cells) - len(done)} to run")
    return 0


def run_sweep(
    *,
    path: str,
    out: str | None,
    scheduler: str | None,
    workers: int | None,
    retries: int,
    connect_timeout: float,
    shared: str | None,
    only: Sequence[str],
    quiet: bool,
    dry_run: bool,
) -> int:
    if workers is not None and workers < 1:
        raise InputError(f"must be at least 1, got {workers}", "--workers")
    if retries < 0:
        raise InputError(f"must be at least 0, got {retries}", "--retries")
    if not connect_timeout > 0:
        raise InputError(f"must be > 0 seconds, got {connect_timeout}", "--connect-timeout")
    address, where = scheduler_address(scheduler)
    if address is not None and workers is not None:
        raise InputError("only without a scheduler address (the cluster has its own workers)",
                         "--workers")
    spec = read_sweep(path)
    version = numalign_version()
    cells = expand(spec, version)
    if only:
        cells = select(cells, parse_only(only), spec)
        if not cells:
            raise InputError("no cell has all these values", "--only")
    base_dir = os.getcwd()
    found = find_shared(shared)
    shared_dir = os.path.abspath(found) if found is not None else None
    check_sweep(spec, cells, shared_dir, base_dir)
    out_dir = out or os.path.join("out", "sweep", spec.name)
    done = store.load_done(out_dir, cells, version)
    if dry_run:
        return _dry_run(spec, cells, set(done), out_dir)
    todo = [c for c in cells if c.id not in done]
    if todo and importlib.util.find_spec("distributed") is None:
        raise InputError(NO_DASK)
    return _run(spec, cells, todo, done, out_dir, version=version, address=address, where=where,
                workers=workers, retries=retries, connect_timeout=connect_timeout,
                shared_dir=shared_dir, base_dir=base_dir, quiet=quiet)


def _run(spec: SweepSpec, cells: Sequence[Cell], todo: Sequence[Cell],
         done: dict[str, dict[str, Any]], out: str, *, version: str, address: str | None,
         where: str,
         workers: int | None, retries: int, connect_timeout: float, shared_dir: str | None,
         base_dir: str, quiet: bool) -> int:
    start = time.monotonic()
    progress = Progress(len(cells), resumed=len(done), stream=sys.stderr,
                        tty=sys.stderr.isatty(), enabled=not quiet)
    records: dict[str, dict[str, Any]] = {}
    failures: dict[str, str] = {}
    memory: dict[str, float] = {}
    ran_on = "nothing to run"
    n_workers = 0
    starts: dict[str, int] = {}
    reruns = lost = 0
    cells_wall = 0.0
    if todo:
        from numalign.sim.sweep import executor

        conn = executor.connect(address, where=where, workers=workers, timeout_s=connect_timeout)
        try:
            store.prepare(out)
            ran_on = "LocalCluster" if conn.local is not None else conn.address
            n_workers = conn.workers
            progress.message(f"numalign sweep: {len(todo)} of {len(cells)} cells to run on "
                             f"{n_workers} workers ({ran_on}); results in {out}")
            by_id = {c.id: c for c in todo}

            def on_result(task: CellTask, result: dict[str, Any]) -> None:
                cell = by_id[task.cell.id]
                if result.get("worker"):
                    memory[result["worker"]] = max(memory.get(result["worker"], 0.0),
                                                   float(result.get("peak_rss_mib") or 0.0))
                if result.get("status") == "ok":
                    record = store.cell_record(cell, result, version)
                    store.store_cell(out, record)
                    records[cell.id] = record
                    progress.finished(cell.id, ok=True, note=f"{describe(cell, spec)} "
                                      f"({result.get('wall_s', 0):.1f} s)")
                else:
                    on_error(task, str(result.get("error")))

            def on_error(task: CellTask, error: str) -> None:
                failures[task.cell.id] = error
                progress.finished(task.cell.id, ok=False,
                                  note=f"{describe(by_id[task.cell.id], spec)}: {error[:300]}")

            run = uuid.uuid4().hex
            progress.restart_clock()
            tasks = [CellTask(c, base_dir, shared_dir, run) for c in todo]
            cells_start = time.monotonic()
            try:
                stats = executor.run_cells(conn, tasks, retries=retries,
                                           on_start=progress.started, on_result=on_result,
                                           on_error=on_error)
            except KeyboardInterrupt:
                progress.close()
                print(f"numalign sweep: interrupted: {len(done) + len(records)} of {len(cells)} "
                      f"cells are stored in {os.path.join(out, store.CELLS_DIR)}; run the same "
                      "command again to resume (the cells that were running are lost)",
                      file=sys.stderr)
                return 130
            cells_wall = time.monotonic() - cells_start
            starts = dict(stats.starts)
            reruns, lost = stats.reruns, len(stats.lost_workers)
        finally:
            executor.close(conn)
    else:
        store.prepare(out)
    progress.close()
    rows = []
    for cell in cells:
        if cell.id in done:
            rows.append(store.table_row(cell, "resumed", done[cell.id]))
        elif cell.id in records:
            rows.append(store.table_row(cell, "ok", records[cell.id], runs=starts.get(cell.id, 1)))
        else:
            rows.append(store.table_row(cell, "failed", None, runs=starts.get(cell.id, 0),
                                        error=failures.get(cell.id, "did not run")))
    wall = time.monotonic() - start
    run_info: dict[str, Any] = {
        "cells": len(cells), "ran": len(records), "resumed": len(done),
        "failed": len(cells) - len(records) - len(done), "reruns": reruns,
        "workers_lost": lost, "workers": n_workers, "scheduler": ran_on,
        "wall_s": round(wall, 1), "cells_wall_s": round(cells_wall, 1),
        "peak_rss_mib_per_worker": {w: round(m, 1) for w, m in sorted(memory.items())},
    }
    sweep_doc = {
        "name": spec.name, "description": spec.description, "numalign": version,
        "source": spec.source,
        "axes": {a: list(spec.axes[a]) for a in AXES}, "pod_limit": spec.pod_limit,
        "recreate": spec.recreate,
        "report": {"x": spec.report.x, "series": spec.report.series,
                   "panels": list(spec.report.panels), "metrics": list(spec.report.metrics)},
        "metrics": {m.name: {"label": m.label, "text": m.text, "timing": m.timing}
                    for m in METRICS},
        "run": run_info,
    }
    json_path, csv_path = store.write_tables(out, sweep_doc, rows)
    report_path = os.path.join(out, "report.html")
    store.write_atomic(report_path, report_html(spec, rows, run_info))
    print(f"{len(records) + len(done)} of {len(cells)} cells done ({len(done)} from earlier "
          f"runs), {run_info['failed']} failed, {reruns} reruns, {lost} workers lost; "
          f"wall {format_duration(wall)} on {n_workers} worker{'' if n_workers == 1 else 's'}")
    if memory:
        print("peak memory per worker: " + ", ".join(f"{w} {m:.0f} MiB"
                                                     for w, m in sorted(memory.items())))
    print(f"wrote {json_path}\nwrote {csv_path}\nreport: {report_path}")
    if not plotting_available():
        print(f"numalign sweep: {NO_PLOTS}", file=sys.stderr)
    return 1 if run_info["failed"] else 0
