"""Keeping the cyclic garbage collector off the extender's long-lived objects.

A serving extender holds every node's engine: at 5,000 nodes about a million objects the
cyclic garbage collector tracks. Left alone, it walks all of them in each full (generation 2)
collection - about half a second with the interpreter lock held, so every ``/filter`` in
flight waits that long - and node updates keep promoting new engines into that generation,
so full collections keep coming. The engines, snapshots and decision tables hold no
reference cycles: reference counting frees them when they are replaced.

:class:`FreezePolicy` moves the live objects into the collector's permanent generation
(``gc.freeze``), where collections do not look: once after the initial list of nodes, and
again after each node update is published (and after each poll of a directory source), each
time after one full collection - which then only walks what was made since the last freeze
(an update's engine: a few hundred objects; well under a millisecond). What requests leave
behind between two freezes is bounded by the extender's caches (pods remembered for
``/bind``, parsed pod templates, shape ids), so the collections the interpreter starts on its
own stay small too. Every object frozen was reachable when it was frozen (the collection just
before removed the rest), and frozen objects are still freed by reference counting. What the
policy gives up: a reference cycle formed among objects *after* they were frozen is never
collected. The extender's long-lived objects (engines, snapshots, pods, futures of finished
updates) form none; a test holds it (``tests/test_extender_gc.py``).

The policy is the serving process's (``extender serve``): it acts on the whole interpreter,
so an :class:`~numalign.kube.extender.core.ExtenderCore` used as a library does not freeze
anything unless given one.
"""

from __future__ import annotations

import gc
import threading
import time


class FreezePolicy:
    """When to collect and freeze (see the module notes). Thread-safe; each call costs the
    objects made since the previous freeze."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: freezes done, and the wall seconds they took (collection included)
        self.freezes = 0
        self.seconds = 0.0
        self._settled = False

    def freeze(self) -> None:
        """One full collection (of the objects not yet frozen), then freeze what is left."""
        with self._lock:
            t0 = time.perf_counter()
            gc.collect()
            gc.freeze()
            self.freezes += 1
            self.seconds += time.perf_counter() - t0

    def settled(self) -> None:
        """The initial node set is in."""
        self._settled = True
        self.freeze()

    def published(self) -> None:
        """A node update was published (before the initial node set is in, nothing: the
        engines of the initial list are frozen together once, by :meth:`settled`, rather
        than one collection per node)."""
        if self._settled:
            self.freeze()
