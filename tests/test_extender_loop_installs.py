"""Built node updates are installed on the HTTP loop's thread (``HttpLoop.call_soon``), so the
loop never waits for the interpreter lock behind another thread doing that work; when the
loop is not running the work runs where it was handed over."""

from __future__ import annotations

import io
import threading
from typing import Any

from numalign.kube.extender import ExtenderCore, ExtenderServer, serve_in_thread
from numalign.kube.extender.builder import ProcessBuilder
from numalign.kube.extender.http_loop import HttpLoop
from test_extender_concurrency import pod, reference, version


class _NoApp:
    pass


def _served_core(builder: ProcessBuilder) -> tuple[ExtenderCore, ExtenderServer]:
    """A core with nodes a and b (version 3) building in ``builder``, served on a loop."""
    builder.start().result(120)
    core = ExtenderCore(log=io.StringIO(), builder=builder)
    core.set_nodes({"a": version("a", 3), "b": version("b", 3)})
    return core, serve_in_thread(core)


def _stop(server: ExtenderServer | None, builder: ProcessBuilder) -> None:
    if server is not None:
        server.shutdown()
        server.server_close()
    builder.close()


def test_call_soon_runs_on_the_loop_thread_in_order_and_survives_errors() -> None:
    loop = HttpLoop(("127.0.0.1", 0), _NoApp())  # type: ignore[arg-type]
    ran: list[tuple[int, str]] = []
    done = threading.Event()
    # not serving: runs now, on this thread
    loop.call_soon(lambda: ran.append((0, threading.current_thread().name)))
    assert ran == [(0, threading.current_thread().name)]
    t = threading.Thread(target=loop.serve_forever, name="the-loop", daemon=True)
    t.start()
    assert loop.wait_serving(5)

    def boom() -> None:
        raise RuntimeError("a bug in handed-over work")

    loop.call_soon(boom)
    for i in range(1, 6):
        loop.call_soon(lambda i=i: ran.append((i, threading.current_thread().name)))
    loop.call_soon(done.set)
    assert done.wait(5)
    assert ran[1:] == [(i, "the-loop") for i in range(1, 6)]
    loop.shutdown()
    loop.server_close()
    t.join(5)
    loop.call_soon(lambda: ran.append((9, threading.current_thread().name)))  # stopped: inline
    assert ran[-1] == (9, threading.current_thread().name)


def test_built_updates_are_installed_on_the_server_loop() -> None:
    ref = reference()
    cpu = next(c for c in ("1", "2", "3", "4") if ref[(0, c)] != ref[(3, c)])
    builder = ProcessBuilder()
    server = None
    try:
        core, server = _served_core(builder)
        assert core.install_on == server.call_soon
        threads: list[str] = []
        real = core._finish

        def finish(*args: Any) -> bool:
            threads.append(threading.current_thread().name)
            return real(*args)

        core._finish = finish  # type: ignore[method-assign]
        futures = [core.update_node_async("a", version("a", v)) for v in (1, 2, 0)]
        assert [f.result(120) for f in futures][-1] is True
        assert threads and set(threads) == {"numalign-extender-loop"}
        assert ("a" in core.filter(pod("x", cpu), ["a", "b"])[0]) == ref[(0, cpu)]
        server.shutdown()
        server.server_close()
        server = None
        assert core.install_on is None
        threads.clear()
        assert core.update_node_async("a", version("a", 3)).result(120) is True
        assert threads and "numalign-extender-loop" not in threads  # no loop: where it ends
    finally:
        _stop(server, builder)


def test_updates_prepared_on_the_loop_keep_the_node_order() -> None:
    """With the loop preparing updates, an update handed over before a removal is void, an
    unchanged object builds nothing, and a later update supersedes an earlier one."""
    builder = ProcessBuilder()
    server = None
    try:
        core, server = _served_core(builder)
        built = core.engines_built
        assert core.update_node_async("b", version("b", 3)).result(120) is True
        assert core.engines_built == built  # unchanged: no build
        gate = threading.Event()
        server.call_soon(lambda: gate.wait(10))  # the loop is busy until the gate opens
        pending = core.update_node_async("a", version("a", 1))
        core.remove_node("a")
        newer = [core.update_node_async("b", version("b", v)) for v in (1, 2)]
        gate.set()
        assert pending.result(120) is False and "a" not in core.nodes
        assert [f.result(120) for f in newer][-1] is True
        from numalign.kube.extender.core import content_digest

        assert core.nodes["b"].content == content_digest(version("b", 2))
    finally:
        _stop(server, builder)
