"""Property tests of the device manager: hint rule == kubelet enumeration, exclusivity,
alignment inside the hint, exact release."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from numalign.engine.bitmask import iterate_masks, mask_of
from numalign.engine.hints import GeneratedHints, TopologyHint
from numalign.errors import AdmissionError
from numalign.machine.model import Device, Machine, NumaNode
from numalign.pods import Container, ContainerKind, Pod, QOSClass
from numalign.resources.devices import DeviceManager, generate_hints

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
R = "example.com/dev"


def kubelet_generate(
    nodes: list[int],
    all_devs: list[Device],
    available: list[Device],
    reusable: list[Device],
    request: int,
) -> list[tuple[int, bool]]:
    """Straight transcription of generateDeviceTopologyHints (the reference)."""
    min_size = len(nodes)
    out: list[int] = []
    for mask in iterate_masks(nodes):
        in_mask = sum(1 for d in all_devs if mask_of(d.numa) & mask)
        if in_mask >= request and mask.bit_count() < min_size:
            min_size = mask.bit_count()
        matching = 0
        skip = False
        for d in reusable:
            if not d.numa:
                continue
            if not mask_of(d.numa) & mask:
                skip = True
                break
            matching += 1
        if skip:
            continue
        matching += sum(1 for d in available if mask_of(d.numa) & mask)
        if matching < request:
            continue
        out.append(mask)
    return [(m, m.bit_count() == min_size) for m in out]


@st.composite
def device_sets(draw: Any) -> tuple[list[int], list[Device]]:
    n = draw(st.integers(1, 5))
    nodes = sorted(draw(st.lists(st.integers(0, 7), min_size=n, max_size=n, unique=True)))
    devs = []
    for i in range(draw(st.integers(0, 9))):
        numa = tuple(sorted(draw(st.lists(st.sampled_from(nodes), max_size=2, unique=True))))
        devs.append(Device(R, f"d{i}", numa, healthy=draw(st.booleans()) or draw(st.booleans())))
    return nodes, devs


@SETTINGS
@given(device_sets(), st.data())
def test_generated_hints_equal_kubelet_enumeration(
    case: tuple[list[int], list[Device]], data: Any
) -> None:
    nodes, devs = case
    reusable = data.draw(st.lists(st.sampled_from(devs), unique=True)) if devs else []
    rest = [d for d in devs if d not in reusable]
    available = data.draw(st.lists(st.sampled_from(rest), unique=True)) if rest else []
    request = data.draw(st.integers(0, 6))
    expected = kubelet_generate(nodes, devs, available, reusable, request)
    got = generate_hints(nodes, devs, available, reusable, request)
    if isinstance(got, GeneratedHints):
        assert [(h.affinity, h.preferred) for h in got.materialize()] == expected
    else:
        assert got == [] and expected == []


def container(name: str, count: int) -> Container:
    kind = ContainerKind.APP
    if name.startswith("init"):
        kind = ContainerKind.INIT
    elif name.startswith("side"):
        kind = ContainerKind.SIDECAR
    return Container(name, kind, {}, {R: count})


pods_strategy = st.lists(
    st.lists(
        st.tuples(st.sampled_from(["init1", "init2", "side1", "app1", "app2"]), st.integers(0, 3)),
        min_size=1,
        max_size=4,
        unique_by=lambda t: t[0],
    ),
    min_size=1,
    max_size=6,
)
ORDER = {"init1": 0, "init2": 1, "side1": 2, "app1": 3, "app2": 4}


@SETTINGS
@given(device_sets(), pods_strategy, st.integers(0, 50), st.booleans())
def test_exclusive_aligned_and_release_exact(
    case: tuple[list[int], list[Device]], pods: Any, pick: int, pod_scope: bool
) -> None:
    nodes, devs = case
    m = Machine("m", tuple(NumaNode(i, 1 << 30) for i in nodes), (), devices=tuple(devs))
    dm = DeviceManager(m)
    by_id = {d.id: d for d in devs}
    initial = dm.state.to_dict()
    admitted: list[str] = []
    for i, spec in enumerate(pods):
        cs = tuple(container(n, c) for n, c in sorted(spec, key=lambda t: ORDER[t[0]]))
        pod = Pod("ns", f"p{i}", f"p{i}", QOSClass.BEST_EFFORT, cs)
        before = dm.state.to_dict()
        ok = True
        pod_hint = TopologyHint(None, True)
        if pod_scope:
            h = (dm.pod_hints(pod) or {}).get(R)
            mat = h.materialize() if isinstance(h, GeneratedHints) else list(h or [])
            if mat:
                pod_hint = mat[(pick + i) % len(mat)]
        for c in cs:
            hint = pod_hint
            if not pod_scope:
                h = (dm.container_hints(pod, c) or {}).get(R)
                mat = h.materialize() if isinstance(h, GeneratedHints) else list(h or [])
                hint = mat[(pick + i) % len(mat)] if mat else TopologyHint(None, True)
            snapshot = dm.state.to_dict()
            try:
                dm.allocate(pod, c, hint)
            except AdmissionError:
                assert dm.state.to_dict() == snapshot  # never mutated on error
                ok = False
                break
            got = dm.state.container_devices(pod.uid, c.name, R)
            if not devs:
                # never registered: the kubelet's device manager skips the resource
                assert got == []
                continue
            assert len(got) == c.limits[R] or (c.limits[R] == 0 and got == [])
            assert all(by_id[d].healthy for d in got)
            if hint.affinity is not None and not pod_scope and hint.preferred:
                # a preferred container hint always leaves enough devices touching it
                for d in got:
                    if by_id[d].numa:
                        assert mask_of(by_id[d].numa) & hint.affinity
        if ok:
            admitted.append(pod.uid)
        else:
            dm.release_pod(pod.uid)
            assert dm.state.to_dict() == before
        # exclusivity: across pods disjoint; in a pod, long-running containers disjoint
        owner: dict[str, str] = {}
        for uid, conts in dm.state.allocated.items():
            for cname, rs in conts.items():
                long_running = not cname.startswith("init")
                for d in rs.get(R, []):
                    key = owner.get(d)
                    if key is not None:
                        ouid, ocname = key.split("/")
                        assert ouid == uid
                        assert not (long_running and not ocname.startswith("init"))
                    if long_running or key is None:
                        owner[d] = f"{uid}/{cname}"
    for uid in reversed(admitted):
        dm.release_pod(uid)
    assert dm.state.to_dict() == initial


def test_sixty_four_nodes_fast() -> None:
    nodes = list(range(64))
    devs = tuple(Device(R, f"gpu{i}", (i // 2,)) for i in range(128))
    m = Machine("m", tuple(NumaNode(i, 1 << 30) for i in nodes), (), devices=devs)
    dm = DeviceManager(m)
    c = Container("c", ContainerKind.APP, {}, {R: 4})
    pod = Pod("ns", "p", "p", QOSClass.BEST_EFFORT, (c,))
    h = dm.container_hints(pod, c)[R]  # type: ignore[index]
    assert isinstance(h, GeneratedHints)
    assert h.preferred_size == 2
    pm = h.preferred_masks()
    assert pm is not None and next(pm) == 0b11
    dm.allocate(pod, c, TopologyHint(0b11, True))
    assert dm.state.container_devices("p", "c", R) == ["gpu0", "gpu1", "gpu2", "gpu3"]
