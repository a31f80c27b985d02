"""The extender decides each node by the kubelet release its Node object names
(``status.nodeInfo.kubeletVersion`` in ExtenderArgs ``Nodes.items``), through the HTTP server:
two Node objects naming two releases over the same NRT give two answers, the Node's release
wins over the NRT attribute, a malformed or unmodelled version fails that node only, and an
engine is made once per (NRT object, release), not per request."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from numalign.errors import InputError
from numalign.kube.extender import ExtenderCore, ExtenderServer, serve_in_thread
from numalign.kube.extender.node_release import FIELD
from numalign.kube.topology import build_nrt
from numalign.machine.kubelet_version import parse_kubelet_version
from numalign.machine.spec import load_machine
from numalign.modes.kubelet.releases import release_of
from numalign.node.admission import Node
from numalign.scheduler import get_profile
from numalign.scheduler.scorers import least_numa_nodes
from test_kube_extender import Client, engine_pod, guaranteed, kube_node, kube_pod
from test_kubelet_release_decisions import TWO_NUMA

WIDE = [guaranteed("10", "8Gi", **{"nvidia.com/gpu": "1"})]
SMALL = [guaranteed("2", "1Gi")]
#: an option v1.30 does not know (kubelet refuses to start) and v1.33+ accepts (beta, on)
STRICT = {"strict-cpu-reservation": "true"}


def machine_doc(version: str | None = None, cpu_options: dict[str, str] | None = None,
                ) -> dict[str, Any]:
    doc = yaml.safe_load(TWO_NUMA)
    if version is not None:
        doc["kubelet"]["kubeletVersion"] = version
    if cpu_options:
        doc["kubelet"]["cpuManagerPolicyOptions"] = cpu_options
    return doc


def node_object(name: str, version: Any) -> dict[str, Any]:
    item = kube_node(name)
    if version is not None:
        item["status"]["nodeInfo"] = {"kubeletVersion": version, "osImage": "Ubuntu 24.04"}
    return item


def with_nodes(pod: dict[str, Any], versions: dict[str, Any]) -> dict[str, Any]:
    return {"Pod": pod, "NodeNames": None,
            "Nodes": {"items": [node_object(n, v) for n, v in versions.items()]}}


def reference(version: str, cpu_options: dict[str, str] | None = None) -> Node:
    """The node's own kubelet: the machine spec naming ``version``."""
    return Node(load_machine(machine_doc(version, cpu_options)))


@pytest.fixture
def serve() -> Iterator[Any]:
    servers: list[ExtenderServer] = []

    def start(nrts: dict[str, dict[str, Any]]) -> tuple[ExtenderCore, Client]:
        core = ExtenderCore(log=io.StringIO())
        core.set_nodes(nrts)
        server = serve_in_thread(core, timeout=2.0)
        servers.append(server)
        return core, Client(server)

    yield start
    for s in servers:
        s.shutdown()
        s.server_close()


def nrt(name: str, version: str | None = None, cpu_options: dict[str, str] | None = None,
        ) -> dict[str, Any]:
    return build_nrt(Node(load_machine(machine_doc(version, cpu_options))), name=name)


def test_two_releases_two_scores_through_http(serve: Any) -> None:
    """The same wide pod assumed on two nodes of the same NRT whose Node objects name v1.35
    and v1.36 (tests/test_kubelet_release_decisions.py): v1.35 spreads its memory over a
    NUMA group {0,1}, v1.36 keeps it on node 0; a small pod then uses 2 NUMA nodes on the
    first and 1 on the second, and /prioritize scores them as the nodes' kubelets decide."""
    core, client = serve({"old": nrt("old"), "new": nrt("new")})
    versions = {"old": "v1.35.2", "new": "v1.36.0"}
    refs = {n: reference(v) for n, v in versions.items()}
    for name, version in versions.items():  # one node per request: the pod is assumed there
        doc = kube_pod(f"wide-{name}", WIDE)
        status, res = client.post("/filter", with_nodes(doc, {name: version}))
        assert status == 200 and [i["metadata"]["name"] for i in res["Nodes"]["items"]] == [name]
        assert refs[name].admit(engine_pod(doc)).admitted
    assert {n: [a.pod.name for a in e.assumed.values()] for n, e in core.nodes.items()} == {
        "old": ["wide-old"], "new": ["wide-new"]}
    small = kube_pod("small", SMALL)
    exact = get_profile("numalign").filter
    assert exact is not None
    counts = {n: exact(r, engine_pod(small)).numa_count for n, r in refs.items()}
    assert counts == {"old": 2, "new": 1}  # the reference kubelets decide differently
    status, res = client.post("/prioritize", with_nodes(small, versions))
    assert status == 200
    got = {h["Host"]: h["Score"] for h in res}
    assert got == {n: least_numa_nodes(c, 2) * 10 // 100 for n, c in counts.items()}
    assert got["old"] < got["new"]
    # the exporter republishes both (new metadata, the same pods): the rebuilt engines admit
    # the assumed wide pods again, each under its Node object's release
    for name in versions:
        obj = nrt(name)
        obj["metadata"]["labels"] = {"republished": "yes"}
        assert core.update_node(name, obj)
        assert len(core.nodes[name].assumed) == 1
    status, res = client.post("/prioritize", with_nodes(kube_pod("small2", SMALL), versions))
    assert {h["Host"]: h["Score"] for h in res} == got


def test_a_release_that_refuses_the_configuration_fails_that_node(serve: Any) -> None:
    """strict-cpu-reservation: v1.30's kubelet does not start with it, v1.33's does. The
    Node objects' releases give the two verdicts for the same pod on the same NRT."""
    _, client = serve({"a": nrt("a", cpu_options=STRICT), "b": nrt("b", cpu_options=STRICT)})
    with pytest.raises(InputError) as refused:
        reference("v1.30.2", STRICT)
    pod = kube_pod("p", SMALL)
    status, res = client.post("/filter", with_nodes(pod, {"a": "v1.30.2", "b": "v1.33.4"}))
    assert status == 200
    assert [i["metadata"]["name"] for i in res["Nodes"]["items"]] == ["b"]
    assert exact_passes(reference("v1.33.4", STRICT), pod)
    why = res["FailedNodes"]["a"]
    assert why == (f"the node's kubelet v1.30.2 ({FIELD}) would not start with its "
                   f"configuration: {refused.value.message}")
    assert "\n" not in why
    # the Node object upgraded: the node decides again
    status, res = client.post("/filter", with_nodes(pod, {"a": "v1.34.1", "b": "v1.33.4"}))
    assert [i["metadata"]["name"] for i in res["Nodes"]["items"]] == ["a", "b"]


def exact_passes(node: Node, pod: dict[str, Any]) -> bool:
    exact = get_profile("numalign").filter
    assert exact is not None
    return exact(node, engine_pod(pod)).passed


@pytest.mark.parametrize(("value", "problem"), [
    ("garbage", "'garbage' is not a kubelet version"),
    ("v2.0.0", "only Kubernetes 1.x releases exist"),
    ("v1.20.4", "older than the oldest kubelet release numalign models"),
    (133, "must be a string"),
    ("v1." + "9" * 200, "at most 96 characters"),
])
def test_a_bad_version_fails_that_node_only(serve: Any, value: Any, problem: str) -> None:
    core, client = serve({"a": nrt("a"), "b": nrt("b")})
    pod = kube_pod("p", SMALL)
    status, res = client.post("/filter", with_nodes(pod, {"a": value, "b": "v1.34.0"}))
    assert status == 200 and res["Error"] == ""
    assert [i["metadata"]["name"] for i in res["Nodes"]["items"]] == ["b"]
    why = res["FailedNodes"]["a"]
    assert why.startswith(f"{FIELD}: ") and problem in why and "\n" not in why
    status, res = client.post("/prioritize", with_nodes(pod, {"a": value, "b": "v1.34.0"}))
    assert {h["Host"]: h["Score"] for h in res}["a"] == 0
    # the Node object fixed: decided again, from the same engine
    status, res = client.post("/filter", with_nodes(pod, {"a": "v1.34.0", "b": "v1.34.0"}))
    assert [i["metadata"]["name"] for i in res["Nodes"]["items"]] == ["a", "b"]
    assert core.broken == {}


def test_the_node_object_wins_over_the_nrt_attribute_and_survives_rebuilds(serve: Any) -> None:
    """The NRT says v1.36 (the exporter's, lagging); the Node object says v1.30: the node
    refuses strict-cpu-reservation as v1.30 does. A new NRT object (rebuilt engine) keeps the
    Node object's release; a Node object without the field gives the NRT's back; a request
    with NodeNames only decides by what the node's Node object named last."""
    core, client = serve({"a": nrt("a", "v1.36.0", STRICT)})
    pod = kube_pod("p", SMALL)
    status, res = client.post("/filter", with_nodes(pod, {"a": "v1.30.2"}))
    assert status == 200
    assert res["Nodes"]["items"] == [] and FIELD in res["FailedNodes"]["a"]
    status, res = client.post("/filter", {"Pod": pod, "NodeNames": ["a"], "Nodes": None})
    assert res["NodeNames"] == [] and FIELD in res["FailedNodes"]["a"]
    # the exporter republishes (another pod admitted): still v1.30's verdict
    busy = Node(load_machine(machine_doc("v1.36.0", STRICT)))
    assert busy.admit(engine_pod(kube_pod("other", SMALL))).admitted
    assert core.update_node("a", build_nrt(busy, name="a")) is False
    assert FIELD in core.broken["a"]
    # the Node object no longer carries a version: the NRT attribute's release decides
    _status, res = client.post("/filter", with_nodes(pod, {"a": None}))
    assert [i["metadata"]["name"] for i in res["Nodes"]["items"]] == ["a"]
    assert core.nodes["a"].node.rules.release.version is not None
    assert str(core.nodes["a"].node.rules.release.version) == "v1.36.0"


def test_an_engine_per_nrt_and_release_not_per_request(serve: Any,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[str] = []
    real = Node.with_machine

    def counting(self: Node, machine: Any) -> Node:
        made.append(str(machine.kubelet.kubelet_version))
        return real(self, machine)

    monkeypatch.setattr(Node, "with_machine", counting)
    core, client = serve({n: nrt(n) for n in ("a", "b", "c")})
    versions = {"a": "v1.35.2", "b": "v1.36.1", "c": "v1.35.0"}
    for i in range(5):
        pod = kube_pod(f"p{i}", SMALL)
        status, res = client.post("/filter", with_nodes(pod, versions))
        assert status == 200 and len(res["Nodes"]["items"]) == 3
    # b names the NRT's own release (none = the newest, v1.36): no engine made for it
    assert sorted(made) == ["v1.35.0", "v1.35.2"]
    assert core.nodes["a"].content.endswith("@v1.35") and core.nodes["b"].nrt is None
    # a and c: equal NRT content and release, so they share decisions
    assert core.nodes["a"].content == core.nodes["c"].content
    # a new NRT object for a: the rebuilt engine decides by the Node object's release too
    busy = Node(load_machine(machine_doc()))
    assert busy.admit(engine_pod(kube_pod("other", SMALL))).admitted
    assert core.update_node("a", build_nrt(busy, name="a"))
    assert core.nodes["a"].content.endswith("@v1.35") and core.nodes["a"].node.state.pods
    assert str(core.nodes["a"].node.rules.release.version) == "v1.35.2"


TEXTS = [None, "v1.30.2", "v1.35.1", "v1.36.0", "garbage", "v1.20.0"]


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b"]), st.sampled_from([*TEXTS, "rebuild"])),
                max_size=12))
def test_the_last_node_object_decides(steps: list[tuple[str, str | None]]) -> None:
    """Whatever the order of Node objects and NRT rebuilds, a node decides by the release its
    Node object named last (the NRT's when none), or is unusable naming the field exactly
    when that release cannot decide (STRICT: v1.30 refuses it; v1.20 and garbage: bad)."""
    core = ExtenderCore(log=io.StringIO())
    core.set_nodes({n: NRTS[n] for n in ("a", "b")})
    last: dict[str, str | None] = {"a": None, "b": None}
    busy = {"a": False, "b": False}
    for name, text in steps:
        if text == "rebuild":  # the exporter republishes: another NRT object, back and forth
            busy[name] = not busy[name]
            core.update_node(name, NRTS[f"{name}-busy" if busy[name] else name])
        else:
            core.use_node_versions([(name, text)])
            last[name] = text
        for n, t in last.items():
            if t in ("garbage", "v1.20.0", "v1.30.2"):
                assert n not in core.nodes and FIELD in core.broken[n]
            else:
                want = release_of(None if t is None else parse_kubelet_version(t))
                assert core.nodes[n].node.rules.release.release is want.release
                assert n not in core.broken


NRTS = {"a": nrt("a", cpu_options=STRICT), "b": nrt("b", cpu_options=STRICT)}
for _n in ("a", "b"):
    _busy = Node(load_machine(machine_doc(cpu_options=STRICT)))
    assert _busy.admit(engine_pod(kube_pod(f"other-{_n}", SMALL))).admitted
    NRTS[f"{_n}-busy"] = build_nrt(_busy, name=_n)
