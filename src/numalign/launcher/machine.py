"""The machine a launch plans for, and the launcher's kubelet configuration over it.

One configuration for every run sharing a state directory (they share the CPU and memory
managers' state):

* ``cpuManagerPolicy: static``; reserved CPUs: every thread of the core of the lowest online
  CPU (``reserved_cpus`` overrides; the static policy needs a reservation > 0, and the
  system's own housekeeping lives there);
* ``memoryManagerPolicy: Static`` when memory is requested: the process is then bound
  (``MPOL_BIND``) to the nodes the memory manager chose; ``reservedMemory`` is 100Mi (the
  kubelet's default hard eviction threshold) on the lowest NUMA node having room, unless the
  machine spec has its own. The shared state always keeps the Static memory state; a request
  without memory is admitted with the ``None`` policy over it (a Guaranteed pod needs a memory
  limit, so it carries a nominal 1Mi that nothing accounts): under Static, a nominal request's
  only preferred hints are single nodes, and ``restricted`` would refuse every CPU request
  spanning two nodes. Such a process is not bound (first-touch keeps its memory local to its
  CPUs anyway);
* ``topologyManagerPolicy`` from ``policy``, default ``restricted``: it never spreads a request
  over more NUMA nodes than the smallest set that could hold it, yet a request larger than one
  node (8 GPUs on a box with 4 GPUs per node) still runs, which ``single-numa-node`` would
  refuse forever; scope ``container`` (one container); ``max-allowable-numa-nodes`` raised to
  the machine's node count when above 8;
* CPU and topology *options* of a machine spec are kept.

**A machine spec's kubelet section is honoured** (``run -m SPEC``, ``from_spec``): when the
spec has one, its ``topologyManagerPolicy`` and ``topologyManagerScope`` replace the
launcher's defaults (an explicit ``--policy`` still wins), its ``reservedSystemCPUs`` replace
the default reserved core (an explicit ``--reserved-cpus`` still wins), and its
``reservedMemory``, ``systemReserved``/``kubeReserved``, ``evictionHard``, ``maxPods`` and
feature gates stay. The CPU manager is always ``static`` (pinning exclusive CPUs is the point
of the launcher); a spec that asks for ``cpuManagerPolicy: none`` is refused (exit 2) rather
than silently changed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from numalign.errors import InputError
from numalign.inputs.quantity import format_bytes
from numalign.launcher.defaults import DEFAULT_POLICY

if TYPE_CHECKING:
    from numalign.machine.model import Machine

RESERVED_MEMORY = 100 << 20
MIB = 1 << 20


@dataclass(frozen=True)
class Source:
    """A discovered or described machine; ``live`` = this host's own sysfs."""

    machine: Machine
    live: bool
    warnings: tuple[str, ...] = ()


def load_source(machine_file: str | None, sysfs_root: str | None) -> Source:
    """A machine spec file, a captured sysfs root, or (neither) this host."""
    if machine_file and sysfs_root:
        raise InputError("give a machine file or a sysfs root, not both")
    if machine_file:
        from numalign.machine.spec import read_machine_file

        return Source(read_machine_file(machine_file), False)
    from numalign.machine.sysfs import load_sysfs

    root = sysfs_root or "/"
    found = load_sysfs(root)
    return Source(found.machine, os.path.realpath(root) == "/", tuple(found.warnings))


def default_reserved_cpus(machine: Machine) -> frozenset[int]:
    """Every thread of the core of the lowest online CPU."""
    online = machine.online_cpus
    if not online:
        raise InputError("the machine has no online CPU")
    core = online[0].core
    return frozenset(c.id for c in online if c.core == core)


def launcher_machine(
    machine: Machine, policy: str | None = None, reserved_cpus: frozenset[int] | None = None,
    *, memory: bool = True, from_spec: bool = False,
) -> Machine:
    """``machine`` with the launcher's kubelet configuration (see the module docstring);
    ``memory`` = False gives ``memoryManagerPolicy: None`` (a request without memory);
    ``from_spec``: ``machine`` comes from a machine spec whose kubelet section is honoured."""
    from numalign.engine.policies import DEFAULT_MAX_NUMA_NODES, MAX_ALLOWABLE, parse_policy
    from numalign.machine.model import KubeletConfig, ReservedMemory

    kc = machine.kubelet
    honour = from_spec and kc != KubeletConfig()
    scope = "container"
    if honour:
        if kc.cpu_manager_policy != "static":
            raise InputError(
                f'the launcher pins exclusive CPUs, which needs cpuManagerPolicy "static", but '
                f'the machine spec says "{kc.cpu_manager_policy}"', "kubelet.cpuManagerPolicy")
        if policy is None:
            policy, scope = kc.topology_manager_policy, kc.topology_manager_scope
        if reserved_cpus is None:
            reserved_cpus = kc.reserved_system_cpus
    policy = policy or DEFAULT_POLICY
    parse_policy(policy, "policy")
    options = dict(kc.topology_manager_policy_options)
    nodes = len(machine.numa_nodes)
    if nodes > DEFAULT_MAX_NUMA_NODES:
        current = options.get(MAX_ALLOWABLE, str(DEFAULT_MAX_NUMA_NODES))
        options[MAX_ALLOWABLE] = str(max(nodes, int(current) if current.isdigit() else 0))
    reserved_memory = kc.reserved_memory
    if not any(r.limits.get("memory", 0) > 0 for r in reserved_memory):
        hosts = [n for n in machine.numa_nodes if n.memory - sum(n.hugepages.values()) >= 2 * RESERVED_MEMORY]
        if not hosts:
            raise InputError(
                f"no NUMA node has {format_bytes(2 * RESERVED_MEMORY)} of regular memory to reserve "
                "100Mi for the system (give the machine spec a kubelet.reservedMemory)"
            )
        reserved_memory = (ReservedMemory(hosts[0].id, {"memory": RESERVED_MEMORY}),)
    return machine.replace(kubelet=kc.replace(
        topology_manager_policy=policy,
        topology_manager_scope=scope,
        topology_manager_policy_options=options,
        cpu_manager_policy="static",
        reserved_system_cpus=reserved_cpus or default_reserved_cpus(machine),
        memory_manager_policy="Static" if memory else "None",
        reserved_memory=reserved_memory,
    ))


def without_memory(machine: Machine) -> Machine:
    """``machine`` with ``memoryManagerPolicy: None`` (for a request without memory)."""
    return machine.replace(kubelet=machine.kubelet.replace(memory_manager_policy="None"))
