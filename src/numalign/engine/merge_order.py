"""The best subset of one size under the kubelet's fit order, given an existence oracle.

Both merge searches of :mod:`numalign.engine.merge` end with the same question: among the masks
of ``q`` nodes inside ``w`` that some up-closed family admits, which comes first under
``Narrowest`` (smallest integer) or ``Closest`` (smallest average distance, then smallest
integer)? The family is known only through an oracle ``exists(inc, allowed)``: "is some
admitted ``X`` of size ``q`` with ``inc ⊆ X ⊆ allowed``?" (``None``: every subset is).

* :func:`colex_best` - ``Narrowest``, with at most ``min(n, q log n)`` oracle calls;
* :func:`closest_best` - ``Closest``, by branch and bound;
* :class:`CachedOracle` - answers repeated oracle questions from earlier witnesses.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from operator import add

from numalign.engine.bitmask import ids_of
from numalign.engine.merge_budget import Budget, popcount

Oracle = Callable[[int, int], bool]


class CachedOracle:
    """Answers "is there an admitted ``X`` with ``|X| = size`` and ``inc ⊆ X ⊆ allowed``?"
    for an *up-closed* admitted family, remembering what earlier searches found.

    ``find(inc, allowed)`` returns a witness - an admitted mask ``x`` with ``inc ⊆ x ⊆
    allowed`` and ``|x| <= size`` - or None. A witness answers every later query it fits
    (``x | inc`` is admitted too, and can be padded inside ``allowed``); a failure answers
    every later query with more required and fewer allowed nodes.
    """

    __slots__ = ("find", "hits", "misses", "size")

    def __init__(self, size: int, find: Callable[[int, int], int | None]) -> None:
        self.size = size
        self.find = find
        self.hits: list[int] = []
        self.misses: list[tuple[int, int]] = []

    def __call__(self, inc: int, allowed: int) -> bool:
        if popcount(allowed) < self.size:
            return False
        for x in self.hits:
            y = x | inc
            if y & ~allowed == 0 and popcount(y) <= self.size:
                return True
        for i, a in self.misses:
            if inc & i == i and allowed & ~a == 0:
                return False
        found = self.find(inc, allowed)
        if found is None:
            self.misses.append((inc, allowed))
            return False
        self.hits.append(found)
        return True


def colex_best(w: int, q: int, exists: Oracle) -> int:
    """The smallest integer ``X ⊆ w`` with ``|X| = q`` such that the family admits it.

    ``exists(inc, allowed)`` must answer "is some admitted ``X`` of size ``q`` with
    ``inc ⊆ X ⊆ allowed``?" and be true for ``(0, w)``. For one popcount, integer order
    compares the highest elements first, so the answer's highest element is the lowest node
    ``h`` with ``exists(0, nodes <= h)``, then the next one below it, and so on. Each element
    is found by binary search (``exists`` is monotone in ``allowed``) when ``q`` is small,
    else by one pass from the top (leave a node out whenever that is still possible): at
    most ``min(q * log2(n), n)`` oracle calls.
    """
    nodes = ids_of(w)
    n = len(nodes)
    if q * max(1, n.bit_length()) >= n:
        inc, allowed = 0, w
        for v in reversed(nodes):
            if popcount(inc) == q:
                return inc
            if popcount(allowed) == q:
                return allowed
            bit = 1 << v
            if exists(inc, allowed & ~bit):
                allowed &= ~bit
            else:
                inc |= bit
        return inc
    inc = 0
    rest = nodes  # ascending; every element of the answer not in inc is among them
    while popcount(inc) < q:
        need = q - popcount(inc)
        if len(rest) == need:
            for v in rest:
                inc |= 1 << v
            break
        prefix = [0]
        for v in rest:
            prefix.append(prefix[-1] | 1 << v)
        lo, hi = need - 1, len(rest) - 1  # the answer's next element is rest[j] for some j
        while lo < hi:
            mid = (lo + hi) // 2
            if exists(inc, inc | prefix[mid + 1]):
                hi = mid
            else:
                lo = mid + 1
        inc |= 1 << rest[lo]
        rest = rest[:lo]
    return inc


def _runs(
    nodes: list[int],
    distances: Mapping[int, Mapping[int, int]],
    same: Callable[[int], object] | None,
) -> list[list[int]]:
    """Maximal runs of consecutive nodes that are interchangeable: equal ``same`` keys,
    equal self-distance, equal distances to (and from) every node outside the run, and one
    distance between any two members."""
    runs: list[list[int]] = []
    for v in nodes:
        run = runs[-1] if runs else None
        if run is not None and (same is None or same(v) == same(run[0])):
            a = run[0]
            dv, da = distances[v], distances[a]
            inner = distances[run[1]][a] if len(run) > 1 else dv[a]
            ok = dv[v] == da[a] and all(
                dv[u] == inner and distances[u][v] == inner for u in run
            )
            if ok:
                members = set(run)
                ok = all(
                    dv[x] == da[x] and distances[x][v] == distances[x][a]
                    for x in nodes
                    if x != v and x not in members
                )
            if ok:
                run.append(v)
                continue
        runs.append([v])
    return runs


def closest_best(
    w: int,
    q: int,
    exists: Oracle | None,
    distances: Mapping[int, Mapping[int, int]],
    budget: Budget,
    same: Callable[[int], object] | None = None,
    start: int | None = None,
) -> int | None:
    """The admitted ``q``-subset of ``w`` with the smallest average distance, ties to the
    smallest integer (kubelet ``Closest``); None if nothing is admitted. ``exists`` is the
    oracle of :func:`colex_best` (None: every subset is admitted); ``same(v)`` tells which
    nodes the oracle cannot tell apart.

    For one size, the average distance orders like the integer sum ``D(X)`` of
    ``distances[u][v]`` over ordered pairs of ``X`` (diagonal included). Consecutive nodes
    that are interchangeable (:func:`_runs`; real distance tables come in such groups,
    e.g. 16 runs of 4 on the 64-node SGI capture) form classes; an admitted optimum can be
    moved to the lowest ids of each class without changing ``D`` or the oracle's answer,
    which only lowers its integer value. So the search decides, from the highest class
    down, how many of a class's lowest ids to take (fewest first): that visits candidates in
    increasing integer order, and a later candidate never wins a tie. Branches are cut by a
    Gilmore-Lawler bound (each node still to choose costs at least its distance to the
    chosen nodes plus half the distances to its nearest possible companions) against the
    best so far, seeded by a greedy solution, and by the oracle.

    Without an oracle and for more than half of ``w`` the search chooses the *complement*
    ``R = w \\ X`` instead (fewer nodes to choose, a much smaller tree):
    ``D(X) = D(w) + D(R) - sum over u in R of (row_w(u) + col_w(u))``, the same problem
    with a shifted diagonal; the smallest integer ``X`` of one popcount is the largest
    integer ``R``, so that search visits candidates in decreasing integer order (from the
    highest class down, most nodes first, a class's highest ids).
    """
    nodes = ids_of(w)
    if q > len(nodes) or q <= 0:
        return None
    runs = _runs(nodes, distances, same)
    diag = [distances[r[0]][r[0]] for r in runs]
    if exists is None and 2 * q > len(nodes) and q < len(nodes):
        reps = [r[0] for r in runs]
        whole = 0
        shifted = []
        for v, d in zip(reps, diag, strict=True):
            row = distances[v]
            out = 0
            for u in nodes:
                out += row[u] + distances[u][v]
            shifted.append(d - out)
        for u in nodes:
            row = distances[u]
            for v in nodes:
                whole += row[v]
        bound = None if start is None else _distance_sum(start, distances) - whole
        rest = _closest_core(runs, shifted, len(nodes) - q, None, distances, budget, None, bound, True)
        assert rest is not None
        return w & ~rest
    bound = None if start is None else _distance_sum(start, distances)
    return _closest_core(runs, diag, q, exists, distances, budget, same, bound, False)


def _closest_core(
    runs: list[list[int]],
    diag: list[int],
    q: int,
    exists: Oracle | None,
    distances: Mapping[int, Mapping[int, int]],
    budget: Budget,
    same: Callable[[int], object] | None,
    start_sum: int | None,
    largest: bool,
) -> int | None:
    """The branch and bound of :func:`closest_best` over classes ``runs`` with per-class
    self cost ``diag``: the ``q`` nodes of least cost, ties to the smallest integer (or to the
    largest with ``largest``, which takes a class's highest ids)."""
    m = len(runs)
    size = [len(r) for r in runs]
    reps = [r[0] for r in runs]
    inner = [
        distances[r[0]][r[1]] + distances[r[1]][r[0]] if len(r) > 1 else 0 for r in runs
    ]
    cross = [
        [distances[reps[i]][reps[j]] + distances[reps[j]][reps[i]] for j in range(m)]
        for i in range(m)
    ]
    near = [sorted((cross[i][j], j) for j in range(m) if j != i) for i in range(m)]
    below = [0] * (m + 1)  # nodes in classes < k
    for k in range(m):
        below[k + 1] = below[k] + size[k]
    pick = [[0] * (len(r) + 1) for r in runs]  # pick[k][c]: mask of the c lowest (highest) ids
    for k, r in enumerate(runs):
        for c, v in enumerate(reversed(r) if largest else r):
            pick[k][c + 1] = pick[k][c] | 1 << v
    all_below = [0] * (m + 1)
    for k in range(m):
        all_below[k + 1] = all_below[k] | pick[k][-1]
    uniform = size[0] if all(z == size[0] for z in size) else 0

    def companion(j: int, k: int, r: int) -> int:
        """Sum of the ``r - 1`` smallest pair weights from a node of class ``j`` to the
        other nodes of classes ``< k``."""
        want = r - 1
        acc = 0
        own = size[j] - 1
        own_w = inner[j]
        for wt, other in near[j]:
            if want == 0:
                break
            if own and own_w <= wt:
                take = min(own, want)
                acc += take * own_w
                want -= take
                own = 0
                if want == 0:
                    break
            if other >= k:
                continue
            take = min(size[other], want)
            acc += take * wt
            want -= take
        if want and own:
            acc += min(own, want) * own_w
        return acc

    companions: dict[int, list[int]] = {}

    def bound2(r: int, k: int, a2: list[int]) -> int:
        """Twice a lower bound of the cost of ``r`` more nodes from classes ``< k``
        (``a2``: twice each class's cost of one more node)."""
        if r == 0:
            return 0
        ck = k * (q + 1) + r
        comp = companions.get(ck)
        if comp is None:
            comp = [companion(j, k, r) for j in range(k)]
            companions[ck] = comp
        if uniform:
            whole_n, part = divmod(r, uniform)
            if whole_n + (1 if part else 0) > k:
                return 1 << 62
            vals: list[int] = sorted(map(add, a2, comp))  # a2 may be longer: map stops with comp
            return uniform * sum(vals[:whole_n]) + (part * vals[whole_n] if part else 0)
        total = 0
        for c2, z in sorted([(a2[j] + comp[j], size[j]) for j in range(k)]):
            take = min(z, r)
            total += take * c2
            r -= take
            if r == 0:
                return total
        return 1 << 62

    # shift[k][c][j]: twice what taking c nodes of class k adds to a node of class j < k
    shift = [[[2 * c * cross[k][j] for j in range(k)] for c in range(size[k] + 1)] for k in range(m)]

    # interchangeable classes: the optimum of the smallest (largest) integer takes no more
    # (no fewer) of the higher one
    keys = [same(v) if same is not None else None for v in reps]
    twins_above: list[list[int]] = [[] for _ in range(m)]
    for x in range(m):
        for y in range(x + 1, m):
            if (
                size[x] == size[y]
                and diag[x] == diag[y]
                and inner[x] == inner[y]
                and keys[x] == keys[y]
                and all(cross[x][z] == cross[y][z] for z in range(m) if z != x and z != y)
            ):
                twins_above[x].append(y)
    counts = [0] * m

    # greedy seeds: from every class, add the cheapest next node
    best_sum = 1 << 62
    if start_sum is not None:
        best_sum = start_sum + 1  # +1: equal sums found by the search win
    greedy: list[tuple[int, int]] = []
    for seed in range(0, m, max(1, m // 8)):  # a few seeds, spread over the machine
        taken = [0] * m
        a = list(diag)
        total = 0
        for step in range(q):
            if step == 0:
                j = seed
            else:
                j = min(
                    (x for x in range(m) if taken[x] < size[x]),
                    key=lambda x: a[x] + taken[x] * inner[x],
                )
            total += a[j] + taken[j] * inner[j]
            taken[j] += 1
            for x in range(m):
                if x != j:
                    a[x] += cross[j][x]
        chosen = 0
        for x in range(m):
            chosen |= pick[x][taken[x]]
        greedy.append((total, chosen))
    greedy.sort()
    for total, chosen in greedy[:3]:
        if total + 1 >= best_sum:
            break
        if exists is None or exists(chosen, chosen):
            best_sum = total + 1
            break
    best: list[int] = [best_sum, -1]
    # Without an oracle and when the cost is strictly concave along "move one node from
    # class y to class x" for every two classes of >= 2 nodes (inner[x] + inner[y] <
    # 2 * cross[x][y]: members of a class are closer to each other than to anyone else), a
    # solution with two partly taken classes is beaten by pushing one of them to full or
    # empty; every optimum takes all classes whole but at most one.
    whole = exists is None and all(
        inner[x] + inner[y] < 2 * cross[x][y]
        for x in range(m)
        for y in range(x + 1, m)
        if size[x] > 1 and size[y] > 1
    )

    def go(k: int, r: int, total2: int, a2: list[int], inc: int, partial: bool = False) -> None:
        """``total2``: twice the cost so far; ``a2``: twice each class's cost of one more node."""
        budget.tick("closest search")
        if r == 0:
            if total2 < 2 * best[0] and (exists is None or exists(inc, inc)):
                best[0], best[1] = total2 // 2, inc
            return
        if k < 0 or below[k + 1] < r:
            return
        z = size[k]
        top = min(z, r)
        if largest:
            top = min([top, *(counts[y] for y in twins_above[k])])
            choices: range = range(top, -1, -1)
        else:
            choices = range(max((counts[y] for y in twins_above[k]), default=0), top + 1)
        shifts = shift[k]
        for c in choices:
            part = 0 < c < z
            if whole and part and partial:
                continue
            r2 = r - c
            if below[k] < r2:
                continue
            if c == 0:
                b2 = a2
                t2 = total2
            else:
                t2 = total2 + c * a2[k] + c * (c - 1) * inner[k]
                b2 = list(map(add, a2, shifts[c]))
            if t2 + bound2(r2, k, b2) >= 2 * best[0]:
                continue
            inc2 = inc | pick[k][c]
            if exists is not None and r2 and not exists(inc2, inc2 | all_below[k]):
                continue
            counts[k] = c
            go(k - 1, r2, t2, b2, inc2, partial or part)
            counts[k] = 0

    go(m - 1, q, 0, [2 * d for d in diag], 0)
    if best[1] >= 0:
        return best[1]
    if exists is None or start_sum is not None:
        raise AssertionError("a seed was admitted: the search must find one as good")
    return None


def _distance_sum(mask: int, distances: Mapping[int, Mapping[int, int]]) -> int:
    bits = ids_of(mask)
    return sum(distances[u][v] for u in bits for v in bits)
