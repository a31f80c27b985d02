"""The kubelet's memory manager (``memorymanager``), policies ``None`` and ``Static``.

Behaviour follows ``pkg/kubelet/cm/memorymanager/policy_static.go`` (spec section 4):

* only Guaranteed pods are handled; ``memory`` and every ``hugepages-<size>`` request count;
* hints: regenerated from existing blocks, else ``calculateHints`` - every NUMA mask whose
  allocatable memory covers the request, that respects the *group rule* (a node holding
  single-NUMA blocks never joins a group, a node of a group is only used again with exactly
  that group, and never alone) and whose free memory (plus the memory of this pod's init
  containers on exactly that mask) covers the request; preferred = popcount equal to the
  smallest mask whose *allocatable* memory covers the request;
* no mask at all -> an **empty** map, which the Topology Manager reads as "no preference";
  the later :meth:`MemoryManager.allocate` then fails with the kubelet's error, so the pod is
  rejected with ``UnexpectedAdmissionError`` (kubelet behaviour, reproduced on purpose);
* ``allocate``: default hint when the hint has no affinity, extension of a hint that does not
  cover the request, the group-rule check, then blocks on the hint's nodes filling the nodes'
  free memory in ascending id order; init-container memory is reused by later containers of
  the same pod exactly as the kubelet does (including the rewriting of earlier init
  containers' block sizes);
* ``release_container`` is the kubelet's ``RemoveContainer``.

A Guaranteed container always requests memory in Kubernetes (the QoS class needs a positive
memory limit), so the kubelet never sees a Guaranteed container without memory. numalign pods
may be built by hand: such a container is left alone (no hints, nothing allocated) rather
than failing with the kubelet's "failed to get the default NUMA affinity" for an empty
request.

Hint sets are :class:`~numalign.engine.hints.GeneratedHints`: the monotone part has as universe the
nodes without assignments (for those, every mask passes the group rule, and the capacity
checks are monotone); ``extra`` holds the allowed masks outside it - single nodes holding
single-NUMA blocks, existing groups, and masks that pass only thanks to reusable
init-container memory. ``materialize()`` equals the kubelet's list, order included.

Note on release: like the kubelet, releasing a multi-NUMA block frees reserved memory node by
node in ascending id order, so inside a live group the per-node split of ``free``/``reserved``
may differ from the split before the allocation; the sums over the group (the only thing the
kubelet compares, see :func:`machine_states_equivalent`) are exact, and a group whose
assignments all went away returns exactly to its initial state.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from numalign.engine.bitmask import ids_of, mask_of
from numalign.engine.hints import Demand, GeneratedHints, ProviderHints, ResourceHints, TopologyHint
from numalign.engine.merge_budget import Budget
from numalign.engine.merge_order import colex_best
from numalign.engine.merge_search import Family, joint_reach, min_size
from numalign.errors import InputError, StateError, UnexpectedAdmissionError
from numalign.inputs.quantity import MEMORY, hugepage_resource_name, is_memory_resource
from numalign.machine.model import Machine
from numalign.pods import Container, ContainerKind, Pod, QOSClass

__all__ = [
    "POLICY_NONE",
    "POLICY_STATIC",
    "Block",
    "MemoryManager",
    "MemoryState",
    "MemoryTable",
    "NodeMemoryState",
    "calculate_hints",
    "container_requests",
    "default_machine_state",
    "machine_states_equivalent",
    "new_memory_state",
    "pod_requests",
]

from numalign.resources.memory_state import (  # the state lives beside the decisions
    POLICY_NONE,
    POLICY_STATIC,
    Block,
    MemoryState,
    MemoryTable,
    NodeMemoryState,
)

# --------------------------------------------------------------------------------------------
# State
# --------------------------------------------------------------------------------------------


def machine_states_equivalent(
    a: Mapping[int, NodeMemoryState], b: Mapping[int, NodeMemoryState]
) -> bool:
    """kubelet ``areMachineStatesEqual``: per node total/systemReserved/allocatable, number of
    assignments and group; free and reserved compared as sums over each node's group."""
    if set(a) != set(b):
        return False
    for n, sa in a.items():
        sb = b[n]
        if sa.number_of_assignments != sb.number_of_assignments:
            return False
        if sorted(sa.cells) != sorted(sb.cells):
            return False
        if set(sa.memory_map) != set(sb.memory_map):
            return False
        for r, ta in sa.memory_map.items():
            tb = sb.memory_map[r]
            if (ta.total, ta.system_reserved, ta.allocatable) != (
                tb.total,
                tb.system_reserved,
                tb.allocatable,
            ):
                return False
            group = sa.cells
            try:
                fa = sum(a[c].memory_map[r].free for c in group)
                fb = sum(b[c].memory_map[r].free for c in group)
                ra = sum(a[c].memory_map[r].reserved for c in group)
                rb = sum(b[c].memory_map[r].reserved for c in group)
            except KeyError:
                return False
            if fa != fb or ra != rb:
                return False
    return True


def _system_reserved(machine: Machine) -> dict[int, dict[str, int]]:
    out: dict[int, dict[str, int]] = {}
    for i, rm in enumerate(machine.kubelet.reserved_memory):
        if rm.numa_node not in machine.node_by_id:
            raise InputError(
                f"reserved memory for NUMA node {rm.numa_node}, which the machine does not have",
                f"kubelet.reservedMemory[{i}].numaNode",
            )
        node = out.setdefault(rm.numa_node, {})
        for res, qty in rm.limits.items():
            if qty < 0:
                raise InputError(
                    f"negative quantity {qty}", f"kubelet.reservedMemory[{i}].limits.{res}"
                )
            node[res] = node.get(res, 0) + qty
    return out


def _check_policy(name: str) -> str:
    if name not in (POLICY_NONE, POLICY_STATIC):
        raise InputError(f'unknown policy: "{name}"', "kubelet.memoryManagerPolicy")
    return name


def default_machine_state(machine: Machine, check: bool = True) -> dict[int, NodeMemoryState]:
    """kubelet ``getDefaultMachineState``: per node, hugepages and regular memory minus the
    per-node ``reservedMemory``; regular allocatable also excludes the hugepages.

    With ``check`` a reservation larger than the memory is an InputError; without it the
    (negative) numbers are kept, so a state comparison just fails, as in the kubelet (where
    the uint64 arithmetic wraps around)."""
    reserved = _system_reserved(machine)
    sizes = sorted({s for n in machine.numa_nodes for s in n.hugepages})
    out: dict[int, NodeMemoryState] = {}
    for node in machine.numa_nodes:
        st = NodeMemoryState(0, {}, [node.id])
        node_res = reserved.get(node.id, {})
        hp_total = 0
        for size in sizes:
            name = hugepage_resource_name(size)
            total = node.hugepages.get(size, 0)
            sr = node_res.get(name, 0)
            if check and sr > total:
                raise InputError(
                    f"reserved {sr} bytes of {name} on NUMA node {node.id}, which has {total}",
                    "kubelet.reservedMemory",
                )
            st.memory_map[name] = MemoryTable(total, sr, total - sr, 0, total - sr)
            hp_total += total
        sr = node_res.get(MEMORY, 0)
        alloc = node.memory - sr - hp_total
        if check and alloc < 0:
            raise InputError(
                f"NUMA node {node.id}: reserved memory ({sr}) plus hugepages ({hp_total}) exceed "
                f"its memory ({node.memory})",
                "kubelet.reservedMemory",
            )
        st.memory_map[MEMORY] = MemoryTable(node.memory, sr, alloc, 0, alloc)
        out[node.id] = st
    return out


def new_memory_state(machine: Machine) -> MemoryState:
    """A fresh state for the machine's ``memoryManagerPolicy``.

    ``Static`` needs ``reservedMemory`` with some ``memory`` (the kubelet refuses to start
    otherwise: "[memorymanager] you should specify the system reserved memory"); ``None``
    keeps an empty machine state, as the kubelet's none policy does.
    """
    policy = _check_policy(machine.kubelet.memory_manager_policy)
    if policy == POLICY_NONE:
        return MemoryState(POLICY_NONE)
    reserved = _system_reserved(machine)
    if sum(r.get(MEMORY, 0) for r in reserved.values()) <= 0:
        raise InputError(
            "memory manager policy Static needs reservedMemory with some memory on at least one "
            "NUMA node (kubelet: [memorymanager] you should specify the system reserved memory)",
            "kubelet.reservedMemory",
        )
    return MemoryState(POLICY_STATIC, default_machine_state(machine))


# --------------------------------------------------------------------------------------------
# Requests
# --------------------------------------------------------------------------------------------


def _order(resources: Iterable[str]) -> list[str]:
    """Deterministic resource order (the kubelet iterates a Go map): memory, then hugepages."""
    return sorted(resources, key=lambda r: (r != MEMORY, r))


def container_requests(container: Container) -> dict[str, int]:
    """kubelet ``getRequestedResources``: memory and hugepages from ``requests``."""
    return {r: int(q) for r, q in container.requests.items() if is_memory_resource(r)}


def pod_requests(pod: Pod) -> dict[str, int]:
    """kubelet ``getPodRequestedResources``: init/sidecar max rule, per resource; only the
    resources that app containers request appear in the result (as in the kubelet)."""
    init_max: dict[str, int] = {}
    sidecars: dict[str, int] = {}
    for c in pod.init_containers:
        for r, q in container_requests(c).items():
            init_max.setdefault(r, 0)
            if c.kind is ContainerKind.SIDECAR:
                sidecars[r] = sidecars.get(r, 0) + q
            elif sidecars.get(r, 0) + q > init_max[r]:
                init_max[r] = sidecars.get(r, 0) + q
    apps: dict[str, int] = {}
    for c in pod.app_containers:
        for r, q in container_requests(c).items():
            apps[r] = apps.get(r, 0) + q
    out: dict[str, int] = {}
    for r, total in apps.items():
        out[r] = max(total + sidecars.get(r, 0), init_max.get(r, 0))
    return out


# --------------------------------------------------------------------------------------------
# The manager
# --------------------------------------------------------------------------------------------


class _MemoryError(Exception):
    """An Allocate failure with the kubelet's error text."""


def _min_cover_size(
    nodes: list[int], caps: Mapping[int, tuple[int, ...]], need: tuple[int, ...]
) -> int | None:
    """Smallest k such that some k nodes have, for every resource, a total >= need (None:
    not even all nodes do). The same search as the merge's (no mask is listed)."""
    if not nodes:
        return None
    demand = Demand.per_node(caps, need)
    gen = GeneratedHints(tuple(nodes), mask_of(nodes), demand.feasible, 1, demand=demand)
    return min_size(Family(gen), Budget())


class MemoryManager:
    """The kubelet memory manager as a numalign provider (``name = "memory"``).

    ``state`` defaults to :func:`new_memory_state`; the policy is the machine's
    ``kubelet.memory_manager_policy`` (``None`` or ``Static``).
    """

    name = MEMORY

    def __init__(self, machine: Machine, state: MemoryState | None = None) -> None:
        self.machine = machine
        self.policy = _check_policy(machine.kubelet.memory_manager_policy)
        self.state = state if state is not None else new_memory_state(machine)

    # -- kubelet Start -------------------------------------------------------------------

    def validate_state(self) -> None:
        """kubelet ``staticPolicy.Start`` / ``validateState``: an empty machine state is filled
        with the default; otherwise the state must match the machine plus the assignments."""
        if self.policy != POLICY_STATIC:
            return
        st = self.state
        if not st.machine_state:
            if st.assignments:
                raise StateError(
                    "[memorymanager] machine state can not be empty when it has memory assignments"
                )
            st.machine_state = default_machine_state(self.machine)
            return
        expected, _ = self._replayed()
        if not machine_states_equivalent(st.machine_state, expected):
            raise StateError(
                "[memorymanager] the expected machine state is different from the real one"
            )

    def _replayed(self) -> tuple[dict[int, NodeMemoryState], list[str]]:
        """The machine state the assignments imply on this machine (kubelet
        ``validateState``'s expectation), and the blocks that did not fit in it."""
        expected = default_machine_state(self.machine, check=False)
        short: list[str] = []
        for pod_uid, containers in self.state.assignments.items():
            for cname, blocks in containers.items():
                for b in blocks:
                    size = b.size
                    for nid in b.numa_affinity:
                        node = expected.get(nid)
                        if node is None:
                            raise StateError(
                                f"[memorymanager] (pod: {pod_uid}, container: {cname}) the memory "
                                "assignment uses the NUMA that does not exist"
                            )
                        node.number_of_assignments += 1
                        node.cells = list(b.numa_affinity)
                        table = node.memory_map.get(b.type)
                        if table is None:
                            raise StateError(
                                f"[memorymanager] (pod: {pod_uid}, container: {cname}) the memory "
                                "assignment uses memory resource that does not exist"
                            )
                        if size == 0 or table.free <= 0:
                            continue
                        take = min(size, table.free)
                        table.reserved += take
                        table.free -= take
                        size -= take
                    if size > 0:
                        short.append(f"pod {pod_uid} container {cname}: {b.type} on NUMA "
                                     f"{list(b.numa_affinity)} ({size} bytes do not fit)")
        return expected, short

    def adopt_blocks(self, pod_uid: str, container: str, blocks: list[Block]) -> list[str]:
        """Record ``blocks`` for a container and rebuild the tables (state moved from another
        machine); returns what does not fit, and then changes nothing."""
        if self.policy != POLICY_STATIC:
            return []
        before = self.state.assignments.get(pod_uid, {}).get(container)
        self.state.assignments.setdefault(pod_uid, {})[container] = list(blocks)
        try:
            short = self.rebuild_machine_state()
        except StateError as e:
            short = [e.message]
        if short:
            if before is None:
                del self.state.assignments[pod_uid][container]
                if not self.state.assignments[pod_uid]:
                    del self.state.assignments[pod_uid]
            else:
                self.state.assignments[pod_uid][container] = before
        return short

    def rebuild_machine_state(self) -> list[str]:
        """Adopt the machine state the assignments imply on *this* machine (its memory sizes
        may differ from the ones the state was written for); returns the blocks that no
        longer fit (then nothing changes)."""
        if self.policy != POLICY_STATIC or not self.state.machine_state:
            return []
        expected, short = self._replayed()
        if not short:
            self.state.machine_state = expected
        return short

    # -- hints ---------------------------------------------------------------------------

    def container_hints(self, pod: Pod, container: Container) -> ProviderHints:
        if self.policy != POLICY_STATIC or pod.qos is not QOSClass.GUARANTEED:
            return None
        requested = container_requests(container)
        blocks = self.state.blocks(pod.uid, container.name)
        if blocks is not None:
            return _regenerate(blocks, requested)
        if not requested:
            return None  # no memory requested: see the module docstring
        return self._calculate(pod.uid, requested)

    def pod_hints(self, pod: Pod) -> ProviderHints:
        if self.policy != POLICY_STATIC or pod.qos is not QOSClass.GUARANTEED:
            return None
        requested = pod_requests(pod)
        for c in pod.containers:
            blocks = self.state.blocks(pod.uid, c.name)
            if blocks is not None:
                return _regenerate(blocks, requested)
        if not requested:
            return None  # no memory requested: see the module docstring
        return self._calculate(pod.uid, requested)

    def hint_set(self, pod_uid: str, requested: Mapping[str, int]) -> GeneratedHints | None:
        """kubelet ``calculateHints`` as a rule; None when no mask passes."""
        return calculate_hints(self.state, pod_uid, requested)

    def _calculate(self, pod_uid: str, requested: Mapping[str, int]) -> ProviderHints:
        gen = self.hint_set(pod_uid, requested)
        if gen is None:
            # kubelet: an empty map, read by the Topology Manager as "no preference"
            return {}
        return dict.fromkeys(_order(requested), gen)

    # -- allocation ----------------------------------------------------------------------

    def allocate(self, pod: Pod, container: Container, hint: TopologyHint) -> None:
        """kubelet ``staticPolicy.Allocate``; raises UnexpectedAdmissionError, state untouched."""
        if self.policy != POLICY_STATIC or pod.qos is not QOSClass.GUARANTEED:
            return
        st = self.state
        existing = st.blocks(pod.uid, container.name)
        if existing is not None:
            _update_reusable(st, pod, container, existing)
            return
        if not container_requests(container):
            return  # no memory requested: see the module docstring
        work = st.copy()
        try:
            _allocate_into(work, pod, container, hint)
        except _MemoryError as e:
            raise UnexpectedAdmissionError(str(e)) from None
        st.machine_state = work.machine_state
        st.assignments = work.assignments
        st.reusable = work.reusable

    # -- release -------------------------------------------------------------------------

    def release_container(self, pod_uid: str, container_name: str) -> None:
        """kubelet ``RemoveContainer``."""
        st = self.state
        pod = st.assignments.get(pod_uid)
        if pod is None or container_name not in pod:
            return
        blocks = pod.pop(container_name)
        if not pod:
            del st.assignments[pod_uid]
        ms = st.machine_state
        for b in blocks:
            size = b.size
            for n in b.numa_affinity:
                node = ms.get(n)
                if node is None:
                    continue
                node.number_of_assignments -= 1
                if node.number_of_assignments == 0:
                    node.cells = [n]
                if size == 0:
                    continue
                t = node.memory_map.get(b.type)
                if t is None or t.reserved == 0:
                    continue
                if t.reserved < size:
                    size -= t.reserved
                    t.free += t.reserved
                    t.reserved = 0
                    continue
                t.free += size
                t.reserved -= size
                size = 0

    def release_pod(self, pod_uid: str) -> None:
        for cname in list(self.state.assignments.get(pod_uid, {})):
            self.release_container(pod_uid, cname)
        self.state.reusable.pop(pod_uid, None)


# --------------------------------------------------------------------------------------------
# helpers of the static policy
# --------------------------------------------------------------------------------------------


def calculate_hints(
    state: MemoryState, pod_uid: str, requested: Mapping[str, int]
) -> GeneratedHints | None:
    """kubelet ``calculateHints`` as a :class:`GeneratedHints` rule; None when no mask passes."""
    ms = state.machine_state
    nodes = sorted(ms)
    res = _order(requested)
    need = tuple(requested[r] for r in res)
    alloc = {n: tuple(ms[n].allocatable(r) for r in res) for n in nodes}
    free = {n: tuple(ms[n].free(r) for r in res) for n in nodes}
    reusable = state.reusable.get(pod_uid, {})
    dims = range(len(res))

    def sums(table: Mapping[int, tuple[int, ...]], mask: int) -> list[int]:
        acc = [0] * len(res)
        for n in ids_of(mask):
            row = table.get(n)
            if row is None:
                continue
            for d in dims:
                acc[d] += row[d]
        return acc

    def alloc_ok(mask: int) -> bool:
        a = sums(alloc, mask)
        return all(a[d] >= need[d] for d in dims)

    def free_ok(mask: int, with_reuse: bool) -> bool:
        f = sums(free, mask)
        reuse = reusable.get(mask, {}) if with_reuse else {}
        return all(f[d] + reuse.get(res[d], 0) >= need[d] for d in dims)

    def group_ok(mask: int) -> bool:
        bits = ids_of(mask)
        if len(bits) == 1:
            return len(ms[bits[0]].cells) <= 1
        for n in bits:
            st = ms[n]
            if st.number_of_assignments > 0 and (len(st.cells) == 1 or sorted(st.cells) != bits):
                return False
        return True

    def allowed(mask: int) -> bool:
        return alloc_ok(mask) and group_ok(mask) and free_ok(mask, True)

    universe = mask_of(n for n in nodes if ms[n].number_of_assignments == 0)
    # the monotone part as data: allocatable and free amounts per node and resource, and
    # nodes of a multi-node group (never usable alone)
    demand = Demand.per_node(
        {n: alloc[n] + free[n] for n in nodes if universe >> n & 1},
        need + need,
        lonely=mask_of(n for n in nodes if universe >> n & 1 and len(ms[n].cells) > 1),
    )

    def feasible(mask: int) -> bool:
        if mask & ~universe:
            return False
        return demand.feasible(mask)

    extra: set[int] = set()
    candidates: set[int] = set(reusable)
    for n in nodes:
        st = ms[n]
        if st.number_of_assignments > 0:
            if len(st.cells) <= 1:
                candidates.add(1 << n)
            else:
                candidates.add(mask_of(st.cells))
    valid_ids = mask_of(nodes)
    for m in candidates:
        if m == 0 or m & ~valid_ids:
            continue
        if not (m & ~universe == 0 and feasible(m)) and allowed(m):
            extra.add(m)

    min_size = _min_cover_size(nodes, alloc, need)
    if min_size is None:
        return None  # no mask passes the allocatable check: no hints at all
    gen = GeneratedHints(
        nodes=tuple(nodes),
        universe=universe,
        feasible=feasible,
        preferred_size=min_size,
        extra=frozenset(extra),
        demand=demand,
    )
    if gen.is_empty():
        return None
    return gen


def _allocate_into(st: MemoryState, pod: Pod, container: Container, hint: TopologyHint) -> None:
    requested = container_requests(container)
    ms = st.machine_state
    best_mask = hint.affinity
    best_pref = hint.preferred
    if best_mask is None:
        gen = calculate_hints(st, pod.uid, requested)
        if gen is None:
            raise _MemoryError(
                "[memorymanager] failed to get the default NUMA affinity, no NUMA nodes with "
                "enough memory is available"
            )
        m = _narrowest(gen, 0)
        assert m is not None
        pref = gen.preferred(m)
        if not pref and best_pref:
            raise _MemoryError("[memorymanager] failed to find the default preferred hint")
        best_mask, best_pref = m, pref
    if not _satisfies(ms, best_mask, requested):
        gen = calculate_hints(st, pod.uid, requested)
        ext = _narrowest(gen, best_mask) if gen is not None else None
        if ext is None or gen is None:
            raise _MemoryError(
                "[memorymanager] failed to find NUMA nodes to extend the current topology hint"
            )
        pref = gen.preferred(ext)
        if not pref and best_pref:
            raise _MemoryError("[memorymanager] failed to find the extended preferred hint")
        best_mask, best_pref = ext, pref
    if _violates(ms, best_mask):
        raise _MemoryError("[memorymanager] preferred hint violates NUMA node allocation")
    bits = ids_of(best_mask)
    for n in bits:
        if n not in ms:
            raise _MemoryError(f"[memorymanager] NUMA node {n} is not in the machine state")
    blocks: list[Block] = []
    reuse = st.reusable.get(pod.uid, {}).get(best_mask, {})
    for r in _order(requested):
        size = requested[r]
        blocks.append(Block(tuple(bits), r, size))
        size = max(0, size - reuse.get(r, 0))
        _reserve(ms, bits, r, size)
    _update_reusable(st, pod, container, blocks)
    st.assignments.setdefault(pod.uid, {})[container.name] = blocks
    _shrink_init_blocks(st, pod, container, blocks)


def _regenerate(blocks: list[Block], requested: Mapping[str, int]) -> ProviderHints:
    """kubelet ``regenerateHints``; None (no preference) when the blocks do not match."""
    hints: dict[str, list[TopologyHint]] = {r: [] for r in _order(requested)}
    if len(blocks) != len(requested):
        return None
    for b in blocks:
        if b.type not in requested or b.size != requested[b.type]:
            return None
        hints[b.type].append(TopologyHint(mask_of(b.numa_affinity), True))
    out: dict[str, ResourceHints] = dict(hints)
    return out


def _narrowest(gen: GeneratedHints, within: int) -> int | None:
    """kubelet ``findBestHint`` over the feasible masks containing ``within`` (0 = all).

    All feasible masks have at least ``preferred_size`` nodes and the preferred ones exactly
    that many, so the best hint is the narrowest feasible superset of ``within``: the
    narrowest extra mask holding it, or from the monotone part the smallest size ``k`` that
    a superset reaches (binary search) and the smallest integer among those of size ``k``
    (:func:`numalign.engine.merge_order.colex_best`) - no mask is listed.
    """
    found = min(
        (m for m in gen.extra if m & within == within), key=lambda m: (m.bit_count(), m), default=None
    )
    u = gen.universe
    if within & ~u or not u or not gen.feasible(u):
        return found
    family = Family(gen)
    budget = Budget()
    base = within.bit_count()

    def reaches(inc: int, allowed: int, k: int) -> bool:
        inc |= within
        if allowed & within != within or allowed.bit_count() < k:
            return False
        return joint_reach([family], inc, allowed & ~inc, k - inc.bit_count(), budget)

    lo, hi = max(1, base), u.bit_count()
    if found is not None:
        hi = min(hi, found.bit_count())
        if not reaches(0, u, hi):
            return found
    while lo < hi:
        mid = (lo + hi) // 2
        if reaches(0, u, mid):
            hi = mid
        else:
            lo = mid + 1
    mono = colex_best(u, lo, lambda inc, allowed: reaches(inc, allowed, lo))
    if found is None or (mono.bit_count(), mono) < (found.bit_count(), found):
        return mono
    return found


def _satisfies(ms: Mapping[int, NodeMemoryState], mask: int, requested: Mapping[str, int]) -> bool:
    """kubelet ``isAffinitySatisfyRequest`` (free memory only, no reuse)."""
    for r, q in requested.items():
        total = sum(ms[n].free(r) for n in ids_of(mask) if n in ms)
        if total < q:
            return False
    return True


def _violates(ms: Mapping[int, NodeMemoryState], mask: int) -> bool:
    """kubelet ``isAffinityViolatingNUMAAllocations``."""
    bits = ids_of(mask)
    if len(bits) == 1:
        return False
    for n in bits:
        st = ms.get(n)
        if st is None or st.number_of_assignments == 0:
            continue
        if len(st.cells) == 1 or sorted(st.cells) != bits:
            return True
    return False


def _reserve(ms: dict[int, NodeMemoryState], bits: list[int], resource: str, size: int) -> None:
    """kubelet ``updateMachineState``."""
    for n in bits:
        node = ms[n]
        node.number_of_assignments += 1
        node.cells = list(bits)
        if size == 0:
            continue
        t = node.memory_map.get(resource)
        if t is None or t.free <= 0:
            continue
        if t.free >= size:
            t.reserved += size
            t.free -= size
            size = 0
            continue
        size -= t.free
        t.reserved += t.free
        t.free = 0


def _is_regular_init(pod: Pod, container: Container) -> bool:
    for c in pod.init_containers:
        if c.name == container.name:
            return c.kind is ContainerKind.INIT
    return False


def _update_reusable(st: MemoryState, pod: Pod, container: Container, blocks: list[Block]) -> None:
    """kubelet ``updatePodReusableMemory``."""
    for uid in list(st.reusable):
        if uid != pod.uid:
            del st.reusable[uid]
    if _is_regular_init(pod, container):
        per_pod = st.reusable.setdefault(pod.uid, {})
        for b in blocks:
            per_mask = per_pod.setdefault(mask_of(b.numa_affinity), {})
            if b.size > per_mask.get(b.type, 0):
                per_mask[b.type] = b.size
        return
    app_pod = st.reusable.get(pod.uid)
    if app_pod is None:
        return
    for b in blocks:
        app_mask = app_pod.get(mask_of(b.numa_affinity))
        if app_mask is None:
            continue
        have = app_mask.get(b.type, 0)
        if have != 0:
            app_mask[b.type] = 0 if b.size >= have else have - b.size


def _shrink_init_blocks(
    st: MemoryState, pod: Pod, container: Container, blocks: list[Block]
) -> None:
    """kubelet ``updateInitContainersMemoryBlocks``: earlier regular init containers' blocks
    on the same affinity shrink by what this container reused."""
    pod_blocks = st.assignments.get(pod.uid, {})
    for cb in blocks:
        size = cb.size
        for init in pod.init_containers:
            if init.name == container.name or size == 0:
                break
            if init.kind is ContainerKind.SIDECAR:
                continue
            ib = pod_blocks.get(init.name)
            if not ib:
                continue
            new: list[Block] = []
            for b in ib:
                if (
                    b.size == 0
                    or b.type != cb.type
                    or mask_of(b.numa_affinity) != mask_of(cb.numa_affinity)
                ):
                    new.append(b)
                    continue
                if b.size > size:
                    new.append(Block(b.numa_affinity, b.type, b.size - size))
                    size = 0
                else:
                    size -= b.size
                    new.append(Block(b.numa_affinity, b.type, 0))
            pod_blocks[init.name] = new
