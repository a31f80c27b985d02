"""Merge time: numalign's engine against the kubelet's literal product fold, same run.

Hint sets look like an idle node's: every feasible mask, single-node masks preferred. The
"no preferred" variants give each provider preferred nodes that no other provider shares,
so no permutation merges to a preferred hint and the whole non-preferred ranking is needed.
The product fold runs only where its estimated time stays under ~10 s (its per-permutation
cost is measured first on a small product).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from benchmarks.timing import measure, median_ms
from numalign._reference import product_fold
from numalign.bitmask import iterate_masks, mask_of
from numalign.hints import GeneratedHints, HintList, TopologyHint
from numalign.merge import NARROWEST, merge_lists

FOLD_BUDGET_S = 10.0


def idle_list(nodes: Sequence[int], near: Sequence[int]) -> list[TopologyHint]:
    """Every mask touching one of ``near``; single-node masks preferred."""
    near_mask = mask_of(near)
    return [TopologyHint(m, m.bit_count() == 1) for m in iterate_masks(nodes) if m & near_mask]


def idle_generated(nodes: Sequence[int], near: Sequence[int]) -> GeneratedHints:
    near_mask = mask_of(near)
    return GeneratedHints(tuple(nodes), mask_of(nodes), lambda m: bool(m & near_mask), 1)


def fold_rate() -> float:
    """Permutations per second of the literal fold on this machine (measured now)."""
    nodes = list(range(4))
    lists: list[HintList] = [idle_list(nodes, nodes)] * 3  # 15^3 = 3375 permutations
    t0 = time.perf_counter()
    product_fold(lists, mask_of(nodes), NARROWEST)
    return 3375 / (time.perf_counter() - t0)


def cases() -> list[tuple[str, list[int], list[HintList], bool]]:
    out: list[tuple[str, list[int], list[HintList], bool]] = []
    for n in (2, 4, 8, 16, 64):
        nodes = list(range(n))
        for providers in (2, 3, 4):
            explicit = n <= 8
            make = idle_list if explicit else idle_generated
            kind = "explicit" if explicit else "generated"
            lists: list[HintList] = [make(nodes, nodes) for _ in range(providers)]
            out.append((f"{n:>2} NUMA x{providers} idle ({kind})", nodes, lists, explicit))
            # no preferred merged hint: provider p is near nodes disjoint from the others'
            groups = [nodes[p::providers] or nodes[-1:] for p in range(providers)]
            lists = [make(nodes, g) for g in groups]
            out.append((f"{n:>2} NUMA x{providers} no-preferred ({kind})", nodes, lists, explicit))
    return out


def main() -> None:
    rate = fold_rate()
    print("merge: numalign engine vs kubelet product fold (same run)")
    print(f"  product fold speed here: {rate:,.0f} permutations/s")
    print(f"  {'case':<38} {'hints':>13} {'engine ms':>10} {'fold ms':>12} {'ratio':>9}")
    for name, nodes, lists, explicit in cases():
        default = mask_of(nodes)
        engine_times = measure(
            lambda lists=lists, default=default: merge_lists(lists, default, NARROWEST),  # type: ignore[misc]
            budget_s=0.3,
        )
        engine = median_ms(engine_times)
        sizes = [len(h) if not isinstance(h, GeneratedHints) else 2 ** len(nodes) - 1 for h in lists]
        perms = 1
        for s in sizes:
            perms *= s
        estimate = perms / rate
        if explicit and estimate <= FOLD_BUDGET_S:
            t0 = time.perf_counter()
            expected = product_fold(lists, default, NARROWEST)
            fold_ms = (time.perf_counter() - t0) * 1e3
            assert merge_lists(lists, default, NARROWEST) == expected, name
            fold_txt, ratio = f"{fold_ms:,.1f}", f"{fold_ms / engine:,.0f}x"
        else:
            fold_txt, ratio = f"~{estimate:.1e}s", "(est.)"
        hints = "x".join(str(s) for s in sizes) if len(set(sizes)) > 1 else f"{len(sizes)}x{sizes[0]}"
        if len(hints) > 13:
            hints = f"{len(sizes)}x2^{len(nodes)}"
        print(f"  {name:<38} {hints:>13} {engine:>10.3f} {fold_txt:>12} {ratio:>9}")

    # The acceptance cases of issue 3.
    print("\n  targets:")
    nodes8 = list(range(8))
    l137700: list[HintList] = [idle_list(nodes8, nodes8) for _ in range(4)]
    t = median_ms(measure(lambda: merge_lists(l137700, mask_of(nodes8), NARROWEST), budget_s=0.5))
    print(f"  #137700 (8 NUMA, 4 x 255 hints, single-node preferred): {t:.3f} ms  (target < 5 ms)")
    groups = [[0, 1], [2, 3], [4, 5], [6, 7]]
    nopref: list[HintList] = [idle_list(nodes8, g) for g in groups]
    t = median_ms(measure(lambda: merge_lists(nopref, mask_of(nodes8), NARROWEST), budget_s=0.5))
    print(f"  8 NUMA, 4 x ~250 hints, no preferred merged hint:     {t:.3f} ms  (target < 50 ms)")
    nodes64 = list(range(64))
    cpu = {i: 16 for i in nodes64}
    need = 4
    gen: list[HintList] = [
        GeneratedHints(tuple(nodes64), mask_of(nodes64), lambda m: sum(cpu[i] for i in nodes64 if m >> i & 1) >= need, 1),
        GeneratedHints(tuple(nodes64), mask_of(nodes64), lambda m: m.bit_count() >= 1, 1),
        GeneratedHints(tuple(nodes64), mask_of(nodes64), lambda m: bool(m & mask_of(range(0, 64, 8))), 1),
    ]
    t = median_ms(measure(lambda: merge_lists(gen, mask_of(nodes64), NARROWEST), budget_s=0.5))
    print(f"  64 NUMA idle node, request fits one node (3 providers): {t:.3f} ms  (target < 50 ms)")


if __name__ == "__main__":
    main()
