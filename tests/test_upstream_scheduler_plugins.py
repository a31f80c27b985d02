"""scheduler-plugins' own unit-test tables, transcribed (kubernetes-sigs/scheduler-plugins
``pkg/noderesourcetopology/least_numa_test.go`` and ``score_test.go``), run against
:mod:`numalign.scheduler.nrt_scores` and the NRT profiles."""

from __future__ import annotations

from fractions import Fraction

import pytest

from numalign.inputs.quantity import parse_quantity
from numalign.pods import Pod, QOSClass
from numalign.scheduler.nrt_scores import (
    NumaZone,
    balanced_allocation_zone,
    container_scope_score,
    least_allocated_zone,
    least_numa_container_scope_score,
    least_numa_pod_scope_score,
    min_avg_distance_in_combinations,
    most_allocated_zone,
    normalize_score,
    numa_nodes_required,
)

G = QOSClass.GUARANTEED
GPU = "gpu"


def q(res: str, text: str) -> int:
    """A quantity in nrt_scores' units (cpu in millicores)."""
    v = parse_quantity(text)
    return int(v * 1000) if res == "cpu" else int(v)


def res(**amounts: str) -> dict[str, int]:
    return {k: q(k, v) for k, v in amounts.items()}


def zone(nid: int, costs: dict[int, int] | None = None, **amounts: str) -> NumaZone:
    return NumaZone(nid, res(**amounts), dict(costs or {}))


# ----------------------------------------------------------- TestNUMANodesRequired

C4 = {0: 10, 1: 12, 2: 20, 3: 20}, {0: 12, 1: 10, 2: 20, 3: 20}, {0: 20, 1: 20, 2: 10, 3: 12}
C8 = {
    0: [10, 20, 40, 30, 20, 30, 50, 40],
    3: [30, 40, 20, 10, 30, 20, 40, 50],
    5: [30, 20, 50, 20, 50, 10, 50, 40],
    7: [40, 50, 30, 50, 20, 40, 30, 10],
    1: [20, 10, 30, 40, 50, 20, 40, 50],
    6: [50, 40, 20, 40, 30, 50, 10, 30],
    2: [40, 30, 10, 20, 40, 50, 20, 30],
    4: [20, 50, 40, 30, 10, 50, 30, 20],
}


def _c8(nid: int) -> dict[int, int]:
    return dict(enumerate(C8[nid]))


def _four(gpus: tuple[str, ...], costs: tuple[dict[int, int], ...], ids: tuple[int, ...] = (0, 1, 2, 3),
          no_memory: tuple[int, ...] = ()) -> list[NumaZone]:
    out = []
    for nid, g, c in zip(ids, gpus, costs, strict=True):
        amounts = {GPU: g, "cpu": "4"} if nid in no_memory else {GPU: g, "cpu": "4", "memory": "5Gi"}
        out.append(zone(nid, c, **amounts))
    return out


SEQ4_OPT = (C4[0], C4[1], C4[2], {0: 20, 1: 20, 2: 10, 3: 12})  # upstream's table, node 3 as written
SEQ4_NONOPT = (C4[0], C4[1], C4[2], {0: 20, 1: 20, 2: 12, 3: 10})
NS = ({0: 10, 2: 12, 4: 20, 6: 20}, {0: 12, 2: 10, 4: 20, 6: 20}, {0: 20, 2: 20, 4: 10, 6: 12},
      {0: 20, 2: 20, 4: 12, 6: 10})
ORDER8 = (0, 3, 5, 7, 1, 6, 2, 4)

NUMA_NODES_REQUIRED = [
    ("simple case, fit on 1 NUMA node",
     [zone(0, cpu="8", memory="10Gi")], res(cpu="2", memory="2Gi"), {0}, True),
    ("simple case, fit on 2 NUMA node",
     [zone(0, cpu="8", memory="10Gi"), zone(1, cpu="8", memory="10Gi")], res(cpu="12", memory="2Gi"), {0, 1}, True),
    ("can't fit",
     [zone(0, cpu="8", memory="10Gi"), zone(1, cpu="8", memory="10Gi")], res(cpu="22", memory="2Gi"), None, False),
    ("4 NUMA node optimal distance",
     _four(("1", "1", "0", "0"), SEQ4_OPT), res(cpu="2", memory="2Gi", gpu="2"), {0, 1}, True),
    ("4 NUMA node non optimal distance",
     _four(("1", "0", "1", "0"), SEQ4_NONOPT), res(cpu="2", memory="2Gi", gpu="2"), {0, 2}, False),
    ("8 NUMA node optimal distance, not sorted ids",
     [zone(n, _c8(n), gpu="1", cpu="4", memory="5Gi") for n in ORDER8],
     res(cpu="3", memory="2Gi", gpu="3"), {0, 1, 5}, True),
    ("8 NUMA node non optimal distance, not sorted ids, odd digit NUMA node without memory",
     [zone(n, _c8(n), gpu="1", cpu="4") if n % 2 else zone(n, _c8(n), gpu="1", cpu="4", memory="5Gi")
      for n in ORDER8],
     res(cpu="3", memory="2Gi", gpu="3"), {2, 4, 6}, False),
    ("4 NUMA node optimal distance, non sequential ids",
     _four(("1", "1", "0", "0"), NS, (0, 2, 4, 6)), res(cpu="2", memory="2Gi", gpu="2"), {0, 2}, True),
    ("4 NUMA node non optimal distance, non sequential ids",
     _four(("1", "0", "0", "1"), NS, (0, 2, 4, 6)), res(cpu="2", memory="2Gi", gpu="2"), {0, 6}, False),
    ("4 NUMA node non optimal distance, non sequential ids, NUMA node-2 and node-6 without memory",
     _four(("1", "1", "1", "1"), NS, (0, 2, 4, 6), no_memory=(2, 6)),
     res(cpu="2", memory="2Gi", gpu="2"), {0, 4}, False),
]


@pytest.mark.parametrize(("zones", "request_", "want", "optimal"), [c[1:] for c in NUMA_NODES_REQUIRED],
                         ids=[c[0] for c in NUMA_NODES_REQUIRED])
def test_numa_nodes_required(zones: list[NumaZone], request_: dict[str, int], want: set[int] | None,
                             optimal: bool) -> None:
    got, got_optimal = numa_nodes_required(G, zones, request_)
    assert (None if got is None else set(got)) == want
    assert got_optimal is optimal


@pytest.mark.parametrize(("count", "optimal", "want"), [
    (1, False, 88), (2, False, 76), (8, False, 4), (1, True, 94), (2, True, 82), (8, True, 10),
])
def test_normalize_score(count: int, optimal: bool, want: int) -> None:
    assert normalize_score(count, optimal) == want


_MD = [zone(i, c) for i, c in enumerate((*C4[:3], {0: 20, 1: 20, 2: 12, 3: 10}))]
_MD_NO_COSTS = [zone(i) for i in range(4)]


@pytest.mark.parametrize(("zones", "combos", "want"), [
    (_MD, [[0], [1], [2], [3]], Fraction(10)),
    (_MD, [[0, 1], [0, 2], [0, 3], [1, 2], [1, 3], [2, 3]], Fraction(11)),
    (_MD, [[0, 1, 2], [1, 2, 3], [0, 2, 3]], Fraction(134, 9)),  # 14.888889 as float32
    (_MD_NO_COSTS, [[0, 1], [0, 2], [0, 3], [1, 2], [1, 3], [2, 3]], Fraction(255)),
], ids=["single", "two", "three", "two, no costs"])
def test_min_distance(zones: list[NumaZone], combos: list[list[int]], want: Fraction) -> None:
    got = min_avg_distance_in_combinations(zones, combos)
    assert got == want
    assert abs(float(got) - {10: 10.0, 11: 11.0, 255: 255.0}.get(int(want), 14.888889)) < 1e-5


# ---------------------------------------------------------- TestNodeResourceScorePlugin

def _default_nodes() -> dict[str, list[NumaZone]]:
    """``defaultNUMANodes``: three two-zone nodes, no costs published."""
    return {
        "Node1": [zone(0, cpu="4", memory="500Mi"), zone(1, cpu="4", memory="500Mi")],
        "Node2": [zone(0, cpu="2", memory="50Mi"), zone(1, cpu="2", memory="50Mi")],
        "Node3": [zone(0, cpu="6", memory="60Mi"), zone(1, cpu="6", memory="60Mi")],
    }


POD1 = {"cpu": 2000, "memory": 20 * 1024 * 1024}


@pytest.mark.parametrize(("strategy", "node", "want"), [
    (most_allocated_zone, "Node2", 70),
    (balanced_allocation_zone, "Node3", 100),
    (least_allocated_zone, "Node1", 73),
])
def test_score_strategies_pick_the_node_upstream_picks(strategy: object, node: str, want: int) -> None:
    scores = {n: container_scope_score([POD1], zs, strategy, {}) for n, zs in _default_nodes().items()}  # type: ignore[arg-type]
    best = max(scores.values())
    assert scores[node] == best == want
    assert [n for n, s in scores.items() if s == best] == [node]


@pytest.mark.parametrize(("strategy", "want"), [
    (most_allocated_zone, 27), (least_allocated_zone, 73), (balanced_allocation_zone, 89),
])
def test_partial_data_node1_scores(strategy: object, want: int) -> None:
    """``TestNodeResourcePartialDataScorePlugin``: Node1 alone has NRT data."""
    assert container_scope_score([POD1], _default_nodes()["Node1"], strategy, {}) == want  # type: ignore[arg-type]


def _four_numa_nodes() -> dict[str, list[NumaZone]]:
    costs = ({0: 10, 1: 12, 2: 20, 3: 20}, {0: 12, 1: 10, 2: 20, 3: 20}, {0: 20, 1: 20, 2: 10, 3: 12},
             {0: 20, 1: 20, 2: 12, 3: 10})

    def node(gpus: tuple[str, ...]) -> list[NumaZone]:
        return [zone(i, costs[i], cpu="2", memory="50Mi", gpu=g) for i, g in enumerate(gpus)]

    return {"Node1": node(("1", "1", "0", "0")), "Node2": node(("1", "0", "1", "0"))}


LEAST_NUMA = [
    ("container scope, one container case 1", "container", [res(cpu="2", memory="50Mi")],
     {"Node1": 94, "Node2": 94, "Node3": 94}, _default_nodes),
    ("container scope, one container case 2", "container", [res(cpu="4", memory="50Mi")],
     {"Node1": 94, "Node2": 82, "Node3": 94}, _default_nodes),
    ("container scope, one container case 3", "container", [res(cpu="6", memory="50Mi")],
     {"Node1": 82, "Node2": 0, "Node3": 94}, _default_nodes),
    ("container scope, two containers case 1", "container",
     [res(cpu="2", memory="50Mi"), res(cpu="2", memory="50Mi")], {"Node1": 94, "Node2": 94, "Node3": 94},
     _default_nodes),
    ("container scope, two containers case 2", "container",
     [res(cpu="1", memory="50Mi"), res(cpu="3", memory="50Mi")], {"Node1": 94, "Node2": 82, "Node3": 94},
     _default_nodes),
    ("container scope, two containers case 3", "container",
     [res(cpu="5", memory="50Mi"), res(cpu="3", memory="50Mi")], {"Node1": 82, "Node2": 0, "Node3": 94},
     _default_nodes),
    ("container scope, two containers non NUMA resource", "container",
     [{"non-numa-resource": 1}, {"non-numa-resource": 2}], {"Node1": 100, "Node2": 100, "Node3": 100},
     _default_nodes),
    ("pod scope, two containers case 1", "pod",
     [res(cpu="2", memory="50Mi"), res(cpu="2", memory="50Mi")], {"Node1": 94, "Node2": 82, "Node3": 82},
     _default_nodes),
    ("pod scope, two containers case 2", "pod",
     [res(cpu="1", memory="50Mi"), res(cpu="3", memory="50Mi")], {"Node1": 94, "Node2": 82, "Node3": 82},
     _default_nodes),
    ("pod scope, two containers case 3", "pod",
     [res(cpu="5", memory="50Mi"), res(cpu="3", memory="50Mi")], {"Node1": 82, "Node2": 0, "Node3": 82},
     _default_nodes),
    ("pod scope, one containers non NUMA resource", "pod", [{"non-numa-resource": 1}],
     {"Node1": 100, "Node2": 100, "Node3": 100}, _default_nodes),
    ("container scope, one container, 4 NUMA nodes, 1 gpu", "container",
     [res(cpu="2", memory="50Mi", gpu="1")], {"Node1": 94, "Node2": 94}, _four_numa_nodes),
    ("container scope, one container, 4 NUMA nodes, 2 gpu", "container",
     [res(cpu="2", memory="50Mi", gpu="2")], {"Node1": 82, "Node2": 76}, _four_numa_nodes),
    ("container scope, 2 containers, 4 NUMA nodes, 2 gpu in one container", "container",
     [res(cpu="2", memory="50Mi", gpu="2"), res(cpu="2", memory="50Mi")], {"Node1": 82, "Node2": 76},
     _four_numa_nodes),
]


@pytest.mark.parametrize(("scope", "containers", "want", "nodes"), [c[1:] for c in LEAST_NUMA],
                         ids=[c[0] for c in LEAST_NUMA])
def test_least_numa_score_plugin(scope: str, containers: list[dict[str, int]], want: dict[str, int],
                                 nodes: object) -> None:
    got = {}
    for name, zones in nodes().items():  # type: ignore[operator]
        if scope == "pod":
            total: dict[str, int] = {}
            for c in containers:  # app containers only: the effective request is their sum
                for r, v in c.items():
                    total[r] = total.get(r, 0) + v
            got[name] = least_numa_pod_scope_score(G, total, zones)
        else:
            got[name] = least_numa_container_scope_score(G, containers, zones)
    assert got == want


# ------------------------------------------------------------ the profiles on a cluster


def _guaranteed(name: str, cpu_milli: int, memory: int) -> Pod:
    from numalign.pods import Container, ContainerKind, default_uid

    req = {"cpu": cpu_milli, "memory": memory}
    c = Container("main", ContainerKind.APP, requests=req, limits=dict(req))
    return Pod(namespace="t", name=name, uid=default_uid("t", name), qos=G, containers=(c,))


@pytest.mark.parametrize("profile", ["nrt-snn-least-numa", "nrt-snn-most-allocated", "nrt-snn-balanced"])
def test_nrt_profiles_score_the_published_zones(profile: str) -> None:
    """Each placement is the node with the best LeastAllocated + NRT score among those the
    filter passes, the NRT score computed from the zones the node would publish."""
    import numpy as np

    from numalign.scheduler import Cluster, Scheduler, get_profile
    from numalign.scheduler.scorers import least_allocated, nrt_zones
    from numalign.sim.cluster import builtin_cluster

    p = get_profile(profile)
    assert p.numa_score is not None and p.numa_score.node_aware
    cluster = Cluster(builtin_cluster("small"))  # type: ignore[arg-type]
    sched = Scheduler(cluster, p)
    for k in range(6):
        pod = _guaranteed(f"p{k}", 4000 * (k % 3 + 1), (k + 1) << 30)
        vec = cluster.request_vector(pod)
        assert vec is not None
        idx = np.flatnonzero(cluster.fits(vec))
        assert p.filter is not None
        node_scores = least_allocated(cluster, idx, vec)
        totals = {}
        for j, i in enumerate(idx):
            node = cluster.nodes[int(i)].node
            res = p.filter(node, pod)
            if res.passed:
                totals[int(i)] = float(node_scores[j]) + p.numa_score.score_on(node, pod, res.numa_count, 0)
        out = sched.schedule(pod)
        assert out.placement is not None
        assert totals[out.placement.node] == max(totals.values())
        zones = nrt_zones(cluster.nodes[out.placement.node].node)
        assert zones and all("cpu" in z.resources for z in zones)
