"""Run a process on an aligned allocation, no Kubernetes (``numalign run`` / ``numalign ps``).

An adapter over the node engine, with no alignment logic of its own: a
:class:`LaunchRequest` becomes a one-container Guaranteed pod
(:func:`~numalign.launcher.request.request_pod`), admitted by
:meth:`numalign.node.admission.Node.admit` under the exclusive lock of a shared state
directory (:func:`~numalign.launcher.admit.admit`) with the launcher's kubelet configuration
(:func:`~numalign.launcher.machine.launcher_machine`); the plan
(:mod:`numalign.launcher.plan`) says how the process is pinned
(:mod:`numalign.launcher.pinning`), and the allocation is released when it exits. The runs
of live launchers are recorded in the state (:mod:`numalign.launcher.runs`); runs of dead
launchers are reclaimed before every admission.

Modules: ``request`` (what to run and what it needs), ``machine`` (the machine source and the
launcher's kubelet configuration), ``runs`` (run records, reclaim, ``ps`` data), ``proc``
(process identity from ``/proc``), ``admit`` (admission under the lock), ``plan`` (the
allocation applied to a process; the dry run), ``pinning`` (OS-level pinning), ``cli``
(argparse; the only module that sees it, and not imported here).
"""

from numalign.launcher.admit import LaunchRejected, OnWait, admit, release
from numalign.launcher.machine import (
    DEFAULT_POLICY,
    Source,
    default_reserved_cpus,
    launcher_machine,
    load_source,
)
from numalign.launcher.pinning import device_env
from numalign.launcher.plan import Plan, dry_run, make_plan, plan_doc, plan_text, start
from numalign.launcher.proc import proc_start_time, process_alive
from numalign.launcher.request import LaunchRequest, gpu_resource, pod_manifest, request_pod
from numalign.launcher.runs import (
    Identity,
    list_runs,
    ps_rows,
    reclaim,
    run_record,
    self_identity,
    state_dir_for,
)

__all__ = [
    "DEFAULT_POLICY",
    "Identity",
    "LaunchRejected",
    "LaunchRequest",
    "OnWait",
    "Plan",
    "Source",
    "admit",
    "default_reserved_cpus",
    "device_env",
    "dry_run",
    "gpu_resource",
    "launcher_machine",
    "list_runs",
    "load_source",
    "make_plan",
    "plan_doc",
    "plan_text",
    "pod_manifest",
    "proc_start_time",
    "process_alive",
    "ps_rows",
    "reclaim",
    "release",
    "request_pod",
    "run_record",
    "self_identity",
    "start",
    "state_dir_for",
]
