"""Koordinator's words for a NUMA decision: the best hint's ``Unsatisfied`` flag and the reasons
its policies return.

Read upstream: koordinator-sh/koordinator ``pkg/scheduler/frameworkext/topologymanager`` at
commit a7a1b76bbf81abd26f9c377de1f31a60dd965f6e (its policy tests are transcribed in
``tests/data/koordinator_policy_cases.json``):

* ``manager.go``: ``ErrUnsatisfiedNUMAResource = "Unsatisfied NUMA %s"`` and
  ``ErrNUMAHintCannotAligned = "Unaligned NUMA Hint cause %v"``. ``Admit`` answers a policy that
  does not admit with ``fwktype.NewStatus(fwktype.Unschedulable, reasons...)``, and the
  scheduler framework's ``Status.Message()`` joins the reasons with ``", "``
  (:func:`status_message`): that is NodeNUMAResource's Filter message.
* ``policy.go`` ``filterProvidersHints``: one ``Unsatisfied NUMA <resource>`` for every resource
  a provider answered with an empty list (:func:`unsatisfied_reasons`), and for every resource
  with hints a summary ``getSummaryForResource``: ``<resource> prefer [<preferred>] among
  [<all>]``, each hint's affinity printed with ``%v`` (``bitmask.String()``,
  :func:`numalign.engine.bitmask.go_string`; ``<nil>`` for no affinity), the summaries sorted.
* ``policy_restricted.go`` / ``policy_single_numa_node.go``: with an unsatisfiable resource the
  policy answers those reasons (and the all-nodes hint, resp. no hint); a hint it does not admit
  gets one reason, ``Unaligned NUMA Hint cause `` and the summaries joined with ``" & "``
  (Restricted) or ``","`` (SingleNUMANode) (:func:`unaligned_reason`). ``policy_best_effort.go``
  and ``policy_none.go`` return no reasons.
* ``policy.go`` ``mergePermutation`` / ``mergeFilteredHints``: the ``Unsatisfied`` flag of the
  best hint (:func:`first_reaching_unsatisfied`).

Go iterates a provider's resources in map order (random); here a provider's resources are taken
in sorted name order, as :func:`numalign.engine.hints.flatten` takes them (the upstream tests'
expectations do not depend on that order).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from functools import lru_cache

from numalign.engine.bitmask import go_string, iterate_masks
from numalign.engine.hints import Demand, GeneratedHints, HintList, ProviderHints, ResourceHints
from numalign.engine.merge_budget import Budget

#: manager.go ErrUnsatisfiedNUMAResource
ERR_UNSATISFIED_NUMA_RESOURCE = "Unsatisfied NUMA %s"
#: manager.go ErrNUMAHintCannotAligned (Go's %v of a string is the string)
ERR_NUMA_HINT_CANNOT_ALIGNED = "Unaligned NUMA Hint cause %s"
#: how Restricted and SingleNUMANode join the per-resource summaries
RESTRICTED_SEPARATOR = " & "
SINGLE_NUMA_NODE_SEPARATOR = ","
#: a summary lists at most this many hints of one resource (upstream lists every hint; on
#: machines of at most 8 NUMA nodes, the kubelet's default limit, a resource has at most 255)
SUMMARY_HINT_LIMIT = 256
#: ... and visits at most this many candidate masks of a generated hint family
SUMMARY_VISIT_LIMIT = 1 << 16
#: what ends a summary list cut at one of those limits
TRUNCATED = "..."


def status_message(reasons: Sequence[str]) -> str:
    """kube-scheduler ``Status.Message()`` of ``NewStatus(Unschedulable, reasons...)``."""
    return ", ".join(reasons)


def _resources(providers: Sequence[ProviderHints]) -> list[tuple[str, ResourceHints]]:
    """(resource, answer) in filterProvidersHints order: providers in order, names sorted."""
    return [(name, p[name]) for p in providers if p for name in sorted(p)]


def _empty(answer: HintList) -> bool:
    return answer.is_empty() if isinstance(answer, GeneratedHints) else len(answer) == 0


def unsatisfied_resources(providers: Sequence[ProviderHints]) -> list[str]:
    """The resources a provider answered with an empty list ("no possible NUMA affinity")."""
    return [name for name, answer in _resources(providers) if answer is not None and _empty(answer)]


def unsatisfied_reasons(providers: Sequence[ProviderHints]) -> tuple[str, ...]:
    """filterProvidersHints' reasons: ``Unsatisfied NUMA <resource>`` per unsatisfiable resource."""
    return tuple(ERR_UNSATISFIED_NUMA_RESOURCE % r for r in unsatisfied_resources(providers))


def _affinities(answer: HintList) -> tuple[list[str], list[str]]:
    """(preferred, all) affinities of one resource's hints as ``%v`` prints them, in list order."""
    preferred: list[str] = []
    possible: list[str] = []
    if isinstance(answer, GeneratedHints):
        masks = (_demand_masks(answer.nodes, answer.universe, answer.demand, answer.extra)
                 if answer.demand is not None else tuple(_generated_masks(answer)))
        for m in masks:
            if m < 0:
                possible.append(TRUNCATED)
                preferred.append(TRUNCATED)
                break
            text = go_string(m)
            if answer.preferred(m):
                preferred.append(text)
            possible.append(text)
        return preferred, possible
    for h in answer[:SUMMARY_HINT_LIMIT]:
        text = "<nil>" if h.affinity is None else go_string(h.affinity)
        if h.preferred:
            preferred.append(text)
        possible.append(text)
    if len(answer) > SUMMARY_HINT_LIMIT:
        possible.append(TRUNCATED)
        preferred.append(TRUNCATED)
    return preferred, possible


@lru_cache(maxsize=256)
def _demand_masks(nodes: tuple[int, ...], universe: int, demand: Demand, extra: frozenset[int]) -> tuple[int, ...]:
    """The masks of a family whose rule is ``demand`` (which decides ``feasible`` inside the
    universe): kept, since identical nodes give a pod identical families."""
    return tuple(_generated_masks(GeneratedHints(nodes, universe, demand.feasible, 0, extra, demand=demand)))


def _generated_masks(gen: GeneratedHints) -> Iterator[int]:
    """``gen.masks()`` (IterateBitMasks order), then ``-1`` if cut at a summary limit.

    Inside the universe the family is monotone, so a mask one of whose one-smaller subsets is
    feasible is feasible without asking ``feasible`` (masks come by size: the subsets were
    decided first); only the others are asked."""
    universe = gen.universe
    feasible: set[int] = set()
    listed = 0
    for visits, m in enumerate(iterate_masks(gen.nodes)):
        if visits >= SUMMARY_VISIT_LIMIT or listed >= SUMMARY_HINT_LIMIT:
            yield -1
            return
        if m & ~universe == 0:
            rest, ok = m, False
            while rest and not ok:
                low = rest & -rest
                rest ^= low
                ok = (m ^ low) in feasible
            if ok or gen.feasible(m):
                feasible.add(m)
                listed += 1
                yield m
                continue
        if m in gen.extra:
            listed += 1
            yield m


def resource_summary(name: str, answer: HintList) -> str:
    """getSummaryForResource: ``<resource> prefer [<preferred>] among [<all>]``."""
    preferred, possible = _affinities(answer)
    return f"{name} prefer [{' '.join(preferred)}] among [{' '.join(possible)}]"


def summaries(providers: Sequence[ProviderHints]) -> list[str]:
    """filterProvidersHints' summary: one per resource that has hints, sorted."""
    out = [resource_summary(name, answer) for name, answer in _resources(providers)
           if answer is not None and not _empty(answer)]
    return sorted(out)


def unaligned_reason(providers: Sequence[ProviderHints], separator: str) -> str:
    """``Unaligned NUMA Hint cause <summaries joined by separator>``."""
    return ERR_NUMA_HINT_CANNOT_ALIGNED % separator.join(summaries(providers))


def first_reaching_unsatisfied(lists: Sequence[HintList], mask: int, default: int,
                               budget: Budget | None = None) -> bool:
    """The ``Unsatisfied`` flag Koordinator's best hint keeps when the best hint is the
    non-preferred ``mask``, narrower than ``default`` (all NUMA nodes).

    ``mergeFilteredHints`` walks the permutations in ``iterateAllProviderTopologyHints`` order
    (lexicographic over the lists' indices) and replaces its best hint only by a strictly better
    one (hints carry no score here), so the best hint is the first permutation whose AND is
    ``mask``. ``mergePermutation`` marks a permutation unsatisfied when its widest affinity is
    wider than the merged one, i.e. when one of its hints is a strict superset of ``mask``
    (a hint of ``mask`` itself or of no affinity is "exact"). ``lists`` hold no "cannot
    satisfy" placeholder (the caller answers those), and some permutation reaches ``mask``.

    The first such permutation is found greedily, list by list: the first hint of the list that
    still leaves a permutation reaching ``mask``. That is always possible while a later list
    holds ``mask`` itself (take it there and an exact hint everywhere else); after the last such
    list, only lists without ``mask`` remain and a memoised search decides whether they can
    still clear the bits outside ``mask``. A generated family (:class:`GeneratedHints`) lists
    its masks by size (``IterateBitMasks``), so ``mask`` comes first among its supersets."""
    budget = budget if budget is not None else Budget()
    holds: list[bool] = []
    for lst in lists:
        if isinstance(lst, GeneratedHints):
            if not lst.contains(mask):
                return True  # every hint of this list that can reach mask is wider than it
            holds.append(True)
            continue
        exact = has_mask = False
        for h in lst:
            if h.affinity is None:
                exact = True
            elif h.affinity == mask:
                exact = has_mask = True
        if not exact:
            return True
        holds.append(has_mask)
    if not any(holds):
        return True  # exact hints alone AND to all nodes: reaching mask takes a wider hint
    last = max(i for i, h in enumerate(holds) if h)
    tail = [_kills(lst, mask, default) for lst in lists[last + 1:]]
    memo: dict[tuple[int, int], bool] = {}

    def cover(j: int, rest: int) -> bool:
        """Can tail[j:] (one hint each) clear the bits ``rest``?"""
        if rest == 0:
            return True
        if j == len(tail):
            return False
        key = (j, rest)
        if key not in memo:
            budget.tick("Koordinator's Unsatisfied flag", len(tail[j]))
            memo[key] = any(cover(j + 1, rest & ~k) for k in tail[j])
        return memo[key]

    acc = default
    for i, lst in enumerate(lists):
        if isinstance(lst, GeneratedHints):
            acc = mask
            continue
        for h in lst:
            if h.affinity is None:
                nxt = acc
            elif h.affinity & mask != mask:
                continue  # this hint cannot be part of a permutation reaching mask
            else:
                nxt = acc & h.affinity
            if i >= last and not cover(i - last, nxt & ~mask):
                continue
            if h.affinity is not None and h.affinity != mask:
                return True
            acc = nxt
            break
    return False


def _kills(lst: HintList, mask: int, default: int) -> tuple[int, ...]:
    """The distinct sets of NUMA nodes one hint of ``lst`` can clear while keeping ``mask``."""
    assert not isinstance(lst, GeneratedHints)  # generated lists hold mask: never in the tail
    out = {0 if h.affinity is None else default & ~h.affinity
           for h in lst if h.affinity is None or h.affinity & mask == mask}
    return tuple(sorted(out))


__all__ = [
    "ERR_NUMA_HINT_CANNOT_ALIGNED",
    "ERR_UNSATISFIED_NUMA_RESOURCE",
    "RESTRICTED_SEPARATOR",
    "SINGLE_NUMA_NODE_SEPARATOR",
    "SUMMARY_HINT_LIMIT",
    "SUMMARY_VISIT_LIMIT",
    "first_reaching_unsatisfied",
    "resource_summary",
    "status_message",
    "summaries",
    "unaligned_reason",
    "unsatisfied_reasons",
    "unsatisfied_resources",
]
