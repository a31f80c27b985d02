"""numalign.launcher as a library: no argparse outside launcher/cli.py, LaunchRequest built
from plain values, admission with an on_wait callback, reclaim of dead launchers."""

from __future__ import annotations

import ast
import dataclasses
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import numalign.launcher
from numalign.errors import InputError
from numalign.launcher import (
    Identity,
    LaunchRejected,
    LaunchRequest,
    admit,
    dry_run,
    launcher_machine,
    request_pod,
    run_record,
)
from numalign.launcher.proc import proc_start_time
from numalign.machine.model import Machine
from test_launcher_helpers import SMALL_SPEC

PACKAGE = Path(numalign.launcher.__file__).parent


def _library_modules() -> list[Path]:
    return sorted(p for p in PACKAGE.glob("*.py") if p.name != "cli.py")


def test_library_modules_do_not_import_argparse() -> None:
    modules = _library_modules()
    assert {p.name for p in modules} >= {"__init__.py", "request.py", "runs.py", "plan.py",
                                          "admission.py", "pinning.py"}
    for path in modules:
        tree = ast.parse(path.read_text(), str(path))
        imported = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                imported |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                imported.add(node.module)
                imported |= {f"{node.module}.{a.name}" for a in node.names}
        assert "argparse" not in imported, path.name
        assert "numalign.launcher.cli" not in imported, path.name
        assert "Namespace" not in path.read_text(), path.name  # not even in an annotation


def test_importing_the_library_imports_no_argparse() -> None:
    code = ("import sys, numalign.launcher\n"
            "print('argparse' in sys.modules, 'numalign.launcher.cli' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_launch_rejected_does_not_clash_with_scopes_rejected() -> None:
    from numalign.engine.scopes import Rejected

    assert not issubclass(LaunchRejected, Rejected) and not issubclass(Rejected, LaunchRejected)
    assert not hasattr(numalign.launcher, "Rejected")
    e = LaunchRejected("TopologyAffinityError", "no")
    assert e.reason == "TopologyAffinityError" and e.message == "TopologyAffinityError: no"


# ---------------------------------------------------------------------------- LaunchRequest


@pytest.fixture(scope="module")
def machine() -> Machine:
    import yaml

    from numalign.machine.spec import load_machine

    return launcher_machine(load_machine(yaml.safe_load(SMALL_SPEC)))


def test_request_from_plain_values(machine: Machine) -> None:
    r = LaunchRequest.from_values(["sh", "-c", "true"], cpus="3", memory="1Gi",
                                  hugepages={"hugepages-2Mi": "4Mi", "hugepages-1Gi": None},
                                  gpus=1, devices=["nvidia.com/gpu=1"])
    assert r.command == ("sh", "-c", "true") and r.cpus == 3 and r.memory == 1 << 30
    assert dict(r.hugepages) == {"hugepages-2Mi": 4 << 20} and r.binds_memory
    assert r.resources(machine) == {"cpu": 3000, "memory": 1 << 30, "hugepages-2Mi": 4 << 20,
                                    "nvidia.com/gpu": 2}
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.cpus = 4  # type: ignore[misc]
    with pytest.raises(TypeError):
        r.devices["x"] = 1  # type: ignore[index]
    nominal = LaunchRequest(("true",), cpus=2)
    assert not nominal.binds_memory and nominal.resources(machine)["memory"] == 1 << 20


@pytest.mark.parametrize(("kwargs", "field", "problem"), [
    ({"cpus": 0}, "cpus", "must be at least 1"),
    ({"cpus": True}, "cpus", "a whole number"),
    ({"memory": 0}, "memory", "must be positive"),
    ({"gpus": -1}, "gpus", "must be non-negative"),
    ({"hugepages": {"hugepages-3Mi": 1}}, "hugepages.hugepages-3Mi", "expected one of"),
    ({"devices": {"x.com/y": 0}}, "devices", "at least 1"),
    ({"command": ("true", 1)}, "command", "must be strings"),
])
def test_request_validation_names_the_field(kwargs: dict[str, object], field: str, problem: str) -> None:
    with pytest.raises(InputError) as e:
        LaunchRequest(**kwargs)  # type: ignore[arg-type]
    assert e.value.field == field and problem in e.value.problem


def test_machine_checks_name_the_field(machine: Machine) -> None:
    with pytest.raises(InputError) as e:
        LaunchRequest(devices={"x.com/y": 1}).resources(machine)
    assert e.value.field == "devices" and "no x.com/y devices" in e.value.problem


@settings(max_examples=200, deadline=None)
@given(cpus=st.one_of(st.integers(-5, 300).map(str), st.text(max_size=6)),
       devices=st.lists(st.text(alphabet="ab=1-0 ", max_size=6), max_size=3))
def test_from_values_parses_or_names_the_field(cpus: str, devices: list[str]) -> None:
    try:
        r = LaunchRequest.from_values(["true"], cpus=cpus, devices=devices)
    except InputError as e:
        assert e.field in ("cpus", "devices")
        return
    assert r.cpus == int(cpus) >= 1
    assert all(n >= 1 for n in r.devices.values())
    assert sum(r.devices.values()) == sum(int(d.rpartition("=")[2]) for d in devices)


# -------------------------------------------------------------------------------- admission


@pytest.fixture
def sleeper() -> Iterator[Identity]:
    """A live process to stand for another launcher."""
    p = subprocess.Popen(["sleep", "60"])
    try:
        start = None
        while start is None:
            start = proc_start_time(p.pid)
        yield Identity(p.pid, start)
    finally:
        p.kill()
        p.wait()


def test_wait_calls_on_wait_once_instead_of_printing(
    machine: Machine, sleeper: Identity, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    state = tmp_path / "s"
    held = request_pod(LaunchRequest(("sleep",), cpus=7), machine, sleeper)
    result, _ = admit(machine, held, state, record=run_record(sleeper, ["sleep"]), bind_memory=False)
    assert result.admitted

    me = Identity(sleeper.pid + 1_000_000, 1)  # never alive: only asks, is never recorded live
    pod = request_pod(LaunchRequest(("true",)), machine, me)
    calls: list[tuple[str, str]] = []
    with pytest.raises(LaunchRejected) as e:
        admit(machine, pod, state, record=run_record(me, ["true"]), bind_memory=False, wait=True,
              timeout=0.3, on_wait=lambda reason, message: calls.append((reason, message)))
    assert e.value.reason == "TopologyAffinityError"  # the kubelet's Topology Manager first
    assert "still not admitted after waiting 0.3s" in e.value.message
    assert [reason for reason, _ in calls] == ["TopologyAffinityError"]  # once, with the reason
    assert capsys.readouterr() == ("", "")  # the library printed nothing

    calls.clear()
    with pytest.raises(LaunchRejected):
        admit(machine, pod, state, record=run_record(me, ["true"]), bind_memory=False,
              on_wait=lambda reason, message: calls.append((reason, message)))
    assert calls == []  # no waiting, no callback


def test_dead_launchers_are_reclaimed_and_dry_runs_keep_nothing(
    machine: Machine, tmp_path: Path,
) -> None:
    state = tmp_path / "s"
    p = subprocess.Popen(["sleep", "60"])
    start = None
    while start is None:
        start = proc_start_time(p.pid)
    dead = Identity(p.pid, start)
    held = request_pod(LaunchRequest(("sleep",), cpus=7), machine, dead)
    assert admit(machine, held, state, record=run_record(dead, ["sleep"]), bind_memory=False)[0].admitted
    p.kill()
    p.wait()

    me = Identity(dead.pid + 1_000_000, 1)
    plan = dry_run(machine, LaunchRequest(("true",), cpus=7), state, me, pin=False)
    assert plan.result.admitted and plan.reclaimed == [held.key]  # reclaimed in memory only
    runs = (state / "runs.json").read_text()
    assert held.key in runs  # the dry run wrote nothing

    pod = request_pod(LaunchRequest(("true",), cpus=7), machine, me)
    result, reclaimed = admit(machine, pod, state, record=run_record(me, ["true"]), bind_memory=False)
    assert result.admitted and reclaimed == [held.key]
    assert held.key not in (state / "runs.json").read_text()
