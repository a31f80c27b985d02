"""The extender's logic without HTTP: node engines, assumptions, filter/prioritize/bind.

Nodes are NodeResourceTopology objects, each turned into a node engine with the published
availability applied (:func:`numalign.kube.topology.engine_from_nrt`). The decision per node
is the scheduler profile's NUMA filter - for the ``numalign`` profile the node's own admission
(``Node.plan``), i.e. what the kubelet will decide. Prioritize scores with the profile's NUMA
score strategy (0..100, scaled to 0..MaxExtenderPriority = 10); kube-scheduler adds its own
node-level scores.

**Assume**: a pod the extender binds (``/bind``), or whose filter leaves exactly one node,
is admitted into that node's engine state, so the next pods see its CPUs, memory and devices
gone. The assumption ends when the node's NRT shows a new pod-set fingerprint (the exporter
has seen the pod change) or after ``assume_ttl`` seconds.
"""

from __future__ import annotations

import hashlib
import json
import sys
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from numalign.errors import InputError, NumalignError
from numalign.kube.extender.limits import check_nrt
from numalign.kube.metrics import ExtenderMetrics
from numalign.kube.topology import engine_from_nrt, fingerprint_of
from numalign.merge_budget import MergeTooLarge
from numalign.node.admission import Node
from numalign.node.usage import pod_numa_nodes
from numalign.pod_policy import KOORDINATOR_ANNOTATION, VOLCANO_ANNOTATION
from numalign.pods import Pod
from numalign.scheduler import Profile, get_profile

MAX_EXTENDER_PRIORITY = 10
UNKNOWN_NODE = "node has no NodeResourceTopology known to the numalign extender"
#: the only annotations the engine reads (a pod's own topology policy); the others are dropped
#: from the pods the extender keeps and from the filter cache's key
ENGINE_ANNOTATIONS = (VOLCANO_ANNOTATION, KOORDINATOR_ANNOTATION)
#: filter results kept per node (least recently used shapes are dropped)
CACHE_PER_NODE = 64
#: pods remembered between /filter and /bind (least recently filtered are dropped)
MAX_REMEMBERED_PODS = 4096
#: distinct pod shapes given a small integer id (the per-node caches' key); least recently
#: seen shapes lose theirs (their cache entries then age out)
MAX_SHAPES = 16_384


def engine_pod(pod: Pod) -> Pod:
    """``pod`` with only the annotations the engine reads (what the extender keeps)."""
    kept = {k: v for k, v in pod.annotations.items() if k in ENGINE_ANNOTATIONS}
    if len(kept) == len(pod.annotations):
        return pod
    return replace(pod, annotations=kept)


def pod_shape(pod: Pod) -> Any:
    """What a filter decision depends on: the pod's shape (:attr:`numalign.pods.Pod.shape`:
    QoS, policy, container requests and limits) with only :data:`ENGINE_ANNOTATIONS`."""
    return engine_pod(pod).shape


@dataclass
class Assumed:
    pod: Pod
    fingerprint: str | None
    since: float
    numa_count: int


@dataclass
class NodeEntry:
    name: str
    digest: str
    fingerprint: str | None
    node: Node
    version: int = 0
    assumed: dict[str, Assumed] = field(default_factory=dict)
    #: shape id -> (node version, passed, NUMA count, reason); LRU once half full
    cache: OrderedDict[int, tuple[int, bool, int, str]] = field(default_factory=OrderedDict)


def _digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


@dataclass(frozen=True)
class _Built:
    """An NRT object turned into an engine (or the reason it could not be), outside the lock."""

    digest: str
    node: Node | None
    fingerprint: str | None
    error: str


def _build(obj: Any) -> _Built:
    try:
        check_nrt(obj)
        digest = _digest(obj)
    except NumalignError as e:
        return _Built("", None, None, f"unusable NodeResourceTopology: {e.message}")
    except (TypeError, ValueError, RecursionError) as e:
        return _Built("", None, None, f"unusable NodeResourceTopology: {type(e).__name__}: {e}")
    try:
        node = engine_from_nrt(obj)
        fp = fingerprint_of(obj) if isinstance(obj, dict) else None
    except Exception as e:  # one bad object must not stop the others
        msg = e.message if isinstance(e, NumalignError) else f"{type(e).__name__}: {e}"
        return _Built(digest, None, None, f"unusable NodeResourceTopology: {msg}")
    return _Built(digest, node, fp if isinstance(fp, str) or fp is None else None, "")


class ExtenderCore:
    """The extender's logic without HTTP: node engines, assumptions, filter/score/bind.

    Node updates (:meth:`update_node`, :meth:`remove_node`) cost one node each: the engine is
    built outside the lock, which is held only to swap the entry in."""

    def __init__(
        self,
        profile: Profile | None = None,
        *,
        assume_ttl: float = 120.0,
        metrics: ExtenderMetrics | None = None,
        binder: Callable[[str, str, str, str], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        log: Any = sys.stderr,
    ) -> None:
        self.profile = profile or get_profile("numalign")
        if self.profile.filter is None:
            raise InputError(f"profile {self.profile.name!r} has no NUMA filter")
        self.assume_ttl = assume_ttl
        self.metrics = metrics or ExtenderMetrics()
        self.binder = binder
        self.clock = clock
        self.log = log
        self.nodes: dict[str, NodeEntry] = {}
        self.broken: dict[str, str] = {}
        self.ready = threading.Event()
        self._numa_counts: Counter[int] = Counter()
        self._lock = threading.RLock()
        self._pods: OrderedDict[str, Pod] = OrderedDict()  # uid -> last pod seen (for /bind)
        self._broken_digest: dict[str, str] = {}
        self._with_assumed: set[str] = set()
        self._shapes: OrderedDict[Any, int] = OrderedDict()
        self._next_shape = 0

    @property
    def max_numa(self) -> int:
        """The most NUMA nodes of any known node (Volcano's relative score)."""
        return max(self._numa_counts, default=1)

    # ---------------------------------------------------------------------- nodes

    def set_nodes(self, objects: Mapping[str, Any]) -> None:
        """Replace the node set with these NRT objects (name -> object); unchanged objects
        keep their engines and assumptions, so the cost is that of the changed ones."""
        for name in [n for n in list(self.nodes) + list(self.broken) if n not in objects]:
            self.remove_node(name)
        for name, obj in objects.items():
            self.update_node(name, obj)
        self.mark_ready()

    def mark_ready(self) -> None:
        """The first full list of nodes is in: ``/readyz`` answers 200 from now on."""
        self.ready.set()

    def remove_node(self, name: str) -> None:
        with self._lock:
            old = self.nodes.pop(name, None)
            if old is not None:
                self._numa_counts[len(old.node.machine.numa_nodes)] -= 1
                self._numa_counts += Counter()  # drop zero counts
            self.broken.pop(name, None)
            self._broken_digest.pop(name, None)
            self._count_assumed(name)
            self._count_nodes()

    def update_node(self, name: str, obj: Any) -> bool:
        """Add or replace one node from its NRT object; ``False`` if it is unusable (it is then
        refused with the reason, the other nodes are untouched)."""
        old = self.nodes.get(name)
        try:
            digest = _digest(obj) if old is not None or name in self.broken else ""
        except (TypeError, ValueError, RecursionError):
            digest = ""
        if digest and old is not None and old.digest == digest:
            return True
        if digest and self._broken_digest.get(name) == digest:
            return False
        built = _build(obj)
        with self._lock:
            old = self.nodes.get(name)
            if built.node is None:
                self.broken[name] = built.error
                if built.digest:
                    self._broken_digest[name] = built.digest
                if old is not None:
                    del self.nodes[name]
                    self._numa_counts[len(old.node.machine.numa_nodes)] -= 1
                    self._numa_counts += Counter()
                self._count_assumed(name)
                self._count_nodes()
                print(f"numalign extender: node {name}: {built.error}", file=self.log)
                return False
            self.broken.pop(name, None)
            self._broken_digest.pop(name, None)
            self._install(name, built, old)
            self._count_nodes()
            return True

    def _count_nodes(self) -> None:
        self.metrics.nodes.set(len(self.nodes))
        self.metrics.broken_nodes.set(len(self.broken))

    def _install(self, name: str, built: _Built, old: NodeEntry | None) -> None:
        node = built.node
        assert node is not None
        fp = built.fingerprint
        entry = NodeEntry(name, built.digest, fp, node, (old.version + 1) if old else 0)
        if old is not None:
            self._numa_counts[len(old.node.machine.numa_nodes)] -= 1
            now = self.clock()
            for uid, a in old.assumed.items():
                # the NRT now reflects a new pod set: it accounts for the assumed pod
                if fp is not None and fp != a.fingerprint:
                    continue
                if now - a.since > self.assume_ttl:
                    continue
                try:
                    kept = node.admit(a.pod).admitted
                except MergeTooLarge:  # the merge's step cap: the assumption is dropped
                    kept = False
                if kept:
                    entry.assumed[uid] = Assumed(a.pod, fp, a.since, a.numa_count)
        self._numa_counts[len(node.machine.numa_nodes)] += 1
        self._numa_counts += Counter()
        self.nodes[name] = entry
        self._count_assumed(name)

    def _count_assumed(self, *names: str) -> None:
        """Track which nodes hold assumed pods (after ``names``' assumptions changed)."""
        for name in names:
            e = self.nodes.get(name)
            if e is not None and e.assumed:
                self._with_assumed.add(name)
            else:
                self._with_assumed.discard(name)
        self.metrics.assumed.set(sum(len(self.nodes[n].assumed) for n in self._with_assumed))

    def _expire(self) -> None:
        now = self.clock()
        for e in [self.nodes[n] for n in self._with_assumed]:
            for uid in [u for u, a in e.assumed.items() if now - a.since > self.assume_ttl]:
                e.node.release(uid)
                del e.assumed[uid]
                e.version += 1
            self._count_assumed(e.name)

    # --------------------------------------------------------------------- decide

    def _shape_id(self, pod: Pod) -> int:
        """A small integer for the pod's engine shape (hashing the nested shape tuple once per
        request, not once per node)."""
        shape = pod.shape
        sid = self._shapes.get(shape)
        if sid is None:
            self._next_shape += 1
            sid = self._shapes[shape] = self._next_shape
            while len(self._shapes) > MAX_SHAPES:
                self._shapes.popitem(last=False)
        else:
            self._shapes.move_to_end(shape)
        return sid

    def _check(self, entry: NodeEntry, pod: Pod, shape: int) -> tuple[bool, int, str]:
        a = entry.assumed.get(pod.uid)
        if a is not None:
            return True, a.numa_count, ""
        hit = entry.cache.get(shape)
        if hit is not None and hit[0] == entry.version:
            if len(entry.cache) > CACHE_PER_NODE // 2:  # order matters only near eviction
                entry.cache.move_to_end(shape)
            return hit[1], hit[2], hit[3]
        assert self.profile.filter is not None
        t0 = time.perf_counter()
        res = self.profile.filter(entry.node, pod)
        self.metrics.admission_duration.observe(time.perf_counter() - t0)
        self.metrics.admission_requests.inc()
        if not res.passed:
            self.metrics.admission_errors.inc()
        entry.cache[shape] = (entry.version, res.passed, res.numa_count, res.reason)
        entry.cache.move_to_end(shape)
        while len(entry.cache) > CACHE_PER_NODE:
            entry.cache.popitem(last=False)
        return res.passed, res.numa_count, res.reason

    def _remember(self, pod: Pod) -> None:
        self._pods[pod.uid] = pod
        self._pods.move_to_end(pod.uid)
        while len(self._pods) > MAX_REMEMBERED_PODS:
            self._pods.popitem(last=False)

    def filter(self, pod: Pod, names: Sequence[str]) -> tuple[list[str], dict[str, str]]:
        """(names that pass, failed name -> reason)."""
        with self._lock:
            if self._with_assumed:
                self._expire()
            pod = engine_pod(pod)
            self._remember(pod)
            shape = self._shape_id(pod)
            passed: list[str] = []
            failed: dict[str, str] = {}
            for name in names:
                entry = self.nodes.get(name)
                if entry is None:
                    failed[name] = self.broken.get(name, UNKNOWN_NODE)
                    continue
                ok, _, reason = self._check(entry, pod, shape)
                if ok:
                    passed.append(name)
                else:
                    failed[name] = reason or "TopologyAffinityError"
            if len(passed) == 1:
                self._assume(self.nodes[passed[0]], pod)
            return passed, failed

    def prioritize(self, pod: Pod, names: Sequence[str]) -> list[tuple[str, int]]:
        """(name, 0..MaxExtenderPriority) per name: the profile's NUMA score (0..100) of the
        nodes that pass, scaled down (rounding down); 0 for the others, and for every node
        when the profile has no NUMA score. A relative score (Volcano's) is taken over the
        passing nodes of this request."""
        with self._lock:
            pod = engine_pod(pod)
            shape = self._shape_id(pod)
            passing: list[tuple[int, int]] = []  # (position in names, NUMA node count)
            for k, name in enumerate(names):
                entry = self.nodes.get(name)
                if entry is not None:
                    ok, count, _ = self._check(entry, pod, shape)
                    if ok:
                        passing.append((k, count))
            scores = [0] * len(names)
            numa = self.profile.numa_score
            if numa is not None and passing:
                if numa.node_aware:  # the score reads the node (Koordinator's, the NRT zone scores)
                    numa_scores = [numa.score_on(self.nodes[names[k]].node, pod, count, self.max_numa)
                                   for k, count in passing]
                else:
                    numa_scores = numa.scores([count for _, count in passing], self.max_numa)
                for (k, _), s in zip(passing, numa_scores, strict=True):
                    scores[k] = max(0, min(MAX_EXTENDER_PRIORITY, s * MAX_EXTENDER_PRIORITY // 100))
            return list(zip(names, scores, strict=True))

    def _assume(self, entry: NodeEntry, pod: Pod) -> bool:
        if pod.uid in entry.assumed:
            return True
        try:
            result = entry.node.admit(pod)
        except MergeTooLarge:  # the merge's step cap: this node does not take the pod
            return False
        if not result.admitted:
            return False
        # the NUMA nodes the pod holds (as the filter and the simulator count them)
        count = len(pod_numa_nodes(entry.node.machine, entry.node.state, pod.uid))
        entry.assumed[pod.uid] = Assumed(pod, entry.fingerprint, self.clock(), count)
        entry.version += 1
        self._count_assumed(entry.name)
        return True

    def bind(self, namespace: str, name: str, uid: str, node: str) -> str:
        """Assume the pod on ``node`` and bind it through the API (when configured);
        returns the ExtenderBindingResult error ("" = success)."""
        with self._lock:
            entry = self.nodes.get(node)
            if entry is None:
                raise LookupError(self.broken.get(node, UNKNOWN_NODE))
            pod = self._pods.get(uid)
            if pod is None:
                return f"pod {namespace}/{name} ({uid}) was not filtered by this extender"
            for other in self.nodes.values():  # assumed elsewhere (single-node filter)
                if other is not entry and uid in other.assumed:
                    other.node.release(uid)
                    del other.assumed[uid]
                    other.version += 1
                    self._count_assumed(other.name)
            if not self._assume(entry, pod):
                return f"node {node} no longer admits pod {namespace}/{name}"
        if self.binder is not None:
            try:
                self.binder(namespace, name, uid, node)
            except Exception as e:
                return f"binding failed: {type(e).__name__}: {e}"
        return ""
