"""The cyclic garbage collector paused while a bulk of long-lived objects is built.

Building a cluster's node engines, reading a trace into pods, or drawing a report's figures
allocates many container objects; the interpreter then runs collections of every generation,
and each full (generation 2) collection walks every object the process tracks - after a
replay, hundreds of thousands - looking for cycles that these phases do not make (engines and
pods hold none; the figures' few cycles are collected by the next collection after the pause).
:func:`collector_paused` turns automatic collections off for the block and back on after it,
if they were on: nested blocks leave them as the outermost found them (in threads, a block
ending early turns them back on under another one, which only costs it time). Reference
counting frees objects as usual meanwhile.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """Automatic cyclic garbage collection off inside the block (see the module notes)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
