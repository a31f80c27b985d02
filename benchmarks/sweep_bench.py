"""``numalign sweep`` on 1 worker and on 2: the same 8-cell sweep, wall clock.

The sweep: the ``numalign`` profile on the built-in 40-node ``default`` cluster, its default
synthetic workload (about 1,400 pods), seeds 1 to 8 - eight cells of about the same cost
(10-20 s each on the machine of the README's numbers). Each run is the whole command as a user
runs it (``numalign sweep FILE --workers N``, a fresh LocalCluster, a fresh output directory so
nothing is resumed): Dask start-up, cells, tables and report. Printed:

* wall time on 1 and on 2 workers, of the whole command and of its cells (first submission
  to last result: ``cells_wall_s`` in sweep.json), and the speed-ups (1-worker time / 2-worker
  time; the reference is the 1-worker run of the same ``make bench``); the issue's target is
  >= 1.7x on 2 cores for cells of >= 10 s;
* the cells' mean wall time (as the workers measured it), and each worker's peak resident
  memory (``getrusage`` in the worker process, from ``sweep.json``).

Wall-clock numbers: a loaded machine inflates them (``make bench`` prints the load first).
``python -m benchmarks.sweep_bench [SEEDS]`` runs a smaller sweep (e.g. ``4``).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

CELLS = 8


def sweep_file(folder: Path, seeds: int) -> Path:
    path = folder / "bench.yaml"
    path.write_text(
        "name: bench\n"
        "description: the numalign profile on the default cluster, one cell per seed\n"
        "axes:\n"
        "  cluster: builtin:default\n"
        "  profile: numalign\n"
        "  workload: synthetic\n"
        f"  seed: [{', '.join(str(s) for s in range(1, seeds + 1))}]\n"
    )
    return path


def run(path: Path, out: Path, workers: int) -> tuple[float, dict[str, Any], list[float]]:
    """Wall seconds of one ``numalign sweep`` run, its sweep.json ``run``, the cells' times."""
    argv = [sys.executable, "-m", "numalign", "sweep", str(path), "--workers", str(workers),
            "--out", str(out), "--quiet"]
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=3600)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"sweep failed ({proc.returncode}): {proc.stderr[-2000:]}")
    doc = json.loads((out / "sweep.json").read_text())
    return wall, doc["run"], [float(c["wall_s"]) for c in doc["cells"]]


def main(seeds: int = CELLS) -> None:
    print(f"sweep: {seeds} cells (numalign profile, builtin:default, synthetic, seeds 1-{seeds})")
    with tempfile.TemporaryDirectory(prefix="numalign-sweep-bench-") as tmp:
        folder = Path(tmp)
        path = sweep_file(folder, seeds)
        results: dict[int, tuple[float, float]] = {}
        for workers in (1, 2):
            wall, info, cells = run(path, folder / f"out-{workers}", workers)
            results[workers] = (wall, float(info["cells_wall_s"]))
            memory = ", ".join(f"{m:.0f}" for m in info["peak_rss_mib_per_worker"].values())
            print(f"  {workers} worker{'s' if workers > 1 else ' '}: {wall:6.1f} s wall, of which "
                  f"cells {info['cells_wall_s']:.1f} s (each {sum(cells) / len(cells):.1f} s "
                  f"mean, {min(cells):.1f}-{max(cells):.1f} s); peak memory per worker: "
                  f"{memory} MiB")
        (w1, c1), (w2, c2) = results[1], results[2]
        print(f"  speed-up on 2 workers: {w1 / w2:.2f}x whole command, {c1 / c2:.2f}x cells "
              "(1-worker / 2-worker wall, same run; target >= 1.7x)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else CELLS)
