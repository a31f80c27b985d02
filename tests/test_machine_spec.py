"""Machine spec files: full and compact forms, validation, canonical dump."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from numalign.errors import InputError
from numalign.machine.model import Cpu, Device, KubeletConfig, Machine, NumaNode, ReservedMemory
from numalign.machine.spec import (
    dump_machine,
    dump_machine_yaml,
    format_bytes,
    load_machine,
    read_machine_file,
)

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
GI = 1 << 30
MI = 1 << 20

FULL: dict[str, Any] = {
    "name": "fig1",
    "numaNodes": [
        {
            "id": 0,
            "memory": "64Gi",
            "hugepages": {"2Mi": 0, "1Gi": "8Gi"},
            "distances": {0: 10, 1: 21},
        },
        {"id": 1, "memory": "64Gi", "hugepages": {"1Gi": "8Gi"}, "distances": {0: 21, 1: 10}},
    ],
    "cpus": [
        {"id": 0, "core": 0, "socket": 0, "numa": 0},
        {"id": 1, "core": 1, "socket": 0, "numa": 0},
        {"id": 2, "core": 0, "socket": 1, "numa": 1, "uncoreCache": 1, "die": 1},
        {"id": 3, "core": 1, "socket": 1, "numa": 1, "online": False},
    ],
    "devices": [
        {
            "resource": "nvidia.com/gpu",
            "id": "gpu0",
            "numa": [0],
            "healthy": True,
            "pcieRoot": "0000:3a",
            "busId": "0000:3b:00.0",
        },
        {"resource": "nvidia.com/gpu", "id": "gpu1", "numa": [1, 0], "healthy": False},
        {"resource": "example.com/nic", "id": "nic0", "numa": []},
        {"resource": "example.com/nic", "id": "nic1", "numa": None},
        {"resource": "example.com/nic", "id": "nic2", "numa": 1},
    ],
    "kubelet": {
        "topologyManagerPolicy": "restricted",
        "topologyManagerScope": "container",
        "topologyManagerPolicyOptions": {"prefer-closest-numa-nodes": "true"},
        "cpuManagerPolicy": "static",
        "cpuManagerPolicyOptions": {"full-pcpus-only": "true"},
        "reservedSystemCPUs": "0",
        "systemReserved": {"cpu": "500m", "memory": "1Gi"},
        "kubeReserved": {"cpu": "1"},
        "memoryManagerPolicy": "Static",
        "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1Gi"}}],
        # the Static memory manager needs reservedMemory == systemReserved + kubeReserved +
        # evictionHard memory.available (issue 13): "0%" = no hard memory threshold
        "evictionHard": {"memory.available": "0%"},
        "featureGates": {"SomeGate": True},
    },
}


def full() -> dict[str, Any]:
    return copy.deepcopy(FULL)


def test_full_form() -> None:
    m = load_machine(full())
    assert m.name == "fig1"
    assert m.numa_nodes == (
        NumaNode(0, 64 * GI, {2 * MI: 0, GI: 8 * GI}, {0: 10, 1: 21}),
        NumaNode(1, 64 * GI, {GI: 8 * GI}, {0: 21, 1: 10}),
    )
    # per-socket core ids (core 0 in both sockets) become the kubelet's lowest-CPU-id ids
    assert m.cpus == (
        Cpu(0, 0, 0, 0),
        Cpu(1, 1, 0, 0),
        Cpu(2, 2, 1, 1, uncore_cache=1, die=1),
        Cpu(3, 3, 1, 1, online=False),
    )
    assert m.devices == (
        Device("nvidia.com/gpu", "gpu0", (0,), True, "0000:3a", "0000:3b:00.0"),
        Device("nvidia.com/gpu", "gpu1", (0, 1), False),
        Device("example.com/nic", "nic0", ()),
        Device("example.com/nic", "nic1", ()),  # null: unknown, like []
        Device("example.com/nic", "nic2", (1,)),  # a single node id
    )
    assert m.kubelet == KubeletConfig(
        topology_manager_policy="restricted",
        topology_manager_scope="container",
        topology_manager_policy_options={"prefer-closest-numa-nodes": "true"},
        cpu_manager_policy="static",
        cpu_manager_policy_options={"full-pcpus-only": "true"},
        reserved_system_cpus=frozenset({0}),
        system_reserved={"cpu": 500, "memory": GI},
        kube_reserved={"cpu": 1000},
        memory_manager_policy="Static",
        reserved_memory=(ReservedMemory(0, {"memory": GI}),),
        feature_gates={"SomeGate": True},
        eviction_hard={"memory.available": "0%"},
    )
    assert m.has_distances


def test_defaults_and_minimal_machine() -> None:
    m = load_machine(
        {
            "numaNodes": [{"id": 0, "memory": 1024}],
            "cpus": [{"id": 0, "core": 0, "socket": 0, "numa": 0}],
        },
        "somewhere/box.yaml",
    )
    assert m.name == "box"  # the file name without extension
    assert m.devices == ()
    assert m.kubelet == KubeletConfig()
    assert m.numa_nodes[0].distances == {}
    assert load_machine({"shape": {}}).name == "machine"


def test_nodes_and_cpus_are_sorted_by_id() -> None:
    doc = {
        "numaNodes": [{"id": 3, "memory": 0}, {"id": 1, "memory": 0}],
        "cpus": [
            {"id": 5, "core": 0, "socket": 1, "numa": 3},
            {"id": 1, "core": 0, "socket": 0, "numa": 1},
            {"id": 7, "core": 0, "socket": 1, "numa": 3},
        ],
    }
    m = load_machine(doc)
    assert m.node_ids == (1, 3)
    assert [c.id for c in m.cpus] == [1, 5, 7]
    # CPUs 5 and 7 share socket 1 core 0: their core id is 5
    assert [c.core for c in m.cpus] == [1, 5, 5]


def test_globally_unique_core_ids_are_renumbered_to_lowest_cpu() -> None:
    doc = {
        "numaNodes": [{"id": 0, "memory": 0}],
        "cpus": [
            {"id": 0, "core": 100, "socket": 0, "numa": 0},
            {"id": 1, "core": 101, "socket": 0, "numa": 0},
            {"id": 2, "core": 100, "socket": 0, "numa": 0},
            {"id": 3, "core": 101, "socket": 0, "numa": 0},
        ],
    }
    m = load_machine(doc)
    assert [c.core for c in m.cpus] == [0, 1, 0, 1]
    assert m.cpus_per_core == 2


def test_kubelet_unknown_fields_ignored_and_bool_options() -> None:
    doc = full()
    doc["kubelet"] = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "evictionHard": {"memory.available": "100Mi"},
        "cpuManagerPolicy": "static",
        "cpuManagerPolicyOptions": {"full-pcpus-only": True},
        "reservedSystemCPUs": 0,  # YAML integer
        "systemReserved": {"cpu": 1.5, "ephemeral-storage": "1G"},
    }
    k = load_machine(doc).kubelet
    assert k.cpu_manager_policy == "static"
    assert k.cpu_manager_policy_options == {"full-pcpus-only": "true"}
    assert k.reserved_system_cpus == frozenset({0})
    assert k.system_reserved == {"cpu": 1500, "ephemeral-storage": 10**9}
    assert k.topology_manager_policy == "none"  # kubelet default


def test_reserved_cpus_empty_string_is_explicit_empty_set() -> None:
    doc = full()
    doc["kubelet"] = {"reservedSystemCPUs": ""}
    assert load_machine(doc).kubelet.reserved_system_cpus == frozenset()
    doc["kubelet"] = {"reservedSystemCPUs": "0-1,3"}
    assert load_machine(doc).kubelet.reserved_system_cpus == frozenset({0, 1, 3})
    doc["kubelet"] = {}
    assert load_machine(doc).kubelet.reserved_system_cpus is None


def test_policy_names_are_checked_as_the_kubelet_checks_them() -> None:
    # reversed by issue 13: the kubelet refuses to start with an unknown policy name
    doc = full()
    doc["kubelet"]["topologyManagerPolicy"] = "no-such-policy"
    with pytest.raises(InputError, match='unknown policy: "no-such-policy"'):
        load_machine(doc)


# --------------------------------------------------------------------------------------------
# compact form
# --------------------------------------------------------------------------------------------


def test_compact_layout_linux_intel_numbering() -> None:
    m = load_machine(
        {
            "name": "c",
            "shape": {"sockets": 2, "numaPerSocket": 2, "coresPerNuma": 2, "threadsPerCore": 2},
        }
    )
    assert m.node_ids == (0, 1, 2, 3)
    assert len(m.cpus) == 16
    by = m.cpu_by_id
    # 8 cores: thread 0 of every core first (0-7), then the siblings (8-15)
    for n in range(8):
        assert by[n].core == n and by[n + 8].core == n
        assert by[n].numa == by[n + 8].numa == n // 2
        assert by[n].socket == by[n + 8].socket == n // 4
    assert m.cpus_by_numa == {
        0: frozenset({0, 1, 8, 9}),
        1: frozenset({2, 3, 10, 11}),
        2: frozenset({4, 5, 12, 13}),
        3: frozenset({6, 7, 14, 15}),
    }
    assert m.sockets == (0, 1)
    assert m.cpus_per_core == 2
    # default distances: local 10, same socket 11, remote 21
    assert m.distances[0] == {0: 10, 1: 11, 2: 21, 3: 21}
    assert m.distances[3] == {0: 21, 1: 21, 2: 11, 3: 10}
    assert all(n.memory == 64 * GI for n in m.numa_nodes)
    assert all(n.hugepages == {} for n in m.numa_nodes)


def test_compact_kubelet_topo_dual_socket_ht() -> None:
    """The kubelet's topoDualSocketHT: 2 sockets x 3 cores x 2 threads, siblings n and n+6."""
    m = load_machine({"shape": {"sockets": 2, "coresPerNuma": 3, "threadsPerCore": 2}})
    pairs = {frozenset(c.id for c in m.cpus if c.core == core) for core in {c.core for c in m.cpus}}
    assert pairs == {frozenset({n, n + 6}) for n in range(6)}
    assert {c.id for c in m.cpus if c.socket == 0} == {0, 1, 2, 6, 7, 8}


def test_compact_defaults() -> None:
    m = load_machine({"shape": {}})
    assert len(m.numa_nodes) == 1
    assert [(c.id, c.core) for c in m.cpus] == [(0, 0), (1, 1), (2, 2), (3, 3)]
    assert m.numa_nodes[0].distances == {0: 10}


def test_compact_options() -> None:
    m = load_machine(
        {
            "shape": {
                "sockets": 2,
                "coresPerNuma": 4,
                "memoryPerNuma": "32Gi",
                "hugepages1GiPerNuma": "4Gi",
                "hugepages2MiPerNuma": "512Mi",
                "coresPerUncoreCache": 2,
                "distances": {"local": 10, "remote": 32},
                "gpusPerNuma": 2,
                "devicesPerNuma": {"rdma/hca": 1},
            },
            "devices": [
                {"resource": "example.com/fpga", "id": "fpga0", "numa": [1]},
                {"resource": "example.com/vf", "perNuma": 1, "idPrefix": "vf-"},
            ],
            "kubelet": {"topologyManagerPolicy": "single-numa-node"},
        }
    )
    assert m.numa_nodes[1] == NumaNode(1, 32 * GI, {GI: 4 * GI, 2 * MI: 512 * MI}, {0: 32, 1: 10})
    assert [c.uncore_cache for c in m.cpus] == [0, 0, 1, 1, 2, 2, 3, 3]
    assert [(d.resource, d.id, d.numa) for d in m.devices] == [
        ("nvidia.com/gpu", "gpu0", (0,)),
        ("nvidia.com/gpu", "gpu1", (0,)),
        ("nvidia.com/gpu", "gpu2", (1,)),
        ("nvidia.com/gpu", "gpu3", (1,)),
        ("rdma/hca", "hca0", (0,)),
        ("rdma/hca", "hca1", (1,)),
        ("example.com/fpga", "fpga0", (1,)),
        ("example.com/vf", "vf-0", (0,)),
        ("example.com/vf", "vf-1", (1,)),
    ]
    assert m.kubelet.topology_manager_policy == "single-numa-node"


def test_compact_without_distances() -> None:
    m = load_machine({"shape": {"sockets": 2, "distances": None}})
    assert not m.has_distances
    assert all(n.distances == {} for n in m.numa_nodes)


# --------------------------------------------------------------------------------------------
# round trips
# --------------------------------------------------------------------------------------------


def _round_trips(m: Machine) -> None:
    doc = dump_machine(m)
    assert load_machine(doc) == m
    assert load_machine(json.loads(json.dumps(doc))) == m  # JSON: string distance keys
    assert load_machine(yaml.safe_load(yaml.safe_dump(doc))) == m
    assert load_machine(yaml.safe_load(dump_machine_yaml(m))) == m
    assert dump_machine(load_machine(doc)) == doc  # the canonical form is a fixed point


def test_round_trip_full() -> None:
    _round_trips(load_machine(full()))


def test_round_trip_built_machine() -> None:
    m = Machine(
        name="built",
        numa_nodes=(NumaNode(0, 12345), NumaNode(7, 0, {2 * MI: 4 * MI})),
        cpus=(Cpu(0, 0, 0, 0), Cpu(1, 0, 0, 0), Cpu(2, 2, 3, 7, uncore_cache=5, online=False)),
        devices=(Device("a.b/c", "x", (0, 7), healthy=False, bus_id="b"),),
        kubelet=KubeletConfig(
            reserved_system_cpus=frozenset(),
            system_reserved={"cpu": 250, "memory": 1000},
            reserved_memory=(ReservedMemory(7, {"memory": 3, "hugepages-2Mi": 2 * MI}),),
            feature_gates={"A": False},
        ),
    )
    _round_trips(m)


@pytest.mark.parametrize(
    "path", sorted(p.name for p in EXAMPLES.glob("*.yaml") if "pods" not in p.name)
)
def test_examples_round_trip(path: str) -> None:
    _round_trips(read_machine_file(str(EXAMPLES / path)))


@settings(max_examples=40, deadline=None)
@given(
    sockets=st.integers(1, 3),
    numa=st.integers(1, 3),
    cores=st.integers(1, 5),
    threads=st.integers(1, 4),
    gpus=st.integers(0, 2),
)
def test_compact_shapes_round_trip_and_layout(
    sockets: int, numa: int, cores: int, threads: int, gpus: int
) -> None:
    m = load_machine(
        {
            "shape": {
                "sockets": sockets,
                "numaPerSocket": numa,
                "coresPerNuma": cores,
                "threadsPerCore": threads,
                "gpusPerNuma": gpus,
            }
        }
    )
    total_cores = sockets * numa * cores
    assert [c.id for c in m.cpus] == list(range(total_cores * threads))
    for c in m.cpus:
        assert c.core == c.id % total_cores  # lowest CPU id of the core
        assert c.numa == c.core // cores
        assert c.socket == c.numa // numa
    assert m.cpus_per_core == threads
    assert len(m.devices) == gpus * sockets * numa
    _round_trips(m)


def test_format_bytes() -> None:
    assert format_bytes(64 * GI) == "64Gi"
    assert format_bytes(1536 * MI) == "1536Mi"
    assert format_bytes(1000) == 1000
    assert format_bytes(0) == 0
    assert format_bytes(1 << 60) == "1Ei"


# --------------------------------------------------------------------------------------------
# validation: one line, names the field
# --------------------------------------------------------------------------------------------


def _error(doc: object) -> str:
    with pytest.raises(InputError) as exc:
        load_machine(doc, "m.yaml")
    msg = str(exc.value)
    assert "\n" not in msg
    return msg


def _set(path: str, value: Any) -> Any:
    """A mutation setting a dotted/indexed path in the FULL document."""

    def mutate(doc: dict[str, Any]) -> None:
        keys: list[Any] = []
        for part in path.split("."):
            name, _, rest = part.partition("[")
            if name:
                keys.append(name)
            while rest:
                idx, _, rest = rest.partition("]")
                keys.append(int(idx))
                rest = rest.removeprefix("[")
        target: Any = doc
        for k in keys[:-1]:
            target = target[k]
        if value is _DELETE:
            del target[keys[-1]]
        else:
            target[keys[-1]] = value

    return mutate


_DELETE = object()


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (_set("extra", 1), "m.yaml: extra: unknown field"),
        (_set("numaNodes[0].memroy", 1), "m.yaml: numaNodes[0].memroy: unknown field"),
        (_set("cpus[0].thread", 1), "m.yaml: cpus[0].thread: unknown field"),
        (_set("devices[0].node", 1), "m.yaml: devices[0].node: unknown field"),
        (_set("name", 3), "m.yaml: name: expected a string, got int"),
        (_set("numaNodes", []), "m.yaml: numaNodes: at least one NUMA node is required"),
        (_set("numaNodes", _DELETE), "m.yaml: numaNodes: missing required field"),
        (_set("numaNodes", {"id": 0}), "m.yaml: numaNodes: expected a list, got dict"),
        (_set("numaNodes[1]", 5), "m.yaml: numaNodes[1]: expected a mapping, got int"),
        (_set("numaNodes[1].id", 0), "m.yaml: numaNodes[1].id: duplicate NUMA node id 0"),
        (_set("numaNodes[1].id", -1), "m.yaml: numaNodes[1].id: must be at least 0, got -1"),
        (_set("numaNodes[1].id", "1"), "m.yaml: numaNodes[1].id: expected an integer, got '1'"),
        (_set("numaNodes[1].id", 5000), "m.yaml: numaNodes[1].id: must be at most 1023, got 5000"),
        (
            _set("numaNodes[1].memory", _DELETE),
            "m.yaml: numaNodes[1].memory: missing required field",
        ),
        (
            _set("numaNodes[1].memory", "-1Gi"),
            "m.yaml: numaNodes[1].memory: must be non-negative, got '-1Gi'",
        ),
        (
            _set("numaNodes[1].memory", "64Gx"),
            'm.yaml: numaNodes[1].memory: invalid quantity "64Gx"',
        ),
        (
            _set("numaNodes[1].hugepages", {"1Gi": "3Mi"}),
            "m.yaml: numaNodes[1].hugepages.1Gi: 3Mi is not a whole number of 1Gi pages",
        ),
        (
            _set("numaNodes[1].hugepages", {"2Mx": 0}),
            'm.yaml: numaNodes[1].hugepages.2Mx: invalid quantity "2Mx"',
        ),
        (
            _set("numaNodes[1].hugepages", {"1Gi": 0, "hugepages-1Gi": 0}),
            "m.yaml: numaNodes[1].hugepages.hugepages-1Gi: page size hugepages-1Gi given twice",
        ),
        (
            _set("numaNodes[1].distances", {1: 10}),
            "m.yaml: numaNodes[1].distances: missing entry for node 0",
        ),
        (
            _set("numaNodes[1].distances", _DELETE),
            "m.yaml: numaNodes[1].distances: missing, but NUMA node 0 has distances (give them for all nodes or none)",
        ),
        (
            _set("numaNodes[0].distances", {0: 10, 1: 21, 2: 21}),
            "m.yaml: numaNodes[0].distances: NUMA node 2 is not in numaNodes",
        ),
        (
            _set("numaNodes[0].distances", {0: 10, 1: 0}),
            "m.yaml: numaNodes[0].distances.1: must be at least 1, got 0",
        ),
        (
            _set("numaNodes[0].distances", {0: 10, "1": 21, 1: 21}),
            "m.yaml: numaNodes[0].distances: entry for node 1 given twice",
        ),
        (
            _set("numaNodes[0].distances", [10, 21]),
            "m.yaml: numaNodes[0].distances: expected a mapping, got list",
        ),
        (_set("cpus", []), "m.yaml: cpus: at least one CPU is required"),
        (_set("cpus[3].numa", 7), "m.yaml: cpus[3].numa: NUMA node 7 is not in numaNodes"),
        (_set("cpus[3].id", 0), "m.yaml: cpus[3].id: duplicate CPU id 0 (also cpus[0])"),
        (_set("cpus[3].core", _DELETE), "m.yaml: cpus[3].core: missing required field"),
        (_set("cpus[3].socket", True), "m.yaml: cpus[3].socket: expected an integer, got True"),
        (
            _set("cpus[3].online", "yes"),
            "m.yaml: cpus[3].online: expected true or false, got 'yes'",
        ),
        (
            _set("cpus[3].uncoreCache", -2),
            "m.yaml: cpus[3].uncoreCache: must be at least 0, got -2",
        ),
        (
            # CPU 3 joins CPU 2 (socket 1 core 0) on the same NUMA node: a valid SMT pair
            _set("cpus[3].core", 0),
            None,
        ),
        (
            _set("cpus[1]", {"id": 1, "core": 0, "socket": 0, "numa": 1}),
            "m.yaml: cpus[1].numa: CPU 1 is a thread of socket 0 core 0 like cpus[0], which is on "
            "NUMA node 0, but this one is on NUMA node 1",
        ),
        (_set("devices", {}), "m.yaml: devices: expected a list, got dict"),
        (
            _set("devices[2].numa", [7]),
            "m.yaml: devices[2].numa[0]: NUMA node 7 is not in numaNodes",
        ),
        (
            _set("devices[2].numa", [0, 0]),
            "m.yaml: devices[2].numa[1]: NUMA node 0 listed twice",
        ),
        (
            _set("devices[2].numa", "0"),
            "m.yaml: devices[2].numa: expected a list, got str",
        ),
        (
            _set("devices[1].id", "gpu0"),
            "m.yaml: devices[1].id: duplicate device id 'gpu0' of nvidia.com/gpu",
        ),
        (_set("devices[1].id", 1), "m.yaml: devices[1].id: expected a string, got int"),
        (_set("devices[1].id", ""), "m.yaml: devices[1].id: must not be empty"),
        (
            _set("devices[1].resource", _DELETE),
            "m.yaml: devices[1].resource: missing required field",
        ),
        (
            _set("devices[1].resource", "a b"),
            "m.yaml: devices[1].resource: invalid resource name 'a b'",
        ),
        (
            _set("devices[1].healthy", 1),
            "m.yaml: devices[1].healthy: expected true or false, got 1",
        ),
        (
            _set("devices[1]", {"resource": "x/y", "perNuma": -1}),
            "m.yaml: devices[1].perNuma: must be at least 0, got -1",
        ),
        (
            _set("devices[1]", {"resource": "x/y", "perNuma": 1, "numa": [0]}),
            "m.yaml: devices[1].numa: unknown field",
        ),
        (_set("kubelet", []), "m.yaml: kubelet: expected a mapping, got list"),
        (
            _set("kubelet.topologyManagerPolicy", 1),
            "m.yaml: kubelet.topologyManagerPolicy: expected a string, got int",
        ),
        (
            _set("kubelet.topologyManagerScope", None),
            None,  # null means "not set": the kubelet default
        ),
        (
            _set("kubelet.cpuManagerPolicyOptions", {"full-pcpus-only": 1}),
            "m.yaml: kubelet.cpuManagerPolicyOptions.full-pcpus-only: expected a string, got int",
        ),
        (
            _set("kubelet.topologyManagerPolicyOptions", "x"),
            "m.yaml: kubelet.topologyManagerPolicyOptions: expected a mapping, got str",
        ),
        (
            _set("kubelet.reservedSystemCPUs", "0-"),
            "m.yaml: kubelet.reservedSystemCPUs: invalid cpulist '0-': '' is not a CPU number",
        ),
        (
            _set("kubelet.reservedSystemCPUs", "3-5"),
            "m.yaml: kubelet.reservedSystemCPUs: CPUs 4-5 are not in cpus",
        ),
        (
            _set("kubelet.systemReserved", {"cpu": "lots"}),
            'm.yaml: kubelet.systemReserved.cpu: invalid quantity "lots"',
        ),
        (
            _set("kubelet.kubeReserved", {"memory": "-1"}),
            "m.yaml: kubelet.kubeReserved.memory: must be non-negative, got '-1'",
        ),
        (
            _set("kubelet.reservedMemory[0].limits.memory", "1Gx"),
            'm.yaml: kubelet.reservedMemory[0].limits.memory: invalid quantity "1Gx"',
        ),
        (
            _set("kubelet.reservedMemory[0].limits.memory", "-1Gi"),
            "m.yaml: kubelet.reservedMemory[0].limits.memory: must be non-negative, got '-1Gi'",
        ),
        (
            _set("kubelet.reservedMemory[0].numaNode", 9),
            "m.yaml: kubelet.reservedMemory[0].numaNode: NUMA node 9 is not in numaNodes",
        ),
        (
            _set("kubelet.reservedMemory[0].limits", _DELETE),
            "m.yaml: kubelet.reservedMemory[0].limits: missing required field",
        ),
        (
            _set(
                "kubelet.reservedMemory",
                [{"numaNode": 0, "limits": {}}, {"numaNode": 0, "limits": {}}],
            ),
            "m.yaml: kubelet.reservedMemory[1].numaNode: NUMA node 0 reserved twice",
        ),
        (
            _set("kubelet.reservedMemory", {"numaNode": 0}),
            "m.yaml: kubelet.reservedMemory: expected a list, got dict",
        ),
        (
            _set("kubelet.featureGates", {"A": "true"}),
            "m.yaml: kubelet.featureGates.A: expected true or false, got 'true'",
        ),
        (_set("shape", {}), "m.yaml: numaNodes: cannot be combined with shape (give one form)"),
    ],
)
def test_validation(mutate: Any, message: str | None) -> None:
    doc = full()
    mutate(doc)
    if message is None:
        load_machine(doc, "m.yaml")
    else:
        assert _error(doc) == message


@pytest.mark.parametrize(
    ("shape", "message"),
    [
        ({"cores": 2}, "m.yaml: shape.cores: unknown field"),
        ({"sockets": 0}, "m.yaml: shape.sockets: must be at least 1, got 0"),
        ({"threadsPerCore": "2"}, "m.yaml: shape.threadsPerCore: expected an integer, got '2'"),
        ({"coresPerNuma": 10**6}, "m.yaml: shape.coresPerNuma: must be at most 4096, got 1000000"),
        ({"memoryPerNuma": "big"}, 'm.yaml: shape.memoryPerNuma: invalid quantity "big"'),
        (
            {"hugepages1GiPerNuma": 8},
            "m.yaml: shape.hugepages1GiPerNuma: 8 is not a whole number of 1Gi pages",
        ),
        ({"distances": {"near": 10}}, "m.yaml: shape.distances.near: unknown field"),
        ({"distances": {"remote": 0}}, "m.yaml: shape.distances.remote: must be at least 1, got 0"),
        ({"gpusPerNuma": -1}, "m.yaml: shape.gpusPerNuma: must be at least 0, got -1"),
        (
            {"gpusPerNuma": 1, "devicesPerNuma": {"nvidia.com/gpu": 1}},
            "m.yaml: shape.devicesPerNuma.nvidia.com/gpu: also given as gpusPerNuma",
        ),
        ([], "m.yaml: shape: expected a mapping, got list"),
    ],
)
def test_shape_validation(shape: object, message: str) -> None:
    assert _error({"shape": shape}) == message


def test_compact_device_id_clash() -> None:
    doc = {
        "shape": {"gpusPerNuma": 1},
        "devices": [{"resource": "nvidia.com/gpu", "id": "gpu0", "numa": [0]}],
    }
    assert _error(doc) == "m.yaml: devices[0].id: duplicate device id 'gpu0' of nvidia.com/gpu"


def test_not_a_mapping() -> None:
    assert _error([1, 2]) == "m.yaml: expected a mapping, got list"
    assert _error({1: 2}) == "m.yaml: field name 1 is not a string"


# --------------------------------------------------------------------------------------------
# files
# --------------------------------------------------------------------------------------------


def test_read_machine_file_yaml_and_json(tmp_path: Path) -> None:
    m = load_machine(full())
    y = tmp_path / "m.yaml"
    y.write_text(dump_machine_yaml(m))
    assert read_machine_file(str(y)) == m
    j = tmp_path / "m.json"
    j.write_text(json.dumps(dump_machine(m)))
    assert read_machine_file(str(j)) == m


def test_read_machine_file_errors(tmp_path: Path) -> None:
    missing = tmp_path / "missing.yaml"
    with pytest.raises(InputError) as exc:
        read_machine_file(str(missing))
    assert str(exc.value).startswith(f"{missing}: cannot read")

    broken = tmp_path / "broken.yaml"
    broken.write_text("numaNodes: [\n  {id: 0\ncpus: x\n")
    with pytest.raises(InputError) as exc:
        read_machine_file(str(broken))
    msg = str(exc.value)
    assert msg.startswith(f"{broken}: invalid YAML:") and "line" in msg and "\n" not in msg

    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    with pytest.raises(InputError) as exc:
        read_machine_file(str(empty))
    assert str(exc.value) == f"{empty}: empty machine spec"

    bad = tmp_path / "bad.yaml"
    bad.write_text("shape: {sockets: 0}\n")
    with pytest.raises(InputError) as exc:
        read_machine_file(str(bad))
    assert str(exc.value) == f"{bad}: shape.sockets: must be at least 1, got 0"

    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(InputError) as exc:
        read_machine_file(str(binary))
    assert str(exc.value).startswith(f"{binary}: not UTF-8")


# --------------------------------------------------------------------------------------------
# the examples
# --------------------------------------------------------------------------------------------


def test_example_fig1() -> None:
    m = read_machine_file(str(EXAMPLES / "fig1.yaml"))
    assert m.name == "fig1"
    assert m.cpus_by_numa == {0: frozenset(range(4)), 1: frozenset(range(4, 8))}
    assert [c.socket for c in m.cpus] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert m.cpus_per_core == 1
    assert {(d.resource, d.id, d.numa) for d in m.devices} == {
        ("gpu-vendor.com/gpu", "gpu0", (0,)),
        ("gpu-vendor.com/gpu", "gpu1", (1,)),
        ("nic-vendor.com/nic", "nic0", (0,)),
        ("nic-vendor.com/nic", "nic1", (1,)),
    }
    assert m.kubelet.topology_manager_policy == "single-numa-node"
    assert m.kubelet.cpu_manager_policy == "static"
    assert m.kubelet.memory_manager_policy == "Static"
    # the reservation keeps CPUs 0-3 and 4-6 free: see the comment in the file
    assert m.kubelet.reserved_system_cpus == frozenset({7})
    assert m.distances == {0: {0: 10, 1: 21}, 1: {0: 21, 1: 10}}


def test_example_dual_socket_ht() -> None:
    m = read_machine_file(str(EXAMPLES / "dual-socket-ht.yaml"))
    assert len(m.cpus) == 64 and m.cpus_per_core == 2 and m.sockets == (0, 1)
    assert m.cpu_by_id[0].core == m.cpu_by_id[32].core == 0
    assert m.cpus_by_numa[1] == frozenset(range(16, 32)) | frozenset(range(48, 64))
    assert m.kubelet.cpu_manager_policy_options == {"full-pcpus-only": "true"}
    assert m.kubelet.topology_manager_policy == "restricted"


def test_example_gpu_8x_rdma() -> None:
    m = read_machine_file(str(EXAMPLES / "gpu-8x-rdma.yaml"))
    assert m.node_ids == (0, 1, 2, 3) and len(m.cpus) == 128
    gpus = m.devices_of("nvidia.com/gpu")
    nics = m.devices_of("rdma/hca")
    assert len(gpus) == 8 and len(nics) == 4
    for node in m.node_ids:
        assert sum(d.numa == (node,) for d in gpus) == 2
        assert sum(d.numa == (node,) for d in nics) == 1
        roots = {d.pcie_root for d in m.devices if d.numa == (node,)}
        assert len(roots) == 1  # GPUs and NIC of a node share the root complex
    assert all(d.bus_id for d in m.devices)
    assert m.kubelet.topology_manager_scope == "pod"
    assert m.distances[0] == {0: 10, 1: 12, 2: 32, 3: 32}


# --------------------------------------------------------------------------------------------
# robustness: any malformed document gives a one-line InputError, never another exception
# --------------------------------------------------------------------------------------------

_LEAF = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 10**20),
    st.floats(),
    st.text(max_size=6),
    st.sampled_from(["1Gi", "-1", "0-3", "1e99999", "hugepages-1Gi", "nvidia.com/gpu"]),
)
_KEYS = st.one_of(
    st.text(max_size=6),
    st.integers(0, 3),
    st.sampled_from(["id", "numa", "memory", "core", "socket", "limits", "numaNode", "perNuma"]),
)
_TREE = st.recursive(
    _LEAF,
    lambda ch: st.one_of(st.lists(ch, max_size=3), st.dictionaries(_KEYS, ch, max_size=4)),
    max_leaves=12,
)


def _replace_random_subtree(doc: Any, data: st.DataObject) -> Any:
    paths: list[list[Any]] = []

    def walk(x: Any, p: list[Any]) -> None:
        paths.append(p)
        if isinstance(x, dict):
            for k, v in x.items():
                walk(v, [*p, k])
        elif isinstance(x, list):
            for i, v in enumerate(x):
                walk(v, [*p, i])

    walk(doc, [])
    path = data.draw(st.sampled_from(paths[1:]))
    target = doc
    for k in path[:-1]:
        target = target[k]
    target[path[-1]] = data.draw(_TREE)
    return doc


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_malformed_documents_raise_input_error_only(data: st.DataObject) -> None:
    base = data.draw(
        st.sampled_from(
            [
                full(),
                {
                    "shape": {"sockets": 2, "gpusPerNuma": 1, "distances": {"local": 10}},
                    "devices": [{"resource": "a/b", "perNuma": 1}],
                    "kubelet": {"reservedMemory": [{"numaNode": 0, "limits": {"memory": 1}}]},
                },
            ]
        )
    )
    doc = _replace_random_subtree(base, data)
    try:
        load_machine(doc, "m.yaml")
    except InputError as e:
        assert "\n" not in str(e)
        assert str(e).startswith("m.yaml")


@pytest.mark.parametrize("path", sorted((REPO / "examples").glob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_machine_spec_round_trips(path: Path) -> None:
    """``load_machine(dump_machine(m)) == m`` for every machine spec under examples/."""
    from numalign.inputs.documents import read_yaml
    from numalign.machine.spec import dump_machine, load_machine

    doc = read_yaml(str(path))
    if not isinstance(doc, dict) or ("numaNodes" not in doc and "shape" not in doc):
        pytest.skip("not a machine spec")
    m = load_machine(doc, path.name)
    assert load_machine(dump_machine(m), path.name) == m
