"""Volcano's own unit-test tables, transcribed (volcano-sh/volcano
``pkg/scheduler/plugins/numaaware/policy/policy_{best_effort,restricted,single_numa_node}_test.go``
and ``provider/cpumanager/cpu_mng_test.go``), run in the ``volcano`` engine mode."""

from __future__ import annotations

import pytest

from numalign.bitmask import mask_of
from numalign.hints import GeneratedHints, TopologyHint
from numalign.machine.model import Machine
from numalign.machine.spec import load_machine
from numalign.modes import Mode, merge
from numalign.policies import Policy, TopologyPolicy
from numalign.resources.cpu import CpuManager


def h(ids: tuple[int, ...], preferred: bool) -> TopologyHint:
    return TopologyHint(mask_of(ids), preferred)


# the providers of test-1 .. test-6 (cpu, gpu), as written in all three policy test files
CASES = {
    "test-1": ([h((0, 1), False), h((0,), True)], [h((0, 1), False), h((0,), True)]),
    "test-2": ([h((0, 1), False), h((1,), True)], [h((0, 1), False), h((1,), True)]),
    "test-3": ([h((0, 1), False), h((0,), True), h((1,), True)], [h((0, 1), False), h((0,), True), h((1,), True)]),
    "test-4": ([h((0, 1), False), h((0,), True)], [h((0, 1), False), h((1,), True)]),
    "test-5": ([h((0, 1), False), h((0,), True)], [h((0, 1), True)]),
    "test-6": ([h((0, 1), True)], [h((0, 1), True)]),
}
BEST_EFFORT = {"test-1": ((0,), True), "test-2": ((1,), True), "test-3": ((0,), True), "test-4": ((0,), False),
               "test-5": ((0,), True), "test-6": ((0, 1), True)}
SINGLE_NUMA_NODE = {"test-1": ((0,), True), "test-2": ((1,), True), "test-3": ((0,), True),
                    "test-4": ((0, 1), False), "test-5": ((0, 1), False)}


def _run(policy: Policy, name: str) -> TopologyHint:
    cpu, gpu = CASES[name]
    return merge(Mode.VOLCANO, TopologyPolicy(policy, (0, 1)), [{"cpu": cpu}, {"gpu": gpu}]).hint


@pytest.mark.parametrize("name", sorted(BEST_EFFORT))
def test_best_effort_predicate(name: str) -> None:
    ids, preferred = BEST_EFFORT[name]
    assert _run(Policy.BEST_EFFORT, name) == h(ids, preferred)


@pytest.mark.parametrize("name", sorted(BEST_EFFORT))
def test_restricted_predicate(name: str) -> None:
    ids, preferred = BEST_EFFORT[name]  # policy_restricted_test.go has the same table
    assert _run(Policy.RESTRICTED, name) == h(ids, preferred)


@pytest.mark.parametrize("name", sorted(SINGLE_NUMA_NODE))
def test_single_numa_node_predicate(name: str) -> None:
    """Volcano returns the all-nodes mask where the kubelet returns no affinity."""
    ids, preferred = SINGLE_NUMA_NODE[name]
    assert _run(Policy.SINGLE_NUMA_NODE, name) == h(ids, preferred)


def test_the_kubelet_mode_differs_where_the_merge_rules_do() -> None:
    cpu, gpu = CASES["test-5"]
    kubelet = merge(Mode.KUBELET, TopologyPolicy(Policy.BEST_EFFORT, (0, 1)), [{"cpu": cpu}, {"gpu": gpu}])
    # equal-affinity rule: {0} & {0,1} is not preferred, and the kubelet ranks non-preferred
    # masks by bestNonPreferredAffinityCount: the widest feasible hint
    assert kubelet.hint == h((0, 1), False)
    cpu, gpu = CASES["test-4"]
    snn = merge(Mode.KUBELET, TopologyPolicy(Policy.SINGLE_NUMA_NODE, (0, 1)), [{"cpu": cpu}, {"gpu": gpu}])
    assert snn.hint == TopologyHint(None, False)


# ------------------------------------------------------------------ cpu_mng_test.go


@pytest.fixture(scope="module")
def machine() -> Machine:
    """``numaInfo``: CPUs 0-3 on NUMA 0 / socket 0, 4-7 on NUMA 1 / socket 1, two threads a core."""
    return load_machine({
        "name": "volcano-cpu-mng-test",
        "numaNodes": [{"id": 0, "memory": "8Gi"}, {"id": 1, "memory": "8Gi"}],
        "cpus": [{"id": i, "core": i // 2, "socket": i // 4, "numa": i // 4} for i in range(8)],
        "kubelet": {"cpuManagerPolicy": "static"},
    })


HINTS = [
    ("test-1", 4, range(8), [h((0,), True), h((1,), True), h((0, 1), False)]),
    ("test-2", 4, range(1, 8), [h((1,), True), h((0, 1), False)]),
    ("test-3", 5, range(8), [h((0, 1), True)]),
    ("test-4", 8, range(8), [h((0, 1), True)]),
    ("test-5", 9, range(8), []),
    ("test-6", 4, (2, 3, 4, 5), [h((0, 1), False)]),
]


@pytest.mark.parametrize(("request_", "free", "want"), [c[1:] for c in HINTS], ids=[c[0] for c in HINTS])
def test_get_topology_hints(machine: Machine, request_: int, free: range, want: list[TopologyHint]) -> None:
    got = CpuManager(machine, reserved=[]).hint_set(set(free), (), request_)
    assert (got.materialize() if isinstance(got, GeneratedHints) else list(got)) == want


ALLOCATE = [
    ("test-1", 4, range(8), (0,), {0, 1, 2, 3}),
    ("test-2", 4, range(1, 8), (1,), {4, 5, 6, 7}),
    ("test-3", 5, range(8), (0, 1), {0, 1, 2, 3, 4}),
    ("test-4", 5, range(1, 8), (0, 1), {1, 4, 5, 6, 7}),
    ("test-5", 8, range(1, 8), (0, 1), set()),
]


@pytest.mark.parametrize(("request_", "free", "hint", "want"), [c[1:] for c in ALLOCATE],
                         ids=[c[0] for c in ALLOCATE])
def test_allocate(machine: Machine, request_: int, free: range, hint: tuple[int, ...], want: set[int]) -> None:
    from numalign.errors import NumalignError

    cpu = CpuManager(machine, reserved=[])
    cpu.state.default_set = set(free)
    try:
        got = set(cpu.allocate_cpus(request_, mask_of(hint)))
    except NumalignError:
        got = set()  # Volcano's provider answers an empty cpuset on failure
    assert got == want
