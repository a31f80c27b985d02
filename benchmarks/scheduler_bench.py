"""Scheduling throughput: 5,000 nodes with 8 NUMA nodes each, 10,000 mixed pods.

Every pod goes through one full scheduling cycle (fit, score, NUMA filter, reserve, bind, and
the node's own admission). The topology-blind ``default`` profile runs on the same cluster and
workload in the same process as the reference. kube-scheduler's CI floor for its basic
5,000-node workload (no NUMA awareness) is 680-810 pods/s.
"""

from __future__ import annotations

import time
from typing import Any

from benchmarks.timing import median_ms, p99_ms
from numalign.scheduler import Cluster, Scheduler, get_profile
from numalign.sim.cluster import load_cluster
from numalign.sim.sources import parse_workload_spec

NODES = 5000
PODS = 10_000


def template(nodes: int) -> dict[str, Any]:
    machine = {
        "name": "numa8",
        "shape": {"sockets": 2, "numaPerSocket": 4, "coresPerNuma": 8, "threadsPerCore": 2,
                  "memoryPerNuma": "64Gi", "hugepages1GiPerNuma": "8Gi", "gpusPerNuma": 1,
                  "devicesPerNuma": {"rdma/hca": 1}},
        "kubelet": {"topologyManagerPolicy": "single-numa-node", "cpuManagerPolicy": "static",
                    "reservedSystemCPUs": "0,64", "memoryManagerPolicy": "Static",
                    "systemReserved": {"memory": "1Gi"},
                    "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1124Mi"}}]},
    }
    restricted = {**machine, "name": "numa8-restricted",
                  "kubelet": {**machine["kubelet"], "topologyManagerPolicy": "restricted",  # type: ignore[dict-item]
                              "topologyManagerScope": "pod"}}
    return {"nodes": [
        {"machine": machine, "count": nodes // 2, "namePrefix": "snn"},
        {"machine": restricted, "count": nodes - nodes // 2, "namePrefix": "res"},
    ]}


def run(profile: str, nodes: Any, pods: Any) -> tuple[list[float], int, int, int, float]:
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


def main() -> None:
    t0 = time.perf_counter()
    nodes = load_cluster(template(NODES), "bench")
    wl = parse_workload_spec(f"synthetic:count={PODS},seed=7", None, cluster=nodes)
    pods = [a.pod for a in wl]
    print(f"scheduler: {len(nodes)} nodes x 8 NUMA, {len(pods)} mixed pods "
          f"(setup {time.perf_counter() - t0:.1f} s; one core, no departures)")
    results = {}
    for profile in ("default", "numalign"):
        times, ok, errors, pending, cpu = run(profile, nodes, pods)
        rate = len(pods) / cpu
        results[profile] = rate
        print(f"  {profile:<9} {rate:8,.0f} pods/s (CPU time)  p50 {median_ms(times):6.3f} ms  "
              f"p99 {p99_ms(times):6.3f} ms  scheduled {ok}  topology_affinity_errors {errors}  pending {pending}")
    print(f"  numalign / default throughput: {results['numalign'] / results['default']:.2f}  "
          f"(target: numalign >= 1,000 pods/s with 0 topology_affinity_errors)")


if __name__ == "__main__":
    main()
