"""Fuzzed bodies against the extender (hypothesis): only 200 or 4xx, never 5xx or a hang."""

from __future__ import annotations

import http.client
import io
import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import REPO
from numalign.kube.extender import ExtenderCore, ExtenderServer, serve_in_thread
from numalign.kube.topology import build_nrt
from numalign.machine.spec import read_machine_file
from numalign.node.admission import Node

VERBS = ["/filter", "/prioritize", "/bind", "/numa/filter", "/x/prioritize"]

VALID_POD = {
    "metadata": {"name": "p", "namespace": "default", "uid": "u1"},
    "spec": {"containers": [{"name": "c", "resources": {
        "limits": {"cpu": "2", "memory": "1Gi"}, "requests": {"cpu": "2", "memory": "1Gi"}}}]},
    "status": {"phase": "Pending"},
}
VALID = [
    {"Pod": VALID_POD, "NodeNames": ["f", "g", "unknown"], "Nodes": None},
    {"Pod": VALID_POD, "Nodes": {"items": [{"metadata": {"name": "f"}}]}, "NodeNames": None},
    {"PodName": "p", "PodNamespace": "default", "PodUID": "u1", "Node": "f"},
]

SETTINGS = settings(max_examples=120, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**20, 10**20)
    | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=5)
    | st.dictionaries(st.text(max_size=12), children, max_size=5),
    max_leaves=30,
)


@pytest.fixture(scope="module")
def server() -> Iterator[ExtenderServer]:
    fig = read_machine_file(str(REPO / "examples" / "fig1.yaml"))
    core = ExtenderCore(log=io.StringIO())
    core.set_nodes({"f": build_nrt(Node(fig), name="f"), "g": build_nrt(Node(fig), name="g")})
    srv = serve_in_thread(core, timeout=2.0)
    yield srv
    srv.shutdown()
    srv.server_close()


def post(server: ExtenderServer, path: str, data: bytes) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=10)
    try:
        conn.request("POST", path, body=data, headers={"Content-Type": "application/json"})
        r = conn.getresponse()
        body = r.read()
        if r.status != 200:
            assert "Error" in json.loads(body)
        return r.status
    finally:
        conn.close()


def ok(status: int) -> bool:
    return status == 200 or 400 <= status < 500


def mutate(doc: Any, path: list[int], value: Any) -> Any:
    """Replace the node reached by following ``path`` (indices into keys/items) with value."""
    if not path or not isinstance(doc, dict | list) or not doc:
        return value
    if isinstance(doc, dict):
        keys = sorted(doc)
        k = keys[path[0] % len(keys)]
        return {**doc, k: mutate(doc[k], path[1:], value)}
    i = path[0] % len(doc)
    return [*doc[:i], mutate(doc[i], path[1:], value), *doc[i + 1:]]


@SETTINGS
@given(body=json_values, verb=st.sampled_from(VERBS))
def test_random_json(server: ExtenderServer, body: Any, verb: str) -> None:
    assert ok(post(server, verb, json.dumps(body).encode()))


@SETTINGS
@given(which=st.integers(0, 2), path=st.lists(st.integers(0, 50), max_size=8),
       value=json_values, verb=st.sampled_from(VERBS))
def test_wrong_types_in_valid_bodies(server: ExtenderServer, which: int, path: list[int],
                                     value: Any, verb: str) -> None:
    body = mutate(VALID[which], path, value)
    assert ok(post(server, verb, json.dumps(body).encode()))


@SETTINGS
@given(which=st.integers(0, 2), cut=st.floats(0, 1), verb=st.sampled_from(VERBS))
def test_truncated_bodies(server: ExtenderServer, which: int, cut: float, verb: str) -> None:
    data = json.dumps(VALID[which]).encode()
    data = data[: int(len(data) * cut)]
    status = post(server, verb, data)
    assert ok(status)


@SETTINGS
@given(data=st.binary(max_size=300), verb=st.sampled_from(VERBS))
def test_random_bytes(server: ExtenderServer, data: bytes, verb: str) -> None:
    assert ok(post(server, verb, data))


def test_valid_bodies_are_200(server: ExtenderServer) -> None:
    for verb in ("/filter", "/prioritize"):
        for body in VALID[:2]:
            assert post(server, verb, json.dumps(body).encode()) == 200
