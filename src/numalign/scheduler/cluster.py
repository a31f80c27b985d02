"""The scheduler's snapshot of a cluster: node engines plus vectorised node-level accounting.

Every :class:`ClusterNode` wraps a node engine (:class:`numalign.node.admission.Node`) whose
state is the node's truth (in the simulator it *is* the kubelet). Node-level allocatable and
requested amounts (kube-scheduler's ``NodeResourcesFit`` view) are kept in NumPy arrays, one
row per node and one column per resource, so the cheap necessary conditions (does the pod fit
the node at all?) are one vectorised comparison over the whole cluster.

``version[i]`` increases whenever node *i* changes; filter results are cached per (node,
version, pod shape), so a node that refused a pod shape is not asked again until it changes.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from numalign.inputs.quantity import CPU, MEMORY, hugepage_resource_name, is_hugepages_resource
from numalign.machine.model import Machine
from numalign.node.admission import Node
from numalign.node.plan_cache import PlanCache, share_decision_key
from numalign.pods import Pod, effective_pod_requests
from numalign.scheduler.gc_pause import collector_paused


def node_allocatable(machine: Machine) -> dict[str, int]:
    """Node allocatable as the kubelet reports it (capacity minus reservations)."""
    kc = machine.kubelet
    cpus = len(machine.online_cpus) * 1000
    if kc.reserved_system_cpus:
        reserved_cpu = len(kc.reserved_system_cpus) * 1000
    else:
        reserved_cpu = kc.system_reserved.get(CPU, 0) + kc.kube_reserved.get(CPU, 0)
    memory = sum(n.memory for n in machine.numa_nodes)
    reserved_mem = sum(r.limits.get(MEMORY, 0) for r in kc.reserved_memory) or (
        kc.system_reserved.get(MEMORY, 0) + kc.kube_reserved.get(MEMORY, 0)
    )
    out = {CPU: max(0, cpus - reserved_cpu), MEMORY: max(0, memory - reserved_mem)}
    for n in machine.numa_nodes:
        for size, total in n.hugepages.items():
            name = hugepage_resource_name(size)
            out[name] = out.get(name, 0) + total
    for r in kc.reserved_memory:
        for name, amount in r.limits.items():
            if is_hugepages_resource(name):
                out[name] = max(0, out.get(name, 0) - amount)
    for d in machine.devices:
        if d.healthy:
            out[d.resource] = out.get(d.resource, 0) + 1
    return out


#: clusters from this many NUMA nodes in all keep the garbage collector off their node states
FREEZE_FROM_NUMA_NODES = 8000
#: binds between two :func:`_freeze_long_lived` calls
FREEZE_EVERY_BINDS = 256
#: request vectors (and :meth:`Cluster.any_fits` answers) remembered; beyond, they start over
VECTORS_KEPT = 4096
#: binds and unbinds :meth:`Cluster.any_fits` can look back on; beyond, the log starts over
CHANGE_LOG_KEPT = 1 << 16


def _freeze_long_lived(collect: bool) -> None:
    """Move every live object out of the cyclic garbage collector's sight (``gc.freeze``),
    after one collection when ``collect``. The node engines' states are many and live long:
    at 5,000 nodes the collector walking them again and again took a third of the scheduling
    time, and one full collection stalls a pod for ~100 ms. Frozen objects are still freed by
    reference counting (states hold no cycles); the few cycles made between two freezes
    (tens of objects per thousand binds) are not collected."""
    if collect:
        gc.collect()
    gc.freeze()


def _fresh_nodes(nodes: Iterable[tuple[str, Machine]]) -> list[ClusterNode]:
    """An empty node per entry: the first of each machine object built, the others its
    twins (:meth:`Node.twin`: the machine's rules and figures are resolved once, and the
    empty state's decision key is computed once: :func:`~numalign.node.plan_cache.share_decision_key`)."""
    first: dict[int, Node] = {}
    out: list[ClusterNode] = []
    for name, m in nodes:
        template = first.get(id(m))
        if template is None:
            node = first[id(m)] = Node(m)
        else:
            node = template.twin()
            share_decision_key(template.state, node.state)
        out.append(ClusterNode(name, node))
    return out


@dataclass
class ClusterNode:
    name: str
    node: Node
    pods: dict[str, Pod] = field(default_factory=dict)  # uid -> bound pod

    @property
    def machine(self) -> Machine:
        return self.node.machine


class Cluster:
    """Nodes, their engines and the node-level resource arrays."""

    def __init__(self, nodes: Iterable[tuple[str, Machine]]) -> None:
        with collector_paused():  # engines hold no cycles: nothing for the collector to find
            self.nodes: list[ClusterNode] = _fresh_nodes(nodes)
        #: admissions replayed between nodes in the same situation (exact: see plan_cache)
        self.plan_cache = PlanCache()
        for n in self.nodes:
            n.node.plan_cache = self.plan_cache
        self.index = {n.name: i for i, n in enumerate(self.nodes)}
        alloc = [node_allocatable(n.machine) for n in self.nodes]
        self.resources: list[str] = sorted({r for a in alloc for r in a} | {CPU, MEMORY})
        self.col = {r: i for i, r in enumerate(self.resources)}
        shape = (len(self.nodes), len(self.resources))
        self.allocatable: npt.NDArray[np.int64] = np.zeros(shape, dtype=np.int64)
        for i, a in enumerate(alloc):
            for r, v in a.items():
                self.allocatable[i, self.col[r]] = v
        self.requested: npt.NDArray[np.int64] = np.zeros(shape, dtype=np.int64)
        #: allocatable - requested, kept up to date by bind/unbind
        self.free: npt.NDArray[np.int64] = self.allocatable.copy()
        #: :attr:`free` column by column (a row per resource, contiguous), for :meth:`any_fits`
        self._free_by_col: npt.NDArray[np.int64] = np.ascontiguousarray(self.free.T)
        #: the nodes of the binds and unbinds since change number :attr:`_log_start` (a
        #: bounded log: it starts over beyond :data:`CHANGE_LOG_KEPT`), for :meth:`any_fits`
        self._log: list[int] = []
        self._log_start = 0
        #: request vector (bytes) -> (change number, a node with it free or -1 for none, that
        #: node's version then)
        self._any_fits: dict[bytes, tuple[int, int, int]] = {}
        #: pod shape -> its request vector (read-only), :meth:`request_vector`'s answers
        self._vectors: dict[object, npt.NDArray[np.int64] | None] = {}
        self.version: npt.NDArray[np.int64] = np.zeros(len(self.nodes), dtype=np.int64)
        by_machine: dict[int, list[int]] = {}
        for i, n in enumerate(self.nodes):
            by_machine.setdefault(id(n.machine), []).append(i)
        #: node indices grouped by machine object (nodes built from one template entry)
        self.groups: list[npt.NDArray[np.int64]] = [
            np.array(v, dtype=np.int64) for v in by_machine.values()
        ]
        self.max_numa = max((len(n.machine.numa_nodes) for n in self.nodes), default=1)
        #: the columns node-level scores look at (kube-scheduler's default: cpu and memory)
        self.score_cols: tuple[int, int] = (self.col[CPU], self.col[MEMORY])
        self._percent: dict[int, npt.NDArray[np.float64]] = {}
        self._rules: tuple[list[npt.NDArray[np.int64]], npt.NDArray[np.int64]] | None = None
        self._freeze = sum(len(n.machine.numa_nodes) for n in self.nodes) >= FREEZE_FROM_NUMA_NODES
        self._binds_since_freeze = 0
        if self._freeze:
            _freeze_long_lived(collect=True)

    def rules_groups(self) -> tuple[list[npt.NDArray[np.int64]], npt.NDArray[np.int64]]:
        """The nodes by machine object, Topology Manager policy and scope (what a NUMA
        filter's or score's per-machine rules read): the member indices of each, and per node
        its group's position in that list. Made on the first call after the nodes' rules were
        last set (:meth:`rules_changed`)."""
        if self._rules is None:
            split: dict[tuple[int, object, object], list[int]] = {}
            for members in self.groups:
                for i in members.tolist():
                    node = self.nodes[i].node
                    split.setdefault((id(node.machine), node.node_policy, node.node_scope), []).append(i)
            parts = [np.array(v, dtype=np.int64) for v in split.values()]
            of = np.empty(len(self.nodes), dtype=np.int64)
            for g, members in enumerate(parts):
                of[members] = g
            self._rules = (parts, of)
        return self._rules

    def rules_changed(self) -> None:
        """The nodes' rules changed (a scheduler set their engine mode): :meth:`rules_groups`
        is made again on its next call."""
        self._rules = None

    def percent_of_allocatable(self, col: int) -> npt.NDArray[np.float64]:
        """Per node, 100 / allocatable of resource column ``col`` (0 where none is
        allocatable): one unit as a percentage of the node's allocatable. Computed once."""
        hit = self._percent.get(col)
        if hit is None:
            alloc = self.allocatable[:, col].astype(np.float64)
            hit = np.ascontiguousarray(np.divide(100.0, alloc, out=np.zeros_like(alloc), where=alloc > 0))
            self._percent[col] = hit
        return hit

    def request_vector(self, pod: Pod) -> npt.NDArray[np.int64] | None:
        """The pod's node-level request (effective requests; read-only, shared by the pods
        of one :attr:`~numalign.pods.Pod.shape`); None if it asks for a resource no node has."""
        shape = pod.shape
        if shape in self._vectors:
            return self._vectors[shape]
        vec = self._request_vector(pod)
        if vec is not None:
            vec.setflags(write=False)
        if len(self._vectors) >= VECTORS_KEPT:
            self._vectors.clear()
        self._vectors[shape] = vec
        return vec

    def _request_vector(self, pod: Pod) -> npt.NDArray[np.int64] | None:
        vec = np.zeros(len(self.resources), dtype=np.int64)
        for r, v in effective_pod_requests(pod).items():
            if v <= 0:
                continue
            if r not in self.col:
                if r.startswith("ephemeral-storage"):
                    continue
                return None
            vec[self.col[r]] = v
        return vec

    def fits(self, vec: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
        """kube-scheduler NodeResourcesFit over every node at once."""
        return self.fits_range(vec, 0, len(self.nodes))

    def any_fits(self, vec: npt.NDArray[np.int64]) -> bool:
        """``fits(vec).any()``: whether some node has ``vec`` free. The answer is kept per
        vector with a witness (a node that had it free) or none: a witness that still has it
        free answers yes; a "none" is checked again on the nodes changed since only (a node
        that did not change still lacks it); else every node is looked at, column by column."""
        key = vec.tobytes()
        hit = self._any_fits.get(key)
        now = self._log_start + len(self._log)
        if hit is not None and hit[0] >= self._log_start:
            at, witness, version = hit
            if witness >= 0:
                if int(self.version[witness]) == version:  # unchanged: still has it free
                    return True
                if bool((self.free[witness] >= vec).all()):
                    self._any_fits[key] = (now, witness, int(self.version[witness]))
                    return True
            else:
                if at < now:
                    for i in set(self._log[at - self._log_start:]):
                        if bool((self.free[i] >= vec).all()):
                            self._any_fits[key] = (now, i, int(self.version[i]))
                            return True
                    self._any_fits[key] = (now, -1, 0)
                return False
        ok = self.fits(vec)
        first = int(ok.argmax()) if ok.size else 0
        witness = first if ok.size and bool(ok[first]) else -1
        if len(self._any_fits) >= VECTORS_KEPT:
            self._any_fits.clear()
        self._any_fits[key] = (now, witness, int(self.version[witness]) if witness >= 0 else 0)
        return witness >= 0

    def _changed(self, i: int) -> None:
        """Node ``i``'s free amounts changed (a bind or an unbind)."""
        self._free_by_col[:, i] = self.free[i]
        if len(self._log) >= CHANGE_LOG_KEPT:
            self._log_start += len(self._log)
            self._log = []
        self._log.append(i)

    def fits_range(self, vec: npt.NDArray[np.int64], a: int, b: int) -> npt.NDArray[np.bool_]:
        """:meth:`fits` for the nodes ``a .. b-1`` only: column by column, on the free amounts
        kept per column (contiguous slices, no copy of the requested columns)."""
        by_col = self._free_by_col
        ok: npt.NDArray[np.bool_] | None = None
        for col in np.flatnonzero(vec > 0).tolist():
            here = by_col[col, a:b] >= vec[col]
            ok = here if ok is None else np.logical_and(ok, here, out=ok)
        return np.ones(b - a, dtype=np.bool_) if ok is None else ok

    def bind(self, i: int, pod: Pod, vec: npt.NDArray[np.int64]) -> None:
        self._binds_since_freeze += 1
        if self._freeze and self._binds_since_freeze >= FREEZE_EVERY_BINDS:
            self._binds_since_freeze = 0
            _freeze_long_lived(collect=False)
        self.nodes[i].pods[pod.uid] = pod
        self.requested[i] += vec
        self.free[i] -= vec
        self._changed(i)
        self.version[i] += 1

    def unbind(self, i: int, pod: Pod) -> None:
        cn = self.nodes[i]
        if cn.pods.pop(pod.uid, None) is None:
            return
        vec = self.request_vector(pod)
        if vec is not None:
            self.requested[i] -= vec
            self.free[i] += vec
            self._changed(i)
        cn.node.release(pod.uid)
        self.version[i] += 1

    def names(self, idx: Sequence[int]) -> list[str]:
        return [self.nodes[i].name for i in idx]
