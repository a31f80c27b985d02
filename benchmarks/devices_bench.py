"""Device allocation at scale (issue 23): a node of 2 NUMA nodes with N GPUs each, one GPU
already taken on NUMA node 1, and a pod asking for every other GPU of NUMA node 0 - its hints
(container and pod scope) and its allocation in the hint ``{0}``. CPU time
(``time.process_time``), best / median of a few runs, for the device manager and, in the same
run, for the former quadratic code (``tests/devices_reference.py``) where it finishes in
seconds. Layouts: no PCIe information, and 64 GPUs per PCIe root.

Target: 4,096 GPUs per NUMA node under 100 ms.

Run: ``python -m benchmarks devices_bench``.
"""

from __future__ import annotations

from tests.devices_reference import ReferenceDeviceManager

from benchmarks.timing import best_median, cpu_runs
from numalign.engine.hints import TopologyHint
from numalign.machine.model import Cpu, Device, Machine, NumaNode
from numalign.pods import Container, ContainerKind, Pod, QOSClass
from numalign.resources.devices import DeviceManager, DeviceState, machine_index

GPU = "nvidia.com/gpu"
SIZES = (256, 1024, 4096)
#: the former code is run up to this many GPUs per NUMA node (4,096 took about 19 s)
REFERENCE_UP_TO = 1024
TARGET_MS = 100.0


def machine(per_node: int, per_root: int) -> Machine:
    devices = []
    for node in (0, 1):
        for k in range(per_node):
            root = f"pci{node}-{k // per_root}" if per_root else None
            devices.append(Device(GPU, f"gpu{node * per_node + k}", (node,), pcie_root=root))
    return Machine(f"gpus-{per_node}", (NumaNode(0, 1 << 30), NumaNode(1, 1 << 30)),
                   (Cpu(0, 0, 0, 0),), tuple(devices))


def pod(name: str, gpus: int) -> tuple[Pod, Container]:
    c = Container("c", ContainerKind.APP, {GPU: gpus}, {GPU: gpus})
    return Pod("default", name, name, QOSClass.GUARANTEED, (c,)), c


def admit_once(manager: type[DeviceManager], m: Machine, state: DeviceState, per_node: int) -> None:
    p, c = pod("big", per_node - 1)
    dm = manager(m, state.copy())
    dm.container_hints(p, c)
    dm.pod_hints(p)
    dm.allocate(p, c, TopologyHint(0b01, True))
    assert len(dm.state.container_devices(p.uid, c.name, GPU)) == per_node - 1


def timed(manager: type[DeviceManager], per_node: int, per_root: int, runs: int) -> float:
    """Median CPU ms of one admission (the machine's index is made before: once per machine)."""
    m = machine(per_node, per_root)
    state = DeviceState()
    first, c = pod("first", 1)
    manager(m, state).allocate(first, c, TopologyHint(0b10, True))
    admit_once(manager, m, state, per_node)  # warm
    return best_median(cpu_runs(lambda: admit_once(manager, m, state, per_node), runs))[1] * 1e3


def main() -> None:
    print("device allocation: hints + allocation of N-1 GPUs on NUMA node 0 of a 2 x N GPU node "
          "(CPU ms, median)")
    for per_root, layout in ((0, "no PCIe roots"), (64, "64 GPUs per PCIe root")):
        for n in SIZES:
            ours = timed(DeviceManager, n, per_root, 5)
            line = f"  {layout:<22} N={n:>5}: {ours:8.2f} ms"
            if n <= REFERENCE_UP_TO:
                ref = timed(ReferenceDeviceManager, n, per_root, 1)
                line += f"   former code {ref:9.1f} ms ({ref / ours:,.0f}x)"
            if n == max(SIZES):
                line += f"   (target < {TARGET_MS:.0f} ms: {'met' if ours < TARGET_MS else 'MISSED'})"
            print(line)
    machines = [machine(max(SIZES), 64) for _ in range(3)]
    index = best_median(cpu_runs(lambda: machine_index(machines.pop()), 3))[1] * 1e3
    print(f"  the machine's device index (made once per machine, then shared, and pickled with "
          f"it), N={max(SIZES)}: {index:.1f} ms")


if __name__ == "__main__":
    main()
