"""Run every benchmark module: ``python -m benchmarks [name ...]``.

The machine (CPU model, cores, load, Python) is printed first: the numbers below are only
comparable on the same box, and a loaded box inflates wall-clock figures (the benchmarks report
CPU time where they can).
"""

from __future__ import annotations

import importlib
import sys
import time

from benchmarks.timing import machine_description

MODULES = ["startup_bench", "merge_bench", "admission_bench", "devices_bench", "scheduler_bench",
           "profiles_bench", "sim_bench", "extender_bench", "extender_costly_bench", "informer_bench",
           "extender_churn_bench", "sweep_bench"]


def main(argv: list[str]) -> int:
    names = argv or MODULES
    unknown = [n for n in names if n not in MODULES]
    if unknown:  # before anything runs (a cell name here is not a module)
        print(f"benchmarks: unknown benchmark(s) {unknown}; names: {', '.join(MODULES)}; a "
              f"benchmark's own arguments (cells, profiles) go to `python -m benchmarks.NAME ARGS`",
              file=sys.stderr)
        return 2
    print(machine_description())
    print()
    for name in names:
        t0 = time.perf_counter()
        module = importlib.import_module(f"benchmarks.{name}")
        module.main()
        print(f"({name}: {time.perf_counter() - t0:.0f} s wall)")
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
