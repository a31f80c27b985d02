"""Property tests of the CPU manager on random small machines and states.

* ``GeneratedHints.materialize()`` equals a brute-force transcription of the kubelet's
  ``generateCPUTopologyHints`` (every mask, minAffinitySize by enumeration), order included;
* allocations are exact in size, disjoint across containers and from the shared pool, and
  the state stays valid (``validate_state``);
* an allocation lies inside the hint's NUMA nodes whenever those hold enough CPUs;
* releasing a pod restores the state exactly;
* the assignment algorithms return exactly ``n`` available CPUs or raise.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from numalign.engine.bitmask import ids_of, iterate_masks
from numalign.engine.hints import GeneratedHints, TopologyHint
from numalign.errors import AdmissionError
from numalign.machine.model import Cpu, Machine, NumaNode
from numalign.pods import ContainerKind, Pod
from numalign.resources.cpu import CpuManager, CpuState
from numalign.resources.cpu_assignment import (
    CpuAssignmentError,
    CpuSorting,
    CpuTopology,
    take_distributed,
    take_packed,
)
from test_cpu_fixtures import container, make_pod, with_kubelet

SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def machines(draw: st.DrawFn) -> Machine:
    """1-2 sockets; 1-3 NUMA nodes per socket (or 2 sockets sharing one node); SMT 1-2;
    shuffled CPU ids; sometimes a CPU-less NUMA node; uncore caches per NUMA node or none."""
    sockets = draw(st.integers(1, 2))
    shared_numa = sockets == 2 and draw(st.booleans())
    per_socket = 1 if shared_numa else draw(st.integers(1, 3))
    smt = draw(st.integers(1, 2))
    uncore_split = draw(st.sampled_from([0, 1, 2]))  # 0: unknown (socket), 1/2 caches per node
    layout: list[tuple[int, int, int | None]] = []  # (socket, numa, uncore) per core
    for s in range(sockets):
        for k in range(per_socket):
            numa = 0 if shared_numa else s * per_socket + k
            cores = draw(st.integers(1, 4))
            for i in range(cores):
                u = None if uncore_split == 0 else numa * 2 + (i % uncore_split)
                layout.append((s, numa, u))
    n_cpus = len(layout) * smt
    ids = draw(st.permutations(list(range(n_cpus))))
    cpus: list[Cpu] = []
    for core_index, (s, numa, u) in enumerate(layout):
        threads = sorted(ids[core_index * smt : (core_index + 1) * smt])
        for t in threads:
            cpus.append(Cpu(id=t, core=threads[0], socket=s, numa=numa, uncore_cache=u))
    numas = sorted({c.numa for c in cpus})
    if draw(st.booleans()):
        numas.append(max(numas) + 1)  # a CPU-less node (memory only)
    m = Machine(
        name="random",
        numa_nodes=tuple(NumaNode(id=n, memory=1 << 30) for n in numas),
        cpus=tuple(sorted(cpus, key=lambda c: c.id)),
    )
    opts: dict[str, str] = {}
    choice = draw(st.sampled_from(["", "full", "numa", "cores", "uncore", "socket"]))
    if choice == "full" and smt > 1:
        opts["full-pcpus-only"] = "true"
    elif choice == "numa":
        opts["distribute-cpus-across-numa"] = "true"
    elif choice == "cores":
        opts["distribute-cpus-across-cores"] = "true"
    elif choice == "uncore":
        opts["prefer-align-cpus-by-uncorecache"] = "true"
    elif choice == "socket" and sockets <= len({c.numa for c in cpus}):
        opts["align-by-socket"] = "true"
    return with_kubelet(
        m,
        cpu_manager_policy_options=opts,
        system_reserved={"cpu": draw(st.integers(100, min(2, n_cpus) * 1000))},
    )


def kubelet_hints(
    mgr: CpuManager, available: frozenset[int], reusable: frozenset[int], n: int
) -> list[TopologyHint]:
    """``generateCPUTopologyHints`` exactly as written upstream (every mask enumerated)."""
    t = mgr.topology
    min_affinity = len(t.numa_ids)
    masks: list[int] = []
    for mask in iterate_masks(t.numa_ids):
        nodes = ids_of(mask)
        if len(t.cpus_of_numas(nodes)) >= n and mask.bit_count() < min_affinity:
            min_affinity = mask.bit_count()
        matching = 0
        if any(t.details[c].numa not in nodes for c in sorted(reusable)):
            continue
        matching += len(reusable)
        matching += sum(1 for c in available if t.details[c].numa in nodes)
        if matching < n:
            continue
        masks.append(mask)
    out: list[TopologyHint] = []
    for mask in masks:
        preferred = False
        if mgr.options.align_by_socket:
            per_socket = t.num_numa // t.num_sockets
            if per_socket:
                min_sockets = -(-min_affinity // per_socket)
                preferred = len(t.sockets_of_numas(ids_of(mask))) == min_sockets
        if not preferred and mask.bit_count() == min_affinity:
            preferred = True
        out.append(TopologyHint(mask, preferred))
    return out


def _materialize(answer: object) -> list[TopologyHint]:
    if isinstance(answer, GeneratedHints):
        return answer.materialize()
    assert answer == []
    return []


@SETTINGS
@given(machines(), st.data())
def test_hints_equal_kubelet_enumeration(machine: Machine, data: st.DataObject) -> None:
    mgr = CpuManager(machine)
    all_cpus = sorted(mgr.topology.all_cpus)
    available = frozenset(data.draw(st.sets(st.sampled_from(all_cpus))))
    reusable = frozenset(data.draw(st.sets(st.sampled_from(all_cpus), max_size=3)))
    n = data.draw(st.integers(1, len(all_cpus) + 2))
    got = _materialize(mgr.hint_set(available, reusable, n))
    assert got == kubelet_hints(mgr, available, reusable, n)


def _pods(data: st.DataObject, count: int) -> list[Pod]:
    pods: list[Pod] = []
    for i in range(count):
        cons = []
        if data.draw(st.booleans()):
            kind = data.draw(st.sampled_from([ContainerKind.INIT, ContainerKind.SIDECAR]))
            cons.append(container("init", data.draw(st.integers(1, 3)) * 1000, kind=kind))
        for j in range(data.draw(st.integers(1, 2))):
            cons.append(container(f"app{j}", data.draw(st.sampled_from([500, 1000, 2000, 3000]))))
        pods.append(make_pod(f"pod{i}", *cons))
    return pods


def _check_invariants(mgr: CpuManager) -> None:
    st_ = mgr.state
    seen: set[int] = set()
    for uid, cs in st_.assignments.items():
        # within a pod, app containers may reuse a finished init container's CPUs
        pod_cpus: set[int] = set()
        for cpus in cs.values():
            pod_cpus |= cpus
        assert not (pod_cpus & seen), "two pods share an exclusive CPU"
        assert not (pod_cpus & st_.default_set), uid
        seen |= pod_cpus
    mgr.validate_state()


@SETTINGS
@given(machines(), st.data())
def test_allocations_disjoint_and_aligned_and_release_exact(
    machine: Machine, data: st.DataObject
) -> None:
    mgr = CpuManager(machine)
    for pod in _pods(data, data.draw(st.integers(1, 4))):
        snapshot = mgr.state.copy()
        snapshot.cpus_to_reuse.clear()  # kubelet drops other pods' reusable sets on admission
        admitted = True
        for c in pod.containers:
            answer = mgr.container_hints(pod, c)
            hint = TopologyHint(None, True)
            if answer is not None:
                hints = _materialize(answer["cpu"])
                if hints:
                    hint = data.draw(st.sampled_from(hints))
            before = mgr.state.copy()
            try:
                mgr.allocate(pod, c, hint)
            except AdmissionError:
                assert mgr.state == before  # refused without side effects
                admitted = False
                break
            got = mgr.state.cpuset(pod.uid, c.name)
            n = -1 if got is None else len(got)
            if got is not None:
                assert n * 1000 == c.requests["cpu"]
                if hint.affinity is not None:
                    nodes = ids_of(hint.affinity)
                    allocatable = (before.default_set - mgr.reserved) | before.cpus_to_reuse.get(
                        pod.uid, set()
                    )
                    local = allocatable & mgr.topology.cpus_of_numas(nodes)
                    if mgr.options.align_by_socket:
                        local = allocatable & mgr.topology.cpus_of_sockets(
                            mgr.topology.sockets_of_numas(nodes)
                        )
                    if len(local) >= n:
                        assert got <= local
            _check_invariants(mgr)
        if not admitted or data.draw(st.booleans()):
            mgr.release_pod(pod.uid)
            assert mgr.state.default_set == snapshot.default_set
            assert mgr.state.assignments == snapshot.assignments
            _check_invariants(mgr)


@SETTINGS
@given(machines(), st.data())
def test_take_returns_exactly_n_available(machine: Machine, data: st.DataObject) -> None:
    t = CpuTopology.from_machine(machine)
    all_cpus = sorted(t.all_cpus)
    available = frozenset(data.draw(st.sets(st.sampled_from(all_cpus))))
    n = data.draw(st.integers(0, len(all_cpus)))
    sorting = data.draw(st.sampled_from(list(CpuSorting)))
    for fn in ("packed", "packed-uncore", "distributed"):
        try:
            if fn == "distributed":
                group = data.draw(st.integers(1, 2))
                got = take_distributed(t, available, n, group, sorting)
            else:
                got = take_packed(t, available, n, sorting, fn == "packed-uncore")
        except CpuAssignmentError:
            assert n > len(available)
            continue
        assert len(got) == n and got <= available


def test_state_copy_is_deep() -> None:
    s = CpuState(
        default_set={1}, assignments={"p": {"c": frozenset({2})}}, cpus_to_reuse={"p": {2}}
    )
    c = s.copy()
    c.default_set.add(3)
    c.assignments["p"]["d"] = frozenset({4})
    c.cpus_to_reuse["p"].add(5)
    assert s == CpuState(
        default_set={1}, assignments={"p": {"c": frozenset({2})}}, cpus_to_reuse={"p": {2}}
    )
