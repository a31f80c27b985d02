"""Property tests of the memory manager: hint rule == kubelet enumeration, release, alignment."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from numalign.engine.bitmask import ids_of, iterate_masks, mask_of
from numalign.engine.hints import GeneratedHints, TopologyHint
from numalign.errors import AdmissionError
from numalign.machine.model import KubeletConfig, Machine, NumaNode, ReservedMemory
from numalign.pods import Container, ContainerKind, Pod, QOSClass
from numalign.resources.memory import (
    MemoryManager,
    MemoryState,
    MemoryTable,
    NodeMemoryState,
    calculate_hints,
    machine_states_equivalent,
    new_memory_state,
)

U = 1 << 28  # 256Mi unit
MEM, HP = "memory", "hugepages-2Mi"
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def kubelet_calculate_hints(
    state: MemoryState, pod_uid: str, requested: dict[str, int]
) -> list[tuple[int, bool]]:
    """Straight transcription of the kubelet's calculateHints loop (the reference)."""
    ms = state.machine_state
    nodes = sorted(ms)
    min_size = len(nodes)
    reusable = state.reusable.get(pod_uid, {})
    out: list[int] = []
    for mask in iterate_masks(nodes):
        bits = ids_of(mask)
        single = len(bits) == 1
        free = {r: sum(ms[n].free(r) for n in bits) for r in requested}
        alloc = {r: sum(ms[n].allocatable(r) for n in bits) for r in requested}
        if any(alloc[r] < q for r, q in requested.items()):
            continue
        min_size = min(min_size, len(bits))
        if single and len(ms[bits[0]].cells) > 1:
            continue
        bad = False
        for n in bits:
            in_use = not single and ms[n].number_of_assignments > 0
            if in_use and (len(ms[n].cells) == 1 or sorted(ms[n].cells) != bits):
                bad = True
                break
        if bad:
            continue
        if any(free[r] + reusable.get(mask, {}).get(r, 0) < q for r, q in requested.items()):
            continue
        out.append(mask)
    return [(m, m.bit_count() == min_size) for m in out]


@st.composite
def memory_states(draw: Any) -> tuple[MemoryState, dict[str, int]]:
    n = draw(st.integers(1, 5))
    nodes = draw(st.lists(st.integers(0, 7), min_size=n, max_size=n, unique=True))
    nodes.sort()
    remaining = list(nodes)
    cells: dict[int, list[int]] = {}
    counts: dict[int, int] = {}
    while remaining:
        kind = draw(st.sampled_from(["free", "single", "group"]))
        if kind == "group" and len(remaining) >= 2:
            size = draw(st.integers(2, len(remaining)))
            group = sorted(draw(st.permutations(remaining))[:size])
            for g in group:
                cells[g] = group
                counts[g] = draw(st.integers(1, 3))
                remaining.remove(g)
        else:
            g = remaining.pop(0)
            cells[g] = [g]
            counts[g] = draw(st.integers(1, 3)) if kind == "single" else 0
    ms: dict[int, NodeMemoryState] = {}
    for g in nodes:
        tables = {}
        for r in (MEM, HP):
            alloc = draw(st.integers(0, 8)) * U
            free = draw(st.integers(0, alloc // U)) * U if counts[g] else alloc
            tables[r] = MemoryTable(alloc + U, U, alloc, alloc - free, free)
        ms[g] = NodeMemoryState(counts[g], tables, cells[g])
    reusable: dict[int, dict[str, int]] = {}
    for _ in range(draw(st.integers(0, 2))):
        sub = draw(st.lists(st.sampled_from(nodes), min_size=1, unique=True))
        reusable[mask_of(sub)] = {MEM: draw(st.integers(0, 4)) * U, HP: draw(st.integers(0, 4)) * U}
    requested = {MEM: draw(st.integers(0, 12)) * U}
    if draw(st.booleans()):
        requested[HP] = draw(st.integers(0, 12)) * U
    state = MemoryState("Static", ms, {}, {"pod": reusable} if reusable else {})
    return state, requested


@SETTINGS
@given(memory_states())
def test_generated_hints_equal_kubelet_enumeration(
    case: tuple[MemoryState, dict[str, int]],
) -> None:
    state, requested = case
    expected = kubelet_calculate_hints(state, "pod", requested)
    gen = calculate_hints(state, "pod", requested)
    if not expected:
        assert gen is None
        return
    assert gen is not None
    assert [(h.affinity, h.preferred) for h in gen.materialize()] == expected
    # monotone part really is monotone inside its universe
    for m in iterate_masks(ids_of(gen.universe)):
        if gen.feasible(m):
            for extra_node in ids_of(gen.universe & ~m):
                assert gen.feasible(m | 1 << extra_node)


def machine(n: int, mem: int = 8 * U, hp: int = 4 * U) -> Machine:
    return Machine(
        "m",
        tuple(NumaNode(i, mem + hp + U, {1 << 21: hp}) for i in range(n)),
        (),
        kubelet=KubeletConfig(
            memory_manager_policy="Static",
            reserved_memory=tuple(ReservedMemory(i, {MEM: U}) for i in range(n)),
        ),
    )


def gpod(uid: str, sizes: list[tuple[str, int, int]]) -> Pod:
    cs = []
    for name, mem, hp in sizes:
        kind = ContainerKind.INIT if name.startswith("init") else ContainerKind.APP
        req = {"cpu": 1000, MEM: mem * U}
        if hp:
            req[HP] = hp * U
        cs.append(Container(name, kind, req, req))
    return Pod("ns", uid, uid, QOSClass.GUARANTEED, tuple(cs))


pods_strategy = st.lists(
    st.lists(
        st.tuples(
            st.sampled_from(["init1", "init2", "app1", "app2"]),
            st.integers(1, 12),
            st.integers(0, 5),
        ),
        min_size=1,
        max_size=4,
        unique_by=lambda t: t[0],
    ),
    min_size=1,
    max_size=6,
)


def admit(mm: MemoryManager, pod: Pod, pick: int) -> bool:
    """Container scope: hint = the pick-th hint of the memory list (or None)."""
    ordered = sorted(pod.containers, key=lambda c: not c.is_init)
    for c in ordered:
        hints = mm.container_hints(pod, c)
        hint = TopologyHint(None, True)
        if hints:
            lst = hints[MEM]
            assert lst is not None
            mat = lst.materialize() if isinstance(lst, GeneratedHints) else list(lst)
            if mat:
                hint = mat[pick % len(mat)]
        try:
            mm.allocate(pod, c, hint)
        except AdmissionError:
            return False
    return True


@SETTINGS
@given(st.integers(1, 4), pods_strategy, st.integers(0, 50), st.randoms(use_true_random=False))
def test_release_all_restores_initial_state(n: int, pods: Any, pick: int, rnd: Any) -> None:
    m = machine(n)
    mm = MemoryManager(m)
    initial = mm.state.to_dict()
    admitted = []
    for i, sizes in enumerate(pods):
        p = gpod(f"p{i}", sorted(sizes, key=lambda t: not t[0].startswith("init")))
        before = mm.state.copy()
        ok = admit(mm, p, pick + i)
        if ok:
            admitted.append(p.uid)
            # the state always matches the kubelet's own validation
            MemoryManager(m, MemoryState.from_dict(mm.state.to_dict())).validate_state()
        else:
            # roll back like the kubelet's stale-state cleanup would
            mm.release_pod(p.uid)
            assert machine_states_equivalent(mm.state.machine_state, before.machine_state)
    # releasing every admitted pod, in any order, gives back the initial state exactly
    rnd.shuffle(admitted)
    for uid in admitted:
        mm.release_pod(uid)
    assert mm.state.to_dict() == initial


@SETTINGS
@given(st.integers(1, 4), st.integers(1, 12), st.integers(0, 5), st.integers(0, 50))
def test_allocation_uses_exactly_the_hint_mask(n: int, mem: int, hp: int, pick: int) -> None:
    m = machine(n)
    mm = MemoryManager(m)
    p = gpod("p", [("app1", mem, hp)])
    c = p.containers[0]
    hints = mm.container_hints(p, c)
    if not hints:
        return
    lst = hints[MEM]
    assert isinstance(lst, GeneratedHints)
    mat = lst.materialize()
    hint = mat[pick % len(mat)]
    before = mm.state.to_dict()
    mm.allocate(p, c, hint)
    blocks = mm.state.blocks("p", "app1")
    assert blocks is not None
    assert {mask_of(b.numa_affinity) for b in blocks} == {hint.affinity}
    mm.release_pod("p")
    assert mm.state.to_dict() == before


def test_sixty_four_nodes_fast() -> None:
    m = machine(64)
    mm = MemoryManager(m)
    state = new_memory_state(m)
    mm = MemoryManager(m, state)
    p = gpod("p", [("app1", 20, 2)])  # needs 3 nodes of 8 units
    hints = mm.container_hints(p, p.containers[0])
    assert hints
    gen = hints[MEM]
    assert isinstance(gen, GeneratedHints)
    assert gen.preferred_size == 3
    pm = gen.preferred_masks()
    assert pm is not None
    assert next(pm) == 0b111
    mm.allocate(p, p.containers[0], TopologyHint(None, True))
    blocks = mm.state.blocks("p", "app1")
    assert blocks is not None and blocks[0].numa_affinity == (0, 1, 2)
    # the group {0,1,2} is now only usable as a whole
    p2 = gpod("q", [("app1", 1, 0)])
    gen2 = mm.container_hints(p2, p2.containers[0])[MEM]  # type: ignore[index]
    assert isinstance(gen2, GeneratedHints)
    assert gen2.contains(0b111) and not gen2.contains(0b1) and not gen2.contains(0b1001)
    assert gen2.contains(0b1000)
