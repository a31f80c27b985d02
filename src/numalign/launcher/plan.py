"""What an admitted request gets and how its process will be pinned; the dry run.

Environment of the child: ``NUMALIGN_ALLOCATION``, ``NUMALIGN_CPUS``, ``NUMALIGN_NUMA_NODES``,
``NUMALIGN_MEMORY_NODES`` (cpulist syntax), and the GPU visibility variables
(:func:`numalign.launcher.pinning.device_env`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from numalign.inputs.cpulist import format_cpulist

if TYPE_CHECKING:
    from numalign.launcher.request import LaunchRequest
    from numalign.launcher.runs import Identity
    from numalign.machine.model import Machine
    from numalign.node.admission import PodResult


@dataclass
class Plan:
    """An admitted request and how the process will be pinned."""

    result: PodResult
    state_dir: Path | None
    cpus: frozenset[int] = frozenset()
    numa_nodes: tuple[int, ...] = ()
    memory_nodes: tuple[int, ...] = ()
    devices: dict[str, list[str]] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    pin_cpus: bool = False
    bind: str = "none"  # syscall | numactl | none
    notes: list[str] = field(default_factory=list)
    reclaimed: list[str] = field(default_factory=list)


def make_plan(result: PodResult, machine: Machine, request: LaunchRequest, state_dir: Path | None,
              *, pin: bool = True) -> Plan:
    """How an admitted request is applied to a process (probes this process; no side effects)."""
    from numalign.engine.bitmask import ids_of
    from numalign.launcher.pinning import (
        device_env,
        mempolicy_problem,
        numactl,
        usable_cpus,
        usable_mems,
    )

    if not result.admitted or not result.containers:
        return Plan(result, state_dir, notes=[f"not admitted: {result.reason}: {result.message}"])
    c = result.containers[0]
    mem_nodes = sorted({int(n) for key in c.memory for n in key.split(",")})
    plan = Plan(result, state_dir, c.cpus,
                tuple(ids_of(c.affinity)) if c.affinity is not None else (),
                tuple(mem_nodes), {k: list(v) for k, v in c.devices.items()})
    plan.env = {
        "NUMALIGN_ALLOCATION": result.pod.key,
        "NUMALIGN_CPUS": format_cpulist(c.cpus),
        "NUMALIGN_NUMA_NODES": format_cpulist(plan.numa_nodes),
        "NUMALIGN_MEMORY_NODES": format_cpulist(mem_nodes) if request.binds_memory else "",
        **device_env(machine, plan.devices),
    }
    if not pin:
        plan.notes.append("pinning skipped: --no-pin")
        return plan
    missing = c.cpus - usable_cpus()
    if missing:
        plan.notes.append(
            f"pinning skipped: CPUs {format_cpulist(missing)} are not available to this process "
            "(planning for a machine that is not this host?)")
    else:
        plan.pin_cpus = True
    if not request.binds_memory:
        plan.notes.append("memory not bound (no --memory/--hugepages requested)")
        return plan
    allowed = usable_mems()
    if allowed is not None and not set(mem_nodes) <= allowed:
        plan.notes.append(f"memory binding skipped: NUMA nodes {format_cpulist(set(mem_nodes) - allowed)} "
                          "are not available to this process")
        return plan
    problem = mempolicy_problem()
    if problem is None:
        plan.bind = "syscall"
    elif numactl() is not None:
        plan.bind = "numactl"
        plan.notes.append(f"{problem}; binding memory with numactl --membind")
    else:
        plan.notes.append(f"memory not bound: {problem}, and numactl is not installed")
    return plan


def dry_run(machine: Machine, request: LaunchRequest, state_dir: Path | None, ident: Identity,
            *, pin: bool = True) -> Plan:
    """What ``request`` would get now on ``machine`` (launcher configuration) given the
    allocations in ``state_dir``: nothing is written, dead runs are reclaimed in memory only,
    a rejection is a plan that is not admitted (with every provider's hints)."""
    from numalign.launcher.admission import admit
    from numalign.launcher.request import request_pod

    pod = request_pod(request, machine, ident)
    result, reclaimed = admit(machine, pod, state_dir, record=None, explain=True,
                              bind_memory=request.binds_memory)
    plan = make_plan(result, machine, request, state_dir, pin=pin)
    plan.reclaimed = reclaimed
    return plan


def start(plan: Plan, argv: Sequence[str], name: str) -> int:
    """Run ``argv`` as ``plan`` says (cgroup ``numalign-<name>``); its shell-style status."""
    from numalign.launcher.pinning import run_bound

    return run_bound(argv, {**os.environ, **plan.env}, cpus=plan.cpus if plan.pin_cpus else None,
                     memory_nodes=plan.memory_nodes, bind=plan.bind, cgroup=f"numalign-{name}")


def plan_doc(plan: Plan, warnings: Sequence[str] = ()) -> dict[str, Any]:
    """The plan as a JSON document."""
    from numalign.node.render import pod_doc

    return {
        "allocation": pod_doc(plan.result),
        "state_dir": str(plan.state_dir) if plan.state_dir else None,
        "cpus": format_cpulist(plan.cpus),
        "numa_nodes": list(plan.numa_nodes),
        "memory_nodes": list(plan.memory_nodes),
        "devices": plan.devices,
        "env": plan.env,
        "pin_cpus": plan.pin_cpus,
        "memory_binding": plan.bind,
        "notes": plan.notes,
        "reclaimed": plan.reclaimed,
        "discovery_warnings": list(warnings),
    }


def plan_text(plan: Plan, warnings: Sequence[str] = ()) -> str:
    """The plan as text: the admission table, hints, CPUs and nodes, environment, notes."""
    from numalign.node.render import explain_doc, results_table

    lines = [results_table([plan.result])]
    c = plan.result.containers[0] if plan.result.containers else None
    if c is not None and c.explain is not None:
        ex = explain_doc(c.explain)
        for name, hints in ex["providers"].items():
            lines.append(f"hints {name}: {json.dumps(hints)}")
        lines.append(f"merged hint: {json.dumps(ex['merged'])}")
    lines.append(f"cpus: {format_cpulist(plan.cpus) or '-'}  numa nodes: {format_cpulist(plan.numa_nodes) or '-'}"
                 f"  memory nodes: {format_cpulist(plan.memory_nodes) or '-'}")
    for res, ids in plan.devices.items():
        lines.append(f"devices {res}: {','.join(ids)}")
    lines.extend(f"env {k}={v}" for k, v in plan.env.items())
    lines.append(f"pin cpus: {'yes' if plan.pin_cpus else 'no'}  memory binding: {plan.bind}")
    lines.extend(f"note: {n}" for n in plan.notes)
    lines.extend(f"reclaimed stale allocation {k}" for k in plan.reclaimed)
    lines.extend(f"discovery warning: {w}" for w in warnings)
    return "\n".join(lines)
