"""Following a directory of NRT files: its changes come as events, not from rescans.

:func:`run_directory` loads the directory once (:meth:`DirSource.scan`, the builds in
parallel), then applies changes as the kernel reports them: inotify on Linux (FSEvents,
kqueue or ReadDirectoryChangesW elsewhere) through `watchfiles <https://watchfiles.helpmanual.io>`_,
whose watcher thread gathers the events in Rust without the interpreter lock and hands over
the changed paths in batches (at most :data:`DEBOUNCE_MS` apart). Only the files an event
names are looked at (:meth:`DirSource.apply`), so 50 rewrites a second in a directory of
5,000 files cost 50 ``stat`` calls and 50 reads a second, not 250,000 ``stat`` calls.

Three things events alone would miss are covered without rescanning on a period:

* changes made before the watch was in place: one full key check (``stat`` of every file,
  reads of the changed ones only) right after each watch starts;
* a lost event - the kernel drops events when its queue overflows
  (``/proc/sys/fs/inotify/max_queued_events``) and watchfiles does not report it: an
  *audit* checks the keys of a few files per second, round robin, so every file is checked
  again within :data:`AUDIT_SECONDS` (5,000 files: about 80 ``stat`` calls a second);
* the atomic swap of a Kubernetes volume (a ConfigMap's or a projected volume's files are
  symlinks through ``..data``, which the kubelet's atomic writer replaces): an event on a
  name starting with ``..`` leads to one full key check.

Where no watch can be had (watchfiles not installed, the inotify limits reached, a file
system without events), every file's key is checked every ``interval`` seconds instead, as
before (the unchanged files are still not read), and the watch is tried again once the
directory reads.
"""

from __future__ import annotations

import math
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

from numalign.kube.extender.core import ExtenderCore
from numalign.kube.extender.dirsource import DirSource, is_nrt_file

#: every known file's key is checked again within this many seconds (see the module notes)
AUDIT_SECONDS = 60.0
#: events are gathered for at most this long before they are applied (milliseconds); a
#: batch also ends after :data:`STEP_MS` without a new event
DEBOUNCE_MS = 100
STEP_MS = 20
#: the watch wakes this often without events (milliseconds): the audit's tick
TICK_MS = 1000


class WatchUnavailable(Exception):
    """No change events for this directory (the reason is the message); ``permanent``: not
    worth trying again (watchfiles is not installed)."""

    def __init__(self, message: str, permanent: bool = False) -> None:
        super().__init__(message)
        self.permanent = permanent


def changes(source: DirSource, stop: threading.Event) -> Iterator[set[str] | None]:
    """Batches of changed NRT file names as the kernel reports them; ``None``: check every
    file (the watch just started, or a ``..`` name changed); an empty set: a tick without
    events. :class:`WatchUnavailable` when there is no watch (or it ends with an error)."""
    try:
        import watchfiles
    except ImportError:
        raise WatchUnavailable("watchfiles is not installed (pip install 'numalign[kube]')",
                               permanent=True) from None
    try:
        stream = watchfiles.watch(
            source.path, watch_filter=None, debounce=DEBOUNCE_MS, step=STEP_MS,
            stop_event=stop, rust_timeout=TICK_MS, yield_on_timeout=True, recursive=False,
            raise_interrupt=False)
        first = True
        for batch in stream:
            if first:
                first = False
                yield None  # the watch is in place: what changed before it is found now
            names: set[str] = set()
            full = False
            for _, path in batch:
                name = path.rsplit("/", 1)[-1].rsplit("\\", 1)[-1]
                if name.startswith(".."):
                    full = True
                elif is_nrt_file(name):
                    names.add(name)
            yield None if full else names
    except (OSError, RuntimeError) as e:  # watchfiles' errors derive from RuntimeError
        raise WatchUnavailable(str(e).splitlines()[0] if str(e) else type(e).__name__) \
            from None


def load(core: ExtenderCore, source: DirSource, stop: threading.Event, interval: float,
         log: Any) -> None:
    """The initial list: every file read, every engine built (in parallel with a worker
    pool), then the core is ready; retried every ``interval`` seconds until it works."""
    while not stop.is_set():
        try:
            core.set_nodes(source.scan())
            return
        except Exception as e:  # e.g. the directory is not there yet
            print(f"numalign extender: node source failed: {type(e).__name__}: {e}", file=log)
            stop.wait(interval)


def follow(core: ExtenderCore, source: DirSource, stop: threading.Event, interval: float,
           log: Any) -> None:
    """Apply the directory's changes until ``stop`` (see the module notes)."""
    warned = False
    while not stop.is_set():
        try:
            _follow_events(core, source, stop, log)
            return
        except WatchUnavailable as e:
            if not warned:
                print(f"numalign extender: cannot watch {source.path} for changes ({e}); "
                      f"checking every file's size and times every {interval:g} s instead",
                      file=log)
                warned = True
            permanent = e.permanent
        # every file's key every interval; once the directory reads, the watch is tried again
        while not stop.wait(interval):
            try:
                source.poll(core)
            except Exception as e:
                print(f"numalign extender: node source failed: {type(e).__name__}: {e}",
                      file=log)
                continue
            if not permanent:
                break


def _follow_events(core: ExtenderCore, source: DirSource, stop: threading.Event,
                   log: Any) -> None:
    last_audit = time.monotonic()
    owed = 0.0
    for batch in changes(source, stop):
        try:
            if batch is None:
                source.poll(core)
            elif batch:
                source.apply(core, batch)
            now = time.monotonic()
            if now - last_audit >= TICK_MS / 1000:
                owed += len(source.known) * (now - last_audit) / AUDIT_SECONDS
                last_audit = now
                count = math.floor(owed)
                owed -= count
                source.audit(core, count)
        except Exception as e:  # keep the last nodes; the next event or audit tries again
            print(f"numalign extender: node source failed: {type(e).__name__}: {e}", file=log)


def run_directory(core: ExtenderCore, source: DirSource, stop: threading.Event,
                  interval: float = 1.0, log: Any = sys.stderr) -> None:
    """Keep ``core``'s nodes in sync with the directory until ``stop``: :func:`load`, then
    :func:`follow`."""
    load(core, source, stop, interval, log)
    follow(core, source, stop, interval, log)
