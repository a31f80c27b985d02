"""SGI-like NUMA distance tables for the prefer-closest search tests: runs of ``run`` nodes
at 22, runs grouped by four (26 between neighbouring runs, else 30), 30 / 34 across groups
(with ``run`` 4 and 64 nodes: 16 runs of 4 in 4 blocks, the SGI-like table of the tests)."""

from __future__ import annotations


def sgi_like(n: int, run: int) -> dict[int, dict[int, int]]:
    def d(i: int, j: int) -> int:
        if i == j:
            return 10
        a, b = i // run, j // run
        if a == b:
            return 22
        if a // 4 == b // 4:
            return 26 if (a ^ b) in (1, 2) else 30
        return 30 if (a ^ b) & 1 == 0 else 34

    return {i: {j: d(i, j) for j in range(n)} for i in range(n)}
