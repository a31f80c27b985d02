"""The decision keys the plan cache remembers per node state (and hands to a replayed state
from the plan it replays) are the keys :func:`decision_key` computes from the state itself,
through random admissions, releases and replays between nodes."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from numalign.node.admission import Node
from numalign.node.plan_cache import PlanCache, _decision_key
from numalign.node.state import NodeState
from numalign.resources.pod_delta import decision_key
from test_scheduler_speed_plan_cache import _NODES, _OPS, Ops, _step


def _same_key(state: NodeState) -> None:
    assert _decision_key(state).key == decision_key(state.cpu, state.memory, state.devices)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_OPS, min_size=1, max_size=4), _OPS, st.integers(0, len(_NODES) - 1))
def test_remembered_keys_equal_computed_ones(warm_ops: list[Ops], ops: Ops, which: int) -> None:
    machine = _NODES[which][1]
    cache = PlanCache()
    for k, w in enumerate([*warm_ops, ops]):
        node = Node(machine)
        node.plan_cache = cache
        for _, planned in _step(node, w, f"n{k}"):
            if planned is not None:
                _same_key(planned)
            _same_key(node.state)
