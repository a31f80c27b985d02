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
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from numalign.errors import InputError, NumalignError
from numalign.kube.metrics import ExtenderMetrics
from numalign.kube.topology import engine_from_nrt, fingerprint_of
from numalign.node.admission import Node
from numalign.node.usage import pod_numa_nodes
from numalign.pods import Pod
from numalign.scheduler import Profile, get_profile

MAX_EXTENDER_PRIORITY = 10
UNKNOWN_NODE = "node has no NodeResourceTopology known to the numalign extender"


def pod_shape(pod: Pod) -> Any:
    """What a filter decision depends on (see :attr:`numalign.pods.Pod.shape`)."""
    return pod.shape


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
    cache: dict[Any, tuple[int, bool, int, str]] = field(default_factory=dict)


def _digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


class ExtenderCore:
    """The extender's logic without HTTP: node engines, assumptions, filter/score/bind."""

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
        self.max_numa = 1
        self._lock = threading.RLock()
        self._pods: OrderedDict[str, Pod] = OrderedDict()  # uid -> last pod seen (for /bind)

    # ---------------------------------------------------------------------- nodes

    def set_nodes(self, objects: Mapping[str, Any]) -> None:
        """Replace the node set with these NRT objects (name -> object); unchanged objects
        keep their engines and assumptions."""
        with self._lock:
            for name in list(self.nodes):
                if name not in objects:
                    del self.nodes[name]
            for name in list(self.broken):
                if name not in objects:
                    del self.broken[name]
            for name, obj in objects.items():
                self._update(name, obj)
            self.max_numa = max((len(e.node.machine.numa_nodes) for e in self.nodes.values()),
                                default=1)
            self.metrics.nodes.set(len(self.nodes))
            self.ready.set()

    def _update(self, name: str, obj: Any) -> None:
        digest = _digest(obj)
        old = self.nodes.get(name)
        if old is not None and old.digest == digest:
            return
        try:
            node = engine_from_nrt(obj)
        except Exception as e:  # one bad object must not stop the others
            msg = e.message if isinstance(e, NumalignError) else f"{type(e).__name__}: {e}"
            self.broken[name] = f"unusable NodeResourceTopology: {msg}"
            self.nodes.pop(name, None)
            print(f"numalign extender: node {name}: {self.broken[name]}", file=self.log)
            return
        self.broken.pop(name, None)
        fp = fingerprint_of(obj) if isinstance(obj, dict) else None
        entry = NodeEntry(name, digest, fp, node, (old.version + 1) if old else 0)
        if old is not None:
            now = self.clock()
            for uid, a in old.assumed.items():
                # the NRT now reflects a new pod set: it accounts for the assumed pod
                if fp is not None and fp != a.fingerprint:
                    continue
                if now - a.since > self.assume_ttl:
                    continue
                if node.admit(a.pod).admitted:
                    entry.assumed[uid] = Assumed(a.pod, fp, a.since, a.numa_count)
        self.nodes[name] = entry
        self._count_assumed()

    def _count_assumed(self) -> None:
        self.metrics.assumed.set(sum(len(e.assumed) for e in self.nodes.values()))

    def _expire(self) -> None:
        now = self.clock()
        for e in self.nodes.values():
            for uid in [u for u, a in e.assumed.items() if now - a.since > self.assume_ttl]:
                e.node.release(uid)
                del e.assumed[uid]
                e.version += 1
        self._count_assumed()

    # --------------------------------------------------------------------- decide

    def _check(self, entry: NodeEntry, pod: Pod, shape: Any) -> tuple[bool, int, str]:
        a = entry.assumed.get(pod.uid)
        if a is not None:
            return True, a.numa_count, ""
        hit = entry.cache.get(shape)
        if hit is not None and hit[0] == entry.version:
            return hit[1], hit[2], hit[3]
        assert self.profile.filter is not None
        t0 = time.perf_counter()
        res = self.profile.filter(entry.node, pod)
        self.metrics.admission_duration.observe(time.perf_counter() - t0)
        self.metrics.admission_requests.inc()
        if not res.passed:
            self.metrics.admission_errors.inc()
        entry.cache[shape] = (entry.version, res.passed, res.numa_count, res.reason)
        return res.passed, res.numa_count, res.reason

    def _remember(self, pod: Pod) -> None:
        self._pods[pod.uid] = pod
        self._pods.move_to_end(pod.uid)
        while len(self._pods) > 10000:
            self._pods.popitem(last=False)

    def filter(self, pod: Pod, names: Sequence[str]) -> tuple[list[str], dict[str, str]]:
        """(names that pass, failed name -> reason)."""
        with self._lock:
            if any(e.assumed for e in self.nodes.values()):
                self._expire()
            self._remember(pod)
            shape = pod_shape(pod)
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
            shape = pod_shape(pod)
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
                numa_scores = numa.scores([count for _, count in passing], self.max_numa)
                for (k, _), s in zip(passing, numa_scores, strict=True):
                    scores[k] = max(0, min(MAX_EXTENDER_PRIORITY, s * MAX_EXTENDER_PRIORITY // 100))
            return list(zip(names, scores, strict=True))

    def _assume(self, entry: NodeEntry, pod: Pod) -> bool:
        if pod.uid in entry.assumed:
            return True
        result = entry.node.admit(pod)
        if not result.admitted:
            return False
        # the NUMA nodes the pod holds (as the filter and the simulator count them)
        count = len(pod_numa_nodes(entry.node.machine, entry.node.state, pod.uid))
        entry.assumed[pod.uid] = Assumed(pod, entry.fingerprint, self.clock(), count)
        entry.version += 1
        self._count_assumed()
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
            if not self._assume(entry, pod):
                return f"node {node} no longer admits pod {namespace}/{name}"
        if self.binder is not None:
            try:
                self.binder(namespace, name, uid, node)
            except Exception as e:
                return f"binding failed: {type(e).__name__}: {e}"
        return ""
