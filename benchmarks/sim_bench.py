"""Simulator costs: the Alibaba 2025 replay's fixed costs next to its replay, and a
100,000-pod replay on 5,000 nodes.

1. ``numalign simulate --cluster builtin:alibaba2025 --workload alibaba2025 --profiles
   numalign`` cut into its phases, each timed in CPU seconds (``time.process_time``) in a
   fresh process (:data:`RUNS` processes: best / median): the fixed costs - trace parse
   (23,871 rows), cluster build (the template's 1,000 nodes, then the replay's node engines,
   scheduler and prefilter), report writing (``summary.json`` and ``report.html`` with its
   figures, Matplotlib's import included - a first report in a process pays it; its share is
   printed on the line below) - and the replay itself (the reference of the same run: what the
   fixed costs are paid for).
2. ``synthetic:count=100000,seed=7`` on the 5,000-node x 8-NUMA cluster of
   ``scheduler_bench`` (half ``single-numa-node``, half ``restricted``, pod scope) under the
   ``numalign`` profile, one process: workload generation, the replay's CPU seconds (the
   scheduler's own share from the replay's metrics), scheduling cycles, and the process's
   peak RSS (``ru_maxrss``) next to its RSS before the replay (interpreter, cluster, workload).

``python -m benchmarks.sim_bench [alibaba|100k]`` runs one part.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.timing import best_median, peak_rss_mib

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
RUNS = 3
BIG_PODS = 100_000
BIG_NODES = 5000


def alibaba_phases() -> dict[str, float]:
    """One ``numalign simulate`` of the Alibaba 2025 trace, phase by phase (CPU seconds)."""
    from numalign.scheduler import Cluster, Scheduler, get_profile
    from numalign.sim.cli_run import simulation_summary
    from numalign.sim.cluster import resolve_cluster
    from numalign.sim.report import write_report
    from numalign.sim.sources import parse_workload_spec, seeded_spec

    t = time.process_time
    out: dict[str, float] = {}
    t0 = t()
    nodes = resolve_cluster("builtin:alibaba2025")
    t1 = t()
    spec = seeded_spec("alibaba2025", 1)
    workload = parse_workload_spec(spec, SHARED, cluster=nodes)
    t2 = t()
    Scheduler(Cluster(nodes), get_profile("numalign"))  # what the replay builds first
    t3 = t()
    summary, result = simulation_summary(nodes, workload, ["numalign"], spec=spec,
                                         cluster_label="builtin:alibaba2025")
    t4 = t()
    for module in ("matplotlib.figure", "matplotlib.backends.backend_agg"):
        importlib.import_module(module)  # what the first figure loads (once per process)
    t4b = t()
    with tempfile.TemporaryDirectory(prefix="numalign-sim-bench-") as out_dir:
        write_report(Path(out_dir), summary, result.recorder.series(), result.heatmaps)
    t5 = t()
    out["trace parse"] = t2 - t1
    out["cluster build"] = (t1 - t0) + (t3 - t2)
    # the replay builds its own cluster (as measured above): the rest is the replay proper
    out["replay"] = (t4 - t3) - (t3 - t2)
    out["report"] = t5 - t4
    out["matplotlib import"] = t4b - t4
    out["pods"] = float(len(workload))
    return out


def big_replay() -> dict[str, float]:
    """The 100,000-pod replay on 5,000 nodes (numalign profile)."""
    from benchmarks.scheduler_bench import template
    from numalign.sim.cluster import load_cluster
    from numalign.sim.runner import simulate
    from numalign.sim.sources import parse_workload_spec

    t = time.process_time
    t0 = t()
    nodes = load_cluster(template(BIG_NODES, 8), "bench")
    workload = parse_workload_spec(f"synthetic:count={BIG_PODS},seed=7", None, cluster=nodes)
    t1 = t()
    rss_before = peak_rss_mib()
    result = simulate(nodes, workload, ["numalign"])
    t2 = t()
    profile = result.recorder.summary(cluster={}, workload={})["profiles"]["numalign"]
    return {"workload": t1 - t0, "replay": t2 - t1, "scheduler": float(profile["scheduler_cpu_s"]),
            "cycles": float(profile["scheduling_cycles"]), "scheduled": float(profile["scheduled"]),
            "rss_before": rss_before, "rss_peak": peak_rss_mib(), "span_h": workload.span_s / 3600}


def _child(part: str) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)}
    proc = subprocess.run([sys.executable, "-m", "benchmarks.sim_bench", "--child", part],
                          capture_output=True, text=True, env=env, cwd=ROOT, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"sim_bench {part}: {proc.stderr.strip()[-2000:]}")
    result: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def main_alibaba() -> None:
    if not (SHARED / "traces").is_dir():
        print(f"sim alibaba2025: skipped ({SHARED / 'traces'} not found)")
        return
    runs = [_child("alibaba") for _ in range(RUNS)]
    print(f"sim alibaba2025 (numalign profile, {int(runs[0]['pods']):,} pods, 1,000 nodes): CPU s, "
          f"best / median of {RUNS} processes")
    fixed = [r["trace parse"] + r["cluster build"] + r["report"] for r in runs]
    rows: list[tuple[str, list[float]]] = [(k, [r[k] for r in runs]) for k in
                                           ("trace parse", "cluster build", "report", "replay")]
    rows.insert(3, ("  matplotlib import", [r["matplotlib import"] for r in runs]))
    rows.insert(4, ("fixed costs (sum)", fixed))
    for name, values in rows:
        best, med = best_median(values)
        print(f"  {name:<20} {best:7.2f} / {med:6.2f}")
    replay = best_median([r["replay"] for r in runs])[1]
    print(f"  fixed costs = {best_median(fixed)[1] / replay:.0%} of the replay's CPU time "
          "(median); target: fixed costs < 3 s")


def main_big() -> None:
    r = _child("100k")
    print(f"sim {BIG_PODS:,} synthetic pods on {BIG_NODES:,} nodes x 8 NUMA (numalign profile, "
          f"{r['span_h']:.1f} h simulated), one process:")
    print(f"  workload generation {r['workload']:.1f} s CPU; replay {r['replay']:.1f} s CPU "
          f"({r['replay'] / 60:.2f} min; target < 5 min), of which scheduling cycles "
          f"{r['scheduler']:.1f} s ({int(r['cycles']):,} cycles, {int(r['scheduled']):,} pods scheduled)")
    print(f"  peak RSS {r['rss_peak']:.0f} MiB (before the replay: {r['rss_before']:.0f} MiB: "
          "interpreter, cluster template, workload)")


def main(parts: list[str] | None = None) -> None:
    for part in parts or ["alibaba", "100k"]:
        t0 = time.perf_counter()
        {"alibaba": main_alibaba, "100k": main_big}[part]()
        print(f"  ({time.perf_counter() - t0:.0f} s wall)", flush=True)


def _cli(argv: list[str]) -> None:
    if argv[:1] == ["--child"]:
        result: dict[str, Any] = alibaba_phases() if argv[1] == "alibaba" else big_replay()
        print(json.dumps(result))
        return
    unknown = [a for a in argv if a not in ("alibaba", "100k")]
    if unknown:
        raise SystemExit(f"unknown part(s) {unknown}; parts: alibaba, 100k")
    main(argv or None)


if __name__ == "__main__":
    _cli(sys.argv[1:])
