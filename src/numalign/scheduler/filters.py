"""NUMA filters, one per scheduler family. Each answers, for one pod on one node, whether the
node passes and how many NUMA nodes the pod would use there (for NUMA-aware scores).

* :func:`exact_filter` - numalign: the node engine's own admission (``Node.plan``).
* :func:`nrt_snn_filter` - scheduler-plugins ``NodeResourceTopologyMatch``: only
  single-numa-node nodes are checked, against per-NUMA *available* amounts, container by
  container (container scope) or for the pod's effective request (pod scope).

The other families' filters plug in from their folders: Volcano's predicate
(:mod:`numalign.modes.volcano.predicate`), Koordinator's NodeNUMAResource
(:mod:`numalign.modes.koordinator.scheduling`).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import cast

from numalign.engine.merge_budget import MergeTooLarge
from numalign.engine.policies import Policy, Scope
from numalign.inputs.quantity import CPU, is_memory_resource
from numalign.memo import remember
from numalign.node.admission import Node, PodResult
from numalign.node.state import NodeState
from numalign.node.usage import available_key, pod_numa_nodes, zones_of
from numalign.pods import Pod, QOSClass, effective_pod_requests
from numalign.scheduler.nrt_requests import NrtPodRequests, nrt_pod_requests, nrt_units


@dataclass(frozen=True)
class FilterResult:
    passed: bool
    numa_count: int = 0  # NUMA nodes the pod would use (0 = not NUMA-bound)
    reason: str = ""
    planned: NodeState | None = None  # exact filter: the state after admission
    result: PodResult | None = None  # exact filter: the node's admission result


#: NUMA counts of admissions by the identity of their results' ``containers`` (kept alive
#: here, so an id is never reused while remembered). A plan replayed from the node's plan
#: cache shares the cached result's ``containers`` and holds what the cached plan held, so it
#: uses the same NUMA nodes.
_NUMA_COUNTS: dict[int, tuple[object, int]] = {}
_NUMA_COUNTS_SIZE = 1 << 12


def _numa_count(node: Node, pod: Pod, result: PodResult, planned: NodeState) -> int:
    """How many NUMA nodes the admitted pod uses in ``planned`` (``pod_numa_nodes``)."""
    containers = result.containers
    if not containers:  # the empty tuple is one object: no memo
        return len(pod_numa_nodes(node.machine, planned, pod.uid))
    hit = _NUMA_COUNTS.get(id(containers))
    if hit is not None and hit[0] is containers:
        return hit[1]
    count = len(pod_numa_nodes(node.machine, planned, pod.uid))
    return remember(_NUMA_COUNTS, id(containers), (containers, count), _NUMA_COUNTS_SIZE)[1]


def _numa_count_plain(node: Node, pod: Pod, result: PodResult, planned: NodeState) -> int:
    del result
    return len(pod_numa_nodes(node.machine, planned, pod.uid))


def _exact(node: Node, pod: Pod, numa_count: Callable[[Node, Pod, PodResult, NodeState], int]) -> FilterResult:
    try:
        result, planned = node.plan(pod)
    except MergeTooLarge as e:
        return FilterResult(False, reason=f"{e.reason}: {e.message}")
    if planned is None:
        return FilterResult(False, reason=f"{result.reason}: {result.message}")
    return FilterResult(True, numa_count(node, pod, result, planned), planned=planned, result=result)


def exact_filter(node: Node, pod: Pod) -> FilterResult:
    return _exact(node, pod, _numa_count)


def exact_filter_reference(node: Node, pod: Pod) -> FilterResult:
    """:func:`exact_filter` without the NUMA-count memo (what the memo must agree with)."""
    return _exact(node, pod, _numa_count_plain)


# ------------------------------------------------------------------ scheduler-plugins


def nrt_node_key(node: Node) -> Hashable:
    """Everything :func:`nrt_snn_filter` and the NRT scores
    (:class:`~numalign.scheduler.scorers.NrtLeastNumaNodes`,
    :class:`~numalign.scheduler.scorers.NrtZoneScore`) read of a node: its machine (NUMA
    distances), policy and scope, and its zones' available amounts
    (:func:`~numalign.node.usage.available_key`)."""
    return (id(node.machine), node.node_policy, node.node_scope, available_key(node))


def _numa_affine(res: str) -> bool:
    """Native resources the plugin checks per NUMA zone (cpu, memory, hugepages)."""
    return res == CPU or is_memory_resource(res)


def _fit_any_numa(req: dict[str, int], avail: dict[int, dict[str, int]], qos: QOSClass) -> int | None:
    mask = set(avail)
    for res, qty in req.items():
        if qty <= 0:
            continue
        if qos is not QOSClass.GUARANTEED and _numa_affine(res):
            continue
        zones = {i for i, a in avail.items() if res in a}
        if not zones:
            if _numa_affine(res):
                return None
            continue  # host-level resource: not NUMA-checked
        ok = {i for i in zones if avail[i][res] >= qty}
        mask &= ok
        if not mask:
            return None
    return min(mask) if mask else None


def _published_available(node: Node) -> dict[int, dict[str, int]]:
    """The zones' available amounts per NUMA id (:func:`~numalign.node.usage.available_key`'s
    pairs as dicts), made once per node state's zones and shared: not to be changed."""
    held = zones_of(node)
    got = held.derived.get("nrt_available")
    if got is None:
        published = cast("tuple[tuple[int, tuple[tuple[str, int], ...]], ...]", held.available)
        got = {i: dict(amounts) for i, amounts in published}
        held.remember("nrt_available", got)
    return cast("dict[int, dict[str, int]]", got)


def _nrt_checks(node: Node, pod: Pod) -> bool:
    """Does :func:`nrt_snn_filter` check the pod's requests on the node (else it passes)?"""
    if node.node_policy is not Policy.SINGLE_NUMA_NODE:
        return False
    return pod.qos is not QOSClass.BEST_EFFORT or any(
        not _numa_affine(r) for c in pod.containers for r in c.requests
    )


def nrt_snn_filter(node: Node, pod: Pod) -> FilterResult:
    if not _nrt_checks(node, pod):
        return FilterResult(True)
    # the answer reads the zones' available amounts, the scope and the pod's requests only:
    # kept with the zones (nodes in other states with the same zones ask again otherwise)
    reqs = nrt_pod_requests(pod)
    held = zones_of(node)
    key = ("nrt_filter", node.node_scope, reqs.key)
    got = held.derived.get(key)
    if got is None:
        got = _nrt_snn_fit(node, pod, reqs)
        held.remember(key, got)
    return cast("FilterResult", got)


def nrt_snn_refuses_always(node: Node, pod: Pod) -> bool:
    """True when :func:`nrt_snn_filter` refuses ``pod`` on ``node`` whatever the node holds:
    one request it checks on its own against the zones' available amounts - the pod's
    effective request (pod scope), or one init or app container's (container scope) - fits no
    zone even with the zone's allocatable amounts. A zone never has more available than
    allocatable, and a request fits fewer zones with less, so that check fails in every
    state. (Refusals that only the app containers' taking in turn causes are not claimed.)
    It reads the node's machine, policy and scope only: the same answer on every node alike."""
    if not _nrt_checks(node, pod):
        return False
    reqs = nrt_pod_requests(pod)
    full = {i: z.allocatable for i, z in zones_of(node).amounts.items()}  # read only
    if node.node_scope is Scope.POD:
        if reqs.effective is None:
            reqs.effective = nrt_units(effective_pod_requests(pod))
        return _fit_any_numa(reqs.effective, full, pod.qos) is None
    return any(_fit_any_numa(req, full, pod.qos) is None
               for req in (*reqs.init, *(req for _, req in reqs.app)))


def _nrt_snn_fit(node: Node, pod: Pod, reqs: NrtPodRequests) -> FilterResult:
    # numa_amounts' available amounts per zone, as available_key holds them (shared: a zone is
    # copied before a container's request is taken from it)
    avail = _published_available(node)
    if node.node_scope is Scope.POD:
        if reqs.effective is None:
            reqs.effective = nrt_units(effective_pod_requests(pod))
        if _fit_any_numa(reqs.effective, avail, pod.qos) is None:
            return FilterResult(False, reason="cannot align pod")
        return FilterResult(True, 1)
    for c, req in zip(pod.init_containers, reqs.init, strict=True):
        if _fit_any_numa(req, avail, pod.qos) is None:
            return FilterResult(False, reason=f"cannot align init container {c.name}")
    own = False  # avail is this call's own copy (its zones still shared until taken from)
    for name, req in reqs.app:
        numa = _fit_any_numa(req, avail, pod.qos)
        if numa is None:
            return FilterResult(False, reason=f"cannot align container {name}")
        zone = avail[numa]
        taken = {res: qty for res, qty in req.items()
                 if res in zone and (pod.qos is QOSClass.GUARANTEED or not _numa_affine(res))}
        if taken:
            if not own:
                avail, own = dict(avail), True
            zone = avail[numa] = dict(zone)
            for res, qty in taken.items():
                zone[res] -= qty
    return FilterResult(True, 1)


__all__ = [
    "FilterResult",
    "exact_filter",
    "nrt_node_key",
    "nrt_snn_filter",
    "nrt_snn_refuses_always",
]
