"""The extender at cluster scale (issue 12): 5,000 NodeResourceTopology objects, 50 NRT updates
per second streamed into the extender while 16 clients call ``/filter`` with 100 NodeNames each;
then 100,000 filter calls with unique annotations and the process's RSS along the way.

* The updates go through :meth:`ExtenderCore.update_node`, what the informer calls for each
  watch event (the watch itself over HTTP is exercised by tests/test_kube_extender_informer.py);
  each update must build exactly one engine (``builds/update``), outside the core's lock.
* The 16 clients run in a separate process (``spawn``) on keep-alive loopback connections, so
  their JSON work does not share the server's GIL; on a 2-core machine they still compete with
  the server for the CPU.
* RSS is read from ``/proc/self/statm`` (Linux).

Run: ``python -m benchmarks informer_bench`` (or ``python benchmarks/informer_bench.py [nodes]``).
"""

from __future__ import annotations

import copy
import http.client
import io
import json
import multiprocessing
import os
import random
import sys
import threading
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.timing import p99_ms
from numalign.kube.extender import ExtenderCore, serve_in_thread
from numalign.kube.extender import core as core_module
from numalign.kube.topology import build_nrt
from numalign.machine.spec import load_machine
from numalign.node.admission import Node
from numalign.pods import parse_pods

NODES = 5_000
UPDATES_PER_SECOND = 50
CLIENTS = 16
CALLS_PER_CLIENT = 400
NAMES_PER_CALL = 100
UNIQUE_CALLS = 100_000

MACHINE = {
    "name": "numa2",
    "shape": {"sockets": 2, "numaPerSocket": 1, "coresPerNuma": 16, "threadsPerCore": 2,
              "memoryPerNuma": "128Gi", "gpusPerNuma": 2},
    "kubelet": {"topologyManagerPolicy": "single-numa-node", "topologyManagerScope": "pod",
                "cpuManagerPolicy": "static", "reservedSystemCPUs": "0,32",
                "memoryManagerPolicy": "Static", "systemReserved": {"memory": "1Gi"},
                "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1124Mi"}}]},
}
SHAPES = [(2, "4Gi", 0), (4, "8Gi", 0), (8, "16Gi", 1), (6, "2Gi", 0), (10, "32Gi", 0),
          (2, "1Gi", 1), (12, "24Gi", 0), (14, "8Gi", 2)]


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def kube_pod(name: str, cpu: int, memory: str, gpus: int = 0,
             annotations: dict[str, str] | None = None) -> dict[str, Any]:
    limits: dict[str, str] = {"cpu": str(cpu), "memory": memory}
    if gpus:
        limits["nvidia.com/gpu"] = str(gpus)
    return {"metadata": {"name": name, "namespace": "bench", "uid": f"uid-{name}",
                         "annotations": annotations or {}},
            "spec": {"containers": [{"name": "main", "image": "example/app:1",
                                     "resources": {"limits": limits}}]}}


def objects(n: int) -> dict[str, dict[str, Any]]:
    template = build_nrt(Node(load_machine(MACHINE)), name="t")
    out = {}
    for i in range(n):
        o = copy.deepcopy(template)
        o["metadata"]["name"] = f"node-{i:05d}"
        out[o["metadata"]["name"]] = o
    return out


def client(port: int, names: list[str], seed: int, calls: int, out: Any) -> None:
    """One keep-alive client (in the spawned process): latencies in seconds."""
    rng = random.Random(seed)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    lat: list[float] = []
    errors = 0
    for k in range(calls):
        cpu, mem, gpus = SHAPES[k % len(SHAPES)]
        body = json.dumps({"Pod": kube_pod(f"c{seed}-{k}", cpu, mem, gpus), "Nodes": None,
                           "NodeNames": rng.sample(names, NAMES_PER_CALL)}).encode()
        t0 = time.perf_counter()
        try:
            conn.request("POST", "/filter", body, {"Content-Type": "application/json"})
            r = conn.getresponse()
            res = json.loads(r.read())
            if r.status != 200 or res.get("Error"):
                errors += 1
        except (OSError, ValueError, http.client.HTTPException):
            errors += 1
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        lat.append(time.perf_counter() - t0)
    conn.close()
    out.put((lat, errors))


def clients_process(port: int, names: list[str], out: Any) -> None:
    q: Any = __import__("queue").Queue()
    ts = [threading.Thread(target=client, args=(port, names, s, CALLS_PER_CLIENT, q))
          for s in range(CLIENTS)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    lat: list[float] = []
    errors = 0
    while not q.empty():
        part, e = q.get()
        lat.extend(part)
        errors += e
    out.put((lat, errors))


def main(nodes: int = NODES) -> dict[str, Any]:
    print(f"informer scale: {nodes} NRT objects, {UPDATES_PER_SECOND} updates/s, {CLIENTS} "
          f"clients x {CALLS_PER_CLIENT} /filter calls with {NAMES_PER_CALL} NodeNames")
    builds = [0]
    real = core_module.engine_from_nrt

    def counting(obj: Any) -> Node:
        builds[0] += 1
        return real(obj)

    core_module.engine_from_nrt = counting  # type: ignore[assignment]
    result: dict[str, Any] = {}
    try:
        objs = objects(nodes)
        core = ExtenderCore(log=io.StringIO())
        t0 = time.perf_counter()
        core.set_nodes(objs)
        result["initial_list_s"] = time.perf_counter() - t0
        print(f"  initial list: {result['initial_list_s']:.1f} s, RSS {rss_mb():.0f} MiB")
        server = serve_in_thread(core, max_connections=64)
        port = server.server_address[1]
        names = sorted(objs)
        stop = threading.Event()
        update_cost: list[float] = []
        applied = [0]
        builds_during = [0]

        def updater() -> None:
            rng = random.Random(1)
            period = 1.0 / UPDATES_PER_SECOND
            nxt = time.perf_counter()
            while not stop.is_set():
                name = rng.choice(names)
                obj = copy.deepcopy(objs[name])
                cpu = obj["zones"][1]["resources"][0]
                cpu["available"] = str(rng.randint(4, int(cpu["allocatable"])))
                before = builds[0]
                t = time.perf_counter()
                core.update_node(name, obj)
                update_cost.append(time.perf_counter() - t)
                builds_during[0] += builds[0] - before
                applied[0] += 1
                nxt += period
                stop.wait(max(0.0, nxt - time.perf_counter()))

        up = threading.Thread(target=updater, daemon=True)
        up.start()
        ctx = multiprocessing.get_context("spawn")
        q = ctx.Queue()
        proc = ctx.Process(target=clients_process, args=(port, names, q))
        t0 = time.perf_counter()
        proc.start()
        lat, errors = q.get(timeout=1800)
        proc.join(60)
        elapsed = time.perf_counter() - t0
        stop.set()
        up.join(10)
        lat.sort()
        result.update({
            "filter_calls": len(lat), "filter_errors": errors,
            "filter_p50_ms": lat[len(lat) // 2] * 1e3, "filter_p99_ms": p99_ms(lat),
            "updates": applied[0], "updates_per_s": applied[0] / elapsed,
            "builds_per_update": builds_during[0] / max(1, applied[0]),
            "update_p99_ms": p99_ms(update_cost),
        })
        print(f"  /filter: {len(lat)} calls in {elapsed:.1f} s, p50 {result['filter_p50_ms']:.2f} ms, "
              f"p99 {result['filter_p99_ms']:.2f} ms, errors {errors}")
        print(f"  updates: {applied[0]} ({result['updates_per_s']:.0f}/s), engines built per "
              f"update {result['builds_per_update']:.2f}, update p99 {result['update_p99_ms']:.2f} ms")
        server.shutdown()
        server.server_close()

        # RSS over 100,000 filter calls with unique annotations (the service path without HTTP)
        few = names[:NAMES_PER_CALL]
        samples = []
        base = rss_mb()
        for k in range(UNIQUE_CALLS):
            cpu, mem, gpus = SHAPES[k % len(SHAPES)]
            doc = kube_pod(f"u{k}", cpu, mem, gpus,
                           {"bench/unique": f"{k}-" + "x" * 200, f"bench/key-{k}": "v"})
            core.filter(parse_pods({"apiVersion": "v1", "kind": "Pod", **doc})[0], few)
            if (k + 1) % 20_000 == 0:
                samples.append(rss_mb())
        result["rss_mb"] = [round(base, 1), *(round(s, 1) for s in samples)]
        result["rss_growth_mb"] = samples[-1] - samples[0]
        print(f"  RSS over {UNIQUE_CALLS} unique-annotation filters (every 20k): "
              f"{result['rss_mb']} MiB; growth after the first 20k {result['rss_growth_mb']:.1f} MiB")
    finally:
        core_module.engine_from_nrt = real  # type: ignore[assignment]
    return result


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else NODES)
