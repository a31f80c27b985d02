"""Concurrent numalign run calls on a small machine spec; SIGKILLed launchers are reclaimed.

The spec (2 NUMA nodes x 4 CPUs, CPU 0's core reserved: 7 CPUs to give) lists CPUs this box
may not have: pinning is then skipped with a warning, and the children learn their CPUs from
``NUMALIGN_CPUS``. Each child records (its CPUs, start, end); the launcher holds the
allocation from before the child starts until after it exits, so two children sharing a CPU
must have disjoint intervals.
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import time
from pathlib import Path

from test_launcher_helpers import cli, parse_cpulist, popen, ps_json, small_spec

RECORD = ('s=$(date +%s.%N); sleep {sleep}; e=$(date +%s.%N); '
          'echo "$NUMALIGN_CPUS $NUMALIGN_NUMA_NODES $s $e" > {out}')


def _launch(n: int, spec: Path, state: Path, out: Path, sleep: float, *extra: str) -> list[subprocess.Popen[str]]:
    procs = []
    for i in range(n):
        cmd = RECORD.format(sleep=sleep, out=out / f"{i}.txt")
        procs.append(popen("run", "--machine", str(spec), "--state-dir", str(state),
                           "--cpus", str(1 + i % 2), *extra, "--", "sh", "-c", cmd))
    return procs


def _records(out: Path) -> list[tuple[set[int], list[int], float, float]]:
    recs = []
    for f in sorted(out.glob("*.txt")):
        cpus, nodes, s, e = f.read_text().split()
        recs.append((parse_cpulist(cpus), [int(x) for x in nodes.split(",")], float(s), float(e)))
    return recs


def _assert_no_shared_cpu(recs: list[tuple[set[int], list[int], float, float]]) -> int:
    """No CPU held by two live children at once; returns the peak number of CPUs in use."""
    for (c1, _, s1, e1), (c2, _, s2, e2) in itertools.combinations(recs, 2):
        if c1 & c2:
            assert e1 <= s2 or e2 <= s1, f"CPUs {c1 & c2} given to two live processes"
    peak = 0
    for _, _, s, _ in recs:
        peak = max(peak, sum(len(c) for c, _, s2, e2 in recs if s2 <= s < e2))
    assert peak <= 7
    return peak


def test_twenty_concurrent_runs_with_wait_all_run_and_never_share(tmp_path: Path) -> None:
    spec, state, out = small_spec(tmp_path), tmp_path / "state", tmp_path / "out"
    out.mkdir()
    # the spec's CPUs may not be this host's: issue 13 made that an error unless asked for
    procs = _launch(20, spec, state, out, 0.5, "--wait", "--timeout", "300", "--allow-unpinned")
    results = [(p.wait(360), *p.communicate()) for p in procs]
    assert [rc for rc, _, _ in results] == [0] * 20, [err for _, _, err in results]
    recs = _records(out)
    assert len(recs) == 20
    for i, (cpus, nodes, _, _) in enumerate(recs):
        assert len(cpus) == 1 + int(sorted(out.glob("*.txt"))[i].stem) % 2
        assert 0 not in cpus  # reserved
        assert len(nodes) == 1  # restricted: 1-2 CPUs always fit one node
    peak = _assert_no_shared_cpu(recs)
    assert peak >= 2  # they did run concurrently
    assert any("pinning skipped: CPUs" in err for _, _, err in results)
    assert ps_json(state) == {"runs": [], "stale": 0}


def test_twenty_concurrent_runs_without_wait_fail_clearly(tmp_path: Path) -> None:
    spec, state, out = small_spec(tmp_path), tmp_path / "state", tmp_path / "out"
    out.mkdir()
    procs = _launch(20, spec, state, out, 4, "--no-pin")
    results = [(p.wait(360), *p.communicate()) for p in procs]
    ok = [r for r in results if r[0] == 0]
    failed = [r for r in results if r[0] != 0]
    assert ok and failed
    for rc, _, err in failed:
        assert rc == 1
        # the kubelet's Topology Manager refuses first (restricted: no CPUs left to align)
        assert err.startswith("numalign run: TopologyAffinityError: ")
        assert len(err.strip().splitlines()) == 1
    recs = _records(out)
    assert len(recs) == len(ok)
    _assert_no_shared_cpu(recs)
    assert ps_json(state) == {"runs": [], "stale": 0}


def test_sigkilled_launcher_is_reclaimed_by_the_next_run(tmp_path: Path) -> None:
    spec, state = small_spec(tmp_path), tmp_path / "state"
    child_pid = tmp_path / "child.pid"
    victim = popen("run", "--machine", str(spec), "--state-dir", str(state), "--cpus", "3",
                   "--no-pin", "--", "sh", "-c", f"echo $$ > {child_pid}; echo up; exec sleep 60")
    assert victim.stdout is not None and victim.stdout.readline().strip() == "up"
    [run] = ps_json(state)["runs"]
    assert run["pid"] == victim.pid and len(parse_cpulist(run["cpus"])) == 3
    victim.send_signal(signal.SIGKILL)
    assert victim.wait(30) == -signal.SIGKILL
    # the child dies with its launcher (PR_SET_PDEATHSIG), so its CPUs are really free
    pid = int(child_pid.read_text())
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(pid)
    assert ps_json(state) == {"runs": [], "stale": 1}
    # 6 CPUs fit only if the dead launcher's 3 come back (7 CPUs to give)
    out = cli("run", "--machine", str(spec), "--state-dir", str(state), "--cpus", "6",
              "--no-pin", "--", "sh", "-c", "echo $NUMALIGN_CPUS")
    assert out.returncode == 0, out.stderr
    got = parse_cpulist(out.stdout)
    assert len(got) == 6 and 0 not in got
    assert ps_json(state) == {"runs": [], "stale": 0}
    # a dry run sees the reclaim too, without writing it
    victim2 = popen("run", "--machine", str(spec), "--state-dir", str(state), "--cpus", "3",
                    "--no-pin", "--", "sh", "-c", "echo up; exec sleep 60")
    assert victim2.stdout is not None and victim2.stdout.readline().strip() == "up"
    victim2.send_signal(signal.SIGKILL)
    victim2.wait(30)
    dry = cli("run", "--machine", str(spec), "--state-dir", str(state), "--cpus", "6", "--dry-run",
              "--", "true")
    assert dry.returncode == 0 and f"reclaimed stale allocation numalign-run/run-{victim2.pid}-" in dry.stdout
    assert ps_json(state)["stale"] == 1


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def test_runs_file_is_bookkeeping_only(tmp_path: Path) -> None:
    """A corrupt runs.json does not block runs: pod names identify the launchers."""
    spec, state = small_spec(tmp_path), tmp_path / "state"
    assert cli("run", "--machine", str(spec), "--state-dir", str(state), "--no-pin", "--", "true").returncode == 0
    (state / "runs.json").write_text("{not json")
    out = cli("run", "--machine", str(spec), "--state-dir", str(state), "--no-pin", "--", "sh", "-c", "exit 3")
    assert out.returncode == 3, out.stderr
    assert not any(p.name.startswith(".runs.") for p in state.iterdir())
    assert os.path.exists(state / "state.json")
