"""One costly client beside normal ones (issue 23): ``/filter`` latency of normal pods while
another client sends the costliest pod the limits allow, again and again.

* **nodes**: ``SMALL`` nodes of the informer bench's machine (2 NUMA nodes, 32 CPUs, 4 GPUs;
  CPU availability varied: several hundred distinct contents), and the large nodes the NRT
  limits still accept (``kube/extender/limits.py``): ``limit-gpus`` (2 zones x 32,768 GPUs
  = ``MAX_NODE_DEVICES``), ``limit-cpus`` (2 zones x 8,192 CPUs = ``MAX_NODE_CPUS``) and the
  issue's ``gpus-2000`` (2 zones x 2,000 GPUs).
* **normal clients**: ``CLIENTS`` closed-loop clients in another process (the informer
  bench's), pods of 8 shapes over 100 of the small nodes per call (warm caches).
* **the costly client**: its own process, one request at a time, each a pod of a shape never
  seen (:func:`costly_pod`: 8,000 CPUs, or 30,000 GPUs, or a small pod of a unique shape),
  over every node - the large ones and all the small ones: first-time decisions everywhere,
  about a second of engine work on a large node, a millisecond on each small one.
* **phases**: ``quiet`` (normal clients only: the in-run reference), then ``costly`` (the
  costly client too), ``PHASE_SECONDS`` each. Printed: normal clients' p50 / p99 per phase,
  the costly client's answers (count, slowest, nodes answered "not evaluated"), and the
  evaluator's decisions. Target: normal p99 < 10 ms with the costly client on, each costly
  answer inside the request budget (3 s) plus a little.

The server is ``serve_in_thread`` in this process (the extender's loop and its evaluator), with
the nodes built here (no builder process). Run: ``python -m benchmarks extender_costly_bench``.
"""

from __future__ import annotations

import io
import json
import multiprocessing
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.informer_bench import SHAPES, _request, clients_process, kube_pod, objects
from benchmarks.timing import median_ms, p99_ms
from numalign.kube.extender import ExtenderCore, serve_in_thread
from numalign.kube.extender.bounded import DEFAULT_BUDGET
from numalign.kube.extender.core import NOT_EVALUATED
from numalign.kube.extender.gcfreeze import FreezePolicy
from numalign.kube.extender.limits import MAX_NODE_CPUS, MAX_NODE_DEVICES
from numalign.pods import parse_pods

SMALL = 400
CLIENTS = 2
PHASE_SECONDS = float(os.environ.get("COSTLY_PHASE_SECONDS", "15"))
GPU = "nvidia.com/gpu"


def large_nrt(name: str, cpus_per_zone: int, gpus_per_zone: int) -> dict[str, Any]:
    zones = []
    for z in (0, 1):
        zones.append({"name": f"node-{z}", "type": "Node", "resources": [
            {"name": "cpu", "capacity": str(cpus_per_zone), "allocatable": str(cpus_per_zone),
             "available": str(cpus_per_zone)},
            {"name": "memory", "capacity": "4Ti", "allocatable": "4Ti", "available": "4Ti"},
            {"name": GPU, "capacity": str(gpus_per_zone), "allocatable": str(gpus_per_zone),
             "available": str(gpus_per_zone)}]})
    return {"apiVersion": "topology.node.k8s.io/v1alpha2", "kind": "NodeResourceTopology",
            "metadata": {"name": name},
            "attributes": [{"name": "topologyManagerPolicy", "value": "single-numa-node"},
                           {"name": "topologyManagerScope", "value": "container"},
                           {"name": "numalign.io/cpuManagerPolicy", "value": "static"}],
            "zones": zones}


def _answer(sock: socket.socket, data: bytes, buf: bytearray) -> bytes:
    sock.sendall(data)
    while True:
        head_end = buf.find(b"\r\n\r\n")
        if head_end >= 0:
            head = bytes(buf[:head_end]).lower()
            i = head.find(b"content-length:")
            j = head.find(b"\r\n", i)
            length = int(head[i + 15:j if j >= 0 else len(head)])
            if len(buf) >= head_end + 4 + length:
                body = bytes(buf[head_end + 4:head_end + 4 + length])
                del buf[:head_end + 4 + length]
                return body
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed")
        buf.extend(chunk)


def costly_pod(k: int) -> dict[str, Any]:
    """The ``k``-th costly pod, a shape never seen, in turn: 8,000-k CPUs (fits a NUMA node of
    ``limit-cpus``), 30,000-k GPUs and 1 CPU (fits one of ``limit-gpus``), and a small pod
    (1 CPU, a unique memory amount) that passes the predicates of the small nodes, so each of
    them makes a first-time decision."""
    kinds = os.environ.get("COSTLY_KINDS", "012")  # diagnostics: only some kinds
    kind = int(kinds[k % len(kinds)])
    if kind == 0:
        return kube_pod(f"costly-{k}", 8000 - k, "1Gi")
    if kind == 1:
        pod = kube_pod(f"costly-{k}", 1, "1Gi")
        pod["spec"]["containers"][0]["resources"]["limits"][GPU] = str(30_000 - k)
        return pod
    return kube_pod(f"costly-{k}", 1, f"{1024 + k}Mi")


def costly_process(port: int, names: list[str], begin: float, end: float, out: Any) -> None:
    """One client, one request at a time from ``begin`` to ``end``: fresh costly shapes."""
    out.put("ready")
    time.sleep(max(0.0, begin - time.time()))
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buf = bytearray()
    lat: list[float] = []
    undecided = 0
    k = 0
    while time.time() < end:
        data = _request(json.dumps({"Pod": costly_pod(k), "Nodes": None,
                                    "NodeNames": names}).encode())
        t0 = time.perf_counter()
        doc = json.loads(_answer(sock, data, buf))
        lat.append(time.perf_counter() - t0)
        undecided += sum(1 for why in (doc.get("FailedNodes") or {}).values() if why == NOT_EVALUATED)
        k += 1
    sock.close()
    out.put((lat, undecided))


def main(small: int = SMALL, clients: int = CLIENTS) -> dict[str, Any]:
    print(f"costly client: {CLIENTS} normal closed-loop /filter clients (100 warm nodes per "
          f"call) and one client sending fresh costly pods (8,000 CPUs; 30,000 GPUs; small "
          f"pods of unique shapes) over all "
          f"{small} small + 3 large nodes; request budget {DEFAULT_BUDGET} s; "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start")
    objs = objects(small)
    large = {"limit-gpus": large_nrt("limit-gpus", 4, MAX_NODE_DEVICES // 2),
             "limit-cpus": large_nrt("limit-cpus", MAX_NODE_CPUS // 2, 4),
             "gpus-2000": large_nrt("gpus-2000", 32, 2000)}
    # the garbage-collector policy of `extender serve` (this process is the serving process)
    core = ExtenderCore(log=io.StringIO(), freeze=FreezePolicy())
    t0 = time.perf_counter()
    core.set_nodes({**objs, **large})
    print(f"  nodes built in {time.perf_counter() - t0:.1f} s; unusable: {core.broken or 'none'}")
    small_names = sorted(objs)
    all_names = sorted(large) + small_names
    for k, (cpu, mem, gpus) in enumerate(SHAPES):  # warm: the normal shapes on every small node
        core.filter(parse_pods({"apiVersion": "v1", "kind": "Pod",
                                **kube_pod(f"warm-{k}", cpu, mem, gpus)})[0], small_names)
    server = serve_in_thread(core)
    port = server.server_address[1]
    ctx = multiprocessing.get_context("spawn")
    result: dict[str, Any] = {}
    try:
        start = time.time() + 8.0
        phases = [(start, start + PHASE_SECONDS),
                  (start + PHASE_SECONDS, start + 2 * PHASE_SECONDS)]
        q = ctx.Queue()
        normal = ctx.Process(target=clients_process, args=(port, small_names, clients, phases, q))
        normal.start()
        cq = ctx.Queue()
        costly = ctx.Process(target=costly_process,
                             args=(port, all_names, phases[1][0], phases[1][1], cq))
        costly.start()
        assert q.get(timeout=120) == "ready" and cq.get(timeout=120) == "ready"
        merged = q.get(timeout=120 + 3 * PHASE_SECONDS)
        costly_lat, undecided = cq.get(timeout=120 + 3 * PHASE_SECONDS)
        normal.join(30)
        costly.join(30)
        for label, (lat, errors) in zip(("quiet", "costly"), merged, strict=True):
            result[label] = {"calls": len(lat), "p50_ms": median_ms(lat), "p99_ms": p99_ms(lat),
                             "errors": errors}
            print(f"  normal /filter, {label:<6}: {len(lat):6d} calls, p50 {median_ms(lat):6.2f} ms, "
                  f"p99 {p99_ms(lat):6.2f} ms, errors {errors}")
        q99, c99 = result["quiet"]["p99_ms"], result["costly"]["p99_ms"]
        print(f"  normal p99 with the costly client / without: {c99 / q99:.2f}x "
              f"(target p99 < 10 ms: {'met' if c99 < 10 else 'MISSED'})")
        slowest = max(costly_lat, default=0.0)
        print(f"  costly /filter: {len(costly_lat)} answers, slowest {slowest:.2f} s "
              f"(budget {DEFAULT_BUDGET} s), {undecided} node answers 'not evaluated'; "
              f"evaluator: {server.evaluator.evaluated if server.evaluator else 0} decisions, "
              f"{server.evaluator.expired if server.evaluator else 0} requests answered at "
              f"their deadline")
        print("  costly answers (s): " + " ".join(f"{x:.2f}" for x in costly_lat))
        result["costly"].update(answers=len(costly_lat), slowest_s=slowest, undecided=undecided)
    finally:
        server.shutdown()
        server.server_close()
    return result


if __name__ == "__main__":
    main()
