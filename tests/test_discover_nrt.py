"""NodeResourceTopology write/read round trips and Volcano Numatopology reading."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import yaml

from numalign.errors import InputError
from numalign.machine.hwloc import load_hwloc_xml
from numalign.machine.model import (
    Cpu,
    Device,
    KubeletConfig,
    Machine,
    NumaNode,
    ReservedMemory,
)
from numalign.machine.nrt import (
    load_nrt,
    machine_to_nrt,
    nrt_to_machine,
    option_attribute,
    option_from_attribute,
)
from numalign.machine.numatopo import load_numatopo, numatopo_to_machine
from test_discover_captures import CAPTURES, LINUX, discovered

XML_DIR = LINUX.parent / "xml"
XML_FILES = sorted(XML_DIR.glob("*.xml")) if XML_DIR.is_dir() else []


def per_node_devices(m: Machine) -> Counter[tuple[str, int]]:
    return Counter((d.resource, min(d.numa)) for d in m.devices if d.numa and d.healthy)


def assert_round_trip(m: Machine) -> Machine:
    obj = machine_to_nrt(m)
    # through YAML text, as it would travel
    back = nrt_to_machine(yaml.safe_load(yaml.safe_dump(obj)))
    assert back.node_ids == m.node_ids
    assert back.cpus_by_numa == m.cpus_by_numa
    assert back.cpus_per_core == m.cpus_per_core
    # exact cores (numalign's zone attributes), on the online CPUs
    assert {c.id: c.core for c in back.cpus} == {c.id: c.core for c in m.online_cpus}
    for a, b in zip(m.numa_nodes, back.numa_nodes, strict=True):
        assert (a.memory, dict(a.hugepages), dict(a.distances)) == (
            b.memory,
            dict(b.hugepages),
            dict(b.distances),
        )
    assert per_node_devices(back) == per_node_devices(m)
    assert back.kubelet.topology_manager_policy == m.kubelet.topology_manager_policy
    assert back.kubelet.topology_manager_scope == m.kubelet.topology_manager_scope
    assert dict(back.kubelet.topology_manager_policy_options) == dict(
        m.kubelet.topology_manager_policy_options
    )
    return back


@pytest.mark.skipif(not XML_FILES, reason=f"{XML_DIR} not found: ../shared is absent")
@pytest.mark.parametrize("path", XML_FILES, ids=[p.name for p in XML_FILES])
def test_round_trip_xml(path: Path) -> None:
    assert_round_trip(load_hwloc_xml(path).machine)


@pytest.mark.skipif(not CAPTURES, reason=f"{LINUX} not found: ../shared is absent")
@pytest.mark.parametrize("capture", CAPTURES)
def test_round_trip_captures(capture: str) -> None:
    assert_round_trip(discovered(capture).machine)


def small_machine(**kubelet: object) -> Machine:
    nodes = (
        NumaNode(0, 64 << 30, {2 << 20: 1 << 30, 1 << 30: 8 << 30}, {0: 10, 1: 21}),
        NumaNode(1, 64 << 30, {2 << 20: 0, 1 << 30: 8 << 30}, {0: 21, 1: 10}),
    )
    cpus = tuple(Cpu(i, i % 4, i % 4 // 2, i % 4 // 2) for i in range(8))
    devs = (
        Device("nvidia.com/gpu", "g0", (0,)),
        Device("nvidia.com/gpu", "g1", (1,)),
        Device("rdma/hca", "r0", (0, 1)),
        Device("example.com/none", "x", ()),
    )
    return Machine("small", nodes, cpus, devs, KubeletConfig(**kubelet))  # type: ignore[arg-type]


def test_nrt_object_shape_and_attributes() -> None:
    m = small_machine(
        topology_manager_policy="single-numa-node",
        topology_manager_scope="pod",
        topology_manager_policy_options={
            "prefer-closest-numa-nodes": "true",
            "max-allowable-numa-nodes": "16",
        },
        reserved_system_cpus=frozenset({0}),
        reserved_memory=(ReservedMemory(0, {"memory": 1 << 30}),),
    )
    obj = machine_to_nrt(m, available={1: {"cpu": 2, "nvidia.com/gpu": 0}})
    assert obj["apiVersion"] == "topology.node.k8s.io/v1alpha2"
    assert obj["kind"] == "NodeResourceTopology" and obj["metadata"]["name"] == "small"
    assert obj["topologyPolicies"] == ["SingleNUMANodePodLevel"]
    attrs = {a["name"]: a["value"] for a in obj["attributes"]}
    assert attrs["topologyManagerPolicy"] == "single-numa-node"
    assert attrs["topologyManagerScope"] == "pod"
    assert attrs["topologyManagerMaxNUMANodes"] == "16"
    assert attrs["topologyManagerOptionPreferClosestNumaNodes"] == "true"
    z0, z1 = obj["zones"]
    assert (z0["name"], z0["type"]) == ("node-0", "Node")
    assert z0["costs"] == [{"name": "node-0", "value": 10}, {"name": "node-1", "value": 21}]
    r0 = {r["name"]: r for r in z0["resources"]}
    assert r0["cpu"] == {"name": "cpu", "capacity": "4", "allocatable": "3", "available": "3"}
    assert r0["memory"]["capacity"] == "64Gi" and r0["memory"]["allocatable"] == "63Gi"
    assert r0["hugepages-1Gi"]["capacity"] == "8Gi" and r0["hugepages-2Mi"]["capacity"] == "1Gi"
    assert r0["nvidia.com/gpu"]["capacity"] == "1" and r0["rdma/hca"]["capacity"] == "1"
    r1 = {r["name"]: r for r in z1["resources"]}
    assert r1["cpu"]["available"] == "2" and r1["nvidia.com/gpu"]["available"] == "0"
    back = assert_round_trip(m)
    assert back.cpu_by_id[2].numa == 1 and back.cpus_per_core == 2


def test_option_names() -> None:
    assert option_attribute("prefer-closest-numa-nodes") == (
        "topologyManagerOptionPreferClosestNumaNodes"
    )
    assert option_from_attribute("topologyManagerOptionPreferClosestNumaNodes") == (
        "prefer-closest-numa-nodes"
    )
    assert option_from_attribute("topologyManagerOptionMaxAllowableNUMANodes") == (
        "max-allowable-numa-nodes"
    )


SPEC_EXAMPLE = """
apiVersion: topology.node.k8s.io/v1alpha2
kind: NodeResourceTopology
metadata: {name: worker-gpu-01}
topologyPolicies: ["SingleNUMANodePodLevel"]
attributes:
  - {name: topologyManagerPolicy, value: single-numa-node}
  - {name: topologyManagerScope, value: pod}
  - {name: topologyManagerMaxNUMANodes, value: "8"}
  - {name: nodeTopologyPodsFingerprint, value: pfp0v0019a8c6e32c1f1d6b}
zones:
  - name: node-0
    type: Node
    costs: [{name: node-0, value: 10}, {name: node-1, value: 21}]
    resources:
      - {name: cpu, capacity: "32", allocatable: "30", available: "22"}
      - {name: memory, capacity: "134217728Ki", allocatable: "130023424Ki", available: "113246208Ki"}
      - {name: hugepages-1Gi, capacity: "16Gi", allocatable: "16Gi", available: "8Gi"}
      - {name: nvidia.com/gpu, capacity: "1", allocatable: "1", available: "0"}
      - {name: mellanox.com/rdma_vf, capacity: "8", allocatable: "8", available: "7"}
  - name: node-1
    type: Node
    costs: [{name: node-0, value: 21}, {name: node-1, value: 10}]
    resources:
      - {name: cpu, capacity: "32", allocatable: "32", available: "32"}
      - {name: memory, capacity: "134217728Ki", allocatable: "134217728Ki", available: "134217728Ki"}
      - {name: hugepages-1Gi, capacity: "16Gi", allocatable: "16Gi", available: "16Gi"}
      - {name: nvidia.com/gpu, capacity: "1", allocatable: "1", available: "1"}
      - {name: mellanox.com/rdma_vf, capacity: "8", allocatable: "8", available: "8"}
  - name: socket-0
    type: Socket
"""


def test_read_third_party_nrt() -> None:
    m = nrt_to_machine(yaml.safe_load(SPEC_EXAMPLE))
    assert m.name == "worker-gpu-01" and m.node_ids == (0, 1)
    assert [len(m.cpus_by_numa[i]) for i in (0, 1)] == [32, 32]
    assert m.cpus_by_numa[1] == frozenset(range(32, 64))
    assert m.cpus_per_core == 1  # one core per CPU without numalign's attributes
    assert m.node_by_id[0].memory == 128 << 30
    assert m.node_by_id[1].hugepages == {1 << 30: 16 << 30}
    assert m.node_by_id[0].distances == {0: 10, 1: 21}
    assert per_node_devices(m) == {
        ("nvidia.com/gpu", 0): 1,
        ("nvidia.com/gpu", 1): 1,
        ("mellanox.com/rdma_vf", 0): 8,
        ("mellanox.com/rdma_vf", 1): 8,
    }
    assert m.kubelet.topology_manager_policy == "single-numa-node"
    assert m.kubelet.topology_manager_scope == "pod"
    assert dict(m.kubelet.topology_manager_policy_options) == {}


def test_legacy_policies_only() -> None:
    doc = yaml.safe_load(SPEC_EXAMPLE)
    del doc["attributes"]
    doc["topologyPolicies"] = ["RestrictedContainerLevel"]
    m = nrt_to_machine(doc)
    assert (m.kubelet.topology_manager_policy, m.kubelet.topology_manager_scope) == (
        "restricted",
        "container",
    )


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda d: d["zones"][0]["resources"][1].update(capacity="12Gx"), "capacity"),
        (lambda d: d["zones"][0]["resources"][0].update(available="-1"), "available"),
        (lambda d: d["zones"][0]["resources"][0].update(capacity="1500m"), "whole CPUs"),
        (lambda d: d["zones"][0].update(name="numa0"), "node-<id>"),
        (lambda d: d.update(zones="x"), "zones"),
        (lambda d: d.update(kind="Pod"), "kind"),
        (lambda d: d["zones"][1]["costs"][0].update(value="far"), "costs[0].value"),
    ],
)
def test_bad_nrt(tmp_path: Path, mutate: object, field: str) -> None:
    doc = yaml.safe_load(SPEC_EXAMPLE)
    mutate(doc)  # type: ignore[operator]
    path = tmp_path / "nrt.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(InputError) as e:
        load_nrt(str(path))
    assert field in e.value.message and "\n" not in e.value.message
    assert e.value.message.startswith(str(path))


NUMATOPO = """
apiVersion: nodeinfo.volcano.sh/v1alpha1
kind: Numatopology
metadata: {name: node-1}
spec:
  policies: {CPUManagerPolicy: static, TopologyManagerPolicy: single-numa-node}
  resReserved: {cpu: "1000m", memory: "1Gi"}
  numares:
    cpu: {allocatable: "1-3,5-7", capacity: 8}
  cpuDetail:
    "0": {numa: 0, socket: 0, core: 0}
    "1": {numa: 0, socket: 0, core: 1}
    "2": {numa: 1, socket: 1, core: 0}
    "3": {numa: 1, socket: 1, core: 1}
    "4": {numa: 0, socket: 0, core: 0}
    "5": {numa: 0, socket: 0, core: 1}
    "6": {numa: 1, socket: 1, core: 0}
    "7": {numa: 1, socket: 1, core: 1}
"""


def test_numatopo(tmp_path: Path) -> None:
    path = tmp_path / "numatopo.yaml"
    path.write_text(NUMATOPO)
    m = load_numatopo(str(path))
    assert m.name == "node-1" and m.node_ids == (0, 1)
    assert m.cpus_by_numa == {0: frozenset({0, 1, 4, 5}), 1: frozenset({2, 3, 6, 7})}
    # per-socket core ids become the kubelet's machine-wide ones
    assert [m.cpu_by_id[i].core for i in range(8)] == [0, 1, 2, 3, 0, 1, 2, 3]
    assert m.cpus_per_core == 2
    assert m.kubelet.cpu_manager_policy == "static"
    assert m.kubelet.topology_manager_policy == "single-numa-node"
    assert m.kubelet.kube_reserved == {"cpu": 1000}


def test_bad_numatopo() -> None:
    doc = yaml.safe_load(NUMATOPO)
    doc["spec"]["cpuDetail"]["x"] = {"numa": 0}
    with pytest.raises(InputError, match=r"spec\.cpuDetail\.x"):
        numatopo_to_machine(doc)
    doc = yaml.safe_load(NUMATOPO)
    doc["spec"]["numares"]["cpu"]["capacity"] = 9
    with pytest.raises(InputError, match="capacity"):
        numatopo_to_machine(doc)


def test_available_default_is_allocatable() -> None:
    m = small_machine().replace(devices=())
    obj = machine_to_nrt(m)
    for z in obj["zones"]:
        for r in z["resources"]:
            assert r["available"] == r["allocatable"]
