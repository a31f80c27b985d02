"""The ``koordinator`` engine mode end to end: chosen per node (label / NRT attribute) or by the
``koordinator`` profile; Koordinator's CPU bind policies, NUMA allocate strategy, node and pod
policies; node labels in machine specs and cluster templates; the extender's ``--profile`` with
node-aware scores.

Upstream (koordinator-sh/koordinator): ``apis/extension/numa_aware.go`` (labels, annotations),
``pkg/scheduler/plugins/nodenumaresource/plugin.go`` (PreFilter/Filter bind-policy checks),
``util.go`` (``getCPUBindPolicy``, ``GetNUMAAllocateStrategy``, ``mergeTopologyPolicy``),
``scoring.go`` (Score).
"""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from numalign.errors import InputError
from numalign.machine.spec import dump_machine, load_machine
from numalign.modes.koordinator.cpu import (
    ERR_BIND_CONFLICT,
    ERR_SMT_ALIGNMENT,
    NODE_CPU_BIND_POLICY_LABEL,
    NODE_NUMA_ALLOCATE_STRATEGY_LABEL,
)
from numalign.modes.koordinator.numa import KOORDINATOR_NODE_POLICY_LABEL
from numalign.modes.registry import MODE_LABEL, Mode
from numalign.node.admission import Node
from numalign.pods import Container, ContainerKind, Pod, QOSClass, default_uid
from numalign.pods.annotations import KOORDINATOR_ANNOTATION as NUMA_TOPOLOGY_SPEC
from numalign.pods.annotations import RESOURCE_SPEC

KOORD = {MODE_LABEL: "koordinator"}


def spec(policy: str = "none", labels: dict[str, str] | None = None) -> dict[str, Any]:
    """2 sockets x 1 NUMA node x 4 cores x 2 threads: CPUs 0-3 and 8-11 on NUMA 0 (siblings
    c and c+8), CPU 0 reserved."""
    doc: dict[str, Any] = {
        "name": "k", "shape": {"sockets": 2, "coresPerNuma": 4, "threadsPerCore": 2},
        "kubelet": {"cpuManagerPolicy": "static", "topologyManagerPolicy": policy, "reservedSystemCPUs": "0"},
    }
    if labels is not None:
        doc["labels"] = labels
    return doc


def node(policy: str = "none", labels: dict[str, str] | None = None) -> Node:
    return Node(load_machine(spec(policy, labels)))


def pod(name: str, cpus: int, resource_spec: dict[str, str] | None = None,
        numa_spec: dict[str, str] | None = None) -> Pod:
    req = {"cpu": cpus * 1000, "memory": 1 << 30}
    c = Container("main", ContainerKind.APP, requests=req, limits=dict(req))
    ann = {}
    if resource_spec:
        ann[RESOURCE_SPEC] = json.dumps(resource_spec)
    if numa_spec:
        ann[NUMA_TOPOLOGY_SPEC] = json.dumps(numa_spec)
    return Pod("t", name, default_uid("t", name), QOSClass.GUARANTEED, (c,), ann)


def cores_of(n: Node, cpus: frozenset[int]) -> set[int]:
    by_id = n.machine.cpu_by_id
    return {by_id[c].core for c in cpus}


def test_mode_comes_from_the_node_label() -> None:
    assert node().mode is Mode.KUBELET
    assert node(labels=KOORD).mode is Mode.KOORDINATOR
    with pytest.raises(InputError, match="engine-mode"):
        node(labels={MODE_LABEL: "yarn"})


def test_spread_by_pcpus_gets_two_physical_cores_not_siblings() -> None:
    """The issue's example: SpreadByPCPUs must not hand out SMT siblings for a 2-CPU pod."""
    koord = node(labels=KOORD)
    r = koord.admit(pod("a", 2, {"preferredCPUBindPolicy": "SpreadByPCPUs"}))
    assert r.admitted
    cpus = r.containers[0].cpus
    assert len(cores_of(koord, cpus)) == 2
    kubelet = node()
    r2 = kubelet.admit(pod("a", 2, {"preferredCPUBindPolicy": "SpreadByPCPUs"}))
    assert len(cores_of(kubelet, r2.containers[0].cpus)) == 1  # the kubelet packs a core


def test_default_bind_policy_is_full_pcpus() -> None:
    n = node(labels=KOORD)
    r = n.admit(pod("a", 4))
    cpus = r.containers[0].cpus
    assert len(cores_of(n, cpus)) == 2 and len(cpus) == 4


@pytest.mark.parametrize(("strategy", "numa"), [("MostAllocated", 0), ("LeastAllocated", 1)])
def test_numa_allocate_strategy_picks_the_numa_node(strategy: str, numa: int) -> None:
    """No NUMA policy: the accumulator chooses the NUMA node, the fullest (MostAllocated) or the
    emptiest (LeastAllocated); NUMA 0 has one CPU less (CPU 0 is reserved)."""
    n = node(labels={**KOORD, NODE_NUMA_ALLOCATE_STRATEGY_LABEL: strategy})
    r = n.admit(pod("a", 2))
    assert {n.machine.cpu_by_id[c].numa for c in r.containers[0].cpus} == {numa}


def test_default_strategy_is_least_allocated() -> None:
    n = node(labels=KOORD)
    r = n.admit(pod("a", 2))
    assert {n.machine.cpu_by_id[c].numa for c in r.containers[0].cpus} == {1}


def test_node_bind_policy_conflicts_with_a_different_required_policy() -> None:
    n = node(labels={**KOORD, NODE_CPU_BIND_POLICY_LABEL: "FullPCPUsOnly"})
    r = n.admit(pod("a", 2, {"requiredCPUBindPolicy": "SpreadByPCPUs"}))
    assert not r.admitted and ERR_BIND_CONFLICT in (r.message or "")
    r = n.admit(pod("b", 3))  # FullPCPUsOnly: a multiple of the threads per core
    assert not r.admitted and ERR_SMT_ALIGNMENT in (r.message or "")
    assert n.admit(pod("c", 2, {"requiredCPUBindPolicy": "FullPCPUs"})).admitted


def test_node_spread_label_makes_spread_required() -> None:
    n = node(labels={**KOORD, NODE_CPU_BIND_POLICY_LABEL: "SpreadByPCPUs"})
    r = n.admit(pod("a", 4))  # the pod prefers FullPCPUs (default): the node requires spread
    assert len(cores_of(n, r.containers[0].cpus)) == 4
    # a required SpreadByPCPUs may use one CPU per core with a free CPU, no more
    free = frozenset(n.state.cpu.default_set) - n.reserved_cpus
    usable = len(cores_of(n, free))
    assert usable < len(free)  # not a plain shortage of CPUs
    assert not n.admit(pod("c", usable + 1)).admitted
    d = n.admit(pod("d", usable))
    assert d.admitted and len(cores_of(n, d.containers[0].cpus)) == usable


def test_node_label_policy_and_pod_policy() -> None:
    """``node.koordinator.sh/numa-topology-policy`` is the node's policy in this mode (the kubelet
    runs none); a pod's ``numaTopologyPolicy`` counts on a non-dynamic node too."""
    snn = node("none", {**KOORD, KOORDINATOR_NODE_POLICY_LABEL: "SingleNUMANode"})
    r = snn.admit(pod("wide", 6))  # 7 + 8 free, 6 fit on one node
    assert r.admitted and r.policy == "single-numa-node"
    r = snn.admit(pod("wider", 9))  # 1 + 8 free: only both NUMA nodes hold 9
    assert not r.admitted and r.reason == "TopologyAffinityError"
    plain = node("none", KOORD)
    r = plain.admit(pod("asks", 2, numa_spec={"numaTopologyPolicy": "Restricted"}))
    assert r.admitted and r.policy == "restricted"
    kubelet = node("none")
    assert kubelet.admit(pod("asks", 2, numa_spec={"numaTopologyPolicy": "Restricted"})).policy == "none"


def test_restricted_admits_what_fits_only_across_numa_nodes_now() -> None:
    """Koordinator's preferred = fewest NUMA nodes *now* (and every hint under Restricted): a
    6-CPU pod when each NUMA node has 3-4 free is admitted on two; the kubelet refuses."""
    for mode_labels, admitted in ((KOORD, True), ({}, False)):
        n = node("restricted", mode_labels)
        assert n.admit(pod("fill0", 4)).admitted
        assert n.admit(pod("fill1", 4)).admitted
        r = n.admit(pod("six", 6))
        assert r.admitted is admitted, mode_labels


def test_labels_round_trip_in_machine_specs_and_templates() -> None:
    from numalign.sim.cluster import load_cluster

    m = load_machine(spec(labels={KOORDINATOR_NODE_POLICY_LABEL: "Restricted"}))
    assert load_machine(dump_machine(m)) == m
    with pytest.raises(InputError, match="labels"):
        load_machine({**spec(), "labels": {"a": 1}})
    nodes = load_cluster({"nodes": [
        {"machine": spec(labels={KOORDINATOR_NODE_POLICY_LABEL: "Restricted"}), "count": 2,
         "labels": KOORD},
        {"machine": spec(), "namePrefix": "plain"},
    ]})
    assert [dict(mm.labels) for _, mm in nodes] == [
        {KOORDINATOR_NODE_POLICY_LABEL: "Restricted", **KOORD}] * 2 + [{}]
    with pytest.raises(InputError, match=r"nodes\[0\].labels"):
        load_cluster({"nodes": [{"machine": spec(), "labels": ["x"]}]})


def test_koordinator_profile_runs_nodes_in_the_koordinator_mode() -> None:
    from numalign.modes.koordinator.scheduling import koordinator_filter

    n = node()
    res = koordinator_filter(n, pod("a", 2, {"preferredCPUBindPolicy": "SpreadByPCPUs"}))
    assert res.passed and n.mode is Mode.KOORDINATOR
    assert res.planned is not None
    held = [c for cs in res.planned.cpu.pod_cpus(default_uid("t", "a")).values() for c in cs]
    assert len(cores_of(n, frozenset(held))) == 2


def test_koordinator_score_least_allocated_over_the_pods_numa_nodes() -> None:
    """scoring.go: LeastAllocated (cpu, memory weight 1) over the NUMA node the pod gets."""
    from numalign.modes.koordinator.scheduling import KoordinatorNumaScore, resource_score
    from numalign.node.usage import numa_amounts

    n = node("single-numa-node", KOORD)
    assert n.admit(pod("first", 4)).admitted
    p = pod("second", 2)
    score = KoordinatorNumaScore().score_on(n, p, 1, 2)
    # "first" on NUMA 1 (the NUMA scores: CPU 0 is reserved on NUMA 0), "second" on NUMA 0: 7
    # allocatable CPUs there; every bound CPU of the node counts as requested; the zones publish
    # no memory NUMA-bound by the kubelet (no Static memory manager), so only the pod's own
    # request counts against NUMA 0's memory
    zones = numa_amounts(n)
    cpu = resource_score("LeastAllocated", 4 * 1000 + 2000, 7 * 1000)
    mem = resource_score("LeastAllocated", 1 << 30, zones[0].allocatable["memory"])
    assert (cpu, score) == (14, (cpu + mem) // 2)
    assert resource_score("MostAllocated", 6000, 7000) == 85
    with pytest.raises(InputError):
        KoordinatorNumaScore("Balanced")


def _nrt(labels: dict[str, str] | None = None, attrs: dict[str, str] | None = None) -> dict[str, Any]:
    from numalign.kube.topology import build_nrt

    doc = build_nrt(node(), name="n1")
    if labels:
        doc.setdefault("metadata", {})["labels"] = labels
    for k, v in (attrs or {}).items():
        doc.setdefault("attributes", []).append({"name": k, "value": v})
    return doc


def test_nrt_import_reads_the_mode_and_koordinator_labels() -> None:
    from numalign.kube.nrt_import import engine_from_nrt

    assert engine_from_nrt(_nrt()).mode is Mode.KUBELET
    by_label = engine_from_nrt(_nrt({**KOORD, KOORDINATOR_NODE_POLICY_LABEL: "SingleNUMANode", "other": "x"}))
    assert by_label.mode is Mode.KOORDINATOR
    assert dict(by_label.machine.labels) == {**KOORD, KOORDINATOR_NODE_POLICY_LABEL: "SingleNUMANode"}
    by_attr = engine_from_nrt(_nrt(KOORD, {MODE_LABEL: "kubelet"}))  # an attribute wins
    assert by_attr.mode is Mode.KUBELET
    with pytest.raises(InputError, match=r"attributes\.numalign\.io/engine-mode"):
        engine_from_nrt(_nrt(attrs={MODE_LABEL: "yarn"}))


def test_extender_serves_the_koordinator_profile_with_its_node_aware_score() -> None:
    from numalign.kube.extender import MAX_EXTENDER_PRIORITY, ExtenderCore
    from numalign.kube.nrt_import import engine_from_nrt
    from numalign.scheduler import get_profile

    core = ExtenderCore(get_profile("koordinator"), log=io.StringIO())
    busy = _nrt(KOORD)
    core.set_nodes({"idle": _nrt(), "busy": busy})
    p = pod("x", 2)
    scores = dict(core.prioritize(p, ["idle", "busy"]))
    want = {}
    for name, doc in (("idle", _nrt()), ("busy", busy)):
        eng = engine_from_nrt(doc)
        eng.use_mode(Mode.KOORDINATOR)
        from numalign.modes.koordinator.scheduling import KoordinatorNumaScore

        want[name] = KoordinatorNumaScore().score_on(eng, p, 1, 2) * MAX_EXTENDER_PRIORITY // 100
    assert scores == want and all(v > 0 for v in scores.values())


def test_extender_serve_refuses_an_unknown_profile() -> None:
    from numalign.kube.extender import serve

    with pytest.raises(InputError, match="--profile"):
        serve(nrt_dir=".", profile="yarn")
    with pytest.raises(InputError, match="no NUMA filter"):
        serve(nrt_dir=".", profile="default")


def test_scheduler_runs_the_koordinator_profile_in_the_koordinator_mode() -> None:
    """The profile sets every node's mode before the prefilter reads them: a Restricted node where
    only Koordinator's rules admit a 6-CPU pod across both NUMA nodes is not pruned."""
    from numalign.scheduler import Cluster, Scheduler, get_profile

    outcomes = {}
    for profile in ("koordinator", "numalign"):
        cluster = Cluster([("n0", load_machine(spec("restricted")))])
        sched = Scheduler(cluster, get_profile(profile))
        assert all(cn.node.mode is (Mode.KOORDINATOR if profile == "koordinator" else Mode.KUBELET)
                   for cn in cluster.nodes)
        for name in ("fill0", "fill1"):
            assert sched.schedule(pod(name, 4)).admitted
        outcomes[profile] = sched.schedule(pod("six", 6)).admitted
    assert outcomes == {"koordinator": True, "numalign": False}


def test_exclusivity_defaults_to_required_only_for_a_pod_with_a_policy() -> None:
    """plugin.go Filter: ``singleNUMANodeExclusive`` defaults to Required only when the pod sets
    ``numaTopologyPolicy``; a pod without the annotation is never refused for exclusivity."""
    from numalign.pods.annotations import Exclusive

    assert pod("a", 1).koordinator_numa_spec.exclusive is None
    assert pod("b", 1, numa_spec={"numaTopologyPolicy": "Restricted"}).koordinator_numa_spec.exclusive is Exclusive.REQUIRED
    assert pod("c", 1, numa_spec={"singleNUMANodeExclusive": "Preferred"}).koordinator_numa_spec.exclusive is (
        Exclusive.PREFERRED)


def test_init_container_cpus_stay_usable_in_the_koordinator_mode() -> None:
    """An init container that took a whole NUMA node's free CPUs leaves them reusable to the app
    container: that NUMA node is not "lacking CPUs" for the pod."""
    n = node("single-numa-node", KOORD)
    req = {"cpu": 7000, "memory": 1 << 30}
    init = Container("init", ContainerKind.INIT, requests=req, limits=dict(req))
    app = Container("main", ContainerKind.APP, requests=req, limits=dict(req))
    p = Pod("t", "initpod", default_uid("t", "initpod"), QOSClass.GUARANTEED, (init, app))
    r = n.admit(p)
    assert r.admitted


def test_plan_cache_keeps_the_engine_modes_apart() -> None:
    """Nodes of one machine in the same state share admissions through a plan cache; a node
    in the koordinator mode must not replay a kubelet-mode node's plan (nor the reverse)."""
    from numalign.node.plan_cache import PlanCache

    machine = load_machine(spec())
    kubelet, koord = Node(machine), Node(machine)
    koord.use_mode(Mode.KOORDINATOR)
    cache = PlanCache()
    kubelet.plan_cache = koord.plan_cache = cache
    spread = {"preferredCPUBindPolicy": "SpreadByPCPUs"}
    r1 = kubelet.admit(pod("a", 2, spread))
    r2 = koord.admit(pod("b", 2, spread))
    assert len(cores_of(kubelet, r1.containers[0].cpus)) == 1  # the kubelet packs a core
    assert len(cores_of(koord, r2.containers[0].cpus)) == 2  # SpreadByPCPUs, not the replay


def _gpu_node(labels: dict[str, str], memory_static: bool = False) -> Node:
    """2 NUMA nodes x 4 cores x 2 threads, one GPU per NUMA node, best-effort."""
    kubelet: dict[str, Any] = {"cpuManagerPolicy": "static", "topologyManagerPolicy": "best-effort",
                               "reservedSystemCPUs": "0"}
    shape: dict[str, Any] = {"sockets": 2, "numaPerSocket": 1, "coresPerNuma": 4, "threadsPerCore": 2,
                             "gpusPerNuma": 1}
    if memory_static:
        shape["memoryPerNuma"] = "16Gi"
        kubelet |= {"memoryManagerPolicy": "Static", "systemReserved": {"memory": "100Mi"},
                    "reservedMemory": [{"numaNode": 0, "limits": {"memory": "200Mi"}}]}
    return Node(load_machine({"name": "g", "labels": labels, "shape": shape, "kubelet": kubelet}))


def _gpu_pod(name: str, cpus: int, gpus: int) -> Pod:
    req = {"cpu": cpus * 1000, "memory": 1 << 30}
    if gpus:
        req["nvidia.com/gpu"] = gpus
    c = Container("main", ContainerKind.APP, requests=req, limits=dict(req))
    return Pod("t", name, default_uid("t", name), QOSClass.GUARANTEED, (c,))


@pytest.mark.parametrize(("labels", "memory_static", "affinity"), [
    ({}, False, 0b01),  # the kubelet: the narrowest non-preferred merged hint, NUMA 0
    (KOORD, False, 0b11),  # Koordinator's BestEffort: unsatisfied -> all NUMA nodes
    (KOORD, True, 0b01),  # the kubelet's Static memory manager allocates: the kubelet's merge
])
def test_koordinator_best_effort_falls_back_to_all_numa_nodes_in_admission(
        labels: dict[str, str], memory_static: bool, affinity: int) -> None:
    """Free CPUs only on NUMA 0, the free GPU only on NUMA 1: no NUMA node holds the pod.
    Koordinator's merge (frameworkext/topologymanager policy_best_effort.go) then uses every
    NUMA node; the kubelet keeps its narrowest non-preferred hint."""
    n = _gpu_node(labels, memory_static)
    assert n.admit(_gpu_pod("a", 8, 0)).admitted  # every CPU of NUMA 1
    assert n.admit(_gpu_pod("b", 1, 1)).admitted  # the GPU of NUMA 0
    r = n.admit(_gpu_pod("c", 2, 1))
    assert r.admitted
    assert (r.containers[0].affinity, r.containers[0].preferred) == (affinity, False)


@pytest.mark.parametrize("raw", ["[" * 100_000 + "]" * 100_000, "{bad", "\udcff"])
def test_hostile_resource_spec_is_a_one_line_input_error(raw: str) -> None:
    from numalign.pods.annotations import parse_resource_spec

    with pytest.raises(InputError) as err:
        parse_resource_spec({RESOURCE_SPEC: raw})
    assert RESOURCE_SPEC in err.value.field and "\n" not in str(err.value)


def test_koordinator_score_counts_the_numa_memory_other_pods_hold() -> None:
    """scoring.go reads the NUMA nodes' requested memory from NodeAllocation: in the koordinator
    mode (memory manager None) the pods already placed there count, not only the new pod."""
    from numalign.modes.koordinator.scheduling import KoordinatorNumaScore, _plan, resource_score
    from numalign.node.usage import numa_amounts, numa_memory_held, pod_numa_nodes

    n = node("single-numa-node", KOORD)
    for name in ("a", "b", "c"):
        assert n.admit(pod(name, 2)).admitted
    p = pod("next", 2)
    planned = _plan(n, p)[1]
    assert planned is not None
    used = pod_numa_nodes(n.machine, planned, p.uid)
    held = numa_memory_held(n)
    assert sum(held.get(i, {}).get("memory", 0) for i in used) >= 1 << 30  # someone is there
    zones = numa_amounts(n)
    alloc = sum(zones[i].allocatable["memory"] for i in used)
    mem_used = sum(held.get(i, {}).get("memory", 0) for i in used) + (1 << 30)
    score = KoordinatorNumaScore().score_on(n, p, len(used), 2)
    cpu_alloc = sum(zones[i].allocatable["cpu"] for i in used) * 1000
    cpu_used = sum(zones[i].allocatable["cpu"] - zones[i].available["cpu"] for i in zones) * 1000 + 2000
    expected = (resource_score("LeastAllocated", cpu_used, cpu_alloc)
                + resource_score("LeastAllocated", mem_used, alloc)) // 2
    assert score == expected
