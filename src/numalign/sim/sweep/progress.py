"""The sweep's progress on stderr: cells done, running, failed, and the time left.

On a terminal, one line rewritten in place (at most a few times a second); anywhere else (a
log file, CI), one plain line per finished or failed cell and no carriage return. The ETA is
the time the remaining cells take at the rate cells finished so far in this run.
"""

from __future__ import annotations

import threading
import time
from typing import TextIO


def format_duration(seconds: float) -> str:
    """``42s``, ``3m05s``, ``2h07m``."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


class Progress:
    """Counts cells as the sweep runs and prints them (thread-safe: Dask's event handler
    reports starts from its own thread)."""

    def __init__(self, total: int, *, resumed: int = 0, stream: TextIO, tty: bool,
                 enabled: bool = True) -> None:
        self.total = total
        self.resumed = resumed
        self.stream = stream
        self.tty = tty
        self.enabled = enabled
        self.done = 0
        self.failed = 0
        self.running: set[str] = set()
        self.start = time.monotonic()
        self._lock = threading.Lock()
        self._last_draw = 0.0

    def restart_clock(self) -> None:
        """The ETA counts from now (after the cluster started)."""
        with self._lock:
            self.start = time.monotonic()

    def eta(self) -> str:
        finished = self.done + self.failed
        left = self.total - self.resumed - finished
        if left <= 0:
            return "0s"
        if finished == 0:
            return "?"
        rate = finished / max(1e-9, time.monotonic() - self.start)
        return format_duration(left / rate)

    def line(self) -> str:
        finished = self.resumed + self.done + self.failed
        parts = [f"cells {finished}/{self.total} done"]
        if self.resumed:
            parts[0] += f" ({self.resumed} from earlier runs)"
        parts += [f"{len(self.running)} running", f"{self.failed} failed", f"ETA {self.eta()}"]
        return ", ".join(parts)

    def started(self, cell_id: str) -> None:
        with self._lock:
            self.running.add(cell_id)
            self._draw(force=False)

    def finished(self, cell_id: str, *, ok: bool, note: str = "") -> None:
        with self._lock:
            self.running.discard(cell_id)
            if ok:
                self.done += 1
            else:
                self.failed += 1
            if self.enabled and not self.tty:
                state = "done" if ok else "FAILED"
                self.stream.write(f"{state} {cell_id}{' ' + note if note else ''}; "
                                  f"{self.line()}\n")
                self.stream.flush()
            self._draw(force=True)

    def message(self, text: str) -> None:
        """A line of its own (the progress line is redrawn under it on a terminal)."""
        with self._lock:
            if not self.enabled:
                return
            if self.tty:
                self.stream.write("\r\x1b[K")
            self.stream.write(text + "\n")
            self._draw(force=True)

    def close(self) -> None:
        with self._lock:
            if self.enabled and self.tty:
                self.stream.write("\r\x1b[K" + self.line() + "\n")
                self.stream.flush()
            self.enabled = False

    def _draw(self, *, force: bool) -> None:
        if not (self.enabled and self.tty):
            return
        now = time.monotonic()
        if not force and now - self._last_draw < 0.25:
            return
        self._last_draw = now
        self.stream.write("\r\x1b[K  " + self.line())
        self.stream.flush()
