"""State directories are validated, not trusted (issue 13): forged or malformed payloads get a
one-line error naming the file; directories other users could tamper with are refused; the
lock wait is bounded; memory-size changes are adopted; ``state --reconcile`` moves a state."""

from __future__ import annotations

import fcntl
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from numalign.cli import main
from numalign.errors import StateError
from numalign.node import store

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

SPEC = """\
name: trust
shape: {sockets: 2, numaPerSocket: 2, coresPerNuma: 4, threadsPerCore: 1, memoryPerNuma: %s}
kubelet:
  topologyManagerPolicy: best-effort
  cpuManagerPolicy: static
  reservedSystemCPUs: "0"
  memoryManagerPolicy: Static
  evictionHard: {memory.available: 1Gi}   # = the reservedMemory total (kubelet start-up check)
  reservedMemory:
    - {numaNode: 0, limits: {memory: 256Mi}}
    - {numaNode: 1, limits: {memory: 256Mi}}
    - {numaNode: 2, limits: {memory: 256Mi}}
    - {numaNode: 3, limits: {memory: 256Mi}}
devices:
  - {resource: example.com/nic, id: nic0, numa: 0}
  - {resource: example.com/nic, id: nic1, numa: 1}
"""


def pod_yaml(name: str, cpus: int, mem: str, nic: int = 0) -> str:
    res = {"cpu": str(cpus), "memory": mem}
    if nic:
        res["example.com/nic"] = str(nic)
    return json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                       "spec": {"containers": [{"name": "c", "resources": {"requests": res, "limits": res}}]}})


@pytest.fixture
def admitted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[Path, Path]:
    spec = tmp_path / "m.yaml"
    spec.write_text(SPEC % "4Gi")
    state = tmp_path / "state"
    for i, (cpus, mem, nic) in enumerate([(2, "1Gi", 1), (2, "5Gi", 0)]):
        p = tmp_path / f"p{i}.json"
        p.write_text(pod_yaml(f"p{i}", cpus, mem, nic))
        assert main(["admit", "-m", str(spec), "--state-dir", str(state), str(p)]) == 0
    capsys.readouterr()
    return spec, state


def rewrite(state: Path, change: Any) -> None:
    doc = json.loads((state / store.STATE_FILE).read_text())
    change(doc["payload"])
    doc["checksum"] = store.checksum(doc["payload"])  # anyone can recompute it
    (state / store.STATE_FILE).write_text(json.dumps(doc))


def one_line_error(capsys: pytest.CaptureFixture[str], code: int, *needles: str) -> str:
    _, err = capsys.readouterr()
    assert code == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    for n in needles:
        assert n in err, err
    return err


def test_forged_state_with_cpus_held_twice_is_refused(admitted: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    _, state = admitted

    def forge(payload: dict[str, Any]) -> None:
        entries = payload["node"]["cpu"]["entries"]
        uids = sorted(entries)
        entries[uids[1]]["c"] = entries[uids[0]]["c"]  # the second pod claims the first's CPUs

    rewrite(state, forge)
    for argv in (["state"], ["release", "default/p0"], ["admit", str(EXAMPLES / "pods" / "mixed-qos.yaml")]):
        code = main([argv[0], "--state-dir", str(state), *argv[1:]])
        one_line_error(capsys, code, str(state / store.STATE_FILE))


def test_forged_state_with_a_device_held_twice_is_refused(admitted: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    _, state = admitted

    def forge(payload: dict[str, Any]) -> None:
        alloc = payload["node"]["devices"]["allocated"]
        ((_, held),) = alloc.items()
        alloc["someone-else"] = held

    rewrite(state, forge)
    one_line_error(capsys, main(["state", "--state-dir", str(state)]), "held by pods")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=st.lists(st.sampled_from(["node", "cpu", "memory", "devices", "pods", "entries", "machineState",
                                       "allocated", "0", "1", "memoryMap", "memory", "free"]), min_size=1, max_size=4),
       value=st.one_of(st.none(), st.integers(-5, 1 << 70), st.text(max_size=5), st.lists(st.integers(), max_size=2),
                       st.dictionaries(st.text(max_size=3), st.integers(), max_size=2), st.booleans()))
def test_malformed_payloads_give_one_line_errors(admitted: tuple[Path, Path], capsys: pytest.CaptureFixture[str],
                                                 path: list[str], value: Any) -> None:
    _, state = admitted
    original = (state / store.STATE_FILE).read_text()
    try:
        def poke(payload: dict[str, Any]) -> None:
            target: Any = payload
            for key in path[:-1]:
                if isinstance(target, dict) and isinstance(target.get(key), dict):
                    target = target[key]
            if isinstance(target, dict):
                target[path[-1]] = value

        rewrite(state, poke)
        for argv in (["state"], ["release", "default/p0"]):
            code = main([argv[0], "--state-dir", str(state), *argv[1:]])
            _, err = capsys.readouterr()
            assert code in (0, 2), err
            assert "Traceback" not in err
            if code == 2:
                assert err.count("\n") == 1, err
    finally:
        (state / store.STATE_FILE).write_text(original)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give the directory to another user")
def test_directory_of_another_user_is_refused(admitted: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    _, state = admitted
    os.chown(state, 54321, -1)
    one_line_error(capsys, main(["state", "--state-dir", str(state)]), "owned by uid 54321")


def test_group_writable_directory_and_lock_symlink_are_refused(
    admitted: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, state = admitted
    os.chmod(state, 0o777)
    one_line_error(capsys, main(["state", "--state-dir", str(state)]), "writable by group or others")
    os.chmod(state, 0o700)
    (state / store.LOCK_FILE).unlink()
    (state / store.LOCK_FILE).symlink_to(tmp_path / "elsewhere")
    one_line_error(capsys, main(["state", "--state-dir", str(state)]), "lock file")
    assert not (tmp_path / "elsewhere").exists()


def test_new_state_directory_is_private(tmp_path: Path) -> None:
    d = tmp_path / "fresh"
    with store.locked(d):
        pass
    assert os.stat(d).st_mode & 0o777 == 0o700


def test_lock_wait_is_bounded(tmp_path: Path) -> None:
    d = tmp_path / "busy"
    with store.locked(d):
        pass
    holder = os.open(d / store.LOCK_FILE, os.O_RDWR)
    fcntl.flock(holder, fcntl.LOCK_EX)
    try:
        t0 = time.monotonic()
        with pytest.raises(StateError, match="still locked"), store.locked(d, timeout=0.3):
            pass
        assert time.monotonic() - t0 < 5
        # released meanwhile: a waiter gets it
        threading.Timer(0.2, lambda: fcntl.flock(holder, fcntl.LOCK_UN)).start()
        with store.locked(d, timeout=5):
            pass
    finally:
        os.close(holder)


def test_memory_growth_is_adopted_and_shrink_needs_reconcile(
    admitted: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, state = admitted
    bigger = tmp_path / "bigger.yaml"
    bigger.write_text(SPEC % "6Gi")
    p = tmp_path / "more.json"
    p.write_text(pod_yaml("more", 1, "5Gi"))
    # same topology, more memory per NUMA node: the stored allocations carry over
    assert main(["admit", "-m", str(bigger), "--state-dir", str(state), str(p), "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr()[0])
    assert doc["pods"][0]["admitted"] if "pods" in doc else True
    assert main(["state", "--state-dir", str(state), "-o", "json"]) == 0
    names = {q["name"] for q in json.loads(capsys.readouterr()[0])["pods"]}
    assert names == {"default/p0", "default/p1", "default/more"}
    # much less memory: the 5Gi pods no longer fit: refused with the way out named
    smaller = tmp_path / "smaller.yaml"
    smaller.write_text(SPEC % "2Gi")
    err = one_line_error(capsys, main(["admit", "-m", str(smaller), "--state-dir", str(state), str(p)]),
                         "--reconcile")
    assert "memory changed" in err
    assert main(["state", "--state-dir", str(state), "--reconcile", "-m", str(smaller)]) == 0
    _, err = capsys.readouterr()
    assert "dropped default/p1" in err and "kept default/p0" in err
    assert main(["state", "--state-dir", str(state), "-o", "json"]) == 0
    kept = json.loads(capsys.readouterr()[0])
    assert [q["name"] for q in kept["pods"]] == ["default/p0"]
    assert kept["pods"][0]["containers"][0]["devices"] == {"example.com/nic": ["nic0"]}


def test_reconcile_onto_another_topology_keeps_what_exists(
    admitted: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, state = admitted
    other = tmp_path / "other.yaml"
    other.write_text((SPEC % "4Gi").replace("coresPerNuma: 4", "coresPerNuma: 3")
                     .replace("  - {resource: example.com/nic, id: nic1, numa: 1}\n", ""))
    p = tmp_path / "x.json"
    p.write_text(pod_yaml("x", 1, "100Mi"))
    code = main(["admit", "-m", str(other), "--state-dir", str(state), str(p)])
    one_line_error(capsys, code, "another machine")
    assert main(["state", "--state-dir", str(state), "--reconcile", "-m", str(other)]) == 0
    _, err = capsys.readouterr()
    assert err.count("kept") + err.count("dropped") == 2
    assert main(["state", "--state-dir", str(state)]) == 0
