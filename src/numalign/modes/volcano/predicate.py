"""Volcano ``numa-aware``'s predicate: Guaranteed pods only, the pod's policy must equal the
node's, only app containers, CPU hints only, the pre-1.21 merge rule.

Read upstream: volcano-sh/volcano ``pkg/scheduler/plugins/numaaware/numaaware.go``
(``predicateFn``) and ``policy/``. The admission is answered from a memo
(:mod:`numalign.modes.volcano.fast`); :func:`volcano_filter_reference` runs it every time and is
what the memo must agree with.
"""

from __future__ import annotations

from numalign.engine.merge_budget import MergeTooLarge
from numalign.engine.policies import Policy, Scope, TopologyPolicy
from numalign.engine.scopes import admit
from numalign.errors import AdmissionError
from numalign.modes.volcano.fast import VolcanoMemo
from numalign.node.admission import Node
from numalign.node.usage import cpus_numa_nodes
from numalign.pods import Pod, QOSClass
from numalign.pods.annotations import VOLCANO_ANNOTATION
from numalign.resources.cpu import POLICY_STATIC as CPU_STATIC
from numalign.resources.cpu import CpuManager
from numalign.scheduler.filters import FilterResult


def volcano_policy_check(node: Node, pod: Pod) -> FilterResult | None:
    """The predicate's checks before its admission: an answer, or None to admit."""
    if pod.qos is not QOSClass.GUARANTEED:
        return _PASS
    # numaaware.go reads only the task's volcano.sh/numa-topology-policy (the Job controller
    # copies tasks[].topologyPolicy there) and compares it with the node's policy string
    raw = pod.annotations.get(VOLCANO_ANNOTATION, "")
    if raw not in _POLICY_NAMES and raw != "":
        return FilterResult(False, reason=f"unknown task topology policy {raw!r}")
    task_policy = Policy(raw) if raw else Policy.NONE
    node_policy = node.node_policy
    cpu_static = node.machine.kubelet.cpu_manager_policy == CPU_STATIC
    if task_policy is Policy.NONE:
        if not cpu_static or node_policy is Policy.NONE:
            return _PASS
    else:
        if not cpu_static:
            return _NOT_STATIC
        if task_policy is not node_policy:
            return _NOT_MATCHING
    return None


def volcano_admission(node: Node, pod: Pod) -> FilterResult:
    """Volcano's admission: app containers only, the CPU manager only, container scope, the
    node's policy with the pre-1.21 merge rule, on a copy of the node's CPU state."""
    m = node.machine
    distances = m.distances if m.has_distances else None
    policy = TopologyPolicy(node.node_policy, m.node_ids, node.options, distances, legacy_merge=True)
    app_only = pod.replace(containers=pod.app_containers)
    cpu_state = node.state.cpu.copy()
    cpu = CpuManager(m, cpu_state, reserved=node.reserved_cpus)
    try:
        admit(policy, Scope.CONTAINER, [cpu], app_only, app_only.containers)
    except (AdmissionError, MergeTooLarge) as e:
        return FilterResult(False, reason=f"cannot be assigned by numa: {e.message}")
    cpus = [c for cs in cpu_state.pod_cpus(pod.uid).values() for c in cs]
    return FilterResult(True, len(cpus_numa_nodes(m, cpus)))


def volcano_filter_reference(node: Node, pod: Pod) -> FilterResult:
    """Volcano's predicate the slow way: a full CPU-only admission on every call. The
    fast :func:`volcano_filter` decides exactly like it (tests/test_volcano_speed.py)."""
    early = volcano_policy_check(node, pod)
    if early is not None:
        return early
    return volcano_admission(node, pod)


_PASS = FilterResult(True)
_NOT_STATIC = FilterResult(False, reason="cpu manager policy is not static")
_NOT_MATCHING = FilterResult(False, reason="task policy does not match the node's")
_POLICY_NAMES = frozenset(p.value for p in Policy)
#: the Volcano predicate's memo (shared by :func:`volcano_filter` and the scheduler's batch walk)
VOLCANO_MEMO: VolcanoMemo[FilterResult] = VolcanoMemo()


def volcano_filter(node: Node, pod: Pod) -> FilterResult:
    """Volcano ``numa-aware``'s predicate: the policy checks, then the admission's answer
    from a memo keyed by the node's configuration, the pod's Volcano shape and the node's
    available CPUs (:mod:`numalign.modes.volcano.fast`) - the same answer as
    :func:`volcano_filter_reference`, computed once per distinct key."""
    early = volcano_policy_check(node, pod)
    if early is not None:
        return early
    return VOLCANO_MEMO.answer(node, pod, lambda: volcano_admission(node, pod))


__all__ = [
    "VOLCANO_MEMO",
    "volcano_admission",
    "volcano_filter",
    "volcano_filter_reference",
    "volcano_policy_check",
]
