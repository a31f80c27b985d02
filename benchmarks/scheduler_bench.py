"""Scheduling throughput, numalign next to the topology-blind ``default`` profile.

Every pod goes through one full scheduling cycle (fit, score, NUMA filter, reserve, bind, and
the node's own admission); pods stay (no departures), so the cluster fills up. The cells:

* 5,000 nodes x 8 NUMA, 10,000 mixed pods - the headline (half the nodes ``single-numa-node``,
  half ``restricted`` with pod scope); the same cluster at 500 nodes (1,000 pods) and 20,000
  nodes (2,000 pods: a cycle there costs ~4x one at 5,000 nodes);
* 5,000 nodes x 2 NUMA (one per socket, the 8-NUMA node's resources), 5,000 pods - where NUMA
  awareness buys least;
* 1,000 nodes x 64 NUMA (2 CPU cores, 8Gi per NUMA node, 8 GPUs on nodes 0, 8, ... 56), 300
  pods, all nodes ``restricted``, then all ``best-effort`` (max-allowable-numa-nodes 64).

Pod counts are kept small where a cycle is slow so that ``make bench`` stays within minutes;
the workload is the same synthetic mix (seed 7) scaled to the cell's cluster.

Each cell runs each profile in a fresh process (``python -m benchmarks.scheduler_bench --cell
NAME --profile P``): :data:`RUNS` runs on a new cluster each, CPU time of the scheduling loop
(``time.process_time``; cluster and workload set-up excluded), reported as pods/s of the best
and the median run; ``numalign / default`` is the ratio of the medians of the same ``make
bench``. Peak RSS is the ``getrusage`` ``ru_maxrss`` of that process (interpreter, cluster,
workload and the runs), so it compares the two profiles on the same cell. kube-scheduler's CI
floor for its basic 5,000-node workload (no NUMA awareness) is 680-810 pods/s.

``python -m benchmarks.scheduler_bench [CELL ...]`` runs some cells only (names as printed).
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from typing import Any

from benchmarks.timing import best_median, child_json, median_ms, p99_ms, peak_rss_mib
from numalign.scheduler import Cluster, Scheduler, get_profile
from numalign.sim.cluster import load_cluster
from numalign.sim.sources import parse_workload_spec

NODES = 5000
PODS = 10_000
RUNS = 3
PROFILES = ("default", "numalign")

_KUBELET = {"topologyManagerPolicy": "single-numa-node", "cpuManagerPolicy": "static",
            "reservedSystemCPUs": "0,64", "memoryManagerPolicy": "Static",
            "systemReserved": {"memory": "1Gi"},
            "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1124Mi"}}]}


def _machine8() -> dict[str, Any]:
    return {"name": "numa8",
            "shape": {"sockets": 2, "numaPerSocket": 4, "coresPerNuma": 8, "threadsPerCore": 2,
                      "memoryPerNuma": "64Gi", "hugepages1GiPerNuma": "8Gi", "gpusPerNuma": 1,
                      "devicesPerNuma": {"rdma/hca": 1}},
            "kubelet": dict(_KUBELET)}


def _machine2() -> dict[str, Any]:
    """The 8-NUMA node's resources on 2 NUMA nodes (one per socket)."""
    return {"name": "numa2",
            "shape": {"sockets": 2, "numaPerSocket": 1, "coresPerNuma": 32, "threadsPerCore": 2,
                      "memoryPerNuma": "256Gi", "hugepages1GiPerNuma": "32Gi", "gpusPerNuma": 4,
                      "devicesPerNuma": {"rdma/hca": 4}},
            "kubelet": dict(_KUBELET)}


def _machine64(policy: str) -> dict[str, Any]:
    """64 NUMA nodes of 2 cores x 2 threads and 8Gi (like the 256ia64 capture), 8 GPUs and 8
    HCAs on every eighth node."""
    devices = [{"resource": r, "id": f"{p}{i}", "numa": [8 * i]}
               for r, p in (("nvidia.com/gpu", "gpu"), ("rdma/hca", "hca")) for i in range(8)]
    return {"name": f"numa64-{policy}",
            "shape": {"sockets": 2, "numaPerSocket": 32, "coresPerNuma": 2, "threadsPerCore": 2,
                      "memoryPerNuma": "8Gi", "hugepages1GiPerNuma": "1Gi"},
            "devices": devices,
            "kubelet": {**_KUBELET, "topologyManagerPolicy": policy, "reservedSystemCPUs": "0,128",
                        "topologyManagerPolicyOptions": {"max-allowable-numa-nodes": "64"}}}


def template(nodes: int, numa: int = 8, policy: str = "mixed") -> dict[str, Any]:
    """A cluster template of ``nodes`` nodes with ``numa`` (2, 8 or 64) NUMA nodes each;
    ``policy`` "mixed" = half ``single-numa-node``, half ``restricted`` with pod scope (the
    default, and the headline cluster), else every node's topology manager policy."""
    machine = {2: _machine2, 8: _machine8}[numa]() if numa != 64 else _machine64(
        "restricted" if policy == "mixed" else policy)
    if policy != "mixed":
        machine["kubelet"]["topologyManagerPolicy"] = policy
        return {"nodes": [{"machine": machine, "count": nodes, "namePrefix": policy[:3]}]}
    restricted = {**machine, "name": f"{machine['name']}-restricted",
                  "kubelet": {**machine["kubelet"], "topologyManagerPolicy": "restricted",
                              "topologyManagerScope": "pod"}}
    groups = [
        {"machine": machine, "count": nodes // 2, "namePrefix": "snn"},
        {"machine": restricted, "count": nodes - nodes // 2, "namePrefix": "res"},
    ]
    return {"nodes": [g for g in groups if g["count"]]}  # one node: no empty group


@dataclass(frozen=True)
class Cell:
    name: str
    nodes: int
    numa: int
    pods: int
    policy: str = "mixed"
    #: profiles measured after default and numalign (ratio printed against numalign's median)
    extra: tuple[str, ...] = ()


CELLS = (
    Cell("5000x8", 5000, 8, PODS, extra=("volcano",)),
    Cell("500x8", 500, 8, 1000),
    Cell("20000x8", 20_000, 8, 2000),
    Cell("5000x2", 5000, 2, 5000),
    Cell("1000x64-restricted", 1000, 64, 300, "restricted"),
    Cell("1000x64-best-effort", 1000, 64, 300, "best-effort"),
)


def run(profile: str, nodes: Any, pods: Any) -> tuple[list[float], int, int, int, float]:
    """Schedule ``pods`` on a new cluster of ``nodes`` with ``profile``: (wall seconds per pod,
    scheduled, TopologyAffinityErrors, pending, CPU seconds of the loop)."""
    cluster = Cluster(nodes)
    sched = Scheduler(cluster, get_profile(profile))
    times: list[float] = []
    scheduled = errors = pending = 0
    start = time.process_time()
    for pod in pods:
        t0 = time.perf_counter()
        out = sched.schedule(pod)
        times.append(time.perf_counter() - t0)
        if out.admitted:
            scheduled += 1
        elif out.placement is not None:
            errors += out.reason == "TopologyAffinityError"
        else:
            pending += 1
    cpu = time.process_time() - start
    return times, scheduled, errors, pending, cpu


def measure_cell(cell: Cell, profile: str, runs: int = RUNS) -> dict[str, Any]:
    """``runs`` runs of ``profile`` on ``cell`` in this process (the child's job)."""
    nodes = load_cluster(template(cell.nodes, cell.numa, cell.policy), "bench")
    wl = parse_workload_spec(f"synthetic:count={cell.pods},seed=7", None, cluster=nodes)
    pods = [a.pod for a in wl]
    cpus: list[float] = []
    outcome: tuple[int, int, int] | None = None
    latencies: list[float] = []
    for _ in range(runs):
        times, ok, errors, pending, cpu = run(profile, nodes, pods)
        cpus.append(cpu)
        outcome = outcome or (ok, errors, pending)
        latencies = times
    assert outcome is not None
    return {"pods": len(pods), "cpu": cpus, "scheduled": outcome[0], "errors": outcome[1],
            "pending": outcome[2], "p50_ms": median_ms(latencies), "p99_ms": p99_ms(latencies),
            "rss_mib": peak_rss_mib()}


def _child(cell: Cell, profile: str) -> dict[str, Any]:
    return child_json("benchmarks.scheduler_bench", "--cell", cell.name, "--profile", profile)


def main(names: list[str] | None = None) -> None:
    cells = [c for c in CELLS if not names or c.name in names]
    print(f"scheduler: pods/s in CPU time (best / median of {RUNS} runs, one process per cell "
          "and profile); p50/p99 = wall ms per pod of the last run; RSS = peak ru_maxrss")
    print(f"  {'cell':<20} {'pods':>6} {'profile':<9} {'pods/s best':>11} {'median':>8} "
          f"{'p50 ms':>7} {'p99 ms':>7} {'sched':>6} {'TAE':>5} {'pend':>5} {'RSS MiB':>8} "
          f"{'numalign/default':>16}")
    for cell in cells:
        medians: dict[str, float] = {}
        for profile in PROFILES + cell.extra:
            t0 = time.perf_counter()
            r = _child(cell, profile)
            best, med = best_median(r["cpu"])
            medians[profile] = r["pods"] / med
            ratio = ""
            if profile == "numalign":
                ratio = f"{medians['numalign'] / medians['default']:.2f}"
            elif profile != "default":  # an extra profile: its time per pod against numalign's
                ratio = f"{profile}: {medians['numalign'] / medians[profile]:.2f}x numalign's time"
            print(f"  {cell.name:<20} {r['pods']:>6} {profile:<9} {r['pods'] / best:>11,.0f} "
                  f"{r['pods'] / med:>8,.0f} {r['p50_ms']:>7.3f} {r['p99_ms']:>7.2f} "
                  f"{r['scheduled']:>6} {r['errors']:>5} {r['pending']:>5} {r['rss_mib']:>8.0f} "
                  f"{ratio:>16}   ({time.perf_counter() - t0:.0f} s)", flush=True)
    print("  targets: numalign >= 2,000 pods/s at 5000x8 and >= 1,000 at 20000x8 with 0 "
          "TopologyAffinityErrors (TAE); numalign/default >= 0.8 (at most 1.25x the default's "
          "time per pod) at 5000x8 and 5000x2; volcano within 1.5x numalign's time per pod")


def _cli(argv: list[str]) -> None:
    if argv[:1] == ["--cell"]:  # the child of one (cell, profile)
        cell = next(c for c in CELLS if c.name == argv[1])
        profile = argv[3] if argv[2:3] == ["--profile"] else "numalign"
        print(json.dumps(measure_cell(cell, profile)))
        return
    unknown = [a for a in argv if a not in {c.name for c in CELLS}]
    if unknown:
        raise SystemExit(f"unknown cell(s) {unknown}; cells: {[c.name for c in CELLS]}")
    main(argv or None)


if __name__ == "__main__":
    _cli(sys.argv[1:])
