"""The small 2-NUMA machine (2 sockets x 4 cores x 2 threads, Static memory manager, one GPU
per NUMA node) that the scheduler speed tests build their clusters from."""

from __future__ import annotations

from typing import Any


def numa2_template(policy: str, count: int, snn_count: int, prefix: str) -> dict[str, Any]:
    """``count`` nodes of the machine under topology manager ``policy`` (name prefix
    ``prefix``), then ``snn_count`` single-numa-node ones (prefix ``snn``)."""
    machine = {
        "name": "numa2",
        "shape": {"sockets": 2, "numaPerSocket": 1, "coresPerNuma": 4, "threadsPerCore": 2,
                  "memoryPerNuma": "32Gi", "hugepages1GiPerNuma": "4Gi", "gpusPerNuma": 1},
        "kubelet": {"topologyManagerPolicy": policy, "cpuManagerPolicy": "static",
                    "reservedSystemCPUs": "0", "memoryManagerPolicy": "Static",
                    "systemReserved": {"memory": "1Gi"},
                    "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1124Mi"}}]},
    }
    snn = {**machine, "name": "numa2-snn",
           "kubelet": {**machine["kubelet"], "topologyManagerPolicy": "single-numa-node"}}
    return {"nodes": [{"machine": machine, "count": count, "namePrefix": prefix},
                      {"machine": snn, "count": snn_count, "namePrefix": "snn"}]}
