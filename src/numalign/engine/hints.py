"""Topology hints and hint sets: what a resource provider answers for one resource.

A :class:`TopologyHint` is ``(affinity, preferred)`` where ``affinity`` is a NUMA mask (an
``int``, see :mod:`numalign.engine.bitmask`) or ``None`` ("any NUMA node"). ``None`` and the empty
mask ``0`` are different things, as in the kubelet.

A provider answers with a mapping ``resource name -> answer`` (or ``None`` for no answer at
all). An answer is:

* ``None`` - no preference for this resource;
* an empty sequence - the resource cannot be satisfied;
* a non-empty sequence of :class:`TopologyHint` - an explicit list, as the kubelet's providers
  return (order is irrelevant to the merged result, see :mod:`numalign.engine.merge`);
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

and a hint is preferred iff ``preferred_size`` equals its popcount, or it touches exactly
``preferred_group_count`` of the ``preferred_groups`` (the CPU manager's ``align-by-socket``:
groups are sockets), or ``is_preferred`` (an opaque predicate, when given) says so.
``materialize()`` lists them in kubelet ``IterateBitMasks`` order.

The managers also describe the monotone rule *as data*, a :class:`Demand` ("the mask holds
enough of every resource and touches every node it must"), so the merge can reason about it
without calling ``feasible`` on every mask (:mod:`numalign.engine.merge`). ``feasible`` stays the
source of truth: for every mask inside the universe, ``demand.feasible(mask) ==
feasible(mask)``. A family without a ``demand`` is still merged exactly, only with less
pruning (and a size cap, see :mod:`numalign.engine.merge`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence

from numalign.engine.bitmask import format_mask, ids_of, iterate_masks, masks_of_size
from numalign.record import Record, set_field


class TopologyHint(Record, frozen=True):
    """One NUMA affinity a provider could live with, and whether it would prefer it."""

    __slots__ = ("affinity", "preferred")
    affinity: int | None
    preferred: bool

    def __init__(self, affinity: int | None, preferred: bool) -> None:
        set_field(self, "affinity", affinity)
        set_field(self, "preferred", preferred)

    def __str__(self) -> str:
        return f"{format_mask(self.affinity)}{'' if self.preferred else ' (not preferred)'}"


class Demand(Record, frozen=True):
    """A monotone feasibility rule as data.

    ``feasible(M)`` holds iff

    * ``M`` meets every mask of ``touch`` (the CPU manager: the node of every reusable CPU;
      the device manager: the nodes of every reusable device);
    * ``M`` is not a single node of ``lonely`` (the memory manager: a node that belongs to a
      multi-node group cannot be used alone);
    * for every dimension ``d``, the values of the items of ``dims[d]`` whose NUMA mask meets
      ``M`` add up to at least ``need[d]``. Items are ``(mask, value)``; a single-node mask
      is a per-node amount (free CPUs, free bytes), a wider mask a device near several nodes.

    Values must not be negative (that is what makes the rule monotone: a superset of a
    feasible mask is feasible).
    """

    __slots__ = ("dims", "need", "touch", "lonely")
    dims: tuple[tuple[tuple[int, int], ...], ...]
    need: tuple[int, ...]
    touch: tuple[int, ...]
    lonely: int

    def __init__(
        self,
        dims: tuple[tuple[tuple[int, int], ...], ...],
        need: tuple[int, ...],
        touch: tuple[int, ...] = (),
        lonely: int = 0,
    ) -> None:
        set_field(self, "dims", dims)
        set_field(self, "need", need)
        set_field(self, "touch", touch)
        set_field(self, "lonely", lonely)

    @staticmethod
    def per_node(
        amounts: Mapping[int, Sequence[int]], need: Sequence[int], touch: Sequence[int] = (), lonely: int = 0
    ) -> Demand:
        """A rule over per-node amounts: ``amounts[node][d]`` of dimension ``d``."""
        dims = tuple(
            tuple((1 << node, row[d]) for node, row in sorted(amounts.items()) if row[d])
            for d in range(len(need))
        )
        return Demand(dims, tuple(need), tuple(touch), lonely)

    def feasible(self, mask: int) -> bool:
        for t in self.touch:
            if not t & mask:
                return False
        if mask & self.lonely and mask & (mask - 1) == 0:
            return False
        for items, need in zip(self.dims, self.need, strict=True):
            if need <= 0:
                continue
            total = 0
            for m, value in items:
                if m & mask:
                    total += value
            if total < need:
                return False
        return True


class GeneratedHints(Record, frozen=True, eq=False):
    """A provider's hint list described by a rule (see the module docstring).

    ``nodes`` are the machine's NUMA ids (ascending); ``universe`` is the mask inside which
    ``feasible`` is monotone; ``extra`` are further feasible masks outside that rule.
    """

    __slots__ = (
        "nodes",
        "universe",
        "feasible",
        "preferred_size",
        "extra",
        "is_preferred",
        "demand",
        "preferred_groups",
        "preferred_group_count",
    )
    nodes: tuple[int, ...]
    universe: int
    feasible: Callable[[int], bool]
    preferred_size: int
    extra: frozenset[int]
    is_preferred: Callable[[int], bool] | None
    #: the monotone rule as data (``feasible`` restricted to the universe), when known
    demand: Demand | None
    #: preferred also when exactly ``preferred_group_count`` of these masks are touched
    preferred_groups: tuple[int, ...]
    preferred_group_count: int

    def __init__(
        self,
        nodes: tuple[int, ...],
        universe: int,
        feasible: Callable[[int], bool],
        preferred_size: int,
        extra: frozenset[int] = frozenset(),
        is_preferred: Callable[[int], bool] | None = None,
        demand: Demand | None = None,
        preferred_groups: tuple[int, ...] = (),
        preferred_group_count: int = 0,
    ) -> None:
        set_field(self, "nodes", nodes)
        set_field(self, "universe", universe)
        set_field(self, "feasible", feasible)
        set_field(self, "preferred_size", preferred_size)
        set_field(self, "extra", extra)
        set_field(self, "is_preferred", is_preferred)
        set_field(self, "demand", demand)
        set_field(self, "preferred_groups", preferred_groups)
        set_field(self, "preferred_group_count", preferred_group_count)

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
        if self.preferred_groups and self.groups_touched(mask) == self.preferred_group_count:
            return True
        return mask.bit_count() == self.preferred_size

    def groups_touched(self, mask: int) -> int:
        """How many of ``preferred_groups`` the mask touches."""
        return sum(1 for g in self.preferred_groups if g & mask)

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

        Returns ``None`` when preference is also given by ``is_preferred`` or
        ``preferred_groups`` (then preferred masks of other sizes exist). All preferred masks
        have popcount ``preferred_size`` apart from preferred ``extra`` masks, which come
        first.
        """
        if self.is_preferred is not None or self.preferred_groups:
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
    order, see :mod:`numalign.engine.merge`).
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
