"""What ``numalign discover`` does: pick a source, discover, and print the result.

:func:`discover` reads one source (live sysfs, a captured tree or tarball, hwloc XML, an hwloc
synthetic description, a NodeResourceTopology or a Volcano Numatopology);
:func:`render_discovery` prints it as the machine spec (``yaml``/``json``), as a table in the
spirit of ``numactl -H`` plus an ``lstopo`` digest (``table``), or as an NRT object (``nrt``).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import replace

from numalign.errors import InputError
from numalign.inputs.cpulist import format_cpulist
from numalign.inputs.quantity import format_bytes, format_bytes_human
from numalign.machine.devices_naming import load_rules
from numalign.machine.model import Machine
from numalign.machine.sysfs import Discovery

FORMATS = ("yaml", "json", "table", "nrt")


def discover(
    *,
    sysfs_root: str | None = None,
    hwloc_xml: str | None = None,
    hwloc_synthetic: str | None = None,
    nrt: str | None = None,
    numatopo: str | None = None,
    device_rules: str | None = None,
    ask_kubelet: bool = True,
) -> Discovery:
    """Discover from at most one source; none given = the live system (``/``). On the live
    system (``/``), ``ask_kubelet``: the kubelet version is asked of the host's kubelet binary
    (:func:`with_live_kubelet_version`)."""
    given = [s for s in (sysfs_root, hwloc_xml, hwloc_synthetic, nrt, numatopo) if s is not None]
    if len(given) > 1:
        raise InputError("give at most one source")
    rules = load_rules(device_rules)
    if hwloc_xml is not None:
        from numalign.machine.hwloc import load_hwloc_xml

        return load_hwloc_xml(hwloc_xml, rules)
    if hwloc_synthetic is not None:
        from numalign.machine.hwloc import hwloc_synthetic as synth

        return synth(hwloc_synthetic, rules)
    if nrt is not None:
        from numalign.machine.nrt import load_nrt

        return Discovery(machine=load_nrt(nrt))
    if numatopo is not None:
        from numalign.machine.numatopo import load_numatopo

        m = load_numatopo(numatopo)
        return Discovery(machine=m, warnings=["Numatopology has no memory, distances or devices"])
    from numalign.machine.sysfs import load_sysfs

    found = load_sysfs(sysfs_root or "/", rules)
    if ask_kubelet and os.path.realpath(sysfs_root or "/") == "/":
        return with_live_kubelet_version(found)
    return found


def with_live_kubelet_version(found: Discovery) -> Discovery:
    """``found`` (this host's discovery) with the version its kubelet binary prints as
    ``kubelet.kubeletVersion`` (none when it gives none); the way it went in :attr:`notes`."""
    from numalign.machine.kubelet_binary import ask_kubelet as ask

    answer = ask()
    machine = found.machine
    if answer.version is not None:
        machine = machine.replace(kubelet=machine.kubelet.replace(kubelet_version=answer.version))
    return replace(found, machine=machine, notes=[*found.notes, answer.note])


def render_discovery(d: Discovery, fmt: str) -> str:
    """The discovered machine as text in ``fmt`` (one of :data:`FORMATS`)."""
    if fmt == "table":
        return render_table(d.machine)
    if fmt == "nrt":
        from numalign.inputs.pyyaml import yaml
        from numalign.machine.nrt import machine_to_nrt

        return yaml.safe_dump(machine_to_nrt(d.machine), sort_keys=False)
    from numalign.machine.spec import dump_machine, dump_machine_yaml

    if fmt == "json":
        return json.dumps(dump_machine(d.machine), indent=2) + "\n"
    if fmt == "yaml":
        return dump_machine_yaml(d.machine)
    raise InputError(f"unknown output format {fmt!r}; expected one of {', '.join(FORMATS)}")


def _mb(n: int) -> str:
    return f"{n >> 20} MB"


def render_table(m: Machine) -> str:
    """The machine laid out like ``numactl -H`` (available nodes; per node its CPUs, size and
    free memory; the node distance matrix), then what numactl does not show: per node its
    cores and L3s, hugepages and devices, and the machine and kubelet settings in one line each.

    Discovery knows no usage: ``free`` is the node's memory less the kubelet's
    ``reservedMemory`` for it, i.e. what pods could get.
    """
    online = m.online_cpus
    offline = [c.id for c in m.cpus if not c.online]
    reserved: dict[int, int] = {
        e.numa_node: e.limits.get("memory", 0) for e in m.kubelet.reserved_memory
    }
    lines = [f"available: {len(m.node_ids)} nodes ({format_cpulist(m.node_ids)})"]
    for n in m.numa_nodes:
        cpus = [c.id for c in online if c.numa == n.id]
        lines.append(f"node {n.id} cpus: {' '.join(map(str, cpus))}".rstrip())
        lines.append(f"node {n.id} size: {_mb(n.memory)}")
        lines.append(f"node {n.id} free: {_mb(max(0, n.memory - reserved.get(n.id, 0)))}")
    if m.has_distances and len(m.node_ids) > 0:
        ids = m.node_ids
        width = max(4, *(len(str(i)) + 1 for i in ids))
        lines.append("node distances:")
        lines.append("node " + "".join(f"{i:>{width}}" for i in ids))
        for i in ids:
            row = m.node_by_id[i].distances
            lines.append(f"{i:>4}:" + "".join(f"{row[j]:>{width}}" for j in ids))
    else:
        lines.append("node distances: unknown")

    per_node_devices: dict[int, Counter[str]] = {i: Counter() for i in m.node_ids}
    unplaced: Counter[str] = Counter()
    multi: Counter[tuple[str, tuple[int, ...]]] = Counter()
    for d in m.devices:
        if not d.numa:
            unplaced[d.resource] += 1
        elif len(d.numa) > 1:
            multi[(d.resource, d.numa)] += 1
        else:
            per_node_devices.setdefault(d.numa[0], Counter())[d.resource] += 1
    lines.append("")
    for n in m.numa_nodes:
        cpus_of = [c for c in online if c.numa == n.id]
        parts = [f"node {n.id}: {format_cpulist(c.id for c in cpus_of) or 'no CPUs'}"]
        if cpus_of:
            sockets = sorted({c.socket for c in cpus_of})
            l3 = {c.uncore_cache for c in cpus_of if c.uncore_cache is not None}
            parts.append(f"socket {format_cpulist(sockets)}, {len({c.core for c in cpus_of})} cores"
                         + (f", {len(l3)} L3" if l3 else ""))
        parts.append(format_bytes_human(n.memory))
        lines.append(", ".join(parts))
        if n.hugepages:
            pages = [
                f"{format_bytes(size)} x {total // size}" for size, total in sorted(n.hugepages.items())
            ]
            lines.append(f"node {n.id} hugepages: {', '.join(pages)}")
        devs = per_node_devices.get(n.id)
        if devs:
            lines.append(
                f"node {n.id} devices: " + ", ".join(f"{r} x{c}" for r, c in sorted(devs.items()))
            )
    for (res, numa), c in sorted(multi.items()):
        lines.append(f"nodes {format_cpulist(numa)} devices: {res} x{c}")
    if unplaced:
        lines.append(
            "devices without NUMA locality: "
            + ", ".join(f"{r} x{c}" for r, c in sorted(unplaced.items()))
        )
    lines.append(
        f"machine {m.name}: {len(m.node_ids)} NUMA nodes, {len(m.sockets)} sockets, "
        f"{len({c.core for c in online})} cores, {len(online)} CPUs online"
        + (f" ({format_cpulist(offline)} offline)" if offline else "")
        + f", {m.cpus_per_core} thread(s) per core"
    )
    k = m.kubelet
    lines.append(
        f"kubelet: topology manager {k.topology_manager_policy}/{k.topology_manager_scope}, "
        f"cpu manager {k.cpu_manager_policy}, memory manager {k.memory_manager_policy}"
        + (f", reserved CPUs {format_cpulist(k.reserved_system_cpus)}"
           if k.reserved_system_cpus else "")
    )
    return "\n".join(lines) + "\n"
