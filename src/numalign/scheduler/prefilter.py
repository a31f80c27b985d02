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
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import accumulate

import numpy as np
import numpy.typing as npt

from numalign.machine.model import Machine
from numalign.modes import Mode
from numalign.node.admission import Node
from numalign.node.usage import fewest_nodes, numa_capacities, numa_demand, numa_free
from numalign.pods import Pod
from numalign.policies import Policy, Scope
from numalign.quantity import CPU, MEMORY, hugepage_resource_name


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
        self._groups: dict[int, list[int]] = {}
        self._machines: dict[int, Machine] = {}
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
        #: pod shape -> the checks of :meth:`_conditions`
        self._compiled: dict[object, list[tuple[int, list[tuple[int, int, int]] | None]]] = {}
        self._memo_pod: Pod | None = None
        self._memo: dict[tuple[int, Scope], list[dict[str, int]]] = {}
        self._capacity_k: dict[tuple[int, str, int], tuple[int, int]] = {}

    def refresh(self, i: int) -> None:
        """Recompute node ``i``'s free amounts from its engine state."""
        slots = self.slots
        cols = [[0] * slots for _ in self.resources]  # per resource, per NUMA slot
        get = self.col.get
        for s, per in enumerate(numa_free(self.nodes[i]).values()):
            for res, amount in per.items():
                col = get(res)
                if col is not None:
                    cols[col][s] = amount
        self.free[i] = np.array(cols, dtype=np.int64).T
        # top-k sums per resource: the k largest free amounts, k = 1..slots
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
            if node0.dynamic or node0.mode is not Mode.KUBELET:  # the kubelet's rules only
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

    def passing(self, pod: Pod, candidates: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
        """For each candidate node index, False if the node certainly rejects ``pod``."""
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
