"""Koordinator's ``kubelet.koordinator.sh/cpu-manager-policy`` annotation in the koordinator mode.

Upstream (koordinator-sh/koordinator ``a7a1b76b``): ``apis/extension/numa_aware.go``
(``AnnotationKubeletCPUManagerPolicy``, ``KubeletCPUManagerPolicy{policy, options,
reservedCPUs}``, ``GetKubeletCPUManagerPolicy``, ``GetNodeCPUBindPolicy``: ``static`` with
``options["full-pcpus-only"] == "true"`` makes the node ``FullPCPUsOnly``);
``pkg/koordlet/statesinformer/impl/states_noderesourcetopology.go`` writes it on the NRT;
``pkg/scheduler/plugins/nodenumaresource/topology_options.go`` ``NewTopologyOptions`` reads it
from the NRT's annotations and adds ``reservedCPUs`` to the CPUs never bound
(``topology_options_test.go``).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from numalign.errors import InputError
from numalign.machine.node_annotations import (
    KUBELET_CPU_MANAGER_POLICY,
    KubeletCpuPolicy,
    parse_kubelet_cpu_policy,
)
from numalign.machine.spec import dump_machine, load_machine
from numalign.modes.koordinator.cpu import ERR_BIND_CONFLICT, ERR_SMT_ALIGNMENT
from numalign.modes.registry import MODE_LABEL
from numalign.node.admission import Node
from numalign.pods import Container, ContainerKind, Pod, QOSClass, default_uid
from numalign.pods.annotations import RESOURCE_SPEC

KOORD = {MODE_LABEL: "koordinator"}
FULL = json.dumps({"policy": "static", "options": {"full-pcpus-only": "true"}, "reservedCPUs": "0-1"})


def spec(labels: dict[str, str], annotations: dict[str, str] | None = None) -> dict[str, Any]:
    """2 sockets x 1 NUMA node x 4 cores x 2 threads (siblings c and c+8), CPU 0 reserved."""
    doc: dict[str, Any] = {
        "name": "k", "labels": labels, "shape": {"sockets": 2, "coresPerNuma": 4, "threadsPerCore": 2},
        "kubelet": {"cpuManagerPolicy": "static", "topologyManagerPolicy": "none", "reservedSystemCPUs": "0"},
    }
    if annotations is not None:
        doc["annotations"] = annotations
    return doc


def pod(name: str, cpus: int, resource_spec: dict[str, str] | None = None) -> Pod:
    req = {"cpu": cpus * 1000, "memory": 1 << 30}
    c = Container("main", ContainerKind.APP, requests=req, limits=dict(req))
    ann = {RESOURCE_SPEC: json.dumps(resource_spec)} if resource_spec else {}
    return Pod("t", name, default_uid("t", name), QOSClass.GUARANTEED, (c,), ann)


def test_parse_the_annotation() -> None:
    got = parse_kubelet_cpu_policy({KUBELET_CPU_MANAGER_POLICY: FULL})
    assert got == KubeletCpuPolicy("static", {"full-pcpus-only": "true"}, frozenset({0, 1}))
    assert got.full_pcpus_only
    assert parse_kubelet_cpu_policy({}) == KubeletCpuPolicy()
    assert not parse_kubelet_cpu_policy({KUBELET_CPU_MANAGER_POLICY: "{}"}).full_pcpus_only


@pytest.mark.parametrize(("policy", "value", "full"), [
    ("static", "true", True),
    ("static", "True", False),  # GetNodeCPUBindPolicy compares the string with "true"
    ("static", "1", False),
    ("none", "true", False),
    ("", "true", False),
])
def test_full_pcpus_only_needs_static_and_exactly_true(policy: str, value: str, full: bool) -> None:
    raw = json.dumps({"policy": policy, "options": {"full-pcpus-only": value}})
    assert parse_kubelet_cpu_policy({KUBELET_CPU_MANAGER_POLICY: raw}).full_pcpus_only is full


@pytest.mark.parametrize(("raw", "field"), [
    ("{bad", ""),
    ("[1]", ""),
    ("[" * 100_000 + "]" * 100_000, ""),
    ('{"policy": 1}', ".policy"),
    ('{"options": {"full-pcpus-only": true}}', ".options"),
    ('{"options": ["full-pcpus-only"]}', ".options"),
    ('{"reservedCPUs": 3}', ".reservedCPUs"),
    ('{"reservedCPUs": "0-x"}', ".reservedCPUs"),
])
def test_bad_annotations_are_one_line_input_errors(raw: str, field: str) -> None:
    with pytest.raises(InputError) as err:
        parse_kubelet_cpu_policy({KUBELET_CPU_MANAGER_POLICY: raw}, "metadata.annotations")
    assert err.value.field is not None
    assert err.value.field.startswith(f"metadata.annotations[{KUBELET_CPU_MANAGER_POLICY}]{field}")
    assert "\n" not in str(err.value) and len(str(err.value)) < 300


def test_full_pcpus_only_makes_the_koordinator_node_full_pcpus_only() -> None:
    n = Node(load_machine(spec(KOORD, {KUBELET_CPU_MANAGER_POLICY: FULL})))
    r = n.admit(pod("odd", 3))
    assert not r.admitted and ERR_SMT_ALIGNMENT in (r.message or "")
    r = n.admit(pod("spread", 2, {"requiredCPUBindPolicy": "SpreadByPCPUs"}))
    assert not r.admitted and ERR_BIND_CONFLICT in (r.message or "")
    r = n.admit(pod("prefers-spread", 2, {"preferredCPUBindPolicy": "SpreadByPCPUs"}))
    assert r.admitted
    got = r.containers[0].cpus
    assert len({n.machine.cpu_by_id[c].core for c in got}) == 1  # one whole core, not spread
    plain = Node(load_machine(spec(KOORD)))
    assert plain.admit(pod("odd", 3)).admitted


def test_reported_reserved_cpus_are_never_bound_in_the_koordinator_mode() -> None:
    """``reservedCPUs`` "1-3" (NUMA node 0 keeps 8-11): a 4-CPU pod on NUMA node 0 gets 8-11."""
    ann = {KUBELET_CPU_MANAGER_POLICY: json.dumps({"policy": "static", "reservedCPUs": "1-3"})}
    labels = {**KOORD, "node.koordinator.sh/numa-allocate-strategy": "MostAllocated"}
    n = Node(load_machine(spec(labels, ann)))
    taken: set[int] = set()
    for i in range(3):
        r = n.admit(pod(f"p{i}", 4, {"preferredCPUBindPolicy": "SpreadByPCPUs"}))
        assert r.admitted
        taken |= r.containers[0].cpus
    assert not taken & {0, 1, 2, 3} and len(taken) == 12
    assert not n.admit(pod("more", 1)).admitted
    kubelet = Node(load_machine(spec({}, ann)))  # the kubelet mode never reads the annotation
    assert kubelet.admit(pod("all", 15)).admitted


def test_annotations_round_trip_in_machine_specs_and_templates() -> None:
    from numalign.sim.cluster import load_cluster

    m = load_machine(spec(KOORD, {KUBELET_CPU_MANAGER_POLICY: FULL}))
    assert dict(m.annotations) == {KUBELET_CPU_MANAGER_POLICY: FULL}
    assert load_machine(dump_machine(m)) == m
    with pytest.raises(InputError, match=r"annotations\[kubelet\.koordinator\.sh/cpu-manager-policy\]"):
        load_machine(spec(KOORD, {KUBELET_CPU_MANAGER_POLICY: "{bad"}))
    with pytest.raises(InputError, match="annotations"):
        load_machine({**spec(KOORD), "annotations": {"a": 1}})
    nodes = load_cluster({"nodes": [
        {"machine": spec({}, {"x": "1"}), "count": 2, "labels": KOORD,
         "annotations": {KUBELET_CPU_MANAGER_POLICY: FULL}},
        {"machine": spec({}), "namePrefix": "plain"},
    ]})
    assert [dict(mm.annotations) for _, mm in nodes] == [{"x": "1", KUBELET_CPU_MANAGER_POLICY: FULL}] * 2 + [{}]
    with pytest.raises(InputError, match=r"nodes\[0\]\.annotations"):
        load_cluster({"nodes": [{"machine": spec({}), "annotations": ["x"]}]})


def _nrt(labels: dict[str, str], annotations: dict[str, str]) -> dict[str, Any]:
    from numalign.kube.topology import build_nrt

    doc = build_nrt(Node(load_machine(spec({}))), name="n1")
    meta = doc.setdefault("metadata", {})
    meta["labels"] = labels
    meta["annotations"] = {**annotations, "other": "kept out"}
    return doc


def test_nrt_annotation_is_read_for_the_koordinator_mode() -> None:
    from numalign.kube.nrt_import import engine_from_nrt

    eng = engine_from_nrt(_nrt(KOORD, {KUBELET_CPU_MANAGER_POLICY: FULL}))
    assert dict(eng.machine.annotations) == {KUBELET_CPU_MANAGER_POLICY: FULL}
    r = eng.admit(pod("odd", 3))
    assert not r.admitted and ERR_SMT_ALIGNMENT in (r.message or "")
    with pytest.raises(InputError, match=r"metadata\.annotations\[kubelet\.koordinator\.sh/cpu-manager-policy\]"):
        engine_from_nrt(_nrt(KOORD, {KUBELET_CPU_MANAGER_POLICY: '{"policy": 7}'}))
    # not labelled koordinator: a malformed value is dropped, as Koordinator drops it
    assert dict(engine_from_nrt(_nrt({}, {KUBELET_CPU_MANAGER_POLICY: "{bad"})).machine.annotations) == {}
    kubelet = engine_from_nrt(_nrt({}, {KUBELET_CPU_MANAGER_POLICY: FULL}))
    assert kubelet.admit(pod("odd", 3)).admitted  # the kubelet mode is unchanged
