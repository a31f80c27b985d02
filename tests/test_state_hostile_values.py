"""Hostile values in a state file (issue 23), each refused at load with one line and exit 2 by
``state``, ``admit`` and ``release``, never a traceback or an exit 1 that reads "rejected":

* ``Infinity``, ``NaN`` or ``1e400`` in a memory amount (an OverflowError traceback before);
  a fraction or a string where the kubelet's checkpoint has an integer;
* a lone surrogate (``\\ud800``) in a pod or machine name (``state -o table`` crashed with a
  UnicodeEncodeError);
* one GPU, or one exclusive CPU, held by two app containers of a pod (accepted before, for
  the GPU); an init container's devices going on to an app container stay accepted.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from numalign.cli import main
from numalign.node import store

REPO = Path(__file__).resolve().parents[1]
FIG1 = str(REPO / "examples" / "fig1.yaml")
PODS = str(REPO / "examples" / "fig1-pods.yaml")
GPU = "gpu-vendor.com/gpu"


@pytest.fixture
def state_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    d = tmp_path / "state"
    assert main(["admit", "-m", FIG1, "--state-dir", str(d), PODS, "-o", "json"]) == 0
    capsys.readouterr()
    return d


def forge(state_dir: Path, mutate: Callable[[dict[str, Any]], None], *,
          raw: tuple[str, str] | None = None) -> None:
    """Change the stored payload and write it back with a checksum that matches what a
    reader computes (so only numalign's validation can refuse it); ``raw``: then replace a
    text in the written document (``1e400``, which no Python float prints)."""
    path = state_dir / store.STATE_FILE
    doc = json.loads(path.read_text())
    mutate(doc["payload"])
    doc["checksum"] = store.checksum(doc["payload"])
    text = json.dumps(doc)
    if raw is not None:
        assert raw[0] in text
        text = text.replace(raw[0], raw[1])
    path.write_text(text)


def pod_uid(payload: dict[str, Any]) -> str:
    (uid,) = payload["node"]["pods"]
    return str(uid)


def run_all(state_dir: Path, capsys: pytest.CaptureFixture[str]) -> list[str]:
    """``state -o table``, ``admit`` and ``release`` on the forged state: each must exit 2
    with one line; returns the lines."""
    lines = []
    for argv in (["state", "--state-dir", str(state_dir), "-o", "table"],
                 ["admit", "-m", FIG1, "--state-dir", str(state_dir), PODS, "-o", "json"],
                 ["release", "--state-dir", str(state_dir), "default/numa-aligned"]):
        assert main(argv) == 2, argv
        out, err = capsys.readouterr()
        assert out == "" and len(err.strip().splitlines()) == 1, (argv, err)
        assert "state.json" in err and "Traceback" not in err
        lines.append(err.strip())
    return lines


def _memory_table(payload: dict[str, Any]) -> dict[str, Any]:
    table: dict[str, Any] = payload["node"]["memory"]["machineState"]["0"]["memoryMap"]["memory"]
    return table


@pytest.mark.parametrize("value, raw, shown", [
    (float("inf"), None, "Infinity"),
    (float("-inf"), None, "-Infinity"),
    (float("nan"), None, "NaN"),
    (123456789, ("123456789", "1e400"), "1e400"),
])
def test_non_finite_memory_amounts_are_refused(state_dir: Path, capsys: pytest.CaptureFixture[str],
                                               value: float, raw: tuple[str, str] | None,
                                               shown: str) -> None:
    forge(state_dir, lambda p: _memory_table(p).__setitem__("free", value), raw=raw)
    for line in run_all(state_dir, capsys):
        assert shown in line


@pytest.mark.parametrize("value, shown", [(1.5, "free: expected an integer, got float 1.5"),
                                          ("68509761536", "free: expected an integer, got str"),
                                          (-1, "free: -1 is out of range (uint64)"),
                                          (1 << 64, "is out of range (uint64)")])
def test_memory_amounts_are_integers_as_in_the_kubelets_checkpoint(
        state_dir: Path, capsys: pytest.CaptureFixture[str], value: Any, shown: str) -> None:
    forge(state_dir, lambda p: _memory_table(p).__setitem__("free", value))
    for line in run_all(state_dir, capsys):
        assert shown in line


@pytest.mark.parametrize("where", ["pod", "machine", "container"])
def test_a_lone_surrogate_in_a_name_is_refused(state_dir: Path, capsys: pytest.CaptureFixture[str],
                                               where: str) -> None:
    def mutate(p: dict[str, Any]) -> None:
        if where == "pod":
            p["node"]["pods"][pod_uid(p)]["key"] = "default/numa-\ud800aligned"
        elif where == "machine":
            p["machine"]["name"] = "fig\ud8001"
        else:
            p["node"]["pods"][pod_uid(p)]["containers"][0]["name"] = "c\udc00"

    forge(state_dir, mutate)
    assert "\\ud800" in (state_dir / store.STATE_FILE).read_text() or where == "container"
    for line in run_all(state_dir, capsys):
        assert "lone surrogate" in line


def test_state_table_of_a_refused_name_does_not_crash_the_real_stdout(state_dir: Path) -> None:
    """The crash was in writing the table to a UTF-8 stdout: run the command for real."""
    forge(state_dir, lambda p: p["node"]["pods"][pod_uid(p)].__setitem__("key", "default/\ud800"))
    r = subprocess.run([sys.executable, "-m", "numalign", "state", "--state-dir", str(state_dir),
                        "-o", "table"], capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "lone surrogate" in r.stderr


def test_one_gpu_held_by_two_app_containers_is_refused(state_dir: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    def mutate(p: dict[str, Any]) -> None:
        per = p["node"]["devices"]["allocated"][pod_uid(p)]
        per["numa-aligned-container1"][GPU] = list(per["numa-aligned-container0"][GPU])

    forge(state_dir, mutate)
    for line in run_all(state_dir, capsys):
        assert f"device {GPU}/gpu0 is held by containers numa-aligned-container0 and " \
               "numa-aligned-container1" in line


def test_one_cpu_held_by_two_app_containers_is_refused(state_dir: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """The same overlap for CPUs, with the CPU accounting kept whole (CPUs 4-5 go back to the
    shared pool), so only the overlap itself can be refused."""
    def mutate(p: dict[str, Any]) -> None:
        cpu = p["node"]["cpu"]
        entries = cpu["entries"][pod_uid(p)]
        assert entries["numa-aligned-container1"] == "4-5"
        entries["numa-aligned-container1"] = "0-1"
        cpu["defaultCpuSet"] = "2-7"

    forge(state_dir, mutate)
    for line in run_all(state_dir, capsys):
        assert "CPU 0 is held by containers numa-aligned-container0 and numa-aligned-container1" in line


def test_init_container_devices_going_on_to_an_app_container_stay_accepted(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "with-init"},
           "spec": {"initContainers": [{"name": "init", "resources": {"limits": {GPU: "1"}}}],
                    "containers": [{"name": "app", "resources": {"limits": {GPU: "1"}}},
                                   {"name": "other", "resources": {"limits": {GPU: "1"}}}]}}
    path = tmp_path / "pod.json"
    path.write_text(json.dumps(pod))
    d = tmp_path / "state"
    assert main(["admit", "-m", FIG1, "--state-dir", str(d), str(path), "-o", "json"]) == 0
    held = json.loads((d / store.STATE_FILE).read_text())["payload"]["node"]["devices"]["allocated"]
    (per,) = held.values()
    assert per["init"][GPU] == per["app"][GPU] != per["other"][GPU]  # handed on once
    capsys.readouterr()
    assert main(["state", "--state-dir", str(d), "-o", "json"]) == 0
