"""Node admission latency: a Guaranteed CPU + memory + 1 GPU pod, all providers on.

Machines: 8 NUMA nodes on 2 sockets (the kubelet's limit) and 64 NUMA nodes (which the
kubelet refuses without max-allowable-numa-nodes, and could not handle with it: 2^64 masks).
Each sample admits one pod on a node that is filling up (pods stay, and the node is reset when
it is full), so hints are computed against realistic partially used states.
The reference is the same admission with the kubelet's product-fold merge (8 NUMA only).
"""

from __future__ import annotations

import time
from typing import Any

from benchmarks.timing import median_ms, p99_ms
from numalign import merge as merge_module
from numalign._reference import product_fold
from numalign.hints import HintList, TopologyHint
from numalign.machine.spec import load_machine
from numalign.node.admission import Node
from numalign.pods import Container, ContainerKind, Pod, QOSClass

GI = 1 << 30


def machine(numa_per_socket: int, cores: int, policy: str) -> Any:
    nodes = 2 * numa_per_socket
    return load_machine({
        "name": f"bench-{nodes}n",
        "shape": {"sockets": 2, "numaPerSocket": numa_per_socket, "coresPerNuma": cores,
                  "threadsPerCore": 2, "memoryPerNuma": "64Gi", "gpusPerNuma": 1},
        "kubelet": {
            "topologyManagerPolicy": policy,
            "topologyManagerPolicyOptions": {"max-allowable-numa-nodes": str(max(8, nodes))},
            "cpuManagerPolicy": "static", "reservedSystemCPUs": "0",
            "memoryManagerPolicy": "Static", "systemReserved": {"memory": "1Gi"},
            "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1124Mi"}}],
        },
    })


def pod(i: int) -> Pod:
    r = {"cpu": 4000, "memory": 4 * GI, "nvidia.com/gpu": 1}
    return Pod("bench", f"p{i}", f"u{i}", QOSClass.GUARANTEED, (Container("c", ContainerKind.APP, r, r),))


def run(m: Any, samples: int) -> list[float]:
    node = Node(m)
    times: list[float] = []
    i = 0
    while len(times) < samples:
        p = pod(i)
        i += 1
        t0 = time.perf_counter()
        res = node.admit(p)
        times.append(time.perf_counter() - t0)
        if not res.admitted:
            node = Node(m)
    return times


def with_product_fold(m: Any, samples: int) -> list[float]:
    """The same admissions with the kubelet's literal fold as the merge."""
    saved = merge_module.merge_lists

    def fold(lists: list[HintList], default: int, fit: merge_module.FitOrder = merge_module.NARROWEST) -> TopologyHint:
        return product_fold(lists, default, fit)

    import numalign.policies as policies

    policies.merge_lists = fold  # type: ignore[assignment]
    try:
        return run(m, samples)
    finally:
        policies.merge_lists = saved


def main() -> None:
    print("admission: Guaranteed 4 CPU + 4Gi + 1 GPU pod (device, CPU, memory managers)")
    for label, m, n in (
        ("8 NUMA / 2 sockets, restricted", machine(4, 8, "restricted"), 400),
        ("8 NUMA / 2 sockets, single-numa-node", machine(4, 8, "single-numa-node"), 400),
        ("64 NUMA / 2 sockets, restricted", machine(32, 2, "restricted"), 200),
        ("64 NUMA / 2 sockets, single-numa-node", machine(32, 2, "single-numa-node"), 200),
    ):
        t = run(m, n)
        print(f"  {label:<40} median {median_ms(t):7.3f} ms   p99 {p99_ms(t):7.3f} ms"
              f"   (target p99 < {5 if len(m.numa_nodes) <= 8 else 50} ms)")
    ref = with_product_fold(machine(4, 8, "restricted"), 60)
    eng = run(machine(4, 8, "restricted"), 60)
    print(f"  reference, 8 NUMA restricted with the kubelet product fold: median {median_ms(ref):.3f} ms"
          f"  -> numalign {median_ms(ref) / median_ms(eng):.1f}x faster")


if __name__ == "__main__":
    main()
