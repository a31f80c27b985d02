"""Paired CPU time of whole commands on two source trees: did a change slow anything down?

    python benchmarks/tree_timing.py 1c0ca8d            # that ref vs this working tree
    python benchmarks/tree_timing.py 1c0ca8d --runs 5

A temporary ``git worktree`` of the base ref is made; each command runs as
``python -m numalign ...`` with ``PYTHONPATH`` set to one tree's ``src/``, the two trees
alternating (base first on even rounds, the working tree first on odd ones) so that a change
in the machine's load touches both alike. The figure is the child's CPU time (user + system),
not the wall clock: on a shared machine it is the steadier of the two. Inputs come from this
checkout for both sides. Printed: min / median per tree and the ratio of the medians.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

COMMANDS: dict[str, list[str]] = {
    "merge --jsonl examples/merge-cases.jsonl": ["merge", "--jsonl", "examples/merge-cases.jsonl"],
    "admit dual-socket list": ["admit", "-m", "examples/dual-socket-ht.yaml", "-o", "json",
                               "examples/pods/dual-socket-list.yaml"],
    "simulate default cluster: numalign,default": [
        "simulate", "--cluster", "builtin:default", "--profiles", "numalign,default", "--quiet",
        "--out", "{out}"],
    "simulate default cluster: koordinator,volcano": [
        "simulate", "--cluster", "builtin:default", "--profiles", "koordinator,volcano", "--quiet",
        "--out", "{out}"],
}


def cpu_of(src: Path, args: list[str]) -> float:
    """CPU seconds (user + system) of ``python -m numalign ARGS`` on the tree ``src``."""
    env = dict(os.environ, PYTHONPATH=str(src))
    with tempfile.TemporaryDirectory() as out:
        argv = [a.replace("{out}", out) for a in args]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([sys.executable, "-m", "numalign", *argv], env=env, cwd=REPO,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("base_ref")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--only", default="", metavar="TEXT",
                    help="only the commands whose name contains TEXT (e.g. numalign)")
    args = ap.parse_args(argv)
    commands = {n: c for n, c in COMMANDS.items() if args.only in n}
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "base"
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(tree),
                        args.base_ref], check=True, capture_output=True)
        try:
            trees = {"base": tree / "src", "this": REPO / "src"}
            times: dict[tuple[str, str], list[float]] = {}
            for i in range(args.runs):
                for name, command in commands.items():
                    for side in ("base", "this") if i % 2 == 0 else ("this", "base"):
                        times.setdefault((name, side), []).append(cpu_of(trees[side], command))
            print(f"CPU s (user + system), min / median of {args.runs}; load {os.getloadavg()[0]:.1f}")
            for name in commands:
                b, t = times[(name, "base")], times[(name, "this")]
                print(f"  {name:48s} base {min(b):7.2f} / {statistics.median(b):7.2f}   "
                      f"this {min(t):7.2f} / {statistics.median(t):7.2f}   "
                      f"ratio {statistics.median(t) / statistics.median(b):.3f}")
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)],
                           check=False, capture_output=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
