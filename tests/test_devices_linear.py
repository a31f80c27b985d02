"""The device manager's work is linear in the devices (issue 23: 4,096 GPUs per NUMA node took
19 s), and its decisions are the ones it made before it was.

* ``ReferenceDeviceManager`` (``tests/devices_reference.py``) keeps the former quadratic code
  (hints with one demand item per device, classes sorted by :func:`device_sort_key`, the
  pick-by-pick PCIe walk): a hypothesis test drives both through the same pods and hints and
  compares every hint list and every allocation.
* The work is counted, not timed: every Python bytecode executed (``sys.settrace`` with
  ``f_trace_opcodes``) for hints and allocation of a pod taking all the devices of one NUMA
  node, at n and 4n devices per node. Linear work gives a ratio near 4 (3.0-3.6 measured);
  the former code gave 10-14 (64 -> 256 devices per node) and over 4,000 bytecodes per device.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from devices_reference import ReferenceDeviceManager
from numalign.engine.hints import GeneratedHints, ResourceHints, TopologyHint
from numalign.errors import AdmissionError
from numalign.machine.model import Cpu, Device, Machine, NumaNode
from numalign.modes.koordinator.devices import KoordinatorDeviceManager
from numalign.pods import Container, ContainerKind, Pod, QOSClass
from numalign.resources.devices import DeviceManager, DeviceState

GPU = "nvidia.com/gpu"
NIC = "example.com/nic"


# ---------------------------------------------------------------------------- equal decisions

SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def machines(draw: Any) -> Machine:
    nodes = draw(st.integers(1, 4))
    devices = []
    # ids with distinct natural keys (no leading zeros), several prefixes so the order mixes
    numbers = draw(st.lists(st.integers(0, 40), min_size=0, max_size=24, unique=True))
    for k, n in enumerate(numbers):
        resource = GPU if k % 3 else NIC
        prefix = draw(st.sampled_from(["gpu", "dev-", "x"]))
        numa = tuple(sorted(draw(st.lists(st.integers(0, nodes - 1), max_size=2, unique=True))))
        root = draw(st.one_of(st.none(), st.sampled_from(["pci0", "pci1", "pci2", "pci3", ""])))
        devices.append(Device(resource, f"{prefix}{n}", numa, healthy=draw(st.integers(0, 5)) > 0,
                              pcie_root=root))
    return Machine("m", tuple(NumaNode(i, 1 << 30) for i in range(nodes)),
                   (Cpu(0, 0, 0, 0),), tuple(devices))


KINDS = {"init": ContainerKind.INIT, "side": ContainerKind.SIDECAR, "app": ContainerKind.APP}


@st.composite
def pods(draw: Any) -> list[Pod]:
    out = []
    for p in range(draw(st.integers(1, 5))):
        containers = []
        for c, kind in enumerate(draw(st.lists(st.sampled_from(["init", "side", "app"]),
                                               min_size=1, max_size=3))):
            limits = {r: draw(st.integers(0, 5)) for r in draw(st.sets(st.sampled_from([GPU, NIC])))}
            containers.append(Container(f"{kind}{c}", KINDS[kind], {}, limits))
        order = {"init": 0, "side": 0, "app": 1}
        containers.sort(key=lambda c: order[c.name.rstrip("0123456789")])
        out.append(Pod("ns", f"p{p}", f"uid{p}", QOSClass.BEST_EFFORT, tuple(containers)))
    return out


def _listed(h: ResourceHints) -> Any:
    if isinstance(h, GeneratedHints):
        return [(x.affinity, x.preferred) for x in h.materialize()]
    return h


@SETTINGS
@given(machines(), pods(), st.lists(st.integers(0, 15), min_size=1, max_size=8))
def test_linear_manager_decides_as_the_reference(machine: Machine, pod_list: list[Pod],
                                                 picks: list[int]) -> None:
    new, ref = DeviceManager(machine), ReferenceDeviceManager(machine)
    k = 0
    for pod in pod_list:
        for c in pod.containers:
            hints_new = {r: _listed(h) for r, h in new.container_hints(pod, c).items()}
            hints_ref = {r: _listed(h) for r, h in ref.container_hints(pod, c).items()}
            assert hints_new == hints_ref
            # a hint to allocate in: one of the listed ones, or any mask, or none
            listed = [m for h in hints_new.values() if isinstance(h, list) for m, _ in h]
            pick = picks[k % len(picks)]
            k += 1
            affinity = (listed[pick % len(listed)] if listed and pick % 3 else
                        (pick % (1 << len(machine.numa_nodes)) or None))
            hint = TopologyHint(affinity, True)
            outcome = []
            for dm in (new, ref):
                try:
                    dm.allocate(pod, c, hint)
                    outcome.append(None)
                except AdmissionError as e:
                    outcome.append(str(e))
            assert outcome[0] == outcome[1]
            assert new.state.allocated == ref.state.allocated
            assert new.state.reusable == ref.state.reusable
        assert {r: _listed(h) for r, h in new.pod_hints(pod).items()} == \
            {r: _listed(h) for r, h in ref.pod_hints(pod).items()}


# ---------------------------------------------------------------------------- linear work


def count_bytecodes(fn: Callable[[], object]) -> int:
    """How many Python bytecodes ``fn()`` executes (in every Python frame it calls)."""
    count = 0

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal count
        if event == "call":
            frame.f_trace_opcodes = True
        elif event == "opcode":
            count += 1
        return tracer

    old = sys.gettrace()
    sys.settrace(tracer)
    try:
        fn()
    finally:
        sys.settrace(old)
    return count


def wide_machine(per_node: int, roots_per_node: int) -> Machine:
    """2 NUMA nodes with ``per_node`` GPUs each, spread over ``roots_per_node`` PCIe roots
    per node (0: no PCIe information)."""
    devices = []
    for node in (0, 1):
        for k in range(per_node):
            root = f"pci{node}-{k % roots_per_node}" if roots_per_node else None
            devices.append(Device(GPU, f"gpu{node * per_node + k}", (node,), pcie_root=root))
    return Machine(f"wide{per_node}", (NumaNode(0, 1 << 30), NumaNode(1, 1 << 30)),
                   (Cpu(0, 0, 0, 0),), tuple(devices))


def _admission_work(manager: type[DeviceManager], per_node: int, roots: int) -> int:
    """Bytecodes for the hints and the allocation of a pod holding one GPU, then a pod taking
    every other GPU of NUMA node 0 (the state is warm: the machine's index is made)."""
    machine = wide_machine(per_node, roots)
    manager(machine).container_hints(*_pod(1, "warm"))
    state = DeviceState()
    first = _pod(1, "first")
    manager(machine, state).allocate(first[0], first[1], TopologyHint(0b10, True))
    pod, c = _pod(per_node - 1, "big")

    def admit() -> None:
        dm = manager(machine, state.copy())
        dm.container_hints(pod, c)
        dm.pod_hints(pod)
        dm.allocate(pod, c, TopologyHint(0b01, True))
        assert len(dm.state.container_devices(pod.uid, c.name, GPU)) == per_node - 1

    return count_bytecodes(admit)


def _pod(gpus: int, name: str) -> tuple[Pod, Container]:
    c = Container("c", ContainerKind.APP, {GPU: gpus}, {GPU: gpus})
    return Pod("ns", name, name, QOSClass.GUARANTEED, (c,)), c


def test_device_work_is_linear_in_devices_per_numa_node() -> None:
    for manager in (DeviceManager, KoordinatorDeviceManager):
        for roots in (0, 4, 64):
            small = _admission_work(manager, 256, roots)
            large = _admission_work(manager, 1024, roots)
            # 4x the devices: about 4x the work (n log n would be ~5x; the former code: ~16x)
            assert large / small < 5.0, (manager.__name__, roots, small, large)
            # and a small constant per device
            assert large / (2 * 1024) < 120, (manager.__name__, roots, large)
