"""numalign run on this machine: pinning, exit status, signals, ps, dry-run, errors."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from test_launcher_helpers import (
    cli,
    in_process,
    live_box_or_skip,
    parse_cpulist,
    popen,
    ps_json,
    small_spec,
)

PROBE = (
    "import json, os, subprocess, sys\n"
    "status = dict(l.split(':\\t', 1) for l in open('/proc/self/status').read().splitlines() if ':\\t' in l)\n"
    "ps = subprocess.run([sys.executable, '-m', 'numalign.cli', 'ps', '--state-dir', sys.argv[1],"
    " '-o', 'json'], capture_output=True, text=True).stdout\n"
    "print(json.dumps({'allowed': status['Cpus_allowed_list'].strip(),"
    " 'env': os.environ['NUMALIGN_CPUS'], 'ps': json.loads(ps),"
    " 'bind': 'bind:' in open('/proc/self/numa_maps').read()}))\n"
)


def test_child_runs_on_exactly_the_allocated_cpus(tmp_path: Path) -> None:
    usable = live_box_or_skip()
    state = tmp_path / "state"
    out = cli("run", "--state-dir", str(state), "--cpus", "1", "--memory", "32Mi", "--",
              sys.executable, "-c", PROBE, str(state))
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    allowed = parse_cpulist(doc["allowed"])
    allocated = parse_cpulist(doc["env"])
    assert allowed == allocated and len(allocated) == 1
    assert allocated <= usable and 0 not in allocated  # CPU 0's core is reserved
    [run] = doc["ps"]["runs"]  # ps seen from inside the run: the same allocation
    assert parse_cpulist(run["cpus"]) == allowed
    assert run["command"][0] == sys.executable
    assert doc["bind"]  # memory bound with MPOL_BIND (visible in numa_maps)
    assert ps_json(state)["runs"] == []  # released on exit


def test_exit_status_passes_through(tmp_path: Path) -> None:
    live_box_or_skip()
    state = str(tmp_path / "s")
    assert cli("run", "--state-dir", state, "--", "sh", "-c", "exit 7").returncode == 7
    assert cli("run", "--state-dir", state, "--", "true").returncode == 0
    killed = cli("run", "--state-dir", state, "--", "sh", "-c", "kill -9 $$")
    assert killed.returncode == 128 + 9
    missing = cli("run", "--state-dir", state, "--", "/nonexistent/cmd")
    assert missing.returncode == 127 and "No such file" in missing.stderr
    assert ps_json(Path(state))["runs"] == []


TRAP = (
    "import signal, sys, time\n"
    "def usr1(s, f):\n    print('usr1', flush=True)\n"
    "def term(s, f):\n    print('term', flush=True); sys.exit(42)\n"
    "signal.signal(signal.SIGUSR1, usr1); signal.signal(signal.SIGTERM, term)\n"
    "print('ready', flush=True)\n"
    "time.sleep(60)\n"
)


def test_signals_reach_the_child(tmp_path: Path) -> None:
    live_box_or_skip()
    state = tmp_path / "s"
    p = popen("run", "--state-dir", str(state), "--", sys.executable, "-c", TRAP)
    assert p.stdout is not None
    assert p.stdout.readline().strip() == "ready"
    p.send_signal(signal.SIGUSR1)
    assert p.stdout.readline().strip() == "usr1"
    p.send_signal(signal.SIGTERM)
    assert p.stdout.readline().strip() == "term"
    assert p.wait(30) == 42
    assert ps_json(state)["runs"] == []


def test_rejection_is_one_clear_line_and_status_1(tmp_path: Path) -> None:
    spec = small_spec(tmp_path)
    out = cli("run", "--machine", str(spec), "--state-dir", str(tmp_path / "s"), "--cpus", "64",
              "--", "true")
    assert out.returncode == 1
    # the kubelet's Topology Manager answers before its predicates (kubelet.go registers the
    # resource-allocation admit handler first); the cause still names the 7 allocatable CPUs
    assert out.stderr.startswith("numalign run: TopologyAffinityError: ")
    assert "try --policy" not in out.stderr  # no policy helps a request over the machine
    assert "the machine has 7 allocatable CPUs (CPU 0 is reserved)" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    # --wait does not wait for what never fits
    t0 = time.monotonic()
    out = cli("run", "--machine", str(spec), "--state-dir", str(tmp_path / "s"), "--cpus", "64",
              "--wait", "--", "true")
    assert out.returncode == 1 and "even on the empty machine" in out.stderr
    assert time.monotonic() - t0 < 30


def test_wait_times_out(tmp_path: Path) -> None:
    spec = small_spec(tmp_path)
    state = tmp_path / "s"
    holder = popen("run", "--machine", str(spec), "--state-dir", str(state), "--cpus", "7",
                   "--no-pin", "--", "sh", "-c", "echo held; sleep 30")
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        t0 = time.monotonic()
        out = cli("run", "--machine", str(spec), "--state-dir", str(state), "--cpus", "1",
                  "--wait", "--timeout", "1.5", "--", "true")
        took = time.monotonic() - t0
        assert out.returncode == 1, out.stderr
        assert "waiting: TopologyAffinityError" in out.stderr  # the Topology Manager first
        assert "see numalign ps" in out.stderr
        assert "still not admitted after waiting 1.5s" in out.stderr
        assert 1.4 < took < 30
    finally:
        holder.send_signal(signal.SIGTERM)
        assert holder.wait(30) == 128 + signal.SIGTERM


def test_dry_run_plans_without_keeping_anything(tmp_path: Path) -> None:
    spec = small_spec(tmp_path)
    state = tmp_path / "s"
    out = cli("run", "--machine", str(spec), "--state-dir", str(state), "--cpus", "2",
              "--memory", "1Gi", "--gpus", "1", "--dry-run", "-o", "json", "--", "true")
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout)
    alloc = plan["allocation"]
    assert alloc["admitted"] and alloc["policy"] == "restricted"
    [c] = alloc["containers"]
    assert c["affinity"] == [0] and c["cpus"] == "1-2"  # CPU 0's core is reserved
    assert set(c["explain"]["providers"]) == {"devices", "cpu", "memory"}
    assert c["explain"]["merged"] == {"affinity": [0], "preferred": True}
    assert plan["devices"] == {"nvidia.com/gpu": ["gpu0"]}
    assert plan["env"]["CUDA_VISIBLE_DEVICES"] == "0"
    assert plan["env"]["NVIDIA_VISIBLE_DEVICES"] == "0"
    assert plan["env"]["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert plan["memory_nodes"] == [0] and plan["env"]["NUMALIGN_MEMORY_NODES"] == "0"
    assert not state.exists()  # nothing kept, nothing created
    text = cli("run", "--machine", str(spec), "--state-dir", str(state), "--cpus", "5",
               "--gpus", "3", "--dry-run")
    assert text.returncode == 0, text.stderr
    # 5 CPUs and 3 GPUs need both nodes (4 CPUs, 2 GPUs each): preferred under restricted
    assert "merged hint: {\"affinity\": [0, 1], \"preferred\": true}" in text.stdout
    assert "CUDA_VISIBLE_DEVICES=0,1,2" in text.stdout
    # 2 CPUs fit one node, so 3 GPUs across two nodes is not a preferred placement: the
    # dry run shows the rejection with every provider's hints, exit status 1
    text = cli("run", "--machine", str(spec), "--state-dir", str(state), "--cpus", "2",
               "--gpus", "3", "--dry-run")
    assert text.returncode == 1, text.stderr
    assert "TopologyAffinityError" in text.stdout
    assert "merged hint: {\"affinity\": [0, 1], \"preferred\": false}" in text.stdout


def test_gpu_env_uses_pci_order() -> None:
    from numalign.launcher import device_env
    from numalign.machine.model import Cpu, Device, Machine, NumaNode

    m = Machine("g", (NumaNode(0, 1 << 30),), (Cpu(0, 0, 0, 0),), devices=(
        Device("nvidia.com/gpu", "b", (0,), bus_id="0000:81:00.0"),
        Device("nvidia.com/gpu", "a", (0,), bus_id="0000:03:00.0"),
        Device("amd.com/gpu", "x", (0,), bus_id="0000:04:00.0"),
    ))
    env = device_env(m, {"nvidia.com/gpu": ["b"], "amd.com/gpu": ["x"]})
    assert env["CUDA_VISIBLE_DEVICES"] == "1" and env["ROCR_VISIBLE_DEVICES"] == "0"


@pytest.mark.parametrize(("argv", "message"), [
    (["--cpus", "1.5"], "--cpus: a whole number"),
    (["--cpus", "0"], "--cpus: must be at least 1"),
    (["--memory=-1Gi"], "--memory: a memory amount must be positive"),
    (["--memory", "-1Gi"], "--memory: a memory amount must be positive, got '-1Gi'"),
    (["--hugepages-2Mi", "-.5Gi"], "--hugepages-2Mi: a hugepage amount must be positive"),
    (["--device", "foo"], "--device: expected RESOURCE=COUNT"),
    (["--device", "x.com/y=1"], "no x.com/y devices"),
    (["--policy", "tight"], 'unknown policy: "tight"'),
])
def test_bad_input_exits_2(tmp_path: Path, argv: list[str], message: str) -> None:
    """In this process (the messages; test_cli_flags.py runs one as a real process)."""
    spec = small_spec(tmp_path)
    out = in_process("run", "--machine", str(spec), "--state-dir", str(tmp_path / "s"), *argv,
                     "--", "true")
    assert out.returncode == 2 and message in out.stderr and out.stderr.count("\n") == 1, out.stderr


def test_missing_command(tmp_path: Path) -> None:
    out = cli("run", "--machine", str(small_spec(tmp_path)), "--state-dir", str(tmp_path / "s"))
    assert out.returncode == 2 and "missing command" in out.stderr


def test_ps_table(tmp_path: Path) -> None:
    spec = small_spec(tmp_path)
    state = tmp_path / "s"
    p = popen("run", "--machine", str(spec), "--state-dir", str(state), "--cpus", "2", "--gpus", "1",
              "--no-pin", "--", "sh", "-c", "echo up; exec sleep 600")  # SIGINT below ends it
    try:
        assert p.stdout is not None and p.stdout.readline().strip() == "up"
        out = cli("ps", "--state-dir", str(state))
        assert out.returncode == 0, out.stderr
        header, row = out.stdout.splitlines()[:2]
        assert header.split() == ["PID", "AGE", "NUMA", "CPUS", "MEMORY", "DEVICES", "COMMAND"]
        assert row.split()[0] == str(p.pid) and "1-2" in row and "nvidia.com/gpu=gpu0" in row
        assert row.endswith("sh -c echo up; exec sleep 600")
    finally:
        p.send_signal(signal.SIGINT)
        assert p.wait(30) == 128 + signal.SIGINT


def test_identity_parsing() -> None:
    from numalign.launcher import Identity
    from numalign.launcher.proc import proc_start_time, process_alive

    ident = Identity(123, 456)
    assert Identity.of_key(ident.key) == ident
    assert Identity.of_key("default/run-1-2") is None
    assert Identity.of_key("numalign-run/run-x-2") is None
    start = proc_start_time(os.getpid())
    assert start is not None and process_alive(os.getpid(), start)
    assert not process_alive(os.getpid(), start + 1)


COUNT_INT = (
    "import signal, sys, time\n"
    "n = 0\n"
    "def h(s, f):\n    global n; n += 1\n"
    "signal.signal(signal.SIGINT, h)\n"
    "print('ready', flush=True)\n"
    "end = time.monotonic() + 3\n"
    "while time.monotonic() < end: time.sleep(0.05)\n"
    "print('sigint', n, flush=True)\n"
    "sys.exit(5)\n"
)


def test_terminal_ctrl_c_reaches_the_child_once(tmp_path: Path) -> None:
    """Ctrl-C on a terminal signals the whole foreground group: the launcher must not add a
    second SIGINT (it forwards only signals sent to it, not the terminal's)."""
    import pty
    import select

    spec = small_spec(tmp_path)
    pid, fd = pty.fork()
    if pid == 0:  # pragma: no cover - the child execs
        os.execv(sys.executable, [sys.executable, "-m", "numalign.cli", "run", "--machine", str(spec),
                                  "--state-dir", str(tmp_path / "s"), "--no-pin", "--",
                                  sys.executable, "-c", COUNT_INT])
    buf = b""

    def read_until(token: bytes, limit: float = 60, since: bytes = b"") -> None:
        """Read until ``token`` appears (after the first ``since``, when given)."""
        nonlocal buf
        deadline = time.monotonic() + limit

        def seen() -> bool:
            at = buf.find(since)
            return at >= 0 and token in buf[at + len(since):]

        while not seen() and time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.5)
            if ready:
                try:
                    buf += os.read(fd, 1024)
                except OSError:
                    break

    try:
        read_until(b"ready")
        assert b"ready" in buf, buf
        os.write(fd, b"\x03")  # the terminal's interrupt character
        read_until(b"sigint ")
        read_until(b"\n", 10, since=b"sigint ")
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    assert b"sigint 1" in buf, buf
    assert os.WEXITSTATUS(status) == 5


def test_nodemask_keeps_the_kernel_inside_the_array() -> None:
    from numalign.launcher.pinning import _nodemask

    for nodes in ([0], [1], [62], [63], [64], [0, 255]):
        mask, maxnode = _nodemask(nodes)
        # the kernel reads maxnode - 1 bits: all within the array, every node included
        assert maxnode == 64 * len(mask) and max(nodes) < maxnode - 1
        assert {w * 64 + b for w in range(len(mask)) for b in range(64) if mask[w] >> b & 1} == set(nodes)


def test_cgroup_cpuset_detected_cleanly(tmp_path: Path) -> None:
    from numalign.launcher.pinning import make_cpuset

    none = make_cpuset("numalign-x", {1}, set(), root=tmp_path)
    assert none.path is None and "no cgroup v2" in none.note
    (tmp_path / "cgroup.controllers").write_text("cpuset cpu memory\n")
    own = Path("/proc/self/cgroup").read_text()
    if "0::/" not in own.splitlines():
        pytest.skip("this process's cgroup v2 line is not the root (0::/)")
    (tmp_path / "cgroup.subtree_control").write_text("cpuset\n")
    used = make_cpuset("numalign-x", {1, 2}, {0}, root=tmp_path)
    assert used.path == tmp_path / "numalign-x"
    assert (used.path / "cpuset.cpus").read_text() == "1,2"
    assert (used.path / "cpuset.mems").read_text() == "0"
    again = make_cpuset("numalign-x", {1}, set(), root=tmp_path)  # exists: not used, no raise
    assert again.path is None and again.note.startswith("not used")
