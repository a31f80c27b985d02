"""``numalign sweep`` on a real multi-process Dask cluster on localhost: a ``dask scheduler``
process and two ``dask worker`` processes over TCP (tests/sweep_cluster.py), started for this
module and stopped after it, whatever happens.

* the cells' numbers equal ``numalign simulate`` run alone, serially, with the same
  parameters (timings excluded), and a worker loads a trace once for many cells;
* a worker killed with SIGKILL in the middle of a cell: the sweep completes with the same
  numbers, and the rerun and the lost worker are counted;
* a cell that fails (a malformed row deep in a trace) is reported with its error while the
  other cells finish;
* Ctrl-C (SIGINT) keeps the finished cells, and the next run skips exactly those.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import REPO
from numalign.cli import main
from numalign.sim.cluster import cluster_template, template_variant
from numalign.sim.sweep.cell import TOPIC
from numalign.sim.sweep.grid import CellParams
from numalign.sim.sweep.metrics import without_timings
from sweep_helpers import ENV, LocalDask, local_dask, write_trace
from test_launcher_helpers import default_sigint

pytest.importorskip("distributed", reason="the sweep extra (dask[distributed]) is not installed")
#: one cluster for the module, in one xdist worker (make test runs pytest --dist loadgroup)
pytestmark = pytest.mark.xdist_group("dask-cluster")

@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalDask]:
    with local_dask(tmp_path_factory.mktemp("dask")) as c:
        yield c


@pytest.fixture
def no_plots(monkeypatch: pytest.MonkeyPatch) -> None:
    """Reports without figures: the numbers are what is compared, and plots take seconds."""
    for module in ("numalign.sim.report", "numalign.sim.cli_run", "numalign.sim.sweep.report",
                   "numalign.sim.sweep.command"):
        monkeypatch.setattr(f"{module}.plotting_available", lambda: False)


def sweep_file(tmp: Path, axes: dict[str, Any], **extra: Any) -> Path:
    path = tmp / "sweep.yaml"
    path.write_text(yaml.safe_dump({"name": "t", "axes": axes, **extra}))
    return path


def run_sweep(path: Path, out: Path, cluster: LocalDask, *extra: str) -> int:
    return main(["sweep", str(path), "--scheduler", cluster.address, "--out", str(out),
                 "--quiet", *extra])


def cells(out: Path) -> dict[str, dict[str, Any]]:
    return {p.stem: json.loads(p.read_text()) for p in (out / "cells").glob("*.json")}


def simulate_alone(tmp: Path, params: CellParams) -> dict[str, Any]:
    """``numalign simulate`` with the cell's parameters: its cluster written as a template
    (the scale and the kubelet overrides applied), its workload spec, its profile."""
    doc, _, _ = cluster_template(params.cluster)
    name = f"{params.profile}-{abs(hash(params)) % 10**8}"
    template = tmp / f"{name}.yaml"
    template.write_text(yaml.safe_dump(template_variant(doc, scale=params.scale,
                                                        kubelet=params.kubelet())))
    out = tmp / f"sim-{name}"
    argv = ["simulate", "--cluster", str(template), "--workload", params.workload, "--profiles",
            params.profile, "--out", str(out), "--quiet"]
    assert main(argv + (["--recreate"] if params.recreate else [])) == 0
    summary: dict[str, Any] = json.loads((out / "summary.json").read_text())
    return summary["profiles"][params.profile]


def assert_equal_to_simulate(tmp: Path, records: dict[str, dict[str, Any]]) -> None:
    for record in records.values():
        alone = simulate_alone(tmp, CellParams(**record["params"]))
        assert without_timings(record["summary"]) == without_timings(alone), record["params"]


def test_cells_equal_serial_simulate_and_a_worker_loads_a_trace_once(
        cluster: LocalDask, tmp_path: Path, no_plots: None, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # relative paths are the client's, whatever the workers' cwd
    write_trace(tmp_path / "trace.csv", 40)
    path = sweep_file(tmp_path, {
        "cluster": "builtin:small", "policy": ["restricted", "single-numa-node"],
        "profile": ["default", "numalign"],
        "workload": ["synthetic:count=60", "alibaba2025:trace.csv?sample=0.9"]})
    out = tmp_path / "out"
    assert run_sweep(path, out, cluster) == 0
    done = cells(out)
    assert len(done) == 8 and all(r["status"] == "ok" for r in done.values())
    run = json.loads((out / "sweep.json").read_text())["run"]
    assert (run["ran"], run["failed"], run["reruns"], run["workers"]) == (8, 0, 0, 2)
    assert len({r["worker"] for r in done.values()}) == 2  # both workers took cells
    # the trace (one file, 2 policies x 2 profiles) was read once per worker at most
    trace = [r for r in done.values() if r["params"]["workload"].startswith("alibaba2025")]
    assert len(trace) == 4 and sum(not r["cache"]["workload"] for r in trace) <= 2
    assert all(r["params"]["workload"] == "alibaba2025:trace.csv?sample=0.9&seed=1" for r in trace)
    assert_equal_to_simulate(tmp_path, done)
    capsys.readouterr()


def test_worker_killed_mid_cell_the_sweep_completes_with_the_same_numbers(
        cluster: LocalDask, tmp_path: Path, no_plots: None,
        capsys: pytest.CaptureFixture[str]) -> None:
    from distributed import Client

    path = sweep_file(tmp_path, {"cluster": "builtin:small", "profile": "numalign",
                                 "workload": "synthetic:count=300", "seed": [1, 2]})
    out = tmp_path / "out"
    starts: queue.Queue[dict[str, Any]] = queue.Queue()
    status: list[int] = []
    with Client(cluster.address, timeout=30) as watcher:
        watcher.subscribe_topic(TOPIC, lambda event: starts.put(event[1]))
        sweep = threading.Thread(target=lambda: status.append(run_sweep(path, out, cluster)))
        sweep.start()
        try:
            first = starts.get(timeout=60)
            time.sleep(0.4)  # the cell is running (it takes over a second)
            assert first["pid"] in cluster.worker_pids()
            os.kill(first["pid"], signal.SIGKILL)
        finally:
            sweep.join(timeout=120)
    assert status == [0], capsys.readouterr().err
    sweep_doc = json.loads((out / "sweep.json").read_text())
    assert sweep_doc["run"]["reruns"] >= 1 and sweep_doc["run"]["workers_lost"] >= 1
    killed = next(r for r in sweep_doc["cells"] if r["id"] == first["cell"])
    assert killed["status"] == "ok" and killed["runs"] >= 2
    done = cells(out)
    assert len(done) == 2
    assert_equal_to_simulate(tmp_path, done)


def test_a_failing_cell_is_reported_and_the_others_finish(
        cluster: LocalDask, tmp_path: Path, no_plots: None,
        capsys: pytest.CaptureFixture[str]) -> None:
    bad = write_trace(tmp_path / "bad.csv", 40, bad_row=30)  # the first row is fine
    path = sweep_file(tmp_path, {"cluster": "builtin:small", "profile": ["default", "numalign"],
                                 "workload": ["synthetic:count=60", f"alibaba2025:{bad}"]})
    out = tmp_path / "out"
    assert run_sweep(path, out, cluster) == 1
    _, err = capsys.readouterr()
    assert "Traceback" not in err
    rows = json.loads((out / "sweep.json").read_text())["cells"]
    failed = [r for r in rows if r["status"] == "failed"]
    assert {r["profile"] for r in failed} == {"default", "numalign"}
    assert all(r["workload"].startswith("alibaba2025") for r in failed)
    assert all(f"{bad}:31: cpu_limit: limit 12 is below the request 16" in r["error"] for r in failed)
    ok = [r for r in rows if r["status"] == "ok"]
    assert len(ok) == 2 and all(r["scheduled"] > 0 for r in ok)
    assert len(cells(out)) == 2  # failed cells are not stored: a rerun tries them again
    csv_rows = (out / "sweep.csv").read_text().splitlines()
    assert len(csv_rows) == 5 and sum(",failed," in r for r in csv_rows) == 2
    assert "Failed cells (2)" in (out / "report.html").read_text()


def test_ctrl_c_keeps_finished_cells_and_a_rerun_skips_them(
        cluster: LocalDask, tmp_path: Path, no_plots: None,
        capsys: pytest.CaptureFixture[str]) -> None:
    path = sweep_file(tmp_path, {"cluster": "builtin:small", "profile": "numalign",
                                 "workload": "synthetic:count=200", "seed": list(range(1, 13))})
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "numalign", "sweep", str(path), "--scheduler", cluster.address,
         "--out", str(out)], env=ENV, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, preexec_fn=default_sigint)  # a background test run ignores SIGINT
    try:
        deadline = time.monotonic() + 60
        while len(list((out / "cells").glob("*.json"))) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, stderr
    assert "interrupted" in stderr and "run the same command again to resume" in stderr
    kept = {p.name: p.read_bytes() for p in (out / "cells").glob("*.json")}
    assert 2 <= len(kept) < 12  # 12 cells: a loaded machine's late Ctrl-C still finds some running
    assert not list((out / "cells").glob(".tmp-*"))  # whole files only
    assert run_sweep(path, out, cluster) == 0
    run = json.loads((out / "sweep.json").read_text())["run"]
    assert (run["resumed"], run["ran"]) == (len(kept), 12 - len(kept))
    assert all((out / "cells" / name).read_bytes() == data for name, data in kept.items())
    assert run_sweep(path, out, cluster) == 0  # all done: nothing runs, Dask is not needed
    run = json.loads((out / "sweep.json").read_text())["run"]
    assert (run["resumed"], run["ran"], run["scheduler"]) == (12, 0, "nothing to run")
    capsys.readouterr()
