"""The replay's aligned verdict remembers each (machine, pod shape)'s fewest NUMA nodes: it
must not depend on the node's state. Checked on every node of a replayed cluster (pods
running) against a fresh node of the same machine."""

from __future__ import annotations

from numalign.node.admission import Node
from numalign.sim.cluster import builtin_cluster
from numalign.sim.runner import minimal_numa_nodes, simulate
from numalign.sim.sources import parse_workload_spec
from numalign.sim.workloads import Arrival, Workload


def test_minimal_numa_nodes_do_not_depend_on_the_state() -> None:
    nodes = builtin_cluster("small")
    drawn = parse_workload_spec("synthetic:count=120,seed=5", None, cluster=nodes)
    workload = Workload("stay", tuple(Arrival(a.time_s, a.pod) for a in drawn))  # never depart
    result = simulate(nodes, workload, ["numalign"])
    cluster = result.clusters["numalign"]
    busy = [cn for cn in cluster.nodes if cn.node.state.pods]
    assert busy  # the replay left pods running: states differ from a fresh node's
    for cn in busy:
        fresh = Node(cn.machine)
        for a in workload:
            assert minimal_numa_nodes(cn.node, a.pod) == minimal_numa_nodes(fresh, a.pod)
