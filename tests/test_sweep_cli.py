"""``numalign sweep`` on bad input: one line, exit status 2, before any cell runs (nothing is
written); ``--dry-run``; the table, progress and report writers; and what happens without Dask."""

from __future__ import annotations

import importlib.util
import io
import json
import socket
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import REPO
from numalign.cli import main
from numalign.sim.sweep import store
from numalign.sim.sweep.command import NO_DASK
from numalign.sim.sweep.grid import expand
from numalign.sim.sweep.progress import Progress, format_duration
from numalign.sim.sweep.report import aggregate, report_html
from numalign.sim.sweep.spec import parse_sweep
from sweep_helpers import write_trace


def _sweep(tmp: Path, doc: Any) -> Path:
    path = tmp / "bad.yaml"
    path.write_text(yaml.safe_dump(doc) if not isinstance(doc, str) else doc)
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


GOOD_AXES = {"cluster": "builtin:small", "profile": "numalign", "workload": "synthetic:count=5"}


@pytest.mark.parametrize(("doc", "extra", "message"), [
    ({"axes": {"policyy": ["restricted"]}}, [],
     "bad.yaml: axes.policyy: unknown axis 'policyy' (known: cluster, scale, policy, scope, "
     "profile, workload, seed)"),
    ({"axes": {**GOOD_AXES, "profile": ["numalign", "kube-batch"]}}, [],
     "bad.yaml: axes.profile: unknown profile 'kube-batch' (known: default, nrt-snn"),
    ({"axes": {**GOOD_AXES, "seed": []}}, [], "bad.yaml: axes.seed: empty list: the grid would "
     "have no cell"),
    ({"axes": {**GOOD_AXES, "policy": ["restricted", "strict"]}}, [],
     "bad.yaml: axes.cluster 'builtin:small' with policy=strict: "),
    ({"axes": {**GOOD_AXES, "cluster": "nope.yaml"}}, [],
     "bad.yaml: axes.cluster 'nope.yaml': "),
    ({"axes": {**GOOD_AXES, "scale": 30000}}, [], "bad.yaml: axes.scale: must be 1 to 1000"),
    ({"axes": {**GOOD_AXES, "cluster": "builtin:alibaba2025", "scale": 200}}, [],
     "bad.yaml: axes.scale: 'builtin:alibaba2025' at scale 200 has 200,000 nodes, more than the "
     "cap of 100,000 (MAX_NODES)"),
    ({"axes": {**GOOD_AXES, "workload": "alibaba2025:nope.csv"}}, [],
     "bad.yaml: axes.workload 'alibaba2025:nope.csv': /"),  # then the path: cannot read
    ({"axes": {**GOOD_AXES, "workload": "synthetic:cout=5"}}, [],
     "bad.yaml: axes.workload 'synthetic:cout=5' (run as 'synthetic:cout=5,seed=1'): workload "
     "synthetic: cout: unknown option"),
    ({"axes": GOOD_AXES}, ["--scheduler", "localhost:8786"],
     "--scheduler: expected a Dask scheduler address like tcp://HOST:8786, got 'localhost:8786'"),
    ({"axes": GOOD_AXES}, ["--workers", "0"], "--workers: must be at least 1, got 0"),
    ({"axes": GOOD_AXES}, ["--only", "seed=9"], "--only: seed has no value '9'"),
    ("axes: [1\n", [], "bad.yaml: invalid YAML"),
    ("", [], "bad.yaml: empty sweep file"),
])
def test_bad_sweeps_fail_in_one_line_before_any_cell_runs(
        doc: Any, extra: list[str], message: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    path = _sweep(tmp_path, doc)
    out = tmp_path / "out"
    code = main(["sweep", str(path), "--out", str(out), *extra])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("numalign sweep: error: ")
    assert message in err
    assert not out.exists()  # nothing written


def test_an_unreachable_scheduler_is_one_line_and_nothing_is_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("distributed", reason="the sweep extra (dask[distributed]) is not installed")
    address = f"tcp://127.0.0.1:{_free_port()}"
    path = _sweep(tmp_path, {"axes": GOOD_AXES})
    out = tmp_path / "out"
    code = main(["sweep", str(path), "--out", str(out), "--scheduler", address,
                 "--connect-timeout", "0.5"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert f"--scheduler: cannot reach the Dask scheduler at {address}: Timed out" in err
    assert not out.exists()
    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", "tcp://127.0.0.1:99999")
    assert main(["sweep", str(path), "--out", str(out)]) == 2
    assert "DASK_SCHEDULER_ADDRESS: expected a Dask scheduler address" in capsys.readouterr().err


def test_without_dask_the_sweep_says_what_to_install(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "distributed" else real(name, *a))
    path = _sweep(tmp_path, {"axes": GOOD_AXES})
    assert main(["sweep", str(path), "--out", str(tmp_path / "out")]) == 2
    assert NO_DASK in capsys.readouterr().err
    assert main(["sweep", str(path), "--dry-run"]) == 0  # listing needs no Dask


def test_dry_run_lists_the_cells_and_those_done(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    out = tmp_path / "out"
    assert main(["sweep", "examples/sweeps/small.yaml", "--dry-run", "--out", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 25 and lines[-1] == f"24 cells: 0 done in {out}, 24 to run"
    assert all("to run" in line for line in lines[:-1])
    assert "policy=restricted profile=default seed=1" in lines[0]
    first = lines[0].split()[0]
    (out / "cells").mkdir(parents=True)
    spec = parse_sweep(yaml.safe_load((REPO / "examples/sweeps/small.yaml").read_text()))
    cell = next(c for c in expand(spec, _version()) if c.id == first)
    record = store.cell_record(cell, {"summary": {"scheduled": 3}, "wall_s": 1.0}, _version())
    store.store_cell(str(out), record)
    (out / "cells" / "0000000000000000.json").write_text("{not json")  # ignored
    assert main(["sweep", "examples/sweeps/small.yaml", "--dry-run", "--out", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"{first}  done") and lines[-1].startswith("24 cells: 1 done")


def _version() -> str:
    from numalign.sim.sweep.cell import numalign_version

    return numalign_version()


def test_shipped_sweeps_are_valid(capsys: pytest.CaptureFixture[str],
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    for path in sorted((REPO / "examples" / "sweeps").glob("*.yaml")):
        doc = yaml.safe_load(path.read_text())
        spec = parse_sweep(doc, str(path))
        assert expand(spec, "1") and spec.description
    assert main(["sweep", "examples/sweeps/small.yaml", "--dry-run"]) == 0
    capsys.readouterr()


# -- writers -------------------------------------------------------------------------------------


def test_load_done_takes_only_finished_cells_of_this_version(tmp_path: Path) -> None:
    spec = parse_sweep({"axes": {"seed": [1, 2, 3], "profile": "numalign"}})
    cells = expand(spec, "1.0")
    out = str(tmp_path)
    store.prepare(out)
    for cell in cells[:2]:
        store.store_cell(out, store.cell_record(cell, {"summary": {"scheduled": 1}}, "1.0"))
    older = store.cell_record(cells[2], {"summary": {"scheduled": 1}}, "0.9")
    store.store_cell(out, older)
    assert set(store.load_done(out, cells, "1.0")) == {cells[0].id, cells[1].id}
    assert not [p for p in (tmp_path / "cells").iterdir() if p.name.startswith(".tmp-")]


def test_csv_and_json_tables_have_a_row_per_cell(tmp_path: Path) -> None:
    spec = parse_sweep({"axes": {"seed": [1, 2], "profile": "numalign"}})
    cells = expand(spec, "1.0")
    summary = {"scheduled": 7, "aligned_fraction": 0.5, "latency_ms": {"p99": 2.0},
               "fragmentation": {"cpu": {"mean": 0.25}}}
    record = store.cell_record(cells[0], {"summary": summary, "wall_s": 1.5}, "1.0")
    rows = [store.table_row(cells[0], "ok", record, runs=1),
            store.table_row(cells[1], "failed", None, runs=2, error="x.csv:3: cpu: bad, \"quoted\"")]
    json_path, csv_path = store.write_tables(str(tmp_path), {"name": "t"}, rows)
    doc = json.loads(Path(json_path).read_text())
    assert doc["name"] == "t" and len(doc["cells"]) == 2
    assert doc["cells"][0]["scheduled"] == 7 and doc["cells"][0]["fragmentation_cpu"] == 0.25
    import csv

    parsed = list(csv.DictReader(io.StringIO(Path(csv_path).read_text())))
    assert parsed[0]["latency_p99_ms"] == "2.0" and parsed[0]["pending"] == ""
    assert parsed[1]["error"] == "x.csv:3: cpu: bad, \"quoted\"" and parsed[1]["runs"] == "2"


def test_progress_is_plain_lines_off_a_terminal_and_one_line_on_it() -> None:
    log = io.StringIO()
    p = Progress(4, resumed=1, stream=log, tty=False)
    p.started("a")
    p.finished("a", ok=True, note="seed=1")
    p.finished("b", ok=False, note="seed=2: boom")
    p.close()
    text = log.getvalue()
    assert "\r" not in text and text.count("\n") == 2
    assert text.splitlines()[1].startswith("FAILED b seed=2: boom; cells 3/4 done (1 from earlier "
                                           "runs), 0 running, 1 failed, ETA ")
    term = io.StringIO()
    p = Progress(2, stream=term, tty=True)
    p.started("a")
    p.finished("a", ok=True)
    p.close()
    shown = term.getvalue()  # one line, redrawn in place, ended once
    assert shown.count("\r") >= 2 and shown.count("\n") == 1
    assert shown.endswith("\rcells 1/2 done, 0 running, 0 failed, ETA 0s\n".replace("\r", "\r\x1b[K"))
    assert format_duration(42) == "42s" and format_duration(185) == "3m05s"
    assert format_duration(7620) == "2h07m"


def _rows() -> tuple[Any, list[dict[str, Any]]]:
    spec = parse_sweep({"axes": {"policy": ["restricted", "none"], "profile": ["a", "b"],
                                 "seed": [1, 2, 3]}})
    rows = []
    for cell in expand(spec, "1"):
        p = cell.params
        value = (10 if p.policy == "none" else 20) + p.seed + (100 if p.profile == "b" else 0)
        rows.append(store.table_row(cell, "ok", {"metrics": {"scheduled": value,
                                                             "aligned_fraction": 0.5}}))
    rows[0] = {**rows[0], "status": "failed", "error": "boom"}
    return spec, rows


def test_aggregate_gives_mean_and_seed_range() -> None:
    spec, rows = _rows()
    data = aggregate(rows, spec, "scheduled")
    assert spec.report.x == "policy" and spec.report.series == "profile"
    assert data[()]["b"]["none"] == (112.0, 111.0, 113.0, 3)
    assert data[()]["a"]["restricted"] == (22.5, 22.0, 23.0, 2)  # the failed seed is left out


def test_report_without_matplotlib_says_how_to_get_plots(monkeypatch: pytest.MonkeyPatch) -> None:
    spec, rows = _rows()
    monkeypatch.setattr("numalign.sim.sweep.report.plotting_available", lambda: False)
    page = report_html(spec, rows, {"cells": 12})
    assert "pip install &#x27;numalign[report]&#x27;" in page and "<img" not in page
    assert "Failed cells (1)" in page and "boom" in page


def test_report_plots_each_metric_with_data() -> None:
    pytest.importorskip("matplotlib")
    spec, rows = _rows()
    page = report_html(spec, rows, {"cells": 12})
    # scheduled and aligned have values; the other default metrics have none in these rows
    assert page.count("<img") == 2 and 'id="scheduled"' in page and 'id="aligned_fraction"' in page
    assert "means over up to 3 seeds; error bars span the lowest to the highest seed" in page


def test_the_trace_writer_of_the_tests_reads_back(tmp_path: Path) -> None:
    from numalign.sim.sources import parse_workload_spec

    wl = parse_workload_spec(f"alibaba2025:{write_trace(tmp_path / 't.csv', 9)}")
    assert len(wl) == 9 and wl.arrivals[0].pod.name == "instance-1"
