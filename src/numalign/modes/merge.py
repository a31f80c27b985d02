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
  affinity equal (the kubelet's current rule); a permutation is ``Unsatisfied`` when its widest
  affinity is wider than the merged one or a provider said "cannot satisfy", and the best hint
  keeps the flag of the first permutation that reached it
  (:func:`~numalign.modes.koordinator.reasons.first_reaching_unsatisfied`).
  ``policy_best_effort.go``: an unsatisfied best hint becomes the all-nodes affinity; never a
  reason. ``policy_restricted.go``: a resource nobody can satisfy gives the all-nodes hint, not
  admitted, with ``Unsatisfied NUMA <resource>``; a hint not admitted gives ``Unaligned NUMA Hint
  cause ...``. ``policy_single_numa_node.go``: the same with no hint; an all-nodes result becomes
  ``nil``. ``policy_none.go``: no hint, admitted. The reasons' words are in
  :mod:`numalign.modes.koordinator.reasons`. ``checkExclusivePolicy``: see :func:`exclusive_ok`.

Koordinator's hints carry a ``Score`` (``NUMATopologyHint.Score``; NodeNUMAResource's NUMA
scorer, DeviceShare's 500): ``mergeFilteredHints`` lets a later mask of the best one's width
replace it when it is a smaller integer or scores higher; :func:`score_tie_break` replays that
fold among the preferred masks of the best width (``merge(score=...)``).

Where numalign differs (documented in docs/schedulers.md): among non-preferred masks the
kubelet's ranking is kept (``bestNonPreferredAffinityCount``, no score tie-break), where
Koordinator's fold keeps the narrowest mask; the ``Unsatisfied`` flag and the reasons are
Koordinator's for the mask chosen.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from numalign.engine.hints import ProviderHints, TopologyHint, flatten
from numalign.engine.policies import Policy, TopologyPolicy
from numalign.modes.koordinator.numa import (
    NumaNodeStatus,
    exclusive_ok,
    mark_exclusive,
    score_tie_break,
)
from numalign.modes.koordinator.reasons import (
    ERR_UNSATISFIED_NUMA_RESOURCE,
    RESTRICTED_SEPARATOR,
    SINGLE_NUMA_NODE_SEPARATOR,
    first_reaching_unsatisfied,
    unaligned_reason,
    unsatisfied_resources,
)
from numalign.modes.rules import ModeRules
from numalign.pods.annotations import Exclusive


@dataclass(frozen=True)
class ModeResult:
    """A mode's merge answer: the best hint, the admit decision and (Koordinator) the best
    hint's ``Unsatisfied`` flag and the reasons its policy returns. The reasons are built on
    first read (``explain``): a scheduler trying many nodes pays for the words only where it
    reports them."""

    hint: TopologyHint
    admit: bool
    unsatisfied: bool = False
    explain: Callable[[], tuple[str, ...]] | None = field(default=None, compare=False, repr=False)

    @property
    def reasons(self) -> tuple[str, ...]:
        return () if self.explain is None else self.explain()


def _words(build: Callable[[], tuple[str, ...]]) -> Callable[[], tuple[str, ...]]:
    """``build`` run once, on first call."""
    done: list[tuple[str, ...]] = []

    def explain() -> tuple[str, ...]:
        if not done:
            done.append(build())
        return done[0]

    return explain


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
        policy = policy.replace(legacy_merge=rules.legacy_merge)
    asked = providers  # the providers' own hints: Koordinator's reasons print these
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
    return _koordinator(rules, policy, asked, providers, hint, admit)


def _koordinator(
    rules: ModeRules,
    policy: TopologyPolicy,
    asked: Sequence[ProviderHints],
    providers: Sequence[ProviderHints],
    hint: TopologyHint,
    admit: bool,
) -> ModeResult:
    """Koordinator's policies after the merge: the best hint's ``Unsatisfied`` flag, BestEffort's
    all-nodes fallback, and the reasons Restricted and SingleNUMANode give a hint they refuse
    (``asked``: the providers' hints as they answered; ``providers``: the same after the
    exclusive policy's marking, which only changes preferences)."""
    default = policy.default_mask
    missing = unsatisfied_resources(asked)
    if missing and policy.policy is not Policy.BEST_EFFORT:
        # restricted / single-numa-node return before merging: filterProvidersHints' reasons
        words = tuple(ERR_UNSATISFIED_NUMA_RESOURCE % r for r in missing)
        affinity = None if policy.policy is Policy.SINGLE_NUMA_NODE else default
        return ModeResult(TopologyHint(affinity, False), False, False, lambda: words)
    # A preferred permutation is satisfied; single-numa-node merges only preferred hints, and
    # the all-nodes mask is Koordinator's initial best hint, satisfied, which a permutation of
    # the same mask does not replace. Otherwise the first permutation reaching the mask decides.
    # With a "cannot satisfy" resource (BestEffort only here) every permutation is unsatisfied.
    unsatisfied = (
        policy.policy is not Policy.SINGLE_NUMA_NODE and not hint.preferred
        and hint.affinity is not None and hint.affinity != default
        and (bool(missing) or first_reaching_unsatisfied(flatten(providers), hint.affinity, default))
    )
    if policy.policy is Policy.BEST_EFFORT:
        if unsatisfied and rules.best_effort_unsatisfied_to_all:
            return ModeResult(TopologyHint(default, False), True)  # NUMATopologyHint{all nodes}
        return ModeResult(hint, True, unsatisfied)
    if admit:
        return ModeResult(hint, True, unsatisfied)
    separator = RESTRICTED_SEPARATOR if policy.policy is Policy.RESTRICTED else SINGLE_NUMA_NODE_SEPARATOR
    return ModeResult(hint, False, unsatisfied, _words(lambda: (unaligned_reason(asked, separator),)))


__all__ = ["ModeResult", "merge"]
