"""``numalign run`` and ``numalign ps``: arguments -> :class:`LaunchRequest` -> library calls
-> printing and exit status. The only module of :mod:`numalign.launcher` that sees argparse.

``run``: 0..255 = the command's own status (128 + signal when killed); 1 = rejected (or a dry
run that would be); 2 = bad input. ``ps``: 0.
"""

from __future__ import annotations

import argparse
import contextlib
import sys

from numalign.errors import InputError, NumalignError
from numalign.launcher.defaults import DEFAULT_POLICY

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (``numalign --help``)
if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence
    from typing import Any

#: request fields (:class:`LaunchRequest` and the launcher configuration) -> their flags
_FLAGS = {
    "cpus": "--cpus", "memory": "--memory", "gpus": "--gpus", "devices": "--device",
    "hugepages-1Gi": "--hugepages-1Gi", "hugepages-2Mi": "--hugepages-2Mi", "policy": "--policy",
}
#: notes of a plan that are worth a warning when the command starts
_WARN = ("pinning skipped: CPUs", "memory not bound:", "memory binding skipped")


@contextlib.contextmanager
def _as_flags() -> Iterator[None]:
    """Name the flag, not the request field, in input errors."""
    try:
        yield
    except InputError as e:
        if e.field not in _FLAGS:
            raise
        raise InputError(e.problem, _FLAGS[e.field]) from None


def add_run_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cpus", default="1", help="exclusive CPUs (whole number, default 1)")
    p.add_argument("--memory", help="memory to bind the process to (quantity, e.g. 4Gi)")
    p.add_argument("--hugepages-1Gi", dest="hugepages_1gi", metavar="Q", help="1Gi hugepages (bytes)")
    p.add_argument("--hugepages-2Mi", dest="hugepages_2mi", metavar="Q", help="2Mi hugepages (bytes)")
    p.add_argument("--gpus", type=int, default=0, help="GPUs (the machine's GPU resource)")
    p.add_argument("--device", action="append", metavar="RES=N", help="devices of a resource (repeatable)")
    p.add_argument("--policy", default=None,
                   help=f"topology manager policy (default: the machine spec's, else {DEFAULT_POLICY})")
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
    p.add_argument("--allow-unpinned", action="store_true",
                   help="run even when the process cannot be pinned or bound as planned "
                        "(default: exit 1 and say why)")
    p.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD ARGS", help="the command")


def add_ps_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--state-dir", help="state directory (default: as numalign run)")
    p.add_argument("-o", "--output", choices=["table", "json"], default="table")


def add_commands(sub: Any) -> None:
    """Add ``run`` and ``ps`` to the ``numalign`` sub-command parser."""
    p = sub.add_parser("run", help="run a command pinned to an aligned allocation (-- CMD ARGS...)")
    add_run_arguments(p)
    p.set_defaults(handler=run_command)

    p = sub.add_parser("ps", help="list the live allocations of numalign run")
    add_ps_arguments(p)
    p.set_defaults(handler=ps_command)


# ------------------------------------------------------------------------------------ run


def _say(message: str) -> None:
    print(f"numalign run: {message}", file=sys.stderr, flush=True)


def _waiting(reason: str, message: str) -> None:
    _say(f"waiting: {reason}: {message}")


def run_command(args: argparse.Namespace) -> int:
    """``numalign run``."""
    from numalign.inputs.cpulist import parse_cpulist
    from numalign.launcher.admission import LaunchRejected, admit, release
    from numalign.launcher.machine import launcher_machine, load_source
    from numalign.launcher.plan import dry_run, make_plan, plan_doc, plan_text, start
    from numalign.launcher.request import LaunchRequest, request_pod
    from numalign.launcher.runs import run_record, self_identity, state_dir_for

    command = list(args.cmd)
    if command and command[0] == "--":
        command = command[1:]
    if not command and not args.dry_run:
        raise InputError("missing command: numalign run [options] -- CMD ARGS...")
    if args.timeout is not None and args.timeout < 0:
        raise InputError("must be non-negative", "--timeout")
    if args.machine and args.sysfs_root:
        raise InputError("give --machine or --sysfs-root, not both")
    source = load_source(args.machine, args.sysfs_root)
    reserved = parse_cpulist(args.reserved_cpus, "--reserved-cpus") if args.reserved_cpus else None
    with _as_flags():
        machine = launcher_machine(source.machine, args.policy, reserved,
                                   from_spec=bool(args.machine))
        request = LaunchRequest.from_values(
            command, cpus=args.cpus, memory=args.memory, gpus=args.gpus, devices=args.device or (),
            hugepages={"hugepages-1Gi": args.hugepages_1gi, "hugepages-2Mi": args.hugepages_2mi})
        request.resources(machine)  # GPUs and devices this machine does not have: exit 2 now
    state_dir = state_dir_for(args.state_dir, machine, source.live)
    ident = self_identity()
    if args.dry_run:
        plan = dry_run(machine, request, state_dir, ident, pin=not args.no_pin)
        if args.output == "json":
            import json

            print(json.dumps(plan_doc(plan, source.warnings), indent=2))
        else:
            print(plan_text(plan, source.warnings))
        return 0 if plan.result.admitted else 1

    pod = request_pod(request, machine, ident)
    try:
        result, _ = admit(machine, pod, state_dir, record=run_record(ident, command),
                          wait=args.wait, timeout=args.timeout, bind_memory=request.binds_memory,
                          on_wait=_waiting)
    except LaunchRejected as e:
        print(f"numalign run: {e.message}", file=sys.stderr)
        return 1
    try:
        plan = make_plan(result, machine, request, state_dir, pin=not args.no_pin)
        problems = [note for note in plan.notes if note.startswith(_WARN)]
        if problems and not args.allow_unpinned:
            _say(f"cannot pin as planned: {'; '.join(problems)} (nothing started; "
                 "--allow-unpinned runs it anyway, --no-pin runs it without pinning)")
            return 1
        for note in problems:
            _say(f"warning: {note}")
        return start(plan, command, pod.name)
    finally:
        try:
            release(machine, state_dir, pod.key)
        except NumalignError as e:
            print(f"numalign run: warning: allocation {pod.key} not released: {e.message}",
                  file=sys.stderr)


# ------------------------------------------------------------------------------------- ps


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


def ps_table(rows: Sequence[dict[str, Any]]) -> list[str]:
    """``ps`` rows as aligned text lines."""
    from numalign.inputs.cpulist import format_cpulist
    from numalign.inputs.quantity import format_bytes

    table = [("PID", "AGE", "NUMA", "CPUS", "MEMORY", "DEVICES", "COMMAND")]
    for r in rows:
        aff = r["numa_affinity"]
        mem = " ".join(f"{k}={format_bytes(v)}" for k, v in r["memory"].items()) or "-"
        devs = " ".join(f"{k}={','.join(v)}" for k, v in r["devices"].items()) or "-"
        cmd = " ".join(r["command"]) if r["command"] else "?"
        table.append((str(r["pid"]), _age(r["age_seconds"]),
                      format_cpulist(aff) if aff else "-", r["cpus"] or "-", mem, devs, cmd))
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]) - 1)]
    return ["  ".join([*(c.ljust(w) for c, w in zip(row, widths, strict=False)), row[-1]]).rstrip()
            for row in table]


def ps_command(args: argparse.Namespace) -> int:
    """``numalign ps``."""
    from numalign.launcher.runs import list_runs

    rows, stale = list_runs(args.state_dir)
    if args.output == "json":
        import json

        print(json.dumps({"runs": rows, "stale": stale}, indent=2))
        return 0
    for line in ps_table(rows):
        print(line)
    if stale:
        print(f"({stale} stale allocation(s) of dead launchers; the next numalign run reclaims them)")
    return 0
