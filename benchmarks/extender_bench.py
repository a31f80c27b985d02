"""Extender load on loopback: 20,000 filter calls over 100 nodes, as kube-scheduler sends them.

The extender runs as a real HTTP server (``ThreadingHTTPServer`` on 127.0.0.1) in this
process; clients are keep-alive ``http.client`` connections, one per thread, so client and
server share the interpreter (and the GIL): the numbers are a floor for a separate process.

* ``warm``: 20,000 ``/filter`` calls (``nodeCacheCapable``: 100 NodeNames each), pods of 8
  shapes with fresh names and uids - a Deployment's replicas; per (node, state, shape) the
  engine's answer is cached, so this measures the service path.
* ``warm x4``: the same with 4 concurrent connections.
* ``cold``: 200 calls, each a pod shape never seen: the engine (``Node.plan``) runs on every
  one of the 100 nodes.
* ``nodes form``: 2,000 calls with a full v1 NodeList of 100 nodes (``nodeCacheCapable: false``).

Run: ``python -m benchmarks extender_bench`` (or ``python benchmarks/extender_bench.py``).
"""

from __future__ import annotations

import http.client
import io
import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.timing import p99_ms
from numalign.kube.extender import ExtenderCore, ExtenderServer, serve_in_thread
from numalign.kube.topology import build_nrt
from numalign.machine.spec import load_machine
from numalign.node.admission import Node
from numalign.pods import parse_pods

NODES = 100
CALLS = 20_000

MACHINE = {
    "name": "numa8",
    "shape": {"sockets": 2, "numaPerSocket": 4, "coresPerNuma": 8, "threadsPerCore": 2,
              "memoryPerNuma": "64Gi", "hugepages1GiPerNuma": "8Gi", "gpusPerNuma": 1},
    "kubelet": {"topologyManagerPolicy": "single-numa-node", "topologyManagerScope": "pod",
                "cpuManagerPolicy": "static", "reservedSystemCPUs": "0,64",
                "memoryManagerPolicy": "Static", "systemReserved": {"memory": "1Gi"},
                "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1124Mi"}}]},
}


def kube_pod(name: str, cpu: int, memory: str, gpus: int = 0) -> dict[str, Any]:
    limits: dict[str, str] = {"cpu": str(cpu), "memory": memory}
    if gpus:
        limits["nvidia.com/gpu"] = str(gpus)
    return {
        "metadata": {"name": name, "namespace": "bench", "uid": f"uid-{name}",
                     "resourceVersion": "1", "labels": {"app": "bench"}},
        "spec": {"containers": [{"name": "main", "image": "example/app:1",
                                 "resources": {"limits": limits, "requests": dict(limits)}}],
                 "schedulerName": "numalign-scheduler"},
        "status": {"phase": "Pending"},
    }


def kube_node(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"allocatable": {"cpu": "126", "memory": "500Gi"}}}


def cluster() -> dict[str, Any]:
    machine = load_machine(MACHINE, "bench")
    objs = {}
    for i in range(NODES):
        node = Node(machine)
        for k in range(i % 6):  # nodes 0..5 loaded differently, repeating
            doc = kube_pod(f"pre-{i}-{k}", 4 + 2 * k, "8Gi", gpus=k % 2)
            node.admit(parse_pods({"apiVersion": "v1", "kind": "Pod", **doc})[0])
        objs[f"node-{i:03d}"] = build_nrt(node, name=f"node-{i:03d}")
    return objs


def run(server: ExtenderServer, bodies: list[bytes], path: str = "/numa/filter",
        threads: int = 1) -> tuple[float, list[float], int]:
    lat: list[float] = []
    errors = [0]
    lock = threading.Lock()
    port = server.server_address[1]

    def worker(part: list[bytes]) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        mine: list[float] = []
        bad = 0
        for body in part:
            t0 = time.perf_counter()
            try:
                conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
                r = conn.getresponse()
                data = r.read()
                res = json.loads(data)
                if r.status != 200 or res.get("Error"):
                    bad += 1
            except (OSError, ValueError, http.client.HTTPException):
                bad += 1
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            mine.append(time.perf_counter() - t0)
        conn.close()
        with lock:
            lat.extend(mine)
            errors[0] += bad

    parts = [bodies[i::threads] for i in range(threads)]
    ts = [threading.Thread(target=worker, args=(p,)) for p in parts]
    t0 = time.perf_counter()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return time.perf_counter() - t0, lat, errors[0]


def report(label: str, n: int, elapsed: float, lat: list[float], errors: int) -> dict[str, Any]:
    rps = n / elapsed
    print(f"  {label:<12} {n:>6} calls  {rps:>8.0f} req/s  p50 {sorted(lat)[len(lat) // 2] * 1e3:6.2f} ms"
          f"  p99 {p99_ms(lat):6.2f} ms  errors {errors}")
    return {"calls": n, "rps": rps, "p99_ms": p99_ms(lat), "errors": errors}


def main(calls: int = CALLS) -> dict[str, Any]:
    print(f"extender: {NODES} nodes (8 NUMA nodes each, single-numa-node/pod), loopback HTTP")
    core = ExtenderCore(log=io.StringIO())
    core.set_nodes(cluster())
    server = serve_in_thread(core)
    names = sorted(core.nodes)
    shapes = [(2, "4Gi", 0), (4, "8Gi", 0), (8, "16Gi", 1), (6, "2Gi", 0), (10, "32Gi", 0),
              (2, "1Gi", 1), (12, "24Gi", 0), (14, "8Gi", 1)]
    out: dict[str, Any] = {}
    try:
        def bodies(n: int, nodes_form: bool = False, tag: str = "w") -> list[bytes]:
            out = []
            for k in range(n):
                cpu, mem, gpus = shapes[k % len(shapes)]
                pod = kube_pod(f"{tag}{k}", cpu, mem, gpus)
                body: dict[str, Any]
                if nodes_form:
                    body = {"Pod": pod, "Nodes": {"items": [kube_node(x) for x in names]},
                            "NodeNames": None}
                else:
                    body = {"Pod": pod, "Nodes": None, "NodeNames": names}
                out.append(json.dumps(body).encode())
            return out

        out["warm"] = report("warm", calls, *run(server, bodies(calls)))
        out["warm x4"] = report("warm x4", calls, *run(server, bodies(calls, tag="c"), threads=4))
        cold = []
        for k in range(200):
            pod = kube_pod(f"cold{k}", 1 + k % 13, f"{1 + k}Mi", k % 2)  # every shape new
            cold.append(json.dumps({"Pod": pod, "NodeNames": names}).encode())
        out["cold"] = report("cold", len(cold), *run(server, cold))
        nf = bodies(2000, nodes_form=True, tag="n")
        out["nodes form"] = report("nodes form", len(nf), *run(server, nf))
    finally:
        server.shutdown()
        server.server_close()
    return out


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else CALLS)
