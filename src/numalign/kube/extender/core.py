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

import contextlib
import copy
import pickle
import sys
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from numalign.engine.merge_budget import MergeTooLarge
from numalign.errors import InputError
from numalign.kube.extender.engines import (
    Built,
    build_engine,
    content_digest,
    nrt_digests,
)
from numalign.kube.extender.gcfreeze import FreezePolicy
from numalign.kube.extender.node_release import NrtKubelet, Under, under_release
from numalign.kube.metrics import ExtenderMetrics
from numalign.node.admission import Node
from numalign.node.usage import pod_numa_nodes
from numalign.pods import Pod
from numalign.pods.annotations import KOORDINATOR_ANNOTATION, VOLCANO_ANNOTATION
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
#: shapes a rebuilt node evaluates before it is published (its predecessor's, newest first)
REWARM_SHAPES = 16
#: node updates queued to a builder process at once (update_node_async waits beyond)
MAX_QUEUED_UPDATES = 8
#: nodes built per worker job for the initial list
BUILD_BATCH = 32
#: decisions shared between nodes of equal NRT content, (content, shape) -> decision (LRU)
MAX_SHARED = 65_536
#: pod shapes with a flat decision table (node name -> verdict; least recently used dropped)
MAX_TABLES = 32
#: distinct failure reasons kept as one shared object each
MAX_REASONS = 1024


def engine_pod(pod: Pod) -> Pod:
    """``pod`` with only the annotations the engine reads (what the extender keeps)."""
    kept = {k: v for k, v in pod.annotations.items() if k in ENGINE_ANNOTATIONS}
    if len(kept) == len(pod.annotations):
        return pod
    return pod.replace(annotations=kept)


def pod_shape(pod: Pod) -> Any:
    """What a filter decision depends on: the pod's shape (:attr:`numalign.pods.Pod.shape`:
    QoS, policy, container requests and limits) with only :data:`ENGINE_ANNOTATIONS`."""
    return engine_pod(pod).shape


@dataclass(frozen=True)
class Assumed:
    pod: Pod
    fingerprint: str | None
    since: float
    numa_count: int


#: one cached decision: (passed, NUMA node count, reason)
Decision = tuple[bool, int, str]
#: a decision as a filter answer: ``True`` when the node passes, else the reason (never "")
Verdict = Literal[True] | str
#: the reason of a failed decision that gave none
NO_REASON = "TopologyAffinityError"
#: the reason of a node a request's work budget left undecided (kube/extender/bounded.py)
NOT_EVALUATED = ("not evaluated within this request's work budget (the node's engine is large, "
                 "or the request needs many first-time evaluations); evaluation goes on, ask again")
#: decides a node whose snapshot has not seen the pod's shape, or ``None`` (not now)
Cold = Callable[["NodeEntry"], "Decision | None"]


def verdict(d: Decision) -> Verdict:
    """``d`` as the filter answers it: ``True`` or the reason the node fails."""
    return True if d[0] else (d[2] or NO_REASON)


@dataclass(frozen=True, eq=False)
class NodeEntry:
    """One node as readers see it: an immutable snapshot (engine with the assumed pods
    admitted, the assumptions, a version), replaced as a whole by writers, never changed.

    ``cache`` (shape id -> decision) belongs to this snapshot only, so an entry in it is
    valid as long as the snapshot is the published one; readers add to it without a lock
    (the same key always gets the same value), bounded to :data:`CACHE_PER_NODE`."""

    name: str
    digest: str
    fingerprint: str | None
    node: Node
    version: int = 0
    assumed: Mapping[str, Assumed] = field(default_factory=dict)
    cache: dict[int, Decision] = field(default_factory=dict)
    #: digest of the NRT without its metadata: nodes with equal content decide alike
    content: str = ""
    #: the NRT object of a large engine (``Built.source``), else None
    source: Any = None
    #: what the NRT gave, when the release of the node's Node object decides instead
    #: (:mod:`~numalign.kube.extender.node_release`)
    nrt: NrtKubelet | None = None


def _copy(name: str) -> str:
    """A new string object equal to ``name`` (allocated now, next to the others made with it)."""
    return (name + ".")[:-1]


#: where updates are built: (NRT object, [(shape id, pod)]) -> (the engine or why not, the
#: decisions of those pods on it by shape id, their durations in seconds)
Builder = Callable[[Any, Sequence[tuple[int, Pod]]],
                   tuple[Built, dict[int, Decision], list[float]]]


@dataclass
class _Pending:
    """An update between its checks and its build: the shapes to decide on the new engine,
    and those already decided for nodes of equal content."""

    pods: list[tuple[int, Pod]] = field(default_factory=list)
    known: dict[int, Decision] = field(default_factory=dict)


class ExtenderCore:
    """The extender's logic without HTTP: node engines, assumptions, filter/score/bind.

    **Readers never wait for writers.** Each node is published as an immutable
    :class:`NodeEntry` in :attr:`nodes`; a writer (a node update, an assumption, a bind, an
    expiry) builds the next entry aside and swaps the reference in (a single dict store,
    atomic under the GIL). Writers take :attr:`_write` among themselves only; ``filter`` and
    ``prioritize`` take no lock a writer holds. The decision for a node whose snapshot has
    already seen the pod's shape is one dictionary lookup.

    **Decision tables.** For the :data:`MAX_TABLES` pod shapes filtered most recently, a flat
    table (node name -> :func:`verdict`) holds the published snapshots' decisions, so
    ``filter`` answers a node with one lookup in one dict (not node -> snapshot -> its cache,
    three objects scattered over the heap per node). A table only ever holds the verdict of
    the snapshot published under that name, for snapshots without assumed pods (their
    answer also depends on the pod's uid): a writer drops the node from every table in the
    same :attr:`_tables_lock` hold in which it swaps the snapshot (and enters the shapes
    its new snapshot was warmed with), and a reader enters a verdict under that lock only
    if the snapshot it decided on is still the published one. Anything else - unknown
    nodes, assumed pods, shapes without a table, a node's first decision for a shape -
    takes the snapshot path above.

    The tables' keys are copies of the node names made in one burst once the initial list is
    in (:meth:`mark_ready`), so they lie together in memory: a request's lookups compare
    its names with keys in a few hundred KiB rather than with the names the initial list
    left scattered over the whole heap among the engines (a cache and TLB miss per name:
    the single largest cost of a ``/filter`` before).

    An assumption is published before the request that made it returns, so the next filter
    of that node sees the pod's resources gone. Node updates cost one node each: the engine
    is built outside every lock, and the new snapshot pre-evaluates the shapes its
    predecessor had answered (:data:`REWARM_SHAPES` at most)."""

    def __init__(
        self,
        profile: Profile | None = None,
        *,
        assume_ttl: float = 120.0,
        metrics: ExtenderMetrics | None = None,
        binder: Callable[[str, str, str, str], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        log: Any = sys.stderr,
        builder: Builder | None = None,
        freeze: FreezePolicy | None = None,
    ) -> None:
        """``builder``: where node updates are built (a
        :class:`~numalign.kube.extender.builder.ProcessBuilder` for a worker process);
        default in this process, on the updating thread. ``freeze``: the serving process's
        garbage-collector policy (:mod:`~numalign.kube.extender.gcfreeze`), told when the
        initial nodes are in and when each update is published; none by default (it acts on
        the whole interpreter)."""
        self.builder = builder
        self.freeze = freeze
        #: where built updates are opened and published (see :meth:`update_node_async`):
        #: an :class:`ExtenderServer` sets its loop's ``call_soon``, so that work runs on the
        #: loop thread between requests instead of on another thread the loop would wait for
        #: (the interpreter lock) after each of its system calls
        self.install_on: Callable[[Callable[[], None]], None] | None = None
        #: engine builds so far (one per changed NRT object)
        self.engines_built = 0
        self.profile = profile or get_profile("numalign")
        if self.profile.filter is None:
            raise InputError(f"profile {self.profile.name!r} has no NUMA filter")
        self._decide = self.profile.filter
        self.assume_ttl = assume_ttl
        self.metrics = metrics or ExtenderMetrics()
        self.binder = binder
        self.clock = clock
        self.log = log
        #: the published snapshots (name -> entry); replaced entry by entry, never mutated
        self.nodes: dict[str, NodeEntry] = {}
        self.broken: dict[str, str] = {}
        self.ready = threading.Event()
        self._numa_counts: Counter[int] = Counter()
        self._max_numa = 1
        self._write = threading.RLock()  # writers only
        self._small = threading.Lock()  # readers' bookkeeping (pods, shape ids): O(1) holds
        self._pods: OrderedDict[str, Pod] = OrderedDict()  # uid -> last pod seen (for /bind)
        self._broken_digest: dict[str, str] = {}
        self._with_assumed: set[str] = set()
        self._next_expiry = float("inf")
        self._shapes: OrderedDict[Any, int] = OrderedDict()
        self._next_shape = 0
        self._shape_pods: dict[int, Pod] = {}  # shape id -> a pod of that shape
        self._shared: OrderedDict[tuple[str, int], Decision] = OrderedDict()
        self._seq: dict[str, int] = {}  # node -> newest update's sequence number
        self._in_flight: dict[str, int] = {}  # node -> updates queued to the builder
        self._queue_slots = threading.BoundedSemaphore(MAX_QUEUED_UPDATES)
        #: shape id -> node name -> verdict of the published snapshot (see the class notes)
        self._tables: OrderedDict[int, dict[str, Verdict]] = OrderedDict()
        self._tables_lock = threading.Lock()  # swaps of self.nodes entries and table entries
        #: node name -> the tables' key for it (see the class notes); under _tables_lock
        self._keys: dict[str, str] = {}
        self._scattered_keys = 0  # keys made one at a time since the last compaction
        #: canonical failure reasons (one object per distinct reason, bounded)
        self._reasons: dict[str, str] = {}
        #: node -> ``status.nodeInfo.kubeletVersion`` of its Node object last seen (None: it
        #: carried none); known nodes only (:mod:`~numalign.kube.extender.node_release`)
        self._kubelet_seen: dict[str, str | None] = {}
        #: node -> its snapshot while the release its Node object names leaves it unusable
        self._parked: dict[str, NodeEntry] = {}

    @property
    def max_numa(self) -> int:
        """The most NUMA nodes of any known node (Volcano's relative score)."""
        return self._max_numa

    # ---------------------------------------------------------------------- nodes

    def set_nodes(self, objects: Mapping[str, Any]) -> None:
        """Replace the node set with these NRT objects (name -> object); unchanged objects
        keep their engines and assumptions, so the cost is that of the changed ones. With a
        builder that queues (:meth:`update_node_async`), they are built in parallel - the
        initial list in jobs of :data:`BUILD_BATCH` nodes, published on this thread (no
        request is answered before it is in); this returns when all are published."""
        for name in [n for n in list(self.nodes) + list(self.broken) if n not in objects]:
            self.remove_node(name)
        many = getattr(self.builder, "submit_many", None)
        if many is not None and not self.ready.is_set():  # the initial list: in batches
            jobs: list[tuple[list[tuple[str, _Pending, int]], Future[Any]]] = []
            todo = [(name, obj, self._prepare(name, obj)) for name, obj in objects.items()]
            work = [(name, obj, prep) for name, obj, prep in todo if not isinstance(prep, bool)]
            for i in range(0, len(work), BUILD_BATCH):
                part = work[i:i + BUILD_BATCH]
                jobs.append(([(n, prep, self._bump(n)) for n, _, prep in part],
                             many([(obj, prep.pods) for _, obj, prep in part])))
            for items, job in jobs:
                for (name, prep, seq), (built, warm, took) in zip(items, job.result(),
                                                                   strict=True):
                    self._finish(name, prep, built, warm, took, seq)
        else:
            for fut in [self.update_node_async(name, obj) for name, obj in objects.items()]:
                fut.result()
        self.mark_ready()

    def mark_ready(self) -> None:
        """The first full list of nodes is in: ``/readyz`` answers 200 from now on."""
        self.ready.set()
        self._compact_keys()
        if self.freeze is not None:
            self.freeze.settled()
        settled = getattr(self.builder, "settled", None)  # a worker pool's priority
        if settled is not None:
            settled()

    def _count_numa(self, old: NodeEntry | None, new: NodeEntry | None) -> None:
        if old is not None:
            self._numa_counts[len(old.node.machine.numa_nodes)] -= 1
        if new is not None:
            self._numa_counts[len(new.node.machine.numa_nodes)] += 1
        self._numa_counts += Counter()  # drop zero counts
        self._max_numa = max(self._numa_counts, default=1)

    def remove_node(self, name: str) -> None:
        with self._write:
            self._seq[name] = self._seq.get(name, 0) + 1  # updates still in flight are void
            old = self._swap(name, None)
            self._count_numa(old, None)
            self.broken.pop(name, None)
            self._broken_digest.pop(name, None)
            self._parked.pop(name, None)
            self._kubelet_seen.pop(name, None)
            self._count_assumed(name)
            self._count_nodes()

    def update_node(self, name: str, obj: Any) -> bool:
        """Add or replace one node from its NRT object; ``False`` if it is unusable (it is then
        refused with the reason, the other nodes are untouched)."""
        prep = self._prepare(name, obj)
        if isinstance(prep, bool):
            return prep
        seq = self._bump(name)
        if self.builder is not None:
            built, warm, durations = self.builder(obj, prep.pods)
        else:
            built = build_engine(obj)
            warm = {sid: self._evaluate(built.node, pod) for sid, pod in prep.pods} \
                if built.node is not None else {}
            durations = []
        return self._finish(name, prep, built, warm, durations, seq)

    def update_node_async(self, name: str, obj: Any) -> Future[bool]:
        """:meth:`update_node` without waiting for the build when the builder can queue
        (:meth:`ProcessBuilder.submit`): several updates in flight, each node's applied in
        order (a later update or removal of the node supersedes an earlier one still being
        built). Otherwise the update is made now and the future is done. A built update is
        opened and published by :attr:`install_on` when set (the HTTP loop's
        :meth:`~numalign.kube.extender.http_loop.HttpLoop.call_soon`), else on the thread
        that finished the build; with :attr:`install_on` the checks and the queueing are made
        there too, and the calling thread only waits for a slot. At most
        :data:`MAX_QUEUED_UPDATES` wait for the builder: the next caller waits for a slot (the
        watch stops reading, the API server keeps the events), so a builder that cannot keep
        up shows as a lower update rate, not as a growing backlog."""
        out: Future[bool] = Future()
        submit = getattr(self.builder, "submit", None)
        if submit is None:
            out.set_result(self.update_node(name, obj))
            return out
        schedule = self.install_on
        if schedule is None:
            prep = self._prepare(name, obj)
            if isinstance(prep, bool):
                out.set_result(prep)
                return out
            self._queue_slots.acquire()
            seq = self._bump(name)
            self._count_in_flight(name, 1)
            self._submit(name, obj, prep, seq, submit, out)
            return out
        # the loop thread prepares and queues the update too: this thread (the informer's)
        # only waits for a slot and takes the update's place in the node's order
        self._queue_slots.acquire()
        seq = self._bump(name)
        self._count_in_flight(name, 1)

        def start() -> None:
            try:
                prep = self._prepare(name, obj, own=1)
            except BaseException as e:
                self._release(name)
                out.set_exception(e)
                return
            if isinstance(prep, bool):
                self._release(name)
                out.set_result(prep)
                return
            try:
                self._submit(name, obj, prep, seq, submit, out)
            except Exception as e:  # _submit gave the slot back
                out.set_exception(e)

        schedule(start)
        return out

    def _count_in_flight(self, name: str, n: int) -> None:
        with self._write:
            left = self._in_flight.get(name, 0) + n
            if left > 0:
                self._in_flight[name] = left
            else:
                self._in_flight.pop(name, None)

    def _release(self, name: str) -> None:
        """An update of ``name`` is no longer in flight: its queue slot is free."""
        self._count_in_flight(name, -1)
        self._queue_slots.release()

    def _submit(self, name: str, obj: Any, prep: _Pending, seq: int, submit: Any,
                out: Future[bool]) -> None:
        """Queue the build of a prepared update; its result is installed by :attr:`install_on`
        (or where the build finished) and ``out`` gets :meth:`_finish`'s answer."""

        def install(f: Future[Any]) -> None:
            try:
                res = f.result()
                if isinstance(res, bytes):  # pickled by the builder's worker: opened here
                    res = pickle.loads(res)
                built, warm, durations = res
                out.set_result(self._finish(name, prep, built, warm, durations, seq))
            except Exception as e:  # reported to whoever waits on the future
                out.set_exception(e)
            finally:
                self._release(name)

        def done(f: Future[Any]) -> None:
            schedule = self.install_on
            if schedule is None:
                install(f)
            else:
                schedule(lambda: install(f))

        try:
            queued = submit(obj, prep.pods)
        except BaseException:
            self._release(name)
            raise
        queued.add_done_callback(done)

    def _bump(self, name: str) -> int:
        """A new update sequence number for ``name`` (only the newest may be installed)."""
        with self._write:
            seq = self._seq[name] = self._seq.get(name, 0) + 1
        return seq

    def _prepare(self, name: str, obj: Any, own: int = 0) -> bool | _Pending:
        """``True``/``False`` when ``obj`` needs no build (unchanged, or the same unusable
        object again), else what the build needs: the shapes the current snapshot answered,
        decided on the new engine before it is published - from the decisions shared by nodes
        of equal content where known, else by the builder. ``own``: in-flight updates of
        ``name`` counted for this one already."""
        # an older update still being built: compare with nothing, supersede it (read before
        # the published entry: once nothing is in flight, that entry is the latest)
        in_flight = self._in_flight.get(name, 0) > own
        old = self.nodes.get(name)
        digest = ""
        try:
            if not in_flight and (old is not None or name in self.broken):
                digest, content = nrt_digests(obj)
            else:
                content = content_digest(obj)
        except (TypeError, ValueError, RecursionError):
            content = content_digest(obj)
        if digest and old is not None and old.digest == digest:
            return True
        if digest and self._broken_digest.get(name) == digest:
            return False
        pending = _Pending()
        for sid, p in self._rewarm_pods(old):
            d = self._shared.get((content, sid)) if content else None
            if d is not None:
                pending.known[sid] = d
            else:
                pending.pods.append((sid, p))
        self.engines_built += 1
        return pending

    def _finish(self, name: str, prep: _Pending, built: Built, warm: dict[int, Decision],
                durations: Sequence[float], seq: int) -> bool:
        """Publish a built update (or mark the node unusable), unless a newer update or a
        removal of the node came meanwhile."""
        for (sid, _), seconds in zip(prep.pods, durations, strict=False):
            self._count_evaluation(seconds, warm.get(sid, (True,))[0])
        if built.content:
            for sid, d in warm.items():
                self._share(built.content, sid, d)
        warm.update(prep.known)
        if built.node is None:
            with self._write:
                if self._seq.get(name) != seq:
                    return False
                old = self._swap(name, None)
                self._parked.pop(name, None)
                self.broken[name] = built.error
                if built.digest:
                    self._broken_digest[name] = built.digest
                self._count_numa(old, None)
                self._count_assumed(name)
                self._count_nodes()
            print(f"numalign extender: node {name}: {built.error}", file=self.log)
            return False
        with self._write:
            if self._seq.get(name) != seq:
                return False  # superseded
            old = self.nodes.get(name)
            nrt = None
            text = self._kubelet_seen.get(name)
            if text is not None:  # the engine under the Node object's release, before the
                # assumed pods are admitted into it again
                assert built.node is not None
                got = under_release(built.node, built.content, built.source, None, text)
                if isinstance(got, Under):
                    built = replace(built, node=got.node, content=got.content, source=got.source)
                    nrt, warm = got.nrt, {}
            entry = self._successor(name, built, old, warm)
            if nrt is not None:
                entry = replace(entry, nrt=nrt)
            self._parked.pop(name, None)
            # the release of the node's Node object decides, when one named it (refused: parked)
            published = self._use_node_version(name, entry, old)
        if published and self.freeze is not None:
            self.freeze.published()
        return published

    def use_node_versions(self, texts: Sequence[tuple[str, str | None]]) -> None:
        """The Node objects of a request, as (name, ``status.nodeInfo.kubeletVersion`` or
        None): a node whose Node object names another version than it last did decides by
        that release from now on (:mod:`~numalign.kube.extender.node_release`); nodes whose
        text is unchanged cost a dictionary lookup."""
        seen = self._kubelet_seen
        missing = object()
        changed = [(n, t) for n, t in texts if seen.get(n, missing) != t]
        if not changed:
            return
        published = False
        with self._write:
            for name, text in changed:
                current = self.nodes.get(name) or self._parked.get(name)
                if current is None:  # no usable NRT yet: its next request tells again
                    continue
                seen[name] = text
                old = self.nodes.get(name)
                if self._use_node_version(name, current, old) and self.nodes.get(name) is not old:
                    published = True
        if published and self.freeze is not None:
            self.freeze.published()

    @staticmethod
    def _under(entry: NodeEntry, text: str | None) -> NodeEntry | str:
        """``entry`` deciding by the release ``text`` names (None: the NRT's): ``entry`` itself
        when it already does, else its successor (the same state, assumptions and digest; the
        version bumped, an empty decision cache), or why the node cannot decide under it."""
        got = under_release(entry.node, entry.content, entry.source, entry.nrt, text)
        if got is None or isinstance(got, str):
            return entry if got is None else got
        return replace(entry, version=entry.version + 1, cache={}, node=got.node,
                       content=got.content, source=got.source, nrt=got.nrt)

    def _use_node_version(self, name: str, entry: NodeEntry, old: NodeEntry | None) -> bool:
        """Publish ``entry`` (``name``'s snapshot to be, ``old`` the published one) deciding
        by the release of the node's Node object, or park it with the reason that release
        cannot decide; ``True`` when published (under the write lock)."""
        got = self._under(entry, self._kubelet_seen.get(name))
        if isinstance(got, str):
            self._swap(name, None)
            self._parked[name] = entry
            self.broken[name] = got
            if entry.digest:
                self._broken_digest[name] = entry.digest
            self._count_numa(old, None)
            self._count_assumed(name)
            self._count_nodes()
            print(f"numalign extender: node {name}: {got}", file=self.log)
            return False
        self._parked.pop(name, None)
        self.broken.pop(name, None)
        self._broken_digest.pop(name, None)
        if got is not old:
            self._swap(name, got)
            self._count_numa(old, got)
        self._count_assumed(name)
        self._count_nodes()
        return True

    def _swap(self, name: str, entry: NodeEntry | None) -> NodeEntry | None:
        """Publish ``entry`` as ``name``'s snapshot (``None``: remove the node), with the
        decision tables to match; returns the snapshot replaced (under the write lock)."""
        with self._tables_lock:
            for table in self._tables.values():
                table.pop(name, None)
            if entry is None:
                self._keys.pop(name, None)
                return self.nodes.pop(name, None)
            old = self.nodes.get(name)
            self.nodes[name] = entry
            if not entry.assumed and entry.cache:
                key = self._key(name)
                for sid, d in entry.cache.items():
                    warm = self._tables.get(sid)
                    if warm is not None:
                        warm[key] = self._verdict(d)
            return old

    def _key(self, name: str) -> str:
        """The tables' key for ``name`` (under :attr:`_tables_lock`)."""
        key = self._keys.get(name)
        if key is None:
            key = self._keys[name] = _copy(name)
            self._scattered_keys += 1
        return key

    def _verdict(self, d: Decision) -> Verdict:
        """:func:`verdict` with one object per distinct reason (the tables of thousands of
        nodes share a handful of reasons)."""
        v = verdict(d)
        if v is True:
            return v
        same = self._reasons.get(v)
        if same is not None:
            return same
        if len(self._reasons) < MAX_REASONS:
            self._reasons[v] = v
        return v

    def _compact_keys(self) -> None:
        """Make the tables' keys anew, in one burst (see the class notes), when more than an
        eighth of the nodes have none or one made on its own."""
        with self._tables_lock:
            loose = self._scattered_keys + len(self.nodes) - len(self._keys)
            if loose <= len(self._keys) // 8:
                return
            keys = {name: _copy(name) for name in self.nodes}
            for sid, table in list(self._tables.items()):
                self._tables[sid] = {keys[n]: v for n, v in table.items() if n in keys}
            self._keys = keys
            self._scattered_keys = 0

    def _rewarm_pods(self, old: NodeEntry | None) -> list[tuple[int, Pod]]:
        """(shape id, a pod of that shape) for the shapes ``old`` has decided, newest last;
        none when it holds assumed pods (its successor's cache starts empty then)."""
        if old is None or old.assumed or not old.cache:
            return []
        try:
            recent = list(old.cache)[-REWARM_SHAPES:]  # readers may be adding to it
        except RuntimeError:
            return []
        with self._small:
            pods = [(sid, self._shape_pods.get(sid)) for sid in recent]
        return [(sid, pod) for sid, pod in pods if pod is not None]

    def _successor(self, name: str, built: Built, old: NodeEntry | None,
                   warm: dict[int, Decision]) -> NodeEntry:
        """The entry that replaces ``old`` for a newly built engine (under the write lock):
        the assumptions the new NRT does not yet account for are carried over."""
        node = built.node
        assert node is not None
        fp = built.fingerprint
        assumed: dict[str, Assumed] = {}
        if old is not None:
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
                    assumed[uid] = Assumed(a.pod, fp, a.since, a.numa_count)
        version = (old.version + 1) if old is not None else 0
        return NodeEntry(name, built.digest, fp, node, version, assumed,
                         {} if assumed else warm, built.content, built.source)

    def _count_nodes(self) -> None:
        self.metrics.nodes.set(len(self.nodes))
        self.metrics.broken_nodes.set(len(self.broken))

    def _count_assumed(self, *names: str) -> None:
        """Track which nodes hold assumed pods (after ``names``' assumptions changed), and
        when the next assumption expires (under the write lock)."""
        for name in names:
            e = self.nodes.get(name)
            if e is not None and e.assumed:
                self._with_assumed.add(name)
            else:
                self._with_assumed.discard(name)
        total = 0
        first = float("inf")
        for n in self._with_assumed:
            e = self.nodes[n]
            total += len(e.assumed)
            first = min(first, min(a.since for a in e.assumed.values()))
        self._next_expiry = first + self.assume_ttl if total else float("inf")
        self.metrics.assumed.set(total)

    def _publish(self, old: NodeEntry, node: Node, assumed: Mapping[str, Assumed]) -> None:
        """Swap in the successor of ``old`` with another engine state (under the write lock)."""
        self._swap(old.name, NodeEntry(old.name, old.digest, old.fingerprint, node,
                                       old.version + 1, assumed, {}, old.content, old.source))
        self._count_assumed(old.name)

    def _drop_assumed(self, entry: NodeEntry, uids: Sequence[str]) -> None:
        node = copy.copy(entry.node)  # shares the machine; release copies the state
        for uid in uids:
            node.release(uid)
        self._publish(entry, node, {u: a for u, a in entry.assumed.items() if u not in uids})

    def _expire(self) -> None:
        with self._write:
            now = self.clock()
            for name in list(self._with_assumed):
                e = self.nodes[name]
                gone = [u for u, a in e.assumed.items() if now - a.since > self.assume_ttl]
                if gone:
                    self._drop_assumed(e, gone)
            self._count_assumed()

    # --------------------------------------------------------------------- decide

    def shape_id(self, pod: Pod) -> int:
        """A small integer for the pod's engine shape (``pod`` as :func:`engine_pod` returns
        it): the per-node caches' key, computed once per request, not once per node."""
        shape = pod.shape
        with self._small:
            sid = self._shapes.get(shape)
            if sid is None:
                self._next_shape += 1
                sid = self._shapes[shape] = self._next_shape
                self._shape_pods[sid] = pod
                while len(self._shapes) > MAX_SHAPES:
                    self._shape_pods.pop(self._shapes.popitem(last=False)[1], None)
            else:
                self._shapes.move_to_end(shape)
        return sid

    def _evaluate(self, node: Node, pod: Pod) -> Decision:
        t0 = time.perf_counter()
        res = self._decide(node, pod)
        self._count_evaluation(time.perf_counter() - t0, res.passed)
        return res.passed, res.numa_count, res.reason

    def _evaluate_entry(self, entry: NodeEntry, pod: Pod) -> Decision:
        return self._evaluate(entry.node, pod)

    def _count_evaluation(self, seconds: float, passed: bool) -> None:
        self.metrics.admission_duration.observe(seconds)
        self.metrics.admission_requests.inc()
        if not passed:
            self.metrics.admission_errors.inc()

    def _share(self, content: str, shape: int, d: Decision) -> None:
        with self._small:
            self._shared[(content, shape)] = d
            if len(self._shared) > MAX_SHARED:
                self._shared.popitem(last=False)

    def _miss(self, entry: NodeEntry, pod: Pod, shape: int,
              evaluate: Callable[[NodeEntry, Pod], Decision] | None = None) -> Decision:
        """The decision for a shape this snapshot has not seen: from a node of equal content
        (both without assumed pods), else the engine's (``evaluate``: made elsewhere)."""
        d = None
        if evaluate is None:
            evaluate = self._evaluate_entry
        if entry.content and not entry.assumed:
            d = self._shared.get((entry.content, shape))
            if d is None:
                d = evaluate(entry, pod)
                self._share(entry.content, shape, d)
        else:
            d = evaluate(entry, pod)
        cache = entry.cache
        if len(cache) >= CACHE_PER_NODE:
            # the oldest entry first (insertion order); another reader may race us here
            with contextlib.suppress(RuntimeError, KeyError, StopIteration):
                del cache[next(iter(cache))]
        cache[shape] = d
        return d

    def _table(self, shape: int) -> dict[str, Verdict]:
        """The decision table of ``shape`` (made now if it has none; the least recently used
        table beyond :data:`MAX_TABLES` is dropped)."""
        with self._tables_lock:
            table = self._tables.get(shape)
            if table is None:
                table = self._tables[shape] = {}
                if len(self._tables) > MAX_TABLES:
                    self._tables.popitem(last=False)
            else:
                self._tables.move_to_end(shape)
        return table

    def _enter(self, table: dict[str, Verdict], entry: NodeEntry, d: Decision) -> None:
        """Enter ``entry``'s decision in ``table`` if ``entry`` is still published (and has no
        assumed pods)."""
        if entry.assumed:
            return
        with self._tables_lock:
            if self.nodes.get(entry.name) is entry:
                table[self._key(entry.name)] = self._verdict(d)

    def _remember(self, pod: Pod) -> None:
        with self._small:
            self._pods[pod.uid] = pod
            self._pods.move_to_end(pod.uid)
            while len(self._pods) > MAX_REMEMBERED_PODS:
                self._pods.popitem(last=False)

    def filter(self, pod: Pod, names: Sequence[str], *, shape: int | None = None,
               cold: Cold | None = None, assume: bool = True,
               ) -> tuple[list[str], dict[str, str]]:
        """(names that pass, failed name -> reason). ``shape``: the pod's :meth:`shape_id`
        when the caller has it (``pod`` is then already an :func:`engine_pod`). ``cold``:
        decides a node whose snapshot has not seen the shape instead of the engine (``None``
        from it: not decided, the node fails with :data:`NOT_EVALUATED`; see
        :mod:`~numalign.kube.extender.bounded`); ``assume=False``: no assumption when one
        node passes (the caller makes it)."""
        if self.clock() >= self._next_expiry:
            self._expire()
        if shape is None:
            pod = engine_pod(pod)
            shape = self.shape_id(pod)
        self._remember(pod)
        uid = pod.uid
        nodes = self.nodes
        table = self._table(shape)
        known = table.get
        passed: list[str] = []
        failed: dict[str, str] = {}
        for name in names:
            v = known(name)
            if v is True:
                passed.append(name)
                continue
            if v is not None:
                failed[name] = v
                continue
            entry = nodes.get(name)
            if entry is None:
                failed[name] = self.broken.get(name, UNKNOWN_NODE)
                continue
            if entry.assumed and uid in entry.assumed:
                passed.append(name)
                continue
            d = entry.cache.get(shape)
            if d is None:
                d = self._miss(entry, pod, shape) if cold is None else cold(entry)
                if d is None:
                    failed[name] = NOT_EVALUATED
                    continue
            self._enter(table, entry, d)
            if d[0]:
                passed.append(name)
            else:
                failed[name] = d[2] or NO_REASON
        if len(passed) == 1 and assume:
            # decided on a snapshot; another request may have assumed a pod there since:
            # the admission into the current snapshot is what counts
            why = self._assume(passed[0], pod)
            if why:
                failed[passed.pop()] = why
        return passed, failed

    def prioritize(self, pod: Pod, names: Sequence[str], *, shape: int | None = None,
                   cold: Cold | None = None) -> list[tuple[str, int]]:
        """(name, 0..MaxExtenderPriority) per name: the profile's NUMA score (0..100) of the
        nodes that pass, scaled down (rounding down); 0 for the others, and for every node
        when the profile has no NUMA score. A relative score (Volcano's) is taken over the
        passing nodes of this request. ``cold`` as for :meth:`filter` (a node it does not
        decide scores 0)."""
        if shape is None:
            pod = engine_pod(pod)
            shape = self.shape_id(pod)
        nodes = self.nodes
        passing: list[tuple[int, int]] = []  # (position in names, NUMA node count)
        for k, name in enumerate(names):
            entry = nodes.get(name)
            if entry is None:
                continue
            a = entry.assumed.get(pod.uid) if entry.assumed else None
            if a is not None:
                passing.append((k, a.numa_count))
                continue
            d = entry.cache.get(shape)
            if d is None:
                d = self._miss(entry, pod, shape) if cold is None else cold(entry)
                if d is None:
                    continue
            if d[0]:
                passing.append((k, d[1]))
        scores = [0] * len(names)
        numa = self.profile.numa_score
        if numa is not None and passing:
            if numa.node_aware:  # the score reads the node (Koordinator's, the NRT zone scores)
                numa_scores = [self._score_on(names[k], nodes[names[k]].node, pod, count)
                               for k, count in passing]
            else:
                numa_scores = numa.scores([count for _, count in passing], self.max_numa)
            for (k, _), s in zip(passing, numa_scores, strict=True):
                scores[k] = max(0, min(MAX_EXTENDER_PRIORITY, s * MAX_EXTENDER_PRIORITY // 100))
        return list(zip(names, scores, strict=True))

    def _score_on(self, name: str, node: Node, pod: Pod, count: int) -> int:
        """The profile's node-aware NUMA score; 0 (and a line on the log) where computing it
        would pass a work cap (LeastNUMANodes over many zones: ``nrt_scores.MAX_COMBINATIONS``)."""
        numa = self.profile.numa_score
        assert numa is not None
        try:
            return numa.score_on(node, pod, count, self.max_numa)
        except InputError as e:
            print(f"numalign extender: node {name}: pod {pod.key}: score 0: {e.message}", file=self.log)
            return 0

    def _assume(self, name: str, pod: Pod) -> str:
        """Admit ``pod`` into a copy of ``name``'s engine and publish it (write lock);
        "" when assumed (or already), else why not."""
        with self._write:
            entry = self.nodes.get(name)
            if entry is None:
                return self.broken.get(name, UNKNOWN_NODE)
            if pod.uid in entry.assumed:
                return ""
            node = copy.copy(entry.node)  # shares the machine; admit replaces the state
            try:
                result = node.admit(pod)
            except MergeTooLarge as e:  # the merge's step cap: this node does not take the pod
                return f"{e.reason}: {e.message}"
            if not result.admitted:
                return f"{result.reason}: {result.message}"
            # the NUMA nodes the pod holds (as the filter and the simulator count them)
            count = len(pod_numa_nodes(node.machine, node.state, pod.uid))
            assumed = dict(entry.assumed)
            assumed[pod.uid] = Assumed(pod, entry.fingerprint, self.clock(), count)
            self._publish(entry, node, assumed)
            return ""

    def bind(self, namespace: str, name: str, uid: str, node: str) -> str:
        """Assume the pod on ``node`` and bind it through the API (when configured);
        returns the ExtenderBindingResult error ("" = success)."""
        with self._write:
            entry = self.nodes.get(node)
            if entry is None:
                raise LookupError(self.broken.get(node, UNKNOWN_NODE))
            with self._small:
                pod = self._pods.get(uid)
            if pod is None:
                return f"pod {namespace}/{name} ({uid}) was not filtered by this extender"
            for other in list(self.nodes.values()):  # assumed elsewhere (single-node filter)
                if other is not entry and uid in other.assumed:
                    self._drop_assumed(other, [uid])
            if self._assume(node, pod):
                return f"node {node} no longer admits pod {namespace}/{name}"
        if self.binder is not None:
            try:
                self.binder(namespace, name, uid, node)
            except Exception as e:
                return f"binding failed: {type(e).__name__}: {e}"
        return ""
