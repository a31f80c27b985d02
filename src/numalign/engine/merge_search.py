"""The searches behind :mod:`numalign.engine.merge`: monotone hint families without listing them.

Everything here answers questions about *monotone families*: the masks ``M`` inside a
universe ``U`` with ``feasible(M)``, where a superset of a feasible mask (still inside ``U``)
is feasible (:class:`~numalign.engine.hints.GeneratedHints`):

* :func:`joint_reach` - "can ``base`` grow by at most ``t`` nodes of ``cand`` into a mask
  that every family accepts?" (the preferred search, one family alone, :func:`min_size`);
* :func:`and_reach` - "can one pick per family AND to a mask ``X`` with ``In ⊆ X``,
  ``X ∩ Ex = ∅`` and ``|X| <= c``?" (the non-preferred search); an assignment of every node
  to a family that drops it, or to the at most ``c - |In|`` nodes kept;
* :func:`best_and` - the best reachable AND of some families' picks under the
  non-preferred ranking, with the optimisers of :mod:`numalign.engine.merge_order`.

The oracles are exact. Their worst case is exponential (both embed NP-hard problems:
``PARTITION`` is "can two capacity families drop disjoint halves of the machine"), so every
search step is counted by a :class:`Budget`, which raises :class:`MergeTooLarge` rather
than hang. What keeps real inputs far below the budget:

* nodes that look the same to every family (same amounts, not special) form *classes*;
  searches choose how many nodes of a class to take, never which ones, so a machine of
  identical nodes costs a few steps per class, not ``2^N``;
* a class that holds at least another's amounts in every dimension is taken in full
  before any node of the other (dominance: swapping keeps a solution feasible);
* optimistic bounds (the ``t`` largest amounts still available, the slack a family has left
  to drop nodes) prune before branching; failed states are memoised;
* :func:`and_reach` first asks whether one family alone does the job (then the others
  pick their whole universe), which is the common case.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping, Sequence

from numalign.engine.bitmask import ids_of
from numalign.engine.hints import GeneratedHints
from numalign.engine.merge_budget import Budget, popcount
from numalign.engine.merge_order import CachedOracle, closest_best, colex_best
from numalign.record import Record, set_field

# --------------------------------------------------------------------------- families


class Family:
    """One generated list's monotone part, prepared for the searches.

    With a :class:`~numalign.engine.hints.Demand` the family knows each node's amounts; nodes
    that touch a multi-node item, a ``touch`` mask or ``lonely`` are *special* (their effect
    is not a plain amount) and every check on them goes through the exact rule. Without
    a demand (an opaque ``feasible``) every node is special and bounds are the monotone
    one (``feasible`` of everything still available).
    """

    __slots__ = (
        "dims",
        "feasible",
        "gen",
        "lonely",
        "multi",
        "multi_nodes",
        "need",
        "opaque",
        "sigs",
        "special",
        "touch",
        "universe",
        "weights",
        "zero",
    )

    def __init__(self, gen: GeneratedHints) -> None:
        self.gen = gen
        self.sigs: dict[int, object] = {}
        self.zero = [0]
        self.universe = gen.universe
        self.feasible: Callable[[int], bool] = gen.feasible
        demand = gen.demand
        self.opaque = demand is None
        self.dims: list[int] = []
        self.need: list[int] = []
        self.weights: dict[int, list[int]] = {}
        self.multi: list[list[tuple[int, int]]] = []
        self.touch: tuple[int, ...] = ()
        self.lonely = 0
        self.multi_nodes = 0
        if demand is None:
            self.special = self.universe
            return
        self.feasible = demand.feasible
        self.touch = demand.touch
        self.lonely = demand.lonely
        special = demand.lonely
        for t in demand.touch:
            special |= t
        active = [d for d, n in enumerate(demand.need) if n > 0]
        self.need = [demand.need[d] for d in active]
        self.dims = list(range(len(active)))
        for i, d in enumerate(active):
            multi: list[tuple[int, int]] = []
            for m, value in demand.dims[d]:
                if m & (m - 1):
                    multi.append((m, value))
                    special |= m
                    self.multi_nodes |= m
                elif value:
                    v = m.bit_length() - 1
                    self.weights.setdefault(v, [0] * len(active))[i] += value
            self.multi.append(multi)
        self.zero = [0] * len(active)
        self.special = special & self.universe

    def weight(self, v: int) -> tuple[int, ...]:
        row = self.weights.get(v)
        return tuple(row) if row is not None else (0,) * len(self.dims)

    def signature(self, v: int) -> object:
        """Nodes with equal signatures are interchangeable for this family."""
        got = self.sigs.get(v)
        if got is None:
            got = ("node", v) if self.special >> v & 1 else self.weight(v)
            self.sigs[v] = got
        return got

    def totals(self, mask: int) -> list[int]:
        """Per active dimension: what ``mask`` holds (single-node amounts and items)."""
        out = [0] * len(self.dims)
        for v in ids_of(mask & self.universe):
            row = self.weights.get(v)
            if row is not None:
                for d in self.dims:
                    out[d] += row[d]
        for d in self.dims:
            for m, value in self.multi[d]:
                if m & mask:
                    out[d] += value
        return out

    def gains(self, v: int, mask: int) -> list[int]:
        """Optimistic amounts node ``v`` adds to ``mask`` (items it would newly touch).

        The list returned may be shared: callers must not change it."""
        row = self.weights.get(v)
        if not self.multi_nodes >> v & 1:
            return row if row is not None else self.zero
        out = list(row) if row is not None else [0] * len(self.dims)
        bit = 1 << v
        for d in self.dims:
            for m, value in self.multi[d]:
                if m & bit and not m & mask:
                    out[d] += value
        return out


# --------------------------------------------------------------------------- joint_reach


class Groups(Record, frozen=True):
    """Exactly ``count`` of the disjoint ``masks`` must be touched (align-by-socket)."""

    __slots__ = ("masks", "count")
    masks: tuple[int, ...]
    count: int

    def __init__(self, masks: tuple[int, ...], count: int) -> None:
        set_field(self, "masks", masks)
        set_field(self, "count", count)

    def touched(self, mask: int) -> int:
        return sum(1 for g in self.masks if g & mask)

    def index(self, v: int) -> int:
        bit = 1 << v
        for i, g in enumerate(self.masks):
            if g & bit:
                return i
        return -1

    def can_pad(self, s: int, free: int, size: int) -> bool:
        """Can ``s`` grow by nodes of ``free`` to exactly ``size`` nodes and ``count`` groups?"""
        extra = size - popcount(s)
        if extra < 0:
            return False
        h = self.touched(s)
        if h > self.count:
            return False
        missing = self.count - h
        same = popcount(free & ~self._union_untouched(s))
        sizes = sorted((popcount(free & g) for g in self.masks if not g & s and g & free), reverse=True)
        if len(sizes) < missing:
            return False
        return missing <= extra <= same + sum(sizes[:missing])

    def _union_untouched(self, s: int) -> int:
        out = 0
        for g in self.masks:
            if not g & s:
                out |= g
        return out


def joint_reach(
    families: Sequence[Family],
    base: int,
    cand: int,
    t: int,
    budget: Budget,
    groups: Groups | None = None,
    size: int | None = None,
) -> bool:
    """Is there ``Y ⊆ cand`` with ``|Y| <= t`` such that ``S = base | Y`` is non-empty and
    feasible for every family (each family is asked about ``S`` as it is; callers keep ``S``
    inside the universes)?

    With ``groups`` and ``size``: ``S`` must moreover grow within ``base | cand`` to exactly
    ``size`` nodes touching exactly ``groups.count`` groups.
    """
    return joint_witness(families, base, cand, t, budget, groups, size) is not None


def joint_witness(
    families: Sequence[Family],
    base: int,
    cand: int,
    t: int,
    budget: Budget,
    groups: Groups | None = None,
    size: int | None = None,
) -> int | None:
    """:func:`joint_reach` with the mask ``S`` found (None: there is none)."""
    cand &= ~base
    if t < 0:
        return None
    if groups is not None:
        assert size is not None
        if popcount(base | cand) < size:
            return None
    full = base | cand
    if full == 0 or not all(f.feasible(full) for f in families):
        return None

    def done(s: int) -> bool:
        if s == 0 or not all(f.feasible(s) for f in families):
            return False
        return groups is None or groups.can_pad(s, full & ~s, size or 0)

    if done(base):
        return base
    if t == 0 or cand == 0:
        return None
    if base == 0 and len(families) == 1 and groups is None:
        f = families[0]
        if not f.opaque and f.special & cand == 0 and not f.touch and len(f.dims) == 1:
            # one amount, no special node: the t largest amounts decide (exactly)
            need = f.need[0] - f.totals(0)[0]
            best = heapq.nlargest(t, ((f.weight(v)[0], -v) for v in ids_of(cand)))
            got = 0
            s = 0
            for amount, neg in best:
                got += amount
                s |= 1 << -neg
                if got >= need:
                    return s
            return None

    # classes of interchangeable candidate nodes, most useful first
    classes: dict[object, list[int]] = {}
    for v in ids_of(cand):
        key: tuple[object, ...] = tuple(f.signature(v) for f in families)
        if groups is not None:
            key = (*key, groups.index(v))
        classes.setdefault(key, []).append(v)
    start = [f.totals(base) for f in families]

    def usefulness(nodes: list[int]) -> tuple[float, int]:
        v = nodes[0]
        score = 0.0
        for f, tot in zip(families, start, strict=True):
            row = f.gains(v, base)
            for d in f.dims:
                left = f.need[d] - tot[d]
                if left > 0:
                    score += min(1.0, row[d] / left)
            if f.special >> v & 1:
                score += 0.5
        return (-score, v)

    order = sorted(classes.values(), key=usefulness)
    nclasses = len(order)
    masks = []
    for nodes in order:
        prefix = [0]
        for v in nodes:
            prefix.append(prefix[-1] | 1 << v)
        masks.append(prefix)
    # per class: None if special for some family (effects depend on the mask), else the
    # amounts of one node for every family
    rows: list[list[list[int]] | None] = []
    for nodes in order:
        v = nodes[0]
        if any(f.opaque or f.special >> v & 1 for f in families):
            rows.append(None)
        else:
            rows.append([list(f.weight(v)) for f in families])
    exact = groups is not None or any(f.opaque for f in families)
    special = 0
    for f in families:
        special |= f.special
    failed: set[tuple[object, ...]] = set()
    # Dominance: if class a (earlier) holds at least class b's amounts for every family,
    # swapping a b-node for an untaken a-node keeps any solution feasible and as small, so
    # some solution takes no b-node unless it takes all of a (plain nodes, no groups).
    dominated: list[int] = [0] * nclasses  # per class: bit mask of later classes it dominates
    if groups is None:
        for a, ra in enumerate(rows):
            if ra is None:
                continue
            for b in range(a + 1, nclasses):
                rb = rows[b]
                if rb is not None and all(
                    all(x >= y for x, y in zip(wa, wb, strict=True)) for wa, wb in zip(ra, rb, strict=True)
                ):
                    dominated[a] |= 1 << b

    def hopeless(i: int, s: int, left: int, banned: int, tots: list[list[int]]) -> bool:
        """Optimistic bounds: even the best ``left`` nodes still available cannot make it."""
        avail = [j for j in range(i, nclasses) if not banned >> j & 1]
        rest = 0
        for j in avail:
            rest |= masks[j][-1]
        for fi, f in enumerate(families):
            if f.opaque:
                if not f.feasible(s | rest):
                    return True
                continue
            for tmask in f.touch:
                if not tmask & s and (left == 0 or not tmask & rest):
                    return True
            if not f.dims:
                continue
            tot = tots[fi]
            short = [d for d in f.dims if tot[d] < f.need[d]]
            if not short:
                continue
            if left == 0:
                return True
            # (gain row, how many nodes) per available class
            offers: list[tuple[list[int], int]] = []
            for j in avail:
                r = rows[j]
                if r is not None:
                    offers.append((r[fi], len(order[j])))
                else:
                    offers.append((f.gains(order[j][0], s), 1))
            for d in short:
                got = tot[d]
                take = left
                for g, z in sorted(offers, key=lambda o: -o[0][d]):
                    if take == 0 or g[d] <= 0:
                        break
                    n = min(z, take)
                    got += n * g[d]
                    take -= n
                if got < f.need[d]:
                    return True
            if len(short) > 1:
                # every short dimension d must gain its deficit; gains capped at the deficit
                # still add up to it, so the capped, normalised gains of the chosen nodes
                # sum to at least len(short) (a float bound, kept conservative)
                deficit = {d: f.need[d] - tot[d] for d in short}
                scored = sorted(
                    ((sum(min(g[d], deficit[d]) / deficit[d] for d in short), z) for g, z in offers),
                    reverse=True,
                )
                total = 0.0
                take = left
                for sc, z in scored:
                    if take == 0:
                        break
                    n = min(z, take)
                    total += n * sc
                    take -= n
                if total < len(short) - 1e-9:
                    return True
        return groups is not None and groups.touched(s) > groups.count

    def go(i: int, s: int, left: int, banned: int, tots: list[list[int]]) -> int:
        budget.tick("joint search")
        if done(s):
            return s
        if i == nclasses or left == 0:
            return 0
        state: object = s if exact else (s == 0, s & special, tuple(
            tuple(min(x, n) for x, n in zip(tot, f.need, strict=True)) for f, tot in zip(families, tots, strict=True)
        ))
        key = (i, left, banned, state)
        if key in failed:
            return 0
        if hopeless(i, s, left, banned, tots):
            failed.add(key)
            return 0
        prefix = masks[i]
        size = len(prefix) - 1
        top = 0 if banned >> i & 1 else min(size, left)
        row = rows[i]
        for k in range(top, -1, -1):
            s2 = s | prefix[k]
            if k == 0:
                tots2 = tots
            elif row is not None:
                tots2 = [[x + k * w for x, w in zip(tot, r, strict=True)] for tot, r in zip(tots, row, strict=True)]
            else:
                tots2 = [f.totals(s2) for f in families]
            found = go(i + 1, s2, left - k, banned if k == size else banned | dominated[i], tots2)
            if found:
                return found
        failed.add(key)
        return 0

    return go(0, base, t, 0, start) or None


def min_size(family: Family, budget: Budget) -> int | None:
    """Popcount of the narrowest feasible mask of the family's monotone part."""
    u = family.universe
    if u == 0 or not family.feasible(u):
        return None
    lo, hi = 1, popcount(u)
    if not family.opaque and family.dims:
        # each dimension alone needs at least as many nodes as its largest amounts take
        # (items near several nodes count fully for each node: still a lower bound)
        base = family.totals(0)
        for d in family.dims:
            amounts = sorted((family.gains(v, 0)[d] for v in ids_of(u)), reverse=True)
            got, k = base[d], 0
            while got < family.need[d] and k < len(amounts):
                got += amounts[k]
                k += 1
            lo = max(lo, k)
        if joint_reach([family], 0, u, lo, budget):
            return lo
        lo += 1
    while lo < hi:
        mid = (lo + hi) // 2
        if joint_reach([family], 0, u, mid, budget):
            hi = mid
        else:
            lo = mid + 1
    return lo


# --------------------------------------------------------------------------- and_reach


class _Dropper:
    """One family in :func:`and_reach`: the mask it keeps, as nodes are assigned to it."""

    __slots__ = ("f", "kept", "tot")

    def __init__(self, f: Family, kept: int) -> None:
        self.f = f
        self.kept = kept
        self.tot = f.totals(kept) if not f.opaque else []

    def try_drop(self, v: int) -> list[int] | None:
        """Drop ``v`` if the kept mask stays a feasible pick; returns the old totals."""
        f = self.f
        bit = 1 << v
        new = self.kept & ~bit
        if new == 0:
            return None
        if f.opaque:
            if not f.feasible(new):
                return None
            self.kept = new
            return []
        if f.special >> v & 1 or new & f.lonely:
            if not f.feasible(new):
                return None
            old = self.tot
            self.tot = f.totals(new)
            self.kept = new
            return old
        row = f.weights.get(v)
        if row is None:
            self.kept = new
            return self.tot
        tot = [a - b for a, b in zip(self.tot, row, strict=True)]
        for d in f.dims:
            if tot[d] < f.need[d]:
                return None
        old = self.tot
        self.tot = tot
        self.kept = new
        return old

    def undo(self, v: int, old: list[int]) -> None:
        self.kept |= 1 << v
        self.tot = old

    def key(self) -> tuple[object, ...]:
        """Everything the rest of the search depends on: the amounts kept, the special
        nodes kept, and how many nodes are kept (a pick must stay non-empty and must not
        shrink to one lonely node)."""
        f = self.f
        if f.opaque:
            return (self.kept,)
        return (tuple(self.tot), self.kept & f.special, popcount(self.kept))

    def order(self, nodes: int) -> list[tuple[int, list[tuple[int, int]]]]:
        """Per active dimension: the nodes of ``nodes`` with a positive amount (as a mask, and
        lightest first), for :meth:`capacity`."""
        f = self.f
        out: list[tuple[int, list[tuple[int, int]]]] = []
        for d in f.dims:
            pairs = sorted(
                (row[d], v) for v in ids_of(nodes) if (row := f.weights.get(v)) is not None and row[d]
            )
            mask = 0
            for _, v in pairs:
                mask |= 1 << v
            out.append((mask, pairs))
        return out

    def capacity(self, rest: int, order: list[tuple[int, list[tuple[int, int]]]]) -> int:
        """At most how many nodes of ``rest`` this family can still drop (``order`` from
        :meth:`order` over a superset of ``rest``): the lightest ones that fit its slack in
        every dimension, plus the nodes without an amount."""
        f = self.f
        count = popcount(rest)
        cap = min(count, popcount(self.kept) - 1)
        if f.opaque or not f.dims:
            return cap
        for d in f.dims:
            weighted, pairs = order[d]
            slack = self.tot[d] - f.need[d]
            fit = 0
            for w, v in pairs:
                if rest >> v & 1:
                    if w > slack:
                        break
                    slack -= w
                    fit += 1
            cap = min(cap, count - popcount(rest & weighted) + fit)
        return cap


def _drops_alone(f: Family, universe: int, tot: list[int], v: int) -> bool:
    """Can the family's pick be its whole universe but ``v``?"""
    rest = universe & ~(1 << v)
    if rest == 0:
        return False
    if f.opaque or f.special >> v & 1 or rest & f.lonely:
        return f.feasible(rest)
    row = f.weights.get(v)
    if row is None:
        return True  # nothing lost; the universe itself is feasible
    return all(tot[d] - row[d] >= f.need[d] for d in f.dims)


def and_reach(
    families: Sequence[Family], w: int, inc: int, exc: int, c: int, budget: Budget
) -> bool:
    """Does one pick per family (``P_j`` feasible, inside its universe) give
    ``X = W ∩ ∩P_j`` with ``X ∩ exc = ∅`` and ``|X \\ inc| <= c - |inc|``?

    ``w`` is inside every universe. Nodes outside ``w`` stay in every pick (more is never
    worse for a monotone family). Each node of ``w \\ inc`` is dropped by one family or, if
    it is not in ``exc``, kept (at most ``c - |inc|`` of them).
    """
    return and_witness(families, w, inc, exc, c, budget) is not None


def and_witness(
    families: Sequence[Family], w: int, inc: int, exc: int, c: int, budget: Budget
) -> int | None:
    """:func:`and_reach` with ``X | inc`` for the ``X`` found (None: there is none)."""
    inc &= w
    t = c - popcount(inc)
    if t < 0:
        return None
    h = w & ~inc
    forced = h & exc
    soft = h & ~exc
    if popcount(soft) <= t:
        soft, t = 0, 0  # keep them all
        keep_all = h & ~exc
    else:
        keep_all = 0
    # one family alone
    for f in families:
        base = (f.universe & ~w) | inc | keep_all
        found = joint_witness([f], base, soft, t, budget)
        if found is not None:
            return (found & w) | inc
    if len(families) == 1:
        return None
    full = [(f, f.universe, f.totals(f.universe)) for f in families]
    for v in ids_of(forced):
        if not any(_drops_alone(f, u, tot, v) for f, u, tot in full):
            return None

    droppers = [_Dropper(f, f.universe) for f in families]
    droppers.sort(key=lambda d: -sum(d.tot[x] - d.f.need[x] for x in d.f.dims) if d.f.dims else 0)

    classes: dict[tuple[object, ...], int] = {}
    entries: list[tuple[bool, int, int, int]] = []
    for v in ids_of(forced | soft):
        is_forced = bool(forced >> v & 1)
        cls = classes.setdefault((is_forced, *(d.f.signature(v) for d in droppers)), len(classes))
        weight = sum(sum(d.f.weights.get(v, ())) for d in droppers)
        entries.append((not is_forced, -weight, cls, v))
    entries.sort()
    nodes = [(v, not soft_first) for soft_first, _, _, v in entries]
    sigs = [cls for _, _, cls, _ in entries]
    n = len(nodes)
    failed: set[tuple[object, ...]] = set()
    forced_after = [0] * (n + 1)
    soft_after = [0] * (n + 1)
    for i in range(n - 1, -1, -1):
        forced_after[i] = forced_after[i + 1] + (1 if nodes[i][1] else 0)
        soft_after[i] = soft_after[i + 1] + (0 if nodes[i][1] else 1)
    bins = len(droppers) + 1  # bin 0 keeps the node, bin b > 0 is dropped by droppers[b - 1]
    everyone = forced | soft
    orders = [d.order(everyone) for d in droppers]
    rest_after = [0] * (n + 1)
    for i in range(n - 1, -1, -1):
        rest_after[i] = rest_after[i + 1] | 1 << nodes[i][0]

    kept_nodes = [0]

    def go(i: int, kept: int, prev: int) -> bool:
        budget.tick("assignment search")
        if i == n:
            return True
        # interchangeable nodes take non-decreasing bins (any solution can be sorted so)
        lo = prev if i and sigs[i] == sigs[i - 1] else 0
        if failed and (i, kept, lo, *(d.key() for d in droppers)) in failed:
            return False
        if i % 4 == 0:  # a pruning aid only: not needed at every node
            rest = rest_after[i]
            caps = sum(d.capacity(rest, o) for d, o in zip(droppers, orders, strict=True))
            if caps < forced_after[i] or caps + min(t - kept, soft_after[i]) < n - i:
                failed.add((i, kept, lo, *(d.key() for d in droppers)))
                return False
        v, is_forced = nodes[i]
        for b in range(lo, bins):
            if b == 0:
                if not is_forced and kept < t and go(i + 1, kept + 1, 0):
                    kept_nodes[0] |= 1 << v
                    return True
                continue
            d = droppers[b - 1]
            old = d.try_drop(v)
            if old is None:
                continue
            ok = go(i + 1, kept, b)
            d.undo(v, old)
            if ok:
                return True
        failed.add((i, kept, lo, *(d.key() for d in droppers)))
        return False

    if go(0, 0, 0):
        return inc | keep_all | kept_nodes[0]
    return None


# --------------------------------------------------------------------------- best AND


def best_and(
    families: Sequence[Family],
    cap: int,
    best_count: int,
    distances: Mapping[int, Mapping[int, int]] | None,
    budget: Budget,
    give_up: Callable[[int], bool] | None = None,
) -> int | None:
    """The best non-empty ``X = cap ∩ ∩ P_j`` (one feasible pick ``P_j`` per family) under
    the non-preferred ranking with ``bestNonPreferredAffinityCount = best_count``.

    The ANDs are *up-closed* inside ``W = cap ∩ ∩ U_j``: if picks AND to ``X`` then the
    picks ``P_j | Y`` (still feasible, still inside the universes) AND to ``X | Y`` for any
    ``Y ⊆ W``. So ``W`` is reachable, if anything of size ``<= best_count`` is then a mask of
    exactly ``best_count`` nodes is, and otherwise the winners have the smallest reachable
    size ``c > best_count``. Among masks of that size the fit order decides
    (:func:`colex_best` / :func:`closest_best` with :func:`and_reach` as the oracle).
    ``give_up(c)`` may stop the search when size ``c`` cannot beat a result found elsewhere.
    """
    w = cap
    for f in families:
        w &= f.universe
    if w == 0:
        return None
    n = popcount(w)
    if n <= best_count:
        return w  # the largest reachable mask, and the only one of its size
    lo = max(best_count, 1)
    everything = and_reach(families, w, 0, w, 1, budget)  # the empty AND is reachable
    if everything or and_reach(families, w, 0, 0, lo, budget):
        c = lo
    else:
        lo, hi = lo + 1, n
        while lo < hi:
            mid = (lo + hi) // 2
            if and_reach(families, w, 0, 0, mid, budget):
                hi = mid
            else:
                lo = mid + 1
        c = lo
    if give_up is not None and give_up(c):
        return None

    if everything:
        if distances is None:
            return _lowest(w, c)
        return closest_best(w, c, None, distances, budget)
    oracle = CachedOracle(c, lambda inc, allowed: and_witness(families, w, inc, w & ~allowed, c, budget))
    narrowest = colex_best(w, c, oracle)
    if distances is None:
        return narrowest
    return closest_best(w, c, oracle, distances, budget, signature(families), narrowest)


def _lowest(mask: int, k: int) -> int:
    out = 0
    for v in ids_of(mask)[:k]:
        out |= 1 << v
    return out


def signature(families: Sequence[Family], groups: Groups | None = None) -> Callable[[int], object]:
    """Which nodes the families (and groups) cannot tell apart."""

    def key(v: int) -> object:
        out: tuple[object, ...] = tuple(f.signature(v) for f in families)
        return out if groups is None else (*out, groups.index(v))

    return key
