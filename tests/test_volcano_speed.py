"""The fast Volcano predicate and node choice decide exactly like the slow path.

* :func:`volcano_filter` (a memo keyed by node configuration, Volcano pod shape and available
  CPUs) answers like :func:`volcano_filter_reference` (a full CPU-only admission each time) -
  passed, NUMA count and reason - on random machines, kubelet options, occupancies and pods;
* the ``volcano`` profile's vectorised walk (:class:`VolcanoSelect`) places every pod where the
  scheduler's own relative walk over the reference filter places it, with the same score,
  NUMA count and pending reason, through binds and departures;
* identical nodes share one admission, so a probe costs a lookup.
"""

from __future__ import annotations

import random
from dataclasses import replace

import numpy as np
import pytest
from benchmarks.scheduler_bench import template
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from numalign.errors import InputError
from numalign.machine.model import Machine
from numalign.machine.spec import load_machine
from numalign.modes.volcano.fast import VolcanoMemo, volcano_shape
from numalign.modes.volcano.predicate import volcano_filter, volcano_filter_reference
from numalign.node.admission import Node
from numalign.node.usage import ObservedUsage, apply_observed
from numalign.pods import Container, ContainerKind, Pod, QOSClass
from numalign.pods.annotations import VOLCANO_ANNOTATION
from numalign.scheduler import Cluster, Scheduler, get_profile
from numalign.scheduler.filters import FilterResult
from numalign.scheduler.scorers import volcano_numa_aware, volcano_numa_aware_array
from numalign.sim.cluster import load_cluster
from numalign.sim.sources import parse_workload_spec
from test_cpu_properties import machines

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
POLICIES = ["none", "best-effort", "restricted", "single-numa-node"]


def _configured(m: Machine, policy: str, prefer_closest: bool) -> Machine:
    opts = {"prefer-closest-numa-nodes": "true"} if prefer_closest else {}
    return m.replace(kubelet=m.kubelet.replace(topology_manager_policy=policy,
                                      topology_manager_policy_options=opts))


def _node(m: Machine) -> Node:
    try:
        node = Node(m)
        _ = node.reserved_cpus
        volcano_filter_reference(node, _pod("probe", [1000]))
    except InputError:
        assume(False)  # a kubelet configuration the kubelet refuses (e.g. align-by-socket + snn)
    return node


def _pod(uid: str, cpus: list[int], *, guaranteed: bool = True, policy: str = "", init: int = 0) -> Pod:
    containers = []
    if init:
        req = {"cpu": init, "memory": 1 << 20}
        containers.append(Container("init", ContainerKind.INIT, requests=req, limits=dict(req)))
    for k, millis in enumerate(cpus):
        req = {"cpu": millis, "memory": 1 << 20}
        containers.append(Container(f"c{k}", ContainerKind.APP, requests=req,
                                    limits=dict(req) if guaranteed else {}))
    ann = {VOLCANO_ANNOTATION: policy} if policy else {}
    qos = QOSClass.GUARANTEED if guaranteed else QOSClass.BURSTABLE
    return Pod("t", uid, uid, qos, tuple(containers), ann)


@st.composite
def pods(draw: st.DrawFn, uid: str) -> Pod:
    cpus = draw(st.lists(st.sampled_from([0, 500, 1000, 2000, 3000, 4000, 6000, 1500]), min_size=1, max_size=3))
    cpus = [c if c else 1000 for c in cpus]
    return _pod(
        uid, cpus,
        guaranteed=draw(st.booleans()) or draw(st.booleans()),
        policy=draw(st.sampled_from(["", "", "best-effort", "restricted", "single-numa-node", "none", "bogus"])),
        init=draw(st.sampled_from([0, 0, 1000, 2000])),
    )


def _same(a: FilterResult, b: FilterResult) -> bool:
    return (a.passed, a.numa_count, a.reason) == (b.passed, b.numa_count, b.reason)


@SETTINGS
@given(machines(), st.sampled_from(POLICIES), st.booleans(), st.data())
def test_fast_predicate_equals_the_reference(m: Machine, policy: str, closest: bool, data: st.DataObject) -> None:
    """Several nodes of one machine, filled differently, asked about several pods in random
    order: the memo's answers (shared between the nodes) equal a full admission's."""
    m = _configured(m, policy, closest)
    nodes = [_node(m) for _ in range(3)]
    held: list[tuple[Node, Pod]] = []
    for k, node in enumerate(nodes):
        for j in range(data.draw(st.integers(0, 3))):
            p = data.draw(pods(f"fill-{k}-{j}"))
            if node.admit(p).admitted:
                held.append((node, p))
    asked = [data.draw(pods(f"ask-{j}")) for j in range(4)]
    pairs = [(node, p) for node in nodes for p in asked] + held
    for node, p in data.draw(st.permutations(pairs)):
        fast = volcano_filter(node, p)
        slow = volcano_filter_reference(node, p)
        assert _same(fast, slow), (p, fast, slow)


@SETTINGS
@given(machines(), st.sampled_from(POLICIES[1:]), st.data())
def test_single_cpu_container_pods_are_decided_by_per_numa_counts(
    m: Machine, policy: str, data: st.DataObject
) -> None:
    """The lemma behind the counts key: two states with the same available CPUs per NUMA node
    (different CPU ids) give the same answer to a pod with one exclusive-CPU container."""
    m = _configured(m, policy, False)
    a, b = _node(m), _node(m)
    memo: VolcanoMemo[FilterResult] = VolcanoMemo()
    key = memo.node_key(a)
    assume(key.counts >= 0)  # full-pcpus-only / align-by-socket: exact CPU sets decide
    rnd = random.Random(data.draw(st.integers(0, 10**6)))
    for k in range(data.draw(st.integers(0, 4))):
        p = _pod(f"fill-{k}", [data.draw(st.sampled_from([1000, 2000, 3000]))])
        if a.admit(p).admitted:
            # the same number of CPUs per NUMA node on b, other ids where there is a choice
            got = a.state.cpu.pod_cpus(p.uid)["c0"]
            per_numa: dict[int, int] = {}
            for c in got:
                per_numa[m.cpu_by_id[c].numa] = per_numa.get(m.cpu_by_id[c].numa, 0) + 1
            choice: dict[int, frozenset[int]] = {}
            for numa, cnt in per_numa.items():
                pool = sorted(b.state.cpu.shared_pool() & m.cpus_by_numa[numa] - b.reserved_cpus)
                choice[numa] = frozenset(rnd.sample(pool, cnt))
            b.state = apply_observed(b, ObservedUsage(cpus=choice), uid=f"obs-{k}")
    assert memo.node_key(a).counts == memo.node_key(b).counts
    for n in (1, 2, 3, 4, 5, 8):
        p = _pod(f"ask-{n}", [n * 1000])
        assert _same(volcano_filter_reference(a, p), volcano_filter_reference(b, p))


def _template(count: int) -> list[tuple[str, Machine]]:
    out = []
    for k, policy in enumerate(POLICIES):
        m = load_machine({
            "name": f"m{k}", "shape": {"sockets": 2, "numaPerSocket": 2, "coresPerNuma": 2, "threadsPerCore": 2},
            "kubelet": {"cpuManagerPolicy": "static", "topologyManagerPolicy": policy, "reservedSystemCPUs": "0"},
        })
        out += [(f"{policy}-{i}", m) for i in range(count)]
    return out


def _reference_scheduler(cluster: Cluster, nodes_to_score: int | None) -> Scheduler:
    slow = replace(get_profile("volcano"), filter=volcano_filter_reference, relative_select=None)
    return Scheduler(cluster, slow, nodes_to_score)


def test_an_answer_for_a_pod_the_node_holds_is_not_kept_for_other_pods() -> None:
    """The node-by-node walk keeps filter answers per node version and pod shape; a node that
    holds the pod answers for that pod alone (hypothesis found the reference walk giving the
    next pod of the shape the held pod's NUMA count, 1 instead of 2)."""
    def guaranteed(name: str) -> Container:
        amounts = {"cpu": 1000, "memory": 1 << 20}
        return Container(name=name, kind=ContainerKind.APP, requests=amounts, limits=dict(amounts))

    burstable = Pod(namespace="t", name="x", uid="x", qos=QOSClass.BURSTABLE, containers=(
        Container(name="c0", kind=ContainerKind.APP, requests={"cpu": 1000, "memory": 1 << 20}, limits={}),))
    two = Pod(namespace="t", name="x", uid="x", qos=QOSClass.GUARANTEED, containers=(guaranteed("c0"), guaranteed("c1")),
              annotations={VOLCANO_ANNOTATION: "best-effort"})
    nodes = _template(1)
    fast = Scheduler(Cluster(nodes), get_profile("volcano"))
    slow = _reference_scheduler(Cluster(nodes), None)
    counts = []
    for k, p in enumerate([burstable, two, two]):
        p = p.replace(name=f"p{k}", uid=f"p{k}")
        a, b = fast.schedule(p), slow.schedule(p)
        assert (a.placement, a.admitted) == (b.placement, b.admitted)
        assert a.admitted and a.placement is not None
        counts.append(a.placement.numa_count)
        assert fast.select(p)[:2] == slow.select(p)[:2]  # asked again while its node holds it
    assert counts == [0, 1, 2]


def test_a_pod_held_under_its_name_is_refused_for_itself_alone() -> None:
    """A node holding a pod ``namespace/name`` refuses another pod of that name (another uid)
    as "already admitted"; that refusal names the pod, so the next pod of the shape, another
    name, still gets the node's own answer (the cache keeps neither)."""
    amounts = {"cpu": 1000, "memory": 1 << 20}
    pod = Pod(namespace="t", name="a", uid="a1", qos=QOSClass.GUARANTEED, containers=(
        Container(name="c0", kind=ContainerKind.APP, requests=amounts, limits=dict(amounts)),))
    nodes = _template(1)[-1:]  # one node: the walk has to ask the node that holds the pod
    for name in ("numalign", "koordinator"):  # profiles whose filter is the node's admission
        sched = Scheduler(Cluster(nodes), get_profile(name))
        assert sched.schedule(pod).admitted
        again = pod.replace(uid="a2")  # the same namespace/name, another uid
        placement, reason, _ = sched.select(again)
        assert placement is None and reason is not None and "already admitted" in reason
        other = pod.replace(name="b", uid="b1")
        placement, reason, _ = sched.select(other)
        assert placement is not None and reason is None


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(1, 4), st.sampled_from([None, 1, 3]), st.lists(pods("x"), min_size=1, max_size=25), st.data())
def test_fast_walk_places_like_the_schedulers_walk(
    count: int, to_score: int | None, drawn: list[Pod], data: st.DataObject
) -> None:
    nodes = _template(count)
    fast = Scheduler(Cluster(nodes), get_profile("volcano"), to_score)
    slow = _reference_scheduler(Cluster(nodes), to_score)
    running: list[tuple[Pod, int]] = []
    for k, p in enumerate(drawn):
        p = p.replace(name=f"p{k}", uid=f"p{k}")
        if running and data.draw(st.booleans()):
            gone, at = running.pop(data.draw(st.integers(0, len(running) - 1)))
            fast.release(gone, at)
            slow.release(gone, at)
        a, b = fast.schedule(p), slow.schedule(p)
        assert (a.placement, a.admitted, a.reason) == (b.placement, b.admitted, b.reason)
        if a.admitted and a.placement is not None:
            running.append((p, a.placement.node))
            # asked again while a node's CPU state holds its uid: that node answers directly
            assert fast.select(p)[:2] == slow.select(p)[:2]
    for x, y in zip(fast.cluster.nodes, slow.cluster.nodes, strict=True):
        assert x.node.state.to_dict() == y.node.state.to_dict()


def test_fast_walk_places_like_the_schedulers_walk_on_a_synthetic_workload() -> None:
    """The bench's cluster shape (8 NUMA nodes, single-numa-node and restricted) at 60 nodes,
    300 mixed pods: the same placement, score and outcome for every pod."""
    nodes = load_cluster(template(60), "bench")
    wl = [a.pod for a in parse_workload_spec("synthetic:count=300,seed=11", None, cluster=nodes)]
    fast = Scheduler(Cluster(nodes), get_profile("volcano"), 20)
    slow = _reference_scheduler(Cluster(nodes), 20)
    for p in wl:
        a, b = fast.schedule(p), slow.schedule(p)
        assert (a.placement, a.admitted, a.reason) == (b.placement, b.admitted, b.reason)


def test_identical_nodes_share_one_admission() -> None:
    """50 empty single-numa-node nodes: the first Guaranteed pod costs one admission, not 50;
    a second pod of the same shape one more (the node the first one went to changed)."""
    m = load_machine({"name": "snn", "shape": {"sockets": 2, "coresPerNuma": 4},
                      "kubelet": {"cpuManagerPolicy": "static", "topologyManagerPolicy": "single-numa-node",
                                  "reservedSystemCPUs": "0"}})
    sched = Scheduler(Cluster([(f"n{i}", m) for i in range(50)]), get_profile("volcano"))
    first = sched.schedule(_pod("a", [2000]))
    assert first.admitted and first.checked == 1
    second = sched.schedule(_pod("b", [2000]))
    assert second.admitted and second.checked == 1


def test_a_pod_already_on_the_node_is_asked_directly() -> None:
    """The memo is skipped where the node's CPU state holds the pod's uid (its own records
    take part in the admission): the answer is the reference's."""
    m = load_machine({"name": "snn", "shape": {"sockets": 2, "coresPerNuma": 4},
                      "kubelet": {"cpuManagerPolicy": "static", "topologyManagerPolicy": "single-numa-node",
                                  "reservedSystemCPUs": "0"}})
    node = Node(m)
    p = _pod("here", [2000])
    assert node.admit(p).admitted
    assert _same(volcano_filter(node, p), volcano_filter_reference(node, p))


def test_volcano_shape_reads_the_policy_and_exclusive_cpus() -> None:
    p = _pod("s", [2000, 1500], policy="restricted", init=1000)
    assert volcano_shape(p) == ("restricted", (2, 0))


@pytest.mark.parametrize("counts", [[1, 2, 4], [0, 0], [3], [0, 2, 2, 1], [7, 1, 0]])
def test_volcano_score_array_equals_the_list_version(counts: list[int]) -> None:
    assert (10 * volcano_numa_aware_array(np.array(counts))).tolist() == volcano_numa_aware(counts, weight=10)
