"""Koordinator's ``maxRefCount`` (CPUs several pods may hold), transcribed.

Source: koordinator-sh/koordinator at ``a7a1b76b`` (main):
``pkg/scheduler/plugins/nodenumaresource/cpu_accumulator_test.go`` (``TestTakeCPUsWithMaxRefCount``,
``TestTakeCPUsSortByRefCount``) and ``node_allocation_test.go`` (``TestNodeAllocationAddCPUs``,
``TestNodeAllocationStateReleaseCPUs``, ``Test_cpuAllocation_getAvailableCPUs``,
``Test_cpuAllocation_getAvailableCPUs_with_preferred_cpus``), run against
:func:`numalign.modes.koordinator.cpu.take_cpus` and :class:`CpuRefCounts`.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from koordinator_topology import cpus
from koordinator_topology import topo as koordinator_topo
from numalign.modes.koordinator.cpu_accumulator import (
    CpuRefCounts,
    NumaAllocateStrategy,
    _Accumulator,
    take_cpus,
)
from numalign.pods.annotations import BindPolicy, ExclusivePolicy
from numalign.resources.cpu_assignment import CpuTopology

MOST = NumaAllocateStrategy.MOST_ALLOCATED
FULL = BindPolicy.FULL_PCPUS
SPREAD = BindPolicy.SPREAD_BY_PCPUS
PCPU = ExclusivePolicy.PCPU_LEVEL
NONE = ExclusivePolicy.NONE


def topo(sockets: int, nodes_per_socket: int, cores_per_node: int, cpus_per_core: int) -> CpuTopology:
    """``buildCPUTopologyForTest`` with the tests' core ids ``socket << 16 | core``."""
    return koordinator_topo(sockets, nodes_per_socket, cores_per_node, cpus_per_core, socket_core_ids=True)


def _take(t: CpuTopology, state: CpuRefCounts, n: int, bind: BindPolicy) -> frozenset[int]:
    free, refs, policies = state.available(t.all_cpus, 2)
    return take_cpus(t, free, n, bind, NONE, MOST, policies, refs, 2)


def test_take_cpus_with_max_ref_count() -> None:
    """TestTakeCPUsWithMaxRefCount: maxRefCount 2 on 1 socket x 4 cores x 2 threads."""
    t = topo(1, 1, 4, 2)
    state = CpuRefCounts()
    for uid, n, want in (("a", 4, "0-3"), ("b", 5, "0,4-7"), ("c", 4, "2-5")):
        got = _take(t, state, n, FULL)
        assert got == cpus(want), uid
        state.add(uid, got, PCPU)


def test_take_cpus_sort_by_ref_count() -> None:
    """TestTakeCPUsSortByRefCount: maxRefCount 2 on 1 socket x 16 cores x 2 threads; the
    least-referenced CPUs and cores go first, until every CPU is held twice."""
    t = topo(1, 1, 16, 2)
    state = CpuRefCounts()
    steps = (
        ("a", SPREAD, "0,2,4,6,8,10,12,14,16,18,20,22,24,26,28,30"),
        ("b", FULL, "0-15"),
        ("c", SPREAD, "1,3,5,7,9,11,13,15,17,19,21,23,25,27,29,31"),
        ("d", FULL, "16-31"),
    )
    for uid, bind, want in steps:
        got = _take(t, state, 16, bind)
        assert got == cpus(want), uid
        state.add(uid, got, PCPU)
    assert state.available(t.all_cpus, 2)[0] == frozenset()


def test_ref_counts_ignored_when_max_is_one() -> None:
    """maxRefCount 1 (upstream's default): reference counts never reorder anything."""
    t = topo(1, 1, 16, 2)
    refs = {c: 1 for c in range(0, 32, 2)}
    evens = frozenset(range(0, 32, 2))
    assert take_cpus(t, t.all_cpus, 16, SPREAD, NONE, MOST, None, refs, 1) == evens
    assert take_cpus(t, t.all_cpus, 16, SPREAD, NONE, MOST, None, refs, 2) == evens ^ frozenset(range(32))


def test_free_cpus_order_by_ref_count() -> None:
    """``freeCPUs``: after socket co-location, free counts and core size, the core with the
    smaller summed reference count first; inside a core the less-referenced CPU first."""
    t = topo(1, 1, 2, 2)
    acc = _Accumulator(t, t.all_cpus, {}, 1, NONE, MOST, {0: 1, 1: 1, 2: 0, 3: 1}, 2)
    assert acc.free_cpus(False) == [2, 3, 0, 1]
    plain = _Accumulator(t, t.all_cpus, {}, 1, NONE, MOST, {0: 1, 1: 1, 2: 0, 3: 1}, 1)
    assert plain.free_cpus(False) == [0, 1, 2, 3]


def test_node_allocation_add_cpus() -> None:
    """TestNodeAllocationAddCPUs: counts and policies per CPU; adding a known pod again is a
    no-op; with maxRefCount 2 one holder leaves every CPU available."""
    t = topo(2, 1, 4, 2)
    state = CpuRefCounts()
    state.add("p", cpus("1-4"), PCPU)
    assert state.pods == {"p": (cpus("1-4"), PCPU)}
    assert state.refs == dict.fromkeys(cpus("1-4"), 1)
    assert state.policy == dict.fromkeys(cpus("1-4"), PCPU)
    assert state.available(t.all_cpus, 2)[0] == cpus("0-15")
    state.add("p", cpus("1-4"), PCPU)
    assert state.refs == dict.fromkeys(cpus("1-4"), 1)
    state.add("q", cpus("2-5"), PCPU)
    assert state.refs == {1: 1, 2: 2, 3: 2, 4: 2, 5: 1}


def test_node_allocation_release_cpus() -> None:
    """TestNodeAllocationStateReleaseCPUs."""
    state = CpuRefCounts()
    state.add("p", cpus("1-4"), PCPU)
    state.release("p")
    assert state.pods == {} and state.refs == {} and state.policy == {}


def test_get_available_cpus() -> None:
    """Test_cpuAllocation_getAvailableCPUs."""
    t = topo(2, 1, 4, 2)
    state = CpuRefCounts()
    state.add("p", cpus("1-4"), PCPU)
    assert state.available(t.all_cpus, 2)[0] == cpus("0-15")
    state.add("q", cpus("2-5"), PCPU)
    assert state.available(t.all_cpus, 2)[0] == cpus("0-1,5-15")
    state.release("p")
    assert state.available(t.all_cpus, 1)[0] == cpus("0-1,6-15")


def test_get_available_cpus_with_preferred_cpus() -> None:
    """Test_cpuAllocation_getAvailableCPUs_with_preferred_cpus: preferred CPUs give their
    reference back (and their exclusive policy no longer counts)."""
    t = topo(2, 1, 4, 2)
    state = CpuRefCounts()
    state.add("p", cpus("0-4"), PCPU)
    assert state.available(t.all_cpus, 1)[0] == cpus("5-15")
    free, refs, policies = state.available(t.all_cpus, 1, (), set(), {1, 2})
    assert free == cpus("1-2,5-15")
    assert set(refs) == set(policies) == cpus("0,3-4")


def test_reserved_cpus_are_never_available() -> None:
    t = topo(1, 1, 4, 2)
    assert CpuRefCounts().available(t.all_cpus, 1, {0, 1})[0] == cpus("2-7")


@given(st.lists(st.tuples(st.integers(0, 5), st.frozensets(st.integers(0, 7)), st.booleans()), max_size=30),
       st.integers(1, 3))
@settings(max_examples=150, deadline=None)
def test_ref_counts_follow_the_pods_holding_each_cpu(
    ops: list[tuple[int, frozenset[int], bool]], max_ref: int
) -> None:
    """Invariant: after any adds and releases, a CPU's count is the number of pods holding it,
    and it is available exactly while fewer than ``max_ref`` pods hold it."""
    state = CpuRefCounts()
    for uid, held, add in ops:
        if add:
            state.add(str(uid), held, PCPU)
        else:
            state.release(str(uid))
    holders: dict[int, int] = {}
    for held, _ in state.pods.values():
        for c in held:
            holders[c] = holders.get(c, 0) + 1
    assert state.refs == holders and set(state.policy) == set(holders)
    free, _, _ = state.available(range(8), max_ref)
    assert free == {c for c in range(8) if holders.get(c, 0) < max_ref}
