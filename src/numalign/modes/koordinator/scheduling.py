"""Koordinator's NUMA-aware scheduling rules on top of the node engine (the ``koordinator``
profile), and DeviceShare's joint allocation of GPUs and RDMA NICs under one PCIe switch.

Read from koordinator-sh/koordinator:

* ``apis/extension/numa_aware.go`` - the pod annotation
  ``scheduling.koordinator.sh/numa-topology-spec`` (``numaTopologyPolicy``,
  ``singleNUMANodeExclusive``, default ``Required`` when a policy is set) and the node label
  ``node.koordinator.sh/numa-topology-policy``;
* ``pkg/scheduler/plugins/nodenumaresource`` - ``mergeTopologyPolicy``: a pod policy and a node
  policy that are both set and differ make the node unschedulable ("node(s) NUMA Topology policy
  not match"); the pod policy wins when set; the node label wins over the kubelet policy;
* ``pkg/scheduler/frameworkext/topologymanager/policy.go`` ``checkExclusivePolicy`` (see
  :func:`numalign.modes.exclusive_ok`): NUMA nodes are ``single`` (held by a single-NUMA pod),
  ``shared`` (held by a multi-NUMA pod) or idle;
* ``scoring.go`` / ``least_allocated.go`` / ``most_allocated.go`` - the plugin's Score
  (:class:`KoordinatorNumaScore`): the scoring strategy (default ``LeastAllocated``, cpu and
  memory weight 1) over the NUMA nodes the pod gets (their allocatable, what is allocated there
  plus the pod's requests; a pod with a cpuset counts every bound CPU of the node), or over the
  whole node when the pod has no NUMA policy or gets nothing NUMA-bound;
* ``pkg/scheduler/plugins/deviceshare`` (``device_allocator.go``, joint allocation) - with
  ``scheduling.koordinator.sh/device-joint-allocate: {"deviceTypes": ["gpu", "rdma"],
  "requiredScope": "SamePCIe"}`` the primary type is allocated first, the secondary type is taken
  from the PCIe switches the primary devices sit under (at least one per switch), and the result
  is refused unless both types span the same switches ("node(s) Device Joint-Allocate rules
  violation").

The filter runs the node in the ``koordinator`` engine mode (:mod:`numalign.modes`: the pod's and
the node label's policy, pod scope, Koordinator's CPU hints and bind policies from
:mod:`numalign.modes.koordinator.cpu`) and plans with it; the Score reuses that plan. A node
whose Topology Manager refuses the pod fails with Koordinator's own status message
(``topologymanager.Admit``: ``NewStatus(Unschedulable, reasons...)``, the reasons joined with
``", "``; :mod:`numalign.modes.koordinator.reasons`), as the scheduler's event would show it.
"""

from __future__ import annotations

import weakref
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from numalign.engine.merge_budget import MergeTooLarge
from numalign.engine.policies import Policy
from numalign.errors import InputError
from numalign.inputs.quantity import CPU, MEMORY, is_memory_resource
from numalign.machine.model import Device, Machine
from numalign.memo import remember
from numalign.modes.koordinator.numa import NumaNodeStatus, exclusive_ok, node_numa_policy
from numalign.modes.koordinator.score_amounts import ScoreAmounts, SubsetSums, score_amounts
from numalign.modes.koordinator.score_bound import ENUMERATE_NUMA, best_of_sums, numa_set_bound
from numalign.modes.rules import Mode
from numalign.node.admission import Node, PodResult
from numalign.node.plan_cache import state_key
from numalign.node.state import NodeState
from numalign.node.usage import (
    cpus_numa_nodes,
    numa_memory_held,
    pod_numa_nodes,
)
from numalign.pods import Pod, effective_pod_requests, guaranteed_cpus
from numalign.pods.annotations import Exclusive
from numalign.scheduler.filters import FilterResult
from numalign.scheduler.nrt_scores import MAX_NODE_SCORE
from numalign.scheduler.scorers import NumaScore

DEVICE_JOINT_ALLOCATE = "scheduling.koordinator.sh/device-joint-allocate"
ERR_POLICY_NOT_MATCH = "node(s) NUMA Topology policy not match"
ERR_EXCLUSIVE = "node(s) NUMA Topology exclusive policy not satisfied"
ERR_JOINT = "node(s) Device Joint-Allocate rules violation"
#: Koordinator device types -> the resource names numalign's machines use for them
DEVICE_TYPES = {"gpu": ("nvidia.com/gpu", "koordinator.sh/gpu"), "rdma": ("koordinator.sh/rdma", "rdma/hca")}


def numa_status(node: Node, exclude: str | None = None) -> dict[int, NumaNodeStatus]:
    """Each NUMA node's Koordinator status from the pods' cpusets on it (``node_allocation.go``
    ``addPodAllocation`` marks NUMA nodes by the CPUs a pod is bound to, not by its memory)."""
    status = {i: NumaNodeStatus.IDLE for i in node.machine.node_ids}
    st = node.state
    for uid, record in st.pods.items():  # the statuses do not depend on the pods' order
        if uid == exclude or record.observed:
            continue
        used = cpus_numa_nodes(node.machine, [c for cpus in st.cpu.pod_cpus(uid).values() for c in cpus])
        mark = NumaNodeStatus.SINGLE if len(used) == 1 else NumaNodeStatus.SHARED
        for i in used:
            if status[i] is NumaNodeStatus.IDLE or mark is NumaNodeStatus.SHARED:
                status[i] = mark
    return status


#: per node, its last plan (the state it was made on, the pod uid, the result): the Score right
#: after the Filter of the same pod on an unchanged node reuses it instead of planning again
_LAST_PLAN: weakref.WeakKeyDictionary[Node, tuple[NodeState, str, tuple[PodResult, NodeState | None]]] = (
    weakref.WeakKeyDictionary())


def _plan(node: Node, pod: Pod) -> tuple[PodResult, NodeState | None]:
    hit = _LAST_PLAN.get(node)
    if hit is not None and hit[0] is node.state and hit[1] == pod.uid:
        return hit[2]
    out = node.plan(pod)
    _LAST_PLAN[node] = (node.state, pod.uid, out)
    return out


def koordinator_filter(node: Node, pod: Pod) -> FilterResult:
    """NodeNUMAResource's filter: policy match, then the engine's plan, then exclusivity."""
    node.use_mode(Mode.KOORDINATOR)  # Koordinator's scheduler decides the node's NUMA allocation
    try:
        spec = pod.koordinator_numa_spec
    except InputError as e:
        return FilterResult(False, reason=e.message)
    node_policy = node_numa_policy(node.machine.labels, node.node_policy)
    if spec.policy is not None and node_policy is not Policy.NONE and spec.policy is not node_policy:
        return FilterResult(False, reason=ERR_POLICY_NOT_MATCH)
    try:
        result, planned = _plan(node, pod)
    except MergeTooLarge as e:  # the merge's step cap: this node is infeasible for this pod
        return FilterResult(False, reason=f"{e.reason}: {e.message}")
    if planned is None:
        if result.family_message and result.message:  # Koordinator's words: its Filter status
            return FilterResult(False, reason=result.message)
        return FilterResult(False, reason=f"{result.reason}: {result.message}")
    used = pod_numa_nodes(node.machine, planned, pod.uid)
    policy = spec.policy or node_policy
    if used and policy is not Policy.NONE and spec.exclusive is Exclusive.REQUIRED:
        mask = sum(1 << i for i in used)
        if not exclusive_ok(mask, spec.exclusive, numa_status(node)):
            return FilterResult(False, reason=ERR_EXCLUSIVE)
    return FilterResult(True, len(used), planned=planned, result=result)


def koordinator_node_key(node: Node) -> Hashable:
    """Everything :func:`koordinator_filter` and :class:`KoordinatorNumaScore` read of a node
    (nodes with equal keys answer a pod alike; :mod:`numalign.scheduler.node_groups`):

    * the node's admission (``Node.plan``): the Topology Manager's inputs, the plan cache's
      :func:`~numalign.node.plan_cache.state_key` (machine - its kubelet settings, labels and
      allocatable -, engine mode, what the managers' decisions read), and the predicates' (the
      node-level requests and pod count, whether node fit is checked, allocatable); a node
      that holds the pod itself is the walk's business, not the key's;
    * the exclusivity check: every NUMA node's status (:func:`numa_status`);
    * the score: the zones' amounts (the state key's memory tables and devices in use, and the
      CPUs held), the memory pods hold per NUMA node, the node-level requests."""
    requested, count = node.requested()
    held = numa_memory_held(node)
    return (
        state_key(node.machine, node.mode, node.state),
        node.state.cpu.assigned_cpus(),
        tuple(sorted(requested.items())),
        count,
        node.check_node_fit,
        tuple(sorted(node.allocatable.items())),
        tuple(sorted(numa_status(node).items())),
        tuple(sorted((n, tuple(sorted(per.items()))) for n, per in held.items())),
    )


# ---------------------------------------------------------------------------------- score


def resource_score(strategy: str, requested: int, allocatable: int) -> int:
    """``leastRequestedScore`` / ``mostRequestedScore`` (0..100, integer division)."""
    if strategy == "MostAllocated":
        return min(requested, allocatable) * MAX_NODE_SCORE // allocatable
    if requested > allocatable:
        return 0
    return (allocatable - requested) * MAX_NODE_SCORE // allocatable


@dataclass(frozen=True)
class _PodParts:
    """What :meth:`KoordinatorNumaScore.node_bound` reads of a pod on a node with given
    :class:`ScoreAmounts` rules (kept per pod shape)."""

    request: tuple[int, ...]  # per weighted resource, in the weights' order
    exclusive: int  # the app containers' exclusive CPUs
    #: whether the admitted pod holds a cpuset: the variants the bound tries
    variants: tuple[bool, ...]
    #: what the app containers hold was free on the NUMA nodes the pod gets (with exclusive
    #: CPUs), by resource
    need: tuple[tuple[str, int], ...]


#: :class:`_PodParts` by pod shape and what of the node they read; cleared beyond its size
_POD_PARTS: dict[Hashable, _PodParts] = {}
POD_PARTS_SIZE = 1 << 14


def _pod_parts(pod: Pod, amounts: ScoreAmounts) -> _PodParts:
    key = (pod.shape, amounts.resources, amounts.static_cpus, amounts.static_memory, amounts.aligned)
    got = _POD_PARTS.get(key)
    if got is not None:
        return got
    req = effective_pod_requests(pod)
    exclusive = sum(guaranteed_cpus(pod, c) for c in pod.app_containers) if amounts.static_cpus else 0
    # whether the admitted pod holds a cpuset: for sure when an app container gets exclusive
    # CPUs; never without a container asking for them; else either
    cpuset: bool | None = True if exclusive else (
        None if amounts.static_cpus and any(guaranteed_cpus(pod, c) for c in pod.init_containers) else False)
    need: dict[str, int] = {}
    if exclusive:
        # what the app containers hold was free on the NUMA nodes the pod gets: their exclusive
        # CPUs, devices that sit on one NUMA node and, for this Guaranteed pod under the Static
        # memory manager, memory
        need[CPU] = exclusive
        for c in pod.app_containers:
            for r, v in c.requests.items():
                if v > 0 and (r in amounts.aligned or (amounts.static_memory and is_memory_resource(r))):
                    need[r] = need.get(r, 0) + v
    parts = _PodParts(tuple(req.get(r, 0) for r in amounts.resources), exclusive,
                      (False, True) if cpuset is None else (cpuset,), tuple(sorted(need.items())))
    return remember(_POD_PARTS, key, parts, POD_PARTS_SIZE)


class KoordinatorNumaScore(NumaScore):
    """NodeNUMAResource's Score on one candidate (it reads the node: ``node_aware``)."""

    relative = False
    node_aware = True

    def __init__(self, strategy: str = "LeastAllocated", weights: Mapping[str, int] | None = None) -> None:
        if strategy not in ("LeastAllocated", "MostAllocated"):
            raise InputError(f"unknown scoring strategy {strategy!r} (known: LeastAllocated, MostAllocated)",
                             "scoringStrategy")
        self.strategy = strategy
        self.weights = dict(weights or {CPU: 1, MEMORY: 1})

    def scores(self, counts: Sequence[int], max_numa: int) -> list[int]:
        return [MAX_NODE_SCORE] * len(counts)  # without the node: the bound

    def bound(self, fewest: int, max_numa: int) -> int:
        return MAX_NODE_SCORE

    def node_bound(self, node: Node, pod: Pod) -> int | None:
        """The highest Score ``pod`` can get on ``node`` without planning it
        (:mod:`numalign.modes.koordinator.score_bound`): over the node-level amounts when the
        pod may get nothing NUMA-bound, and over every NUMA node set that can hold its exclusive
        CPUs, its devices that sit on one NUMA node and, under the Static memory manager, its
        memory (one NUMA node under ``single-numa-node``); with or without a cpuset when the pod alone does not tell.
        -1 when no such set exists (the filter refuses the pod there). LeastAllocated only
        (None: MostAllocated)."""
        if self.strategy != "LeastAllocated":
            return None
        try:
            policy = node.policy_for(pod)[0].policy
        except InputError:  # a malformed annotation: the filter's to refuse, with its reason
            return None
        amounts = score_amounts(node, self.weights)
        parts = _pod_parts(pod, amounts)
        weights = tuple(self.weights[r] for r in amounts.resources)
        score = self._resource_score
        fixed = amounts.fixed_before
        best: int | None = None
        if policy is Policy.NONE or not parts.exclusive:  # the node-level Score
            whole = amounts.node_level()
            for held in parts.variants:
                s = best_of_sums(((whole.alloc, whole.before),), parts.request, weights, fixed(held), score)
                best = s if best is None or (s is not None and s > best) else best
        if policy is Policy.NONE:
            return best
        ids = amounts.ids
        candidates: Sequence[SubsetSums] | None = None
        if parts.exclusive:
            need = dict(parts.need)
            if policy is Policy.SINGLE_NUMA_NODE and amounts.single_numa_devices:
                candidates = [c for c in amounts.subsets(True) if c.holds(need)]
            elif len(ids) <= ENUMERATE_NUMA:
                candidates = [c for c in amounts.subsets(False) if c.holds(need)]
            elif not amounts.sums(ids).holds(need):
                candidates = []
            if not candidates and candidates is not None:
                return -1  # no NUMA node set holds the pod: the filter refuses it
        elif len(ids) <= ENUMERATE_NUMA:
            candidates = amounts.subsets(False)
        for held in parts.variants:
            if candidates is not None:
                on_set = best_of_sums(((c.alloc, c.before) for c in candidates), parts.request, weights,
                                      fixed(held), score)
            else:  # more NUMA nodes than are enumerated: each resource apart
                on_set = numa_set_bound(None, ids, amounts.alloc, amounts.before,
                                        {CPU: amounts.bound_cpus} if held else {},
                                        dict(zip(amounts.resources, parts.request, strict=True)), self.weights,
                                        score)
            if on_set is not None:
                best = on_set if best is None else max(best, on_set)
        return 0 if best is None else best

    def _resource_score(self, requested: int, allocatable: int) -> int:
        return resource_score(self.strategy, requested, allocatable)

    def score_on(self, node: Node, pod: Pod, count: int, max_numa: int) -> int:
        planned = _plan(node, pod)[1]
        if planned is None:
            return 0
        req = effective_pod_requests(pod)
        policy = node.policy_for(pod)[0].policy
        used = pod_numa_nodes(node.machine, planned, pod.uid)
        amounts = score_amounts(node, self.weights)
        on = amounts.node_level() if policy is Policy.NONE or not used else amounts.sums(sorted(used))
        # a cpuset (the pod's record holds a container with exclusive CPUs): every bound CPU
        held = pod.uid in planned.pods and any(planned.cpu.pod_cpus(pod.uid).values())
        got = best_of_sums(((on.alloc, on.before),), [req.get(r, 0) for r in amounts.resources],
                           [self.weights[r] for r in amounts.resources], amounts.fixed_before(held),
                           self._resource_score)
        assert got is not None
        return got


# ----------------------------------------------------------------------- joint allocation


@dataclass(frozen=True)
class JointAllocation:
    """Devices per resource, and the PCIe switches (root ports) they sit under."""

    devices: Mapping[str, tuple[str, ...]]
    pcie: tuple[str, ...]


def _by_pcie(devices: Iterable[Device]) -> dict[str, list[Device]]:
    out: dict[str, list[Device]] = {}
    for d in devices:
        if d.pcie_root is not None:
            out.setdefault(d.pcie_root, []).append(d)
    return out


def joint_allocate(
    machine: Machine,
    requests: Sequence[tuple[str, int]],
    taken: Iterable[tuple[str, str]] = (),
) -> JointAllocation:
    """``SamePCIe`` joint allocation: ``requests`` is ``[(primary resource, n), (secondary, m),
    ...]`` in ``deviceTypes`` order. The primary devices fill the fewest PCIe switches (fullest
    first, then by switch id); each secondary type takes at least one device under every one of
    those switches and no device elsewhere. Raises :class:`InputError` (``ERR_JOINT``) when the
    switches cannot match."""
    if not requests:
        raise InputError("no device types to allocate", "deviceTypes")
    used = set(taken)
    free = [d for d in machine.devices if d.healthy and (d.resource, d.id) not in used]
    (primary, n), *secondaries = requests
    groups = _by_pcie(d for d in free if d.resource == primary)
    order = sorted(groups, key=lambda r: (-len(groups[r]), r))
    chosen: list[Device] = []
    switches: list[str] = []
    for root in order:
        if len(chosen) >= n:
            break
        take = groups[root][: n - len(chosen)]
        chosen += take
        switches.append(root)
    if len(chosen) < n:
        raise InputError(f"{ERR_JOINT}: {len(chosen)} of {n} {primary} free under known PCIe switches", primary)
    out = {primary: tuple(d.id for d in chosen)}
    for res, m in secondaries:
        per = _by_pcie(d for d in free if d.resource == res)
        want = max(m, len(switches))
        picked: list[Device] = []
        for root in switches:  # one under every primary switch first
            if not per.get(root):
                raise InputError(f"{ERR_JOINT}: no free {res} under PCIe switch {root}", res)
            picked.append(per[root].pop(0))
        for root in switches:  # then the rest, still under the same switches
            while len(picked) < want and per.get(root):
                picked.append(per[root].pop(0))
        if len(picked) < want:
            raise InputError(f"{ERR_JOINT}: {len(picked)} of {want} {res} under the GPUs' PCIe switches", res)
        out[res] = tuple(d.id for d in picked)
    return JointAllocation(out, tuple(switches))


__all__ = [
    "DEVICE_JOINT_ALLOCATE",
    "ERR_EXCLUSIVE",
    "ERR_JOINT",
    "ERR_POLICY_NOT_MATCH",
    "JointAllocation",
    "KoordinatorNumaScore",
    "joint_allocate",
    "koordinator_filter",
    "koordinator_node_key",
    "numa_status",
    "resource_score",
]
