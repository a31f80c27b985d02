"""Issue 12: ``numalign extender serve`` and ``numalign export --apply`` turn every bad flag
or configuration into one line on stderr and exit 2 - no traceback, no silent fall back."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import REPO
from numalign.cli import main


def run(args: list[str], home: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items()
             if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT")}
    return subprocess.run([sys.executable, "-m", "numalign.cli", *args], capture_output=True,
                          text=True, timeout=60, env={**clean, "HOME": str(home), **(env or {})})


@pytest.fixture
def busy_port() -> Iterator[int]:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    try:
        yield s.getsockname()[1]
    finally:
        s.close()


def cases(tmp: Path, busy: int) -> list[tuple[list[str], str]]:
    bad = tmp / "bad-kubeconfig"
    bad.write_text("{clusters: [")
    empty = tmp / "empty-kubeconfig"
    empty.write_text("apiVersion: v1\nkind: Config\n")
    nrt = tmp / "nrt"
    nrt.mkdir(exist_ok=True)
    serve = ["extender", "serve"]
    return [
        ([*serve, "--nrt-dir", str(nrt), "--port", str(busy)], "--port"),
        ([*serve, "--nrt-dir", str(nrt), "--port", "70000"], "--port"),
        ([*serve, "--nrt-dir", str(nrt), "--port", "-1"], "--port"),
        ([*serve, "--nrt-dir", str(nrt), "--host", "no-such-host.invalid"], "--host"),
        ([*serve, "--nrt-dir", str(nrt), "--host", "203.0.113.77", "--port", "0"], "--host"),
        ([*serve, "--nrt-dir", str(nrt), "--port", "0", "--health-port", str(busy)], "--health-port"),
        ([*serve, "--nrt-dir", str(tmp / "missing")], "--nrt-dir"),
        ([*serve, "--kubeconfig", str(tmp / "missing")], "--kubeconfig"),
        ([*serve, "--kubeconfig", str(bad)], "--kubeconfig"),
        ([*serve, "--kubeconfig", str(empty)], "--kubeconfig"),
        ([*serve, "--in-cluster"], "--in-cluster"),
        ([*serve, "--nrt-dir", str(nrt), "--timeout", "0"], "--timeout"),
        ([*serve], "--nrt-dir"),
        (["export", "--apply", "-m", str(REPO / "examples" / "fig1.yaml")], "--apply"),
        (["export", "--apply", "--kubeconfig", str(bad), "-m",
          str(REPO / "examples" / "fig1.yaml")], "--kubeconfig"),
        (["export", "-m", str(REPO / "examples" / "fig1.yaml"), "--metrics-port", str(busy)],
         "--metrics-port"),
    ]


CASES = 16  # len(cases(...)); the cases need a temporary directory and a busy port to build


@contextlib.contextmanager
def _deadline(seconds: int) -> Iterator[None]:
    """A case that started serving instead of failing would block: fail it instead."""
    def expired(signum: int, frame: object) -> None:
        raise AssertionError(f"still running after {seconds} s: it did not fail at start")

    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@pytest.mark.parametrize("index", range(CASES))
def test_bad_flags_and_configs_are_one_line_and_exit_2(
        index: int, tmp_path: Path, busy_port: int, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Each case in this process (the command's own code path); the process boundary is
    test_a_real_process_says_it_in_one_line's."""
    all_cases = cases(tmp_path, busy_port)
    assert len(all_cases) == CASES
    args, flag = all_cases[index]
    for name in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    with _deadline(60):
        try:
            code = main(args)
        except SystemExit as e:  # argparse
            code = e.code
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert code == 2, (args, err)
    assert len(lines) == 1 and "Traceback" not in err, (args, err)
    assert flag in lines[0], (args, lines[0])


@pytest.mark.parametrize("index", [0, 13])  # serve on a busy port; export --apply, no config
def test_a_real_process_says_it_in_one_line(index: int, tmp_path: Path, busy_port: int) -> None:
    args, flag = cases(tmp_path, busy_port)[index]
    r = run(args, tmp_path)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2, (args, r.stderr)
    assert len(lines) == 1 and "Traceback" not in r.stderr, (args, r.stderr)
    assert flag in lines[0], (args, lines[0])


def test_in_cluster_without_a_service_account(tmp_path: Path) -> None:
    r = run(["extender", "serve", "--in-cluster"], tmp_path,
            {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"})
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_exporter_metrics_endpoint() -> None:
    from numalign.kube.metrics import serve_exporter_metrics

    server = serve_exporter_metrics("127.0.0.1", 0)
    try:
        port = server.server_address[1]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
            text = resp.read().decode()
        assert 'numalign_exporter_info{version="' in text
        assert "process_resident_memory_bytes" in text
    finally:
        server.shutdown()
        server.server_close()
