"""What changes between kubelet releases in a simulated cluster: the summary's per-release
breakdown (``by_kubelet_release`` of each profile) as text under the summary table.

A cluster whose node groups run different kubelet releases (``kubeletVersion`` in a cluster
template, an upgrade half done) records, per profile and release, the pods each release's nodes
admitted, how many of them NUMA-aligned, how many NUMA nodes their merged hints span, and each
rejection reason. Shown only when a profile
saw more than one release.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def release_lines(summary: Mapping[str, Any]) -> list[str]:
    """One line per profile and release, when some profile placed pods on several releases."""
    profiles: Mapping[str, Any] = summary.get("profiles", {})
    if all(len(p.get("by_kubelet_release", {})) < 2 for p in profiles.values()):
        return []
    out = ["", "by kubelet release (the nodes' releases: pods admitted, aligned, NUMA nodes their "
                "hints span, rejections):"]
    for name, p in profiles.items():
        for release, counts in p.get("by_kubelet_release", {}).items():
            spans = ", ".join(f"{k.removeprefix('numa_nodes_')}: {v}" for k, v in counts.items()
                              if k.startswith("numa_nodes_")) or "-"
            rejected = {k: v for k, v in counts.items()
                        if k not in ("scheduled", "aligned") and not k.startswith("numa_nodes_")}
            reasons = ", ".join(f"{k} {v}" for k, v in rejected.items()) or "none"
            out.append(f"  {name} {release}: admitted {counts.get('scheduled', 0)}, aligned "
                       f"{counts.get('aligned', 0)}, NUMA nodes {{{spans}}}, rejected: {reasons}")
    return out


__all__ = ["release_lines"]
