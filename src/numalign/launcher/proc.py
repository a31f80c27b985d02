"""Process identity from ``/proc`` (Linux): a process is (pid, start time in clock ticks
since boot, field 22 of ``/proc/<pid>/stat``). A pid that is missing, a zombie, or has
another start time is gone."""

from __future__ import annotations

import os
from pathlib import Path


def proc_start_time(pid: int, proc: Path = Path("/proc")) -> int | None:
    """Start time (clock ticks since boot) of a live process; None if gone or a zombie."""
    try:
        raw = (proc / str(pid) / "stat").read_text()
    except (OSError, ValueError):
        return None
    rest = raw[raw.rfind(")") + 2 :].split()
    # rest[0] is field 3 (state); field 22 (starttime) is rest[19]
    if len(rest) < 20 or rest[0] in ("Z", "X", "x"):
        return None
    try:
        return int(rest[19])
    except ValueError:
        return None


def process_alive(pid: int, start: int) -> bool:
    """Is the process ``pid`` that started at ``start`` still running?"""
    return pid > 0 and proc_start_time(pid) == start


def boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def uptime_seconds() -> float | None:
    try:
        return float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def process_age(start_ticks: int) -> float | None:
    """Seconds since a process started, from its start time in clock ticks."""
    up = uptime_seconds()
    if up is None:
        return None
    return max(0.0, up - start_ticks / os.sysconf("SC_CLK_TCK"))
