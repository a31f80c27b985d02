"""Device manager: tables transcribed from kubelet ``devicemanager/topology_hints_test.go``.

Case ids name the upstream test function and case description. Upstream compares hint lists
after sorting with ``TopologyHint.LessThan``; numalign lists hints in ``IterateBitMasks``
order, so expectations here are written in that order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from numalign.engine.bitmask import mask_of
from numalign.engine.hints import GeneratedHints, ResourceHints, TopologyHint
from numalign.errors import AdmissionError
from numalign.machine.model import Device, Machine, NumaNode
from numalign.pods import Container, ContainerKind, Pod, QOSClass
from numalign.resources.devices import DeviceManager, DeviceState, pod_limits

GiB = 1 << 30


def machine(devices: Mapping[str, Sequence[tuple[str, int | None]]], nodes: int = 2) -> Machine:
    devs = tuple(
        Device(r, i, () if n is None else (n,)) for r, ds in devices.items() for i, n in ds
    )
    return Machine("m", tuple(NumaNode(i, 8 * GiB) for i in range(nodes)), (), devices=devs)


def H(*nodes: int, pref: bool) -> TopologyHint:
    return TopologyHint(mask_of(nodes), pref)


def materialize(h: ResourceHints) -> list[TopologyHint] | None:
    if h is None:
        return None
    if isinstance(h, GeneratedHints):
        return h.materialize()
    return list(h)


def app(name: str, limits: Mapping[str, int]) -> Container:
    return Container(name, ContainerKind.APP, {}, dict(limits))


def init(name: str, limits: Mapping[str, int]) -> Container:
    return Container(name, ContainerKind.INIT, {}, dict(limits))


def pod(*containers: Container, uid: str = "fakePod") -> Pod:
    return Pod("default", uid, uid, QOSClass.BEST_EFFORT, tuple(containers))


def state(allocated: Mapping[str, Mapping[str, Mapping[str, Sequence[str]]]]) -> DeviceState:
    return DeviceState(
        {
            p: {c: {r: list(ids) for r, ids in rs.items()} for c, rs in cs.items()}
            for p, cs in allocated.items()
        }
    )


FOUR = [("Dev1", 0), ("Dev2", 1), ("Dev3", 0), ("Dev4", 1)]
FOUR_B = [("Dev1", 0), ("Dev2", 0), ("Dev3", 1), ("Dev4", 1)]
ALL3 = [H(0, pref=True), H(1, pref=True), H(0, 1, pref=False)]

# (description, container limits, devices, allocated, expected per resource)
COMMON = [
    (
        "Single Request, no alignment",
        {"testdevice": 1},
        {"testdevice": [("Dev1", None), ("Dev2", None)]},
        {},
        {"testdevice": None},
    ),
    (
        "Single Request, only one with alignment",
        {"testdevice": 1},
        {"testdevice": [("Dev1", None), ("Dev2", 1)]},
        {},
        {"testdevice": [H(1, pref=True), H(0, 1, pref=False)]},
    ),
    (
        "Single Request, one device per socket",
        {"testdevice": 1},
        {"testdevice": [("Dev1", 0), ("Dev2", 1)]},
        {},
        {"testdevice": ALL3},
    ),
    (
        "Request for 2, one device per socket",
        {"testdevice": 2},
        {"testdevice": [("Dev1", 0), ("Dev2", 1)]},
        {},
        {"testdevice": [H(0, 1, pref=True)]},
    ),
    (
        "Request for 2, 2 devices per socket",
        {"testdevice": 2},
        {"testdevice": FOUR},
        {},
        {"testdevice": ALL3},
    ),
    (
        "Request for 2, optimal on 1 NUMA node, forced cross-NUMA",
        {"testdevice": 2},
        {"testdevice": FOUR},
        {"fakePod": {"fakeOtherContainer": {"testdevice": ["Dev1", "Dev2"]}}},
        {"testdevice": [H(0, 1, pref=False)]},
    ),
    (
        "2 device types, mixed configuration",
        {"testdevice1": 2, "testdevice2": 1},
        {"testdevice1": FOUR, "testdevice2": [("Dev1", 0)]},
        {},
        {"testdevice1": ALL3, "testdevice2": [H(0, pref=True), H(0, 1, pref=False)]},
    ),
    (
        "Single device type, more requested than available",
        {"testdevice": 6},
        {"testdevice": FOUR_B},
        {},
        {"testdevice": []},
    ),
    (
        "Single device type, all already allocated to container",
        {"testdevice": 2},
        {"testdevice": [("Dev1", 0), ("Dev2", 0)]},
        {"fakePod": {"fakeContainer": {"testdevice": ["Dev1", "Dev2"]}}},
        {"testdevice": [H(0, pref=True), H(0, 1, pref=False)]},
    ),
    (
        "Single device type, less already allocated to container than requested",
        {"testdevice": 4},
        {"testdevice": FOUR_B},
        {"fakePod": {"fakeContainer": {"testdevice": ["Dev1", "Dev2"]}}},
        {"testdevice": []},
    ),
    (
        "Single device type, more already allocated to container than requested",
        {"testdevice": 2},
        {"testdevice": FOUR_B},
        {"fakePod": {"fakeContainer": {"testdevice": ["Dev1", "Dev2", "Dev3", "Dev4"]}}},
        {"testdevice": []},
    ),
]


@pytest.mark.parametrize(
    ("limits", "devices", "allocated", "expected"),
    [c[1:] for c in COMMON],
    ids=[f"TestGetTopologyHints/{c[0]}" for c in COMMON],
)
def test_get_topology_hints(limits, devices, allocated, expected) -> None:  # type: ignore[no-untyped-def]
    c = app("fakeContainer", limits)
    dm = DeviceManager(machine(devices), state(allocated))
    hints = dm.container_hints(pod(c), c)
    assert hints is not None
    assert {r: materialize(h) for r, h in hints.items()} == expected


POD_SCOPE = [
    (
        "2 device types, user container only",
        [
            app("fakeContainer1", {"testdevice1": 2}),
            app("fakeContainer2", {"testdevice2": 2}),
            app("fakeContainer3", {"notRegistered": 2}),
        ],
        {},
        {"testdevice1": ALL3, "testdevice2": ALL3},
    ),
    (
        "2 device types, request resources for init containers and user container",
        [
            init("init0", {"testdevice1": 1, "testdevice2": 1}),
            init("init1", {"testdevice1": 1, "testdevice2": 2}),
            app("fakeContainer1", {"testdevice1": 1, "testdevice2": 1}),
            app("fakeContainer2", {"testdevice1": 1, "testdevice2": 1}),
            app("fakeContainer3", {"notRegistered": 1}),
        ],
        {},
        {"testdevice1": ALL3, "testdevice2": ALL3},
    ),
    (
        "2 device types, user container only, optimal on 1 NUMA node, forced cross-NUMA",
        [
            app("fakeContainer1", {"testdevice1": 1, "testdevice2": 1}),
            app("fakeContainer2", {"testdevice1": 1, "testdevice2": 1}),
            app("fakeContainer3", {"notRegistered": 1}),
        ],
        {
            "fakeOtherPod": {
                "fakeOtherContainer": {
                    "testdevice1": ["Dev1", "Dev3"],
                    "testdevice2": ["Dev1", "Dev3"],
                }
            }
        },
        {"testdevice1": [H(0, 1, pref=False)], "testdevice2": [H(0, 1, pref=False)]},
    ),
]


@pytest.mark.parametrize(
    ("limits", "devices", "allocated", "expected"),
    [c[1:] for c in COMMON],
    ids=[f"TestGetPodTopologyHints/common/{c[0]}" for c in COMMON],
)
def test_get_pod_topology_hints_common(limits, devices, allocated, expected) -> None:  # type: ignore[no-untyped-def]
    c = app("fakeContainer", limits)
    dm = DeviceManager(machine(devices), state(allocated))
    hints = dm.pod_hints(pod(c))
    assert hints is not None
    assert {r: materialize(h) for r, h in hints.items()} == expected


@pytest.mark.parametrize(
    ("containers", "allocated", "expected"),
    [c[1:] for c in POD_SCOPE],
    ids=[f"TestGetPodTopologyHints/{c[0]}" for c in POD_SCOPE],
)
def test_get_pod_topology_hints_pod_scope(containers, allocated, expected) -> None:  # type: ignore[no-untyped-def]
    dm = DeviceManager(machine({"testdevice1": FOUR_B, "testdevice2": FOUR_B}), state(allocated))
    hints = dm.pod_hints(pod(*containers))
    assert hints is not None
    assert {r: materialize(h) for r, h in hints.items()} == expected


POD_REQUEST = [
    ("empty pod", [], {}),
    (
        "Init container requests device plugin resource",
        [init("i0", {"cpu": 2000, "memory": 10**9, "gpu": 2})],
        {"gpu": 2},
    ),
    (
        "Init containers request device plugin resource",
        [init("i0", {"cpu": 2000, "gpu": 2}), init("i1", {"cpu": 2000, "gpu": 4})],
        {"gpu": 4},
    ),
    (
        "User container requests device plugin resource",
        [app("c0", {"cpu": 2000, "gpu": 2})],
        {"gpu": 2},
    ),
    (
        "Init containers and user containers request the same amount of device plugin resources",
        [
            init("i0", {"gpu": 2, "nic": 2}),
            init("i1", {"gpu": 2, "nic": 2}),
            app("c0", {"gpu": 1, "nic": 1}),
            app("c1", {"gpu": 1, "nic": 1}),
        ],
        {"gpu": 2, "nic": 2},
    ),
    (
        "Init containers request more device plugin resources than user containers",
        [
            init("i0", {"gpu": 2, "nic": 1}),
            init("i1", {"gpu": 3, "nic": 2}),
            app("c0", {"gpu": 1, "nic": 1}),
            app("c1", {"gpu": 1}),
        ],
        {"gpu": 3, "nic": 2},
    ),
    (
        "User containers request more device plugin resources than init containers",
        [
            init("i0", {"gpu": 2, "nic": 1}),
            init("i1", {"gpu": 2, "nic": 1}),
            app("c0", {"gpu": 3, "nic": 2}),
            app("c1", {"gpu": 3, "nic": 2}),
        ],
        {"gpu": 6, "nic": 4},
    ),
]


@pytest.mark.parametrize(
    ("containers", "expected"),
    [c[1:] for c in POD_REQUEST],
    ids=[f"TestGetPodDeviceRequest/{c[0]}" for c in POD_REQUEST],
)
def test_get_pod_device_request(containers, expected) -> None:  # type: ignore[no-untyped-def]
    dm = DeviceManager(machine({"gpu": [("g0", 0)], "nic": [("n0", 0)]}))
    got = {r: q for r, q in pod_limits(pod(*containers)).items() if dm.is_device_resource(r)}
    assert got == expected


def _numa_devs(spec: Sequence[tuple[int, int]]) -> list[tuple[str, int | None]]:
    """(first index, NUMA) runs -> Dev<i> devices."""
    return [(f"Dev{i}", n) for i, n in spec]


ALIGNED = [
    ("Single Request, no alignment", 1, [("Dev1", None), ("Dev2", None)], (0, 1), {}),
    ("Request for 1, partial alignment", 1, [("Dev1", None), ("Dev2", 1)], (1,), {1: 1}),
    ("Single Request, socket 0", 1, [("Dev1", 0), ("Dev2", 1)], (0,), {0: 1}),
    ("Single Request, socket 1", 1, [("Dev1", 0), ("Dev2", 1)], (1,), {1: 1}),
    ("Request for 2, socket 0", 2, FOUR, (0,), {0: 2}),
    ("Request for 2, socket 1", 2, FOUR, (1,), {1: 2}),
    (
        "Request for 4, unsatisfiable, prefer socket 0",
        4,
        [(f"Dev{i}", (i + 1) % 2) for i in range(1, 7)],
        (0,),
        {0: 3, 1: 1},
    ),
    (
        "Request for 4, unsatisfiable, prefer socket 1",
        4,
        [(f"Dev{i}", (i + 1) % 2) for i in range(1, 7)],
        (1,),
        {0: 1, 1: 3},
    ),
    (
        "Request for 4, multisocket",
        4,
        [(f"Dev{i}", (i - 1) % 4) for i in range(1, 9)],
        (1, 3),
        {1: 2, 3: 2},
    ),
    (
        "Request for 5, socket 0, preferred aligned accepted",
        5,
        _numa_devs([(i, 0) for i in range(100)] + [(i, 1) for i in range(100, 200)]),
        (0,),
        {0: 5},
    ),
    (
        "Request for 5, socket 1, preferred aligned accepted, bogus ignored",
        5,
        _numa_devs([(i, 1) for i in range(100)]),
        (1,),
        {1: 5},
    ),
    (
        "Request for 5, multisocket, preferred accepted",
        5,
        _numa_devs([(i, 0) for i in range(3)] + [(i, 1) for i in range(3, 100)]),
        (0,),
        {0: 3, 1: 2},
    ),
]


@pytest.mark.parametrize(
    ("request_", "devices", "hint", "alignment"),
    [c[1:] for c in ALIGNED],
    ids=[f"TestTopologyAlignedAllocation/{c[0]}" for c in ALIGNED],
)
def test_topology_aligned_allocation(request_, devices, hint, alignment) -> None:  # type: ignore[no-untyped-def]
    nodes = 4 if any(n == 3 for _, n in devices) else 2
    m = machine({"resource": devices}, nodes=nodes)
    dm = DeviceManager(m)
    c = app("containerName", {"resource": request_})
    p = pod(c, uid="podUID")
    dm.allocate(p, c, TopologyHint(mask_of(hint), True))
    got = dm.state.container_devices("podUID", "containerName", "resource")
    assert len(got) == request_
    by_id = {d.id: d for d in m.devices}
    counts: dict[int, int] = {}
    if any(d.numa for d in m.devices):
        for i in got:
            if by_id[i].numa:
                counts[by_id[i].numa[0]] = counts.get(by_id[i].numa[0], 0) + 1
    assert counts == alignment


# ---- devicesToAllocate error paths (manager.go) ---------------------------------------


def test_unavailable_message() -> None:
    dm = DeviceManager(machine({"r/x": [("a", 0), ("b", 1)]}))
    c = app("c", {"r/x": 3})
    with pytest.raises(AdmissionError) as e:
        dm.allocate(pod(c), c, TopologyHint(None, True))
    assert e.value.reason == "UnexpectedAdmissionError"
    assert e.value.message == (
        "Allocate failed due to requested number of devices unavailable for r/x. "
        "Requested: 3, Available: 2, which is unexpected"
    )
    assert dm.state.to_dict() == DeviceState().to_dict()


def test_unhealthy_only() -> None:
    m = Machine("m", (NumaNode(0, GiB),), (), devices=(Device("r/x", "a", (0,), healthy=False),))
    dm = DeviceManager(m)
    c = app("c", {"r/x": 1})
    assert materialize(dm.container_hints(pod(c), c)["r/x"]) == []  # type: ignore[index]
    with pytest.raises(
        AdmissionError, match="no healthy devices present; cannot allocate unhealthy devices r/x"
    ):
        dm.allocate(pod(c), c, TopologyHint(None, True))


def test_a_resource_no_plugin_registered_is_skipped_as_the_kubelet_skips_it() -> None:
    """``isDevicePluginResource``: a resource the manager never knew (no device, nothing
    allocated) gets no hint and no allocation, and the pod is admitted (spec/kubelet.md 2.11)."""
    m = machine({"r/x": [("a", 0)]})
    c = app("c", {"vendor.com/fpga": 1, "r/x": 1})
    dm = DeviceManager(m)
    hints = dm.container_hints(pod(c), c)
    assert hints is not None and "vendor.com/fpga" not in hints
    dm.allocate(pod(c), c, TopologyHint(None, True))
    assert dm.state.container_devices("fakePod", "c", "r/x") == ["a"]
    assert "vendor.com/fpga" not in dm.state.resources()


def test_a_resource_known_from_the_state_without_devices_is_unregistered() -> None:
    """A resource still allocated in the state whose plugin did not come back (no devices):
    ``cannot allocate unregistered device`` (manager.go ``devicesToAllocate``)."""
    m = machine({"r/x": [("a", 0)]})
    dm = DeviceManager(m, state({"other": {"c": {"vendor.com/fpga": ["f0"]}}}))
    c = app("c", {"vendor.com/fpga": 1})
    with pytest.raises(AdmissionError) as e:
        dm.allocate(pod(c), c, TopologyHint(None, True))
    assert e.value.reason == "UnexpectedAdmissionError"
    assert e.value.message == (
        "Allocate failed due to cannot allocate unregistered device vendor.com/fpga, which is unexpected"
    )


def test_changed_request_message() -> None:
    dm = DeviceManager(machine({"r/x": FOUR}), state({"fakePod": {"c": {"r/x": ["Dev1"]}}}))
    c = app("c", {"r/x": 2})
    with pytest.raises(
        AdmissionError,
        match='pod "fakePod" container "c" changed request for resource "r/x" from 1 to 2',
    ):
        dm.allocate(pod(c), c, TopologyHint(None, True))


def test_already_allocated_is_idempotent() -> None:
    dm = DeviceManager(machine({"r/x": FOUR}), state({"fakePod": {"c": {"r/x": ["Dev1"]}}}))
    c = app("c", {"r/x": 1})
    dm.allocate(pod(c), c, TopologyHint(mask_of([1]), True))
    assert dm.state.container_devices("fakePod", "c", "r/x") == ["Dev1"]


def test_init_container_devices_reused_by_app_not_by_second_app() -> None:
    dm = DeviceManager(machine({"r/x": FOUR}))
    i0 = init("i0", {"r/x": 2})
    a0 = app("a0", {"r/x": 1})
    a1 = app("a1", {"r/x": 2})
    p = pod(i0, a0, a1)
    dm.allocate(p, i0, TopologyHint(mask_of([1]), True))
    assert dm.state.container_devices("fakePod", "i0", "r/x") == ["Dev2", "Dev4"]
    # the reusable devices must be touched by every hint mask
    hints = dm.container_hints(p, a0)
    assert materialize(hints["r/x"]) == [H(1, pref=True), H(0, 1, pref=False)]  # type: ignore[index]
    dm.allocate(p, a0, TopologyHint(mask_of([0]), True))
    assert dm.state.container_devices("fakePod", "a0", "r/x") == ["Dev2"]
    dm.allocate(p, a1, TopologyHint(mask_of([1]), True))
    # Dev4 is still reusable, then an aligned free one (Dev1/Dev3 are on node 0: unaligned)
    assert dm.state.container_devices("fakePod", "a1", "r/x") == ["Dev1", "Dev4"]


def test_sidecar_devices_not_reusable() -> None:
    dm = DeviceManager(machine({"r/x": FOUR}))
    sc = Container("sc", ContainerKind.SIDECAR, {}, {"r/x": 1})
    a0 = app("a0", {"r/x": 1})
    p = pod(sc, a0)
    dm.allocate(p, sc, TopologyHint(mask_of([0]), True))
    dm.allocate(p, a0, TopologyHint(mask_of([0]), True))
    assert dm.state.container_devices("fakePod", "sc", "r/x") == ["Dev1"]
    assert dm.state.container_devices("fakePod", "a0", "r/x") == ["Dev3"]


def test_pcie_root_locality() -> None:
    devs = (
        Device("r/x", "gpu0", (0,), pcie_root="A"),
        Device("r/x", "gpu1", (0,), pcie_root="B"),
        Device("r/x", "gpu2", (0,), pcie_root="B"),
        Device("r/x", "gpu3", (0,), pcie_root="A"),
        Device("r/x", "gpu10", (1,), pcie_root="C"),
    )
    m = Machine("m", (NumaNode(0, GiB), NumaNode(1, GiB)), (), devices=devs)
    dm = DeviceManager(m)
    c = app("c", {"r/x": 2})
    dm.allocate(pod(c), c, TopologyHint(mask_of([0]), True))
    assert dm.state.container_devices("fakePod", "c", "r/x") == ["gpu0", "gpu3"]
    c2 = app("c2", {"r/x": 1})
    dm.allocate(pod(c, c2), c2, TopologyHint(mask_of([0]), True))
    assert dm.state.container_devices("fakePod", "c2", "r/x") == ["gpu1"]


def test_release_and_roundtrip() -> None:
    dm = DeviceManager(machine({"r/x": FOUR}))
    i0 = init("i0", {"r/x": 1})
    a0 = app("a0", {"r/x": 2})
    p = pod(i0, a0)
    before = dm.state.to_dict()
    dm.allocate(p, i0, TopologyHint(None, True))
    dm.allocate(p, a0, TopologyHint(None, True))
    assert DeviceState.from_dict(dm.state.to_dict()).to_dict() == dm.state.to_dict()
    dm.release_container("fakePod", "i0")
    assert dm.state.container_devices("fakePod", "a0", "r/x")
    dm.release_pod("fakePod")
    assert dm.state.to_dict() == before


# ---- manager_test.go -----------------------------------------------------------------


def test_init_container_device_allocation() -> None:
    """TestInitContainerDeviceAllocation: init devices are reallocated to app containers."""
    r1, r2 = "domain1.com/resource1", "domain2.com/resource2"
    m = Machine(
        "m",
        (NumaNode(0, GiB),),
        (),
        devices=(
            Device(r1, "dev1"),
            Device(r1, "dev2"),
            Device(r2, "dev3", (0,)),
            Device(r2, "dev4", (0,)),
        ),
    )
    dm = DeviceManager(m)
    i1, i2 = init("i1", {r1: 1}), init("i2", {r1: 2})
    c1, c2 = app("c1", {r1: 1, r2: 1}), app("c2", {r1: 1, r2: 1})
    p = pod(i1, i2, c1, c2)
    for c in (i1, i2, c1, c2):
        dm.allocate(p, c, TopologyHint(None, True))
    got = {c.name: set(dm.state.container_devices("fakePod", c.name, r1)) for c in (i1, i2, c1, c2)}
    assert [len(got[n]) for n in ("i1", "i2", "c1", "c2")] == [1, 2, 1, 1]
    assert got["i2"] >= got["i1"] and got["i2"] >= got["c1"] and got["i2"] >= got["c2"]
    assert not got["c1"] & got["c2"]


def test_restartable_init_container_device_allocation() -> None:
    """TestRestartableInitContainerDeviceAllocation: sidecar devices are not reused."""
    r1 = "domain1.com/resource1"
    m = Machine(
        "m", (NumaNode(0, GiB),), (), devices=tuple(Device(r1, f"dev{i}") for i in range(1, 7))
    )
    dm = DeviceManager(m)
    i1 = init("regularInit1", {r1: 3})
    s2 = Container("restartableInit2", ContainerKind.SIDECAR, {}, {r1: 1})
    s3 = Container("restartableInit3", ContainerKind.SIDECAR, {}, {r1: 2})
    c1, c2 = app("c1", {r1: 1}), app("c2", {r1: 2})
    p = pod(i1, s2, s3, c1, c2)
    for c in (i1, s2, s3, c1, c2):
        dm.allocate(p, c, TopologyHint(None, True))
    got = {
        c.name: set(dm.state.container_devices("fakePod", c.name, r1)) for c in (i1, s2, s3, c1, c2)
    }
    assert [len(got[c.name]) for c in (i1, s2, s3, c1, c2)] == [3, 1, 2, 1, 2]
    assert got["regularInit1"] >= got["restartableInit2"] | got["restartableInit3"]
    dedicated = [got["restartableInit2"], got["restartableInit3"], got["c1"], got["c2"]]
    for a in range(len(dedicated)):
        for b in range(a + 1, len(dedicated)):
            assert not dedicated[a] & dedicated[b]
