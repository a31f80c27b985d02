"""Memory manager: tables transcribed from kubelet ``memorymanager/policy_static_test.go``.

Case ids name the upstream test function and case description. Machine states are given
directly, as upstream does; ``hugepages1Gi`` requests use ``hugepages-1Gi``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from numalign.engine.bitmask import mask_of
from numalign.engine.hints import GeneratedHints, TopologyHint
from numalign.errors import AdmissionError, InputError, StateError
from numalign.machine.model import KubeletConfig, Machine, NumaNode, ReservedMemory
from numalign.pods import Container, ContainerKind, Pod, QOSClass
from numalign.resources.memory import (
    Block,
    MemoryManager,
    MemoryState,
    MemoryTable,
    NodeMemoryState,
    machine_states_equivalent,
    new_memory_state,
    pod_requests,
)

mb = 1 << 20
gb = 1 << 30
HP1G = "hugepages-1Gi"
HP2M = "hugepages-2Mi"
MEM = "memory"


def T(alloc: int, free: int, reserved: int, sysres: int, total: int) -> MemoryTable:
    return MemoryTable(
        total=total, system_reserved=sysres, allocatable=alloc, reserved=reserved, free=free
    )


def N(tables: Mapping[str, MemoryTable], cells: Sequence[int], n: int = 0) -> NodeMemoryState:
    return NodeMemoryState(n, {k: v.copy() for k, v in tables.items()}, list(cells))


def B(nodes: Sequence[int], typ: str, size: int) -> Block:
    return Block(tuple(nodes), typ, size)


def machine(
    nodes: Mapping[int, tuple[int, int]] | Sequence[int] = (0,),
    reserved: Mapping[int, int] | None = None,
) -> Machine:
    """nodes: id -> (memory bytes, number of 1Gi pages), or just ids."""
    if isinstance(nodes, Mapping):
        nn = tuple(
            NumaNode(i, mem, {gb: pages * gb} if pages else {})
            for i, (mem, pages) in sorted(nodes.items())
        )
    else:
        nn = tuple(NumaNode(i, 4 * gb) for i in nodes)
    rs = reserved if reserved is not None else {n.id: 512 * mb for n in nn}
    return Machine(
        "m",
        nn,
        (),
        kubelet=KubeletConfig(
            memory_manager_policy="Static",
            reserved_memory=tuple(ReservedMemory(i, {MEM: q}) for i, q in rs.items()),
        ),
    )


def container(
    name: str,
    mem: int,
    hp: int | None = None,
    hp_name: str = HP1G,
    kind: ContainerKind = ContainerKind.APP,
) -> Container:
    req: dict[str, int] = {"cpu": 1000, MEM: mem}
    if hp is not None:
        req[hp_name] = hp
    return Container(name, kind, req, dict(req))


def guaranteed(uid: str, *cs: Container) -> Pod:
    return Pod("default", uid, uid, QOSClass.GUARANTEED, cs)


def burstable(uid: str, *cs: Container) -> Pod:
    return Pod("default", uid, uid, QOSClass.BURSTABLE, cs)


def st(
    machine_state: Mapping[int, NodeMemoryState],
    assignments: Mapping[str, Mapping[str, Sequence[Block]]] | None = None,
) -> MemoryState:
    return MemoryState(
        "Static",
        {k: v.copy() for k, v in machine_state.items()},
        {p: {c: list(b) for c, b in cs.items()} for p, cs in (assignments or {}).items()},
    )


def blocks_equal(
    a: Mapping[str, Mapping[str, Sequence[Block]]], b: Mapping[str, Mapping[str, Sequence[Block]]]
) -> bool:
    def norm(x: Mapping[str, Mapping[str, Sequence[Block]]]) -> Any:
        return {
            p: {
                c: sorted(bs, key=lambda k: (k.type, k.numa_affinity, k.size))
                for c, bs in cs.items()
            }
            for p, cs in x.items()
        }

    return bool(norm(a) == norm(b))


def states_equal(a: Mapping[int, NodeMemoryState], b: Mapping[int, NodeMemoryState]) -> bool:
    return {k: v.to_dict() for k, v in a.items()} == {k: v.to_dict() for k, v in b.items()}


REQ_G = (gb, gb)  # requirementsGuaranteed: 1Gi memory, 1Gi hugepages-1Gi
STD = {MEM: T(1536 * mb, 1536 * mb, 0, 512 * mb, 2 * gb), HP1G: T(gb, gb, 0, 0, gb)}


# ---- TestStaticPolicyNew ---------------------------------------------------------------


def test_static_policy_new_without_reserved_memory() -> None:
    m = machine([0], reserved={})
    with pytest.raises(InputError, match="you should specify the system reserved memory"):
        new_memory_state(m)
    with pytest.raises(InputError):
        MemoryManager(m)


def test_static_policy_new_with_reserved_on_one_node() -> None:
    m = machine([0, 1], reserved={1: 512 * mb})
    ms = new_memory_state(m).machine_state
    assert ms[0].memory_map[MEM].system_reserved == 0
    assert ms[1].memory_map[MEM].system_reserved == 512 * mb


# ---- TestStaticPolicyStart -------------------------------------------------------------

ONE_2G = {0: (2 * gb, 1)}
START_FAIL = "[memorymanager] the expected machine state is different from the real one"
START: list[tuple[str, Any, Any, Any, str | None]] = [
    (
        "should fail, if machine state is empty, but it has memory assignments",
        {},
        {"pod": {"container1": [B([0], MEM, 512 * mb)]}},
        {0: (2 * gb, 1)},
        "[memorymanager] machine state can not be empty when it has memory assignments",
    ),
    (
        "should fail when machine state does not have all NUMA nodes",
        {0: N(STD, [0])},
        {},
        {0: (2 * gb, 1), 1: (2 * gb, 1)},
        START_FAIL,
    ),
    (
        "should fail when machine state does not have memory resource",
        {0: N({HP1G: T(gb, gb, 0, 0, gb)}, [0])},
        {},
        ONE_2G,
        START_FAIL,
    ),
    (
        "should fail when machine state has wrong size of total memory",
        {0: N({MEM: T(1536 * mb, 1536 * mb, 0, 512 * mb, 1536 * mb)}, [0])},
        {},
        ONE_2G,
        START_FAIL,
    ),
    (
        "should fail when machine state has wrong size of system reserved memory",
        {0: N({MEM: T(1536 * mb, 1536 * mb, 0, 1024, 2 * gb)}, [0])},
        {},
        ONE_2G,
        START_FAIL,
    ),
    (
        "should fail when machine state reserved memory is different from the memory of all containers memory assignments",
        {0: N({MEM: T(1536 * mb, 1536 * mb, 0, 512 * mb, 2 * gb)}, [0], 1)},
        {"pod": {"container1": [B([0], MEM, 512 * mb)]}},
        ONE_2G,
        START_FAIL,
    ),
    (
        "should fail when machine state has wrong size of hugepages",
        {0: N({MEM: T(1536 * mb, 1536 * mb, 0, 512 * mb, 2 * gb), HP1G: T(gb, gb, 0, 0, gb)}, [0])},
        {},
        {0: (2 * gb, 2)},
        START_FAIL,
    ),
    (
        "should fail when machine state has wrong size of system reserved hugepages",
        {
            0: N(
                {MEM: T(1536 * mb, 1536 * mb, 0, 512 * mb, 2 * gb), HP1G: T(gb, gb, 0, gb, 2 * gb)},
                [0],
            )
        },
        {},
        {0: (2 * gb, 2)},
        START_FAIL,
    ),
    (
        "should fail when the hugepages reserved machine state is different from the hugepages of all containers memory assignments",
        {
            0: N(
                {
                    MEM: T(1536 * mb, 1536 * mb, 0, 512 * mb, 2 * gb),
                    HP1G: T(4 * gb, gb, 3 * gb, 0, 4 * gb),
                },
                [0],
                2,
            )
        },
        {"pod1": {"container1": [B([0], HP1G, gb)]}, "pod2": {"container2": [B([0], HP1G, gb)]}},
        {0: (2 * gb, 4)},
        START_FAIL,
    ),
    (
        "should fail when machine state does not have NUMA node that used under the memory assignment",
        {0: N(STD, [0])},
        {"pod1": {"container1": [B([1], MEM, gb)]}},
        ONE_2G,
        "[memorymanager] (pod: pod1, container: container1) the memory assignment uses the NUMA that does not exist",
    ),
    (
        "should fail when machine state does not have resource that used under the memory assignment",
        {0: N(STD, [0], 2)},
        {"pod1": {"container1": [B([0], MEM, gb), B([0], HP2M, gb)]}},
        ONE_2G,
        "[memorymanager] (pod: pod1, container: container1) the memory assignment uses memory resource that does not exist",
    ),
    (
        "should fail when machine state number of assignments is different from the expected one",
        {0: N(STD, [0], 1)},
        {"pod1": {"container1": [B([0], MEM, gb), B([0], HP1G, gb)]}},
        ONE_2G,
        START_FAIL,
    ),
    (
        "should validate cross NUMA reserved memory vs container assignments",
        {
            0: N(
                {MEM: T(640 * mb, 0, 640 * mb, 512 * mb, 2176 * mb), HP1G: T(gb, 0, gb, 0, gb)},
                [0, 1],
                4,
            ),
            1: N(
                {
                    MEM: T(640 * mb, 256 * mb, 384 * mb, 512 * mb, 2176 * mb),
                    HP1G: T(gb, 0, gb, 0, gb),
                },
                [0, 1],
                4,
            ),
        },
        {
            "pod1": {"container1": [B([0, 1], MEM, 768 * mb), B([0, 1], HP1G, gb)]},
            "pod2": {"container2": [B([0, 1], MEM, 256 * mb), B([0, 1], HP1G, gb)]},
        },
        {0: (2176 * mb, 1), 1: (2176 * mb, 1)},
        None,
    ),
]


@pytest.mark.parametrize(
    ("ms", "assignments", "nodes", "error"),
    [c[1:] for c in START],
    ids=[f"TestStaticPolicyStart/{c[0]}" for c in START],
)
def test_static_policy_start(ms: Any, assignments: Any, nodes: Any, error: str | None) -> None:
    mm = MemoryManager(
        machine(nodes, {0: 512 * mb} if len(nodes) == 1 else {i: 512 * mb for i in nodes}),
        st(ms, assignments),
    )
    if error is None:
        before = {k: v.to_dict() for k, v in mm.state.machine_state.items()}
        mm.validate_state()
        assert {k: v.to_dict() for k, v in mm.state.machine_state.items()} == before
    else:
        with pytest.raises(StateError) as e:
            mm.validate_state()
        assert e.value.message == error


def test_static_policy_start_fills_default_state() -> None:
    """TestStaticPolicyStart/should fill the state with default values, when the state is empty."""
    mm = MemoryManager(machine({0: (3 * gb, 1)}, {0: 512 * mb}), st({}))
    mm.validate_state()
    assert states_equal(
        mm.state.machine_state,
        {0: N({MEM: T(1536 * mb, 1536 * mb, 0, 512 * mb, 3 * gb), HP1G: T(gb, gb, 0, 0, gb)}, [0])},
    )
    assert mm.state.assignments == {}


# ---- TestStaticPolicyAllocate ------------------------------------------------------------

GROUP12 = {MEM: T(1536 * mb, 512 * mb, gb, 512 * mb, 2 * gb), HP1G: T(gb, gb, 0, 0, gb)}
SMALL = {MEM: T(512 * mb, 512 * mb, 0, 512 * mb, gb), HP1G: T(gb, gb, 0, 0, gb)}
USED0 = {MEM: T(gb, 512 * mb, 512 * mb, 512 * mb, 1536 * mb), HP1G: T(gb, gb, 0, 0, gb)}
FREE512 = {MEM: T(512 * mb, 512 * mb, 0, 512 * mb, 1536 * mb), HP1G: T(gb, gb, 0, 0, gb)}

ALLOCATE: list[tuple[str, Any, Any, Pod, TopologyHint, Any, Any, str | None]] = [
    (
        "should do nothing for non-guaranteed pods",
        {0: N(STD, [])},
        {},
        burstable("pod1", container("container1", gb, gb)),
        TopologyHint(None, False),
        {},
        {0: N(STD, [])},
        None,
    ),
    (
        "should do nothing once container already exists under the state file",
        {
            0: N(
                {
                    MEM: T(1536 * mb, 512 * mb, 1024 * mb, 512 * mb, 2 * gb),
                    HP1G: T(gb, gb, 0, 0, gb),
                },
                [],
            )
        },
        {"pod1": {"container1": [B([0], MEM, gb)]}},
        guaranteed("pod1", container("container1", gb, gb)),
        TopologyHint(None, False),
        {"pod1": {"container1": [B([0], MEM, gb)]}},
        {
            0: N(
                {
                    MEM: T(1536 * mb, 512 * mb, 1024 * mb, 512 * mb, 2 * gb),
                    HP1G: T(gb, gb, 0, 0, gb),
                },
                [],
            )
        },
        None,
    ),
    (
        "should calculate a default topology hint when no NUMA affinity was provided by the topology manager hint",
        {0: N(STD, [0])},
        {},
        guaranteed("pod1", container("container1", gb, gb)),
        TopologyHint(None, False),
        {"pod1": {"container1": [B([0], MEM, gb), B([0], HP1G, gb)]}},
        {
            0: N(
                {
                    MEM: T(1536 * mb, 512 * mb, 1024 * mb, 512 * mb, 2 * gb),
                    HP1G: T(gb, 0, gb, 0, gb),
                },
                [0],
                2,
            )
        },
        None,
    ),
    (
        "should fail when no NUMA affinity was provided under the topology manager hint and calculation of the default hint failed",
        {
            0: N(
                {
                    MEM: T(1536 * mb, 512 * mb, 1024 * mb, 512 * mb, 2 * gb),
                    HP1G: T(gb, 0, gb, 0, gb),
                },
                [0],
                2,
            )
        },
        {"pod1": {"container1": [B([0], MEM, gb), B([0], HP1G, gb)]}},
        guaranteed("pod2", container("container2", gb, gb)),
        TopologyHint(None, False),
        None,
        None,
        "[memorymanager] failed to get the default NUMA affinity, no NUMA nodes with enough memory is available",
    ),
    (
        "should fail when no NUMA affinity was provided under the topology manager preferred hint and default hint has preferred false",
        {0: N(USED0, [0], 1), 1: N(FREE512, [1]), 2: N(FREE512, [2])},
        {"pod1": {"container1": [B([0], MEM, 512 * mb)]}},
        guaranteed("pod2", container("container2", gb, gb)),
        TopologyHint(None, True),
        None,
        None,
        "[memorymanager] failed to find the default preferred hint",
    ),
    (
        "should fail when NUMA affinity provided under the topology manager hint did not satisfy container requirements and extended hint generation failed",
        {0: N(SMALL, [0]), 1: N(GROUP12, [1, 2], 1), 2: N(GROUP12, [1, 2], 1)},
        {},
        guaranteed("pod1", container("container1", gb, gb)),
        TopologyHint(mask_of([0]), False),
        None,
        None,
        "[memorymanager] failed to find NUMA nodes to extend the current topology hint",
    ),
    (
        "should fail when the topology manager provided the preferred hint and extended hint has preferred false",
        {0: N(USED0, [0], 1), 1: N(FREE512, [1]), 2: N(FREE512, [2])},
        {"pod1": {"container1": [B([0], MEM, 512 * mb)]}},
        guaranteed("pod2", container("container2", gb, gb)),
        TopologyHint(mask_of([1]), True),
        None,
        None,
        "[memorymanager] failed to find the extended preferred hint",
    ),
    (
        "should succeed to allocate memory from multiple NUMA nodes",
        {i: N(SMALL, [i]) for i in range(4)},
        {},
        guaranteed("pod1", container("container1", gb, gb)),
        TopologyHint(None, True),
        {"pod1": {"container1": [B([0, 1], MEM, gb), B([0, 1], HP1G, gb)]}},
        {
            0: N(
                {MEM: T(512 * mb, 0, 512 * mb, 512 * mb, gb), HP1G: T(gb, 0, gb, 0, gb)}, [0, 1], 2
            ),
            1: N(
                {MEM: T(512 * mb, 0, 512 * mb, 512 * mb, gb), HP1G: T(gb, gb, 0, 0, gb)}, [0, 1], 2
            ),
            2: N(SMALL, [2]),
            3: N(SMALL, [3]),
        },
        None,
    ),
]


def _run_allocate(
    ms: Any,
    assignments: Any,
    pod: Pod,
    hint: TopologyHint,
    containers: Sequence[Container] | None = None,
) -> MemoryManager:
    mm = MemoryManager(machine(sorted(ms) or [0]), st(ms, assignments))
    for c in containers if containers is not None else pod.app_containers[:1]:
        mm.allocate(pod, c, hint)
    return mm


@pytest.mark.parametrize(
    ("ms", "assignments", "pod", "hint", "exp_assign", "exp_ms", "error"),
    [c[1:] for c in ALLOCATE],
    ids=[f"TestStaticPolicyAllocate/{c[0]}" for c in ALLOCATE],
)
def test_static_policy_allocate(
    ms: Any,
    assignments: Any,
    pod: Pod,
    hint: TopologyHint,
    exp_assign: Any,
    exp_ms: Any,
    error: str | None,
) -> None:
    if error is not None:
        mm = MemoryManager(machine(sorted(ms)), st(ms, assignments))
        before = mm.state.to_dict()
        with pytest.raises(AdmissionError) as e:
            mm.allocate(pod, pod.app_containers[0], hint)
        assert e.value.reason == "UnexpectedAdmissionError"
        assert e.value.message == f"Allocate failed due to {error}, which is unexpected"
        assert mm.state.to_dict() == before  # never mutated on error
        return
    mm = _run_allocate(ms, assignments, pod, hint)
    assert blocks_equal(mm.state.assignments, exp_assign)
    assert states_equal(mm.state.machine_state, exp_ms)


# ---- TestStaticPolicyAllocateWithInitContainers ------------------------------------------

INIT_CASES = [
    (
        "init containers requests 1Gi and 2Gi, apps containers 3Gi and 4Gi",
        8,
        7680 * mb,
        (1, 2),
        (3, 4),
        (0, 0),
        (512 * mb, gb),
    ),
    (
        "init containers requests 4Gi and 3Gi, apps containers 2Gi and 1Gi",
        8,
        7680 * mb,
        (4, 3),
        (2, 1),
        (0, 1),
        (3584 * mb, 4 * gb),
    ),
    (
        "init containers requests 7Gi and 4Gi, apps containers 4Gi and 3Gi",
        8,
        7680 * mb,
        (7, 4),
        (4, 3),
        (0, 0),
        (512 * mb, gb),
    ),
    (
        "init containers requests 7Gi and 4Gi, apps containers 5Gi and 2Gi",
        10,
        10240 * mb,
        (7, 4),
        (5, 2),
        (0, 0),
        (3072 * mb, 3 * gb),
    ),
]


@pytest.mark.parametrize(
    ("total", "mem_alloc", "inits", "apps", "init_left", "free"),
    [c[1:] for c in INIT_CASES],
    ids=[
        f"TestStaticPolicyAllocateWithInitContainers/should re-use init containers memory, {c[0]}"
        for c in INIT_CASES
    ],
)
def test_allocate_with_init_containers(
    total: int,
    mem_alloc: int,
    inits: tuple[int, int],
    apps: tuple[int, int],
    init_left: tuple[int, int],
    free: tuple[int, int],
) -> None:
    ms = {
        0: N(
            {
                MEM: T(mem_alloc, mem_alloc, 0, 512 * mb, total * gb),
                HP1G: T(total * gb, total * gb, 0, 0, total * gb),
            },
            [0],
        )
    }
    ics = [
        container(f"initContainer{i + 1}", q * gb, q * gb, kind=ContainerKind.INIT)
        for i, q in enumerate(inits)
    ]
    acs = [container(f"container{i + 1}", q * gb, q * gb) for i, q in enumerate(apps)]
    pod = guaranteed("pod1", *ics, *acs)
    mm = _run_allocate(ms, {}, pod, TopologyHint(None, False), [*ics, *acs])
    expected = {
        "pod1": {
            **{
                f"initContainer{i + 1}": [B([0], MEM, q * gb), B([0], HP1G, q * gb)]
                for i, q in enumerate(init_left)
            },
            **{
                f"container{i + 1}": [B([0], MEM, q * gb), B([0], HP1G, q * gb)]
                for i, q in enumerate(apps)
            },
        }
    }
    assert blocks_equal(mm.state.assignments, expected)
    used = mem_alloc - free[0]
    assert states_equal(
        mm.state.machine_state,
        {
            0: N(
                {
                    MEM: T(mem_alloc, free[0], used, 512 * mb, total * gb),
                    HP1G: T(total * gb, free[1], total * gb - free[1], 0, total * gb),
                },
                [0],
                8,
            )
        },
    )
    # releasing everything restores the initial state exactly
    mm.release_pod("pod1")
    assert states_equal(mm.state.machine_state, ms)
    assert mm.state.assignments == {}


# ---- TestStaticPolicyRemoveContainer -----------------------------------------------------

REMOVE = [
    (
        "should do nothing when the container does not exist under the state",
        {0: N(STD, [])},
        {},
        {0: N(STD, [])},
    ),
    (
        "should delete the container assignment and update the machine state",
        {
            0: N(
                {
                    MEM: T(1536 * mb, 512 * mb, 1024 * mb, 512 * mb, 2 * gb),
                    HP1G: T(gb, 0, gb, 0, gb),
                },
                [0],
                2,
            )
        },
        {"pod1": {"container1": [B([0], MEM, gb), B([0], HP1G, gb)]}},
        {0: N(STD, [0])},
    ),
    (
        "should delete the cross NUMA container assignment and update the machine state",
        {
            0: N(
                {MEM: T(512 * mb, 0, 512 * mb, 512 * mb, gb), HP1G: T(gb, 0, gb, 0, gb)}, [0, 1], 2
            ),
            1: N(
                {MEM: T(512 * mb, 0, 512 * mb, 512 * mb, gb), HP1G: T(gb, gb, 0, 0, gb)}, [0, 1], 2
            ),
        },
        {"pod1": {"container1": [B([0, 1], MEM, gb), B([0, 1], HP1G, gb)]}},
        {0: N(SMALL, [0]), 1: N(SMALL, [1])},
    ),
]


@pytest.mark.parametrize(
    ("ms", "assignments", "exp_ms"),
    [c[1:] for c in REMOVE],
    ids=[f"TestStaticPolicyRemoveContainer/{c[0]}" for c in REMOVE],
)
def test_remove_container(ms: Any, assignments: Any, exp_ms: Any) -> None:
    mm = MemoryManager(machine(sorted(ms)), st(ms, assignments))
    mm.release_container("pod1", "container1")
    assert mm.state.assignments == {}
    assert states_equal(mm.state.machine_state, exp_ms)


# ---- TestStaticPolicyGetTopologyHints ----------------------------------------------------


def H(*nodes: int, pref: bool) -> TopologyHint:
    return TopologyHint(mask_of(nodes), pref)


def _mat(hints: Any) -> Any:
    if hints is None:
        return None
    return {
        r: (h.materialize() if isinstance(h, GeneratedHints) else list(h)) for r, h in hints.items()
    }


FOUR_GROUP = {
    0: N({MEM: T(1536 * mb, 0, 1536 * mb, 512 * mb, 2 * gb), HP1G: T(gb, 0, gb, 0, gb)}, [0, 1], 2),
    1: N({MEM: T(1536 * mb, gb, 512 * mb, 512 * mb, 2 * gb), HP1G: T(gb, 0, gb, 0, gb)}, [0, 1], 2),
    2: N(STD, [2]),
    3: N(STD, [3]),
}
TWO_GROUP_2M = {
    0: N(
        {
            MEM: T(1536 * mb, 0, 1536 * mb, 512 * mb, 2 * gb),
            HP2M: T(20 * mb, 0, 20 * mb, 0, 20 * mb),
        },
        [0, 1],
        2,
    ),
    1: N(
        {
            MEM: T(1536 * mb, gb, 512 * mb, 512 * mb, 2 * gb),
            HP2M: T(20 * mb, 16 * mb, 4 * mb, 0, 20 * mb),
        },
        [0, 1],
        2,
    ),
}
HINTS: list[tuple[str, Any, Any, Pod, Any]] = [
    (
        "should not provide topology hints for non-guaranteed pods",
        {0: N(STD, [0])},
        {},
        burstable("pod1", container("container1", gb, gb)),
        None,
    ),
    (
        "should provide topology hints based on the existent memory assignment",
        {0: N(STD, [0])},
        {"pod1": {"container1": [B([0], MEM, gb), B([0], HP1G, gb)]}},
        guaranteed("pod1", container("container1", gb, gb)),
        {MEM: [H(0, pref=True)], HP1G: [H(0, pref=True)]},
    ),
    (
        "should calculate new topology hints, when the container does not exist under assignments",
        FOUR_GROUP,
        {"pod1": {"container1": [B([0, 1], MEM, 2 * gb), B([0, 1], HP1G, 2 * gb)]}},
        guaranteed("pod2", container("container2", gb, gb)),
        {
            MEM: [H(2, pref=True), H(3, pref=True), H(2, 3, pref=False)],
            HP1G: [H(2, pref=True), H(3, pref=True), H(2, 3, pref=False)],
        },
    ),
    (
        "should fail when number of existing memory assignment resources are different from resources requested by container",
        {0: N(STD, [0])},
        {"pod1": {"container1": [B([0], MEM, gb)]}},
        guaranteed("pod1", container("container1", gb, gb)),
        None,
    ),
    (
        "should fail when existing memory assignment resources are different from resources requested by container",
        {0: N(STD, [0])},
        {"pod1": {"container1": [B([0], MEM, gb), B([0], HP2M, gb)]}},
        guaranteed("pod1", container("container1", gb, gb)),
        None,
    ),
    (
        "should fail when existing memory assignment size is different from one requested by the container",
        {0: N(STD, [0])},
        {"pod1": {"container1": [B([0], MEM, 512 * mb), B([0], HP1G, gb)]}},
        guaranteed("pod1", container("container1", gb, gb)),
        None,
    ),
    (
        "should not return preferred hints with multiple NUMA nodes for the pod with resources satisfied by a single NUMA node",
        TWO_GROUP_2M,
        {"pod1": {"container1": [B([0, 1], MEM, 2 * gb), B([0, 1], HP2M, 24 * mb)]}},
        guaranteed("pod2", container("container2", gb, 16 * mb, HP2M)),
        {MEM: [H(0, 1, pref=False)], HP2M: [H(0, 1, pref=False)]},
    ),
]


@pytest.mark.parametrize(
    ("ms", "assignments", "pod", "expected"),
    [c[1:] for c in HINTS],
    ids=[f"TestStaticPolicyGetTopologyHints/{c[0]}" for c in HINTS],
)
def test_get_topology_hints(ms: Any, assignments: Any, pod: Pod, expected: Any) -> None:
    mm = MemoryManager(machine(sorted(ms)), st(ms, assignments))
    assert _mat(mm.container_hints(pod, pod.app_containers[0])) == expected
    # the pod-scope hints of a one-container pod are the same
    assert _mat(mm.pod_hints(pod)) == expected


# ---- numalign-specific behaviour ---------------------------------------------------------


def test_no_mask_fits_gives_empty_map_and_allocate_fails() -> None:
    """spec section 4: empty map ("no preference"), then Allocate fails."""
    mm = MemoryManager(machine([0, 1]))
    c = container("c", 100 * gb)
    pod = guaranteed("p", c)
    assert mm.container_hints(pod, c) == {}
    with pytest.raises(AdmissionError) as e:
        mm.allocate(pod, c, TopologyHint(None, True))
    assert "failed to get the default NUMA affinity" in e.value.message


def test_policy_none_does_nothing() -> None:
    m = Machine("m", (NumaNode(0, 4 * gb),), ())
    mm = MemoryManager(m)
    c = container("c", gb)
    pod = guaranteed("p", c)
    assert mm.container_hints(pod, c) is None
    assert mm.pod_hints(pod) is None
    mm.allocate(pod, c, TopologyHint(None, True))
    assert mm.state.to_dict() == {"policyName": "None", "machineState": {}}


def test_group_rule_single_node_with_single_blocks_cannot_join_group() -> None:
    ms = {0: N(USED0, [0], 1), 1: N(FREE512, [1]), 2: N(FREE512, [2])}
    mm = MemoryManager(machine([0, 1, 2]), st(ms, {"pod1": {"c": [B([0], MEM, 512 * mb)]}}))
    c = container("c2", gb)
    hints = _mat(mm.container_hints(guaranteed("pod2", c), c))
    # {0} is the only single node with 1Gi allocatable but only 512Mi free; {0,x} is
    # forbidden (node 0 holds single-NUMA blocks); {1,2} is allowed
    assert hints == {MEM: [H(1, 2, pref=False)]}


def test_group_rule_existing_group_reused_exactly() -> None:
    ms = {0: N(GROUP12, [0, 1], 1), 1: N(GROUP12, [0, 1], 1), 2: N(STD, [2])}
    mm = MemoryManager(machine([0, 1, 2]), st(ms, {"pod1": {"c": [B([0, 1], MEM, 2 * gb)]}}))
    c = container("c2", 900 * mb)
    hints = _mat(mm.container_hints(guaranteed("pod2", c), c))
    assert hints == {MEM: [H(2, pref=True), H(0, 1, pref=False)]}
    # allocating into the group keeps the group
    mm.allocate(guaranteed("pod2", c), c, TopologyHint(mask_of([0, 1]), False))
    assert mm.state.machine_state[0].cells == [0, 1]
    assert mm.state.machine_state[0].number_of_assignments == 2


def test_violating_hint_rejected() -> None:
    ms = {0: N(USED0, [0], 1), 1: N(FREE512, [1])}
    mm = MemoryManager(machine([0, 1]), st(ms, {"pod1": {"c": [B([0], MEM, 512 * mb)]}}))
    c = container("c2", 512 * mb)
    with pytest.raises(AdmissionError, match="preferred hint violates NUMA node allocation"):
        mm.allocate(guaranteed("pod2", c), c, TopologyHint(mask_of([0, 1]), False))


def test_checkpoint_roundtrip_and_shape() -> None:
    mm = MemoryManager(machine({0: (4 * gb, 1), 1: (4 * gb, 1)}))
    c = container("c", gb, gb)
    pod = guaranteed("p", c)
    mm.allocate(pod, c, TopologyHint(mask_of([1]), True))
    d = mm.state.to_dict()
    assert d["policyName"] == "Static"
    assert d["entries"] == {
        "p": {
            "c": [
                {"numaAffinity": [1], "type": "memory", "size": gb},
                {"numaAffinity": [1], "type": HP1G, "size": gb},
            ]
        }
    }
    assert d["machineState"]["1"]["memoryMap"]["memory"] == {
        "total": 4 * gb,
        "systemReserved": 512 * mb,
        "allocatable": 4 * gb - 512 * mb - gb,
        "reserved": gb,
        "free": 4 * gb - 512 * mb - 2 * gb,
    }
    assert MemoryState.from_dict(d).to_dict() == d
    mm2 = MemoryManager(mm.machine, MemoryState.from_dict(d))
    mm2.validate_state()


def test_equivalence_helper_group_sums() -> None:
    a = {0: N({MEM: T(gb, 0, gb, 0, gb)}, [0, 1], 1), 1: N({MEM: T(gb, gb, 0, 0, gb)}, [0, 1], 1)}
    b = {0: N({MEM: T(gb, gb, 0, 0, gb)}, [0, 1], 1), 1: N({MEM: T(gb, 0, gb, 0, gb)}, [0, 1], 1)}
    assert machine_states_equivalent(a, b)
    assert not states_equal(a, b)


# ---- TestStaticPolicyAllocateWithRestartableInitContainers --------------------------------


def test_restartable_do_nothing_once_containers_exist() -> None:
    """TestStaticPolicyAllocateWithRestartableInitContainers/should do nothing once containers
    already exist under the state file."""
    ms = {
        0: N(
            {
                MEM: T(2560 * mb, 512 * mb, 2048 * mb, 512 * mb, 3 * gb),
                HP1G: T(2 * gb, 2 * gb, 0, 0, 2 * gb),
            },
            [],
        )
    }
    assignments = {"pod1": {"initContainer1": [B([0], MEM, gb)], "container1": [B([0], MEM, gb)]}}
    sc = container("initContainer1", gb, gb, kind=ContainerKind.SIDECAR)
    c1 = container("container1", gb, gb)
    pod = guaranteed("pod1", sc, c1)
    mm = _run_allocate(ms, assignments, pod, TopologyHint(None, False), [sc, c1])
    assert blocks_equal(mm.state.assignments, assignments)
    assert states_equal(mm.state.machine_state, ms)


def test_restartable_init_memory_not_reused() -> None:
    """TestStaticPolicyAllocateWithRestartableInitContainers/should not re-use restartable init
    containers memory."""
    ms = {
        0: N(
            {MEM: T(7 * gb, 7 * gb, 0, 512 * mb, 7680 * mb), HP1G: T(7 * gb, 7 * gb, 0, 0, 7 * gb)},
            [0],
        )
    }
    i1 = container("initContainer1", gb, gb, kind=ContainerKind.INIT)
    s2 = container("restartableInitContainer2", 2 * gb, 2 * gb, kind=ContainerKind.SIDECAR)
    i3 = container("initContainer3", 3 * gb, 3 * gb, kind=ContainerKind.INIT)
    s4 = container("restartableInitContainer4", 4 * gb, 4 * gb, kind=ContainerKind.SIDECAR)
    c1 = container("container1", gb, gb)
    pod = guaranteed("pod1", i1, s2, i3, s4, c1)
    mm = _run_allocate(ms, {}, pod, TopologyHint(None, False), [i1, s2, i3, s4, c1])
    sizes = {
        "initContainer1": 0,
        "restartableInitContainer2": 2,
        "initContainer3": 0,
        "restartableInitContainer4": 4,
        "container1": 1,
    }
    expected = {"pod1": {n: [B([0], MEM, q * gb), B([0], HP1G, q * gb)] for n, q in sizes.items()}}
    assert blocks_equal(mm.state.assignments, expected)
    assert states_equal(
        mm.state.machine_state,
        {
            0: N(
                {
                    MEM: T(7 * gb, 0, 7 * gb, 512 * mb, 7680 * mb),
                    HP1G: T(7 * gb, 0, 7 * gb, 0, 7 * gb),
                },
                [0],
                10,
            )
        },
    )
    # pod-scope request: max(init max (3Gi + 2Gi sidecar before it), app 1Gi + sidecars 6Gi) = 7Gi
    assert pod_requests(pod) == {MEM: 7 * gb, HP1G: 7 * gb}


def test_pod_hints_regenerate_from_first_container_with_blocks() -> None:
    ms = {0: N(STD, [0], 2), 1: N(STD, [1])}
    assignments = {"pod1": {"container1": [B([0], MEM, gb), B([0], HP1G, gb)]}}
    pod = guaranteed("pod1", container("container1", gb, gb), container("container2", gb, gb))
    mm = MemoryManager(machine([0, 1]), st(ms, assignments))
    # pod request is 2Gi: the blocks (1Gi) do not match -> no preference
    assert mm.pod_hints(pod) is None
    one = guaranteed("pod1", container("container1", gb, gb))
    assert _mat(mm.pod_hints(one)) == {MEM: [H(0, pref=True)], HP1G: [H(0, pref=True)]}


def test_guaranteed_container_without_memory_is_left_alone() -> None:
    mm = MemoryManager(machine([0]))
    c = Container("c", ContainerKind.APP, {"cpu": 1000}, {"cpu": 1000})
    pod = guaranteed("p", c)
    assert mm.container_hints(pod, c) is None
    assert mm.pod_hints(pod) is None
    before = mm.state.to_dict()
    mm.allocate(pod, c, TopologyHint(None, True))
    assert mm.state.to_dict() == before
