"""Shared helpers of the launcher tests: run the CLI as a real process, small machine specs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

if not sys.platform.startswith("linux"):  # pragma: no cover
    pytest.skip("numalign run needs Linux", allow_module_level=True)

CLI = [sys.executable, "-m", "numalign.cli"]

SMALL_SPEC = """\
name: small
shape: {sockets: 2, numaPerSocket: 1, coresPerNuma: 4, threadsPerCore: 1, memoryPerNuma: 8Gi,
        gpusPerNuma: 2}
"""


def cli(*args: str, timeout: float = 120, **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout, **kw)


def in_process(*args: str) -> subprocess.CompletedProcess[str]:
    """``numalign ARGS`` run by :func:`numalign.cli.main` in this process, as :func:`cli`
    reports it: for what is about the command's answers, not about being a process (no
    interpreter start-up, the capture read once per call either way)."""
    import contextlib
    import io

    from numalign.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as e:  # argparse
            code = e.code if isinstance(e.code, int) else 2
    return subprocess.CompletedProcess(list(args), code, out.getvalue(), err.getvalue())


def default_sigint() -> None:
    """In a child before exec: SIGINT back to its default action, as in a terminal's foreground
    job. A test run started in the background (``make test &``, nohup) ignores SIGINT, every
    process it starts inherits that, and Python keeps a SIGINT it finds ignored: a test that
    sends SIGINT would then wait for nothing."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def popen(*args: str, **kw: Any) -> subprocess.Popen[str]:
    return subprocess.Popen([*CLI, *args], text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, preexec_fn=default_sigint, **kw)


def small_spec(tmp: Path) -> Path:
    p = tmp / "small.yaml"
    p.write_text(SMALL_SPEC)
    return p


def ps_json(state_dir: Path) -> dict[str, Any]:
    out = cli("ps", "--state-dir", str(state_dir), "-o", "json")
    assert out.returncode == 0, out.stderr
    doc: dict[str, Any] = json.loads(out.stdout)
    return doc


def parse_cpulist(text: str) -> set[int]:
    out: set[int] = set()
    for part in text.strip().split(","):
        if part:
            a, _, b = part.partition("-")
            out.update(range(int(a), int(b or a) + 1))
    return out


def live_box_or_skip() -> set[int]:
    """This box's usable CPUs, when live discovery sees exactly them and there are >= 2."""
    from numalign.machine.sysfs import load_sysfs

    usable = set(os.sched_getaffinity(0))
    machine = load_sysfs("/").machine
    online = {c.id for c in machine.online_cpus}
    if usable != online:
        pytest.skip(f"this process may use CPUs {sorted(usable)}, the machine has {sorted(online)}")
    if len(usable) < 2:
        pytest.skip("needs at least 2 CPUs (one core is reserved for the system)")
    return usable
