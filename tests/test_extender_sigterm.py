"""``extender serve`` stopped with SIGTERM (what the kubelet sends a container) ends every
process it started: its builder worker, its evaluation worker and multiprocessing's resource
tracker (issue 23: both workers and the tracker were left running, orphaned).

The server runs as a subprocess in a process group of its own; after SIGTERM it must exit
within 10 s, and then no process of that group may be left."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from conftest import REPO
from numalign.kube.topology import build_nrt
from numalign.machine.spec import read_machine_file
from numalign.node.admission import Node


def group_members(pgid: int) -> list[str]:
    """``pid command`` of the processes whose process group is ``pgid`` (from /proc)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            try:
                cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                cmd = "?"
            out.append(f"{entry.name} {cmd[:120]}")
    return out


def _wait(cond: object, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if cond():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return False


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")
def test_sigterm_stops_the_extender_and_every_process_it_started(tmp_path: Path) -> None:
    nrt_dir = tmp_path / "nrt"
    nrt_dir.mkdir()
    obj = build_nrt(Node(read_machine_file(str(REPO / "examples" / "fig1.yaml"))), name="n1")
    (nrt_dir / "n1.yaml").write_text(yaml.safe_dump(obj))
    log = tmp_path / "stderr.txt"
    with log.open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "numalign", "extender", "serve", "--nrt-dir", str(nrt_dir),
             "--port", "0"],
            stdout=subprocess.DEVNULL, stderr=err, start_new_session=True, cwd=REPO)
    try:
        assert _wait(lambda: b"serving on" in log.read_bytes(), 60), log.read_text()
        # the builder worker (and the resource tracker) are up: more than the server itself
        assert _wait(lambda: len(group_members(proc.pid)) >= 3, 60), group_members(proc.pid)
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
        assert _wait(lambda: not group_members(proc.pid), 10), group_members(proc.pid)
        assert proc.returncode == 0, log.read_text()
        assert "Traceback" not in log.read_text()
    finally:
        if proc.poll() is None or group_members(proc.pid):
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
