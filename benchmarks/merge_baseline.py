"""Issue 14's table cells against any numalign source tree, one process per cell.

Not part of ``make bench``: it exists to measure an older engine (which can take minutes
or hang) side by side with the current one. Rule-generated lists are built as each
version's managers build them: with a :class:`~numalign.engine.hints.Demand` where the version has
one, else as an opaque ``feasible`` callable. (Opaque rules on large machines are merged
exactly but may hit the step cap: see :mod:`numalign.engine.merge`.)

    git archive <commit> src | tar -x -C /tmp/old
    python -m benchmarks.merge_baseline /tmp/old/src      # before
    python -m benchmarks.merge_baseline src               # after

Each cell prints the CPU time of one call (ms), or ``>T s`` when it did not finish within
the timeout (default 30 s, ``--timeout``).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

CELL = r'''
import random, sys, time
from numalign.engine.hints import GeneratedHints, TopologyHint
from numalign.engine.merge import FitOrder, NARROWEST, merge_lists
GI = 1 << 30
kind, args = sys.argv[1], sys.argv[2:]

def family(n, free, need, pref):
    try:  # the rule as data, as this version's managers hand it over
        from numalign.engine.hints import Demand
    except ImportError:  # older versions: an opaque rule
        return GeneratedHints(tuple(range(n)), (1 << n) - 1,
                              lambda m: sum(free[i] for i in range(n) if m >> i & 1) >= need, pref)
    d = Demand.per_node({i: (free[i],) for i in range(n)}, (need,))
    return GeneratedHints(tuple(range(n)), (1 << n) - 1, d.feasible, pref, demand=d)

def grouped(n):
    def d(i, j):
        if i == j: return 10
        if i // 4 == j // 4: return 22
        if i // 16 == j // 16: return 26
        return 30 + 4 * ((i ^ j) >> 5 & 1)
    return {i: {j: d(i, j) for j in range(n)} for i in range(n)}

if kind == "scaling":
    n, case = int(args[0]), args[1]
    fit = NARROWEST
    if case.startswith("k"):
        k = int(case[1:])
        lists = [family(n, [4] * n, 4 * k, k), family(n, [4] * n, 1, 1)]
    elif case == "closest":
        lists = [family(n, [4] * n, 16, 4), family(n, [8] * n, 32, 4)]
        fit = FitOrder(grouped(n))
    else:
        lists = [family(n, [0] * (n - 3) + [4, 4, 4], 12, 3), family(n, [4] * n, 1, 1)]
    call = lambda: merge_lists(lists, (1 << n) - 1, fit)
elif kind == "explicit":
    if args[0] == "adversarial":
        full = (1 << 64) - 1
        lists = [[TopologyHint(full & ~(1 << i), False) for i in range(64)] for _ in range(5)]
    else:
        rng = random.Random(int(args[0]))
        full = (1 << 32) - 1
        lists = [[TopologyHint(rng.randint(1, full), False) for _ in range(300)] for _ in range(3)]
    call = lambda: merge_lists(lists, full, NARROWEST)
else:
    from numalign.machine.model import KubeletConfig, ReservedMemory
    from numalign.machine.sysfs import load_sysfs
    from numalign.node.admission import Node
    from numalign.pods import Container, ContainerKind, Pod, QOSClass
    capture, policy, cpus, mem, closest = args[0], args[1], int(args[2]), int(args[3]) * GI, args[4] == "1"
    options = {"max-allowable-numa-nodes": "64"}
    if closest:
        options["prefer-closest-numa-nodes"] = "true"
    m = load_sysfs(capture).machine.replace(kubelet=KubeletConfig(
        topology_manager_policy=policy, topology_manager_policy_options=options,
        cpu_manager_policy="static", memory_manager_policy="Static",
        system_reserved={"memory": GI, "cpu": 1000}, reserved_memory=(ReservedMemory(0, {"memory": GI}),)))
    r = {"cpu": cpus * 1000, "memory": mem}
    pod = Pod("b", "p", "u", QOSClass.GUARANTEED, (Container("c", ContainerKind.APP, r, r),))
    node = Node(m)
    call = lambda: node.admit(pod)
t0 = time.process_time()
call()
print(f"{(time.process_time() - t0) * 1e3:.1f}")
'''

CAPTURE = Path(__file__).resolve().parents[1].parent / "shared/topologies/hwloc/linux/256ia64-64n2s2c.tar.bz2"


def cells() -> list[tuple[str, list[str]]]:
    out: list[tuple[str, list[str]]] = []
    names = {"k3": "preferred sizes differ, k=3", "k4": "preferred sizes differ, k=4",
             "k8": "preferred sizes differ, k=8", "closest": "prefer-closest, both need k=4",
             "busy": "busy node, free only on top k=3"}
    for n in (8, 16, 32, 64):
        for case, label in names.items():
            out.append((f"{label} @ {n} NUMA", ["scaling", str(n), case]))
    for seed in ("0", "1", "2"):
        out.append((f"32 NUMA 3 x 300 random (seed {seed})", ["explicit", seed]))
    out.append(("64 NUMA 5 x 64 all-but-one", ["explicit", "adversarial"]))
    for cpus in (8, 12, 16, 100):
        for policy in ("restricted", "best-effort"):
            out.append((f"capture {cpus} CPUs + 1Gi {policy}", ["capture", str(CAPTURE), policy, str(cpus), "1", "0"]))
    for cpus in (4, 8, 12, 16, 20):
        out.append((f"capture {cpus} CPUs + 4Gi restricted", ["capture", str(CAPTURE), "restricted", str(cpus), "4", "0"]))
    for policy in ("restricted", "best-effort"):
        out.append((f"capture 16 CPUs + 1Gi prefer-closest {policy}", ["capture", str(CAPTURE), policy, "16", "1", "1"]))
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("src", help="a numalign source tree (the directory holding numalign/)")
    parser.add_argument("--timeout", type=float, default=30.0)
    args = parser.parse_args(argv)
    env = {**os.environ, "PYTHONPATH": str(Path(args.src).resolve()), "PYTHONDONTWRITEBYTECODE": "1"}
    for label, cell in cells():
        try:
            done = subprocess.run([sys.executable, "-c", CELL, *cell], env=env, capture_output=True,
                                  text=True, timeout=args.timeout, cwd="/", check=False)
            lines = done.stdout.strip().splitlines()
            result = f"{lines[-1]} ms" if done.returncode == 0 and lines else f"error: {done.stderr.strip()[-80:]}"
        except subprocess.TimeoutExpired:
            result = f">{args.timeout:.0f} s"
        print(f"{label:<52} {result}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
