"""The extender under NRT churn, through each node source (issue 26): 5,000 NodeResourceTopology
objects, 50 updates per second from the source while 4 closed-loop clients call ``/filter``
with 100 NodeNames each; the same server without updates is the reference in the same run.

Sources (each its own server, started as ``numalign extender serve`` starts it:
:func:`numalign.kube.extender.serving.start`):

* ``informer``: ``--kubeconfig`` against kmock's Kubernetes emulator (list + watch over
  HTTP; an API server emulator from PyPI) in a separate process. The updates are stored in
  its objects and put on the bus its watch streams from (a MODIFIED event each): kmock
  answers a PATCH request in 15-40 ms of CPU (its request matching), which a 2-core machine
  cannot spare 50 times a second beside the extender;
* ``nrt-dir``: ``--nrt-dir`` over one JSON file per node, rewritten in place (``open``,
  ``write``, ``close``) by a separate process, as a script or ``kubectl get -o json > file``
  would;
* ``export --out``: ``--nrt-dir`` over the files ``numalign export --out DIR`` writes (YAML,
  a temporary file renamed over the old one), rewritten with the exporter's own writer
  (:func:`numalign.kube.exporter.write_object`) by a separate process.

Each run is two phases of ``CHURN_PHASE_SECONDS`` (default 8): updates on, then off; 3 runs
per source, reported as min / median. Per phase: the clients' wall-clock p50 / p99 (clients
in a separate process, as in ``informer_bench``), the server loop thread's CPU time per
``/filter`` (``time.thread_time`` around the handler: what a request costs the server,
independent of the machine's load) p50 / p99, and the updates published. Also per source: the
wall and CPU seconds from start to ready (``/readyz``: every node's engine built).

Run: ``python -m benchmarks extender_churn_bench``; ``CHURN_NODES``, ``CHURN_PHASE_SECONDS``,
``CHURN_SOURCES`` (comma-separated) make it smaller.
"""

from __future__ import annotations

import asyncio
import io
import json
import multiprocessing
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.informer_bench import MACHINE, SHAPES, clients_process, kube_pod, objects, vary
from benchmarks.timing import p99_ms

NODES = int(os.environ.get("CHURN_NODES", "5000"))
CLIENTS = 4
RATE = 50
PHASE_SECONDS = float(os.environ.get("CHURN_PHASE_SECONDS", "8"))
RUNS = 3
SOURCES = tuple(s for s in os.environ.get("CHURN_SOURCES", "informer,nrt-dir,export --out")
                .split(",") if s)
GROUP_PATH = "/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies"
RESOURCE = "topology.node.k8s.io/v1alpha2/noderesourcetopologies"


# ---------------------------------------------------------------------- producers


def _updates(names: list[str], seed: int) -> Any:
    """An endless stream of (name, object): one random node's CPU availability redrawn."""
    from numalign.kube.topology import build_nrt
    from numalign.machine.spec import load_machine
    from numalign.node.admission import Node

    template = build_nrt(Node(load_machine(MACHINE)), name="t")
    rng = random.Random(seed)
    while True:
        name = rng.choice(names)
        obj = vary(template, rng)
        obj["metadata"]["name"] = name
        yield name, obj


def _paced(phases: list[tuple[float, float]], step: Any) -> list[int]:
    """Call ``step()`` ``RATE`` times a second inside each phase; the calls made per phase."""
    done = []
    for begin, end in phases:
        time.sleep(max(0.0, begin - time.time()))
        n = 0
        nxt = time.perf_counter()
        while time.time() < end:
            step()
            n += 1
            nxt += 1.0 / RATE
            time.sleep(max(0.0, nxt - time.perf_counter()))
        done.append(n)
    return done


def dir_writer(path: str, names: list[str], style: str, phases: list[tuple[float, float]],
               out: Any) -> None:
    """Rewrite ``RATE`` files a second during ``phases``: JSON in place, or as the exporter."""
    from numalign.kube.exporter import write_object

    stream = _updates(names, 7)
    target = Path(path)

    def step() -> None:
        name, obj = next(stream)
        if style == "json":
            with open(target / f"{name}.json", "w", encoding="utf-8") as f:
                f.write(json.dumps(obj))
        else:
            write_object(target, obj, "yaml")

    out.put("ready")
    out.put(_paced(phases, step))


def kmock_server(objs_file: str, names: list[str], phases_q: Any, out: Any) -> None:
    """kmock's Kubernetes emulator holding the NRTs; once the churn phases come on
    ``phases_q``, ``RATE`` objects a second are replaced during each, each a MODIFIED event
    on the watch."""
    import kmock

    async def main() -> None:
        with open(objs_file, encoding="utf-8") as f:
            objs = json.load(f)
        async with kmock.KubernetesEmulator() as k, kmock.Server(k, host="127.0.0.1", port=0):
            for name, obj in objs.items():
                k.objects[RESOURCE, None, name] = obj
            out.put(str(k.url))
            phases = await asyncio.get_running_loop().run_in_executor(None, phases_q.get)
            # the extender's watch is connected: its bus (see the module notes)
            bus = next(b for b in k._buses.values() if b.consumer_count)
            stream = _updates(names, 7)
            done = []
            for begin, end in phases:
                await asyncio.sleep(max(0.0, begin - time.time()))
                n = 0
                nxt = time.perf_counter()
                while time.time() < end:
                    name, obj = next(stream)
                    k.objects[RESOURCE, None, name] = obj
                    await bus.put({"type": "MODIFIED", "object": obj})
                    n += 1
                    nxt += 1.0 / RATE
                    await asyncio.sleep(max(0.0, nxt - time.perf_counter()))
                done.append(n)
            out.put(done)
            await asyncio.sleep(3600)  # until terminated

    asyncio.run(main())


def kubeconfig(url: str, path: Path) -> Path:
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "kmock",
        "clusters": [{"name": "kmock", "cluster": {"server": url}}],
        "contexts": [{"name": "kmock", "context": {"cluster": "kmock", "user": "kmock"}}],
        "users": [{"name": "kmock", "user": {"token": "bench"}}]}))
    return path


# ---------------------------------------------------------------------- the server


class CpuProbe:
    """Per ``/filter``: the loop thread's CPU seconds in the handler (``time.thread_time``);
    per piece of update work handed to the loop (checks and queueing, install of a built
    update): its wall seconds on the loop - what a request arriving meanwhile waits."""

    def __init__(self, server: Any, core: Any) -> None:
        self.cpu: list[float] = []
        self.loop_work: list[float] = []
        self.loop_work_cpu: list[float] = []
        self.on = False
        handler = server.handler
        finish = handler.finish

        def timed(req: Any, t0: float) -> Any:
            c0 = time.thread_time()
            got = finish(req, t0)
            if self.on:
                self.cpu.append(time.thread_time() - c0)
            return got

        handler.finish = timed
        soon = core.install_on

        def timed_soon(fn: Any) -> None:
            def run() -> None:
                w0, c0 = time.perf_counter(), time.thread_time()
                fn()
                if self.on:
                    self.loop_work.append(time.perf_counter() - w0)
                    self.loop_work_cpu.append(time.thread_time() - c0)

            soon(run)

        core.install_on = timed_soon

    def take(self) -> tuple[list[float], list[float], list[float]]:
        got, self.cpu = self.cpu, []
        work, self.loop_work = self.loop_work, []
        work_cpu, self.loop_work_cpu = self.loop_work_cpu, []
        return got, work, work_cpu


def start(source: str, where: str) -> Any:
    """The extender as ``extender serve`` runs it, on threads of this process."""
    from numalign.kube.extender.serving import start as start_serving

    if source == "informer":
        return start_serving(kubeconfig=where, port=0, log=io.StringIO())
    return start_serving(nrt_dir=where, port=0, log=io.StringIO())


def warm(core: Any, names: list[str]) -> None:
    """Each pod shape filtered once on every node (the clients' shapes are then cached)."""
    from numalign.pods import parse_pods

    for k, (cpu, mem, gpus) in enumerate(SHAPES):
        pod = parse_pods({"apiVersion": "v1", "kind": "Pod",
                          **kube_pod(f"warm-{k}", cpu, mem, gpus)})[0]
        core.filter(pod, names, assume=False)


# ---------------------------------------------------------------------- one source


def _cpu() -> float:
    t = os.times()
    return t.user + t.system


def workers_cpu(running: Any) -> float:
    """CPU seconds of the builder's worker processes so far (``/proc``: reads, parses and
    builds alike; the pool's own process list)."""
    pool = getattr(running.builder, "_pool", None)
    total = 0.0
    for pid in list((getattr(pool, "_processes", None) or {}).keys()):
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def bench_source(source: str, objs: dict[str, Any], work: Path) -> dict[str, Any]:
    names = sorted(objs)
    ctx = multiprocessing.get_context("spawn")
    q = ctx.Queue()
    start_at = time.time() + 1e6  # phases are fixed once the server is ready
    producer = None
    where: str
    if source == "informer":
        objs_file = work / "objects.json"
        objs_file.write_text(json.dumps(objs))
        phases_box = ctx.Queue()
        producer = ctx.Process(target=kmock_server, args=(str(objs_file), names, phases_box, q))
        producer.start()
        url = q.get(timeout=300)
        where = str(kubeconfig(url, work / "kubeconfig"))
    else:
        d = work / ("nrt-json" if source == "nrt-dir" else "nrt-export")
        d.mkdir()
        from numalign.kube.exporter import write_object

        for name, obj in objs.items():
            if source == "nrt-dir":
                (d / f"{name}.json").write_text(json.dumps(obj))
            else:
                write_object(d, obj, "yaml")
        where = str(d)
    load0 = os.getloadavg()[0]
    w0, c0 = time.perf_counter(), _cpu()
    running = start(source, where)
    core, server = running.core, running.server
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                     daemon=True).start()
    if not core.ready.wait(600):
        raise RuntimeError(f"{source}: not ready after 600 s")
    startup = {"wall_s": time.perf_counter() - w0, "cpu_s": _cpu() - c0,
               "builder_cpu_s": workers_cpu(running), "load": load0}
    print(f"  {source}: ready after {startup['wall_s']:.1f} s wall, {startup['cpu_s']:.1f} s CPU "
          f"in the server process + {startup['builder_cpu_s']:.1f} s in its worker processes "
          f"(load average {load0:.1f} before)")
    try:
        if source == "informer":  # kmock replays every object as ADDED when the watch starts
            _settle(core, running, len(names))
        warm(core, names)
        probe = CpuProbe(server, core)
        start_at = time.time() + 10.0
        phases = [(start_at + i * PHASE_SECONDS, start_at + (i + 1) * PHASE_SECONDS)
                  for i in range(2 * RUNS)]
        churn = phases[0::2]
        cq = ctx.Queue()
        clients = ctx.Process(target=clients_process,
                              args=(server.server_address[1], names, CLIENTS, phases, cq))
        clients.start()
        if source == "informer":
            phases_box.put(churn)
        else:
            producer = ctx.Process(target=dir_writer, args=(where, names, "json" if source ==
                                                            "nrt-dir" else "export", churn, q))
            producer.start()
            assert q.get(timeout=120) == "ready"
        assert cq.get(timeout=120) == "ready"
        rows = []
        for begin, end in phases:
            time.sleep(max(0.0, begin - time.time()))
            probe.on = True
            built0, cpu0 = core.engines_built, _cpu()
            time.sleep(max(0.0, end - time.time()))
            probe.on = False
            cpu, loop_work, loop_work_cpu = probe.take()
            rows.append({"cpu": cpu, "loop_work": loop_work, "loop_work_cpu": loop_work_cpu,
                         "built": core.engines_built - built0,
                         "process_cpu_s": _cpu() - cpu0})
        written = q.get(timeout=60)
        per_phase = cq.get(timeout=120)
        clients.join(60)
    finally:
        running.close()
        if producer is not None:
            producer.terminate()
            producer.join(10)
    out: dict[str, Any] = {"startup": startup, "written": written, "phases": []}
    for i, (row, (lat, errors)) in enumerate(zip(rows, per_phase, strict=True)):
        lat = sorted(lat)
        cpu = sorted(row["cpu"])
        out["phases"].append({
            "churn": i % 2 == 0, "calls": len(lat), "errors": errors,
            "p50_ms": lat[len(lat) // 2] * 1e3 if lat else float("nan"),
            "p99_ms": p99_ms(lat) if lat else float("nan"),
            "cpu_p50_ms": cpu[len(cpu) // 2] * 1e3 if cpu else float("nan"),
            "cpu_p99_ms": p99_ms(cpu) if cpu else float("nan"),
            "updates": row["built"],
            "loop_work_p99_ms": p99_ms(row["loop_work"]) if row["loop_work"] else 0.0,
            "loop_work_max_ms": max(row["loop_work"], default=0.0) * 1e3,
            "loop_work_cpu_p99_ms": p99_ms(row["loop_work_cpu"]) if row["loop_work_cpu"] else 0.0,
            "process_cpu_ms_per_call": row["process_cpu_s"] / max(1, len(lat)) * 1e3})
    out["load_end"] = os.getloadavg()[0]
    return out


def _settle(core: Any, running: Any, n: int, seconds: float = 300.0) -> None:
    """Wait until the watch's replay of ``n`` ADDED events is applied."""
    added = core.metrics.node_updates.labels("added")
    deadline = time.monotonic() + seconds
    while added._value.get() < n and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(1.0)


# ---------------------------------------------------------------------- main


def _mm(values: list[float]) -> str:
    return f"{min(values):.2f} / {statistics.median(values):.2f}"


def main(nodes: int = NODES) -> dict[str, Any]:
    from numalign.kube.extender import builder

    if os.environ.get("CHURN_WORKER_NICE"):  # diagnostics: the builder workers' priority
        builder.WORKER_NICE = int(os.environ["CHURN_WORKER_NICE"])

    print(f"extender under churn: {nodes} NRTs, {RATE} updates/s from the source, {CLIENTS} "
          f"closed-loop /filter clients x 100 NodeNames (another process), {RUNS} runs of "
          f"{PHASE_SECONDS:.0f} s with updates + {PHASE_SECONDS:.0f} s without (the reference); "
          f"load average {os.getloadavg()[0]:.1f} at start")
    objs = objects(nodes)
    results: dict[str, Any] = {}
    for source in SOURCES:
        with tempfile.TemporaryDirectory(prefix="numalign-churn-") as tmp:
            r = results[source] = bench_source(source, objs, Path(tmp))
        on = [p for p in r["phases"] if p["churn"]]
        off = [p for p in r["phases"] if not p["churn"]]
        for label, ps in (("updates on ", on), ("updates off", off)):
            print(f"    {label}: p50 {_mm([p['p50_ms'] for p in ps])} ms, p99 "
                  f"{_mm([p['p99_ms'] for p in ps])} ms wall; server CPU per /filter p50 "
                  f"{_mm([p['cpu_p50_ms'] for p in ps])} ms, p99 "
                  f"{_mm([p['cpu_p99_ms'] for p in ps])} ms; "
                  f"{statistics.median(p['calls'] for p in ps) / PHASE_SECONDS:.0f} calls/s, "
                  f"errors {sum(p['errors'] for p in ps)}, updates published "
                  f"{statistics.median(p['updates'] for p in ps) / PHASE_SECONDS:.1f}/s; "
                  f"update work on the loop p99 {_mm([p['loop_work_p99_ms'] for p in ps])} "
                  f"ms wall ({_mm([p['loop_work_cpu_p99_ms'] for p in ps])} ms CPU), max "
                  f"{max(p['loop_work_max_ms'] for p in ps):.2f} ms")
        ratio = [a["p99_ms"] / b["p99_ms"] for a, b in zip(on, off, strict=True)]
        print("    p99 with / without updates, per run: "
              + ", ".join(f"{x:.2f}x" for x in ratio)
              + f"; written by the source {r['written']}; load average {r['load_end']:.1f} "
              "at the end")
    return results


if __name__ == "__main__":
    main()
