"""Issue 12: ``numalign extender serve`` and ``numalign export --apply`` turn every bad flag
or configuration into one line on stderr and exit 2 - no traceback, no silent fall back."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import REPO


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


def test_bad_flags_and_configs_are_one_line_and_exit_2(tmp_path: Path, busy_port: int) -> None:
    for args, flag in cases(tmp_path, busy_port):
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
