"""Replay a workload on a modelled cluster under each scheduler profile.

Discrete events in simulated time: arrivals (from the workload), departures (a running pod
leaves ``duration_s`` after it started) and controller retries (``recreate``). Each profile
gets a fresh cluster; the node engines play the kubelets, so a pod bound by a topology-blind
profile can be rejected by its node exactly as Kubernetes would (``TopologyAffinityError``).

* A pod no node accepts stays **pending**; pending pods are tried again, oldest first, when a
  pod departs (at most ``retry_batch`` per departure, like the scheduler's queue moving
  unschedulable pods back on cluster events). A pending pod whose own departure time passes
  is dropped.
* A pod **rejected** by its node fails, as in Kubernetes. With ``recreate`` its ReplicaSet
  recreates it ``recreate_delay_s`` later, at most ``max_retries`` times (counted).
* **aligned**: every NUMA-bound resource of the pod (exclusive CPUs, memory blocks, devices)
  lies on at most as many NUMA nodes as the pod needs at minimum on that machine type (the
  fewest NUMA nodes whose capacity holds each request). Pods with nothing NUMA-bound count as
  aligned (nothing of theirs is split).
* **fragmentation** (sampled): per resource, the share of free capacity that a single-NUMA
  request cannot use: ``1 - sum over nodes of (largest free amount on one NUMA node) / total
  free``.
"""

from __future__ import annotations

import heapq
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from numalign.bitmask import mask_of
from numalign.machine.model import Machine
from numalign.node.accounting import numa_amounts
from numalign.node.admission import PodResult
from numalign.pods import Pod, QOSClass, pod_guaranteed_cpus
from numalign.quantity import hugepage_resource_name
from numalign.scheduler.cluster import Cluster
from numalign.scheduler.prefilter import fewest_nodes
from numalign.scheduler.profiles import get_profile
from numalign.scheduler.scheduler import Scheduler
from numalign.sim.metrics import ContainerPlacement, MetricsRecorder
from numalign.sim.report import NumaHeatmap
from numalign.sim.workloads import Workload

Progress = Callable[[str, int, int], None]

ARRIVE, DEPART, RETRY = 1, 0, 2  # departures first at equal times: capacity frees up first
GPU = "nvidia.com/gpu"


@dataclass
class SimResult:
    recorder: MetricsRecorder
    heatmaps: list[NumaHeatmap] = field(default_factory=list)
    #: profile -> [("bind" | "release", node name, pod)] in event order (``keep_placements``)
    placements: dict[str, list[tuple[str, str, Pod]]] = field(default_factory=dict)
    clusters: dict[str, Cluster] = field(default_factory=dict)


def minimal_numa_nodes(machine: Machine, pod: Pod) -> int:
    """Fewest NUMA nodes whose capacity holds each NUMA-bound request of the pod."""
    need: dict[str, int] = {}
    cpus = pod_guaranteed_cpus(pod)
    if cpus and machine.kubelet.cpu_manager_policy == "static":
        need["cpu"] = cpus
    from numalign.pods import effective_pod_limits, effective_pod_requests

    if pod.qos is QOSClass.GUARANTEED and machine.kubelet.memory_manager_policy == "Static":
        for r, v in effective_pod_requests(pod).items():
            if r == "memory" or r.startswith("hugepages-"):
                need[r] = v
    for r, v in effective_pod_limits(pod).items():
        if any(d.resource == r and d.numa for d in machine.devices):
            need[r] = v
    if not need:
        return 0
    return max(
        fewest_nodes([_numa_capacity(machine, n, r) for n in machine.node_ids], amount)
        for r, amount in need.items()
    )


def _numa_capacity(machine: Machine, numa: int, resource: str) -> int:
    if resource == "cpu":
        return len(machine.cpus_by_numa.get(numa, ()))
    node = machine.node_by_id[numa]
    if resource == "memory":
        return node.memory
    if resource.startswith("hugepages-"):
        return sum(v for size, v in node.hugepages.items() if hugepage_resource_name(size) == resource)
    return sum(1 for d in machine.devices if d.resource == resource and d.numa[:1] == (numa,))


def _placement(machine: Machine, pod: Pod, result: PodResult) -> tuple[list[ContainerPlacement], int]:
    """Containers' NUMA masks as recorded, and the NUMA nodes the pod's bound resources use."""
    used: set[int] = set()
    out: list[ContainerPlacement] = []
    devs = {d.id: d for d in machine.devices}
    for c in result.containers:
        nodes = {machine.cpu_by_id[x].numa for x in c.cpus}
        for key in c.memory:
            nodes.update(int(x) for x in key.split(","))
        for ids in c.devices.values():
            for i in ids:
                nodes.update(devs[i].numa[:1])
        used |= nodes
        out.append(ContainerPlacement(c.name, mask_of(nodes) if nodes else None))
    return out, len(used)


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
        self.running: dict[str, tuple[int, Pod]] = {}
        self.sched_time = 0.0
        span = max(workload.span_s, 1e-9)
        self.sample_every = span / max(1, samples)
        self.next_sample = 0.0
        self.best_util = -1.0
        self.heatmap: NumaHeatmap | None = None
        self.retries: dict[str, int] = {}
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
        while self.events:
            t, kind, _, item = heapq.heappop(self.events)
            if kind == DEPART:
                self._depart(t, item)
            else:
                pod, duration, deadline = item
                self._try(t, pod, duration, deadline)
                if kind == ARRIVE:
                    done += 1
                    if self.progress and (done % 200 == 0 or done == total):
                        self.progress(self.name, done, total)
            if t >= self.next_sample:
                self._sample(t)
                self.next_sample = t + self.sample_every
        self._sample(max((a.time_s for a in self.workload), default=0.0))
        self.rec.set_wall_time(self.name, self.sched_time)

    def _try(self, t: float, pod: Pod, duration: float | None, deadline: float | None) -> bool:
        t0 = time.perf_counter()
        out = self.sched.schedule(pod)
        dt = time.perf_counter() - t0
        self.sched_time += dt
        if out.admitted and out.placement is not None and out.result is not None:
            machine = self.cluster.nodes[out.placement.node].machine
            containers, used = _placement(machine, pod, out.result)
            aligned = used <= max(minimal_numa_nodes(machine, pod), used if used == 0 else 1)
            self.rec.record_placed(self.name, t, pod.key, containers, aligned,
                                   node=out.placement.name, latency_s=dt, numa_nodes=used)
            self.running[pod.uid] = (out.placement.node, pod)
            if self.keep:
                self.placements.append(("bind", out.placement.name, pod))
            if duration is not None:
                self.push(t + duration, DEPART, pod.uid)
            return True
        if out.placement is not None:  # bound, then refused by the node
            self.rec.record_rejected(self.name, t, pod.key, out.reason or "UnexpectedAdmissionError", latency_s=dt)
            if self.recreate and out.reason:
                n = self.retries.get(pod.key, 0)
                if n < self.max_retries:
                    self.retries[pod.key] = n + 1
                    self.rec.record_retry(self.name, t, pod.key)
                    again = replace(pod, uid=f"{pod.uid}-r{n + 1}")
                    self.push(t + self.delay, RETRY, (again, duration, deadline))
            return False
        self.rec.record_pending(self.name, t, pod.key, latency_s=dt)
        if pod.uid not in self.pending_uids:
            self.pending.append((pod, duration, deadline))
            self.pending_uids.add(pod.uid)
        return False

    def _depart(self, t: float, uid: str) -> None:
        entry = self.running.pop(uid, None)
        if entry is None:
            return
        node, pod = entry
        self.sched.release(pod, node)
        if self.keep:
            self.placements.append(("release", self.cluster.nodes[node].name, pod))
        self.rec.record_departed(self.name, t, pod.key)
        for _ in range(min(self.retry_batch, len(self.pending))):
            pod2, duration, deadline = self.pending.popleft()
            self.pending_uids.discard(pod2.uid)
            if deadline is not None and deadline <= t:
                self.rec.record_dropped(self.name, t, pod2.key)
                continue
            remaining = None if deadline is None or duration is None else deadline - t
            self._try(t, pod2, remaining if remaining is not None else duration, deadline)

    def _sample(self, t: float) -> None:
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
        free_total: dict[str, int] = {}
        usable: dict[str, int] = {}
        for cn in self.cluster.nodes:
            zones = numa_amounts(cn.node)
            for r in ("cpu", GPU):
                frees = [z.available.get(r, 0) for z in zones.values()]
                free_total[r] = free_total.get(r, 0) + sum(frees)
                usable[r] = usable.get(r, 0) + max(frees, default=0)
        return {("gpu" if r == GPU else r): 1.0 - usable[r] / f for r, f in free_total.items() if f > 0}


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
    for p in profiles:
        get_profile(p)  # validate names before any work
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
