"""Topology hints and hint sets: what a resource provider answers for one resource.

A :class:`TopologyHint` is ``(affinity, preferred)`` where ``affinity`` is a NUMA mask (an
``int``, see :mod:`numalign.bitmask`) or ``None`` ("any NUMA node"). ``None`` and the empty
mask ``0`` are different things, as in the kubelet.

A provider answers with a mapping ``resource name -> answer`` (or ``None`` for no answer at
all). An answer is:

* ``None`` - no preference for this resource;
* an empty sequence - the resource cannot be satisfied;
* a non-empty sequence of :class:`TopologyHint` - an explicit list, as the kubelet's providers
  return (order is irrelevant to the merged result, see :mod:`numalign.merge`);
* a :class:`GeneratedHints` - the same set of hints described by a rule instead of a list, so
  a provider on a 64-NUMA machine need not list 2^64 masks.

:class:`GeneratedHints` describes the kubelet's generated hint lists exactly: the hints are
every mask ``M`` that is feasible, where feasibility is

* ``M`` is a subset of the family's ``universe`` and ``feasible(M)`` holds, where ``feasible``
  is *monotone* inside the universe (a superset of a feasible mask, still inside the universe,
  is feasible - true of "free capacity in ``M`` >= request" and "``M`` touches every reusable
  device's node"); or
* ``M`` is one of the ``extra`` masks (masks outside that monotone part, such as the memory
  manager's existing NUMA groups);

and a hint is preferred iff ``preferred_size`` equals its popcount, or ``is_preferred``
(when given) says so. ``materialize()`` lists them in kubelet ``IterateBitMasks`` order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from numalign.bitmask import format_mask, ids_of, iterate_masks, masks_of_size


@dataclass(frozen=True, slots=True)
class TopologyHint:
    """One NUMA affinity a provider could live with, and whether it would prefer it."""

    affinity: int | None
    preferred: bool

    def __str__(self) -> str:
        return f"{format_mask(self.affinity)}{'' if self.preferred else ' (not preferred)'}"


@dataclass(frozen=True, eq=False)
class GeneratedHints:
    """A provider's hint list described by a rule (see the module docstring).

    ``nodes`` are the machine's NUMA ids (ascending); ``universe`` is the mask inside which
    ``feasible`` is monotone; ``extra`` are further feasible masks outside that rule.
    """

    nodes: tuple[int, ...]
    universe: int
    feasible: Callable[[int], bool]
    preferred_size: int
    extra: frozenset[int] = field(default_factory=frozenset)
    is_preferred: Callable[[int], bool] | None = None

    def is_empty(self) -> bool:
        """No feasible mask at all (the monotone part is empty iff the universe fails)."""
        return not self.extra and not (self.universe and self.feasible(self.universe))

    def contains(self, mask: int) -> bool:
        """Is ``mask`` one of this set's hint affinities?"""
        if mask in self.extra:
            return True
        return mask != 0 and mask & ~self.universe == 0 and self.feasible(mask)

    def preferred(self, mask: int) -> bool:
        """Would a hint with this (feasible) affinity be preferred?"""
        if self.is_preferred is not None and self.is_preferred(mask):
            return True
        return mask.bit_count() == self.preferred_size

    def hint(self, mask: int) -> TopologyHint:
        return TopologyHint(mask, self.preferred(mask))

    def masks(self) -> Iterator[int]:
        """Every feasible mask, in kubelet ``IterateBitMasks`` order over ``nodes``."""
        for m in iterate_masks(self.nodes):
            if self.contains(m):
                yield m

    def materialize(self) -> list[TopologyHint]:
        """The explicit kubelet list (2^N masks are visited: only for small machines)."""
        return [self.hint(m) for m in self.masks()]

    def preferred_masks(self) -> Iterator[int] | None:
        """Feasible preferred masks in increasing integer order within their size.

        Returns ``None`` when preference is given by ``is_preferred`` (the caller then
        enumerates all masks). All preferred masks have popcount ``preferred_size`` apart
        from preferred ``extra`` masks, which come first.
        """
        if self.is_preferred is not None:
            return None
        return self._preferred_masks()

    def _preferred_masks(self) -> Iterator[int]:
        k = self.preferred_size
        for m in sorted(x for x in self.extra if x.bit_count() == k):
            yield m
        for m in masks_of_size(ids_of(self.universe), k):
            if m not in self.extra and self.feasible(m):
                yield m


#: One resource's answer: None (no preference), [] (impossible), hints, or a rule.
ResourceHints = Sequence[TopologyHint] | GeneratedHints | None
#: One provider's answer: None (nothing to say) or per-resource answers.
ProviderHints = Mapping[str, ResourceHints] | None

NO_PREFERENCE: tuple[TopologyHint, ...] = (TopologyHint(None, True),)
CANNOT_SATISFY: tuple[TopologyHint, ...] = (TopologyHint(None, False),)

HintList = Sequence[TopologyHint] | GeneratedHints


def flatten(providers: Sequence[ProviderHints]) -> list[HintList]:
    """kubelet ``filterProvidersHints``: one hint list per (provider, resource).

    A provider with no answer (``None`` or an empty mapping) contributes one "no preference"
    list; a resource answered ``None`` likewise; a resource answered ``[]`` contributes the
    "cannot satisfy" list ``[(None, False)]``. Resources are taken in sorted name order (the
    kubelet iterates a Go map, in random order; the merged result does not depend on the
    order, see :mod:`numalign.merge`).
    """
    out: list[HintList] = []
    for provider in providers:
        if not provider:
            out.append(NO_PREFERENCE)
            continue
        for name in sorted(provider):
            answer = provider[name]
            if answer is None:
                out.append(NO_PREFERENCE)
            elif isinstance(answer, GeneratedHints):
                out.append(CANNOT_SATISFY if answer.is_empty() else answer)
            elif len(answer) == 0:
                out.append(CANNOT_SATISFY)
            else:
                out.append(answer)
    return out
