"""The kubelet's ``cpu_assignment_test.go`` tables, transcribed (case ids cite the Go test).

Go tables: TestCPUAccumulatorFreeSockets, TestCPUAccumulatorFreeNUMANodes,
TestCPUAccumulatorFreeSocketsAndNUMANodes, TestCPUAccumulatorFreeCores,
TestCPUAccumulatorFreeCPUs, TestCPUAccumulatorTake, TestTakeByTopologyNUMAPacked (incl.
commonTakeByTopologyTestCases and the PreferAlignByUncoreCache cases),
TestTakeByTopologyWithSpreadPhysicalCPUsPreferredOption, TestTakeByTopologyNUMADistributed
(incl. commonTakeByTopologyExtendedTestCases).
"""

from __future__ import annotations

from typing import NamedTuple

import pytest

from numalign.machine.model import Machine
from numalign.resources.cpu_assignment import (
    CpuAssignmentError,
    CpuSorting,
    _Accumulator,
    go_round3,
    standard_deviation,
    take_distributed,
    take_packed,
)
from test_cpu_fixtures import (
    DUAL_SOCKET_HT,
    DUAL_SOCKET_MULTI_NUMA_HT,
    DUAL_SOCKET_MULTI_NUMA_HT_LARGE,
    DUAL_SOCKET_NO_HT,
    FAKE_MULTI_SOCKET_DUAL_SOCKET_PER_NUMA_HT,
    QUAD_SOCKET_FOUR_WAY_HT,
    SINGLE_SOCKET_HT,
    TRIPLE_SOCKET_HT,
    UNCORE_DUAL_SOCKET_NO_SMT,
    UNCORE_SINGLE_SOCKET_MULTI_NUMA,
    UNCORE_SINGLE_SOCKET_NO_SMT,
    UNCORE_SINGLE_SOCKET_SMT,
    cs,
    topo,
)

S1 = SINGLE_SOCKET_HT
D2 = DUAL_SOCKET_HT
MN = DUAL_SOCKET_MULTI_NUMA_HT
FK = FAKE_MULTI_SOCKET_DUAL_SOCKET_PER_NUMA_HT


def acc(m: Machine, available: frozenset[int], n: int = 0) -> _Accumulator:
    return _Accumulator(topo(m), available, n, CpuSorting.PACKED)


# --- TestCPUAccumulatorFreeSockets ---------------------------------------------------------

FREE_SOCKETS = [
    ("single socket HT, 1 socket free", S1, cs("0-7"), [0]),
    ("single socket HT, 0 sockets free", S1, cs("1-7"), []),
    ("dual socket HT, 2 sockets free", D2, cs("0-11"), [0, 1]),
    ("dual socket HT, 1 socket free", D2, cs("0-9,11"), [1]),
    ("dual socket HT, 0 sockets free", D2, cs("0,2-9,11"), []),
    ("dual socket, multi numa per socket, HT, 2 sockets free", MN, cs("0-79"), [0, 1]),
    ("dual socket, multi numa per socket, HT, 1 sockets free", MN, cs("1-79"), [1]),
    ("dual socket, multi numa per socket, HT, 0 sockets free", MN, cs("1-78"), []),
    ("dual numa, multi socket per per socket, HT, 4 sockets free", FK, cs("0-79"), [0, 1, 2, 3]),
    ("dual numa, multi socket per per socket, HT, 3 sockets free", FK, cs("0-19,21-79"), [0, 1, 3]),
    ("dual numa, multi socket per per socket, HT, 2 sockets free", FK, cs("0-59,61-78"), [0, 1]),
    (
        "dual numa, multi socket per per socket, HT, 1 sockets free",
        FK,
        cs("1-19,21-38,41-60,61-78"),
        [1],
    ),
    (
        "dual numa, multi socket per per socket, HT, 0 sockets free",
        FK,
        cs("0-40,42-49,51-68,71-79"),
        [],
    ),
]


@pytest.mark.parametrize(
    ("m", "available", "expect"),
    [pytest.param(*c[1:], id=f"TestCPUAccumulatorFreeSockets/{c[0]}") for c in FREE_SOCKETS],
)
def test_free_sockets(m: Machine, available: frozenset[int], expect: list[int]) -> None:
    assert sorted(acc(m, available).free_sockets()) == expect


# --- TestCPUAccumulatorFreeNUMANodes -------------------------------------------------------

FREE_NUMAS = [
    ("single socket HT, 1 NUMA node free", S1, cs("0-7"), [0]),
    ("single socket HT, 0 NUMA Node free", S1, cs("1-7"), []),
    ("dual socket HT, 2 NUMA Node free", D2, cs("0-11"), [0, 1]),
    ("dual socket HT, 1 NUMA Node free", D2, cs("0-9,11"), [1]),
    ("dual socket HT, 0 NUMA node free", D2, cs("0,2-9,11"), []),
    ("dual socket, multi numa per socket, HT, 4 NUMA Node free", MN, cs("0-79"), [0, 1, 2, 3]),
    ("dual socket, multi numa per socket, HT, 3 NUMA node free", MN, cs("1-79"), [1, 2, 3]),
    ("dual socket, multi numa per socket, HT, 2 NUMA node free", MN, cs("1-9,11-79"), [2, 3]),
    ("dual socket, multi numa per socket, HT, 1 NUMA node free", MN, cs("1-9,11-59,61-79"), [3]),
    ("dual socket, multi numa per socket, HT, 0 NUMA node free", MN, cs("1-9,11-59,61-78"), []),
    ("dual numa, multi socket per per socket, HT, 2 NUMA node free", FK, cs("0-79"), [0, 1]),
    ("dual numa, multi socket per per socket, HT, 1 NUMA node free", FK, cs("0-9,11-79"), [1]),
    ("dual numa, multi socket per per socket, HT, 0 sockets free", FK, cs("0-9,11-59,61-79"), []),
]


@pytest.mark.parametrize(
    ("m", "available", "expect"),
    [pytest.param(*c[1:], id=f"TestCPUAccumulatorFreeNUMANodes/{c[0]}") for c in FREE_NUMAS],
)
def test_free_numa_nodes(m: Machine, available: frozenset[int], expect: list[int]) -> None:
    # order matters here: the kubelet's test compares the slices unsorted
    assert acc(m, available).free_numas() == expect


# --- TestCPUAccumulatorFreeSocketsAndNUMANodes ---------------------------------------------

FREE_BOTH = [
    ("dual socket, multi numa per socket, HT, 2 Socket/4 NUMA Node free", cs("0-79"), [0, 1], [0, 1, 2, 3]),
    ("dual socket, multi numa per socket, HT, 1 Socket/3 NUMA node free", cs("1-79"), [1], [1, 2, 3]),
    ("dual socket, multi numa per socket, HT, 1 Socket/ 2 NUMA node free", cs("1-9,11-79"), [1], [2, 3]),
    ("dual socket, multi numa per socket, HT, 0 Socket/ 2 NUMA node free", cs("1-59,61-79"), [], [1, 3]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("available", "sockets", "numas"),
    [
        pytest.param(*c[1:], id=f"TestCPUAccumulatorFreeSocketsAndNUMANodes/{c[0]}")
        for c in FREE_BOTH
    ],
)
def test_free_sockets_and_numas(
    available: frozenset[int], sockets: list[int], numas: list[int]
) -> None:
    a = acc(MN, available)
    assert a.free_numas() == numas
    assert a.free_sockets() == sockets


# --- TestCPUAccumulatorFreeCores -----------------------------------------------------------

FREE_CORES = [
    ("single socket HT, 4 cores free", S1, cs("0-7"), [0, 1, 2, 3]),
    ("single socket HT, 3 cores free", S1, cs("0-2,4-6"), [0, 1, 2]),
    ("single socket HT, 3 cores free (1 partially consumed)", S1, cs("0-6"), [0, 1, 2]),
    ("single socket HT, 0 cores free", S1, cs(""), []),
    ("single socket HT, 0 cores free (4 partially consumed)", S1, cs("0-3"), []),
    ("dual socket HT, 6 cores free", D2, cs("0-11"), [0, 2, 4, 1, 3, 5]),
    ("dual socket HT, 5 cores free (1 consumed from socket 0)", D2, cs("1-5,7-11"), [2, 4, 1, 3, 5]),
    ("dual socket HT, 4 cores free (1 consumed from each socket)", D2, cs("2-5,8-11"), [2, 4, 3, 5]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("m", "available", "expect"),
    [pytest.param(*c[1:], id=f"TestCPUAccumulatorFreeCores/{c[0]}") for c in FREE_CORES],
)
def test_free_cores(m: Machine, available: frozenset[int], expect: list[int]) -> None:
    assert acc(m, available).free_cores() == expect


# --- TestCPUAccumulatorFreeCPUs ------------------------------------------------------------

FREE_CPUS = [
    ("single socket HT, 8 cpus free", S1, cs("0-7"), [0, 4, 1, 5, 2, 6, 3, 7]),
    ("single socket HT, 5 cpus free", S1, cs("3-7"), [4, 5, 6, 3, 7]),
    ("dual socket HT, 12 cpus free", D2, cs("0-11"), [0, 6, 2, 8, 4, 10, 1, 7, 3, 9, 5, 11]),
    ("dual socket HT, 11 cpus free", D2, cs("1-11"), [6, 2, 8, 4, 10, 1, 7, 3, 9, 5, 11]),
    ("dual socket HT, 10 cpus free", D2, cs("1-5,7-11"), [2, 8, 4, 10, 1, 7, 3, 9, 5, 11]),
    (
        "triple socket HT, 12 cpus free",
        TRIPLE_SOCKET_HT,
        cs("0-3,6-13"),
        [12, 13, 0, 1, 2, 3, 6, 7, 8, 9, 10, 11],
    ),
]


@pytest.mark.parametrize(
    ("m", "available", "expect"),
    [pytest.param(*c[1:], id=f"TestCPUAccumulatorFreeCPUs/{c[0]}") for c in FREE_CPUS],
)
def test_free_cpus(m: Machine, available: frozenset[int], expect: list[int]) -> None:
    assert acc(m, available).sort_cpus() == expect


# --- TestCPUAccumulatorTake ----------------------------------------------------------------

TAKE = [
    ("take 0 cpus from a single socket HT, require 1", cs("0-7"), [cs("")], 1, False, False),
    ("take 0 cpus from a single socket HT, require 1, none available", cs(""), [cs("")], 1, False, True),
    ("take 1 cpu from a single socket HT, require 1", cs("0-7"), [cs("0")], 1, True, False),
    ("take 1 cpu from a single socket HT, require 2", cs("0-7"), [cs("0")], 2, False, False),
    ("take 2 cpu from a single socket HT, require 4, expect failed", cs("0-2"), [cs("0"), cs("1")], 4, False, True),
    (
        "take all cpus one at a time from a single socket HT, require 8",
        cs("0-7"),
        [frozenset({i}) for i in range(8)],
        8,
        True,
        False,
    ),
]  # fmt: skip


@pytest.mark.parametrize(
    ("available", "takes", "n", "satisfied", "failed"),
    [pytest.param(*c[1:], id=f"TestCPUAccumulatorTake/{c[0]}") for c in TAKE],
)
def test_accumulator_take(
    available: frozenset[int], takes: list[frozenset[int]], n: int, satisfied: bool, failed: bool
) -> None:
    a = acc(S1, available, n)
    for t in takes:
        a.take(t)
    assert a.satisfied() is satisfied
    assert a.failed() is failed
    for t in takes:
        assert not (t & a.free)
        assert t <= a.result
    assert a.need == n - sum(len(t) for t in takes)


# --- takeByTopology tables -----------------------------------------------------------------


class Case(NamedTuple):
    description: str
    machine: Machine
    available: frozenset[int]
    n: int
    err: str
    expect: frozenset[int]
    uncore: bool = False


COMMON = [
    Case("take more cpus than are available from single socket with HT", S1, cs("0,2,4,6"), 5,
         "not enough cpus available to satisfy request: requested=5, available=4", cs("")),
    Case("take zero cpus from single socket with HT", S1, cs("0-7"), 0, "", cs("")),
    Case("take one cpu from single socket with HT", S1, cs("0-7"), 1, "", cs("0")),
    Case("take one cpu from single socket with HT, some cpus are taken", S1, cs("1,3,5-7"), 1, "", cs("6")),
    Case("take two cpus from single socket with HT", S1, cs("0-7"), 2, "", cs("0,4")),
    Case("take all cpus from single socket with HT", S1, cs("0-7"), 8, "", cs("0-7")),
    Case("take two cpus from single socket with HT, only one core totally free", S1, cs("0-3,6"), 2, "", cs("2,6")),
    Case("take a socket of cpus from dual socket with HT", D2, cs("0-11"), 6, "", cs("0,2,4,6,8,10")),
    Case("take a socket of cpus from dual socket with multi-numa-per-socket with HT", MN, cs("0-79"), 40, "",
         cs("0-19,40-59")),
    Case("take a NUMA node of cpus from dual socket with multi-numa-per-socket with HT", MN, cs("0-79"), 20, "",
         cs("0-9,40-49")),
    Case("take a NUMA node of cpus from dual socket with multi-numa-per-socket with HT, with 1 NUMA node already taken",
         MN, cs("10-39,50-79"), 20, "", cs("10-19,50-59")),
    Case("take a socket and a NUMA node of cpus from dual socket with multi-numa-per-socket with HT", MN,
         cs("0-79"), 60, "", cs("0-29,40-69")),
    Case("take a socket and a NUMA node of cpus from dual socket with multi-numa-per-socket with HT, a core taken",
         MN, cs("1-39,41-79"), 60, "", cs("10-39,50-79")),
]  # fmt: skip

PACKED_ONLY = [
    Case("take one cpu from dual socket with HT - core from Socket 0", D2, cs("1-5,7-11"), 1, "", cs("2")),
    Case("allocate 4 full cores with 3 coming from the first NUMA node (filling it up) and 1 coming from the second NUMA node",
         D2, cs("0-11"), 8, "", cs("0,6,2,8,4,10,1,7")),
    Case("allocate 32 full cores with 30 coming from the first 3 NUMA nodes (filling them up) and 2 coming from the fourth NUMA node",
         MN, cs("0-79"), 64, "", cs("0-29,40-69,30,31,70,71")),
    # PreferAlignByUncoreCache
    Case("take cpus from two full UncoreCaches and partial from a single UncoreCache",
         UNCORE_SINGLE_SOCKET_NO_SMT, cs("1-15"), 10, "", cs("1,2,4-11"), True),
    Case("take one cpu from dual socket with HT - core from Socket 0 (uncore)", D2, cs("1-5,7-11"), 1, "",
         cs("1"), True),
    Case("take first available UncoreCache from first socket", UNCORE_DUAL_SOCKET_NO_SMT, cs("0-15"), 4, "",
         cs("0-3"), True),
    Case("take all available UncoreCache from first socket", UNCORE_DUAL_SOCKET_NO_SMT, cs("2-15"), 6, "",
         cs("2-7"), True),
    Case("take first available UncoreCache from second socket", UNCORE_DUAL_SOCKET_NO_SMT, cs("8-15"), 4, "",
         cs("8-11"), True),
    Case("take first available UncoreCache from available NUMA", UNCORE_SINGLE_SOCKET_MULTI_NUMA,
         cs("3,4-8,12"), 2, "", cs("4,5"), True),
    Case("take cpus from best available UncoreCache group of multi uncore cache single socket - SMT enabled",
         UNCORE_SINGLE_SOCKET_SMT, cs("2-3,10-11,4-7,12-15"), 6, "", cs("4-6,12-14"), True),
    Case("take cpus from multiple UncoreCache of single socket - SMT enabled", UNCORE_SINGLE_SOCKET_SMT,
         cs("1-7,9-15"), 10, "", cs("4-7,12-15,1,9"), True),
]  # fmt: skip


def _run(fn: object, case: Case, *args: object) -> None:
    if case.err:
        with pytest.raises(CpuAssignmentError) as e:
            fn(topo(case.machine), case.available, case.n, *args)  # type: ignore[operator]
        assert str(e.value) == case.err
    else:
        got = fn(topo(case.machine), case.available, case.n, *args)  # type: ignore[operator]
        assert sorted(got) == sorted(case.expect)


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(c, id=f"TestTakeByTopologyNUMAPacked/{c.description}")
        for c in COMMON + PACKED_ONLY
    ],
)
def test_take_packed(case: Case) -> None:
    _run(take_packed, case, CpuSorting.PACKED, case.uncore)


SPREAD = [
    Case("take a socket of cpus from single socket with HT, 3 cpus", S1, cs("0-7"), 3, "", cs("0-2")),
    Case("take a socket of cpus from dual socket with HT, 2 cpus", D2, cs("0-11"), 2, "", cs("0,2")),
    Case("take a socket of cpus from dual socket with HT, 3 cpus", D2, cs("0-11"), 3, "", cs("0,2,4")),
    Case("take a socket of cpus from dual socket with HT, 6 cpus", D2, cs("0-11"), 6, "", cs("0,2,4,6,8,10")),
    Case("take cpus from dual socket with HT, 8 cpus", D2, cs("0-11"), 8, "", cs("0,2,4,6,8,10,1,3")),
    Case("take a socket of cpus from dual socket without HT, 2 cpus", DUAL_SOCKET_NO_HT, cs("0-7"), 2, "",
         cs("0,1")),
    Case("take a socket of cpus from dual socket with multi numa per socket and HT, 12 cpus", MN, cs("0-79"), 8,
         "", cs("0-7")),
    Case("take a socket of cpus from quad socket four way with HT, 12 cpus", QUAD_SOCKET_FOUR_WAY_HT,
         cs("0-287"), 12, "", cs("0-2,9-10,13-14,21-22,25-26,33")),
]  # fmt: skip


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(
            c, id=f"TestTakeByTopologyWithSpreadPhysicalCPUsPreferredOption/{c.description}"
        )
        for c in SPREAD
    ],
)
def test_take_spread(case: Case) -> None:
    _run(take_packed, case, CpuSorting.SPREAD, False)


class DCase(NamedTuple):
    description: str
    machine: Machine
    available: frozenset[int]
    n: int
    group: int
    err: str
    expect: frozenset[int]


EXTENDED = [DCase(c.description, c.machine, c.available, c.n, 1, c.err, c.expect) for c in COMMON] + [
    DCase("allocate 4 full cores with 2 distributed across each NUMA node", D2, cs("0-11"), 8, 1, "",
          cs("0,6,2,8,1,7,3,9")),
    DCase("allocate 32 full cores with 8 distributed across each NUMA node", MN, cs("0-79"), 64, 1, "",
          cs("0-7,10-17,20-27,30-37,40-47,50-57,60-67,70-77")),
    DCase("allocate 24 full cores with 8 distributed across the first 3 NUMA nodes", MN, cs("0-79"), 48, 1, "",
          cs("0-7,10-17,20-27,40-47,50-57,60-67")),
    DCase("allocate 24 full cores with 8 distributed across the first 3 NUMA nodes (taking all but 2 from the first NUMA node)",
          MN, cs("1-29,32-39,41-69,72-79"), 48, 1, "", cs("1-8,10-17,20-27,41-48,50-57,60-67")),
    DCase("allocate 24 full cores with 8 distributed across the last 3 NUMA nodes (even though all 8 could be allocated from the first NUMA node)",
          MN, cs("2-29,31-39,42-69,71-79"), 48, 1, "", cs("10-17,20-27,31-38,50-57,60-67,71-78")),
    DCase("allocate 8 full cores with 2 distributed across each NUMA node", MN,
          cs("0-2,10-12,20-22,30-32,40-41,50-51,60-61,70-71"), 16, 1, "",
          cs("0-1,10-11,20-21,30-31,40-41,50-51,60-61,70-71")),
]  # fmt: skip

DISTRIBUTED_ONLY = [
    DCase("take one cpu from dual socket with HT - core from Socket 0", D2, cs("1-5,7-11"), 1, 1, "", cs("1")),
    DCase("take one cpu from dual socket with HT - core from Socket 0 - cpuGroupSize 2", D2, cs("1-5,7-11"), 1,
          2, "", cs("2")),
    DCase("allocate 13 full cores distributed across the first 2 NUMA nodes", MN, cs("0-79"), 26, 1, "",
          cs("0-6,10-16,40-45,50-55")),
    DCase("allocate 13 full cores distributed across the first 2 NUMA nodes (cpuGroupSize 2)", MN, cs("0-79"),
          26, 2, "", cs("0-6,10-15,40-46,50-55")),
    DCase("allocate 31 full cores with 15 CPUs distributed across each NUMA node and 1 CPU spilling over to each of NUMA 0, 1",
          MN, cs("0-79"), 62, 1, "", cs("0-7,10-17,20-27,30-37,40-47,50-57,60-66,70-76")),
    DCase("allocate 31 full cores with 14 CPUs distributed across each NUMA node and 2 CPUs spilling over to each of NUMA 0, 1, 2 (cpuGroupSize 2)",
          MN, cs("0-79"), 62, 2, "", cs("0-7,10-17,20-27,30-36,40-47,50-57,60-67,70-76")),
    DCase("allocate 31 full cores with 15 CPUs distributed across each NUMA node and 1 CPU spilling over to each of NUMA 2, 3 (to keep balance)",
          MN, cs("0-8,10-18,20-39,40-48,50-58,60-79"), 62, 1, "",
          cs("0-7,10-17,20-27,30-37,40-46,50-56,60-67,70-77")),
    DCase("allocate 31 full cores with 14 CPUs distributed across each NUMA node and 2 CPUs spilling over to each of NUMA 0, 2, 3 (to keep balance with cpuGroupSize 2)",
          MN, cs("0-8,10-18,20-39,40-48,50-58,60-79"), 62, 2, "",
          cs("0-7,10-16,20-27,30-37,40-47,50-56,60-67,70-77")),
    DCase("ensure bestRemainder chosen with NUMA nodes that have enough CPUs to satisfy the request", MN,
          cs("0-3,10-13,20-23,30-36,40-43,50-53,60-63,70-76"), 34, 1, "",
          cs("0-3,10-13,20-23,30-34,40-43,50-53,60-63,70-74")),
    DCase("ensure previous failure encountered on live machine has been fixed (1/1)",
          DUAL_SOCKET_MULTI_NUMA_HT_LARGE,
          cs("0,128,30,31,158,159,43-47,171-175,62,63,190,191,75-79,203-207,94,96,222,223,101-111,229-239,126,127,254,255"),
          28, 1, "", cs("43-47,75-79,96,101-105,171-174,203-206,229-232")),
]  # fmt: skip


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(c, id=f"TestTakeByTopologyNUMADistributed/{c.description}")
        for c in EXTENDED + DISTRIBUTED_ONLY
    ],
)
def test_take_distributed(case: DCase) -> None:
    t = topo(case.machine)
    if case.err:
        with pytest.raises(CpuAssignmentError) as e:
            take_distributed(t, case.available, case.n, case.group)
        assert str(e.value) == case.err
    else:
        got = take_distributed(t, case.available, case.n, case.group)
        assert sorted(got) == sorted(case.expect)


# --- rounding ------------------------------------------------------------------------------


def test_go_round_half_away_from_zero() -> None:
    assert go_round3(0.0005) == 0.001
    assert go_round3(-0.0005) == -0.001
    assert go_round3(1.2344) == 1.234
    assert go_round3(2.5) == 2.5


def test_standard_deviation_rounding() -> None:
    assert standard_deviation([3, 6]) == 1.5
    assert standard_deviation([4, 5]) == 0.5
    assert standard_deviation([1, 2, 2]) == 0.471
