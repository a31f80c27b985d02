"""Run a process on an aligned allocation, no Kubernetes (``numalign run`` / ``numalign ps``).

An adapter over the node engine, with no alignment logic of its own: a
:class:`LaunchRequest` becomes a one-container Guaranteed pod
(:func:`~numalign.launcher.request.request_pod`), admitted by
:meth:`numalign.node.admission.Node.admit` under the exclusive lock of a shared state
directory (:func:`~numalign.launcher.admission.admit`) with the launcher's kubelet configuration
(:func:`~numalign.launcher.machine.launcher_machine`); the plan
(:mod:`numalign.launcher.plan`) says how the process is pinned
(:mod:`numalign.launcher.pinning`), and the allocation is released when it exits. The runs
of live launchers are recorded in the state (:mod:`numalign.launcher.runs`); runs of dead
launchers are reclaimed before every admission.

Modules: ``request`` (what to run and what it needs), ``machine`` (the machine source and the
launcher's kubelet configuration), ``runs`` (run records, reclaim, ``ps`` data), ``proc``
(process identity from ``/proc``), ``admission`` (admission under the lock; the
function ``admit`` is exported here, so the module has another name), ``plan`` (the
allocation applied to a process; the dry run), ``pinning`` (OS-level pinning), ``cli``
(argparse; the only module that sees it, and not imported here).

Names are loaded on first use (``numalign.launcher.admit`` imports the node engine only then),
so ``numalign --help`` and the sub-command registration do not pay for them.
"""

from __future__ import annotations

from numalign.lazy_exports import lazy_getattr

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (``numalign --help``)

#: public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    "LaunchRejected": "numalign.launcher.admission",
    "OnWait": "numalign.launcher.admission",
    "admit": "numalign.launcher.admission",
    "release": "numalign.launcher.admission",
    "DEFAULT_POLICY": "numalign.launcher.defaults",
    "Source": "numalign.launcher.machine",
    "default_reserved_cpus": "numalign.launcher.machine",
    "launcher_machine": "numalign.launcher.machine",
    "load_source": "numalign.launcher.machine",
    "device_env": "numalign.launcher.pinning",
    "Plan": "numalign.launcher.plan",
    "dry_run": "numalign.launcher.plan",
    "make_plan": "numalign.launcher.plan",
    "plan_doc": "numalign.launcher.plan",
    "plan_text": "numalign.launcher.plan",
    "start": "numalign.launcher.plan",
    "proc_start_time": "numalign.launcher.proc",
    "process_alive": "numalign.launcher.proc",
    "LaunchRequest": "numalign.launcher.request",
    "gpu_resource": "numalign.launcher.request",
    "pod_manifest": "numalign.launcher.request",
    "request_pod": "numalign.launcher.request",
    "Identity": "numalign.launcher.runs",
    "list_runs": "numalign.launcher.runs",
    "ps_rows": "numalign.launcher.runs",
    "reclaim": "numalign.launcher.runs",
    "run_record": "numalign.launcher.runs",
    "self_identity": "numalign.launcher.runs",
    "state_dir_for": "numalign.launcher.runs",
}

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

__getattr__ = lazy_getattr(__name__, _EXPORTS)


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])


if TYPE_CHECKING:  # static checkers see the real names
    from numalign.launcher.admission import LaunchRejected, OnWait, admit, release
    from numalign.launcher.defaults import DEFAULT_POLICY
    from numalign.launcher.machine import (
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
