"""A sweep's output directory: finished cells as they finish, then the table and the report.

::

    OUT/cells/<id>.json   one file per finished cell, written (atomically) when it finishes
    OUT/sweep.json        the sweep: axes, the run (cells done, failed, reruns ...), every cell
    OUT/sweep.csv         the same table of cells x metrics, one row per cell
    OUT/report.html       plots of each metric over the axes (numalign.sim.sweep.report)

A cell file holds the cell's id, the numalign version, its parameters, its full profile
summary (``summary.json``'s shape), its metrics and where and how long it ran. **Resume**: a
rerun reads ``cells/`` and skips every cell whose file has the same id and version; only
cells that finished count (a failed cell is run again). Each file is written to a temporary
name, flushed to disk and renamed, so an interrupted sweep leaves whole files only.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict
from typing import Any

from numalign.errors import InputError, NumalignError
from numalign.inputs.documents import read_json
from numalign.sim.report import check_writable_dir
from numalign.sim.sweep.grid import Cell
from numalign.sim.sweep.metrics import METRICS, cell_metrics
from numalign.sim.sweep.spec import AXES

CELLS_DIR = "cells"
CSV_NAME = "sweep.csv"
JSON_NAME = "sweep.json"


def prepare(out: str) -> None:
    """Create the output directory (and ``cells/``) or raise a one-line ``--out`` error."""
    try:
        check_writable_dir(out)
        os.makedirs(os.path.join(out, CELLS_DIR), exist_ok=True)
    except OSError as e:
        raise InputError(f"cannot write in {out}: {e.strerror or e}", "--out") from None


def write_atomic(path: str, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same directory, flushed
    to disk, then renamed over ``path``: readers see the old file or the whole new one."""
    folder = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def cell_path(out: str, cell_id: str) -> str:
    return os.path.join(out, CELLS_DIR, f"{cell_id}.json")


def cell_record(cell: Cell, result: Mapping[str, Any], version: str) -> dict[str, Any]:
    """The stored document of a finished cell (``result`` from
    :func:`numalign.sim.sweep.cell.run_cell`)."""
    summary = result["summary"]
    return {
        "id": cell.id,
        "numalign": version,
        "params": asdict(cell.params),
        "status": "ok",
        "metrics": cell_metrics(summary),
        "summary": summary,
        "pods": result.get("pods"),
        "nodes": result.get("nodes"),
        "wall_s": result.get("wall_s"),
        "worker": result.get("worker"),
        "pid": result.get("pid"),
        "peak_rss_mib": result.get("peak_rss_mib"),
        "cache": result.get("cache"),
    }


def store_cell(out: str, record: Mapping[str, Any]) -> None:
    write_atomic(cell_path(out, str(record["id"])), json.dumps(record, indent=1) + "\n")


def load_done(out: str, cells: Iterable[Cell], version: str) -> dict[str, dict[str, Any]]:
    """The stored records of ``cells`` that finished under this ``version`` (by id); a file
    that cannot be read or belongs to another cell or version does not count."""
    done: dict[str, dict[str, Any]] = {}
    for cell in cells:
        path = cell_path(out, cell.id)
        if not os.path.exists(path):
            continue
        try:
            doc = read_json(path, "cell result")
        except NumalignError:
            continue  # rerun it: the new result replaces the file
        if (isinstance(doc, dict) and doc.get("id") == cell.id and doc.get("numalign") == version
                and doc.get("status") == "ok" and isinstance(doc.get("summary"), dict)):
            done[cell.id] = doc
    return done


# -- the table ---------------------------------------------------------------------------------

ROW_KEYS = ("id", *AXES, "status", *(m.name for m in METRICS), "wall_s", "worker", "runs",
            "spec", "error")


def table_row(cell: Cell, status: str, record: Mapping[str, Any] | None, *,
              runs: int = 0, error: str | None = None) -> dict[str, Any]:
    """One row: the cell's axes as the sweep file wrote them, its status (``ok``,
    ``resumed``, ``failed``), its metrics, and ``spec``: the workload spec it ran."""
    row: dict[str, Any] = {"id": cell.id}
    for axis in AXES:
        row[axis] = cell.axis(axis)
    row["status"] = status
    metrics = (record or {}).get("metrics") or {}
    for m in METRICS:
        row[m.name] = metrics.get(m.name)
    row["wall_s"] = (record or {}).get("wall_s")
    row["worker"] = (record or {}).get("worker")
    row["runs"] = runs
    row["spec"] = cell.params.workload
    row["error"] = error
    return row


def csv_text(rows: Sequence[Mapping[str, Any]]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(ROW_KEYS), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: "" if row.get(k) is None else row[k] for k in ROW_KEYS})
    return buf.getvalue()


def write_tables(out: str, sweep: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> tuple[str, str]:
    """``sweep.json`` (``sweep`` with the rows as ``cells``) and ``sweep.csv``; their paths."""
    json_path = os.path.join(out, JSON_NAME)
    csv_path = os.path.join(out, CSV_NAME)
    write_atomic(json_path, json.dumps({**sweep, "cells": list(rows)}, indent=1) + "\n")
    write_atomic(csv_path, csv_text(rows))
    return json_path, csv_path
