"""The serving extender's garbage-collector policy (:mod:`numalign.kube.extender.gcfreeze`):
long-lived objects are frozen after the initial list and after each published update, and
nothing the extender keeps forms a reference cycle - what the policy relies on, since a
cycle among frozen objects would never be collected."""

from __future__ import annotations

import gc
import io
import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from numalign.kube.extender import ExtenderCore, serve_in_thread
from numalign.kube.extender.gcfreeze import FreezePolicy
from test_extender_concurrency import version


@pytest.fixture
def unfrozen() -> Iterator[None]:
    """Undo the freezes a test makes (the rest of the test process is not the server's)."""
    yield
    gc.unfreeze()


def kube_pod(i: int, cpu: str) -> dict[str, Any]:
    return {"metadata": {"name": f"p{i}", "namespace": "ns", "uid": f"u{i}"},
            "spec": {"containers": [{"name": "c", "resources": {
                "limits": {"cpu": cpu, "memory": "1Gi"}}}]}}


def test_initial_list_and_each_update_are_frozen(unfrozen: None) -> None:
    policy = FreezePolicy()
    core = ExtenderCore(log=io.StringIO(), freeze=policy)
    gc.unfreeze()
    core.set_nodes({f"n{i}": version(f"n{i}", i) for i in range(3)})
    assert gc.get_freeze_count() > 0
    # the initial list: one freeze when it is all in (not one per node)
    assert policy.freezes == 1
    engine = core.nodes["n0"].node
    assert engine not in gc.get_objects()  # frozen objects are out of the collector's sight
    core.update_node("n0", version("n0", 3))  # after it: one per update published
    assert policy.freezes == 2
    assert core.nodes["n0"].node not in gc.get_objects()
    core.update_node("n0", version("n0", 3))  # unchanged: nothing published, nothing frozen
    assert policy.freezes == 2


def test_a_core_without_a_policy_freezes_nothing(unfrozen: None) -> None:
    gc.unfreeze()
    core = ExtenderCore(log=io.StringIO())
    core.set_nodes({"n0": version("n0", 0)})
    assert gc.get_freeze_count() == 0


def test_the_extender_keeps_no_reference_cycles(unfrozen: None) -> None:
    """Updates (good, unchanged, unusable), removals, filters that assume, prioritize, bind,
    expiry and bad requests through HTTP leave no cyclic garbage behind."""
    now = [0.0]
    core = ExtenderCore(log=io.StringIO(), clock=lambda: now[0], assume_ttl=5.0)
    core.set_nodes({f"n{i}": version(f"n{i}", i) for i in range(4)})
    server = serve_in_thread(core)

    def post(verb: str, doc: Any) -> None:
        req = urllib.request.Request(f"{server.url}/{verb}", data=json.dumps(doc).encode(),
                                     method="POST")
        try:
            with urllib.request.urlopen(req) as r:
                r.read()
        except urllib.error.HTTPError as e:
            e.read()
            e.close()

    def work(round_: int) -> None:
        for i in range(12):
            k = i + 100 * round_
            core.update_node(f"n{i % 4}", version(f"n{i % 4}", i + round_))
            post("filter", {"Pod": kube_pod(k, str(1 + i % 4)),
                            "NodeNames": [f"n{j}" for j in range(5)]})
            post("filter", {"Pod": kube_pod(k + 50, "1"), "NodeNames": ["n1"]})  # assumes
            post("prioritize", {"Pod": kube_pod(k, "2"), "NodeNames": ["n0", "n1"]})
            post("bind", {"PodName": f"p{k}", "PodNamespace": "ns", "PodUID": f"u{k}",
                          "Node": "n2"})
            post("filter", {"Pod": 3})
            post("filter", {"Pod": kube_pod(k, "x"), "NodeNames": ["n0"]})
            core.update_node("n3", ["not", "an", "nrt"])
            core.remove_node("n4")
            now[0] += 1.0

    try:
        work(0)  # first use: lazily made module state, metric children, pool threads
        gc.collect()
        gc.disable()
        try:
            work(1)
            assert gc.collect() == 0
        finally:
            gc.enable()
    finally:
        server.shutdown()
        server.server_close()
