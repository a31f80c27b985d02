"""Koordinator's NUMA rules over the shared merge: single-NUMA exclusivity
(``checkExclusivePolicy``), the hints' scores as a tie-break (``mergeFilteredHints``) and the
policy a pod gets on a node (``mergeTopologyPolicy``, the node label
``node.koordinator.sh/numa-topology-policy``).

Read upstream: koordinator-sh/koordinator ``pkg/scheduler/frameworkext/topologymanager``
(``policy.go``) and ``pkg/scheduler/plugins/nodenumaresource`` (``plugin.go``, ``util.go``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from enum import StrEnum

from numalign.engine.bitmask import ids_of, mask_of
from numalign.engine.hints import GeneratedHints, HintList, ProviderHints, TopologyHint
from numalign.engine.policies import Policy, Scope, parse_policy
from numalign.pods import Pod
from numalign.pods.annotations import Exclusive

#: Koordinator's node label for the node's NUMA topology policy (apis/extension/numa_aware.go)
KOORDINATOR_NODE_POLICY_LABEL = "node.koordinator.sh/numa-topology-policy"

class NumaNodeStatus(StrEnum):
    """Koordinator ``NumaNodeStatus``: what a NUMA node already holds."""

    IDLE = "idle"
    SINGLE = "single"  # a single-NUMA pod holds resources here
    SHARED = "shared"  # a multi-NUMA pod holds resources here

def exclusive_ok(affinity: int | None, exclusive: Exclusive, status: Mapping[int, NumaNodeStatus]) -> bool:
    """Koordinator ``checkExclusivePolicy``: under ``Required`` a multi-NUMA affinity may not
    touch a NUMA node held by a single-NUMA pod, and a single-NUMA affinity may not use a NUMA
    node shared by a multi-NUMA pod. ``Preferred`` accepts everything; no affinity fails."""
    if affinity is None:
        return False
    if exclusive is not Exclusive.REQUIRED:
        return True
    ids = ids_of(affinity)
    if len(ids) > 1:
        return all(status.get(i, NumaNodeStatus.IDLE) is not NumaNodeStatus.SINGLE for i in ids)
    return status.get(ids[0], NumaNodeStatus.IDLE) is not NumaNodeStatus.SHARED

def mark_exclusive(p: ProviderHints, exclusive: Exclusive, status: Mapping[int, NumaNodeStatus]) -> ProviderHints:
    if not p:
        return p
    out: dict[str, list[TopologyHint] | None] = {}
    for name, hints in p.items():
        if hints is None:
            out[name] = None
            continue
        out[name] = [
            TopologyHint(h.affinity, False)
            if h.preferred and h.affinity is not None and not exclusive_ok(h.affinity, exclusive, status)
            else h
            for h in _hints(hints)
        ]
    return out

def _hints(lst: HintList) -> list[TopologyHint]:
    return lst.materialize() if isinstance(lst, GeneratedHints) else list(lst)

#: the most same-size candidate masks the score tie-break visits (beyond: the lowest ids win)
SCORE_TIE_BREAK_LIMIT = 20_000

def _preferred_everywhere(lists: Sequence[HintList], mask: int, single: bool) -> bool:
    """Is there a permutation whose hints are all preferred with affinity ``mask`` or none
    (the only permutations Koordinator's ``mergePermutation`` marks preferred for ``mask``)?"""
    if single and mask.bit_count() != 1:
        return False
    for lst in lists:
        if isinstance(lst, GeneratedHints):
            if not (lst.contains(mask) and lst.preferred(mask)):
                return False
        elif not any(h.preferred and h.affinity in (None, mask) for h in lst):
            return False
    return True

def score_tie_break(
    nodes: Sequence[int], lists: Sequence[HintList], best: int, score: Callable[[int], int], single: bool = False
) -> int:
    """Koordinator ``mergeFilteredHints`` among preferred merged hints as wide as ``best``:
    permutations come in ``IterateBitMasks`` order (NUMA-id combinations, lexicographic); a
    later mask replaces the best one when it is narrower (same width: the smaller integer) or
    when its summed ``Score`` is higher. ``score(mask)`` is the sum over the hint lists of the
    scores of their hints equal to ``mask``."""
    k = best.bit_count()
    if math.comb(len(nodes), k) > SCORE_TIE_BREAK_LIMIT:
        return best
    chosen: int | None = None
    chosen_score = 0
    for combo in itertools.combinations(sorted(nodes), k):
        m = mask_of(combo)
        if not _preferred_everywhere(lists, m, single):
            continue
        s = score(m)
        if chosen is None or m < chosen or s > chosen_score:
            chosen, chosen_score = m, s
    return best if chosen is None else chosen

def node_numa_policy(labels: Mapping[str, str], kubelet_policy: Policy) -> Policy:
    """Koordinator ``getNUMATopologyPolicy``: the node label
    ``node.koordinator.sh/numa-topology-policy`` when set, else the kubelet's policy."""
    raw = labels.get(KOORDINATOR_NODE_POLICY_LABEL, "")
    if raw:
        return parse_policy(raw, f"labels[{KOORDINATOR_NODE_POLICY_LABEL}]")[0]
    return kubelet_policy

def koordinator_policy(labels: Mapping[str, str], kubelet_policy: Policy, pod: Pod) -> tuple[Policy, Scope]:
    """The policy the ``koordinator`` mode applies to ``pod`` (``mergeTopologyPolicy``): the
    pod's ``numaTopologyPolicy`` when set (a mismatch with a node policy is the filter's to
    refuse), else the node's; always pod scope (Koordinator hints and allocates the pod's
    requests as a whole)."""
    node = node_numa_policy(labels, kubelet_policy)
    asked = pod.koordinator_numa_spec.policy
    return (asked if asked is not None else node), Scope.POD


__all__ = [
    "KOORDINATOR_NODE_POLICY_LABEL",
    "SCORE_TIE_BREAK_LIMIT",
    "NumaNodeStatus",
    "exclusive_ok",
    "koordinator_policy",
    "mark_exclusive",
    "node_numa_policy",
    "score_tie_break",
]
