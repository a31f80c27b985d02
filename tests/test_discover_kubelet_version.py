"""`numalign discover` on the live host asks the kubelet binary for its version
(``kubelet --version``): fake kubelets on PATH that answer, hang, print garbage or fail; the
fallback path; captures are not asked; nothing is said without --verbose."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from conftest import REPO
from numalign.cli import main
from numalign.machine import kubelet_binary
from numalign.machine.kubelet_binary import ask_kubelet
from numalign.machine.spec import load_machine
from numalign.node.admission import Node

live_sysfs = pytest.mark.skipif(
    not Path("/sys/devices/system/cpu").is_dir(), reason="no Linux sysfs on this host"
)
CAPTURE = REPO / "examples" / "captures" / "16amd64-8n2c.tar.bz2"


def fake_kubelet(directory: Path, body: str, name: str = "kubelet") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    exe = directory / name
    exe.write_text("#!/bin/sh\nPATH=/usr/bin:/bin\n" + body + "\n")
    exe.chmod(0o755)
    return exe


@pytest.fixture
def path_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """PATH = an empty bin directory (the fake scripts set their own); the fallback path in
    the test's directory (this host may have a real kubelet in /usr/bin)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setattr(kubelet_binary, "KUBELET_PATHS", (str(tmp_path / "usr-bin" / "kubelet"),))
    return bin_dir


def discover(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, object], str]:
    code = main(["discover", "-o", "json", *argv])
    out, err = capsys.readouterr()
    return code, json.loads(out), err


@live_sysfs
def test_live_discovery_takes_the_kubelet_version(path_only: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    fake_kubelet(path_only, 'test "$1" = --version && echo "Kubernetes v1.33.4-eks-3025e55"')
    code, spec, err = discover(capsys)
    assert code == 0 and spec["kubelet"]["kubeletVersion"] == "v1.33.4-eks-3025e55"  # type: ignore[index]
    assert err == ""  # said only with --verbose
    code, spec, err = discover(capsys, "--verbose")
    assert f"numalign discover: {path_only}/kubelet --version: kubelet v1.33.4-eks-3025e55" in err
    # the spec reads back, and a node of it decides by that release
    rules = Node(load_machine(spec)).rules
    assert rules.release.how == "kubelet v1.33.4-eks-3025e55 (release v1.33)"


@live_sysfs
def test_no_kubelet_no_version_said_only_with_verbose(path_only: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    code, spec, err = discover(capsys)
    assert code == 0 and "kubeletVersion" not in spec["kubelet"]  # type: ignore[operator]
    assert err == ""
    code, spec, err = discover(capsys, "-v")
    lines = [ln for ln in err.splitlines() if "kubelet" in ln]
    assert lines == [f"numalign discover: no kubelet binary on PATH or at "
                     f"{kubelet_binary.KUBELET_PATHS[0]}: no kubelet version discovered"]


def test_the_fallback_path(path_only: Path) -> None:
    (fallback,) = kubelet_binary.KUBELET_PATHS
    fake_kubelet(Path(fallback).parent, 'echo "Kubernetes v1.31.0"')
    got = ask_kubelet()
    assert str(got.version) == "v1.31.0" and got.note == f"{fallback} --version: kubelet v1.31.0"


@pytest.mark.parametrize(("body", "said"), [
    ('echo "hello world"', "printed 'hello world', not \"Kubernetes vX.Y.Z\""),
    ('echo "Kubernetes vfoo"', "printed 'Kubernetes vfoo'"),
    ('echo "Kubernetes v3.1.0"', "printed 'Kubernetes v3.1.0'"),
    ("printf '\\377\\376\\000garbage'", "not \"Kubernetes vX.Y.Z\""),
    ("exit 0", "printed '', not"),
    ('echo "Kubernetes v1.33.4"; exit 3', "exited with status 3"),
    ("yes 'Kubernetes v1.33.4'", "gave no answer within 0.5 s (killed)"),  # endless output
])
def test_garbage_and_failures_give_no_version(path_only: Path, body: str, said: str) -> None:
    fake_kubelet(path_only, body)
    got = ask_kubelet(timeout=0.5)
    assert got.version is None
    assert said in got.note and got.note.endswith("no kubelet version discovered")
    assert "\n" not in got.note


def test_a_hanging_kubelet_is_killed_with_what_it_started(path_only: Path, tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    fake_kubelet(path_only, f"sleep 30 & echo $! > {pid_file}; wait")
    t0 = time.monotonic()
    got = ask_kubelet(timeout=0.5)
    assert time.monotonic() - t0 < 5
    assert got.version is None and "gave no answer within 0.5 s (killed)" in got.note
    child = int(pid_file.read_text())
    for _ in range(100):  # reaped by init once killed
        if not Path(f"/proc/{child}").exists() or "Z" in _state(child):
            break
        time.sleep(0.02)
    else:
        raise AssertionError("the kubelet's child was left running")


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "Z"


@live_sysfs
def test_a_hanging_kubelet_costs_discover_the_timeout_only(
        path_only: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kubelet_binary, "TIMEOUT", 0.3)
    fake_kubelet(path_only, "exec sleep 30")
    t0 = time.monotonic()
    code, spec, err = discover(capsys, "--verbose")
    assert code == 0 and time.monotonic() - t0 < 10
    assert "kubeletVersion" not in spec["kubelet"]  # type: ignore[operator]
    assert "gave no answer within 0.3 s (killed): no kubelet version discovered" in err


def test_a_capture_is_not_asked(path_only: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fake_kubelet(path_only, 'echo "Kubernetes v1.33.4"')
    code, spec, err = discover(capsys, "--sysfs-root", str(CAPTURE), "--verbose")
    assert code == 0 and "kubeletVersion" not in spec["kubelet"]  # type: ignore[operator]
    assert "kubelet" not in err
