"""Koordinator's per-NUMA memory accounting and joint CPU + memory hints (``koordinator`` mode).

Upstream (koordinator-sh/koordinator, main history): ``pkg/scheduler/plugins/nodenumaresource/``
``resource_manager.go`` (``generateResourceHints``, ``tryBestToDistributeEvenly``),
``node_allocation.go`` (``getAvailableNUMANodeResources``); transcribed:

* ``resource_manager_test.go`` ``TestResourceManagerGetTopologyHint`` case "failed to generate
  hints with insufficient memory and hugepages" (the only memory/hugepage case upstream);
* ``topology_hint_test.go`` ``TestReserveByNUMANode`` (a pod's memory lands on one NUMA node).

Every Koordinator rule that differs from the kubelet's has a test whose kubelet-mode twin
decides otherwise.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numalign.engine.bitmask import mask_of
from numalign.engine.hints import GeneratedHints, TopologyHint
from numalign.engine.policies import Policy
from numalign.machine.model import Cpu, KubeletConfig, Machine, NumaNode
from numalign.machine.spec import load_machine
from numalign.modes.koordinator.cpu import KoordinatorCpuManager
from numalign.modes.koordinator.memory import (
    KoordinatorNumaResource,
    distribute,
    numa_available,
)
from numalign.modes.koordinator.numa import KOORDINATOR_NODE_POLICY_LABEL
from numalign.modes.registry import MODE_LABEL
from numalign.node.admission import Node
from numalign.pods import Container, ContainerKind, Pod, QOSClass, default_uid
from numalign.resources.cpu import new_cpu_state
from numalign.resources.memory_state import POLICY_NONE, Block, MemoryState, numa_held

GI = 1 << 30
KOORD = {MODE_LABEL: "koordinator"}


# ------------------------------------------------------------------ helpers


def koord_test_machine(hugepages: int = 0) -> Machine:
    """``buildCPUTopologyForTest(2, 1, 26, 2)`` with 128Gi allocatable memory per NUMA node
    (plus ``hugepages`` bytes of 1Gi pages, which the kubelet's arithmetic takes out of the
    node's memory)."""
    cpus = []
    cpu = core = 0
    for s in range(2):
        for _ in range(26):
            for _ in range(2):
                cpus.append(Cpu(cpu, core, s, s))
                cpu += 1
            core += 1
    pages = {GI: hugepages} if hugepages else {}
    nodes = tuple(NumaNode(s, 128 * GI + hugepages, pages) for s in range(2))
    return Machine("koord-test", nodes, tuple(cpus), kubelet=KubeletConfig(cpu_manager_policy="static"))


def mkpod(name: str, requests: dict[str, int], guaranteed: bool = True, ann: dict[str, str] | None = None) -> Pod:
    limits = dict(requests) if guaranteed else {}
    c = Container("main", ContainerKind.APP, requests=requests, limits=limits)
    qos = QOSClass.GUARANTEED if guaranteed else QOSClass.BURSTABLE
    return Pod("default", name, default_uid("default", name), qos, (c,), ann or {})


def provider(m: Machine, memory: MemoryState | None = None, policy: Policy = Policy.BEST_EFFORT
             ) -> KoordinatorNumaResource:
    cpu = KoordinatorCpuManager(m, new_cpu_state(m), reserved=(), policy_of=lambda _: policy)
    return KoordinatorNumaResource(m, cpu, memory or MemoryState(POLICY_NONE), lambda _: policy)


def listed(hints: Any) -> list[TopologyHint]:
    return hints.materialize() if isinstance(hints, GeneratedHints) else list(hints)


def h(*ids: int, p: bool = True) -> TopologyHint:
    return TopologyHint(mask_of(ids), p)


def spec(policy: str = "none", labels: dict[str, str] | None = None, memory_static: bool = False) -> dict[str, Any]:
    """2 NUMA nodes x 4 cores x 2 threads (8 CPUs each, CPU 0 reserved), 16Gi per NUMA node."""
    kubelet: dict[str, Any] = {"cpuManagerPolicy": "static", "topologyManagerPolicy": policy,
                               "reservedSystemCPUs": "0"}
    if memory_static:
        kubelet |= {"memoryManagerPolicy": "Static", "systemReserved": {"memory": "100Mi"},
                    "reservedMemory": [{"numaNode": 0, "limits": {"memory": "200Mi"}}]}
    doc: dict[str, Any] = {"name": "k", "shape": {"sockets": 2, "coresPerNuma": 4, "threadsPerCore": 2,
                                                  "memoryPerNuma": "16Gi"}, "kubelet": kubelet}
    if labels:
        doc["labels"] = labels
    return doc


def node(policy: str = "none", labels: dict[str, str] | None = None, memory_static: bool = False) -> Node:
    return Node(load_machine(spec(policy, labels, memory_static)))


# ------------------------------------------------------------------ transcribed cases


def test_get_topology_hint_insufficient_memory_and_hugepages() -> None:
    """resource_manager_test.go TestResourceManagerGetTopologyHint, "failed to generate hints
    with insufficient memory and hugepages": another pod holds 120Gi of each NUMA node's 128Gi
    and all 4Gi of 1Gi hugepages on each; a pod asking 4 CPUs, 4Gi memory and 4Gi hugepages gets
    no hint for any resource (no trial allocation succeeds: the hugepages are gone), so every
    list is empty. (Upstream's pod shares CPUs; here it binds them, which numalign accounts per
    NUMA node - the answer is the same.)"""
    m = koord_test_machine(hugepages=4 * GI)
    held = MemoryState(POLICY_NONE, assignments={"other": {"main": [
        Block((0,), "memory", 120 * GI), Block((1,), "memory", 120 * GI),
        Block((0,), "hugepages-1Gi", 4 * GI), Block((1,), "hugepages-1Gi", 4 * GI)]}})
    got = provider(m, held).pod_hints(mkpod("p", {"cpu": 4000, "memory": 4 * GI, "hugepages-1Gi": 4 * GI}))
    assert got is not None
    assert {r: listed(v) for r, v in got.items()} == {"cpu": [], "memory": [], "hugepages-1Gi": []}


def test_reserve_by_numa_node() -> None:
    """topology_hint_test.go TestReserveByNUMANode: on a SingleNUMANode node a pod requesting
    4 CPUs and 8Gi (requests only: Burstable) gets its 8Gi on NUMA node 0. The kubelet's memory
    manager binds no memory of a Burstable pod."""
    labels = {**KOORD, KOORDINATOR_NODE_POLICY_LABEL: "SingleNUMANode"}
    doc = spec("none", labels)
    doc["shape"] |= {"coresPerNuma": 26, "memoryPerNuma": "128Gi"}
    koord = Node(load_machine(doc))
    p = mkpod("test", {"cpu": 4000, "memory": 8 * GI}, guaranteed=False)
    r = koord.admit(p)
    assert r.admitted and r.containers[0].affinity == 0b01
    assert r.containers[0].memory == {"0": {"memory": 8 * GI}}
    doc["labels"] = {KOORDINATOR_NODE_POLICY_LABEL: "SingleNUMANode"}
    doc["kubelet"]["topologyManagerPolicy"] = "single-numa-node"
    kubelet = Node(load_machine(doc))
    assert kubelet.admit(p).containers[0].memory == {}


# ------------------------------------------------------------------ Koordinator's hint rules


def test_hints_without_allocations_are_joint_and_alike() -> None:
    got = provider(koord_test_machine(4 * GI)).pod_hints(
        mkpod("p", {"cpu": 4000, "memory": 4 * GI, "hugepages-1Gi": 2 * GI}))
    assert got is not None
    want = [h(0), h(1), h(0, 1, p=False)]
    assert {r: listed(v) for r, v in got.items()} == {"cpu": want, "memory": want, "hugepages-1Gi": want}


def test_a_numa_node_without_free_memory_is_in_no_memory_hint() -> None:
    """numaNodesLackResource: NUMA 0's memory is all held, so no memory hint touches NUMA 0; the
    CPU hints keep (0,1) (CPUs are free on both) but lose (0) (the trial allocation fails)."""
    m = koord_test_machine()
    held = MemoryState(POLICY_NONE, assignments={"other": {"main": [Block((0,), "memory", 128 * GI)]}})
    got = provider(m, held).pod_hints(mkpod("p", {"cpu": 4000, "memory": 4 * GI}))
    assert got is not None
    assert listed(got["cpu"]) == [h(1), h(0, 1, p=False)]
    assert listed(got["memory"]) == [h(1)]


def test_preferred_is_the_fewest_numa_nodes_holding_cpus_and_memory_together() -> None:
    """The CPUs fit only on NUMA 0 alone, the memory only on NUMA 1 alone: only (0,1) holds
    both, so it is the one, preferred, hint of both resources. Once NUMA 1 has no free CPU at
    all it lacks CPUs: no CPU hint may touch it, and the CPUs cannot be satisfied."""
    m = koord_test_machine()
    held = MemoryState(POLICY_NONE, assignments={"other": {"main": [Block((0,), "memory", 127 * GI)]}})
    prov = provider(m, held)
    prov.cpu.state.occupy("other", "main", frozenset(range(52, 102)))  # NUMA 1 keeps 2 CPUs
    p = mkpod("p", {"cpu": 4000, "memory": 4 * GI})
    got = prov.pod_hints(p)
    assert got is not None
    assert listed(got["cpu"]) == [h(0, 1)] == listed(got["memory"])
    prov.cpu.state.occupy("other2", "main", frozenset({102, 103}))
    got = prov.pod_hints(p)
    assert got is not None and listed(got["cpu"]) == [] and listed(got["memory"]) == [h(0, 1)]


def test_restricted_prefers_every_memory_hint() -> None:
    got = provider(koord_test_machine(), policy=Policy.RESTRICTED).pod_hints(
        mkpod("p", {"memory": 4 * GI}, guaranteed=False))
    assert got is not None and listed(got["memory"]) == [h(0), h(1), h(0, 1)]


# ------------------------------------------------------------------ allocation


def test_memory_is_split_evenly_over_the_hint() -> None:
    prov = provider(koord_test_machine())
    p = mkpod("p", {"memory": 8 * GI}, guaranteed=False)
    prov.allocate(p, p.containers[0], h(0, 1))
    assert prov.state.blocks(p.uid, "main") == [Block((0,), "memory", 4 * GI), Block((1,), "memory", 4 * GI)]
    prov.release_pod(p.uid)
    assert numa_held(prov.state) == {}


def test_a_short_numa_node_gives_what_it_has_and_the_rest_spills() -> None:
    m = koord_test_machine()
    held = MemoryState(POLICY_NONE, assignments={"other": {"main": [Block((0,), "memory", 126 * GI)]}})
    prov = provider(m, held)
    p = mkpod("p", {"memory": 12 * GI}, guaranteed=False)
    prov.allocate(p, p.containers[0], h(0, 1))
    assert prov.state.blocks(p.uid, "main") == [Block((0,), "memory", 2 * GI), Block((1,), "memory", 10 * GI)]


def test_distribute_follows_upstreams_positional_sort_and_falls_back_when_short() -> None:
    # hint (0,1): upstream compares NUMA 0 and 1 - the real order
    assert distribute(40, [0, 1], {0: 5, 1: 100}) == {0: 5, 1: 35}
    # hint (1,2) on three nodes: upstream compares NUMA 0 and 1 (positions), keeps (1,2), and
    # would leave 15 over; numalign then splits in true availability order
    assert distribute(40, [1, 2], {0: 1, 1: 100, 2: 5}) == {1: 35, 2: 5}
    # where upstream's order succeeds, its split is kept (here NUMA 1 first, half each)
    assert distribute(10, [1, 2], {0: 100, 1: 1, 2: 100}) == {1: 1, 2: 9}


# ------------------------------------------------------------------ the node, against the kubelet mode


def test_burstable_pods_memory_is_accounted_per_numa_node() -> None:
    """Koordinator accounts every pod's memory per NUMA node; the kubelet binds only Guaranteed
    pods' memory under its Static memory manager. Three 10Gi Burstable pods on a single-NUMA-node
    node with 16Gi NUMA nodes: one on each NUMA node, then no NUMA node can hold the third."""
    outcomes = {}
    for name, labels in (("koordinator", KOORD), ("kubelet", {})):
        n = node("single-numa-node", labels)
        got = [n.admit(mkpod(f"b{i}", {"cpu": 500, "memory": 10 * GI}, guaranteed=False)) for i in range(3)]
        outcomes[name] = [(r.admitted, r.containers[0].memory if r.admitted else None) for r in got]
    # NUMA 1 first: CPU 0 is reserved, so NUMA 1 is the less allocated (the NUMA scores)
    assert outcomes["koordinator"] == [(True, {"1": {"memory": 10 * GI}}), (True, {"0": {"memory": 10 * GI}}),
                                       (False, None)]
    assert outcomes["kubelet"] == [(True, {})] * 3


def test_restricted_admits_across_numa_nodes_when_cpus_and_memory_sit_apart() -> None:
    """Joint hints: after ``a`` (6 CPUs: NUMA 1, the less allocated) and ``b`` (15.5Gi: only
    NUMA 0 still has that much), a 4-CPU 2Gi pod fits on neither NUMA node alone (NUMA 0 lacks
    the memory, NUMA 1 the CPUs); Koordinator's joint hints make (0,1) preferred and Restricted
    admits there. The kubelet mode binds no memory: ``a`` took NUMA 0, the pod gets NUMA 1."""
    got = {}
    for name, labels in (("koordinator", KOORD), ("kubelet", {})):
        n = node("restricted", labels)
        assert n.admit(mkpod("a", {"cpu": 6000, "memory": GI})).admitted  # koordinator: NUMA 1 (scores)
        b = n.admit(mkpod("b", {"cpu": 100, "memory": 15 * GI + GI // 2}, guaranteed=False))
        assert b.admitted
        r = n.admit(mkpod("c", {"cpu": 4000, "memory": 2 * GI}))
        assert r.admitted
        got[name] = (r.containers[0].affinity, r.containers[0].preferred)
    assert got == {"koordinator": (0b11, True), "kubelet": (0b10, True)}


def test_no_numa_group_rule() -> None:
    """After a pod spanning both NUMA nodes, Koordinator places a small pod on NUMA 0 alone; the
    kubelet's Static memory manager never uses a node of a multi-node group alone."""
    got = {}
    for name, labels, static in (("koordinator", KOORD, False), ("kubelet", {}, True)):
        n = node("best-effort", labels, memory_static=static)
        wide = n.admit(mkpod("wide", {"cpu": 1000, "memory": 20 * GI}))
        assert wide.admitted and wide.containers[0].affinity == 0b11
        r = n.admit(mkpod("small", {"cpu": 1000, "memory": GI}))
        got[name] = r.containers[0].affinity
    assert got == {"koordinator": 0b01, "kubelet": 0b11}


def test_release_returns_the_memory() -> None:
    n = node("single-numa-node", KOORD)
    assert n.admit(mkpod("a", {"cpu": 1000, "memory": 12 * GI})).admitted
    assert n.admit(mkpod("b", {"cpu": 1000, "memory": 12 * GI})).containers[0].memory == {"0": {"memory": 12 * GI}}
    assert not n.admit(mkpod("no-room", {"cpu": 1000, "memory": 12 * GI})).admitted
    assert n.release("default/a")
    r = n.admit(mkpod("c", {"cpu": 1000, "memory": 12 * GI}))
    assert r.admitted and r.containers[0].memory == {"1": {"memory": 12 * GI}}


def test_plan_cache_tells_states_with_different_numa_memory_apart() -> None:
    """Nodes of one machine share admissions through a plan cache keyed by what the decision
    reads: with Koordinator's blocks (no memory tables) the key holds the per-NUMA amounts."""
    from numalign.node.plan_cache import PlanCache

    machine = load_machine(spec("single-numa-node", KOORD))
    busy, idle = Node(machine), Node(machine)
    busy.plan_cache = idle.plan_cache = PlanCache()
    assert busy.admit(mkpod("fill", {"cpu": 100, "memory": 10 * GI}, guaranteed=False)).admitted
    shape = {"cpu": 100, "memory": 10 * GI}
    assert idle.admit(mkpod("x", shape, guaranteed=False)).containers[0].memory == {"0": {"memory": 10 * GI}}
    assert busy.admit(mkpod("x", shape, guaranteed=False)).containers[0].memory == {"1": {"memory": 10 * GI}}


def test_state_round_trips_with_koordinator_blocks() -> None:
    from numalign.node.state import NodeState

    n = node("single-numa-node", KOORD)
    assert n.admit(mkpod("a", {"cpu": 1000, "memory": 3 * GI}, guaranteed=False)).admitted
    back = NodeState.from_dict(json.loads(json.dumps(n.state.to_dict())))
    assert numa_held(back.memory) == numa_held(n.state.memory) == {1: {"memory": 3 * GI}}


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 20), st.booleans()), min_size=1, max_size=8))
def test_held_memory_never_exceeds_allocatable_and_release_empties(pods: list[tuple[int, bool]]) -> None:
    n = node("best-effort", KOORD)
    admitted = []
    for i, (gib, guaranteed) in enumerate(pods):
        p = mkpod(f"p{i}", {"cpu": 1000, "memory": gib * GI}, guaranteed=guaranteed)
        if n.admit(p).admitted:
            admitted.append(p.key)
        avail = numa_available(n.machine, n.state.memory)
        assert all(v >= 0 for per in avail.values() for v in per.values())
        held = numa_held(n.state.memory)
        assert all(held.get(i, {}).get("memory", 0) <= 16 * GI for i in (0, 1))
    for key in admitted:
        assert n.release(key)
    assert numa_held(n.state.memory) == {}


# ------------------------------------------------------------------ NUMA scores (hint Score)


def scoring_machine(numa: int, cpus: int = 104, memory: int = 256 * GI) -> Machine:
    """``buildCPUTopologyForTest(numa, 1, cores, 2)`` with the node's CPUs and memory split
    evenly over the NUMA nodes (TestFilterWithNUMANodeScoring's node)."""
    cores = cpus // 2 // numa
    out = []
    cpu = core = 0
    for s in range(numa):
        for _ in range(cores):
            for _ in range(2):
                out.append(Cpu(cpu, core, s, s))
                cpu += 1
            core += 1
    nodes = tuple(NumaNode(s, memory // numa) for s in range(numa))
    return Machine("scoring", nodes, tuple(out), kubelet=KubeletConfig(cpu_manager_policy="static"))


# (name, NUMA nodes, policy, strategy, existing pods' (cpus, memory) per NUMA node, want)
NUMA_NODE_SCORING = [
    ("single numa nodes and select most allocated", 2, Policy.SINGLE_NUMA_NODE, "MostAllocated",
     {0: (4, 8 * GI), 1: (40, 8 * GI)}, (1,)),
    ("single numa nodes and select least allocated", 2, Policy.SINGLE_NUMA_NODE, "LeastAllocated",
     {0: (4, 8 * GI), 1: (40, 8 * GI)}, (0,)),
    ("single numa nodes and only one node can be used", 2, Policy.SINGLE_NUMA_NODE, "LeastAllocated",
     {0: (4, 8 * GI), 1: (52, 8 * GI)}, (0,)),
    ("restricted numa nodes and select most allocated and preferred", 4, Policy.RESTRICTED, "MostAllocated",
     {0: (24, 8 * GI), 1: (23, 8 * GI), 2: (4, 8 * GI), 3: (8, 8 * GI)}, (3,)),
    ("restricted numa nodes and select least allocated and preferred", 4, Policy.RESTRICTED, "LeastAllocated",
     {0: (24, 8 * GI), 1: (23, 8 * GI), 2: (4, 8 * GI), 3: (8, 8 * GI)}, (2,)),
]


@pytest.mark.parametrize(("name", "numa", "policy", "strategy", "existing", "want"), NUMA_NODE_SCORING,
                         ids=[c[0] for c in NUMA_NODE_SCORING])
def test_filter_with_numa_node_scoring(name: str, numa: int, policy: Policy, strategy: str,
                                       existing: dict[int, tuple[int, int]], want: tuple[int, ...]) -> None:
    """plugin_test.go TestFilterWithNUMANodeScoring: the hint the topology manager keeps is the
    best-scored one among equally narrow preferred hints (NUMA scoring strategy Most/Least
    Allocated, cpu and memory weight 1). Upstream's pods share CPUs (NUMA amounts only); here
    the existing pods hold that many CPUs of their NUMA node and the new pod binds its 4 CPUs,
    which leaves the same per-NUMA amounts and the same hints."""
    from numalign.engine.policies import TopologyPolicy
    from numalign.modes.registry import Mode, merge

    m = scoring_machine(numa)
    held = MemoryState(POLICY_NONE)
    prov = provider(m, held, policy)
    prov.scoring = strategy
    for n, (cpus, mem) in existing.items():
        node_cpus = sorted(prov.cpu.topology.cpus_in_numa[n])
        prov.cpu.state.occupy(f"existing-{n}", "main", frozenset(node_cpus[:cpus]))
        held.assignments[f"existing-{n}"] = {"main": [Block((n,), "memory", mem)]}
    p = mkpod("requested", {"cpu": 4000, "memory": 40 * GI})
    out = merge(Mode.KOORDINATOR, TopologyPolicy(policy, m.node_ids), [prov.pod_hints(p)], score=prov.hint_score)
    assert out.admit and out.hint.affinity == mask_of(want)
    kubelet_rule = merge(Mode.KOORDINATOR, TopologyPolicy(policy, m.node_ids), [prov.pod_hints(p)])
    assert kubelet_rule.hint.affinity is not None
    if strategy == "MostAllocated":  # without scores: the lowest feasible NUMA id, not the fullest
        assert kubelet_rule.hint.affinity != mask_of(want)


def test_score_tie_break_follows_upstreams_fold_order() -> None:
    """mergeFilteredHints keeps a later, equally wide mask only when it is narrower (a smaller
    integer) or scores higher: in IterateBitMasks order (0,3) comes before (1,2), so (1,2) wins
    by being the smaller integer even with the lower score."""
    from numalign.modes.koordinator.numa import score_tie_break

    lists = [[h(0, 3), h(1, 2)]]
    scores = {mask_of((0, 3)): 90, mask_of((1, 2)): 10}
    assert score_tie_break((0, 1, 2, 3), lists, mask_of((1, 2)), scores.__getitem__) == mask_of((1, 2))
    lists = [[h(0, 1), h(0, 3)]]
    scores = {mask_of((0, 1)): 10, mask_of((0, 3)): 90}
    assert score_tie_break((0, 1, 2, 3), lists, mask_of((0, 1)), scores.__getitem__) == mask_of((0, 3))


def test_node_picks_the_least_allocated_numa_node() -> None:
    """Koordinator's NUMA scores (LeastAllocated by default) pick the emptier of two equally
    fitting NUMA nodes; the kubelet mode takes the lowest NUMA id."""
    got = {}
    for name, labels in (("koordinator", {**KOORD, KOORDINATOR_NODE_POLICY_LABEL: "SingleNUMANode"}),
                         ("kubelet", {})):
        n = node("single-numa-node", labels)
        first = n.admit(mkpod("first", {"cpu": 2000, "memory": GI}))
        second = n.admit(mkpod("second", {"cpu": 2000, "memory": GI}))
        got[name] = (first.containers[0].affinity, second.containers[0].affinity)
    assert got == {"koordinator": (0b10, 0b01), "kubelet": (0b01, 0b01)}


def test_numa_status_comes_from_cpusets_only() -> None:
    """node_allocation.go addPodAllocation marks NUMA nodes single/shared by the pod's cpuset: a
    pod holding only per-NUMA memory leaves them idle for SingleNUMANodeExclusive."""
    from numalign.modes.koordinator.numa import NumaNodeStatus
    from numalign.modes.koordinator.scheduling import numa_status

    n = node("single-numa-node", KOORD)
    r = n.admit(mkpod("shared-cpu", {"cpu": 500, "memory": 4 * GI}, guaranteed=False))
    assert r.admitted and r.containers[0].memory
    assert set(numa_status(n).values()) == {NumaNodeStatus.IDLE}
    r = n.admit(mkpod("bound", {"cpu": 2000, "memory": GI}))
    bound = {n.machine.cpu_by_id[c].numa for c in r.containers[0].cpus}
    assert {i for i, st in numa_status(n).items() if st is NumaNodeStatus.SINGLE} == bound


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["single-numa-node", "best-effort"]), st.integers(1, 6),
                          st.booleans(), st.booleans()), max_size=8))
def test_numa_status_reads_the_cpusets_as_the_pods_usage_does(pods: list[tuple[str, int, bool, bool]]) -> None:
    """:func:`numa_status` reads each pod's cpuset from the CPU state; the same statuses as
    folding every pod's usage (its containers' CPUs), with one pod excluded or none."""
    from numalign.modes.koordinator.numa import NumaNodeStatus
    from numalign.modes.koordinator.scheduling import numa_status
    from numalign.node.usage import cpus_numa_nodes, pods_usage

    n = node("best-effort", KOORD)
    for k, (policy, cpus, guaranteed, big) in enumerate(pods):
        spec = json.dumps({"numaTopologyPolicy": "SingleNUMANode" if policy == "single-numa-node" else "BestEffort"})
        size = cpus * 1000 if guaranteed else 500
        n.admit(mkpod(f"p{k}", {"cpu": size, "memory": (8 if big else 1) * GI}, guaranteed,
                      {"scheduling.koordinator.sh/numa-topology-spec": spec}))
    for exclude in [None, *n.state.pods]:
        want = {i: NumaNodeStatus.IDLE for i in n.machine.node_ids}
        for pu in pods_usage(n.machine, n.state):
            if pu.uid == exclude or pu.record.observed:
                continue
            used = cpus_numa_nodes(n.machine, [c for cu in pu.containers for c in cu.cpus])
            mark = NumaNodeStatus.SINGLE if len(used) == 1 else NumaNodeStatus.SHARED
            for i in used:
                if want[i] is NumaNodeStatus.IDLE or mark is NumaNodeStatus.SHARED:
                    want[i] = mark
        assert numa_status(n, exclude) == want


# ------------------------------------------------------------------ the tie-break against a brute force


def _koordinator_fold(nodes: tuple[int, ...], lists: list[list[tuple[TopologyHint, int]]]) -> tuple[int, bool]:
    """Koordinator ``mergeFilteredHints`` as written: every permutation in order, merged affinity
    = AND, preferred = all preferred and all affinities equal, Score = the scores of the hints
    equal to the merged affinity; a preferred hint beats a non-preferred one, a narrower one
    replaces, an equally wide one replaces only with a higher Score."""
    import itertools

    default = mask_of(nodes)
    best, best_pref, best_score = default, False, 0
    for perm in itertools.product(*lists):
        merged = default
        affs = [hh.affinity for hh, _ in perm if hh.affinity is not None]
        for a in affs:
            merged &= a
        if merged == 0:
            continue
        pref = all(hh.preferred for hh, _ in perm) and all(a == affs[0] for a in affs)
        score = sum(s for hh, s in perm if hh.affinity == merged)
        if pref and not best_pref:
            best, best_pref, best_score = merged, pref, score
            continue
        if best_pref and not pref:
            continue
        narrower = (merged.bit_count(), merged) < (best.bit_count(), best)
        if not narrower:
            if merged.bit_count() == best.bit_count() and score > best_score:
                best, best_score = merged, score
            continue
        best, best_pref, best_score = merged, pref, score
    return best, best_pref


@st.composite
def scored_lists(draw: st.DrawFn) -> list[list[tuple[TopologyHint, int]]]:
    import itertools

    order = [mask_of(c) for k in range(1, 5) for c in itertools.combinations(range(4), k)]  # IterateBitMasks
    out = []
    for _ in range(draw(st.integers(1, 3))):
        if draw(st.booleans()) and out:
            out.append([(TopologyHint(None, True), 0)])
            continue
        chosen = sorted(draw(st.sets(st.sampled_from(order), min_size=1, max_size=5)), key=order.index)
        out.append([(TopologyHint(m, draw(st.booleans())), draw(st.integers(0, 3))) for m in chosen])
    return out


@settings(max_examples=300, deadline=None)
@given(scored_lists(), st.sampled_from([Policy.BEST_EFFORT, Policy.RESTRICTED]))
def test_score_tie_break_matches_koordinators_fold(lists: list[list[tuple[TopologyHint, int]]],
                                                   policy: Policy) -> None:
    """Whenever Koordinator's fold ends on a preferred hint, the koordinator mode's merge with the
    summed scores picks the same mask (hint lists in IterateBitMasks order, as providers give)."""
    from numalign.engine.policies import TopologyPolicy
    from numalign.modes.registry import Mode, merge

    nodes = (0, 1, 2, 3)
    want, want_pref = _koordinator_fold(nodes, lists)
    providers = [{f"r{i}": [hh for hh, _ in lst]} for i, lst in enumerate(lists)]

    def score(mask: int) -> int:
        return sum(s for lst in lists for hh, s in lst if hh.affinity == mask)

    got = merge(Mode.KOORDINATOR, TopologyPolicy(policy, nodes), providers, score=score)
    if want_pref:
        assert (got.hint.affinity, got.hint.preferred) == (want, True)
