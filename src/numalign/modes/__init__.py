"""Engine modes: the other schedulers' Topology Manager variants as rule tables over one merge.

DESIGN.md: "Variants of other schedulers are **modes** of the same engine (``kubelet``,
``koordinator``, ``volcano``): small rule tables over one merge". The merge itself is
:meth:`numalign.engine.policies.TopologyPolicy.merge`; a :class:`ModeRules` row says which of its two
preference rules a mode uses and what the mode does with the result.

Read upstream:

* **kubelet** - ``pkg/kubelet/cm/topologymanager`` (the engine's default, unchanged).
* **volcano** - volcano-sh/volcano ``pkg/scheduler/plugins/numaaware/policy/policy.go``:
  ``mergePermutation`` marks a permutation preferred when every hint is preferred (no
  equal-affinity rule: the kubelet's pre-1.21 rule, ``legacy_merge``); the narrowest mask wins.
  ``policy_single_numa_node.go`` returns the merged hint as is: an all-nodes result stays the
  all-nodes mask (the kubelet turns it into ``nil``). ``numaaware.go`` requires the task's
  policy to equal the node's (``volcano.sh/numa-topology-policy`` vs the Numatopology's
  ``TopologyManagerPolicy``) for a task with a policy.
* **koordinator** - koordinator-sh/koordinator ``pkg/scheduler/frameworkext/topologymanager``:
  ``policy.go`` ``mergePermutation``: preferred needs every hint preferred *and* every non-nil
  affinity equal (the kubelet's current rule); a permutation is ``Unsatisfied`` unless its
  widest affinity equals the merged one and no provider said "cannot satisfy";
  ``filterProvidersHints`` gives one reason per resource with no possible affinity
  (``ErrUnsatisfiedNUMAResource``). ``policy_best_effort.go``: an unsatisfied best hint becomes
  the all-nodes affinity. ``policy_single_numa_node.go``: an all-nodes result becomes ``nil``.
  ``checkExclusivePolicy``: see :func:`exclusive_ok`.

Koordinator's hints carry a ``Score`` (``NUMATopologyHint.Score``; NodeNUMAResource's NUMA
scorer, DeviceShare's 500): ``mergeFilteredHints`` lets a later mask of the best one's width
replace it when it is a smaller integer or scores higher; :func:`score_tie_break` replays that
fold among the preferred masks of the best width (``merge(score=...)``).

Where numalign deliberately differs (documented in docs/schedulers.md): among non-preferred
masks the kubelet's ranking is kept (no score tie-break); ``unsatisfied`` is decided for the
chosen mask (is there a permutation reaching it whose hints all equal it), where Koordinator
keeps the flag of the first permutation that reached the mask.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from numalign.engine.bitmask import ids_of, mask_of
from numalign.engine.hints import GeneratedHints, HintList, ProviderHints, TopologyHint, flatten
from numalign.engine.policies import Policy, Scope, TopologyPolicy, parse_policy
from numalign.errors import InputError
from numalign.inputs.documents import loads_json
from numalign.pods import Pod


class Mode(StrEnum):
    KUBELET = "kubelet"
    KOORDINATOR = "koordinator"
    VOLCANO = "volcano"


#: Koordinator's node label for the node's NUMA topology policy (apis/extension/numa_aware.go)
KOORDINATOR_NODE_POLICY_LABEL = "node.koordinator.sh/numa-topology-policy"
#: a node label (or NRT attribute) choosing the engine mode of a node (numalign's own)
MODE_LABEL = "numalign.io/engine-mode"
#: Koordinator's pod annotation for the pod's NUMA policy and exclusivity
NUMA_TOPOLOGY_SPEC = "scheduling.koordinator.sh/numa-topology-spec"
#: Koordinator's ErrUnsatisfiedNUMAResource
ERR_UNSATISFIED_NUMA_RESOURCE = "Insufficient NUMA %s"


@dataclass(frozen=True)
class ModeRules:
    """One mode's rules over the shared merge."""

    mode: Mode
    #: preferred = every picked hint preferred, without the equal-affinity rule
    legacy_merge: bool
    #: single-numa-node turns an all-nodes result into "no affinity" (None)
    snn_all_nodes_to_none: bool
    #: best-effort replaces an unsatisfied best hint by the all-nodes affinity
    best_effort_unsatisfied_to_all: bool
    #: the merge reports ``unsatisfied`` and per-resource reasons
    reports_unsatisfied: bool
    #: a pod with a policy is only placed on a node with the same policy
    task_policy_must_match_node: bool
    #: where the pod's own policy is read (annotation keys, in order)
    pod_policy_annotations: tuple[str, ...]
    #: the node label holding the node's policy, if the mode reads one
    node_policy_label: str | None


RULES: dict[Mode, ModeRules] = {
    Mode.KUBELET: ModeRules(Mode.KUBELET, False, True, False, False, False, (), None),
    Mode.VOLCANO: ModeRules(
        Mode.VOLCANO, True, False, False, False, True, ("volcano.sh/numa-topology-policy",), None
    ),
    Mode.KOORDINATOR: ModeRules(
        Mode.KOORDINATOR, False, True, True, True, False,
        ("scheduling.koordinator.sh/numa-topology-spec",), KOORDINATOR_NODE_POLICY_LABEL,
    ),
}


def parse_mode(value: object, field: str = "mode") -> Mode:
    if value is None:
        return Mode.KUBELET
    try:
        return Mode(str(value))
    except ValueError:
        raise InputError(f"unknown engine mode {value!r} (known: {', '.join(m.value for m in Mode)})", field) from None


def node_mode(labels: Mapping[str, str], field: str = f"labels[{MODE_LABEL}]") -> Mode:
    """A node's engine mode from its ``numalign.io/engine-mode`` label (default ``kubelet``)."""
    raw = labels.get(MODE_LABEL)
    return parse_mode(raw or None, field)


# ---------------------------------------------------------------- Koordinator exclusivity


class NumaNodeStatus(StrEnum):
    """Koordinator ``NumaNodeStatus``: what a NUMA node already holds."""

    IDLE = "idle"
    SINGLE = "single"  # a single-NUMA pod holds resources here
    SHARED = "shared"  # a multi-NUMA pod holds resources here


class Exclusive(StrEnum):
    """Koordinator ``NumaTopologyExclusive`` (``numaTopologyPolicy.singleNUMANodeExclusive``)."""

    REQUIRED = "Required"
    PREFERRED = "Preferred"


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


def _mark_exclusive(p: ProviderHints, exclusive: Exclusive, status: Mapping[int, NumaNodeStatus]) -> ProviderHints:
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


@dataclass(frozen=True)
class PodNumaSpec:
    policy: Policy | None
    #: None: no exclusivity check (neither a policy nor ``singleNUMANodeExclusive`` given)
    exclusive: Exclusive | None


def pod_numa_spec(pod: Pod) -> PodNumaSpec:
    """The pod's ``numa-topology-spec`` annotation as Koordinator reads it: ``""``/``None`` is no
    policy; the exclusivity is ``Required`` when not given and the pod has a policy, else none
    (plugin.go Filter: ``podNUMAExclusive == "" && podNUMATopologyPolicy != ""``)."""
    raw = pod.annotations.get(NUMA_TOPOLOGY_SPEC)
    if not raw:
        return PodNumaSpec(None, None)
    field = f"{pod.key}: metadata.annotations[{NUMA_TOPOLOGY_SPEC}]"
    spec = loads_json(raw, field)
    if not isinstance(spec, dict):
        raise InputError("must be a JSON object", field)
    pol = spec.get("numaTopologyPolicy")
    policy = parse_policy(pol, f"{field}.numaTopologyPolicy")[0] if pol else None
    policy = policy if policy is not Policy.NONE else None
    exc = spec.get("singleNUMANodeExclusive") or ("Required" if policy is not None else None)
    try:
        exclusive = None if exc is None else Exclusive(exc)
    except ValueError:
        raise InputError(f"must be Required or Preferred, got {exc!r}", f"{field}.singleNUMANodeExclusive") from None
    return PodNumaSpec(policy, exclusive)


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
    asked = pod_numa_spec(pod).policy
    return (asked if asked is not None else node), Scope.POD


@dataclass(frozen=True)
class ModeResult:
    """A mode's merge answer: the best hint, the admit decision and (Koordinator) whether the
    best affinity can hold every resource, with one reason per resource that has none."""

    hint: TopologyHint
    admit: bool
    unsatisfied: bool = False
    reasons: tuple[str, ...] = ()


def _hints(lst: HintList) -> list[TopologyHint]:
    return lst.materialize() if isinstance(lst, GeneratedHints) else list(lst)


def _cannot_satisfy(providers: Sequence[ProviderHints]) -> list[str]:
    """Resources a provider answered with an empty list, sorted."""
    out: list[str] = []
    for p in providers:
        if not p:
            continue
        out.extend(name for name, hints in p.items() if hints is not None and _no_hint(hints))
    return sorted(out)


def _no_hint(lst: HintList) -> bool:
    """An empty answer ("cannot satisfy"), without listing a generated family's masks."""
    return lst.is_empty() if isinstance(lst, GeneratedHints) else not lst


def _satisfied(lists: Sequence[HintList], mask: int) -> bool:
    """Koordinator's ``Unsatisfied`` rule for the merged mask: some permutation reaches
    ``mask`` with every non-nil affinity equal to it (its widest affinity is the merged one)."""
    return all(
        lst.contains(mask) if isinstance(lst, GeneratedHints)
        else any(h.affinity is None or h.affinity == mask for h in lst)
        for lst in lists
    )


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


def merge(
    mode: Mode,
    policy: TopologyPolicy,
    providers: Sequence[ProviderHints],
    exclusive: Exclusive | None = None,
    status: Mapping[int, NumaNodeStatus] | None = None,
    score: Callable[[int], int] | None = None,
) -> ModeResult:
    """Merge provider hints under ``policy`` with ``mode``'s rules (one merge for all modes).

    ``exclusive``/``status`` (Koordinator): a merged affinity that fails :func:`exclusive_ok`
    is not preferred. A preferred Koordinator permutation has every non-nil affinity equal to
    the merged one, so marking the hints whose affinity fails as not preferred before the merge
    is the same rule; the all-nodes result of an all-nil permutation is checked after it.

    ``score`` (Koordinator): the hints' summed ``Score`` of a mask; a preferred best hint is
    re-chosen among the preferred masks of its width by :func:`score_tie_break`."""
    rules = RULES[mode]
    if rules.legacy_merge != policy.legacy_merge:
        policy = replace(policy, legacy_merge=rules.legacy_merge)
    if exclusive is not None and status is not None:
        providers = [_mark_exclusive(p, exclusive, status) for p in providers]
    base = policy.merge(providers)
    hint, admit = base.hint, base.admit
    if (
        score is not None and rules.reports_unsatisfied and hint.preferred and hint.affinity is not None
        and policy.policy is not Policy.NONE
    ):
        single = policy.policy is Policy.SINGLE_NUMA_NODE
        hint = TopologyHint(score_tie_break(policy.nodes, flatten(providers), hint.affinity, score, single), True)
    if (
        exclusive is not None and status is not None and hint.preferred
        and hint.affinity in (None, policy.default_mask) and policy.policy is not Policy.NONE
        and not exclusive_ok(policy.default_mask, exclusive, status)
    ):
        hint = TopologyHint(hint.affinity, False)
        admit = policy.policy is Policy.BEST_EFFORT
    if policy.policy is Policy.NONE:
        return ModeResult(hint, admit)
    default = policy.default_mask
    if policy.policy is Policy.SINGLE_NUMA_NODE and not rules.snn_all_nodes_to_none and hint.affinity is None:
        hint = TopologyHint(default, hint.preferred)  # Volcano keeps the all-nodes mask
    if not rules.reports_unsatisfied:
        return ModeResult(hint, admit)
    missing = _cannot_satisfy(providers)
    reasons = tuple(ERR_UNSATISFIED_NUMA_RESOURCE % r for r in missing)
    mask = default if hint.affinity is None else hint.affinity
    unsatisfied = bool(missing) or (not hint.preferred and not _satisfied(flatten(providers), mask))
    if policy.policy is Policy.BEST_EFFORT and rules.best_effort_unsatisfied_to_all and unsatisfied:
        return ModeResult(TopologyHint(default, hint.preferred), True, False, reasons)
    return ModeResult(hint, admit, unsatisfied, reasons)




__all__ = [
    "ERR_UNSATISFIED_NUMA_RESOURCE",
    "KOORDINATOR_NODE_POLICY_LABEL",
    "MODE_LABEL",
    "NUMA_TOPOLOGY_SPEC",
    "RULES",
    "SCORE_TIE_BREAK_LIMIT",
    "Exclusive",
    "Mode",
    "ModeResult",
    "ModeRules",
    "NumaNodeStatus",
    "PodNumaSpec",
    "exclusive_ok",
    "koordinator_policy",
    "merge",
    "node_mode",
    "node_numa_policy",
    "parse_mode",
    "pod_numa_spec",
    "score_tie_break",
]
