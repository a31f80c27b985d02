"""Run every benchmark module: ``python -m benchmarks [name ...]``."""

from __future__ import annotations

import importlib
import sys

MODULES = ["merge_bench", "admission_bench", "scheduler_bench", "extender_bench", "informer_bench"]


def main(argv: list[str]) -> int:
    names = argv or MODULES
    for name in names:
        module = importlib.import_module(f"benchmarks.{name}")
        module.main()
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
