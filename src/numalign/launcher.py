"""``numalign run`` and ``numalign ps``: run a process on an aligned allocation, no Kubernetes.

An adapter over the node engine, with no alignment logic of its own: the request becomes a
one-container Guaranteed :class:`~numalign.pods.Pod`, admitted by
:meth:`numalign.node.admission.Node.admit` under the exclusive lock of a shared state
directory; then the command starts pinned (:mod:`numalign.pinning`) and the allocation is
released when it exits.

The kubelet configuration of the launcher (one for every run sharing a state directory, since
they share the CPU and memory managers' state):

* ``cpuManagerPolicy: static``; reserved CPUs: every thread of the core of the lowest online
  CPU (``--reserved-cpus`` overrides; the static policy needs a reservation > 0, and the
  system's own housekeeping lives there);
* ``memoryManagerPolicy: Static`` when memory is requested (``--memory``/``--hugepages-*``):
  the process is then bound (``MPOL_BIND``) to the nodes the memory manager chose;
  ``reservedMemory`` is 100Mi (the kubelet's default hard eviction threshold) on the lowest
  NUMA node having room, unless the machine spec has its own. The shared state always keeps
  the Static memory state; a request without memory is admitted with the ``None`` policy over
  it (a Guaranteed pod needs a memory limit, so it carries a nominal 1Mi that nothing
  accounts): under Static, a nominal request's only preferred hints are single nodes, and
  ``restricted`` would refuse every CPU request spanning two nodes. Such a process is not
  bound (first-touch keeps its memory local to its CPUs anyway);
* ``topologyManagerPolicy`` from ``--policy``, default ``restricted``: it never spreads a
  request over more NUMA nodes than the smallest set that could hold it, yet a request larger
  than one node (``--gpus 8`` on a box with 4 GPUs per node) still runs, which
  ``single-numa-node`` would refuse forever; scope ``container`` (one container);
  ``max-allowable-numa-nodes`` raised to the machine's node count when above 8;
* CPU and topology *options* of a ``--machine`` spec are kept.

Bookkeeping: a run is the pod ``numalign-run/run-<pid>-<start>`` (the launcher's pid and its
start time in clock ticks, field 22 of ``/proc/<pid>/stat``); ``runs.json`` next to the state
(atomic writes, under the same lock) keeps the command line, boot id and wall-clock start.
Before every admission, runs whose launcher is gone are released. The child dies with its
launcher (``PR_SET_PDEATHSIG``), so a reclaimed allocation is never still in use.

Environment of the child: ``NUMALIGN_ALLOCATION``, ``NUMALIGN_CPUS``, ``NUMALIGN_NUMA_NODES``,
``NUMALIGN_MEMORY_NODES`` (cpulist syntax), and for GPUs ``CUDA_VISIBLE_DEVICES`` +
``NVIDIA_VISIBLE_DEVICES`` (with ``CUDA_DEVICE_ORDER=PCI_BUS_ID``) or ``ROCR_VISIBLE_DEVICES``:
indices of the allocated devices among the machine's devices of that resource in PCI bus order.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import sys
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from numalign.errors import InputError, NumalignError, StateError
from numalign.node import store

if TYPE_CHECKING:
    from numalign.machine.model import Machine
    from numalign.node.admission import Node, PodResult
    from numalign.pods import Pod

NAMESPACE = "numalign-run"
CONTAINER = "main"
RUNS_FILE = "runs.json"
RUNS_FORMAT = "numalign-runs"
NOMINAL_MEMORY = 1 << 20
RESERVED_MEMORY = 100 << 20
DEFAULT_POLICY = "restricted"
MIB = 1 << 20

GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu", "gpu.intel.com/i915")
_ANN = "numalign.io/"


class Rejected(NumalignError):
    """The request does not fit (now, or ever); exit status 1."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason


# ----------------------------------------------------------------------------- the request


@dataclass(frozen=True)
class Request:
    """What the user asked for, in engine units."""

    cpus: int = 1
    memory: int | None = None  # bytes; None = not asked (nominal, not bound)
    hugepages: Mapping[str, int] = field(default_factory=dict)  # hugepages-1Gi -> bytes
    devices: Mapping[str, int] = field(default_factory=dict)  # resource -> count

    @property
    def binds_memory(self) -> bool:
        return self.memory is not None or any(v > 0 for v in self.hugepages.values())

    def resources(self) -> dict[str, int]:
        out = {"cpu": self.cpus * 1000,
               "memory": self.memory if self.memory is not None else NOMINAL_MEMORY}
        out.update({k: v for k, v in self.hugepages.items() if v > 0})
        out.update({k: v for k, v in self.devices.items() if v > 0})
        return out


def _quantity(text: str, flag: str) -> int:
    from numalign.pods import parse_quantity, quantity_int

    q = parse_quantity(text, flag)
    if q <= 0:
        raise InputError(f"must be positive, got {text!r}", flag)
    return quantity_int(q)


def gpu_resource(machine: Machine) -> str:
    for res in GPU_RESOURCES:
        if machine.devices_of(res):
            return res
    raise InputError("this machine has no GPUs (no nvidia.com/gpu, amd.com/gpu or i915 device)",
                     "--gpus")


def parse_request(args: argparse.Namespace, machine: Machine) -> Request:
    """The request from ``numalign run`` arguments."""
    try:
        cpus = int(args.cpus)
    except ValueError:
        raise InputError(f"a whole number of exclusive CPUs, got {args.cpus!r}", "--cpus") from None
    if cpus < 1:
        raise InputError(f"must be at least 1, got {cpus}", "--cpus")
    memory = _quantity(args.memory, "--memory") if args.memory else None
    hugepages: dict[str, int] = {}
    for flag, res in (("hugepages_1gi", "hugepages-1Gi"), ("hugepages_2mi", "hugepages-2Mi")):
        value = getattr(args, flag, None)
        if value:
            hugepages[res] = _quantity(value, f"--{res}")
    devices: dict[str, int] = {}
    if args.gpus:
        if args.gpus < 0:
            raise InputError(f"must be non-negative, got {args.gpus}", "--gpus")
        devices[gpu_resource(machine)] = args.gpus
    for item in args.device or []:
        res, sep, n = item.rpartition("=")
        if not sep or not res:
            raise InputError(f"expected RESOURCE=COUNT, got {item!r}", "--device")
        try:
            count = int(n)
        except ValueError:
            raise InputError(f"count must be a whole number, got {n!r}", "--device") from None
        if count < 1:
            raise InputError(f"count must be at least 1, got {count}", "--device")
        if not machine.devices_of(res):
            raise InputError(f"this machine has no {res} devices", "--device")
        devices[res] = devices.get(res, 0) + count
    return Request(cpus, memory, hugepages, devices)


# ----------------------------------------------------------------------------- the machine


@dataclass(frozen=True)
class Identity:
    """A run: the launcher's pid and start time (clock ticks since boot)."""

    pid: int
    start: int

    @property
    def name(self) -> str:
        return f"run-{self.pid}-{self.start}"

    @property
    def key(self) -> str:
        return f"{NAMESPACE}/{self.name}"

    @staticmethod
    def of_key(key: str) -> Identity | None:
        ns, _, name = key.partition("/")
        parts = name.split("-")
        if ns != NAMESPACE or len(parts) != 3 or parts[0] != "run":
            return None
        try:
            return Identity(int(parts[1]), int(parts[2]))
        except ValueError:
            return None


def self_identity() -> Identity:
    from numalign.pinning import proc_start_time

    pid = os.getpid()
    start = proc_start_time(pid)
    if start is None:
        raise StateError("cannot read /proc/self/stat (numalign run needs Linux /proc)")
    return Identity(pid, start)


def default_reserved_cpus(machine: Machine) -> frozenset[int]:
    """Every thread of the core of the lowest online CPU."""
    online = machine.online_cpus
    if not online:
        raise InputError("the machine has no online CPU")
    core = online[0].core
    return frozenset(c.id for c in online if c.core == core)


def launcher_machine(
    machine: Machine, policy: str = DEFAULT_POLICY, reserved_cpus: frozenset[int] | None = None,
    *, memory: bool = True,
) -> Machine:
    """``machine`` with the launcher's kubelet configuration (see the module docstring);
    ``memory`` = False gives ``memoryManagerPolicy: None`` (a request without memory)."""
    from numalign.machine.model import ReservedMemory
    from numalign.policies import DEFAULT_MAX_NUMA_NODES, MAX_ALLOWABLE, parse_policy

    parse_policy(policy, "--policy")
    kc = machine.kubelet
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
                f"no NUMA node has {2 * RESERVED_MEMORY // MIB}Mi of regular memory to reserve "
                "100Mi for the system (give the machine spec a kubelet.reservedMemory)"
            )
        reserved_memory = (ReservedMemory(hosts[0].id, {"memory": RESERVED_MEMORY}),)
    return replace(machine, kubelet=replace(
        kc,
        topology_manager_policy=policy,
        topology_manager_scope="container",
        topology_manager_policy_options=options,
        cpu_manager_policy="static",
        reserved_system_cpus=reserved_cpus or default_reserved_cpus(machine),
        memory_manager_policy="Static" if memory else "None",
        reserved_memory=reserved_memory,
    ))


def request_pod(request: Request, ident: Identity, argv: Sequence[str] = ()) -> Pod:
    """The one-container Guaranteed pod of a run (requests = limits)."""
    from numalign.pods import Container, ContainerKind, Pod, default_uid, pod_qos

    res = request.resources()
    container = Container(CONTAINER, ContainerKind.APP, dict(res), dict(res))
    return Pod(
        namespace=NAMESPACE,
        name=ident.name,
        uid=default_uid(NAMESPACE, ident.name),
        qos=pod_qos([container]),
        containers=(container,),
        annotations={_ANN + "pid": str(ident.pid), _ANN + "start-time": str(ident.start),
                     _ANN + "command": json.dumps(list(argv))},
    )


def pod_manifest(pod: Pod) -> dict[str, Any]:
    """``pod`` as a v1 Pod manifest (for ``numalign admit``)."""
    c = pod.containers[0]

    def q(res: str, v: int) -> str:
        return f"{v // 1000}" if res == "cpu" else str(v)

    resources = {k: q(k, v) for k, v in c.requests.items()}
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid,
                     "annotations": dict(pod.annotations)},
        "spec": {"containers": [{"name": c.name, "resources": {
            "requests": resources, "limits": dict(resources)}}]},
    }


@dataclass(frozen=True)
class Source:
    machine: Machine
    live: bool
    warnings: tuple[str, ...] = ()


def load_source(machine_file: str | None, sysfs_root: str | None) -> Source:
    if machine_file and sysfs_root:
        raise InputError("give --machine or --sysfs-root, not both")
    if machine_file:
        from numalign.machine.spec import read_machine_file

        return Source(read_machine_file(machine_file), False)
    from numalign.machine.sysfs import load_sysfs

    root = sysfs_root or "/"
    found = load_sysfs(root)
    return Source(found.machine, os.path.realpath(root) == "/", tuple(found.warnings))


# -------------------------------------------------------------------------- state and runs


def default_state_base() -> Path:
    if os.geteuid() == 0:
        return Path("/run/numalign")
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg and os.path.isdir(xdg):
        return Path(xdg) / "numalign"
    return Path(f"/tmp/numalign-{os.getuid()}")


def state_dir_for(explicit: str | None, machine: Machine, live: bool) -> Path:
    """``--state-dir``; else the default base for the live machine, and a subdirectory per
    machine fingerprint for a spec or a capture (their state never mixes with the host's)."""
    if explicit:
        return Path(explicit)
    base = default_state_base()
    if live:
        return base
    from numalign.node.admission import machine_fingerprint

    slug = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in machine_fingerprint(machine))
    return base / "machines" / slug


def read_runs(state_dir: Path) -> dict[str, dict[str, Any]]:
    try:
        doc = json.loads((state_dir / RUNS_FILE).read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError):
        return {}  # bookkeeping only: the pod names alone identify the launchers
    runs = doc.get("runs") if isinstance(doc, dict) else None
    return {k: v for k, v in runs.items() if isinstance(v, dict)} if isinstance(runs, dict) else {}


def write_runs(state_dir: Path, runs: Mapping[str, Mapping[str, Any]]) -> None:
    """Atomic replace of ``runs.json`` (temp file, fsync, rename); call under the lock."""
    data = json.dumps({"format": RUNS_FORMAT, "version": 1, "runs": runs}, sort_keys=True, indent=1)
    store.write_atomic(state_dir / RUNS_FILE, data.encode())


def run_is_live(key: str, entry: Mapping[str, Any] | None, boot: str) -> bool:
    from numalign.pinning import process_alive

    ident = Identity.of_key(key)
    if ident is None:
        return True  # not ours
    if entry is not None and entry.get("boot_id") not in (None, "", boot):
        return False
    return process_alive(ident.pid, ident.start)


def reclaim(node: Node, runs: dict[str, dict[str, Any]]) -> list[str]:
    """Release the runs whose launcher is gone; returns their keys (``runs`` is updated)."""
    from numalign.pinning import boot_id

    boot = boot_id()
    gone = [p["key"] for p in node.state.pods.values()
            if isinstance(p.get("key"), str) and not run_is_live(p["key"], runs.get(p["key"]), boot)]
    for key in gone:
        node.release(key)
        runs.pop(key, None)
    keys = {p.get("key") for p in node.state.pods.values()}
    for key in [k for k in runs if k not in keys]:
        del runs[key]  # bookkeeping of an allocation that is not in the state
    return gone


@contextlib.contextmanager
def _session(state_dir: Path | None, machine: Machine, write: bool) -> Iterator[Node]:
    from numalign.node.session import node_session

    with node_session(state_dir, machine, write=write) as node:
        yield node


# -------------------------------------------------------------------------------- the plan


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


def _cpulist(ids: Iterable[int]) -> str:
    from numalign.cpulist import format_cpulist

    return format_cpulist(ids)


def device_env(machine: Machine, devices: Mapping[str, Sequence[str]]) -> dict[str, str]:
    """GPU visibility variables: indices among the resource's devices in PCI bus order."""
    env: dict[str, str] = {}
    for res, ids in devices.items():
        if res not in ("nvidia.com/gpu", "amd.com/gpu") or not ids:
            continue
        order = sorted(enumerate(machine.devices_of(res)),
                       key=lambda p: (p[1].bus_id is None, p[1].bus_id or "", p[0]))
        index = {d.id: i for i, (_, d) in enumerate(order)}
        visible = ",".join(str(i) for i in sorted(index[d] for d in ids if d in index))
        if res == "nvidia.com/gpu":
            env.update(CUDA_DEVICE_ORDER="PCI_BUS_ID", CUDA_VISIBLE_DEVICES=visible,
                       NVIDIA_VISIBLE_DEVICES=visible)
        else:
            env["ROCR_VISIBLE_DEVICES"] = visible
    return env


def make_plan(result: PodResult, machine: Machine, request: Request, state_dir: Path | None,
              *, pin: bool = True) -> Plan:
    """How an admitted request is applied to a process (no side effects)."""
    from numalign.bitmask import ids_of
    from numalign.pinning import mempolicy_problem, numactl, usable_cpus, usable_mems

    if not result.admitted or not result.containers:
        return Plan(result, state_dir, notes=[f"not admitted: {result.reason}: {result.message}"])
    c = result.containers[0]
    mem_nodes = sorted({int(n) for key in c.memory for n in key.split(",")})
    plan = Plan(result, state_dir, c.cpus,
                tuple(ids_of(c.affinity)) if c.affinity is not None else (),
                tuple(mem_nodes), {k: list(v) for k, v in c.devices.items()})
    plan.env = {
        "NUMALIGN_ALLOCATION": result.pod.key,
        "NUMALIGN_CPUS": _cpulist(c.cpus),
        "NUMALIGN_NUMA_NODES": _cpulist(plan.numa_nodes),
        "NUMALIGN_MEMORY_NODES": _cpulist(mem_nodes) if request.binds_memory else "",
        **device_env(machine, plan.devices),
    }
    if not pin:
        plan.notes.append("pinning skipped: --no-pin")
        return plan
    missing = c.cpus - usable_cpus()
    if missing:
        plan.notes.append(
            f"pinning skipped: CPUs {_cpulist(missing)} are not available to this process "
            "(planning for a machine that is not this host?)")
    else:
        plan.pin_cpus = True
    if not request.binds_memory:
        plan.notes.append("memory not bound (no --memory/--hugepages requested)")
        return plan
    allowed = usable_mems()
    if allowed is not None and not set(mem_nodes) <= allowed:
        plan.notes.append(f"memory binding skipped: NUMA nodes {_cpulist(set(mem_nodes) - allowed)} "
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


def plan_doc(plan: Plan, warnings: Sequence[str] = ()) -> dict[str, Any]:
    from numalign.node.render import pod_doc

    return {
        "allocation": pod_doc(plan.result),
        "state_dir": str(plan.state_dir) if plan.state_dir else None,
        "cpus": _cpulist(plan.cpus),
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
    from numalign.node.render import explain_doc, results_table

    lines = [results_table([plan.result])]
    c = plan.result.containers[0] if plan.result.containers else None
    if c is not None and c.explain is not None:
        ex = explain_doc(c.explain)
        for name, hints in ex["providers"].items():
            lines.append(f"hints {name}: {json.dumps(hints)}")
        lines.append(f"merged hint: {json.dumps(ex['merged'])}")
    lines.append(f"cpus: {_cpulist(plan.cpus) or '-'}  numa nodes: {_cpulist(plan.numa_nodes) or '-'}"
                 f"  memory nodes: {_cpulist(plan.memory_nodes) or '-'}")
    for res, ids in plan.devices.items():
        lines.append(f"devices {res}: {','.join(ids)}")
    lines.extend(f"env {k}={v}" for k, v in plan.env.items())
    lines.append(f"pin cpus: {'yes' if plan.pin_cpus else 'no'}  memory binding: {plan.bind}")
    lines.extend(f"note: {n}" for n in plan.notes)
    lines.extend(f"reclaimed stale allocation {k}" for k in plan.reclaimed)
    lines.extend(f"discovery warning: {w}" for w in warnings)
    return "\n".join(lines)


# ------------------------------------------------------------------------------- admission


def _without_memory(machine: Machine) -> Machine:
    return replace(machine, kubelet=replace(machine.kubelet, memory_manager_policy="None"))


def _never_fits(machine: Machine, pod: Pod) -> PodResult | None:
    from numalign.node.admission import Node

    empty = Node(machine).admit(pod)
    return None if empty.admitted else empty


def admit(
    machine: Machine, pod: Pod, state_dir: Path | None, *, record: Mapping[str, Any] | None,
    bind_memory: bool = True, explain: bool = False, wait: bool = False,
    timeout: float | None = None,
) -> tuple[PodResult, list[str]]:
    """Admit ``pod`` under the state lock, reclaiming dead runs first; with ``wait``, retry
    (lock released between tries, exponential back-off up to 1 s) until it fits or ``timeout``.

    ``machine`` has the launcher's configuration with ``memoryManagerPolicy: Static``, which
    the shared state keeps; a request without memory (``bind_memory`` = False) is admitted
    with the memory manager's ``None`` policy over the same state (it neither reads nor
    changes the memory state), so a CPU or device request spanning NUMA nodes is not refused
    for a nominal memory request that fits one node.

    ``record`` (the run's bookkeeping) is written to ``runs.json`` on admission; None = a dry
    run (nothing is written, a rejection is returned). Raises :class:`Rejected` when it does
    not fit.
    """
    from numalign.node.admission import Node

    dry = record is None
    if dry and state_dir is not None and not (state_dir / "state.json").exists():
        state_dir = None  # nothing allocated yet; do not create the directory for a plan
    deadline = None if timeout is None else time.monotonic() + timeout
    delay = 0.05
    told = False
    reclaimed: list[str] = []
    while True:
        with _session(state_dir, machine, write=not dry) as node:
            runs = read_runs(state_dir) if state_dir is not None else {}
            before = dict(runs)
            reclaimed += reclaim(node, runs)
            actor = node if bind_memory else Node(_without_memory(machine), node.state)
            result = actor.admit(pod, explain=explain)
            node.state = actor.state
            if result.admitted and record is not None:
                runs[pod.key] = dict(record)
            if state_dir is not None and not dry and runs != before:
                write_runs(state_dir, runs)
        if result.admitted or dry:
            return result, reclaimed  # a dry run shows a rejection with its explanation
        reason, message = result.reason or "Rejected", result.message or ""
        if not wait:
            raise Rejected(reason, message)
        never = _never_fits(machine if bind_memory else _without_memory(machine), pod)
        if never is not None:
            raise Rejected(never.reason or reason,
                           f"{never.message} (does not fit even on the empty machine; not waiting)")
        now = time.monotonic()
        if deadline is not None and now >= deadline:
            raise Rejected(reason, f"{message} (still not admitted after waiting {timeout:g}s)")
        if not told:
            print(f"numalign run: waiting: {reason}: {message}", file=sys.stderr, flush=True)
            told = True
        pause = delay * random.uniform(0.5, 1.0)  # jitter, not crypto
        if deadline is not None:
            pause = min(pause, max(0.0, deadline - now))
        time.sleep(pause)
        delay = min(delay * 2, 1.0)


def release(machine: Machine, state_dir: Path, key: str) -> None:
    with _session(state_dir, machine, write=True) as node:
        node.release(key)
        runs = read_runs(state_dir)
        if runs.pop(key, None) is not None:
            write_runs(state_dir, runs)


# ------------------------------------------------------------------------------ commands


def add_run_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cpus", default="1", help="exclusive CPUs (whole number, default 1)")
    p.add_argument("--memory", help="memory to bind the process to (quantity, e.g. 4Gi)")
    p.add_argument("--hugepages-1Gi", dest="hugepages_1gi", metavar="Q", help="1Gi hugepages (bytes)")
    p.add_argument("--hugepages-2Mi", dest="hugepages_2mi", metavar="Q", help="2Mi hugepages (bytes)")
    p.add_argument("--gpus", type=int, default=0, help="GPUs (the machine's GPU resource)")
    p.add_argument("--device", action="append", metavar="RES=N", help="devices of a resource (repeatable)")
    p.add_argument("--policy", default=DEFAULT_POLICY,
                   help="topology manager policy (default restricted)")
    p.add_argument("--reserved-cpus", help="CPUs kept for the system (default: the core of CPU 0)")
    p.add_argument("--state-dir", help="shared allocation state (default /run/numalign as root, "
                   "else $XDG_RUNTIME_DIR/numalign, else /tmp/numalign-$UID)")
    p.add_argument("--sysfs-root", help="plan for a captured sysfs (directory or .tar.bz2)")
    p.add_argument("--machine", "-m", help="machine spec (YAML/JSON) instead of discovery")
    p.add_argument("--dry-run", action="store_true", help="print the plan; start nothing, keep nothing")
    p.add_argument("-o", "--output", choices=["table", "json"], default="table",
                   help="plan format for --dry-run")
    p.add_argument("--wait", action="store_true", help="wait until the request fits")
    p.add_argument("--timeout", type=float, help="with --wait: give up after S seconds")
    p.add_argument("--no-pin", action="store_true", help="allocate but do not pin the process")
    p.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD ARGS", help="the command")


def add_ps_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--state-dir", help="state directory (default: as numalign run)")
    p.add_argument("-o", "--output", choices=["table", "json"], default="table")


def run_command(args: argparse.Namespace) -> int:
    """``numalign run``."""
    from numalign.cpulist import parse_cpulist

    argv = list(args.cmd)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv and not args.dry_run:
        raise InputError("missing command: numalign run [options] -- CMD ARGS...")
    if args.timeout is not None and args.timeout < 0:
        raise InputError("must be non-negative", "--timeout")
    source = load_source(args.machine, args.sysfs_root)
    reserved = parse_cpulist(args.reserved_cpus, "--reserved-cpus") if args.reserved_cpus else None
    machine = launcher_machine(source.machine, args.policy, reserved)
    request = parse_request(args, machine)
    state_dir = state_dir_for(args.state_dir, machine, source.live)
    ident = self_identity()
    pod = request_pod(request, ident, argv)
    if args.dry_run:
        result, reclaimed = admit(machine, pod, state_dir, record=None, explain=True,
                                  bind_memory=request.binds_memory)
        plan = make_plan(result, machine, request, state_dir, pin=not args.no_pin)
        plan.reclaimed = reclaimed
        if args.output == "json":
            print(json.dumps(plan_doc(plan, source.warnings), indent=2))
        else:
            print(plan_text(plan, source.warnings))
        return 0 if result.admitted else 1
    from numalign.pinning import boot_id

    record = {"pid": ident.pid, "start": ident.start, "argv": argv, "boot_id": boot_id(),
              "started_at": time.time(), "user": os.getuid()}
    try:
        result, _ = admit(machine, pod, state_dir, record=record, wait=args.wait,
                          timeout=args.timeout, bind_memory=request.binds_memory)
    except Rejected as e:
        print(f"numalign run: {e.message}", file=sys.stderr)
        return 1
    try:
        plan = make_plan(result, machine, request, state_dir, pin=not args.no_pin)
        return _start(plan, argv, pod.name)
    finally:
        try:
            release(machine, state_dir, pod.key)
        except NumalignError as e:
            print(f"numalign run: warning: allocation {pod.key} not released: {e.message}",
                  file=sys.stderr)


def _start(plan: Plan, argv: list[str], name: str) -> int:
    from numalign.pinning import Pinning, make_cpuset, numactl, remove_cgroup, run_pinned

    for note in plan.notes:
        if note.startswith(("pinning skipped: CPUs", "memory not bound:", "memory binding skipped")):
            print(f"numalign run: warning: {note}", file=sys.stderr)
    env = {**os.environ, **plan.env}
    mem = frozenset(plan.memory_nodes) if plan.bind == "syscall" else None
    if plan.bind == "numactl":
        argv = [numactl() or "numactl", f"--membind={_cpulist(plan.memory_nodes)}", "--", *argv]
    cgroup = None
    if plan.pin_cpus:
        cg = make_cpuset(f"numalign-{name}", plan.cpus, plan.memory_nodes if mem else ())
        cgroup = cg.path
    try:
        return run_pinned(argv, env, Pinning(plan.cpus if plan.pin_cpus else None, mem, cgroup))
    finally:
        if cgroup is not None:
            remove_cgroup(cgroup)


# ------------------------------------------------------------------------------------ ps


def _state_dirs(explicit: str | None) -> list[Path]:
    if explicit:
        return [Path(explicit)]
    base = default_state_base()
    dirs = [base] if (base / "state.json").exists() else []
    machines = base / "machines"
    if machines.is_dir():
        dirs += sorted(d for d in machines.iterdir() if (d / "state.json").exists())
    return dirs


def ps_rows(state_dir: Path) -> tuple[list[dict[str, Any]], int]:
    """Live runs in a state directory, and the number of stale ones."""
    from numalign.node.session import node_session
    from numalign.pinning import boot_id, process_age

    if not (state_dir / "state.json").exists():
        return [], 0
    rows: list[dict[str, Any]] = []
    stale = 0
    boot = boot_id()
    with node_session(state_dir, None, write=False) as node:
        runs = read_runs(state_dir)
        st = node.state
        for uid, pod in sorted(st.pods.items(), key=lambda p: str(p[1].get("key"))):
            key = pod.get("key")
            ident = Identity.of_key(key) if isinstance(key, str) else None
            if ident is None or not isinstance(key, str):
                continue
            entry = runs.get(key)
            if not run_is_live(key, entry, boot):
                stale += 1
                continue
            containers = pod.get("containers") or [{}]
            memory: dict[str, int] = {}
            for b in st.memory.assignments.get(uid, {}).get(CONTAINER, []):
                name = f"{b.type}@{','.join(map(str, b.numa_affinity))}"
                memory[name] = memory.get(name, 0) + b.size
            devices = {r: list(ids) for r, ids in
                       st.devices.allocated.get(uid, {}).get(CONTAINER, {}).items()}
            age = process_age(ident.start)
            rows.append({
                "pid": ident.pid,
                "allocation": key,
                "command": (entry or {}).get("argv"),
                "numa_affinity": containers[0].get("affinity"),
                "cpus": _cpulist(st.cpu.assignments.get(uid, {}).get(CONTAINER, frozenset())),
                "memory": memory,
                "devices": devices,
                "age_seconds": None if age is None else round(age, 1),
                "state_dir": str(state_dir),
            })
    return rows, stale


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    s = int(seconds)
    if s < 120:
        return f"{s}s"
    if s < 7200:
        return f"{s // 60}m"
    if s < 172800:
        return f"{s // 3600}h"
    return f"{s // 86400}d"


def ps_command(args: argparse.Namespace) -> int:
    """``numalign ps``."""
    rows: list[dict[str, Any]] = []
    stale = 0
    for d in _state_dirs(args.state_dir):
        found, n = ps_rows(d)
        rows += found
        stale += n
    if args.output == "json":
        print(json.dumps({"runs": rows, "stale": stale}, indent=2))
        return 0
    table = [("PID", "AGE", "NUMA", "CPUS", "MEMORY", "DEVICES", "COMMAND")]
    for r in rows:
        aff = r["numa_affinity"]
        mem = " ".join(f"{k}={v // MIB}Mi" if v % MIB == 0 else f"{k}={v}"
                       for k, v in r["memory"].items()) or "-"
        devs = " ".join(f"{k}={','.join(v)}" for k, v in r["devices"].items()) or "-"
        cmd = " ".join(r["command"]) if r["command"] else "?"
        table.append((str(r["pid"]), _age(r["age_seconds"]),
                      _cpulist(aff) if aff else "-", r["cpus"] or "-", mem, devs, cmd))
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]) - 1)]
    for row in table:
        print("  ".join([*(c.ljust(w) for c, w in zip(row, widths, strict=False)), row[-1]]).rstrip())
    if stale:
        print(f"({stale} stale allocation(s) of dead launchers; the next numalign run reclaims them)")
    return 0
