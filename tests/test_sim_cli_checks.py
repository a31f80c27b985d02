"""``numalign simulate`` refuses bad ``--out`` and ``--profiles`` before it simulates anything.

Each case: exit 2, one line on stderr naming the option, and the simulation never started.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from numalign.cli import main
from numalign.errors import InputError
from numalign.sim import cli_run
from numalign.sim.cluster import builtin_cluster
from numalign.sim.runner import check_profiles, simulate
from numalign.sim.sources import parse_workload_spec
from numalign.sim.workloads import Arrival, Workload


@pytest.fixture
def no_simulation(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the simulation ran before the input was checked")

    monkeypatch.setattr(cli_run, "simulate", refuse)


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(["simulate", "--quiet", "--cluster", "builtin:small",
                 "--workload", "synthetic:count=20", *args])
    _, err = capsys.readouterr()
    return code, err


def test_out_is_an_existing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                 no_simulation: None) -> None:
    f = tmp_path / "report.txt"
    f.write_text("keep me\n")
    code, err = _run(capsys, "--out", str(f))
    assert code == 2 and err.count("\n") == 1, err
    assert "--out" in err and "not a directory" in err and str(f) in err
    assert f.read_text() == "keep me\n"


def test_out_below_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                          no_simulation: None) -> None:
    f = tmp_path / "file"
    f.write_text("")
    code, err = _run(capsys, "--out", str(f / "sub"))
    assert code == 2 and err.count("\n") == 1 and "--out" in err, err


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0,
                    reason="root writes into read-only directories")
def test_out_not_writable(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                          no_simulation: None) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        code, err = _run(capsys, "--out", str(ro / "out"))
        assert code == 2 and err.count("\n") == 1 and "--out" in err, err
        code, err = _run(capsys, "--out", str(ro))
        assert code == 2 and err.count("\n") == 1 and "--out" in err, err
    finally:
        ro.chmod(0o700)


def test_out_on_a_read_only_filesystem(capsys: pytest.CaptureFixture[str],
                                       no_simulation: None) -> None:
    """/proc refuses new directories even to root: an unwritable --out for any user."""
    if not os.path.isdir("/proc/self"):
        pytest.skip("no /proc")
    code, err = _run(capsys, "--out", "/proc/numalign-simulate-out")
    assert code == 2 and err.count("\n") == 1 and "--out" in err, err


@pytest.mark.parametrize(("profiles", "message"), [
    ("default,default", "'default' given twice"),
    ("numalign, numalign", "'numalign' given twice"),
    ("", "no profile given"),
    (" , ", "no profile given"),
    ("default,", "empty profile name at position 2"),
    ("default,,numalign", "empty profile name at position 2"),
])
def test_bad_profiles(tmp_path: Path, capsys: pytest.CaptureFixture[str], no_simulation: None,
                      profiles: str, message: str) -> None:
    code, err = _run(capsys, "--out", str(tmp_path), "--profiles", profiles)
    assert code == 2 and err.count("\n") == 1, err
    assert "profiles" in err and message in err, err
    assert not list(tmp_path.iterdir())  # nothing written


def test_check_profiles_and_library_refusals() -> None:
    assert check_profiles([" default", "numalign "]) == ["default", "numalign"]
    nodes = builtin_cluster("small")
    wl = parse_workload_spec("synthetic:count=5", None, cluster=nodes)
    with pytest.raises(InputError, match="given twice"):
        simulate(nodes, wl, ["numalign", "numalign"])
    with pytest.raises(InputError, match="no profile given"):
        simulate(nodes, wl, [])
    twice = Workload("w", (Arrival(0.0, wl[0].pod, 5.0), Arrival(1.0, wl[0].pod, 5.0)))
    with pytest.raises(InputError, match="arrives twice") as e:
        simulate(nodes, twice, ["numalign"])
    assert e.value.field == "workload[1]"


def test_simulate_prints_table_legend_and_writes_accounted_summary(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "new" / "dir"  # created
    code = main(["simulate", "--quiet", "--cluster", "builtin:small",
                 "--workload", "synthetic:count=80,seed=2,load=2", "--out", str(out),
                 "--profiles", "default,numalign"])
    stdout, _ = capsys.readouterr()
    assert code == 0
    header = stdout.splitlines()[0].split()
    assert "dropped" in header and "arrived" in header and "pods/s" not in stdout
    assert "columns:" in stdout and "scheduled + rejected + pending + dropped" in stdout
    summary = json.loads((out / "summary.json").read_text())
    for p in summary["profiles"].values():
        assert p["arrived"] == 80
        outcomes = p["scheduled"] + p["rejected"] + p["pending"] + p["dropped"]
        assert outcomes == p["arrived"] + p["retries"]
    assert summary["cluster"]["nodes"] == 4 and summary["cluster"]["groups"]
    assert not [f for f in os.listdir(out) if f.startswith(".numalign-probe")]


def test_cli_subprocess_one_line_for_existing_file(tmp_path: Path) -> None:
    """As a user runs it: no traceback, exit 2, promptly."""
    f = tmp_path / "x"
    f.write_text("")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run(
        [sys.executable, "-m", "numalign.cli", "simulate", "--quiet", "--out", str(f)],
        capture_output=True, text=True, timeout=60, env=env,
    )
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "Traceback" not in proc.stderr
