"""A digest of every scheduling outcome of a benchmark cell, to show that a speed change changed
no decision: run it on two source trees and compare the lines.

    python -m benchmarks.placement_digest [CELL ...] [--profiles P,P,...] [--pods N]
    PYTHONPATH=<another tree's src> python -m benchmarks.placement_digest ...

For each cell (``5000x2``, ``5000x8``: :mod:`benchmarks.scheduler_bench`'s clusters, its synthetic
mix with seed 7, :data:`PODS` pods by default) and profile, one line: the profile, the cell, how
many pods were placed, and a SHA-256 over every pod's outcome in order (placed node, NUMA count,
score, admitted, reason). Not part of ``make bench``: it measures no time.
"""

from __future__ import annotations

import argparse
import hashlib

from benchmarks.scheduler_bench import template

PODS = 3000
#: the most pods a run generates (a few minutes at the slowest profile)
MAX_PODS = 100_000
CELLS = {"5000x2": 2, "5000x8": 8}
PROFILES = ("nrt-snn", "nrt-snn-least-numa", "nrt-snn-most-allocated", "nrt-snn-balanced")


def digest(cell: str, profile: str, pods: int) -> tuple[int, str]:
    """(pods placed and admitted, hex digest of every outcome) of ``profile`` on ``cell``."""
    from numalign.scheduler.cluster import Cluster
    from numalign.scheduler.profiles import get_profile
    from numalign.scheduler.scheduler import Scheduler
    from numalign.sim.cluster import load_cluster
    from numalign.sim.sources import parse_workload_spec

    nodes = load_cluster(template(5000, CELLS[cell]), "bench")
    workload = [a.pod for a in parse_workload_spec(f"synthetic:count={pods},seed=7", None, cluster=nodes)]
    sched = Scheduler(Cluster(nodes), get_profile(profile))
    h = hashlib.sha256()
    placed = 0
    for pod in workload:
        out = sched.schedule(pod)
        at = out.placement
        placed += out.admitted
        h.update(repr((out.admitted, out.reason,
                       None if at is None else (at.node, at.numa_count, at.score))).encode())
    return placed, h.hexdigest()[:16]


def cell_arguments(module: str, doc: str, profiles: tuple[str, ...], argv: list[str] | None) -> argparse.Namespace:
    """The command line of a script over :data:`CELLS`: cells (default: all), ``--profiles``,
    ``--pods``; an unknown cell exits 2."""
    parser = argparse.ArgumentParser(prog=f"python -m {module}", description=doc.split("\n")[0])
    parser.add_argument("cells", nargs="*", metavar="CELL", help=f"one of {', '.join(CELLS)} (default: both)")
    parser.add_argument("--profiles", default=",".join(profiles))
    parser.add_argument("--pods", type=int, default=PODS)
    args = parser.parse_args(argv)
    if not 1 <= args.pods <= MAX_PODS:
        parser.error(f"--pods must be between 1 and {MAX_PODS:,}, got {args.pods}")
    unknown = [c for c in args.cells if c not in CELLS]
    if unknown:
        parser.error(f"unknown cell(s) {', '.join(unknown)}; cells: {', '.join(CELLS)}")
    args.cells = args.cells or list(CELLS)
    return args


def main(argv: list[str] | None = None) -> None:
    args = cell_arguments("benchmarks.placement_digest", __doc__ or "", PROFILES, argv)
    for cell in args.cells:
        for profile in args.profiles.split(","):
            placed, hexdigest = digest(cell, profile, args.pods)
            print(f"{profile:24s} {cell:8s} placed {placed:5d}  {hexdigest}", flush=True)


if __name__ == "__main__":
    main()
