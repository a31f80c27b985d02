"""One merge for every engine mode: the policy's merge (the kubelet's) under a family's rule row.

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

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from numalign.engine.hints import GeneratedHints, HintList, ProviderHints, TopologyHint, flatten
from numalign.engine.policies import Policy, TopologyPolicy
from numalign.modes.koordinator.numa import (
    NumaNodeStatus,
    exclusive_ok,
    mark_exclusive,
    score_tie_break,
)
from numalign.modes.rules import ModeRules
from numalign.pods.annotations import Exclusive

#: Koordinator's ErrUnsatisfiedNUMAResource
ERR_UNSATISFIED_NUMA_RESOURCE = "Insufficient NUMA %s"


@dataclass(frozen=True)
class ModeResult:
    """A mode's merge answer: the best hint, the admit decision and (Koordinator) whether the
    best affinity can hold every resource, with one reason per resource that has none."""

    hint: TopologyHint
    admit: bool
    unsatisfied: bool = False
    reasons: tuple[str, ...] = ()

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

def merge(
    rules: ModeRules,
    policy: TopologyPolicy,
    providers: Sequence[ProviderHints],
    exclusive: Exclusive | None = None,
    status: Mapping[int, NumaNodeStatus] | None = None,
    score: Callable[[int], int] | None = None,
) -> ModeResult:
    """Merge provider hints under ``policy`` with a mode's ``rules`` (one merge for all modes).

    ``exclusive``/``status`` (Koordinator): a merged affinity that fails :func:`exclusive_ok`
    is not preferred. A preferred Koordinator permutation has every non-nil affinity equal to
    the merged one, so marking the hints whose affinity fails as not preferred before the merge
    is the same rule; the all-nodes result of an all-nil permutation is checked after it.

    ``score`` (Koordinator): the hints' summed ``Score`` of a mask; a preferred best hint is
    re-chosen among the preferred masks of its width by :func:`score_tie_break`."""
    if rules.legacy_merge != policy.legacy_merge:
        policy = replace(policy, legacy_merge=rules.legacy_merge)
    if exclusive is not None and status is not None:
        providers = [mark_exclusive(p, exclusive, status) for p in providers]
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


__all__ = ["ERR_UNSATISFIED_NUMA_RESOURCE", "ModeResult", "merge"]
