"""Replay a workload on a modelled cluster under each scheduler profile.

Discrete events in simulated time: arrivals (from the workload), departures (a running pod
leaves ``duration_s`` after it started) and controller retries (``recreate``). Each profile
gets a fresh cluster; the node engines play the kubelets, so a pod bound by a topology-blind
profile can be rejected by its node exactly as Kubernetes would (``TopologyAffinityError``).

* A pod no node accepts stays **pending**; pending pods are tried again, oldest first, when a
  pod departs (at most ``retry_batch`` per departure, like the scheduler's queue moving
  unschedulable pods back on cluster events). A pending pod whose own departure time passes
  is **dropped** then (e.g. a trace pod deleted before it ever ran), retried or not.
* A pod **rejected** by its node fails, as in Kubernetes. With ``recreate`` its ReplicaSet
  recreates it ``recreate_delay_s`` later, at most ``max_retries`` times (counted).
* **aligned**: every NUMA-bound resource of the pod (exclusive CPUs, memory blocks, devices)
  lies on at most as many NUMA nodes as the pod needs at minimum on that machine type (the
  fewest NUMA nodes whose capacity holds each request). Pods with nothing NUMA-bound count as
  aligned (nothing of theirs is split).
* **fragmentation** (sampled): per resource, the share of free capacity that a single-NUMA
  request cannot use: ``1 - sum over nodes of (largest free amount on one NUMA node) / total
  free``, in [0, 1].
* **samples**: the cluster's state at the end of an instant (after every event at that time),
  about ``samples`` times over the workload's span, and always once at the end of the
  simulation (the last event: usually a departure, after the last arrival). Sample times
  never decrease, so time-weighted means lie between the minimum and maximum.
* **accounting**: every submitted pod (arrival or recreation) ends in exactly one of
  scheduled, rejected, pending at the end, dropped
  (:func:`numalign.sim.metrics.unaccounted` is 0).
* **scheduler CPU time**: the thread CPU time spent in scheduling cycles (steadier than wall
  time between identical runs on a shared machine); latencies are per cycle, wall clock.
"""

from __future__ import annotations

import heapq
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from numalign.engine.bitmask import mask_of
from numalign.engine.policies import Scope
from numalign.errors import InputError
from numalign.machine.model import Machine
from numalign.node.admission import Node
from numalign.node.usage import fewest_numa_nodes, numa_amounts, numa_available, pod_usage
from numalign.pods import Pod
from numalign.scheduler.cluster import Cluster
from numalign.scheduler.profiles import PROFILES, get_profile
from numalign.scheduler.scheduler import Scheduler
from numalign.sim.metrics import ContainerPlacement, MetricsRecorder
from numalign.sim.report import NumaHeatmap
from numalign.sim.workloads import Workload

Progress = Callable[[str, int, int], None]

# at equal times: departures first (capacity frees up), then arrivals, retries, expiries
ARRIVE, DEPART, RETRY, EXPIRE = 1, 0, 2, 3
GPU = "nvidia.com/gpu"


@dataclass
class SimResult:
    recorder: MetricsRecorder
    heatmaps: list[NumaHeatmap] = field(default_factory=list)
    #: profile -> [("bind" | "release", node name, pod)] in event order (``keep_placements``)
    placements: dict[str, list[tuple[str, str, Pod]]] = field(default_factory=dict)
    clusters: dict[str, Cluster] = field(default_factory=dict)


def minimal_numa_nodes(node: Node, pod: Pod) -> int:
    """Fewest NUMA nodes whose capacity holds each NUMA-bound request of the pod."""
    return fewest_numa_nodes(node, pod, Scope.POD)


def _placement(node: Node, pod: Pod) -> tuple[list[ContainerPlacement], int]:
    """Containers' NUMA masks as the node holds them, and the NUMA nodes the pod uses."""
    held = pod_usage(node.machine, node.state, pod.uid)
    if held is None:
        return [], 0
    out = [ContainerPlacement(c.name, mask_of(c.numa_nodes) if c.numa_nodes else None)
           for c in held.containers]
    return out, len(held.numa_nodes)


class _Run:
    def __init__(self, nodes: Sequence[tuple[str, Machine]], workload: Workload, profile: str,
                 rec: MetricsRecorder, *, recreate: bool, max_retries: int, recreate_delay_s: float,
                 retry_batch: int, samples: int, keep: bool, progress: Progress | None) -> None:
        self.name = profile
        self.cluster = Cluster(nodes)
        self.sched = Scheduler(self.cluster, get_profile(profile))
        self.workload = workload
        self.rec = rec
        self.recreate, self.max_retries, self.delay = recreate, max_retries, recreate_delay_s
        self.retry_batch = retry_batch
        self.keep = keep
        self.progress = progress
        self.placements: list[tuple[str, str, Pod]] = []
        self.events: list[tuple[float, int, int, Any]] = []
        self.seq = 0
        self.pending: deque[tuple[Pod, float | None, float | None]] = deque()
        self.pending_uids: set[str] = set()
        #: pending pods whose EXPIRE event is in the queue (one per pod: a pod retried and
        #: pending again keeps its deadline, so a second event would only be skipped)
        self.expiring: set[str] = set()
        #: (machine, pod shape) -> :func:`minimal_numa_nodes` (capacities only: no state)
        self._minimal: dict[tuple[int, Any], int] = {}
        self.running: dict[str, tuple[int, Pod]] = {}
        self.sched_cpu = 0.0
        self.end_s = 0.0
        self.last_sample: float | None = None
        span = max(workload.span_s, 1e-9)
        self.sample_every = span / max(1, samples)
        self.next_sample = 0.0
        self.best_util = -1.0
        self.heatmap: NumaHeatmap | None = None
        self.retries: dict[str, int] = {}
        #: per node: (its version, per sampled resource (allocatable anywhere, free in all, free
        #: on its fullest-free NUMA node)) when last sampled: unchanged nodes are not read again
        self._frag: list[tuple[int, tuple[tuple[bool, int, int], ...]] | None] = [None] * len(self.cluster.nodes)
        cols = self.cluster.col
        self.cpu_col = cols["cpu"]
        self.gpu_col = cols.get(GPU)

    def push(self, t: float, kind: int, item: Any) -> None:
        self.seq += 1
        heapq.heappush(self.events, (t, kind, self.seq, item))

    def run(self) -> None:
        for a in self.workload:
            self.push(a.time_s, ARRIVE, (a.pod, a.duration_s, a.departure_s))
        total = len(self.workload)
        done = 0
        now: float | None = None
        while self.events:
            t = self.events[0][0]
            if now is not None and t > now and now >= self.next_sample:
                self._sample(now)  # the state at the end of instant `now`
                self.next_sample = now + self.sample_every
            t, kind, _, item = heapq.heappop(self.events)
            now = t
            if kind == DEPART:
                self._depart(t, item)
            elif kind == EXPIRE:
                self._expire(t, item)
            else:
                pod, duration, deadline = item
                if kind == ARRIVE:
                    self.rec.record_arrived(self.name, t, pod.key)
                self._try(t, pod, duration, deadline)
                if kind == ARRIVE:
                    done += 1
                    if self.progress and (done % 200 == 0 or done == total):
                        self.progress(self.name, done, total)
        self.end_s = now if now is not None else 0.0
        if self.last_sample != self.end_s or now is None:
            self._sample(self.end_s)  # the real end: after the last departure
        self.rec.set_cpu_time(self.name, self.sched_cpu)

    def _try(self, t: float, pod: Pod, duration: float | None, deadline: float | None) -> bool:
        c0 = time.thread_time()
        t0 = time.perf_counter()
        out = self.sched.schedule(pod)
        dt = time.perf_counter() - t0
        self.sched_cpu += time.thread_time() - c0
        if out.admitted and out.placement is not None and out.result is not None:
            node = self.cluster.nodes[out.placement.node].node
            containers, used = _placement(node, pod)
            aligned = used <= max(self._minimal_numa_nodes(node, pod), used if used == 0 else 1)
            self.rec.record_placed(self.name, t, pod.key, containers, aligned,
                                   node=out.placement.name, latency_s=dt, numa_nodes=used,
                                   release=node.rules.release.release.name)
            self.running[pod.uid] = (out.placement.node, pod)
            if self.keep:
                self.placements.append(("bind", out.placement.name, pod))
            if duration is not None:
                self.push(t + duration, DEPART, pod.uid)
            return True
        if out.placement is not None:  # bound, then refused by the node
            release = self.cluster.nodes[out.placement.node].node.rules.release.release.name
            self.rec.record_rejected(self.name, t, pod.key, out.reason or "UnexpectedAdmissionError",
                                     latency_s=dt, release=release)
            if self.recreate and out.reason:
                n = self.retries.get(pod.key, 0)
                if n < self.max_retries:
                    self.retries[pod.key] = n + 1
                    self.rec.record_retry(self.name, t, pod.key)
                    again = pod.replace(uid=f"{pod.uid}-r{n + 1}")
                    self.push(t + self.delay, RETRY, (again, duration, deadline))
            return False
        self.rec.record_pending(self.name, t, pod.key, latency_s=dt, reason=out.reason)
        if pod.uid not in self.pending_uids:
            self.pending.append((pod, duration, deadline))
            self.pending_uids.add(pod.uid)
            if deadline is not None and pod.uid not in self.expiring:
                self.expiring.add(pod.uid)
                self.push(deadline, EXPIRE, pod)
        return False

    def _minimal_numa_nodes(self, node: Node, pod: Pod) -> int:
        """:func:`minimal_numa_nodes`, per machine and pod shape: it reads capacities (the
        machine's, and the memory manager's allocatable, fixed at start-up), not the state."""
        key = (id(node.machine), pod.shape)
        hit = self._minimal.get(key)
        if hit is None:
            hit = self._minimal[key] = minimal_numa_nodes(node, pod)
        return hit

    def _depart(self, t: float, uid: str) -> None:
        entry = self.running.pop(uid, None)
        if entry is None:
            return
        node, pod = entry
        self.sched.release(pod, node)
        if self.keep:
            self.placements.append(("release", self.cluster.nodes[node].name, pod))
        self.rec.record_departed(self.name, t, pod.key)
        tried = 0
        while tried < self.retry_batch and self.pending:
            pod2, duration, deadline = self.pending.popleft()
            if pod2.uid not in self.pending_uids:
                continue  # expired while it waited (see _expire)
            tried += 1
            self.pending_uids.discard(pod2.uid)
            if deadline is not None and deadline <= t:
                self.rec.record_dropped(self.name, t, pod2.key)
                continue
            remaining = None if deadline is None or duration is None else deadline - t
            self._try(t, pod2, remaining if remaining is not None else duration, deadline)

    def _expire(self, t: float, pod: Pod) -> None:
        """A pending pod's departure time has come: it never ran, drop it (its queue entry
        is skipped when reached)."""
        self.expiring.discard(pod.uid)
        if pod.uid in self.pending_uids:
            self.pending_uids.discard(pod.uid)
            self.rec.record_dropped(self.name, t, pod.key)

    def _sample(self, t: float) -> None:
        self.last_sample = t
        c = self.cluster
        alloc = c.allocatable.sum(axis=0)
        used = c.requested.sum(axis=0)
        util = {"cpu": float(used[self.cpu_col] / alloc[self.cpu_col]) if alloc[self.cpu_col] else 0.0}
        if self.gpu_col is not None and alloc[self.gpu_col]:
            util["gpu"] = float(used[self.gpu_col] / alloc[self.gpu_col])
        self.rec.sample_utilisation(self.name, t, util)
        frag = self._fragmentation()
        self.rec.sample_fragmentation(self.name, t, frag)
        score = util.get("gpu", util["cpu"]) + util["cpu"]
        if score > self.best_util and c.nodes:
            self.best_util = score
            busiest = int((c.requested[:, self.cpu_col] / c.allocatable[:, self.cpu_col].clip(min=1)).argmax())
            cn = c.nodes[busiest]
            self.heatmap = NumaHeatmap.from_zones(cn.name, self.name, numa_amounts(cn.node), time_s=t)

    def _fragmentation(self) -> dict[str, float]:
        """Per resource the cluster has: the share of its free amount that no single NUMA
        node holds (0.0 while nothing is free: nothing is stranded), so every series has a
        sample at every sampling time."""
        resources = ("cpu", GPU)
        free_total = dict.fromkeys(resources, 0)
        usable = dict.fromkeys(resources, 0)
        present: set[str] = set()
        versions = self.cluster.version
        for i, cn in enumerate(self.cluster.nodes):
            version = int(versions[i])
            hit = self._frag[i]
            if hit is None or hit[0] != version:
                parts = []
                for r in resources:
                    allocatable, frees = numa_available(cn.node, r)
                    parts.append((allocatable, sum(frees), max(frees, default=0)))
                hit = self._frag[i] = (version, tuple(parts))
            for r, (allocatable, total, best) in zip(resources, hit[1], strict=True):
                if allocatable:
                    present.add(r)
                free_total[r] += total
                usable[r] += best
        return {("gpu" if r == GPU else r): (1.0 - usable[r] / free_total[r] if free_total[r] else 0.0)
                for r in sorted(present)}


def check_profiles(names: Sequence[str]) -> list[str]:
    """Profile names, stripped: none empty, none twice, all known (``InputError`` naming
    ``profiles`` otherwise); at least one."""
    out = [n.strip() for n in names]
    if not any(out):
        raise InputError(f"no profile given (known: {', '.join(PROFILES)})", "profiles")
    seen: set[str] = set()
    for i, name in enumerate(out):
        if not name:
            raise InputError(f"empty profile name at position {i + 1} of {','.join(names)!r}",
                             "profiles")
        if name in seen:
            raise InputError(f"profile {name!r} given twice", "profiles")
        seen.add(name)
        get_profile(name)
    return out


def _check_unique_pods(workload: Workload) -> None:
    """Pods are tracked by key and uid: two arrivals of one pod would be counted wrongly."""
    keys: set[str] = set()
    uids: set[str] = set()
    for i, a in enumerate(workload):
        if a.pod.key in keys or a.pod.uid in uids:
            raise InputError(f"pod {a.pod.key} (uid {a.pod.uid}) arrives twice", f"workload[{i}]")
        keys.add(a.pod.key)
        uids.add(a.pod.uid)


def simulate(
    nodes: Sequence[tuple[str, Machine]],
    workload: Workload,
    profiles: Sequence[str],
    *,
    recreate: bool = False,
    max_retries: int = 5,
    recreate_delay_s: float = 10.0,
    retry_batch: int = 16,
    samples: int = 24,
    keep_placements: bool = False,
    progress: Progress | None = None,
) -> SimResult:
    """Replay ``workload`` on ``nodes`` once per profile (see the module docstring)."""
    profiles = check_profiles(profiles)  # before any work
    _check_unique_pods(workload)
    rec = MetricsRecorder(profiles)
    result = SimResult(rec)
    for p in profiles:
        run = _Run(nodes, workload, p, rec, recreate=recreate, max_retries=max_retries,
                   recreate_delay_s=recreate_delay_s, retry_batch=retry_batch, samples=samples,
                   keep=keep_placements, progress=progress)
        run.run()
        if run.heatmap is not None:
            result.heatmaps.append(run.heatmap)
        result.placements[p] = run.placements
        result.clusters[p] = run.cluster
    return result
