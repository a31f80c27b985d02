"""Scaffolding shared by the extender's source tests: waiting for a condition, counting the
engines built, and running the API source on a thread."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO

import pytest

from numalign.kube.extender import engines as engines_module
from numalign.kube.extender.core import ExtenderCore
from numalign.kube.extender.sources import ApiSource, run_source
from numalign.node.admission import Node


def wait(cond: Callable[[], bool], seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.02)
    raise AssertionError("condition not reached")


def count_engine_builds(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the NRT objects the extender builds engines from, in order."""
    builds: list[str] = []
    real = engines_module.engine_from_nrt

    def counting(obj: Any) -> Node:
        builds.append(obj["metadata"]["name"])
        return real(obj)

    monkeypatch.setattr(engines_module, "engine_from_nrt", counting)
    return builds


@contextmanager
def api_source_running(core: ExtenderCore, client: Any, log: TextIO) -> Iterator[threading.Thread]:
    """The API source feeding ``core`` on a thread (watch timeout 2 s), stopped on exit."""
    stop = threading.Event()
    t = threading.Thread(target=run_source, args=(core, ApiSource(client, log=log), stop, 0.05),
                         kwargs={"log": log, "watch_seconds": 2})
    t.start()
    try:
        yield t
    finally:
        stop.set()
        t.join(10)
