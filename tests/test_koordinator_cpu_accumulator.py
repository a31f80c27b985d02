"""Koordinator's CPU accumulator test tables, transcribed.

Source: koordinator-sh/koordinator ``pkg/scheduler/plugins/nodenumaresource/cpu_accumulator_test.go``
(``TestTakeFullPCPUs``, ``TestTakeFullPCPUsWithNUMALeastAllocated``, ``TestCPUSpreadByPCPUs``,
``TestTakeSpreadByPCPUs``, ``TestCPUSpreadByPCPUsWithNUMALeastAllocated``,
``TestTakeSpreadByPCPUsWithNUMALeastAllocated``, ``TestTakeCPUsWithExclusivePolicy``,
``TestTakePreferredCPUs``) and ``resource_manager.go``'s required-policy helpers, run against
:mod:`numalign.modes.koordinator.cpu`. ``maxRefCount`` is 1 in every case here; the ref-count
tables ``TestTakeCPUsWithMaxRefCount`` / ``TestTakeCPUsSortByRefCount`` are in
test_koordinator_cpu_refcount.py.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from koordinator_topology import cpus, topo
from numalign.modes.koordinator.cpu_accumulator import (
    CpuAllocError,
    NumaAllocateStrategy,
    _Accumulator,
    filter_required,
    satisfies_required,
    split_evenly,
    take_cpus,
    take_preferred_cpus,
)
from numalign.pods.annotations import BindPolicy, ExclusivePolicy

MOST = NumaAllocateStrategy.MOST_ALLOCATED
LEAST = NumaAllocateStrategy.LEAST_ALLOCATED
FULL = BindPolicy.FULL_PCPUS
SPREAD = BindPolicy.SPREAD_BY_PCPUS


def run(shape: tuple[int, int, int, int], allocated: str, n: int, bind: BindPolicy,
        strategy: NumaAllocateStrategy) -> frozenset[int]:
    t = topo(*shape)
    return take_cpus(t, t.all_cpus - cpus(allocated), n, bind, ExclusivePolicy.NONE, strategy)


# (name, topology, allocated, needed, want)
FULL_MOST = [
    ("allocate on non-NUMA node", (1, 1, 4, 2), "", 2, "0-1"),
    ("with allocated cpus", (1, 1, 4, 2), "0-1", 2, "2-3"),
    ("allocate whole socket", (2, 1, 4, 2), "", 8, "0-7"),
    ("allocate across socket", (2, 1, 4, 2), "", 12, "0-11"),
    ("allocate whole socket with partially-allocated socket", (2, 1, 4, 2), "0-1", 8, "8-15"),
    ("allocate in the smallest idle socket", (2, 2, 4, 2), "0-5,16-23", 6, "24-29"),
    ("allocate the most of CPUs on the same socket", (2, 2, 4, 2), "0-5,16-23", 12, "6-15,24-25"),
    ("allocate from first socket", (2, 2, 4, 2), "0-3,8-11", 4, "4-7"),
    ("allocate with less spread cpus", (2, 2, 2, 2), "0,2,4,8,12", 4, "10-11,14-15"),
    ("allocate with the most spread cpus", (2, 2, 2, 2), "0,2,4,8,10,12", 6, "5-7,13-15"),
    ("allocate with the most spread cpus on the smallest idle cpus socket", (2, 2, 2, 2),
     "0,2,4,8-10,12", 6, "6-7,11,13-15"),
]

FULL_LEAST = [
    ("allocate on non-NUMA node", (1, 1, 4, 2), "", 2, "0-1"),
    ("with allocated cpus", (1, 1, 4, 2), "0-1", 2, "2-3"),
    ("allocate whole socket", (2, 1, 4, 2), "", 8, "0-7"),
    ("allocate across socket", (2, 1, 4, 2), "", 12, "0-11"),
    ("allocate whole socket with partially-allocated socket", (2, 1, 4, 2), "0-1", 8, "8-15"),
    ("allocate in the most idle socket", (2, 2, 4, 2), "0-5,16-23", 6, "8-13"),
    ("allocate the most of CPUs on the same socket", (2, 2, 4, 2), "0-5,16-23", 12, "6-15,24-25"),
    ("allocate from second socket", (2, 2, 4, 2), "0-3,8-11", 4, "16-19"),
    ("allocate with less spread cpus", (2, 2, 2, 2), "0,2,4,8,12", 4, "10-11,14-15"),
    ("allocate with the less spread cpus 2", (2, 2, 2, 2), "0,2,4,8,10,12", 6, "1,3,6-7,14-15"),
    ("allocate with the most spread cpus on the most idle cpus socket 3", (2, 2, 4, 2),
     "0,2,4,8-10,12", 6, "16-21"),
]

SPREAD_MOST = [
    ("allocate on non-NUMA node", (1, 1, 4, 2), "", 4, "0,2,4,6"),
    ("allocate satisfied the partially-allocated socket", (2, 1, 4, 2), "0,2", 4, "1,3-4,6"),
    ("allocate cpus on full-free socket", (2, 1, 4, 2), "0-3", 4, "8,10,12,14"),
    ("allocate most of CPUs in the same socket and overlapped-cores", (2, 1, 4, 2), "0,2", 6, "1,3-7"),
]

SPREAD_LEAST = [
    ("allocate on non-NUMA node", (1, 1, 4, 2), "", 4, "0,2,4,6"),
    ("allocate satisfied the partially-allocated socket", (2, 1, 4, 2), "0,2", 4, "8,10,12,14"),
    ("allocate cpus on full-free socket", (2, 1, 4, 2), "0-3", 4, "8,10,12,14"),
    ("allocate most of CPUs in the same socket and overlapped-cores", (2, 1, 4, 2), "0,2", 6,
     "8-12,14"),
]


@pytest.mark.parametrize(("name", "shape", "allocated", "n", "want"), FULL_MOST, ids=[c[0] for c in FULL_MOST])
def test_take_full_pcpus(name: str, shape: tuple[int, int, int, int], allocated: str, n: int, want: str) -> None:
    """cpu_accumulator_test.go TestTakeFullPCPUs (NUMAMostAllocated)."""
    assert run(shape, allocated, n, FULL, MOST) == cpus(want)


@pytest.mark.parametrize(("name", "shape", "allocated", "n", "want"), FULL_LEAST, ids=[c[0] for c in FULL_LEAST])
def test_take_full_pcpus_numa_least_allocated(
    name: str, shape: tuple[int, int, int, int], allocated: str, n: int, want: str
) -> None:
    """cpu_accumulator_test.go TestTakeFullPCPUsWithNUMALeastAllocated."""
    assert run(shape, allocated, n, FULL, LEAST) == cpus(want)


@pytest.mark.parametrize(("name", "shape", "allocated", "n", "want"), SPREAD_MOST, ids=[c[0] for c in SPREAD_MOST])
def test_take_spread_by_pcpus(name: str, shape: tuple[int, int, int, int], allocated: str, n: int, want: str) -> None:
    """cpu_accumulator_test.go TestTakeSpreadByPCPUs (NUMAMostAllocated)."""
    assert run(shape, allocated, n, SPREAD, MOST) == cpus(want)


@pytest.mark.parametrize(("name", "shape", "allocated", "n", "want"), SPREAD_LEAST, ids=[c[0] for c in SPREAD_LEAST])
def test_take_spread_by_pcpus_numa_least_allocated(
    name: str, shape: tuple[int, int, int, int], allocated: str, n: int, want: str
) -> None:
    """cpu_accumulator_test.go TestTakeSpreadByPCPUsWithNUMALeastAllocated."""
    assert run(shape, allocated, n, SPREAD, LEAST) == cpus(want)


@pytest.mark.parametrize("strategy", [MOST, LEAST])
def test_spread_order(strategy: NumaAllocateStrategy) -> None:
    """cpu_accumulator_test.go TestCPUSpreadByPCPUs / TestCPUSpreadByPCPUsWithNUMALeastAllocated:
    ``spreadCPUs(freeCPUs(false))`` on an idle 2x2x4x2 machine."""
    t = topo(2, 2, 4, 2)
    acc = _Accumulator(t, t.all_cpus, {}, 8, ExclusivePolicy.NONE, strategy)
    assert acc.spread(acc.free_cpus(False)) == list(range(0, 32, 2)) + list(range(1, 32, 2))


PCPU, NUMA, NONE = ExclusivePolicy.PCPU_LEVEL, ExclusivePolicy.NUMA_NODE_LEVEL, ExclusivePolicy.NONE
# (name, topology, allocated exclusive cpus, their policy, bind, exclusive, needed, want)
EXCLUSIVE = [
    ("allocate cpus on full-free socket with PCPULevel", (2, 1, 4, 2), "0,2", PCPU, SPREAD, PCPU, 4, "8,10,12,14"),
    ("allocate overlapped cpus with PCPULevel", (2, 1, 4, 2), "", PCPU, SPREAD, PCPU, 10, "0-4,6,8,10,12,14"),
    ("allocate cpus on large-size partially-allocated socket with PCPULevel", (2, 1, 8, 2), "0,2", PCPU,
     SPREAD, PCPU, 4, "4,6,8,10"),
    ("allocate cpus with none exclusive policy", (2, 1, 8, 2), "0,2", PCPU, SPREAD, NONE, 4, "1,3,4,6"),
    ("allocate cpus on full-free socket with NUMANodeLevel", (2, 1, 4, 2), "0,2", NUMA, SPREAD, NUMA, 4,
     "8,10,12,14"),
    ("allocate cpus on partially-allocated socket without NUMANodeLevel", (2, 1, 4, 2), "0,2", NUMA, SPREAD,
     NONE, 4, "1,3,4,6"),
    ("allocate cpus on full-free socket with NUMANodeLevel with PCPUs", (2, 1, 4, 2), "0,2", NUMA, FULL, NUMA,
     4, "8-11"),
    ("allocate cpus on partially-allocated socket without NUMANodeLevel with PCPUs", (2, 1, 4, 2), "0,2", NUMA,
     FULL, NONE, 4, "4-7"),
]


@pytest.mark.parametrize(
    ("name", "shape", "held", "held_policy", "bind", "exclusive", "n", "want"), EXCLUSIVE,
    ids=[c[0] for c in EXCLUSIVE],
)
def test_take_cpus_with_exclusive_policy(
    name: str, shape: tuple[int, int, int, int], held: str, held_policy: ExclusivePolicy, bind: BindPolicy,
    exclusive: ExclusivePolicy, n: int, want: str,
) -> None:
    """cpu_accumulator_test.go TestTakeCPUsWithExclusivePolicy (NUMAMostAllocated)."""
    t = topo(*shape)
    allocated = dict.fromkeys(cpus(held), held_policy)
    got = take_cpus(t, t.all_cpus - cpus(held), n, bind, exclusive, MOST, allocated)
    assert got == cpus(want)


def test_take_preferred_cpus() -> None:
    """cpu_accumulator_test.go TestTakePreferredCPUs."""
    t = topo(2, 1, 16, 2)
    all_cpus = t.all_cpus
    assert take_cpus(t, all_cpus, 2, SPREAD, NONE, MOST) == {0, 2}
    first = take_preferred_cpus(t, all_cpus, {0, 2}, 2, SPREAD, NONE, MOST)
    assert first == {0, 2}
    assert take_preferred_cpus(t, all_cpus - first, set(), 2, SPREAD, NONE, MOST) == {1, 3}
    assert take_preferred_cpus(t, all_cpus, {11, 13, 15, 17}, 2, SPREAD, NONE, MOST) == {11, 13}


def test_not_enough_cpus_is_koordinators_error() -> None:
    t = topo(1, 1, 2, 2)
    with pytest.raises(CpuAllocError, match="not enough cpus available to satisfy request"):
        take_cpus(t, {0, 1}, 3)


def test_spread_by_pcpus_never_pairs_siblings_for_two_cpus() -> None:
    """The issue's example: a 2-CPU SpreadByPCPUs pod on an idle 2-thread-core machine gets two
    different physical cores (never ``0,4``-style siblings)."""
    t = topo(1, 2, 4, 2)
    for strategy in (MOST, LEAST):
        got = take_cpus(t, t.all_cpus, 2, SPREAD, NONE, strategy)
        assert len({t.details[c].core for c in got}) == 2


def test_required_policy_helpers() -> None:
    """resource_manager.go filterCPUsByRequiredCPUBindPolicy / satisfiedRequiredCPUBindPolicy."""
    t = topo(1, 1, 4, 2)
    free = cpus("1-7")  # core 0 half taken
    assert filter_required(FULL, free, t) == cpus("2-7")
    assert filter_required(SPREAD, free, t) == {1, 2, 4, 6}
    assert filter_required(BindPolicy.DEFAULT, free, t) == free
    assert satisfies_required(FULL, {2, 3}, t) and not satisfies_required(FULL, {1, 2}, t)
    assert satisfies_required(SPREAD, {2, 4}, t) and not satisfies_required(SPREAD, {2, 3}, t)


def test_split_evenly() -> None:
    """resource_manager.go tryBestToDistributeEvenly / splitQuantity for CPUs."""
    assert split_evenly(8, [0, 1], {0: 10, 1: 10}) == {0: 4, 1: 4}
    assert split_evenly(8, [0, 1], {0: 2, 1: 10}) == {0: 2, 1: 6}
    assert split_evenly(6, [0, 1], {0: 10, 1: 10}, whole_cores_of=2) == {0: 2, 1: 4}
    assert split_evenly(8, [0, 1], {0: 3, 1: 3}) == {0: 3, 1: 3}


_TOPOS = [topo(2, 2, 4, 2), topo(1, 2, 3, 2), topo(2, 1, 4, 1)]


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_remembered_takes_are_the_accumulators(data: st.DataObject) -> None:
    """:func:`take_cpus` remembers its answers by content: asked again (with the free CPUs listed
    in another order), it answers what the accumulator itself computes, and refuses where it
    refuses."""
    from numalign.modes.koordinator.cpu_accumulator import _take_cpus

    t = data.draw(st.sampled_from(_TOPOS))
    free = sorted(data.draw(st.sets(st.sampled_from(sorted(t.all_cpus)))))
    n = data.draw(st.integers(1, max(1, len(free))))
    bind = data.draw(st.sampled_from([FULL, SPREAD]))
    exclusive = data.draw(st.sampled_from(list(ExclusivePolicy)))
    strategy = data.draw(st.sampled_from([MOST, LEAST]))
    held = sorted(t.all_cpus - frozenset(free))
    allocated = {c: data.draw(st.sampled_from(list(ExclusivePolicy))) for c in held[: data.draw(st.integers(0, 4))]}
    try:
        want: frozenset[int] | None = _take_cpus(t, free, n, bind, exclusive, strategy, allocated, None, 1)
    except CpuAllocError:
        want = None
    for available in (free, list(reversed(free)), free):  # the second and third: remembered
        try:
            got: frozenset[int] | None = take_cpus(t, available, n, bind, exclusive, strategy, allocated)
        except CpuAllocError:
            got = None
        assert got == want
