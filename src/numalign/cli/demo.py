"""The built-in walkthrough of ``make demo``: the Topology Manager blog post's example.

Figure 1 machine: 2 NUMA nodes; CPUs 0-3, gpu0 and nic0 on node 0; CPUs 4-7, gpu1 and nic1
on node 1. Two containers each ask for 2 CPUs, 1 GPU and 1 NIC. The hints per resource are the
ones the blog lists; the merged hint and the decision come from numalign's engine under each
policy.
"""

from __future__ import annotations

from numalign.engine.bitmask import format_mask, mask_of
from numalign.engine.hints import ProviderHints, TopologyHint
from numalign.engine.policies import Policy, TopologyPolicy

N0, N1, BOTH = mask_of([0]), mask_of([1]), mask_of([0, 1])

#: (container, provider answers) as the blog shows them for each container in turn.
BLOG_CONTAINERS: list[tuple[str, list[ProviderHints]]] = [
    (
        "container0",
        [
            {"cpu": [TopologyHint(N0, True), TopologyHint(N1, True), TopologyHint(BOTH, False)]},
            {"gpu-vendor.com/gpu": [TopologyHint(N0, True), TopologyHint(N1, True)]},
            {"nic-vendor.com/nic": [TopologyHint(N0, True), TopologyHint(N1, True)]},
        ],
    ),
    (
        "container1",
        [
            {"cpu": [TopologyHint(N0, True), TopologyHint(N1, True), TopologyHint(BOTH, False)]},
            {"gpu-vendor.com/gpu": [TopologyHint(N1, True)]},
            {"nic-vendor.com/nic": [TopologyHint(N1, True)]},
        ],
    ),
]


def _hints_text(hints: object) -> str:
    assert isinstance(hints, list)
    return "  ".join(f"{format_mask(h.affinity)}{'' if h.preferred else '*'}" for h in hints)


def walkthrough() -> str:
    """The demo's text."""
    lines = [
        "numalign demo: the Topology Manager blog's Figure 1 example",
        "machine: NUMA 0 = CPUs 0-3 + gpu0 + nic0, NUMA 1 = CPUs 4-7 + gpu1 + nic1",
        "request per container: 2 CPUs, 1 gpu-vendor.com/gpu, 1 nic-vendor.com/nic",
        "(hints: a NUMA mask; * = not preferred)",
        "",
    ]
    for name, providers in BLOG_CONTAINERS:
        lines.append(f"{name}:")
        for provider in providers:
            assert provider is not None
            for res, hints in provider.items():
                lines.append(f"  {res:<20} {_hints_text(hints)}")
        for policy in Policy:
            result = TopologyPolicy(policy, (0, 1)).merge(providers)
            h = result.hint
            verdict = "admit" if result.admit else "reject (TopologyAffinityError)"
            lines.append(
                f"  {policy.value:<17} -> merged {format_mask(h.affinity):<5} "
                f"preferred={str(h.preferred).lower():<5} {verdict}"
            )
        lines.append("")
    lines.append(
        "container0 lands on NUMA 0 ({cpu: {0,1}, gpu0, nic0}); with gpu0/nic0 taken, "
        "container1 lands on NUMA 1 ({cpu: {4,5}, gpu1, nic1})."
    )
    return "\n".join(lines)
