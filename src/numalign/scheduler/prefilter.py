"""A vectorised *necessary* condition for the node engine's admission, over all nodes at once.

The exact NUMA filter (``Node.plan``) costs about a millisecond per node; on 5,000 nodes a pod
that fits nowhere would cost seconds. Before it, this prefilter drops nodes that certainly
reject the pod, using per-node, per-NUMA free amounts kept in a NumPy array
``free[node, numa slot, resource]`` (updated whenever a node changes):

* ``single-numa-node``: every container (container scope) or the whole pod (pod scope) must
  find, per NUMA-bound resource, one NUMA node with at least its demand free - a preferred
  hint is a single NUMA node that can hold the request now;
* ``restricted``: the merged hint must be preferred, so for every resource a mask of the
  capacity-minimal size ``k`` must hold the demand now: the ``k`` largest free amounts must add
  up to it;
* other policies: the Topology Manager admits; no condition.

Free amounts are generous on purpose (a device near several NUMA nodes counts on each, memory
ignores NUMA groups), so the condition never drops a node the engine would admit: the
engine's decision stays exact; this only saves asking it where the answer is known.

Cost per pod (the scheduler's hot path): after a bind, :meth:`NumaPrefilter.refresh` reads the
node's free amounts as columns (:func:`numalign.node.usage.numa_free_columns`) and rewrites
only the resources that changed; a pod shape's checks are compiled once into thresholds per
machine group (:meth:`NumaPrefilter._thresholds`), and the scheduler's sampling walk asks
:meth:`NumaPrefilter.passing_range` over a window of consecutive nodes, one comparison per
run of same-group nodes and checked row. The ``*_reference`` methods are the straightforward
paths the tests hold these to.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate

import numpy as np
import numpy.typing as npt

from numalign.engine.policies import Policy, Scope
from numalign.inputs.quantity import CPU, MEMORY, hugepage_resource_name
from numalign.machine.model import Machine
from numalign.node.admission import Node, PodResult
from numalign.node.usage import (
    FreeLayout,
    fewest_nodes,
    free_layout,
    numa_capacities,
    numa_demand,
    numa_free,
    numa_free_columns,
)
from numalign.pods import Pod

#: the amount a group needs on a row it does not check (every free amount passes)
_NO_NEED = int(np.iinfo(np.int64).min)


@dataclass(frozen=True)
class _Thresholds:
    """One pod shape's prefilter checks as arrays (see :meth:`NumaPrefilter._thresholds`)."""

    rows: tuple[int, ...]  # rows of the flattened top-k table that some group checks
    amounts: tuple[npt.NDArray[np.int64], ...]  # per row: the amount each group needs
    single: tuple[int, ...]  # per row: group 0's amount (a one-group cluster)
    possible: npt.NDArray[np.bool_] | None  # per group: can a node of it pass (None: all)
    #: per group: its checks ``(row, amount)``, on the rows it checks only
    by_group: tuple[tuple[tuple[int, int], ...], ...]


#: admissions whose free amounts :meth:`NumaPrefilter.refresh` remembers (then starts over)
AFTER_MEMO_SIZE = 1 << 12

#: the most runs of consecutive same-group nodes :meth:`NumaPrefilter.passing_range` walks
MAX_RUNS = 64


def _runs(group_of: npt.NDArray[np.int64], limit: int) -> list[tuple[int, int, int]] | None:
    """Maximal runs ``(start, end, group)`` of equal entries of ``group_of``; None when
    there are more than ``limit``."""
    if group_of.size == 0:
        return []
    cuts = np.flatnonzero(group_of[1:] != group_of[:-1]) + 1
    if cuts.size + 1 > limit:
        return None
    starts = [0, *cuts.tolist()]
    ends = [*cuts.tolist(), int(group_of.size)]
    return [(st, en, int(group_of[st])) for st, en in zip(starts, ends, strict=True)]


class NumaPrefilter:
    def __init__(self, nodes: Sequence[Node]) -> None:
        self.nodes = list(nodes)
        resources: set[str] = {CPU, MEMORY}
        for n in self.nodes:
            for numa in n.machine.numa_nodes:
                resources.update(hugepage_resource_name(s) for s in numa.hugepages)
            resources.update(d.resource for d in n.machine.devices if d.numa)
        self.resources = sorted(resources)
        self.col = {r: i for i, r in enumerate(self.resources)}
        self.slots = max((len(n.machine.numa_nodes) for n in self.nodes), default=1)
        self.free: npt.NDArray[np.int64] = np.zeros(
            (len(self.nodes), self.slots, len(self.resources)), dtype=np.int64
        )
        # top-k sums of free amounts, k = 1..slots: topk[resource, k-1, node]
        # (node last, so one resource and k is a contiguous row to index by node)
        self.topk: npt.NDArray[np.int64] = np.zeros(
            (len(self.resources), self.slots, len(self.nodes)), dtype=np.int64
        )
        #: machine id -> where its free amounts go (:func:`free_layout`)
        self._layouts: dict[int, FreeLayout] = {}
        #: per node, the free amounts last written (per column, per slot)
        self._cols: list[list[list[int]] | None] = [None] * len(self.nodes)
        self._groups: dict[int, list[int]] = {}
        self._machines: dict[int, Machine] = {}
        #: id(admission's containers) -> (those containers (kept alive: ids are not reused
        #: while remembered), the node's layout, the columns, free and top-k rows after it)
        self._after: dict[int, tuple[object, FreeLayout, list[list[int]], npt.NDArray[np.int64],
                                     npt.NDArray[np.int64]]] = {}
        for i, n in enumerate(self.nodes):
            self._groups.setdefault(id(n.machine), []).append(i)
            self._machines[id(n.machine)] = n.machine
            self.refresh(i)
        self._group_idx = {k: np.array(v, dtype=np.int64) for k, v in self._groups.items()}
        #: (machine key, member indices) per group, and each node's group number
        self._group_list = list(self._group_idx.items())
        self._group_of: npt.NDArray[np.int64] = np.zeros(len(self.nodes), dtype=np.int64)
        for g, (_, members) in enumerate(self._group_list):
            self._group_of[members] = g
        #: maximal runs of consecutive nodes of one group: (start, end, group); None when
        #: the groups interleave too much for a walk over runs to pay off
        self._runs: list[tuple[int, int, int]] | None = _runs(self._group_of, MAX_RUNS)
        #: pod shape -> the checks of :meth:`_conditions`
        self._compiled: dict[object, list[tuple[int, list[tuple[int, int, int]] | None]]] = {}
        #: pod shape -> the checks of :meth:`_conditions` as arrays (:meth:`_thresholds`)
        self._thresholds_of: dict[object, _Thresholds] = {}
        #: pod shape -> :meth:`never_passes`
        self._never: dict[object, bool] = {}
        #: :attr:`topk` as rows ``resource * slots + k - 1`` (a view: refresh writes show)
        self._topk_flat: npt.NDArray[np.int64] = self.topk.reshape(len(self.resources) * self.slots, len(self.nodes))
        assert np.shares_memory(self._topk_flat, self.topk)
        self._memo_pod: Pod | None = None
        self._memo: dict[tuple[int, Scope], list[dict[str, int]]] = {}
        self._capacity_k: dict[tuple[int, str, int], tuple[int, int]] = {}

    def refresh(self, i: int, admitted: PodResult | None = None) -> None:
        """Bring node ``i``'s free amounts up to date with its engine state: only the
        resources whose amounts changed are written (a bind changes a few).

        ``admitted``: the admission just committed on the node (its state is the state that
        admission left). An admission replayed from the node's plan cache shares the
        cached result's ``containers`` and leaves the state the cached plan left (equal
        :func:`~numalign.node.plan_cache.state_key`, so equal free amounts): the node's
        rows are then copied from the first node that committed it (:attr:`_after`)."""
        node = self.nodes[i]
        layout = self._layouts.get(id(node.machine))
        if layout is None:
            layout = self._layouts[id(node.machine)] = free_layout(node.machine, self.col, self.slots)
        containers = admitted.containers if admitted is not None else ()
        if containers:  # the empty tuple is one object: no memo
            hit = self._after.get(id(containers))
            if hit is not None and hit[0] is containers and hit[1] is layout:
                self._cols[i] = hit[2]
                self.free[i] = hit[3]
                self.topk[:, :, i] = hit[4]
                return
        self._write(i, numa_free_columns(node, layout))
        if containers:
            if len(self._after) >= AFTER_MEMO_SIZE:
                self._after.clear()
            cols = self._cols[i]
            assert cols is not None
            self._after[id(containers)] = (containers, layout, cols, self.free[i].copy(),
                                           self.topk[:, :, i].copy())

    def _write(self, i: int, cols: list[list[int]]) -> None:
        """Write node ``i``'s free amounts ``cols`` (per column, per slot) and their top-k
        sums, only the columns that differ from the last written."""
        prev = self._cols[i]
        self._cols[i] = cols
        free, topk, slots = self.free, self.topk, self.slots
        for c, amounts in enumerate(cols):
            if prev is not None and prev[c] == amounts:
                continue
            # top-k sums: the k largest free amounts, k = 1..slots
            if slots <= 2:  # scalar writes are cheaper than a slice from a list here
                total = 0
                for k, v in enumerate(sorted(amounts, reverse=True)):
                    total += v
                    topk[c, k, i] = total
                for slot, v in enumerate(amounts):
                    free[i, slot, c] = v
            else:
                topk[c, :, i] = list(accumulate(sorted(amounts, reverse=True)))
                free[i, :, c] = amounts

    def refresh_reference(self, i: int, admitted: PodResult | None = None) -> None:
        """:meth:`refresh` the straightforward way (every amount from :func:`numa_free`,
        ``admitted`` unused); the tests hold :meth:`refresh` to it."""
        del admitted
        slots = self.slots
        cols = [[0] * slots for _ in self.resources]  # per resource, per NUMA slot
        get = self.col.get
        for s, per in enumerate(numa_free(self.nodes[i]).values()):
            for res, amount in per.items():
                col = get(res)
                if col is not None:
                    cols[col][s] = amount
        self._cols[i] = cols
        self.free[i] = np.array(cols, dtype=np.int64).T
        self.topk[:, :, i] = [list(accumulate(sorted(v, reverse=True))) for v in cols]

    # ----------------------------------------------------------------- demands

    def _demands(self, m: Machine, pod: Pod, scope: Scope) -> list[dict[str, int]]:
        """NUMA-bound demands: one dict per container (container scope) or one for the pod."""
        if self._memo_pod is not pod:
            self._memo_pod = pod
            self._memo.clear()
        key = (id(m), scope)
        hit = self._memo.get(key)
        if hit is None:
            hit = self._memo[key] = self._compute_demands(m, pod, scope)
        return hit

    def _compute_demands(self, m: Machine, pod: Pod, scope: Scope) -> list[dict[str, int]]:
        # container scope: a regular init container's resources are reused by later ones,
        # so each container on its own is a necessary condition
        return numa_demand(m, pod, scope)

    def _min_k(self, node: Node, res: str, demand: int) -> tuple[int, int]:
        """Bounds ``(low, high)`` of the providers' preferred mask size for ``demand``.

        The providers call a mask preferred when its size is the fewest NUMA nodes whose
        capacity (CPU: online CPUs; memory: the memory manager's allocatable; devices: all
        devices near the node) could hold the request. ``low`` counts generously (memory
        capacity, a device near several nodes on each), ``high`` strictly (single-node
        devices only); both are exact for CPUs, memory under the static policy and devices
        near one node each.
        """
        m = node.machine
        key = (id(m), res, demand)
        hit = self._capacity_k.get(key)
        if hit is not None:
            return hit
        low_caps, high_caps = numa_capacities(node, res)
        out = (fewest_nodes(low_caps, demand), fewest_nodes(high_caps, demand))
        self._capacity_k[key] = out
        return out

    def groups(self) -> list[tuple[Node, npt.NDArray[np.int64]]]:
        """Nodes grouped by machine object: (a representative node, member indices)."""
        return [(self.nodes[int(v[0])], v) for v in self._group_idx.values()]

    def min_numa_nodes(self, node: Node, pod: Pod) -> int:
        """A lower bound of the NUMA nodes the pod's NUMA-bound resources will span on
        ``node`` (0 when it gets none): each resource needs at least its generous size."""
        best = 0
        for demand in self._demands(node.machine, pod, node.node_scope):
            for res, amount in demand.items():
                best = max(best, self._min_k(node, res, amount)[0])
        return best

    def min_numa_nodes_now(self, pod: Pod, candidates: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """Per candidate node, a lower bound of the NUMA nodes the pod's NUMA-bound resources
        will span there *now*: each resource takes at least as many NUMA nodes as its largest
        free amounts need to add up to its demand (and at least :meth:`min_numa_nodes`). Valid
        for either scope: the pod's NUMA nodes hold every container's resources, and the
        free amounts are generous."""
        out = np.zeros(candidates.size, dtype=np.int64)
        if candidates.size == 0:
            return out
        groups = self._group_of[candidates] if len(self._group_list) > 1 else None
        for g, (key, members) in enumerate(self._group_list):
            sel = np.flatnonzero(groups == g) if groups is not None else np.arange(candidates.size)
            if sel.size == 0:
                continue
            node0 = self.nodes[int(members[0])]
            m = self._machines[key]
            k = np.full(sel.size, self.min_numa_nodes(node0, pod), dtype=np.int64)
            if not node0.dynamic:
                nodes = candidates[sel]
                for demand in self._demands(m, pod, node0.node_scope):
                    for res, amount in demand.items():
                        col = self.col.get(res)
                        if col is None or amount <= 0:
                            continue
                        need = (self.topk[col][:, nodes] < amount).sum(axis=0) + 1
                        np.maximum(k, np.minimum(need, len(m.numa_nodes)), out=k)
            out[sel] = k
        return out

    def _conditions(self, pod: Pod) -> list[tuple[int, list[tuple[int, int, int]] | None]]:
        """Per machine group (its index in :attr:`_group_list`), the checks a node of it must
        pass: ``(resource column, k, amount)`` = the ``k`` largest free amounts of the resource
        add up to ``amount``; None when no node of the group can pass. Groups without a
        condition are left out. Depends on the pod's shape only (cached)."""
        shape = pod.shape
        hit = self._compiled.get(shape)
        if hit is not None:
            return hit
        out: list[tuple[int, list[tuple[int, int, int]] | None]] = []
        for g, (key, _members) in enumerate(self._group_list):
            m = self._machines[key]
            node0 = self.nodes[int(_members[0])]
            if not node0.rules.kubelet_only:  # the kubelet's rules only
                continue
            policy, scope = node0.node_policy, node0.node_scope
            if policy not in (Policy.SINGLE_NUMA_NODE, Policy.RESTRICTED):
                continue
            checks: list[tuple[int, int, int]] = []
            impossible = False
            for demand in self._demands(m, pod, scope):
                sizes: list[tuple[int, int]] = []
                for res, amount in demand.items():
                    col = self.col.get(res)
                    low, high = self._min_k(node0, res, amount)
                    sizes.append((low, high))
                    if col is None or (policy is Policy.SINGLE_NUMA_NODE and low > 1):
                        # no NUMA node has the resource; or no preferred single-node hint
                        # exists when even the generous count needs several nodes
                        impossible = True
                        break
                    k = 1 if policy is Policy.SINGLE_NUMA_NODE else min(high, self.slots)
                    checks.append((col, k, amount))
                # exact preferred sizes that differ: no merged hint can be preferred
                if not impossible and (
                    policy is Policy.RESTRICTED
                    and all(lo == hi for lo, hi in sizes)
                    and len({lo for lo, _ in sizes}) > 1
                    and "align-by-socket" not in m.kubelet.cpu_manager_policy_options
                ):
                    impossible = True
                if impossible:
                    break
            out.append((g, None if impossible else checks))
        self._compiled[shape] = out
        return out

    def _thresholds(self, pod: Pod) -> _Thresholds:
        """:meth:`_conditions` as arrays: the rows of :attr:`topk` (as ``resource * slots + k
        - 1``) that some group checks, the amount each group needs there (the largest of its
        checks on the row; the int64 minimum where it checks nothing), and which groups can
        pass at all (None: every group). Cached per pod shape."""
        shape = pod.shape
        hit = self._thresholds_of.get(shape)
        if hit is not None:
            return hit
        n_groups = len(self._group_list)
        need: dict[int, list[int]] = {}
        possible: npt.NDArray[np.bool_] | None = None
        for g, checks in self._conditions(pod):
            if checks is None:
                if possible is None:
                    possible = np.ones(n_groups, dtype=np.bool_)
                possible[g] = False
                continue
            for col, k, amount in checks:
                row = need.setdefault(col * self.slots + k - 1, [_NO_NEED] * n_groups)
                row[g] = max(row[g], amount)
        rows = sorted(need)
        out = _Thresholds(
            tuple(rows),
            tuple(np.array(need[r], dtype=np.int64) for r in rows),
            tuple(need[r][0] for r in rows),
            possible,
            tuple(tuple((r, need[r][g]) for r in rows if need[r][g] != _NO_NEED) for g in range(n_groups)),
        )
        self._thresholds_of[shape] = out
        return out

    def never_passes(self, pod: Pod) -> bool:
        """True when no node passes for ``pod`` whatever its state: every machine group's
        conditions are impossible (e.g. a request no single NUMA node holds on
        ``single-numa-node`` nodes). Cached per pod shape, like :meth:`_thresholds`."""
        shape = pod.shape
        hit = self._never.get(shape)
        if hit is None:
            possible = self._thresholds(pod).possible
            hit = self._never[shape] = possible is not None and not bool(possible.any())
        return hit

    def passing(self, pod: Pod, candidates: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
        """For each candidate node index, False if the node certainly rejects ``pod`` (the
        same answer as :meth:`passing_reference`, from the per-shape thresholds)."""
        if candidates.size == 0:
            return np.ones(0, dtype=np.bool_)
        t = self._thresholds(pod)
        flat = self._topk_flat
        if len(self._group_list) == 1:
            if t.possible is not None and not t.possible[0]:
                return np.zeros(candidates.size, dtype=np.bool_)
            ok: npt.NDArray[np.bool_] | None = None
            for row, amount in zip(t.rows, t.single, strict=True):
                here = flat[row][candidates] >= amount
                ok = here if ok is None else np.logical_and(ok, here, out=ok)
        else:
            groups = self._group_of[candidates]
            ok = None if t.possible is None else t.possible[groups]
            for row, amounts in zip(t.rows, t.amounts, strict=True):
                here = flat[row][candidates] >= amounts[groups]
                ok = here if ok is None else np.logical_and(ok, here, out=ok)
        return np.ones(candidates.size, dtype=np.bool_) if ok is None else ok

    def passing_range(self, pod: Pod, a: int, b: int) -> npt.NDArray[np.bool_]:
        """:meth:`passing` for the nodes ``a .. b-1``: over slices of the runs of one
        group each (a comparison with one amount per run), no gathers."""
        t = self._thresholds(pod)
        if not t.rows and t.possible is None:
            return np.ones(b - a, dtype=np.bool_)
        runs = self._runs
        if runs is None:
            return self.passing(pod, np.arange(a, b))
        flat = self._topk_flat
        out = np.empty(b - a, dtype=np.bool_)
        for start, end, g in runs:
            lo, hi = max(a, start), min(b, end)
            if lo >= hi:
                continue
            part = out[lo - a:hi - a]
            if t.possible is not None and not t.possible[g]:
                part[:] = False
                continue
            checks = t.by_group[g]
            if not checks:
                part[:] = True
                continue
            row, amount = checks[0]
            np.greater_equal(flat[row, lo:hi], amount, out=part)
            for row, amount in checks[1:]:
                part &= flat[row, lo:hi] >= amount
        return out

    def passing_reference(self, pod: Pod, candidates: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
        """For each candidate node index, False if the node certainly rejects ``pod``: the
        checks of :meth:`_conditions` applied group by group (the straightforward way)."""
        ok = np.ones(candidates.size, dtype=np.bool_)
        if candidates.size == 0:
            return ok
        groups = self._group_of[candidates] if len(self._group_list) > 1 else None
        for g, checks in self._conditions(pod):
            if groups is None:
                sel: npt.NDArray[np.intp] | None = None
                nodes = candidates
            else:
                sel = np.flatnonzero(groups == g)
                if sel.size == 0:
                    continue
                nodes = candidates[sel]
            if checks is None:
                if sel is None:
                    ok[:] = False
                else:
                    ok[sel] = False
                continue
            good = np.ones(nodes.size, dtype=np.bool_)
            for col, k, amount in checks:
                good &= self.topk[col, k - 1][nodes] >= amount
            if sel is None:
                ok &= good
            else:
                ok[sel] &= good
        return ok
