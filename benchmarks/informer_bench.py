"""The extender at cluster scale (issue 12): 5,000 NodeResourceTopology objects, 50 NRT updates
per second streamed into the extender while 16 clients call ``/filter`` with 100 NodeNames
each; then 100,000 filter calls with unique annotations and the process's RSS along the way.

Load model (printed with the results):

* **clients**: ``CLIENTS`` *closed-loop* clients - each sends its next ``/filter`` as soon as
  the previous answer is in, so ``CLIENTS`` requests are always outstanding and latency is
  queueing behind them (Little's law: mean latency = clients / throughput). They run in a
  separate process (``multiprocessing``, ``spawn``; one thread each on a keep-alive loopback
  connection sending pre-encoded requests), so their CPU is not billed to the server's
  process or GIL; on a small machine they still compete with the server for the cores.
* **server**: the real HTTP service (:func:`serve_in_thread`) in this process.
* **nodes**: one machine type (2 NUMA nodes, 32 CPUs, 4 GPUs), each node with its own CPU
  availability per NUMA zone (about 700 distinct NRT contents; nodes of equal content share
  decisions, so the count is printed).
* **updates**: a paced stream of ``UPDATES_PER_SECOND`` watch events (MODIFIED, one random
  node's CPU availability redrawn), each decoded from JSON with the bounded reader and applied
  with :meth:`ExtenderCore.update_node` - what the informer does per event - on a thread of
  the server process; the engine and the re-evaluation of the node's cached pod shapes are
  built in the extender's builder process (:class:`ProcessBuilder`, as ``extender serve``
  does; ``INFORMER_BUILDER=thread`` builds on the update thread instead, for comparison).
  ``engines/update`` counts engine builds per event (must be 1).
* **phases**: ``updates on`` then ``updates off`` (the in-run reference), ``PHASE_SECONDS``
  each, same clients. The per-node caches are warmed first (each pod shape filtered once
  against every node); after that a rebuilt node re-evaluates its predecessor's shapes before
  it is published, so readers keep hitting the cache.
* **CPU**: the server process's CPU time (user + system, ``os.times``) per answered request,
  with the update thread's own CPU (``time.thread_time``) taken out and shown apart.
* **RSS**: ``/proc/self/statm``; 100,000 filter calls with unique annotations (and unique
  names and uids) through the service path without HTTP (ExtenderArgs -> pod cache -> filter).

Run: ``python -m benchmarks informer_bench`` (or ``python benchmarks/informer_bench.py
[nodes] [clients]``); ``python benchmarks/informer_bench.py cpu [nodes]`` measures the server's
CPU per ``/filter`` with one sequential client instead (no queueing, no updates).
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import multiprocessing
import os
import random
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.timing import p99_ms
from numalign.inputs.documents import loads_json
from numalign.kube.extender import ExtenderCore, serve_in_thread
from numalign.kube.extender.builder import ProcessBuilder
from numalign.kube.extender.core import content_digest
from numalign.kube.extender.gcfreeze import FreezePolicy
from numalign.kube.topology import build_nrt
from numalign.machine.spec import load_machine
from numalign.node.admission import Node

NODES = 5_000
UPDATES_PER_SECOND = 50
CLIENTS = 16
NAMES_PER_CALL = 100
PHASE_SECONDS = float(os.environ.get("INFORMER_PHASE_SECONDS", "20"))
UNIQUE_CALLS = 100_000
#: distinct pre-encoded requests per client (cycled)
BODIES_PER_CLIENT = 200

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
                         "resourceVersion": "1", "labels": {"app": "bench"},
                         "annotations": annotations or {}},
            "spec": {"containers": [{"name": "main", "image": "example/app:1",
                                     "resources": {"limits": limits}}]}}


def vary(obj: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """``obj`` with the CPUs available on each NUMA zone drawn from 4..allocatable (nodes
    loaded differently: about 27 x 27 distinct NRT contents)."""
    out = copy.deepcopy(obj)
    for zone in out["zones"]:
        for r in zone["resources"]:
            if r["name"] == "cpu":
                r["available"] = str(rng.randint(4, int(r["allocatable"])))
    return out


def objects(n: int) -> dict[str, dict[str, Any]]:
    template = build_nrt(Node(load_machine(MACHINE)), name="t")
    rng = random.Random(0)
    out = {}
    for i in range(n):
        o = vary(template, rng)
        o["metadata"]["name"] = f"node-{i:05d}"
        out[o["metadata"]["name"]] = o
    return out


# ---------------------------------------------------------------------- clients


def _request(body: bytes) -> bytes:
    return (b"POST /filter HTTP/1.1\r\nHost: extender\r\nContent-Type: application/json\r\n"
            b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)


def _exchange(sock: socket.socket, data: bytes, buf: bytearray) -> bool:
    """Send one request, read one answer (Content-Length framed); True if it was a 200
    without an Error."""
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
                return head.startswith(b"http/1.1 200") and b'"Error":""' in body
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed")
        buf.extend(chunk)


def _client(port: int, requests: list[bytes], go: Any, phases: list[tuple[float, float]],
            out: Any) -> None:
    """One closed-loop client: per phase, requests back to back from its start to its end
    (wall-clock times shared with the server process)."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buf = bytearray()
    k = 0
    result = []
    go.wait()
    for begin, end in phases:
        time.sleep(max(0.0, begin - time.time()))
        lat: list[float] = []
        errors = 0
        while time.time() < end:
            t0 = time.perf_counter()
            try:
                ok = _exchange(sock, requests[k % len(requests)], buf)
            except OSError:
                ok = False
                sock.close()
                sock = socket.create_connection(("127.0.0.1", port))
                buf.clear()
            lat.append(time.perf_counter() - t0)
            errors += not ok
            k += 1
        result.append((lat, errors))
    sock.close()
    out.put(result)


def clients_process(port: int, names: list[str], clients: int,
                    phases: list[tuple[float, float]], out: Any) -> None:
    """The client process: ``clients`` threads, requests encoded before the clock starts."""
    import queue

    q: Any = queue.Queue()
    go = threading.Event()
    ts = []
    for c in range(clients):
        rng = random.Random(c)
        reqs = []
        for k in range(BODIES_PER_CLIENT):
            cpu, mem, gpus = SHAPES[k % len(SHAPES)]
            reqs.append(_request(json.dumps(
                {"Pod": kube_pod(f"c{c}-{k}", cpu, mem, gpus), "Nodes": None,
                 "NodeNames": rng.sample(names, NAMES_PER_CALL)}).encode()))
        ts.append(threading.Thread(target=_client, args=(port, reqs, go, phases, q)))
    for t in ts:
        t.start()
    out.put("ready")
    go.set()
    for t in ts:
        t.join()
    merged: list[tuple[list[float], int]] = [([], 0) for _ in phases]
    while not q.empty():
        for i, (lat, e) in enumerate(q.get()):
            merged[i][0].extend(lat)
            merged[i] = (merged[i][0], merged[i][1] + e)
    out.put(merged)


# ---------------------------------------------------------------------- updates


class Updater:
    """Paced watch events on a thread of the server process (``rate`` per second)."""

    def __init__(self, core: ExtenderCore, objs: dict[str, Any], rate: float) -> None:
        self.core = core
        self.rate = rate
        rng = random.Random(1)
        names = sorted(objs)
        self.events: list[tuple[str, bytes]] = []
        for _ in range(int(rate * (PHASE_SECONDS + 5))):
            name = rng.choice(names)
            obj = vary(objs[name], rng)
            self.events.append((name, json.dumps({"type": "MODIFIED", "object": obj}).encode()))
        self.applied = 0
        self.submitted = 0
        self.built = 0
        self.cpu = 0.0
        self.update_s: list[float] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name="updater")

    def _applied(self, t: float) -> None:
        """One update published (on the thread that finished it)."""
        self.update_s.append(time.perf_counter() - t)
        self.applied += 1

    def _run(self) -> None:
        c0 = time.thread_time()
        period = 1.0 / self.rate
        nxt = time.perf_counter()
        built0 = self.core.engines_built
        futures = []
        for name, line in self.events:
            if self.stop.is_set():
                break
            t = time.perf_counter()
            event = loads_json(line, "watch event")
            # what the informer does: queued to the builder process, installed when built
            fut = self.core.update_node_async(name, event["object"])
            fut.add_done_callback(lambda f, t=t: self._applied(t))
            futures.append(fut)
            self.submitted += 1
            nxt += period
            self.stop.wait(max(0.0, nxt - time.perf_counter()))
        self.cpu = time.thread_time() - c0
        for fut in futures:  # (checked and counted where they are prepared: wait for them)
            fut.result(60)
        self.built = self.core.engines_built - built0


# ---------------------------------------------------------------------- diagnostics


class TailProbe:
    """Where the tail comes from, measured in the server process (diagnostics only; the load
    is unchanged): the cyclic garbage collector's pauses (``gc.callbacks``), and per answered
    ``/filter`` the handler's wall time against the loop thread's CPU time for it (wall - CPU
    = time the loop thread was runnable but not running: waiting for the GIL or a core) and
    the time from its headers being parsed to its answer being sent."""

    def __init__(self) -> None:
        self.gc: list[tuple[int, float]] = []  # (generation, seconds)
        #: wall and loop-thread CPU seconds of each finish() (floats: the probe must not
        #: allocate objects the garbage collector tracks, or it would make collections)
        self.handler_wall: list[float] = []
        self.handler_cpu: list[float] = []
        self.in_server: list[float] = []
        self._gc_t0 = 0.0
        self.on = False

    def _gc(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._gc_t0 = time.perf_counter()
        elif self.on:
            self.gc.append((info["generation"], time.perf_counter() - self._gc_t0))

    def install(self, server: Any) -> None:
        import gc

        gc.callbacks.append(self._gc)
        handler = server.handler
        finish, answered = handler.finish, handler.answered

        def timed_finish(req: Any, t0: float) -> Any:
            w0, c0 = time.perf_counter(), time.thread_time()
            out = finish(req, t0)
            if self.on:
                self.handler_wall.append(time.perf_counter() - w0)
                self.handler_cpu.append(time.thread_time() - c0)
            return out

        def timed_answered(req: Any, resp: Any, t0: float) -> None:
            if self.on:
                self.in_server.append(time.perf_counter() - t0)
            answered(req, resp, t0)

        handler.finish = timed_finish
        handler.answered = timed_answered

    def uninstall(self) -> None:
        import gc

        with contextlib.suppress(ValueError):
            gc.callbacks.remove(self._gc)

    def take(self) -> dict[str, Any]:
        """This phase's figures (and start the next phase afresh)."""
        gcs, ins = self.gc, self.in_server
        hs = list(zip(self.handler_wall, self.handler_cpu, strict=False))
        self.gc, self.handler_wall, self.handler_cpu, self.in_server = [], [], [], []
        by_gen = {g: [s for gg, s in gcs if gg == g] for g in (0, 1, 2)}
        waits = sorted(w - c for w, c in hs)
        walls = sorted(w for w, _ in hs)
        return {
            "gc": {g: (len(v), sum(v) * 1e3, max(v, default=0.0) * 1e3)
                   for g, v in by_gen.items()},
            "handler_p50_ms": walls[len(walls) // 2] * 1e3 if walls else float("nan"),
            "handler_p99_ms": p99_ms(walls) if walls else float("nan"),
            "handler_wait_p99_ms": p99_ms(waits) if waits else float("nan"),
            "handler_wait_max_ms": waits[-1] * 1e3 if waits else float("nan"),
            "in_server_p99_ms": p99_ms(ins) if ins else float("nan"),
        }


def thread_cpu() -> dict[str, float]:
    """CPU seconds of each thread of this process by thread name (``/proc/self/task``)."""
    out: dict[str, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    names = {t.native_id: t.name for t in threading.enumerate()}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        name = names.get(int(tid), f"tid-{tid}")
        name = name.split(" (")[0]
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return out


def _print_threads(label: str, before: dict[str, float], after: dict[str, float],
                   calls: int) -> None:
    rows = sorted(((after[k] - before.get(k, 0.0), k) for k in after), reverse=True)
    print(f"    {label} server threads, CPU ms per call: " + ", ".join(
        f"{k} {cpu / max(1, calls) * 1e3:.3f}" for cpu, k in rows if cpu > 0))


def _print_probe(label: str, d: dict[str, Any]) -> None:
    gcs = ", ".join(f"gen{g} {n} x (total {t:.1f} ms, max {m:.2f} ms)"
                    for g, (n, t, m) in d["gc"].items())
    print(f"    {label} tail probe: GC {gcs}; handler p50 {d['handler_p50_ms']:.3f} / p99 "
          f"{d['handler_p99_ms']:.3f} ms wall, of which not running p99 "
          f"{d['handler_wait_p99_ms']:.3f} (max {d['handler_wait_max_ms']:.2f}) ms; headers "
          f"parsed -> answer sent p99 {d['in_server_p99_ms']:.3f} ms")


# ---------------------------------------------------------------------- main


def _summary(lat: list[float], errors: int, seconds: float, cpu_s: float) -> dict[str, Any]:
    lat = sorted(lat)
    n = len(lat)
    return {"calls": n, "errors": errors, "per_s": n / seconds,
            "p50_ms": lat[n // 2] * 1e3 if n else float("nan"),
            "p99_ms": p99_ms(lat) if n else float("nan"),
            "server_cpu_ms_per_call": cpu_s / max(1, n) * 1e3}


def main(nodes: int = NODES, clients: int = CLIENTS) -> dict[str, Any]:
    in_thread = os.environ.get("INFORMER_BUILDER", "process") == "thread"
    if os.environ.get("INFORMER_SWITCH_INTERVAL"):  # diagnostics: the GIL's switch interval
        sys.setswitchinterval(float(os.environ["INFORMER_SWITCH_INTERVAL"]))
    builder = None if in_thread else ProcessBuilder()

    print(f"informer scale: {nodes} NRT objects; {clients} closed-loop /filter clients "
          f"({NAMES_PER_CALL} NodeNames each) in a separate process on keep-alive loopback "
          f"connections; {UPDATES_PER_SECOND} paced NRT watch events/s applied in the server "
          f"process, built {'on the update thread' if in_thread else 'in the builder process'}"
          f"; {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start")
    result: dict[str, Any] = {"nodes": nodes, "clients": clients}
    server = None
    try:
        objs = objects(nodes)
        # the initial list: built in this process; the garbage-collector policy of
        # `extender serve` (the bench's process is the serving process)
        freeze = FreezePolicy()
        core = ExtenderCore(log=io.StringIO(), freeze=freeze)
        rss_start = rss_mb()
        c0 = time.process_time()
        core.set_nodes(objs)
        result["initial_list_cpu_s"] = time.process_time() - c0
        if builder is not None:
            builder.start().result(120)
        core.builder = builder
        names = sorted(objs)
        c0 = time.process_time()
        for k, (cpu, mem, gpus) in enumerate(SHAPES):  # warm: each shape once on every node
            from numalign.pods import parse_pods

            pod = parse_pods({"apiVersion": "v1", "kind": "Pod",
                              **kube_pod(f"warm-{k}", cpu, mem, gpus)})[0]
            core.filter(pod, names)
        result["warm_cpu_s"] = time.process_time() - c0
        # the warm-up belongs to the start (filled over the first requests in a real
        # cluster, with freezes in between): its objects are frozen with the initial list's
        freeze.settled()
        distinct = len({content_digest(o) for o in objs.values()})
        print(f"  {distinct} distinct NRT contents among the {nodes} nodes (nodes of equal "
              "content share decisions)")
        print(f"  initial list {result['initial_list_cpu_s']:.1f} s CPU, cache warm-up "
              f"({len(SHAPES)} shapes x {nodes} nodes) {result['warm_cpu_s']:.1f} s CPU, "
              f"RSS {rss_start:.0f} -> {rss_mb():.0f} MiB")
        server = serve_in_thread(core, max_connections=max(64, clients * 2))
        port = server.server_address[1]
        probe = TailProbe()
        probe.install(server)
        updater = Updater(core, objs, UPDATES_PER_SECOND)

        ctx = multiprocessing.get_context("spawn")
        q = ctx.Queue()
        start = time.time() + 8.0  # time for the client process to start and encode
        phases = [(start, start + PHASE_SECONDS),
                  (start + PHASE_SECONDS, start + 2 * PHASE_SECONDS)]
        proc = ctx.Process(target=clients_process, args=(port, names, clients, phases, q))
        proc.start()
        assert q.get(timeout=120) == "ready"
        time.sleep(max(0.0, start - time.time()))
        rows = []
        probes: list[dict[str, Any]] = []
        threads_cpu: list[tuple[dict[str, float], dict[str, float]]] = []
        rss_phase = [rss_mb()]
        for i, (_, end) in enumerate(phases):
            if i == 0:
                updater.thread.start()
                freezes0 = (freeze.freezes, freeze.seconds)
            probe.on = True
            th0 = thread_cpu()
            t0, w0 = os.times(), time.perf_counter()
            time.sleep(max(0.0, end - time.time()))
            t1, w1 = os.times(), time.perf_counter()
            probes.append(probe.take())
            threads_cpu.append((th0, thread_cpu()))
            if i == 0:
                freezes1 = (freeze.freezes, freeze.seconds)
                applied_in_phase = updater.applied
                updater.stop.set()
                updater.thread.join(30)
            rows.append((t1.user + t1.system - t0.user - t0.system, w1 - w0))
            rss_phase.append(rss_mb())
        probe.on = False
        probe.uninstall()
        per_phase = q.get(timeout=120)
        proc.join(60)
        for (label, (cpu_s, wall)), (lat, errors), pr, ths in zip(
                (("updates on", rows[0]), ("updates off", rows[1])), per_phase, probes,
                threads_cpu, strict=True):
            if label == "updates on":
                cpu_s -= updater.cpu
            s = _summary(lat, errors, wall, cpu_s)
            result[label] = s
            print(f"  {label:11s}: {s['calls']} calls ({s['per_s']:.0f}/s), p50 "
                  f"{s['p50_ms']:.2f} ms, p99 {s['p99_ms']:.2f} ms, errors {s['errors']}; "
                  f"server CPU {s['server_cpu_ms_per_call']:.3f} ms per call")
            s["probe"] = pr
            _print_probe(label, pr)
            _print_threads(label, *ths, s["calls"])
        asked = UPDATES_PER_SECOND
        result["updates"] = {
            "asked_per_s": asked, "applied_per_s": applied_in_phase / rows[0][1],
            "submitted_per_s": updater.submitted / rows[0][1],
            "engines_per_update": updater.built / max(1, updater.submitted),
            "update_p99_ms": p99_ms(updater.update_s) if updater.update_s else float("nan"),
            "updater_cpu_ms_per_update": updater.cpu / max(1, updater.submitted) * 1e3,
        }
        n_freeze = freezes1[0] - freezes0[0]
        result["updates"]["gc_freezes"] = n_freeze
        result["updates"]["gc_freeze_ms_mean"] = (freezes1[1] - freezes0[1]) / max(1, n_freeze) * 1e3
        if builder is not None:
            result["updates"]["builder_cpu_ms_per_update"] = (
                builder.cpu_seconds / max(1, builder.builds) * 1e3)
        u = result["updates"]
        print(f"  updates    : {u['applied_per_s']:.1f}/s applied ({u['submitted_per_s']:.1f}/s "
              f"taken from the stream, at most 8 queued) of {asked}/s asked, engines "
              f"built per update {u['engines_per_update']:.2f}, update p99 "
              f"{u['update_p99_ms']:.2f} ms (event to published), updater thread CPU "
              f"{u['updater_cpu_ms_per_update']:.2f} ms per update (decode, "
              f"{'build, re-evaluate cached shapes, swap' if in_thread else 'queue; the unpickle and swap run on the server loop thread between requests, billed to the calls'})"
              + ("" if builder is None else f"; builder process CPU "
                 f"{u['builder_cpu_ms_per_update']:.2f} ms per update (checks, engine, shapes)"))
        print(f"  GC policy  : {n_freeze} collect+freeze passes in the updates-on phase, "
              f"{u['gc_freeze_ms_mean']:.3f} ms each on average (wall, GIL held)")
        result["rss_phases_mb"] = [round(r, 1) for r in rss_phase]
        print(f"  RSS before/after each phase: {result['rss_phases_mb']} MiB; load average "
              f"{os.getloadavg()[0]:.1f} at the end")
        server.shutdown()
        server.server_close()
        server = None

        # RSS over 100,000 filter calls with unique annotations (the service path without HTTP)
        from numalign.kube.extender.podcache import PodCache

        pods = PodCache(core.shape_id)
        few = names[:NAMES_PER_CALL]
        samples = []
        base = rss_mb()
        c0 = time.process_time()
        for k in range(UNIQUE_CALLS):
            cpu, mem, gpus = SHAPES[k % len(SHAPES)]
            doc = kube_pod(f"u{k}", cpu, mem, gpus,
                           {"bench/unique": f"{k}-" + "x" * 200, f"bench/key-{k}": "v"})
            pod, shape = pods.parse({"Pod": doc})
            core.filter(pod, few, shape=shape)
            if (k + 1) % 20_000 == 0:
                samples.append(rss_mb())
        cpu_unique = (time.process_time() - c0) / UNIQUE_CALLS * 1e3
        result["rss_mb"] = [round(base, 1), *(round(s, 1) for s in samples)]
        result["rss_growth_mb"] = samples[-1] - samples[0]
        print(f"  RSS over {UNIQUE_CALLS} unique-annotation filters (every 20k): "
              f"{result['rss_mb']} MiB; growth after the first 20k "
              f"{result['rss_growth_mb']:.1f} MiB; {cpu_unique:.3f} ms CPU per call "
              f"without HTTP")
        print(f"  RSS start/end: {rss_start:.0f} / {rss_mb():.0f} MiB")
    finally:
        if builder is not None:
            builder.close()
        if server is not None:
            server.shutdown()
            server.server_close()
    return result


def _sequential_client(port: int, names: list[str], calls: int, out: Any) -> None:
    rng = random.Random(0)
    reqs = [_request(json.dumps({"Pod": kube_pod(f"s-{k}", *SHAPES[k % len(SHAPES)]),
                                 "Nodes": None,
                                 "NodeNames": rng.sample(names, NAMES_PER_CALL)}).encode())
            for k in range(calls)]
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buf = bytearray()
    out.put("ready")
    errors = sum(not _exchange(sock, r, buf) for r in reqs)
    sock.close()
    out.put(errors)


def cpu_per_filter(nodes: int = 500, calls: int = 3000) -> float:
    """Server CPU per ``/filter`` with ONE sequential client (another process), warm caches,
    no updates: the extender's cost per call without any queueing. Returns milliseconds."""
    objs = objects(nodes)
    core = ExtenderCore(log=io.StringIO())
    core.set_nodes(objs)
    names = sorted(objs)
    from numalign.pods import parse_pods

    for k, (cpu, mem, gpus) in enumerate(SHAPES):
        core.filter(parse_pods({"apiVersion": "v1", "kind": "Pod",
                                **kube_pod(f"warm-{k}", cpu, mem, gpus)})[0], names)
    server = serve_in_thread(core)
    try:
        ctx = multiprocessing.get_context("spawn")
        q = ctx.Queue()
        proc = ctx.Process(target=_sequential_client,
                           args=(server.server_address[1], names, calls, q))
        proc.start()
        assert q.get(timeout=120) == "ready"
        t0 = os.times()
        errors = q.get(timeout=600)
        t1 = os.times()
        proc.join(30)
    finally:
        server.shutdown()
        server.server_close()
    user = (t1.user - t0.user) / calls * 1e3
    system = (t1.system - t0.system) / calls * 1e3
    print(f"server CPU per /filter, one sequential client, {nodes} nodes, {calls} calls: "
          f"{user + system:.3f} ms (user {user:.3f}, system {system:.3f}), errors {errors}, "
          f"load average {os.getloadavg()[0]:.1f}")
    return user + system


if __name__ == "__main__":
    if sys.argv[1:2] == ["cpu"]:
        cpu_per_filter(int(sys.argv[2]) if len(sys.argv) > 2 else 500)
    else:
        main(int(sys.argv[1]) if len(sys.argv) > 1 else NODES,
             int(sys.argv[2]) if len(sys.argv) > 2 else CLIENTS)
