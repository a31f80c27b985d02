"""Node.twin: a cluster's nodes of one machine share its resolved rules and figures; each
twin decides as a node built from scratch and keeps its own state."""

from __future__ import annotations

import pytest

from numalign.node.admission import Node
from numalign.sim.cluster import builtin_cluster
from numalign.sim.sources import parse_workload_spec


@pytest.mark.parametrize("name", ["default", "alibaba2025"])
def test_twins_decide_as_fresh_nodes(name: str) -> None:
    nodes = builtin_cluster(name)
    machines = list({id(m): m for _, m in nodes}.values())
    pods = parse_workload_spec("synthetic:count=24,seed=11", None, cluster=nodes).pods
    for m in machines:
        template = Node(m)
        twin, fresh = template.twin(), Node(m)
        # the rules are shared; the family's node object compares by its fields
        assert twin.rules is template.rules and twin.allocatable == fresh.allocatable
        assert twin.rules.replace(decides=None) == fresh.rules.replace(decides=None)
        assert vars(twin.rules.decides) == vars(fresh.rules.decides)
        assert twin.state is not template.state and twin.state.to_dict() == fresh.state.to_dict()
        assert twin.reserved_cpus == fresh.reserved_cpus
        for pod in pods:  # admit in turn on both: the same decisions and states throughout
            a, b = twin.admit(pod), fresh.admit(pod)
            assert (a.admitted, a.reason, a.message, a.containers) == (b.admitted, b.reason, b.message, b.containers)
            assert twin.state.to_dict() == fresh.state.to_dict()
        assert template.state.to_dict() == Node(m).state.to_dict()  # the template stayed empty
        assert any(p for p in twin.state.pods)


@pytest.mark.parametrize("name", ["default", "alibaba2025"])
def test_cluster_nodes_share_the_empty_states_decision_key(name: str) -> None:
    """A fresh cluster's nodes of one machine get its first node's decision key (computed
    once): the key each node's own state gives, one key object per machine."""
    from numalign.node.plan_cache import _decision_key
    from numalign.resources.pod_delta import decision_key
    from numalign.scheduler.cluster import Cluster

    cluster = Cluster(builtin_cluster(name))
    by_machine: dict[int, object] = {}
    for cn in cluster.nodes:
        st = cn.node.state
        key = _decision_key(st)
        assert key.key == decision_key(st.cpu, st.memory, st.devices)
        assert by_machine.setdefault(id(cn.machine), key) is key
    assert len(by_machine) == len({id(cn.machine) for cn in cluster.nodes})
