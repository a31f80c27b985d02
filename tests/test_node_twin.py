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
