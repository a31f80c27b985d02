"""Every exact scheduler profile's CPU time per pod, as a ratio to numalign's in the same run.

The target (issue 26): each of ``koordinator``, ``volcano`` and the ``nrt-snn`` variants costs at
most 1.5x numalign's time per pod on every benchmark shape and on the Alibaba replay. The cells:

* ``5000x2`` and ``5000x8``: :mod:`benchmarks.scheduler_bench`'s clusters (half
  ``single-numa-node``, half ``restricted`` with pod scope) and its synthetic mix (seed 7),
  :data:`PODS` pods; CPU time of the scheduling loop (``time.process_time``; cluster and
  workload set-up excluded), per pod;
* ``alibaba2025``: ``numalign simulate --cluster builtin:alibaba2025 --workload
  alibaba2025?limit=3000`` (the first 3,000 pods of the trace, on 1,000 nodes): the simulator's
  ``scheduler_cpu_s`` (the scheduler thread's CPU time over all its cycles, retries of pending
  pods included) per arrived pod. Skipped, saying so, when the trace is not in ``../shared``.

Every run is a fresh process (``python -m benchmarks.profiles_bench --cell NAME --profile P``)
on a new cluster: the profiles keep answers in module-level memos keyed by content (node
states, zone amounts, pod shapes), so a second run in the same process would start warm. The
:data:`RUNS` runs go round by round over the profiles, so that a change of load on a shared
machine hits them alike; the ratio is the profile's time per pod over numalign's, min over min
and median over median of the same ``make bench``. Profiles
decide differently (each its own rules), so they do not place the same pods; the counts are
printed next to the times.

``python -m benchmarks.profiles_bench [CELL ...] [--profiles P,P,...]`` runs some cells, or
some profiles (with numalign, the reference), only.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.scheduler_bench import run as scheduler_run
from benchmarks.scheduler_bench import template
from benchmarks.timing import best_median, child_json

RUNS = 3
PODS = 3000
REPLAY_PODS = 3000
TARGET = 1.5
REFERENCE = "numalign"
PROFILES = ("numalign", "koordinator", "volcano", "nrt-snn", "nrt-snn-least-numa",
            "nrt-snn-most-allocated", "nrt-snn-balanced")
SHARED = Path(__file__).resolve().parents[1].parent / "shared"
TRACE = SHARED / "traces" / "alibaba-cluster-trace-gpu-v2025"


@dataclass(frozen=True)
class Cell:
    name: str
    numa: int = 0  # a scheduler cell's NUMA nodes per node (0: the replay)


CELLS = (Cell("5000x2", 2), Cell("5000x8", 8), Cell("alibaba2025"))


def _scheduler_cell(cell: Cell, profile: str) -> dict[str, Any]:
    from numalign.sim.cluster import load_cluster
    from numalign.sim.sources import parse_workload_spec

    nodes = load_cluster(template(5000, cell.numa), "bench")
    pods = [a.pod for a in parse_workload_spec(f"synthetic:count={PODS},seed=7", None, cluster=nodes)]
    _, placed, _, _, cpu = scheduler_run(profile, nodes, pods)
    return {"pods": len(pods), "cpu": cpu, "scheduled": placed}


def _replay_cell(profile: str) -> dict[str, Any]:
    from numalign.sim.cluster import builtin_cluster
    from numalign.sim.runner import simulate
    from numalign.sim.sources import parse_workload_spec

    nodes = builtin_cluster("alibaba2025")
    workload = parse_workload_spec(f"alibaba2025?limit={REPLAY_PODS}", str(SHARED), cluster=nodes)
    summary = simulate(nodes, workload, [profile]).recorder.summary()["profiles"][profile]
    return {"pods": int(summary["arrived"]), "cpu": float(summary["scheduler_cpu_s"]),
            "scheduled": int(summary["scheduled"])}


def measure(cell: Cell, profile: str) -> dict[str, Any]:
    """The child's job: one run of ``profile`` on ``cell``, in a fresh process (cold memos)."""
    return _replay_cell(profile) if cell.numa == 0 else _scheduler_cell(cell, profile)


def _child(cell: Cell, profile: str) -> dict[str, Any]:
    return child_json("benchmarks.profiles_bench", "--cell", cell.name, "--profile", profile)


def main(names: list[str] | None = None, profiles: tuple[str, ...] = PROFILES) -> None:
    cells = [c for c in CELLS if not names or c.name in names]
    profiles = (REFERENCE, *(p for p in profiles if p != REFERENCE))
    print(f"profiles: CPU ms per pod (min / median of {RUNS} runs, one process per run, round by round) "
          f"and the ratio to {REFERENCE}'s in the same run (min/min, median/median); target <= {TARGET}x")
    print(f"  {'cell':<12} {'profile':<23} {'pods':>5} {'placed':>6} {'ms/pod min':>10} {'median':>8} "
          f"{'ratio min':>9} {'median':>7}")
    for cell in cells:
        if cell.numa == 0 and not TRACE.is_dir():
            print(f"  {cell.name:<12} skipped: the Alibaba 2025 trace is not in {TRACE}")
            continue
        runs: dict[str, list[dict[str, Any]]] = {p: [] for p in profiles}
        t0 = time.perf_counter()
        for _ in range(RUNS):
            for profile in profiles:
                runs[profile].append(_child(cell, profile))
        ref: tuple[float, float] | None = None
        for profile in profiles:
            r = {"pods": runs[profile][0]["pods"], "scheduled": runs[profile][-1]["scheduled"]}
            best, med = best_median([run["cpu"] for run in runs[profile]])
            per = (best / r["pods"] * 1e3, med / r["pods"] * 1e3)
            if profile == REFERENCE:
                ref = per
            assert ref is not None
            ratio = (per[0] / ref[0], per[1] / ref[1])
            flag = "" if profile == REFERENCE or ratio[1] <= TARGET else "  over target"
            print(f"  {cell.name:<12} {profile:<23} {r['pods']:>5} {r['scheduled']:>6} {per[0]:>10.3f} "
                  f"{per[1]:>8.3f} {ratio[0]:>8.2f}x {ratio[1]:>6.2f}x{flag}", flush=True)
        print(f"  ({cell.name}: {time.perf_counter() - t0:.0f} s for {RUNS} rounds)", flush=True)


def _cli(argv: list[str]) -> None:
    if argv[:1] == ["--cell"]:  # the child of one (cell, profile)
        cell = next(c for c in CELLS if c.name == argv[1])
        profile = argv[3] if argv[2:3] == ["--profile"] else REFERENCE
        print(json.dumps(measure(cell, profile)))
        return
    profiles = PROFILES
    if "--profiles" in argv:
        at = argv.index("--profiles")
        if at + 1 >= len(argv):
            raise SystemExit("--profiles needs a comma-separated list")
        profiles = tuple(argv[at + 1].split(","))
        argv = argv[:at] + argv[at + 2:]
        bad = [p for p in profiles if p not in PROFILES]
        if bad:
            raise SystemExit(f"unknown profile(s) {bad}; profiles: {list(PROFILES)}")
    unknown = [a for a in argv if a not in {c.name for c in CELLS}]
    if unknown:
        raise SystemExit(f"unknown cell(s) {unknown}; cells: {[c.name for c in CELLS]}")
    main(argv or None, profiles)


if __name__ == "__main__":
    _cli(sys.argv[1:])
