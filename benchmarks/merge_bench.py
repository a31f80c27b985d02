"""Merge time: numalign's engine against the kubelet's product fold, same run.

Every engine number is CPU time per call, ``min / median`` of 3 runs (a run repeats the call
until it has used >= 20 ms). References, measured or derived in the same run:

* ``plain fold``: the kubelet's product fold as a plain Python loop (:func:`plain_fold`, in
  this file: every permutation merged and folded with ``compare``, masks as ints, no object
  per permutation), the in-language reference of explicit hint lists (section 2), run where
  it finishes within a few seconds; the answers are checked against
  :func:`numalign.engine.reference.product_fold` there;
* ``Go est.``: the kubelet's own Go fold, quoted at 34 ns per permutation (measured once on
  the kubelet's code, not here; the product of the list lengths; a rule-generated list on N
  nodes stands for its 2^N - 1 listed masks).

Every row prints ``Go/engine``: the Go estimate divided by the engine's median (above 1: the
engine is faster than the kubelet's fold would be).

Sections:

1. the merge-scaling table of issue 14 (2 providers, 8/16/32/64 NUMA; ``k`` = nodes the
   wide provider needs);
2. explicit hint lists (the kubelet's own input form), from the kubelet's everyday sizes
   (2 NUMA nodes, 3 hints per provider: a handful of permutations) through random lists of
   16-81 permutations (around the engine's switch from folding to its small-input fold) up
   to the random 32-NUMA 3 x 300 case and the adversarial 64-NUMA 5 x 64 "all nodes but
   one" case. Targets (issue 26): engine / plain fold <= 1.5 below 30 permutations, < 1
   from 30 on; the Go estimate for 10^4 permutations and more;
3. admissions on the real 64-NUMA capture (``256ia64-64n2s2c``; cpuManagerPolicy static,
   memoryManagerPolicy Static, max-allowable-numa-nodes 64): Guaranteed pods, a fresh node
   per pod; the merge alone and the whole ``Node.admit`` (incl. CPU allocation), incl.
   prefer-closest pods spanning 4-60 of the 64 nodes;
4. a sweep over loaded machines (random free CPUs, memory, GPUs; 2-5 providers, Narrowest
   and prefer-closest): the worst merge per NUMA count.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable, Sequence
from itertools import product
from pathlib import Path
from typing import Any

from numalign.engine.bitmask import iterate_masks, mask_of
from numalign.engine.hints import Demand, GeneratedHints, HintList, TopologyHint, flatten
from numalign.engine.merge import NARROWEST, FitOrder, merge_lists
from numalign.engine.reference import product_fold

GO_NS_PER_PERMUTATION = 34
FOLD_BUDGET_S = 5.0
CAPTURE = (
    Path(__file__).resolve().parents[1].parent
    / "shared" / "topologies" / "hwloc" / "linux" / "256ia64-64n2s2c.tar.bz2"
)
GI = 1 << 30


# --------------------------------------------------------------------------- timing


def cpu_ms(fn: Callable[[], object], runs: int = 3, min_run_s: float = 0.02) -> tuple[float, float]:
    """(min, median) over ``runs`` runs of the CPU time per call, in ms."""
    per_call: list[float] = []
    for _ in range(runs):
        calls = 0
        t0 = time.process_time()
        while True:
            fn()
            calls += 1
            used = time.process_time() - t0
            if used >= min_run_s:
                break
        per_call.append(used / calls * 1e3)
    return min(per_call), statistics.median(per_call)


def fmt_s(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f} us"
    if seconds < 1:
        return f"{seconds * 1e3:.1f} ms"
    if seconds < 1e5:
        return f"{seconds:,.1f} s"
    return f"{seconds:.1e} s"


def ratio_txt(go_s: float, engine_ms: float) -> str:
    """Go estimate / engine time, as ``12x`` (or ``0.4x``: the engine is slower)."""
    ratio = go_s * 1e3 / engine_ms
    if ratio >= 1e6:
        return f"{ratio:.0e}x"
    return f"{ratio:.1f}x" if ratio < 10 else f"{ratio:,.0f}x"


def permutations(lists: Sequence[HintList]) -> int:
    out = 1
    for h in lists:
        out *= (2 ** len(h.nodes) - 1) if isinstance(h, GeneratedHints) else len(h)
    return out


def go_estimate_s(lists: Sequence[HintList]) -> float:
    return permutations(lists) * GO_NS_PER_PERMUTATION * 1e-9


# --------------------------------------------------------------------------- inputs


def family(n: int, free: Sequence[int], need: int, preferred: int) -> GeneratedHints:
    """A provider's rule: masks whose free amounts reach ``need`` (like the CPU manager's)."""
    d = Demand.per_node({i: (free[i],) for i in range(n)}, (need,))
    return GeneratedHints(tuple(range(n)), (1 << n) - 1, d.feasible, preferred, demand=d)


def grouped_distances(n: int) -> dict[int, dict[int, int]]:
    """SLIT-like: 22 inside groups of 4, 26 inside groups of 16, 30/34 further."""

    def d(i: int, j: int) -> int:
        if i == j:
            return 10
        if i // 4 == j // 4:
            return 22
        if i // 16 == j // 16:
            return 26
        return 30 + 4 * ((i ^ j) >> 5 & 1)

    return {i: {j: d(i, j) for j in range(n)} for i in range(n)}


def scaling_cases(n: int) -> list[tuple[str, list[HintList], FitOrder]]:
    out: list[tuple[str, list[HintList], FitOrder]] = []
    for k in (3, 4, 8):
        lists: list[HintList] = [family(n, [4] * n, 4 * k, k), family(n, [4] * n, 1, 1)]
        out.append((f"preferred sizes differ, k={k}", lists, NARROWEST))
    both: list[HintList] = [family(n, [4] * n, 16, 4), family(n, [8] * n, 32, 4)]
    out.append(("prefer-closest, both need k=4", both, FitOrder(grouped_distances(n))))
    busy: list[HintList] = [family(n, [0] * (n - 3) + [4, 4, 4], 12, 3), family(n, [4] * n, 1, 1)]
    out.append(("busy node, free only on top k=3", busy, NARROWEST))
    return out


def idle_list(nodes: Sequence[int], near: Sequence[int]) -> list[TopologyHint]:
    """Every mask touching one of ``near``; single-node masks preferred."""
    near_mask = mask_of(near)
    return [TopologyHint(m, m.bit_count() == 1) for m in iterate_masks(nodes) if m & near_mask]


def random_lists(n: int, providers: int, hints: int, seed: int) -> list[HintList]:
    rng = random.Random(seed)
    full = (1 << n) - 1
    return [[TopologyHint(rng.randint(1, full), False) for _ in range(hints)] for _ in range(providers)]


def plain_fold(lists: Sequence[Sequence[TopologyHint]], default: int) -> TopologyHint:
    """The kubelet's ``HintMerger.Merge`` (Narrowest) as a plain Python product fold: the
    in-language reference of section 2."""
    bnp = 0  # bestNonPreferredAffinityCount: the largest of the lists' narrowest affinities
    for hints in lists:
        counts = [h.affinity.bit_count() for h in hints if h.affinity is not None]
        if counts and min(counts) > bnp:
            bnp = min(counts)
    best: int | None = None
    best_pref = False
    best_count = 0
    for perm in product(*lists):
        mask, pref, first = default, True, None
        for h in perm:
            if not h.preferred:
                pref = False
            if h.affinity is not None:
                mask &= h.affinity
                if first is None:
                    first = h.affinity
                elif h.affinity != first:
                    pref = False
        if mask == 0:
            continue
        count = mask.bit_count()
        if best is None or (pref and not best_pref):
            take = True
        elif best_pref and not pref:
            take = False
        elif pref or best_count > bnp:  # fitter: narrower, then the lower mask
            take = (count, mask) < (best_count, best)
        elif best_count == bnp:
            take = count == bnp and mask < best
        elif count > bnp:
            take = False
        elif count == bnp:
            take = True
        else:
            take = count > best_count or (count == best_count and mask < best)
        if take:
            best, best_pref, best_count = mask, pref, count
    return TopologyHint(default, False) if best is None else TopologyHint(best, best_pref)


def explicit_cases() -> list[tuple[str, int, list[HintList]]]:
    out: list[tuple[str, int, list[HintList]]] = []
    two = [0, 1]
    out.append(("2 NUMA x2 (3 hints each), preferred", 2, [idle_list(two, two)] * 2))
    out.append(("2 NUMA x2, memory on node 1 only", 2, [idle_list(two, two), idle_list(two, [1])]))
    out.append(("2 NUMA x2, no preferred merged hint", 2, [idle_list(two, [0]), idle_list(two, [1])]))
    out.append(("2 NUMA x3, one provider without preference", 2,
                [idle_list(two, two), [TopologyHint(None, True)], idle_list(two, two)]))
    out.append(("2 NUMA x5 (cpu, memory, 2 hugepages, gpu)", 2, [idle_list(two, two)] * 5))
    four = [0, 1, 2, 3]
    out.append(("4 NUMA x2, preferred", 4, [idle_list(four, four)] * 2))
    out.append(("4 NUMA x2, no preferred merged hint", 4, [idle_list(four, [0, 1]), idle_list(four, [2, 3])]))
    for n, providers, hints, seed in ((2, 2, 4, 3), (3, 2, 5, 3), (3, 3, 3, 3), (2, 5, 2, 3),
                                      (3, 2, 6, 3), (4, 2, 6, 3), (3, 2, 7, 1), (2, 6, 2, 3),
                                      (4, 2, 8, 3), (3, 3, 4, 3)):
        out.append((f"{n} NUMA {providers} x {hints} random, not preferred", n,
                    random_lists(n, providers, hints, seed)))
    out.append(("3 NUMA x2 idle, single nodes preferred", 3, [idle_list([0, 1, 2], [0, 1, 2])] * 2))
    out.append(("2 NUMA x4 idle, preferred", 2, [idle_list(two, two)] * 4))
    for n, providers in ((4, 3), (8, 2), (8, 4)):
        nodes = list(range(n))
        out.append((f"{n} NUMA x{providers} idle, single nodes preferred", n,
                    [idle_list(nodes, nodes) for _ in range(providers)]))
        groups = [nodes[p::providers] for p in range(providers)]
        out.append((f"{n} NUMA x{providers} no preferred merged hint", n,
                    [idle_list(nodes, g) for g in groups]))
    for p in (2, 4, 8):
        nodes = list(range(10))
        groups = [nodes[i::p] or nodes[-1:] for i in range(p)]
        out.append((f"10 NUMA x{p} full lists, no preferred", 10, [idle_list(nodes, g) for g in groups]))
    out.append(("20 NUMA 3 x 60 random, not preferred", 20, random_lists(20, 3, 60, 1)))
    for seed in range(3):
        out.append((f"32 NUMA 3 x 300 random (seed {seed})", 32, random_lists(32, 3, 300, seed)))
    full = (1 << 64) - 1
    adversarial: list[HintList] = [[TopologyHint(full & ~(1 << i), False) for i in range(64)] for _ in range(5)]
    out.append(("64 NUMA 5 x 64 'all nodes but one'", 64, adversarial))
    return out


# --------------------------------------------------------------------------- sections


def section_scaling() -> None:
    print("1. merge scaling, 2 providers (ms CPU, min / median of 3; Go est. = 34 ns x 2^N^2)")
    print(f"   {'case':<34} {'NUMA':>4} {'engine':>16} {'Go est.':>10} {'Go/engine':>10} {'result':>12}")
    worst = 0.0
    for n in (8, 16, 32, 64):
        for name, lists, fit in scaling_cases(n):
            default = (1 << n) - 1
            lo, med = cpu_ms(lambda lists=lists, fit=fit, default=default: merge_lists(lists, default, fit))  # type: ignore[misc]
            worst = max(worst, med)
            got = merge_lists(lists, default, fit)
            pref = "pref" if got.preferred else "not pref"
            go = go_estimate_s(lists)
            print(f"   {name:<34} {n:>4} {lo:7.2f} / {med:6.2f} {fmt_s(go):>10} {ratio_txt(go, med):>10} "
                  f"{got.affinity.bit_count() if got.affinity else 0:>3} nodes {pref}")
    print(f"   worst cell {worst:.2f} ms (target < 50 ms)")


def section_explicit() -> None:
    print("\n2. explicit hint lists: engine vs the plain Python product fold (CPU per call, min / median"
          " of 3); Go est. = 34 ns x permutations, quoted")
    print(f"   {'case':<44} {'perms':>9} {'engine':>19} {'plain fold':>19} {'eng/fold':>8} {'Go est.':>9}")
    # the plain fold's speed on this machine, to decide where it can run
    small = [idle_list(list(range(4)), list(range(4)))] * 3
    t0 = time.process_time()
    plain_fold(small, 15)
    rate = 15**3 / max(time.process_time() - t0, 1e-9)
    below: list[float] = []
    above: list[float] = []
    for name, n, lists in sorted(explicit_cases(), key=lambda c: permutations(c[2])):
        default = (1 << n) - 1
        lo, med = cpu_ms(lambda lists=lists, default=default: merge_lists(lists, default, NARROWEST))  # type: ignore[misc]
        perms = permutations(lists)
        fold_txt, ratio_txt_ = "-", "-"
        if perms / rate <= FOLD_BUDGET_S:
            explicit: list[Sequence[TopologyHint]] = [h for h in lists if not isinstance(h, GeneratedHints)]
            f_lo, f_med = cpu_ms(lambda e=explicit, default=default: plain_fold(e, default), runs=3)  # type: ignore[misc]
            fold_txt = f"{fmt_s(f_lo * 1e-3)} / {fmt_s(f_med * 1e-3)}"
            ratio = med / f_med
            ratio_txt_ = f"{ratio:.2f}"
            (below if perms < 30 else above).append(ratio)
            expected = product_fold(lists, default, NARROWEST)
            assert merge_lists(lists, default, NARROWEST) == expected == plain_fold(explicit, default), name
        go = fmt_s(go_estimate_s(lists)) if perms >= 10**4 else ""
        print(f"   {name:<44} {perms:>9.3g} {fmt_s(lo * 1e-3):>9} / {fmt_s(med * 1e-3):>7} {fold_txt:>19} "
              f"{ratio_txt_:>8} {go:>9}")
    print(f"   engine / plain fold: worst {max(below):.2f} below 30 permutations (target <= 1.5), "
          f"worst {max(above):.2f} from 30 on (target < 1)")


def load_capture() -> Any:
    from numalign.machine.sysfs import load_sysfs

    return load_sysfs(CAPTURE).machine


def kubelet_for(machine: Any, policy: str, closest: bool = False) -> Any:
    from numalign.machine.model import KubeletConfig, ReservedMemory

    options = {"max-allowable-numa-nodes": "64"}
    if closest:
        options["prefer-closest-numa-nodes"] = "true"
    return machine.replace(kubelet=KubeletConfig(
        topology_manager_policy=policy,
        topology_manager_policy_options=options,
        cpu_manager_policy="static",
        memory_manager_policy="Static",
        system_reserved={"memory": GI, "cpu": 1000},
        reserved_memory=(ReservedMemory(0, {"memory": GI}),),
    ))


def guaranteed(cpus: int, memory: int) -> Any:
    from numalign.pods import Container, ContainerKind, Pod, QOSClass

    r = {"cpu": cpus * 1000, "memory": memory}
    return Pod("bench", f"p{cpus}", f"u{cpus}", QOSClass.GUARANTEED, (Container("c", ContainerKind.APP, r, r),))


def section_capture() -> None:
    print("\n3. admissions on the 64-NUMA capture 256ia64-64n2s2c (4 CPUs, ~7.7 GiB per node)")
    if not CAPTURE.exists():
        print(f"   skipped: {CAPTURE} not found")
        return
    from numalign.engine.policies import TopologyPolicy, parse_options
    from numalign.node.admission import Node

    base = load_capture()
    rows: list[tuple[str, str, int, int, bool]] = []
    for cpus in (8, 12, 16, 100):
        for policy in ("restricted", "best-effort"):
            rows.append((f"{cpus} CPUs + 1Gi", policy, cpus, GI, False))
    for cpus in (4, 8, 12, 16, 20):
        rows.append((f"{cpus} CPUs + 4Gi", "restricted", cpus, 4 * GI, False))
    for cpus in (16, 40, 80, 100, 120, 140, 160, 180, 200, 240):
        rows.append((f"{cpus} CPUs + 1Gi, prefer-closest", "restricted", cpus, GI, True))
    rows.append(("16 CPUs + 1Gi, prefer-closest", "best-effort", 16, GI, True))
    rows.append(("160 CPUs + 1Gi, prefer-closest", "best-effort", 160, GI, True))
    print(f"   {'pod':<30} {'policy':<12} {'merge ms':>15} {'admit ms':>15} {'result':>24}")
    worst = 0.0
    for label, policy, cpus, memory, closest in rows:
        m = kubelet_for(base, policy, closest)
        pod = guaranteed(cpus, memory)
        node = Node(m)
        providers = node.providers(node.state)
        hints = [p.container_hints(pod, pod.containers[0]) for p in providers]
        tp = TopologyPolicy(node.node_policy, m.node_ids,
                            parse_options(dict(m.kubelet.topology_manager_policy_options)),
                            dict(m.distances) if closest else None)
        lo_m, med_m = cpu_ms(lambda tp=tp, hints=hints: tp.merge(hints))  # type: ignore[misc]
        lo_a, med_a = cpu_ms(lambda m=m, pod=pod: Node(m).admit(pod))  # type: ignore[misc]
        worst = max(worst, med_a)
        res = Node(m).admit(pod)
        merged = tp.merge(hints).hint
        outcome = ("admitted" if res.admitted else "rejected") + f" {merged.affinity.bit_count() if merged.affinity else 0}n" \
            + (" pref" if merged.preferred else "")
        print(f"   {label:<30} {policy:<12} {lo_m:6.2f} / {med_m:6.2f} {lo_a:6.2f} / {med_a:6.2f} {outcome:>24}")
    lists = flatten([p.container_hints(guaranteed(16, GI), guaranteed(16, GI).containers[0])
                     for p in Node(kubelet_for(base, "restricted")).providers(Node(kubelet_for(base, "restricted")).state)])
    print(f"   worst admission {worst:.2f} ms (target < 50 ms); the kubelet's fold would walk "
          f"{permutations(lists):.1e} permutations (Go est. {fmt_s(go_estimate_s(lists))})")


def loaded_family(rng: random.Random, n: int, kind: str) -> GeneratedHints:
    ids = range(n)
    if kind == "cpu":
        free = {i: rng.choice([0, 1, 2, 3, 4, 4, 4]) for i in ids}
        need = rng.randint(1, max(1, sum(free.values())))
        d = Demand.per_node({i: (free[i],) for i in ids}, (need,))
        pref = -(-need // 4)
    elif kind == "memory":
        cap = 8 * GI
        freem = {i: rng.choice([0, 1, 3, 6, 8, 8]) * GI for i in ids}
        need = rng.choice([1, 2, 4, 8, 12, 30, 100]) * GI
        d = Demand.per_node({i: (cap, freem[i]) for i in ids}, (need, need))
        pref = -(-need // cap)
    else:
        gpus = {i: rng.choice([0, 0, 0, 1, 2]) for i in ids}
        need = rng.randint(1, 4)
        d = Demand.per_node({i: (gpus[i],) for i in ids}, (need,))
        pref = -(-need // 2)
    return GeneratedHints(tuple(ids), (1 << n) - 1, d.feasible, pref, demand=d)


def section_sweep(count: int = 150) -> None:
    print(f"\n4. loaded machines: {count} random instances per NUMA count (free CPUs, memory, GPUs;"
          " 2-5 providers; 30% prefer-closest), CPU ms per merge")
    for n in (8, 16, 32, 64):
        dist = grouped_distances(n)
        times: list[tuple[float, str]] = []
        for seed in range(count):
            rng = random.Random(seed)
            kinds = [rng.choice(["cpu", "memory", "memory", "gpu"]) for _ in range(rng.randint(2, 5))]
            lists: list[HintList] = [g for g in (loaded_family(rng, n, k) for k in kinds) if not g.is_empty()]
            if not lists:
                continue
            fit = FitOrder(dist) if rng.random() < 0.3 else NARROWEST
            t0 = time.process_time()
            merge_lists(lists, (1 << n) - 1, fit)
            times.append(((time.process_time() - t0) * 1e3, f"seed {seed} {'+'.join(kinds)}"
                          f"{' closest' if fit.distances else ''}"))
        times.sort()
        med = statistics.median(t for t, _ in times)
        print(f"   {n:>2} NUMA: median {med:6.2f} ms, worst {times[-1][0]:6.2f} ms ({times[-1][1]})")


def main() -> None:
    print("merge: numalign engine vs kubelet product fold (same run)")
    section_scaling()
    section_explicit()
    section_capture()
    section_sweep()


if __name__ == "__main__":
    main()
