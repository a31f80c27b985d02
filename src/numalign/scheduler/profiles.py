"""Scheduler profiles to compare: which NUMA filter runs, and how nodes are scored.

* ``default``  - kube-scheduler without topology awareness: NodeResourcesFit + LeastAllocated;
  the node's Topology Manager decides after binding (and may reject).
* ``nrt-snn``  - scheduler-plugins NodeResourceTopologyMatch: filters single-numa-node nodes
  only, against per-NUMA available amounts; LeastAllocated.
* ``nrt-snn-least-numa`` / ``nrt-snn-most-allocated`` / ``nrt-snn-balanced`` - the same filter
  with the plugin's own score on top of LeastAllocated: ``LeastNUMANodes`` (every policy) or
  the per-NUMA-zone MostAllocated / BalancedAllocation (single-numa-node nodes), all from the
  published NRT (:mod:`numalign.scheduler.nrt_scores`).
* ``volcano``  - Volcano numa-aware: its own predicate (old merge rule, app containers, CPUs
  only) and its numa-aware score (weight 10) on top of LeastAllocated.
* ``koordinator`` - Koordinator NodeNUMAResource: the pod's ``numa-topology-spec`` policy must
  match the node's, the engine plans, and ``SingleNUMANodeExclusive: Required`` refuses mixing
  single- and multi-NUMA pods on a NUMA node; every node runs in the ``koordinator`` engine
  mode (Koordinator's CPU bind policies and hints); scored by NodeNUMAResource's
  LeastAllocated over the pod's NUMA nodes (:mod:`numalign.modes.koordinator.scheduling`).
* ``numalign`` - the node engine is the filter (exact); LeastAllocated + LeastNUMANodes,
  searched best-first so that only the nodes that can still win are checked.

A profile holds its strategies themselves (functions and objects from
:mod:`numalign.scheduler.filters` and :mod:`numalign.scheduler.scorers`), resolved once
here: the scheduler and the extender call them, and never look at a strategy's name.
To add a profile, add one line to :data:`PROFILES`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Protocol

from numalign.errors import InputError
from numalign.inputs import goparse
from numalign.modes.koordinator.scheduling import (
    KoordinatorNumaScore,
    koordinator_filter,
    koordinator_node_key,
)
from numalign.modes.registry import Mode
from numalign.modes.volcano.predicate import volcano_filter
from numalign.modes.volcano.select import Pick, SchedulerView, VolcanoSelect
from numalign.node.admission import Node
from numalign.pods import Pod
from numalign.scheduler.cluster import Cluster
from numalign.scheduler.filters import (
    FilterResult,
    exact_filter,
    nrt_node_key,
    nrt_snn_filter,
    nrt_snn_refuses_always,
)
from numalign.scheduler.node_groups import NodeKey
from numalign.scheduler.scorers import (
    LeastNumaNodes,
    NodeScore,
    NrtLeastNumaNodes,
    NrtZoneScore,
    NumaScore,
    VolcanoNumaAware,
    least_allocated,
)

Filter = Callable[[Node, Pod], FilterResult]
SureRefusal = Callable[[Node, Pod], bool]
class RelativeSelect(Protocol):
    """A relative profile's own node choice: ``(scheduler, pod, its node-level request vector)
    -> ((node index, NUMA count, total score) or None, why not, filter evaluations)`` - the same
    choice as the scheduler's fit, node score and relative walk over :attr:`Profile.filter`,
    computed its own way."""

    def __call__(self, sched: SchedulerView, pod: Pod, vec: Any, /) -> tuple[Pick | None, str | None, int]: ...

    def prepare(self, cluster: Cluster) -> None:
        """What it keeps per node, for every node of ``cluster``: called when a scheduler is
        built (like kube-scheduler's node info cache, filled as nodes are added), so that a
        pod's cycle only updates the nodes that changed."""


@dataclass(frozen=True)
class Profile:
    name: str
    #: the NUMA filter (None: topology-blind, the node decides after binding)
    filter: Filter | None
    node_score: NodeScore = least_allocated
    node_weight: int = 1
    #: the NUMA score of the nodes that passed the filter (None: none)
    numa_score: NumaScore | None = None
    numa_weight: int = 1
    #: the scheduler already knows the node's decision (exact filter): binding never fails
    exact: bool = False
    #: the engine mode every node runs in under this profile (None: each node's own)
    mode: Mode | None = None
    #: with a relative NUMA score: picks the node instead of the scheduler's walk (same choice)
    relative_select: RelativeSelect | None = None
    #: every input of :attr:`filter` and of a node-aware :attr:`numa_score` a node gives, as
    #: one hashable value: nodes with equal keys answer a pod alike, so the scheduler asks one
    #: node per key (:mod:`numalign.scheduler.node_groups`); None: every node is asked
    node_key: NodeKey | None = None
    #: True when :attr:`filter` refuses the pod on the node whatever the node holds, reading
    #: only its machine, policy and scope (a sure refusal, asked once per such group of nodes
    #: and pod shape: those nodes are not feasible, they do not count in the sample); None:
    #: none is known
    refuses_always: SureRefusal | None = None


PROFILES: dict[str, Profile] = {
    "default": Profile("default", None),
    "nrt-snn": Profile("nrt-snn", nrt_snn_filter, node_key=nrt_node_key, refuses_always=nrt_snn_refuses_always),
    "nrt-snn-least-numa": Profile("nrt-snn-least-numa", nrt_snn_filter, numa_score=NrtLeastNumaNodes(),
                                  node_key=nrt_node_key, refuses_always=nrt_snn_refuses_always),
    "nrt-snn-most-allocated": Profile(
        "nrt-snn-most-allocated", nrt_snn_filter, numa_score=NrtZoneScore("MostAllocated"), node_key=nrt_node_key,
        refuses_always=nrt_snn_refuses_always,
    ),
    "nrt-snn-balanced": Profile("nrt-snn-balanced", nrt_snn_filter, numa_score=NrtZoneScore("BalancedAllocation"),
                                node_key=nrt_node_key, refuses_always=nrt_snn_refuses_always),
    "volcano": Profile(
        "volcano", volcano_filter, numa_score=VolcanoNumaAware(), numa_weight=10, relative_select=VolcanoSelect()
    ),
    "koordinator": Profile(
        "koordinator", koordinator_filter, numa_score=KoordinatorNumaScore(), exact=True, mode=Mode.KOORDINATOR,
        node_key=koordinator_node_key,
    ),
    "numalign": Profile("numalign", exact_filter, numa_score=LeastNumaNodes(), exact=True),
}


def get_profile(name: str) -> Profile:
    """A profile by name; ``<name>:weight=<n>`` sets its NUMA score's weight (Volcano's
    ``numa-aware`` plugin argument ``weight``; the ``volcano`` profile's default is 10, as in
    Volcano's design document)."""
    base, sep, args = name.partition(":")
    try:
        profile = PROFILES[base]
    except KeyError:
        raise InputError(f"unknown profile {base!r} (known: {', '.join(PROFILES)})", "profiles") from None
    if not sep:
        return profile
    key, eq, value = args.partition("=")
    if key != "weight" or not eq:
        raise InputError(f"unknown profile argument {args!r} (known: weight=<n>)", "profiles")
    try:
        weight = goparse.atoi(value)
    except goparse.GoSyntaxError:
        raise InputError(f"weight must be an integer, got {value!r}", "profiles") from None
    if weight < 0:
        raise InputError(f"weight must be >= 0, got {weight}", "profiles")
    if profile.numa_score is None:
        raise InputError(f"profile {base!r} has no NUMA score to weigh", "profiles")
    return replace(profile, name=name, numa_weight=weight)
