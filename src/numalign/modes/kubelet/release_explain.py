"""What ``--explain`` says about a node's kubelet release for one pod.

Which release the node decides by and how numalign knows it, and how many NUMA masks that
kubelet's hint providers would enumerate for the pod: the kubelet builds its hints by visiting
every subset of a set of NUMA nodes (``bitmask.IterateBitMasks``, 2^n - 1 masks), where numalign
decides by rule without enumerating. The sets, per provider:

* device manager: every NUMA node of the machine before v1.36; the NUMA nodes of the resource's
  devices from v1.36 (kubernetes#138244); only for resources whose devices report a NUMA node;
* CPU manager (static policy, Guaranteed pod, whole CPUs): the NUMA nodes that have CPUs
  (``generateCPUTopologyHints`` over ``CPUDetails.NUMANodes()``);
* memory manager (``Static``, Guaranteed pod): every NUMA node of its machine state, memory-only
  nodes included (``calculateHints``), in every modelled release.

Above :data:`UNFINISHED_MASKS` masks numalign says the kubelet would not finish the pod's hints
in practice (kubernetes#135541: a GB200 tray's 34 NUMA nodes, 2^34 - 1 masks, stall admission).
The line is numalign's judgment, not a kubelet constant.
"""

from __future__ import annotations

from numalign.inputs.quantity import MEMORY, is_hugepages_resource
from numalign.machine.model import Machine
from numalign.modes.kubelet.releases import DeviceHints, ResolvedRelease
from numalign.pods import Pod, QOSClass
from numalign.resources.devices import pod_limits

#: masks beyond which the kubelet's hint generation is said not to finish (2^32: 32 NUMA nodes)
UNFINISHED_MASKS = 1 << 32


def _count(n: int) -> str:
    masks = (1 << n) - 1
    verdict = " - would not finish in practice" if masks >= UNFINISHED_MASKS else ""
    return f"2^{n} - 1 = {masks} masks{verdict}"


def release_notes(resolved: ResolvedRelease, machine: Machine, pod: Pod) -> list[str]:
    """The ``--explain`` lines of the node's kubelet release for ``pod``."""
    release = resolved.release
    out = [resolved.how]
    kc = machine.kubelet
    limits = pod_limits(pod)
    for resource in sorted(machine.device_resources):
        if limits.get(resource, 0) <= 0:
            continue
        devices = machine.devices_of(resource)
        held = sorted({n for d in devices for n in d.numa if n in machine.node_by_id})
        if not held:
            continue  # no topology: the kubelet gives no hints for it
        if release.device_hints is DeviceHints.DEVICE_NUMA_NODES:
            n, over = len(held), f"the {len(held)} NUMA nodes holding its devices"
        else:
            n, over = len(machine.node_ids), f"all {len(machine.node_ids)} NUMA nodes"
        out.append(f"device hints for {resource} ({release.name}): {over}, {_count(n)}")
    guaranteed = pod.qos is QOSClass.GUARANTEED
    if guaranteed and kc.cpu_manager_policy == "static" and limits.get("cpu", 0) > 0:
        with_cpus = len({c.numa for c in machine.online_cpus})
        out.append(f"CPU hints (static policy): the {with_cpus} NUMA nodes with CPUs, {_count(with_cpus)}")
    wants_memory = any(r == MEMORY or is_hugepages_resource(r) for r in limits)
    if guaranteed and kc.memory_manager_policy == "Static" and wants_memory:
        n = len(machine.node_ids)
        out.append(f"memory hints (Static memory manager, every release): all {n} NUMA nodes, "
                   f"{_count(n)}")
    if any("would not finish" in line for line in out[1:]):
        out.append("numalign decides this pod by rule without enumerating masks; the node's "
                   "kubelet would not finish its admission")
    return out


__all__ = ["UNFINISHED_MASKS", "release_notes"]
