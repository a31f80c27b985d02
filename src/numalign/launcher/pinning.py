"""OS-level pinning for ``numalign run``: CPU affinity, memory policy, cgroup v2 cpusets,
GPU visibility variables, and a fork/exec/wait loop that forwards signals.

Nothing here knows about NUMA alignment decisions; :mod:`numalign.launcher.plan` decides,
this module acts. Linux only (``/proc``, ``sched_setaffinity``, ``set_mempolicy``).

* **Memory**: ``set_mempolicy(MPOL_BIND, nodes)`` through the raw syscall (``ctypes``); the
  policy survives ``execve``. When the syscall is unusable, ``numactl --membind`` wraps the
  command; when neither is there, the caller warns.
* **cgroup v2 cpuset** (optional): a child cgroup ``numalign-<pid>`` under the launcher's own
  cgroup, when the unified hierarchy is mounted, ``cpuset`` can be enabled there and the
  directory is writable. Any failure means "not used", with the reason.
* **Child**: forked by hand so that the signal mask, ``PR_SET_PDEATHSIG`` (the pinned process
  never outlives its launcher, so reclaiming a dead launcher's allocation never hands out CPUs
  still in use), affinity and memory policy are set between ``fork`` and ``execve``.
* **GPUs**: ``CUDA_VISIBLE_DEVICES`` + ``NVIDIA_VISIBLE_DEVICES`` (with
  ``CUDA_DEVICE_ORDER=PCI_BUS_ID``) or ``ROCR_VISIBLE_DEVICES``: indices of the allocated
  devices among the machine's devices of that resource in PCI bus order.
* **Waiting**: the forwarded signals and ``SIGCHLD`` are blocked and taken with
  ``sigtimedwait``, so no signal is lost between fork and wait. Signals the kernel generated
  for the terminal's process group (``si_code == SI_KERNEL``: Ctrl-C, Ctrl-\\) already reached
  the child, which shares the group; they are not sent twice.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import platform
import shutil
import signal
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from numalign.inputs.cpulist import format_cpulist, parse_kernel_cpulist

if TYPE_CHECKING:
    from numalign.machine.model import Machine

FORWARDED: tuple[signal.Signals, ...] = (
    signal.SIGINT,
    signal.SIGTERM,
    signal.SIGHUP,
    signal.SIGQUIT,
    signal.SIGUSR1,
    signal.SIGUSR2,
)
SI_KERNEL = 0x80
MPOL_DEFAULT = 0
MPOL_BIND = 2
PR_SET_PDEATHSIG = 1

#: set_mempolicy(2) syscall numbers by ``platform.machine()``
_SET_MEMPOLICY = {
    "x86_64": 238,
    "amd64": 238,
    "aarch64": 237,
    "arm64": 237,
    "riscv64": 237,
    "loongarch64": 237,
    "i386": 276,
    "i686": 276,
    "ppc64": 261,
    "ppc64le": 261,
    "s390x": 270,
    "armv7l": 321,
}


# ---------------------------------------------------------------------------------- CPUs


def usable_cpus() -> frozenset[int]:
    """CPUs this process may run on (what a child may be pinned to)."""
    return frozenset(os.sched_getaffinity(0))


def _status_list(key: str) -> frozenset[int] | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return parse_kernel_cpulist(line.split(":", 1)[1], f"/proc/self/status {key}")
    except OSError:
        return None
    return None


def usable_mems() -> frozenset[int] | None:
    """NUMA nodes this process may allocate on (``Mems_allowed_list``); None if unknown."""
    return _status_list("Mems_allowed_list")


# -------------------------------------------------------------------------------- memory


def _libc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def _nodemask(nodes: Iterable[int]) -> tuple[ctypes.Array[ctypes.c_ulong], int]:
    ids = sorted(set(nodes))
    top = ids[-1] if ids else 0
    # the kernel reads maxnode - 1 bits: keep them inside the array
    words = (top + 1) // 64 + 1
    arr = (ctypes.c_ulong * words)()
    for n in ids:
        arr[n // 64] |= 1 << (n % 64)
    return arr, words * 64


def set_mempolicy(mode: int, nodes: Iterable[int]) -> str | None:
    """Set this process's memory policy; None on success, else why it failed."""
    nr = _SET_MEMPOLICY.get(platform.machine().lower())
    libc = _libc()
    if nr is None or libc is None:
        return f"set_mempolicy: no syscall number known for {platform.machine()}"
    if mode == MPOL_DEFAULT:
        rc = libc.syscall(ctypes.c_long(nr), ctypes.c_int(mode), None, ctypes.c_ulong(0))
    else:
        mask, maxnode = _nodemask(nodes)
        rc = libc.syscall(ctypes.c_long(nr), ctypes.c_int(mode), mask, ctypes.c_ulong(maxnode))
    if rc != 0:
        err = ctypes.get_errno()
        return f"set_mempolicy: {os.strerror(err)}"
    return None


def mempolicy_problem() -> str | None:
    """Can this process set a memory policy? Probed with MPOL_DEFAULT (no effect)."""
    return set_mempolicy(MPOL_DEFAULT, ())


def numactl() -> str | None:
    return shutil.which("numactl")


# ---------------------------------------------------------------------------------- cgroup


@dataclass(frozen=True)
class Cgroup:
    path: Path | None
    note: str  # "used: <path>" or why not


def _own_cgroup_v2(root: Path) -> Path | None:
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            if line.startswith("0::"):
                return root / line[3:].strip().lstrip("/")
    except OSError:
        return None
    return None


def make_cpuset(name: str, cpus: Iterable[int], mems: Iterable[int],
                root: Path = Path("/sys/fs/cgroup")) -> Cgroup:
    """Create a cgroup v2 child with a cpuset, or say why not (never raises)."""
    if not (root / "cgroup.controllers").exists():
        return Cgroup(None, "not used: no cgroup v2 (unified) hierarchy")
    own = _own_cgroup_v2(root)
    if own is None or not own.is_dir():
        return Cgroup(None, "not used: own cgroup v2 not found")
    try:
        enabled = (own / "cgroup.subtree_control").read_text().split()
        if "cpuset" not in enabled:
            (own / "cgroup.subtree_control").write_text("+cpuset")
        child = own / name
        child.mkdir()
    except OSError as e:
        return Cgroup(None, f"not used: {own}: {e.strerror}")
    try:
        (child / "cpuset.cpus").write_text(",".join(map(str, sorted(cpus))))
        mem_list = sorted(mems)
        if mem_list:
            (child / "cpuset.mems").write_text(",".join(map(str, mem_list)))
    except OSError as e:
        remove_cgroup(child)
        return Cgroup(None, f"not used: {child}: {e.strerror}")
    return Cgroup(child, f"used: {child}")


def remove_cgroup(path: Path) -> bool:
    try:
        path.rmdir()
        return True
    except OSError:
        return False


# ------------------------------------------------------------------------------------ GPUs


def device_env(machine: Machine, devices: Mapping[str, Sequence[str]]) -> dict[str, str]:
    """GPU visibility variables: indices among the resource's devices in PCI bus order."""
    env: dict[str, str] = {}
    for res, ids in devices.items():
        if res not in ("nvidia.com/gpu", "amd.com/gpu") or not ids:
            continue
        order = sorted(enumerate(machine.devices_of(res)),
                       key=lambda p: (p[1].bus_id is None, p[1].bus_id or "", p[0]))
        index = {d.id: i for i, (_, d) in enumerate(order)}
        visible = ",".join(str(i) for i in sorted(index[d] for d in ids if d in index))
        if res == "nvidia.com/gpu":
            env.update(CUDA_DEVICE_ORDER="PCI_BUS_ID", CUDA_VISIBLE_DEVICES=visible,
                       NVIDIA_VISIBLE_DEVICES=visible)
        else:
            env["ROCR_VISIBLE_DEVICES"] = visible
    return env


# ---------------------------------------------------------------------------- the child


@dataclass(frozen=True)
class Pinning:
    """What to apply in the child before ``execve``."""

    cpus: frozenset[int] | None = None
    mem_nodes: frozenset[int] | None = None  # MPOL_BIND through the syscall
    cgroup: Path | None = None


def _child(argv: Sequence[str], env: Mapping[str, str], pin: Pinning,
           launcher: int, old_mask: Iterable[int]) -> None:
    """Runs in the forked child; never returns."""
    code = 127
    try:
        for s in (signal.SIGPIPE, signal.SIGXFSZ):
            signal.signal(s, signal.SIG_DFL)  # Python ignores them; exec would keep that
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
        libc = _libc()
        if libc is not None:
            libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != launcher:  # the launcher died before prctl
            os._exit(128 + signal.SIGKILL)
        if pin.cgroup is not None:
            try:
                (pin.cgroup / "cgroup.procs").write_text(str(os.getpid()))
            except OSError as e:
                _say(f"warning: cgroup cpuset not applied: {e.strerror}")
        if pin.cpus is not None:
            os.sched_setaffinity(0, pin.cpus)
        if pin.mem_nodes is not None:
            problem = set_mempolicy(MPOL_BIND, pin.mem_nodes)
            if problem is not None:
                _say(f"warning: memory not bound: {problem}")
        try:
            os.execvpe(argv[0], list(argv), dict(env))
        except OSError as e:
            code = 127 if e.errno in (errno.ENOENT, errno.ENOTDIR) else 126
            _say(f"{argv[0]}: {e.strerror}")
    except BaseException as e:  # nothing may escape a forked child
        _say(f"cannot start {argv[0]}: {e}")
    os._exit(code)


def _say(msg: str) -> None:
    with contextlib.suppress(OSError):
        os.write(2, f"numalign run: {msg}\n".encode())


def exit_status(status: int) -> int:
    """A wait status as a shell reports it: the exit code, or 128 + the signal."""
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    if os.WIFEXITED(status):
        return os.WEXITSTATUS(status)
    return 1


def run_pinned(argv: Sequence[str], env: Mapping[str, str], pin: Pinning) -> int:
    """Fork, pin, exec ``argv``; forward signals until it exits; its shell-style status."""
    blocked = {*FORWARDED, signal.SIGCHLD}
    old = signal.pthread_sigmask(signal.SIG_BLOCK, blocked)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
        me = os.getpid()
        pid = os.fork()
        if pid == 0:
            _child(argv, env, pin, me, old)
        return _wait_forwarding(pid)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _wait_forwarding(pid: int) -> int:
    wanted = [*FORWARDED, signal.SIGCHLD]
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return exit_status(status)
        info = signal.sigtimedwait(wanted, 1.0)
        if info is None or info.si_signo == signal.SIGCHLD:
            continue
        if info.si_code == SI_KERNEL:
            continue  # a terminal signal: the child's process group got it already
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, info.si_signo)


def run_bound(argv: Sequence[str], env: Mapping[str, str], *, cpus: frozenset[int] | None,
              memory_nodes: Sequence[int], bind: str, cgroup: str) -> int:
    """Run ``argv`` on ``cpus`` (None = not pinned) with its memory bound to ``memory_nodes``
    by ``bind`` (``syscall``: MPOL_BIND in the child; ``numactl``: ``numactl --membind``
    wraps the command; ``none``), in a cpuset cgroup named ``cgroup`` when one can be made
    (removed afterwards); its shell-style exit status."""
    mem = frozenset(memory_nodes) if bind == "syscall" else None
    if bind == "numactl":
        argv = [numactl() or "numactl", f"--membind={format_cpulist(memory_nodes)}", "--", *argv]
    path = None
    if cpus is not None:
        path = make_cpuset(cgroup, cpus, memory_nodes if mem else ()).path
    try:
        return run_pinned(argv, env, Pinning(cpus, mem, path))
    finally:
        if path is not None:
            remove_cgroup(path)
