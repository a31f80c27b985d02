"""One costly request never stalls the others (issue 23: one /filter with a pod asking for
1,000 of 2,000 GPUs per zone took 11.4 s, and every other /filter timed out meanwhile).

The costly decisions are made to block on an event (a decision that "never ends"), so the tests
assert orderings and outcomes, not speeds: the first-time decisions on large engines are made
on the evaluator's thread, never on the caller's (the HTTP loop's); another client's /filter is
answered while the costly one waits; at its deadline the costly request is answered with the
undecided nodes failed; the decision that was running is kept for the next attempt.
"""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any

import pytest

from extender_helpers import wait
from numalign.kube.extender import ExtenderCore, bounded, serve_in_thread
from numalign.kube.extender.bounded import INLINE_SIZE, Evaluator, engine_size, filter_bounded
from numalign.kube.extender.core import NOT_EVALUATED
from numalign.node.admission import Node
from numalign.pods import Pod, parse_pods

GPU = "nvidia.com/gpu"


def nrt(name: str, gpus_per_zone: int, cpus: int = 4) -> dict[str, Any]:
    zones = []
    for z in (0, 1):
        res = [{"name": "cpu", "capacity": str(cpus), "allocatable": str(cpus), "available": str(cpus)},
               {"name": "memory", "capacity": "64Gi", "allocatable": "64Gi", "available": "64Gi"},
               {"name": GPU, "capacity": str(gpus_per_zone), "allocatable": str(gpus_per_zone),
                "available": str(gpus_per_zone)}]
        zones.append({"name": f"node-{z}", "type": "Node", "resources": res})
    return {"apiVersion": "topology.node.k8s.io/v1alpha2", "kind": "NodeResourceTopology",
            "metadata": {"name": name},
            "attributes": [{"name": "topologyManagerPolicy", "value": "single-numa-node"},
                           {"name": "topologyManagerScope", "value": "container"}],
            "zones": zones}


def gpu_pod(name: str, gpus: int) -> Pod:
    return parse_pods({"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": name, "namespace": "ns", "uid": f"u-{name}"},
                       "spec": {"containers": [{"name": "c", "resources": {
                           "limits": {"cpu": "1", "memory": "1Gi", GPU: str(gpus)}}}]}})[0]


class Gate:
    """Wraps the core's decision: decisions on large engines wait for ``release`` and record
    the thread they ran on."""

    def __init__(self, core: ExtenderCore) -> None:
        self.release = threading.Event()
        self.started = threading.Event()
        self.threads: list[tuple[str, str]] = []  # (node machine name, thread name)
        real = core._decide

        def decide(node: Node, pod: Pod) -> Any:
            self.threads.append((node.machine.name, threading.current_thread().name))
            if len(node.machine.devices) + len(node.machine.cpus) > INLINE_SIZE:
                self.started.set()
                assert self.release.wait(30)
            return real(node, pod)

        core._decide = decide  # type: ignore[method-assign]


@pytest.fixture
def core() -> Iterator[ExtenderCore]:
    c = ExtenderCore()
    c.set_nodes({"big-0": nrt("big-0", 300), "big-1": nrt("big-1", 301), "big-2": nrt("big-2", 302),
                 "small-0": nrt("small-0", 2), "small-1": nrt("small-1", 3)})
    assert not c.broken
    yield c


def test_large_engines_are_decided_off_the_callers_thread(core: ExtenderCore,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bounded, "INLINE_SLICE", 60.0)  # small engines: all on the caller's
    assert engine_size(core.nodes["big-0"]) > INLINE_SIZE >= engine_size(core.nodes["small-0"])
    gate = Gate(core)
    gate.release.set()
    evaluator = Evaluator(core, remote=False)
    try:
        got = filter_bounded(core, evaluator, gpu_pod("p", 2),
                             ["small-0", "big-0", "small-1", "big-1"], core.shape_id(gpu_pod("p", 2)))
        assert isinstance(got, Future)
        passed, failed = got.result(timeout=30)
    finally:
        evaluator.close()
    assert passed == ["small-0", "big-0", "small-1", "big-1"] and not failed
    where = dict(gate.threads)
    assert where["big-0"] == where["big-1"] == "numalign-evaluator"
    assert where["small-0"] == where["small-1"] == threading.current_thread().name


def test_the_costly_request_is_answered_at_its_deadline(core: ExtenderCore,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bounded, "INLINE_SLICE", 60.0)
    gate = Gate(core)
    evaluator = Evaluator(core, remote=False)
    pod = gpu_pod("costly", 250)
    shape = core.shape_id(pod)
    try:
        got = filter_bounded(core, evaluator, pod, ["big-0", "big-1", "big-2", "small-0"], shape,
                             budget=0.2)
        assert isinstance(got, Future)
        passed, failed = got.result(timeout=30)  # the first big decision is still blocked
        assert not gate.release.is_set()
        assert passed == []
        assert failed["small-0"] != NOT_EVALUATED  # decided on the caller's thread: no room
        assert {n for n, why in failed.items() if why == NOT_EVALUATED} == {"big-0", "big-1", "big-2"}
        assert evaluator.expired == 1
        gate.release.set()  # the running decision ends and is kept; the others were dropped
        wait(lambda: evaluator.evaluated > 0)
        assert evaluator.evaluated == 1
        assert core.nodes["big-0"].cache.get(shape) is not None
        assert core.nodes["big-1"].cache.get(shape) is None
    finally:
        gate.release.set()
        evaluator.close()


def _post(port: int, verb: str, body: dict[str, Any]) -> dict[str, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("POST", f"/{verb}", json.dumps(body), {"Content-Type": "application/json"})
        resp = conn.getresponse()
        assert resp.status == 200
        out: dict[str, Any] = json.loads(resp.read())
        return out
    finally:
        conn.close()


def _args(name: str, gpus: int, nodes: list[str]) -> dict[str, Any]:
    return {"Pod": {"metadata": {"name": name, "namespace": "ns", "uid": f"u-{name}"},
                    "spec": {"containers": [{"name": "c", "resources": {
                        "limits": {"cpu": "1", "memory": "1Gi", GPU: str(gpus)}}}]}},
            "NodeNames": nodes}


def test_other_requests_are_answered_while_a_costly_filter_waits(core: ExtenderCore) -> None:
    gate = Gate(core)
    server = serve_in_thread(core, request_budget=60.0, evaluate_in_process=True)
    port = server.server_address[1]
    costly: dict[str, Any] = {}
    try:
        t = threading.Thread(target=lambda: costly.update(
            _post(port, "filter", _args("costly", 250, ["big-0", "big-1", "big-2"]))))
        t.start()
        assert gate.started.wait(30)  # its first decision runs (and blocks) on the evaluator
        for k in range(20):  # normal pods on small nodes: answered meanwhile
            got = _post(port, "filter", _args(f"normal-{k}", 1, ["small-0", "small-1"]))
            assert got["NodeNames"] == ["small-0", "small-1"], got
            got = _post(port, "prioritize", _args(f"normal-{k}", 1, ["small-0", "small-1"]))
            assert [h["Host"] for h in got] == ["small-0", "small-1"]
        assert t.is_alive() and not costly  # the costly one still waits
        gate.release.set()
        t.join(30)
        assert costly["NodeNames"] == ["big-0", "big-1", "big-2"], costly
    finally:
        gate.release.set()
        server.shutdown()
        server.server_close()


def test_cold_small_nodes_beyond_the_slice_are_decided_in_later_loop_turns(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With no slice at all, every first-time decision is made in a later turn of the loop:
    the answer is the one ``ExtenderCore.filter`` gives, including the assumption when one
    node passes (a large one: made on the evaluator)."""
    objects = {f"small-{k}": nrt(f"small-{k}", 1 + k % 3) for k in range(12)} | {"big-0": nrt("big-0", 300)}
    reference = ExtenderCore()
    reference.set_nodes(objects)
    served = ExtenderCore()
    served.set_nodes(objects)
    gate = Gate(served)
    gate.release.set()
    monkeypatch.setattr(bounded, "INLINE_SLICE", 0.0)
    server = serve_in_thread(served, request_budget=60.0, evaluate_in_process=True)
    port = server.server_address[1]
    try:
        for name, gpus in (("two", 2), ("one", 1), ("many", 200)):
            names = sorted(objects)
            got = _post(port, "filter", _args(name, gpus, names))
            passed, failed = reference.filter(gpu_pod(name, gpus), names)
            assert got["NodeNames"] == passed
            assert got["FailedNodes"] == failed
        # only big-0 holds 200 GPUs: the pod is assumed there, on the evaluator's thread
        assert "u-many" in served.nodes["big-0"].assumed
        assert {t for n, t in gate.threads if n == "big-0"} == {"numalign-evaluator"}
        assert {t for n, t in gate.threads if n != "big-0"} == {"numalign-extender-loop"}
    finally:
        server.shutdown()
        server.server_close()


def test_large_engines_decided_in_the_worker_process_decide_as_here(core: ExtenderCore) -> None:
    """The worker rebuilds a large engine from its NRT object and admits the extender's
    assumed pods first: its decisions are the ones made here."""
    reference = ExtenderCore()
    reference.set_nodes({n: nrt(n, 300 + k) for k, n in enumerate(["big-0", "big-1", "big-2"])})
    # an assumed pod on big-0 (a single-node filter assumes it), in both
    for c in (core, reference):
        assert c.filter(gpu_pod("first", 280), ["big-0"])[0] == ["big-0"]
        assert "u-first" in c.nodes["big-0"].assumed
    evaluator = Evaluator(core)
    names = ["big-0", "big-1", "big-2"]
    try:
        for name, gpus in (("a", 30), ("b", 290), ("c", 301)):
            pod = gpu_pod(name, gpus)
            got = filter_bounded(core, evaluator, pod, names, core.shape_id(pod), budget=120.0)
            assert isinstance(got, Future)
            assert got.result(timeout=120) == reference.filter(gpu_pod(name, gpus), names,
                                                               assume=False)
        assert evaluator.in_worker == evaluator.evaluated == 9
    finally:
        evaluator.close()


def test_a_decision_that_raises_answers_its_request_and_the_evaluator_goes_on(
        core: ExtenderCore) -> None:
    real = core._decide
    broken = {"on": True}

    def decide(node: Node, pod: Pod) -> Any:
        if broken["on"] and node.machine.name == "big-0":
            raise RuntimeError("a bug in a decision")
        return real(node, pod)

    core._decide = decide  # type: ignore[method-assign]
    evaluator = Evaluator(core, remote=False)
    try:
        pod = gpu_pod("p", 2)
        got = filter_bounded(core, evaluator, pod, ["big-0", "big-1"], core.shape_id(pod))
        assert isinstance(got, Future)
        with pytest.raises(RuntimeError, match="a bug in a decision"):
            got.result(timeout=30)
        broken["on"] = False
        pod = gpu_pod("q", 3)
        got = filter_bounded(core, evaluator, pod, ["big-0", "big-1"], core.shape_id(pod))
        assert isinstance(got, Future)
        assert got.result(timeout=30) == (["big-0", "big-1"], {})
    finally:
        evaluator.close()
