"""The kubelet's static CPU policy tests, transcribed (case ids cite the Go test).

From ``policy_static_test.go``: TestStaticPolicyStart, TestStaticPolicyAdd (options-insensitive
cases run with and without full-pcpus-only, default-options, full-pcpus-only and
align-by-socket cases), TestStaticPolicyReuseCPUs, TestStaticPolicyDoNotReuseCPUs,
TestStaticPolicyRemove, TestTopologyAwareAllocateCPUs, TestStaticPolicyStartWithResvList,
TestStaticPolicyAddWithResvList, TestStaticPolicyAddWithUncoreAlignment (the cases on the
two topologies that could be rebuilt from the test comments), TestStaticPolicyOptions.
From ``topology_hints_test.go``: TestGetTopologyHints, TestGetPodTopologyHints,
TestGetPodTopologyHintsWithPolicyOptions, TestPodGuaranteedCPUs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import NamedTuple

import pytest

from numalign.engine.bitmask import mask_of
from numalign.engine.hints import GeneratedHints, TopologyHint
from numalign.errors import InputError, SMTAlignmentError, StateError, UnexpectedAdmissionError
from numalign.machine.model import Machine
from numalign.pods import ContainerKind, Pod, QOSClass, pod_guaranteed_cpus
from numalign.resources.cpu import (
    CpuManager,
    CpuState,
    StaticPolicyOptions,
    new_cpu_state,
    parse_static_policy_options,
)
from numalign.resources.cpu_assignment import CpuTopology
from test_cpu_fixtures import (
    DUAL_SOCKET_HT,
    DUAL_SOCKET_MULTI_NUMA_HT,
    DUAL_SOCKET_NO_HT,
    HINTS_MACHINE,
    QUAD_SOCKET_FOUR_WAY_HT,
    SINGLE_SOCKET_HT,
    container,
    cs,
    make_pod,
    quad_socket_cpus,
    regular,
    with_kubelet,
)

NO_HINT = TopologyHint(None, False)  # the fake topology manager's empty hint
ALL12 = cs("0-11")
QUAD_ALL = cs("0-287")


def manager(
    machine: Machine,
    *,
    num_reserved: int = 0,
    reserved: Iterable[int] | None = None,
    options: Mapping[str, str] | None = None,
    default: Iterable[int] = (),
    assignments: Mapping[str, Mapping[str, frozenset[int]]] | None = None,
    tm_policy: str = "none",
) -> CpuManager:
    """A static-policy manager like ``NewStaticPolicy(topo, numReserved, reserved, ...)``.

    An explicit ``reserved`` list goes through ``kubelet.reserved_system_cpus``; a
    ``num_reserved`` through ``systemReserved.cpu``; zero reserved CPUs (allowed by the policy
    itself, refused by the container manager) through the ``reserved=`` override.
    """
    kw: dict[str, object] = {
        "cpu_manager_policy_options": dict(options or {}),
        "topology_manager_policy": tm_policy,
    }
    override: frozenset[int] | None = None
    if reserved is not None:
        kw["reserved_system_cpus"] = frozenset(reserved)
    elif num_reserved:
        kw["system_reserved"] = {"cpu": 1000 * num_reserved}
    else:
        override = frozenset()
    m = with_kubelet(machine, **kw)
    state = CpuState(
        default_set=set(default),
        assignments={u: dict(c) for u, c in (assignments or {}).items()},
    )
    return CpuManager(m, state, reserved=override)


def go_pod(container_name: str, request: int, limit: int, uid: str = "fakePod") -> Pod:
    """kubelet test ``makePod``: one app container."""
    return make_pod(uid, container(container_name, request, limit))


# --- TestStaticPolicyStart ----------------------------------------------------------------


class StartCase(NamedTuple):
    description: str
    num_reserved: int
    options: Mapping[str, str]
    assignments: Mapping[str, Mapping[str, frozenset[int]]]
    default: frozenset[int]
    err: str
    expect: frozenset[int]


START = [
    StartCase("non-corrupted state", 0, {}, {"fakePod": {"0": cs("0")}}, cs("1-11"), "", cs("1-11")),
    StartCase("empty cpuset", 1, {}, {}, cs(""), "", ALL12),
    StartCase("reserved cores 0 & 6 are not present in available cpuset", 2, {}, {}, cs("0,1"),
              'not all reserved cpus: "0,6" are present in defaultCpuSet: "0-1"', cs("")),
    StartCase("some of reserved cores are present in available cpuset (StrictCPUReservationOption)", 2,
              {"strict-cpu-reservation": "true"}, {}, cs("0,1"),
              'some of strictly reserved cpus: "0" are present in defaultCpuSet: "0-1"', cs("")),
    StartCase("assigned core 2 is still present in available cpuset", 0, {}, {"fakePod": {"0": cs("0-2")}},
              cs("2-11"), 'pod: fakePod, container: 0 cpuset: "0-2" overlaps with default cpuset "2-11"', cs("")),
    StartCase("assigned core 2 is still present in available cpuset (StrictCPUReservationOption)", 0,
              {"strict-cpu-reservation": "true"}, {"fakePod": {"0": cs("0-2")}}, cs("2-11"),
              'pod: fakePod, container: 0 cpuset: "0-2" overlaps with default cpuset "2-11"', cs("")),
    StartCase("core 12 is not present in topology but is in state cpuset", 0, {},
              {"fakePod": {"0": cs("0-2"), "1": cs("3,4")}}, cs("5-12"),
              'current set of available CPUs "0-11" doesn\'t match with CPUs in state "0-12"', cs("")),
    StartCase("core 11 is present in topology but is not in state cpuset", 0, {},
              {"fakePod": {"0": cs("0-2"), "1": cs("3,4")}}, cs("5-10"),
              'current set of available CPUs "0-11" doesn\'t match with CPUs in state "0-10"', cs("")),
]  # fmt: skip


@pytest.mark.parametrize(
    "case", [pytest.param(c, id=f"TestStaticPolicyStart/{c.description}") for c in START]
)
def test_static_policy_start(case: StartCase) -> None:
    mgr = manager(
        DUAL_SOCKET_HT,
        num_reserved=case.num_reserved,
        options=case.options,
        default=case.default,
        assignments=case.assignments,
    )
    if case.err:
        with pytest.raises(StateError) as e:
            mgr.validate_state()
        assert str(e.value) == case.err
    else:
        mgr.validate_state()
        assert mgr.state.default_set == case.expect


# --- TestStaticPolicyStartWithResvList ----------------------------------------------------

START_RESV = [
    ("empty cpuset", {}, cs(""), "", ALL12),
    ("empty cpuset with StrictCPUReservationOption enabled", {"strict-cpu-reservation": "true"}, cs(""), "",
     cs("2-11")),
    ("reserved cores 0 & 1 are not present in available cpuset", {}, cs("2-5"),
     'not all reserved cpus: "0-1" are present in defaultCpuSet: "2-5"', cs("")),
    ("reserved cores 0 & 1 are present in available cpuset with StrictCPUReservationOption enabled",
     {"strict-cpu-reservation": "true"}, cs("0-5"),
     'some of strictly reserved cpus: "0-1" are present in defaultCpuSet: "0-5"', cs("")),
]  # fmt: skip


@pytest.mark.parametrize(
    ("options", "default", "err", "expect"),
    [pytest.param(*c[1:], id=f"TestStaticPolicyStartWithResvList/{c[0]}") for c in START_RESV],
)
def test_static_policy_start_with_resv_list(
    options: Mapping[str, str], default: frozenset[int], err: str, expect: frozenset[int]
) -> None:
    mgr = manager(DUAL_SOCKET_HT, reserved=cs("0,1"), options=options, default=default)
    if err:
        with pytest.raises(StateError) as e:
            mgr.validate_state()
        assert str(e.value) == err
    else:
        mgr.validate_state()
        assert mgr.state.default_set == expect


# --- TestStaticPolicyAdd ------------------------------------------------------------------


class AddCase(NamedTuple):
    description: str
    machine: Machine
    num_reserved: int
    assignments: Mapping[str, Mapping[str, frozenset[int]]]
    default: frozenset[int]
    pod: Pod
    err: str  # "" or the error message
    expect: frozenset[int] | None  # None: no allocation expected
    options: Mapping[str, str] = {}
    reserved: frozenset[int] | None = None
    hint: TopologyHint = NO_HINT
    err_type: type[Exception] = UnexpectedAdmissionError


def _quad_minus(*cpus: int) -> frozenset[int]:
    return QUAD_ALL - frozenset(cpus)


OPTIONS_INSENSITIVE = [
    AddCase("GuPodMultipleCores, SingleSocketHT, ExpectAllocOneCore", SINGLE_SOCKET_HT, 1,
            {"fakePod": {"fakeContainer100": cs("2,3,6,7")}}, cs("0,1,4,5"),
            go_pod("fakeContainer3", 2000, 2000), "", cs("1,5")),
    AddCase("GuPodMultipleCores, DualSocketHT, ExpectAllocOneSocket", DUAL_SOCKET_HT, 1,
            {"fakePod": {"fakeContainer100": cs("2")}}, cs("0,1,3-11"),
            go_pod("fakeContainer3", 6000, 6000), "", cs("1,3,5,7,9,11")),
    AddCase("GuPodMultipleCores, DualSocketHT, ExpectAllocThreeCores", DUAL_SOCKET_HT, 1,
            {"fakePod": {"fakeContainer100": cs("1,5")}}, cs("0,2-4,6-11"),
            go_pod("fakeContainer3", 6000, 6000), "", cs("2-4,8-10")),
    AddCase("GuPodMultipleCores, DualSocketNoHT, ExpectAllocOneSocket", DUAL_SOCKET_NO_HT, 1,
            {"fakePod": {"fakeContainer100": cs("")}}, cs("0,1,3-7"),
            go_pod("fakeContainer1", 4000, 4000), "", cs("4-7")),
    AddCase("GuPodMultipleCores, DualSocketNoHT, ExpectAllocFourCores", DUAL_SOCKET_NO_HT, 1,
            {"fakePod": {"fakeContainer100": cs("4,5")}}, cs("0,1,3,6,7"),
            go_pod("fakeContainer1", 4000, 4000), "", cs("1,3,6,7")),
    AddCase("GuPodMultipleCores, DualSocketHT, ExpectAllocOneSocketOneCore", DUAL_SOCKET_HT, 1,
            {"fakePod": {"fakeContainer100": cs("2")}}, cs("0,1,3-11"),
            go_pod("fakeContainer3", 8000, 8000), "", cs("1,3-5,7,9-11")),
    AddCase("NonGuPod, SingleSocketHT, NoAlloc", SINGLE_SOCKET_HT, 1, {}, cs("0-7"),
            go_pod("fakeContainer1", 1000, 2000), "", None),
    AddCase("GuPodNonIntegerCore, SingleSocketHT, NoAlloc", SINGLE_SOCKET_HT, 1, {}, cs("0-7"),
            go_pod("fakeContainer4", 977, 977), "", None),
    AddCase("GuPodMultipleCores, topoQuadSocketFourWayHT, ExpectAllocSock0", QUAD_SOCKET_FOUR_WAY_HT, 0,
            {"fakePod": {"fakeContainer100": cs("3,11,4,5,6,7")}}, _quad_minus(3, 11, 4, 5, 6, 7),
            go_pod("fakeContainer5", 72000, 72000), "", quad_socket_cpus(0)),
    AddCase("GuPodMultipleCores, topoQuadSocketFourWayHT, ExpectAllocAllFullCoresFromThreeSockets",
            QUAD_SOCKET_FOUR_WAY_HT, 0,
            {"fakePod": {"fakeContainer100": _quad_minus(1, 25, 13, 38, 2, 9, 11, 35, 23, 48, 12, 51, 53, 173,
                                                         113, 233, 54, 61)}},
            frozenset({1, 25, 13, 38, 2, 9, 11, 35, 23, 48, 12, 51, 53, 173, 113, 233, 54, 61}),
            go_pod("fakeCcontainer5", 12000, 12000), "",
            frozenset({1, 25, 13, 38, 11, 35, 23, 48, 53, 173, 113, 233})),
    AddCase("GuPodMultipleCores, topoQuadSocketFourWayHT, ExpectAllocAllSock1+FullCore", QUAD_SOCKET_FOUR_WAY_HT,
            0,
            {"fakePod": {"fakeContainer100": QUAD_ALL - (quad_socket_cpus(1) | frozenset(
                {10, 34, 22, 47, 53, 173, 61, 181, 108, 228, 115, 235}))}},
            quad_socket_cpus(1) | frozenset({10, 34, 22, 47, 53, 173, 61, 181, 108, 228, 115, 235}),
            go_pod("fakeContainer5", 76000, 76000), "", quad_socket_cpus(1) | frozenset({10, 34, 22, 47})),
]  # fmt: skip

DEFAULT_OPTIONS = [
    AddCase("GuPodSingleCore, SingleSocketHT, ExpectAllocOneCPU", SINGLE_SOCKET_HT, 1, {}, cs("0-7"),
            go_pod("fakeContainer2", 1000, 1000), "", cs("4")),
    AddCase("GuPodMultipleCores, topoQuadSocketFourWayHT, ExpectAllocCPUs", QUAD_SOCKET_FOUR_WAY_HT, 0,
            {"fakePod": {"fakeContainer100": _quad_minus(10, 11, 53, 37, 55, 67, 52)}},
            frozenset({10, 11, 53, 67, 52}), go_pod("fakeContainer5", 5000, 5000), "",
            frozenset({10, 11, 53, 67, 52})),
    AddCase("GuPodSingleCore, SingleSocketHT, ExpectError", SINGLE_SOCKET_HT, 1, {}, cs("0-7"),
            go_pod("fakeContainer2", 8000, 8000),
            "not enough cpus available to satisfy request: requested=8, available=7", None),
    AddCase("GuPodMultipleCores, SingleSocketHT, ExpectSameAllocation", SINGLE_SOCKET_HT, 1,
            {"fakePod": {"fakeContainer3": cs("2,3,6,7")}}, cs("0,1,4,5"),
            go_pod("fakeContainer3", 4000, 4000), "", cs("2,3,6,7")),
    AddCase("GuPodMultipleCores, DualSocketHT, NoAllocExpectError", DUAL_SOCKET_HT, 1,
            {"fakePod": {"fakeContainer100": cs("1-3")}}, cs("0,4-11"),
            go_pod("fakeContainer5", 10000, 10000),
            "not enough cpus available to satisfy request: requested=10, available=8", None),
    AddCase("GuPodMultipleCores, SingleSocketHT, NoAllocExpectError", SINGLE_SOCKET_HT, 1,
            {"fakePod": {"fakeContainer100": cs("1-6")}}, cs("0,7"),
            go_pod("fakeContainer5", 2000, 2000),
            "not enough cpus available to satisfy request: requested=2, available=1", None),
    AddCase("GuPodMultipleCores, topoQuadSocketFourWayHT, NoAlloc", QUAD_SOCKET_FOUR_WAY_HT, 0,
            {"fakePod": {"fakeContainer100": _quad_minus(10, 11, 53, 37, 55, 67, 52)}},
            frozenset({10, 11, 53, 37, 55, 67, 52}), go_pod("fakeContainer5", 76000, 76000),
            "not enough cpus available to satisfy request: requested=76, available=7", None),
]  # fmt: skip

FULL = {"full-pcpus-only": "true"}
SMT_ALIGN = [
    AddCase("GuPodSingleCore, SingleSocketHT, ExpectAllocOneCPU", SINGLE_SOCKET_HT, 1, {}, cs("0-7"),
            go_pod("fakeContainer2", 1000, 1000),
            "SMT Alignment Error: requested 1 cpus not multiple cpus per core = 2", None, FULL,
            err_type=SMTAlignmentError),
    AddCase("GuPodMultipleCores, topoQuadSocketFourWayHT, ExpectAllocOneCPUs", QUAD_SOCKET_FOUR_WAY_HT, 8, {},
            QUAD_ALL, go_pod("fakeContainer15", 15000, 15000),
            "SMT Alignment Error: requested 15 cpus not multiple cpus per core = 4", None, FULL,
            err_type=SMTAlignmentError),
    AddCase("GuPodManyCores, topoDualSocketHT, ExpectDoNotAllocPartialCPU", DUAL_SOCKET_HT, 2, {},
            cs("0,2-5,7-11"), go_pod("fakeContainerBug113537_1", 10000, 10000),
            "SMT Alignment Error: not enough free physical CPUs: available physical CPUs = 8, "
            "requested CPUs = 10, CPUs per core = 2", None, FULL, reserved=cs("1,6"),
            err_type=SMTAlignmentError),
    AddCase("GuPodManyCores, topoDualSocketHT, AutoReserve, ExpectAllocAllCPUs", DUAL_SOCKET_HT, 2, {},
            cs("1-5,7-11"), go_pod("fakeContainerBug113537_2", 10000, 10000), "", cs("1-5,7-11"), FULL),
    AddCase("GuPodManyCores, topoDualSocketHT, ExpectAllocAllCPUs", DUAL_SOCKET_HT, 2, {}, cs("1-5,7-11"),
            go_pod("fakeContainerBug113537_2", 10000, 10000), "", cs("1-5,7-11"), FULL, reserved=cs("0,6")),
]  # fmt: skip

ALIGN_BY_SOCKET = [
    AddCase("Align by socket: true, cpu's within same socket of numa in hint are part of allocation",
            DUAL_SOCKET_MULTI_NUMA_HT, 1, {}, cs("2,11,21,22"), go_pod("fakeContainer2", 2000, 2000), "",
            cs("2,11"), {"align-by-socket": "true"}, hint=TopologyHint(mask_of([0, 2]), True)),
    AddCase("Align by socket: false, cpu's are taken strictly from NUMA nodes in hint",
            DUAL_SOCKET_MULTI_NUMA_HT, 1, {}, cs("2,11,21,22"), go_pod("fakeContainer2", 2000, 2000), "",
            cs("2,21"), {"align-by-socket": "false"}, hint=TopologyHint(mask_of([0, 2]), True)),
]  # fmt: skip

ADD_WITH_RESV_LIST = [
    AddCase("GuPodSingleCore, SingleSocketHT, ExpectError", SINGLE_SOCKET_HT, 1, {}, cs("0-7"),
            go_pod("fakeContainer2", 8000, 8000),
            "not enough cpus available to satisfy request: requested=8, available=7", None, reserved=cs("0")),
    AddCase("GuPodSingleCore, SingleSocketHT, ExpectAllocOneCPU", SINGLE_SOCKET_HT, 2, {}, cs("0-7"),
            go_pod("fakeContainer2", 1000, 1000), "", cs("4"), reserved=cs("0,1")),
    AddCase("GuPodMultipleCores, SingleSocketHT, ExpectAllocOneCore", SINGLE_SOCKET_HT, 2,
            {"fakePod": {"fakeContainer100": cs("2,3,6,7")}}, cs("0,1,4,5"),
            go_pod("fakeContainer3", 2000, 2000), "", cs("4,5"), reserved=cs("0,1")),
]  # fmt: skip


def _add_params() -> list[object]:
    out: list[object] = []
    for c in OPTIONS_INSENSITIVE:
        for opts in ({}, FULL):
            tag = "options=map[]" if not opts else "options=map[full-pcpus-only:true]"
            out.append(
                pytest.param(
                    c._replace(options=opts), id=f"TestStaticPolicyAdd/{tag} {c.description}"
                )
            )
    for group in (DEFAULT_OPTIONS, SMT_ALIGN, ALIGN_BY_SOCKET):
        out += [pytest.param(c, id=f"TestStaticPolicyAdd/{c.description}") for c in group]
    out += [
        pytest.param(c, id=f"TestStaticPolicyAddWithResvList/{c.description}")
        for c in ADD_WITH_RESV_LIST
    ]
    return out


@pytest.mark.parametrize("case", _add_params())
def test_static_policy_add(case: AddCase) -> None:
    mgr = manager(
        case.machine,
        num_reserved=case.num_reserved,
        reserved=case.reserved,
        options=case.options,
        default=case.default,
        assignments=case.assignments,
    )
    pod = case.pod
    cont = pod.containers[0]
    before = mgr.state.copy()
    if case.err:
        with pytest.raises(case.err_type) as e:
            mgr.allocate(pod, cont, case.hint)
        if case.err_type is UnexpectedAdmissionError:
            assert str(e.value) == f"Allocate failed due to {case.err}, which is unexpected"
        else:
            assert str(e.value) == case.err
            assert e.value.reason == "SMTAlignmentError"  # type: ignore[attr-defined]
        assert mgr.state == before  # nothing changed
    else:
        mgr.allocate(pod, cont, case.hint)
    got = mgr.state.cpuset(pod.uid, cont.name)
    if case.expect is None:
        assert got is None
    else:
        assert got == case.expect
        assert not (got & mgr.state.default_set)


# --- TestStaticPolicyAddWithUncoreAlignment -----------------------------------------------
# Two of its topologies, rebuilt from the test's own comments (sizes, reserved CPUs "taken from
# uncore 0 / 12", CPUs per uncore); the others are not reproduced here.

# 2 sockets x 96 cores, SMT2 (sibling = cpu + 192), 8 cores (16 CPUs) per uncore cache
DUAL_SOCKET_SMT_UNCORE = regular(
    "topoDualSocketSingleNumaPerSocketSMTUncore",
    384,
    lambda c: (c % 192, (c % 192) // 96, (c % 192) // 96, (c % 192) // 8),
)
# 1 socket x 64 cores, SMT2 (sibling = cpu + 64), 4 cores (8 CPUs) per uncore cache
SINGLE_SOCKET_SMT_SMALL_UNCORE = regular(
    "topoSingleSocketSingleNumaPerSocketSMTSmallUncore",
    128,
    lambda c: (c % 64, 0, 0, (c % 64) // 4),
)
UNCORE_OPTS = {"full-pcpus-only": "true", "prefer-align-cpus-by-uncorecache": "true"}


class UncoreCase(NamedTuple):
    description: str
    machine: Machine
    reserved: frozenset[int]
    options: Mapping[str, str]
    default: frozenset[int]
    requests: tuple[int, ...]  # app containers, CPUs
    uncores: frozenset[int] | None  # expected uncore ids of the pod's CPUs
    first: frozenset[int] | None = None  # expected CPUs of the first container


def _uncore_cpus(m: Machine, *ids: int) -> frozenset[int]:
    t = CpuTopology.from_machine(m)
    return frozenset(c for u in ids for c in t.cpus_in_uncore[u])


_D = DUAL_SOCKET_SMT_UNCORE
_S = SINGLE_SOCKET_SMT_SMALL_UNCORE
_D_RES = frozenset({0, 1, 96, 97, 192, 193, 288, 289})
_D_CLEAN = frozenset(range(384)) - _uncore_cpus(_D, 0, 12)
UNCORE = [
    UncoreCase("GuPodSingleContainerSaturating, DualSocketHTUncore, ExpectAllocOneUncore, FullUncoreAvail",
               _D, _D_RES, UNCORE_OPTS, _D_CLEAN, (16,), frozenset({1})),
    UncoreCase("GuPodMainAndSidecarContainer, DualSocketHTUncore, ExpectAllocOneUncore, FullUncoreAvail",
               _D, _D_RES, UNCORE_OPTS, _D_CLEAN, (12, 2), frozenset({1})),
    UncoreCase("GuPodSidecarAndMainContainer, DualSocketHTUncore, ExpectAllocOneUncore, FullUncoreAvail",
               _D, _D_RES, UNCORE_OPTS, _D_CLEAN, (2, 12), frozenset({1})),
    UncoreCase("GuPodMainAndManySidecarContainer, DualSocketHTUncore, ExpectAllocOneUncore, FullUncoreAvail",
               _D, _D_RES, UNCORE_OPTS, _D_CLEAN, (10, 2, 2, 2), frozenset({1})),
    UncoreCase("GuPodMainAndSidecarContainer, DualSocketHTUncore, ExpectAllocTwoUncore", _D, _D_RES,
               UNCORE_OPTS, frozenset(range(384)), (12, 2), frozenset({0, 1})),
    UncoreCase("GuPodSingleContainer, SingleSocketSMTSmallUncore, ExpectAllocOneUncore", _S,
               frozenset({0, 1, 64, 65}), UNCORE_OPTS, frozenset(range(128)), (8,), frozenset({1})),
    UncoreCase("GuPodSingleContainer, SingleSocketSMTSmallUncore, ExpectAllocTwoUncore", _S,
               frozenset({0, 1, 64, 65}), UNCORE_OPTS, frozenset(range(128)) - _uncore_cpus(_S, 1), (12,),
               frozenset({0, 2})),
    UncoreCase("odd integer required on smt-enabled", _S, frozenset({0, 1, 64, 65}),
               {"prefer-align-cpus-by-uncorecache": "true"}, frozenset(range(128)), (3,), None, cs("2,3,66")),
    UncoreCase("odd integer required on odd integer partial uncore", _S, frozenset({0, 1, 64}),
               {"prefer-align-cpus-by-uncorecache": "true"}, frozenset(range(128)), (3,), None, cs("2,65,66")),
    UncoreCase("even integer required on odd integer partial uncore", _S, frozenset({0, 1, 64}),
               {"prefer-align-cpus-by-uncorecache": "true"}, frozenset(range(128)), (4,), None,
               cs("4,5,68,69")),
    UncoreCase("large odd integer required on smt-enabled", _S, frozenset({0, 1, 64}),
               {"prefer-align-cpus-by-uncorecache": "true"}, frozenset(range(128)), (11,), None,
               cs("2,65,66,4-7,68-71")),
    UncoreCase("GuPodSingleContainer, SingleSocketSMTSmallUncore, StrictReserveCompatability", _S,
               frozenset({0, 1, 64, 65}),
               {"strict-cpu-reservation": "true", "prefer-align-cpus-by-uncorecache": "true"},
               frozenset(range(128)), (2,), None, cs("2,66")),
]  # fmt: skip


@pytest.mark.parametrize(
    "case",
    [pytest.param(c, id=f"TestStaticPolicyAddWithUncoreAlignment/{c.description}") for c in UNCORE],
)
def test_static_policy_add_with_uncore_alignment(case: UncoreCase) -> None:
    mgr = manager(
        case.machine,
        reserved=case.reserved,
        options=case.options,
        default=case.default - case.reserved,
    )
    pod = make_pod(
        "uncore-pod",
        *(container(f"appContainer-{i}", r * 1000) for i, r in enumerate(case.requests)),
    )
    for c in pod.containers:
        mgr.allocate(pod, c, NO_HINT)
    t = mgr.topology
    if case.first is not None:
        assert mgr.state.cpuset(pod.uid, "appContainer-0") == case.first
        return
    cpus = set().union(*mgr.state.assignments[pod.uid].values())
    assert frozenset(t.details[c].uncore for c in cpus) == case.uncores


# --- TestStaticPolicyReuseCPUs / DoNotReuseCPUs / Remove ----------------------------------


def test_static_policy_reuse_cpus() -> None:
    """TestStaticPolicyReuseCPUs/SingleSocketHT, DeAllocOneInitContainer."""
    mgr = manager(SINGLE_SOCKET_HT, default=cs("0-7"))
    pod = make_pod(
        "fakePod",
        container("initContainer-0", 4000, kind=ContainerKind.INIT),
        container("appContainer-0", 2000),
    )
    for c in pod.containers:
        mgr.allocate(pod, c, NO_HINT)
    assert mgr.state.default_set == cs("2,3,6,7")
    assert mgr.state.cpuset(pod.uid, "appContainer-0") == cs("0,4")  # reused init CPUs
    mgr.release_container(pod.uid, "initContainer-0")
    assert mgr.state.default_set == cs("1-3,5-7")
    assert mgr.state.cpuset(pod.uid, "initContainer-0") is None


def test_static_policy_do_not_reuse_cpus() -> None:
    """TestStaticPolicyDoNotReuseCPUs/SingleSocketHT, Don't reuse CPUs of a restartable init container."""
    mgr = manager(SINGLE_SOCKET_HT, default=cs("0-7"))
    pod = make_pod(
        "fakePod",
        container("initContainer-0", 4000, kind=ContainerKind.SIDECAR),
        container("appContainer-0", 2000),
    )
    for c in pod.containers:
        mgr.allocate(pod, c, NO_HINT)
    assert mgr.state.default_set == cs("3,7")


REMOVE = [
    ("SingleSocketHT, DeAllocOneContainer", "fakeContainer1", {"fakeContainer1": cs("1-3")}, cs("4-7"),
     cs("1-7")),
    ("SingleSocketHT, DeAllocOneContainer, BeginEmpty", "fakeContainer1",
     {"fakeContainer1": cs("1-3"), "fakeContainer2": cs("4-7")}, cs(""), cs("1-3")),
    ("SingleSocketHT, DeAllocTwoContainer", "fakeContainer1",
     {"fakeContainer1": cs("1,3,5"), "fakeContainer2": cs("2,4")}, cs("6,7"), cs("1,3,5-7")),
    ("SingleSocketHT, NoDeAlloc", "fakeContainer2", {"fakeContainer1": cs("1,3,5")}, cs("2,4,6,7"),
     cs("2,4,6,7")),
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "containers", "default", "expect"),
    [pytest.param(*c[1:], id=f"TestStaticPolicyRemove/{c[0]}") for c in REMOVE],
)
def test_static_policy_remove(
    name: str,
    containers: Mapping[str, frozenset[int]],
    default: frozenset[int],
    expect: frozenset[int],
) -> None:
    mgr = manager(SINGLE_SOCKET_HT, default=default, assignments={"fakePod": containers})
    mgr.release_container("fakePod", name)
    assert mgr.state.default_set == expect
    assert mgr.state.cpuset("fakePod", name) is None


# --- TestTopologyAwareAllocateCPUs --------------------------------------------------------

AWARE = [
    ("Request 2 CPUs, No BitMask", 2, None, cs("0,6")),
    ("Request 2 CPUs, BitMask on Socket 0", 2, [0], cs("0,6")),
    ("Request 2 CPUs, BitMask on Socket 1", 2, [1], cs("1,7")),
    ("Request 8 CPUs, BitMask on Socket 0", 8, [0], cs("0,6,2,8,4,10,1,7")),
    ("Request 8 CPUs, BitMask on Socket 1", 8, [1], cs("1,7,3,9,5,11,0,6")),
]


@pytest.mark.parametrize(
    ("n", "nodes", "expect"),
    [pytest.param(*c[1:], id=f"TestTopologyAwareAllocateCPUs/{c[0]}") for c in AWARE],
)
def test_topology_aware_allocate_cpus(
    n: int, nodes: list[int] | None, expect: frozenset[int]
) -> None:
    mgr = manager(DUAL_SOCKET_HT, default=ALL12)
    mgr.validate_state()
    got = mgr.allocate_cpus(n, None if nodes is None else mask_of(nodes))
    assert got == expect
    assert mgr.state.default_set == ALL12  # allocate_cpus does not touch the state


# --- TestStaticPolicyOptions --------------------------------------------------------------

OPTION_CASES = [
    ("nil args", {}, False, StaticPolicyOptions()),
    ("bad single arg", {"badValue1": ""}, True, None),
    ("bad multiple arg", {"badValue1": "", "badvalue2": "aaaa"}, True, None),
    ("good arg", {"full-pcpus-only": "true"}, False, StaticPolicyOptions(full_pcpus_only=True)),
    ("good arg, bad value", {"full-pcpus-only": "enabled!"}, True, None),
    ("bad arg intermixed", {"full-pcpus-only": "1", "badvalue2": "lorem ipsum"}, True, None),
]


@pytest.mark.parametrize(
    ("options", "error", "expect"),
    [pytest.param(*c[1:], id=f"TestStaticPolicyOptions/{c[0]}") for c in OPTION_CASES],
)
def test_static_policy_options(
    options: Mapping[str, str], error: bool, expect: StaticPolicyOptions | None
) -> None:
    if error:
        with pytest.raises(InputError):
            parse_static_policy_options(options)
    else:
        assert parse_static_policy_options(options) == expect


def test_option_messages() -> None:
    with pytest.raises(InputError, match='unknown CPU Manager Policy option: "bogus"'):
        parse_static_policy_options({"bogus": "true"})
    with pytest.raises(
        InputError,
        match=re.escape(
            'bad value for option "full-pcpus-only": strconv.ParseBool: parsing "yes": invalid syntax'
        ),
    ):
        parse_static_policy_options({"full-pcpus-only": "yes"})
    with pytest.raises(InputError, match="Alpha-level Options not enabled"):
        parse_static_policy_options({"align-by-socket": "true"})
    with pytest.raises(InputError, match="Beta-level Options not enabled"):
        parse_static_policy_options(
            {"strict-cpu-reservation": "true"}, {"CPUManagerPolicyBetaOptions": False}
        )
    gates = {"CPUManagerPolicyAlphaOptions": True}
    for a, b in [
        ("full-pcpus-only", "distribute-cpus-across-cores"),
        ("distribute-cpus-across-numa", "distribute-cpus-across-cores"),
        ("prefer-align-cpus-by-uncorecache", "distribute-cpus-across-cores"),
        ("prefer-align-cpus-by-uncorecache", "distribute-cpus-across-numa"),
    ]:
        with pytest.raises(InputError, match=f"static policy options {a} and {b} can not"):
            parse_static_policy_options({a: "true", b: "T"}, gates)
    assert parse_static_policy_options({"full-pcpus-only": "F"}) == StaticPolicyOptions()


def test_align_by_socket_validation() -> None:
    with pytest.raises(InputError, match="incompatible with CPUManager align-by-socket"):
        manager(DUAL_SOCKET_HT, options={"align-by-socket": "true"}, tm_policy="single-numa-node")
    fake_more_sockets = regular("moreSockets", 8, lambda c: (c, c // 2, 0, 0))
    with pytest.raises(InputError, match="number of sockets are more than number of NUMA"):
        manager(fake_more_sockets, options={"align-by-socket": "true"})


# --- reserved CPUs ------------------------------------------------------------------------


def test_zero_reservation_is_a_startup_error() -> None:
    m = with_kubelet(DUAL_SOCKET_HT, system_reserved={})
    with pytest.raises(InputError, match=r"requires systemreserved\.cpu"):
        CpuManager(m)


def test_reserved_by_topology() -> None:
    """The doc example: 2 reserved on topoDualSocketHT -> {0, 6}; millicores round up."""
    m = with_kubelet(DUAL_SOCKET_HT, system_reserved={"cpu": 500}, kube_reserved={"cpu": 1200})
    mgr = CpuManager(m)
    assert mgr.reserved == cs("0,6")
    assert mgr.reserved_physical == cs("0,6")
    assert mgr.state.default_set == ALL12
    strict = CpuManager(
        with_kubelet(
            DUAL_SOCKET_HT,
            system_reserved={"cpu": 1000},
            cpu_manager_policy_options={"strict-cpu-reservation": "true"},
        )
    )
    assert strict.reserved == cs("0")
    assert strict.reserved_physical == cs("0,6")
    assert strict.state.default_set == cs("1-11")
    assert new_cpu_state(strict.machine).default_set == cs("1-11")


def test_explicit_reserved_must_exist() -> None:
    m = with_kubelet(DUAL_SOCKET_HT, reserved_system_cpus=frozenset({0, 40}))
    with pytest.raises(InputError, match="not online CPUs"):
        CpuManager(m)


# --- policy none ---------------------------------------------------------------------------


def test_policy_none() -> None:
    m = with_kubelet(DUAL_SOCKET_HT, cpu_manager_policy="none")
    mgr = CpuManager(m)
    pod = go_pod("c", 2000, 2000)
    assert mgr.container_hints(pod, pod.containers[0]) is None
    assert mgr.pod_hints(pod) is None
    mgr.allocate(pod, pod.containers[0], NO_HINT)
    assert mgr.state.assignments == {}
    assert mgr.state.to_dict() == {"policyName": "none", "defaultCpuSet": ""}
    bad = with_kubelet(
        DUAL_SOCKET_HT,
        cpu_manager_policy="none",
        cpu_manager_policy_options={"full-pcpus-only": "true"},
    )
    with pytest.raises(
        InputError, match=r"received unsupported options=map\[full-pcpus-only:true\]"
    ):
        CpuManager(bad)
    with pytest.raises(InputError, match='unknown policy: "dynamic"'):
        CpuManager(with_kubelet(DUAL_SOCKET_HT, cpu_manager_policy="dynamic"))


# --- topology_hints_test.go ----------------------------------------------------------------

M0, M1, M01 = mask_of([0]), mask_of([1]), mask_of([0, 1])


class HintCase(NamedTuple):
    name: str
    request: int
    default: frozenset[int]
    assignments: Mapping[str, Mapping[str, frozenset[int]]]
    expect: list[tuple[int, bool]]


def _alloc(cpus: str) -> Mapping[str, Mapping[str, frozenset[int]]]:
    return {"fakePod": {"fakeContainer": cs(cpus)}}


HINT_CASES = [
    HintCase("Request 2 CPUs, 4 available on NUMA 0, 6 available on NUMA 1", 2, cs("2-11"), {},
             [(M0, True), (M1, True), (M01, False)]),
    HintCase("Request 5 CPUs, 4 available on NUMA 0, 6 available on NUMA 1", 5, cs("2-11"), {},
             [(M1, True), (M01, False)]),
    HintCase("Request 7 CPUs, 4 available on NUMA 0, 6 available on NUMA 1", 7, cs("2-11"), {}, [(M01, True)]),
    HintCase("Request 11 CPUs, 4 available on NUMA 0, 6 available on NUMA 1", 11, cs("2-11"), {}, []),
    HintCase("Request 2 CPUs, 1 available on NUMA 0, 1 available on NUMA 1", 2, cs("0,3"), {}, [(M01, False)]),
    HintCase("Request more CPUs than available", 5, cs("0-3"), {}, []),
    HintCase("Regenerate Single-Node NUMA Hints if already allocated 1/2", 2, cs(""), _alloc("0,6"),
             [(M0, True), (M01, False)]),
    HintCase("Regenerate Single-Node NUMA Hints if already allocated 2/2", 2, cs(""), _alloc("3,9"),
             [(M1, True), (M01, False)]),
    HintCase("Regenerate Cross-NUMA Hints if already allocated", 11, cs(""), _alloc("0-10"), [(M01, True)]),
    HintCase("Requested less than already allocated", 2, cs(""), _alloc("0,6,3,9"), []),
    HintCase("Requested more than already allocated", 11, cs(""), _alloc("0,6,3,9"), []),
]  # fmt: skip


def _as_list(answer: object) -> list[tuple[int | None, bool]]:
    assert isinstance(answer, dict)
    hints = answer["cpu"]
    if isinstance(hints, GeneratedHints):
        hints = hints.materialize()
    return sorted((h.affinity, h.preferred) for h in hints)


@pytest.mark.parametrize(
    "case", [pytest.param(c, id=f"TestGetTopologyHints/{c.name}") for c in HINT_CASES]
)
def test_get_topology_hints(case: HintCase) -> None:
    mgr = manager(HINTS_MACHINE, default=case.default, assignments=case.assignments)
    pod = go_pod("fakeContainer", case.request * 1000, case.request * 1000)
    assert _as_list(mgr.container_hints(pod, pod.containers[0])) == sorted(case.expect)


@pytest.mark.parametrize(
    "case", [pytest.param(c, id=f"TestGetPodTopologyHints/{c.name}") for c in HINT_CASES]
)
def test_get_pod_topology_hints(case: HintCase) -> None:
    mgr = manager(HINTS_MACHINE, default=case.default, assignments=case.assignments)
    pod = go_pod("fakeContainer", case.request * 1000, case.request * 1000)
    assert _as_list(mgr.pod_hints(pod)) == sorted(case.expect)


def _m(*ids: int) -> int:
    return mask_of(ids)


HINT_OPTION_CASES = [
    ("AlignBySocket:false, Preferred hints does not contains socket aligned hints", 2, cs("2,3,11"), "false",
     [(_m(0), True), (_m(0, 1), False), (_m(0, 2), False), (_m(0, 3), False), (_m(0, 1, 2), False),
      (_m(0, 1, 3), False), (_m(0, 2, 3), False), (_m(0, 1, 2, 3), False)]),
    ("AlignBySocket:true Preferred hints contains socket aligned hints", 2, cs("2,3,11"), "true",
     [(_m(0), True), (_m(0, 1), True), (_m(0, 2), False), (_m(0, 3), False), (_m(0, 1, 2), False),
      (_m(0, 1, 3), False), (_m(0, 2, 3), False), (_m(0, 1, 2, 3), False)]),
    ("AlignBySocket:true Preferred hints are spread across socket since 2 sockets are required", 41,
     cs("0-28,40-57"), "true", [(_m(0, 1, 2), True), (_m(0, 1, 2, 3), True)]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("request_", "default", "align", "expect"),
    [
        pytest.param(*c[1:], id=f"TestGetPodTopologyHintsWithPolicyOptions/{c[0]}")
        for c in HINT_OPTION_CASES
    ],
)
def test_pod_hints_with_policy_options(
    request_: int, default: frozenset[int], align: str, expect: list[tuple[int, bool]]
) -> None:
    mgr = manager(DUAL_SOCKET_MULTI_NUMA_HT, default=default, options={"align-by-socket": align})
    pod = go_pod("fakeContainer", request_ * 1000, request_ * 1000)
    assert _as_list(mgr.pod_hints(pod)) == sorted(expect)


def _multi(
    inits: list[tuple[int, int, bool]], apps: list[tuple[int, int]], uid: str = "fakePod"
) -> Pod:
    cons = [
        container(
            f"initContainer-{i}", r, lim, ContainerKind.SIDECAR if side else ContainerKind.INIT
        )
        for i, (r, lim, side) in enumerate(inits)
    ] + [container(f"appContainer-{i}", r, lim) for i, (r, lim) in enumerate(apps)]
    guaranteed = all(c.requests == c.limits for c in cons)
    return make_pod(uid, *cons, qos=QOSClass.GUARANTEED if guaranteed else QOSClass.BURSTABLE)


POD_CPUS = [
    ("TestCase01: if requestedCPU == 0, Pod is not Guaranteed Qos", [(0, 0, False)], [(0, 0)], 0),
    ("TestCase04: Guaranteed Pod requests 2 CPUs", [(2, 2, False)], [(2, 2)], 2),
    ("TestCase05: Guaranteed Pod requests 5 CPUs", [(5, 5, False)], [(5, 5)], 5),
    ("TestCase06: The number of CPUs requested By app is bigger than the number of CPUs requested by init",
     [(2, 2, False)], [(5, 5)], 5),
    ("TestCase07: The number of CPUs requested By init is bigger than the number of CPUs requested by app",
     [(5, 5, False)], [(2, 2)], 5),
    ("TestCase08: Sum of CPUs requested by multiple containers", [(2, 2, False), (4, 4, False)],
     [(2, 2), (4, 4)], 6),
    ("TestCase09: restartable init container + regular container", [(1, 1, True)], [(1, 1)], 2),
    ("TestCase09: multiple restartable init containers",
     [(5, 5, False), (1, 1, True), (2, 2, True), (3, 3, True)], [(1, 1)], 7),
    ("TestCase11: multiple restartable and regular init containers",
     [(5, 5, False), (1, 1, True), (2, 2, True), (5, 5, False), (3, 3, True)], [(1, 1)], 8),
    ("TestCase12: restartable init, regular init and regular container", [(10, 10, True), (200, 200, False)],
     [(100, 100)], 210),
]  # fmt: skip


@pytest.mark.parametrize(
    ("inits", "apps", "expect"),
    [pytest.param(*c[1:], id=f"TestPodGuaranteedCPUs/{c[0]}") for c in POD_CPUS],
)
def test_pod_guaranteed_cpus(
    inits: list[tuple[int, int, bool]], apps: list[tuple[int, int]], expect: int
) -> None:
    pod = _multi(
        [(r * 1000, lim * 1000, s) for r, lim, s in inits],
        [(r * 1000, lim * 1000) for r, lim in apps],
    )
    assert pod_guaranteed_cpus(pod) == expect


# --- numalign specifics --------------------------------------------------------------------


def test_hints_none_for_shared_pool_containers() -> None:
    mgr = manager(HINTS_MACHINE, default=ALL12)
    burstable = go_pod("c", 1000, 2000)
    assert mgr.container_hints(burstable, burstable.containers[0]) is None
    fractional = go_pod("c", 1500, 1500)
    assert mgr.container_hints(fractional, fractional.containers[0]) is None


def test_state_round_trip() -> None:
    mgr = manager(HINTS_MACHINE, default=ALL12)
    pod = make_pod(
        "p1",
        container("init", 2000, kind=ContainerKind.INIT),
        container("app", 4000),
    )
    mgr.allocate(pod, pod.containers[0], NO_HINT)
    d = mgr.state.to_dict()
    assert d["entries"] == {"p1": {"init": "0,6"}}
    assert d["cpusToReuse"] == {"p1": "0,6"}
    again = CpuState.from_dict(d)
    assert again == mgr.state
    assert again.copy() == again and again.copy() is not again
    with pytest.raises(InputError, match=r"cpu\.entries\.p1\.init"):
        CpuState.from_dict({"defaultCpuSet": "0-3", "entries": {"p1": {"init": "3-1"}}})


def test_init_reuse_hints_and_pod_release() -> None:
    """An init container's CPUs steer the app container's hints (every mask must hold them)."""
    mgr = manager(HINTS_MACHINE, default=ALL12)
    pod = make_pod("p1", container("init", 2000, kind=ContainerKind.INIT), container("app", 2000))
    mgr.allocate(pod, pod.containers[0], TopologyHint(M1, True))
    assert mgr.state.cpuset("p1", "init") == cs("3,9")
    hints = _as_list(mgr.container_hints(pod, pod.containers[1]))
    assert hints == sorted([(M1, True), (M01, False)])
    mgr.allocate(pod, pod.containers[1], TopologyHint(M1, True))
    assert mgr.state.cpuset("p1", "app") == cs("3,9")
    mgr.release_pod("p1")
    assert mgr.state.default_set == ALL12
    assert mgr.state.assignments == {} and mgr.state.cpus_to_reuse == {}


def test_64_numa_nodes_hints_are_a_rule() -> None:
    """On 64 NUMA nodes the hints stay a rule; the merge finds the preferred 2-node mask."""
    from numalign.engine.merge import merge_lists

    big = regular("numa64", 256, lambda c: (c, c // 128, c // 4, c // 4))
    # free: node 6 one CPU (27), node 7 three (29-31), node 63 four; everything else busy
    busy = set(range(0, 24)) | {24, 25, 26} | {28} | set(range(32, 252))
    mgr = manager(
        big, default=frozenset(range(256)) - busy, assignments={"x": {"c": frozenset(busy)}}
    )
    mgr.validate_state()
    pod = go_pod("c", 6000, 6000)
    answer = mgr.container_hints(pod, pod.containers[0])
    assert answer is not None
    gen = answer["cpu"]
    assert isinstance(gen, GeneratedHints)
    assert gen.preferred_size == 2  # 4 CPUs per node on the empty machine
    assert gen.contains(mask_of([6, 7, 63])) and not gen.contains(mask_of([6, 7]))
    assert gen.contains(mask_of([7, 63]))  # 3 + 4 free
    best = merge_lists([gen], mgr.machine.all_nodes_mask)
    assert best == TopologyHint(mask_of([7, 63]), True)
    mgr.allocate(pod, pod.containers[0], best)
    # sockets-first packing: the whole free node 63, then two single CPUs of node 7
    assert mgr.state.cpuset(pod.uid, "c") == cs("29,30,252-255")


def test_is_a_provider() -> None:
    from numalign.resources.base import Provider

    provider: Provider = manager(HINTS_MACHINE, default=ALL12)
    assert provider.name == "cpu"
