"""The kubelet's CPU manager (``cpumanager``), policies ``none`` and ``static``.

Behaviour follows ``pkg/kubelet/cm/cpumanager/policy_static.go`` and ``policy_options.go``
(``spec/kubelet.md`` section 3):

* **who**: a container gets exclusive CPUs iff its pod is Guaranteed and its cpu request is
  a whole number of CPUs (:func:`numalign.pods.guaranteed_cpus`); everybody else shares the
  *default set* and the provider answers ``None`` ("no preference");
* **reserved CPUs**: ``kubelet.reserved_system_cpus`` when given, else the
  ``ceil((systemReserved.cpu + kubeReserved.cpu) / 1000)`` CPUs that the allocation
  algorithm picks on an empty machine; never handed out exclusively (with
  ``strict-cpu-reservation`` not even part of the shared pool);
* **hints** (:meth:`CpuManager.container_hints`, :meth:`CpuManager.pod_hints`): every NUMA
  mask holding every reusable CPU (init-container CPUs of the pod) and enough available CPUs;
  preferred = the mask is as narrow as the narrowest mask that could hold the request on an
  *empty* machine (or, with ``align-by-socket``, spans the minimal number of sockets). They
  are returned as a :class:`~numalign.engine.hints.GeneratedHints` so no 2^N list is built;
* **allocation** (:meth:`CpuManager.allocate`): ``full-pcpus-only`` SMT checks, then CPUs of
  the hint's NUMA nodes first (widened to whole sockets with ``align-by-socket``) and the rest
  from anywhere, with the algorithms of :mod:`numalign.resources.cpu_assignment`; an init
  container's CPUs are reusable by the later containers of the same pod (never a sidecar's);
* **release**: :meth:`CpuManager.release_container` is the kubelet's ``RemoveContainer``
  (CPUs go back to the default set, minus CPUs still used by siblings).

Not modelled: the kubelet's periodic reconcile loop, stale-state cleanup of pods that are no
longer active, the pod-level-resources "bubble" (``PodLevelResourceManagers``, alpha) and the
in-place resize of exclusive CPUs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from numalign.engine.bitmask import ids_of, mask_of
from numalign.engine.hints import Demand, GeneratedHints, ProviderHints, TopologyHint
from numalign.engine.policies import OptionLevels
from numalign.errors import (
    InputError,
    SMTAlignmentError,
    StateError,
    UnexpectedAdmissionError,
)
from numalign.inputs import goparse
from numalign.inputs.cpulist import format_cpulist
from numalign.inputs.quantity import CPU
from numalign.machine.model import Machine
from numalign.pods import Container, ContainerKind, Pod, guaranteed_cpus, pod_guaranteed_cpus
from numalign.record import Record, set_field
from numalign.resources.cpu_assignment import (
    CpuAssignmentError,
    CpuTopology,
    take_by_topology,
)

__all__ = [
    "ALPHA_OPTIONS",
    "BETA_OPTIONS",
    "POLICY_NONE",
    "POLICY_STATIC",
    "STABLE_OPTIONS",
    "CpuManager",
    "CpuState",
    "StaticPolicyOptions",
    "min_affinity_size",
    "new_cpu_state",
    "parse_static_policy_options",
    "reserved_cpus",
]

from numalign.resources.cpu_state import POLICY_NONE, POLICY_STATIC, CpuState
from numalign.resources.sharing import check_sharing

FULL_PCPUS_ONLY = "full-pcpus-only"
DISTRIBUTE_CPUS_ACROSS_NUMA = "distribute-cpus-across-numa"
ALIGN_BY_SOCKET = "align-by-socket"
DISTRIBUTE_CPUS_ACROSS_CORES = "distribute-cpus-across-cores"
STRICT_CPU_RESERVATION = "strict-cpu-reservation"
PREFER_ALIGN_CPUS_BY_UNCORECACHE = "prefer-align-cpus-by-uncorecache"

#: Option maturity as in the newest upstream ``policy_options.go``.
ALPHA_OPTIONS = frozenset({ALIGN_BY_SOCKET, DISTRIBUTE_CPUS_ACROSS_CORES})
BETA_OPTIONS = frozenset(
    {STRICT_CPU_RESERVATION, DISTRIBUTE_CPUS_ACROSS_NUMA, PREFER_ALIGN_CPUS_BY_UNCORECACHE}
)
STABLE_OPTIONS = frozenset({FULL_PCPUS_ONLY})

ALPHA_GATE = "CPUManagerPolicyAlphaOptions"  # default off
BETA_GATE = "CPUManagerPolicyBetaOptions"  # default on
#: the newest release's sets; a kubelet release passes its own (``modes/kubelet/releases.py``)
NEWEST_LEVELS = OptionLevels(ALPHA_OPTIONS, BETA_OPTIONS, STABLE_OPTIONS, "CPU Manager Policy",
                             ALPHA_GATE, BETA_GATE)
#: every option any modelled release knows, with both gates on: what a manager parses after the
#: node's release checked names and gates at start-up (``node/rules.py``)
_STARTED = {ALPHA_GATE: True, BETA_GATE: True}


# --------------------------------------------------------------------------------------------
# Options
# --------------------------------------------------------------------------------------------


class StaticPolicyOptions(Record, frozen=True):
    """Parsed ``cpuManagerPolicyOptions`` (kubelet ``StaticPolicyOptions``)."""

    __slots__ = (
        "full_pcpus_only",
        "distribute_cpus_across_numa",
        "align_by_socket",
        "distribute_cpus_across_cores",
        "strict_cpu_reservation",
        "prefer_align_cpus_by_uncorecache",
    )
    full_pcpus_only: bool
    distribute_cpus_across_numa: bool
    align_by_socket: bool
    distribute_cpus_across_cores: bool
    strict_cpu_reservation: bool
    prefer_align_cpus_by_uncorecache: bool

    def __init__(
        self,
        full_pcpus_only: bool = False,
        distribute_cpus_across_numa: bool = False,
        align_by_socket: bool = False,
        distribute_cpus_across_cores: bool = False,
        strict_cpu_reservation: bool = False,
        prefer_align_cpus_by_uncorecache: bool = False,
    ) -> None:
        set_field(self, "full_pcpus_only", full_pcpus_only)
        set_field(self, "distribute_cpus_across_numa", distribute_cpus_across_numa)
        set_field(self, "align_by_socket", align_by_socket)
        set_field(self, "distribute_cpus_across_cores", distribute_cpus_across_cores)
        set_field(self, "strict_cpu_reservation", strict_cpu_reservation)
        set_field(self, "prefer_align_cpus_by_uncorecache", prefer_align_cpus_by_uncorecache)


_FIELDS = {
    FULL_PCPUS_ONLY: "full_pcpus_only",
    DISTRIBUTE_CPUS_ACROSS_NUMA: "distribute_cpus_across_numa",
    ALIGN_BY_SOCKET: "align_by_socket",
    DISTRIBUTE_CPUS_ACROSS_CORES: "distribute_cpus_across_cores",
    STRICT_CPU_RESERVATION: "strict_cpu_reservation",
    PREFER_ALIGN_CPUS_BY_UNCORECACHE: "prefer_align_cpus_by_uncorecache",
}

_FIELD = "kubelet.cpuManagerPolicyOptions"


def parse_static_policy_options(
    options: Mapping[str, str],
    feature_gates: Mapping[str, bool] | None = None,
    levels: OptionLevels | None = None,
) -> StaticPolicyOptions:
    """kubelet ``NewStaticPolicyOptions``: names, feature gates, values, incompatible pairs;
    ``levels``: the kubelet release's option sets (default the newest).

    Options are checked in sorted name order (the kubelet walks a Go map, in random order;
    only which error is reported first can differ).
    """
    gates = {ALPHA_GATE: False, BETA_GATE: True, **(feature_gates or {})}
    values: dict[str, bool] = {}
    for name in sorted(options):
        try:
            (levels or NEWEST_LEVELS).check(name, gates)
        except InputError as e:
            raise InputError(e.problem, _FIELD) from None
        raw = options[name]
        try:
            values[_FIELDS[name]] = goparse.parse_bool(str(raw))
        except goparse.GoSyntaxError as e:
            raise InputError(f'bad value for option "{name}": {e}', _FIELD) from None
    opts = StaticPolicyOptions(**values)

    def both(a: str, b: str) -> InputError:
        return InputError(
            f"static policy options {a} and {b} can not be used at the same time", _FIELD
        )

    if opts.full_pcpus_only and opts.distribute_cpus_across_cores:
        raise both(FULL_PCPUS_ONLY, DISTRIBUTE_CPUS_ACROSS_CORES)
    if opts.distribute_cpus_across_numa and opts.distribute_cpus_across_cores:
        raise both(DISTRIBUTE_CPUS_ACROSS_NUMA, DISTRIBUTE_CPUS_ACROSS_CORES)
    if opts.prefer_align_cpus_by_uncorecache and opts.distribute_cpus_across_cores:
        raise both(PREFER_ALIGN_CPUS_BY_UNCORECACHE, DISTRIBUTE_CPUS_ACROSS_CORES)
    if opts.prefer_align_cpus_by_uncorecache and opts.distribute_cpus_across_numa:
        raise both(PREFER_ALIGN_CPUS_BY_UNCORECACHE, DISTRIBUTE_CPUS_ACROSS_NUMA)
    return opts


def _validate_options(
    opts: StaticPolicyOptions, topo: CpuTopology, topology_manager_policy: str
) -> None:
    """kubelet ``ValidateStaticPolicyOptions`` (messages verbatim, typo included)."""
    if opts.align_by_socket:
        if topology_manager_policy == "single-numa-node":
            raise InputError(
                "Topolgy manager single-numa-node policy is incompatible with CPUManager "
                f"{ALIGN_BY_SOCKET} policy option",
                _FIELD,
            )
        if topo.num_sockets > topo.num_numa:
            raise InputError(
                "Align by socket is not compatible with hardware where number of sockets are "
                "more than number of NUMA",
                _FIELD,
            )


def _go_map(options: Mapping[str, str]) -> str:
    return "map[" + " ".join(f"{k}:{options[k]}" for k in sorted(options)) + "]"


def _policy_name(machine: Machine) -> str:
    name = machine.kubelet.cpu_manager_policy
    if name not in (POLICY_NONE, POLICY_STATIC):
        raise InputError(f'unknown policy: "{name}"', "kubelet.cpuManagerPolicy")
    if name == POLICY_NONE and machine.kubelet.cpu_manager_policy_options:
        raise InputError(
            "None policy: received unsupported options="
            + _go_map(machine.kubelet.cpu_manager_policy_options),
            _FIELD,
        )
    return name


def _options_of(machine: Machine, topo: CpuTopology) -> StaticPolicyOptions:
    cfg = machine.kubelet
    # names and gates were checked for the node's kubelet release when its rules were resolved
    opts = parse_static_policy_options(cfg.cpu_manager_policy_options, _STARTED)
    _validate_options(opts, topo, cfg.topology_manager_policy)
    return opts


def _take(
    topo: CpuTopology, opts: StaticPolicyOptions, available: Iterable[int], n: int
) -> frozenset[int]:
    return take_by_topology(
        topo,
        available,
        n,
        full_pcpus_only=opts.full_pcpus_only,
        distribute_across_numa=opts.distribute_cpus_across_numa,
        distribute_across_cores=opts.distribute_cpus_across_cores,
        prefer_uncore=opts.prefer_align_cpus_by_uncorecache,
    )


def reserved_cpus(
    machine: Machine,
    topo: CpuTopology | None = None,
    opts: StaticPolicyOptions | None = None,
) -> frozenset[int]:
    """The static policy's reserved CPUs (kubelet container manager + ``NewStaticPolicy``).

    ``kubelet.reserved_system_cpus`` when non-empty; else ``takeByTopology`` of
    ``ceil((systemReserved.cpu + kubeReserved.cpu) / 1000)`` CPUs on the empty machine. A zero
    reservation is the kubelet's startup error, raised as :class:`InputError`.
    """
    topo = topo if topo is not None else CpuTopology.from_machine(machine)
    opts = opts if opts is not None else _options_of(machine, topo)
    cfg = machine.kubelet
    explicit = cfg.reserved_system_cpus
    if explicit:
        unknown = set(explicit) - topo.all_cpus
        if unknown:
            raise InputError(
                f"reserved CPUs {format_cpulist(unknown)} are not online CPUs of the machine",
                "kubelet.reservedSystemCPUs",
            )
        return frozenset(explicit)
    millis = int(cfg.system_reserved.get(CPU, 0)) + int(cfg.kube_reserved.get(CPU, 0))
    if millis <= 0:
        raise InputError(
            "[cpumanager] the static policy requires systemreserved.cpu + kubereserved.cpu "
            "to be greater than zero",
            "kubelet",
        )
    num = -(-millis // 1000)
    try:
        reserved = _take(topo, opts, topo.all_cpus, num)
    except CpuAssignmentError:
        reserved = frozenset()
    if len(reserved) != num:
        raise InputError(
            "[cpumanager] unable to reserve the required amount of CPUs (size of "
            f"{format_cpulist(reserved)} did not equal {num})",
            "kubelet",
        )
    return reserved


# --------------------------------------------------------------------------------------------
# State
# --------------------------------------------------------------------------------------------


def new_cpu_state(machine: Machine, options: StaticPolicyOptions | None = None) -> CpuState:
    """The state of an empty node (kubelet ``Start`` on an empty checkpoint).

    Static policy: every online CPU is in the default set, minus the reserved CPUs with
    ``strict-cpu-reservation``. Policy ``none``: the default set is empty, as the kubelet's
    checkpoint records it.
    """
    name = _policy_name(machine)
    if name == POLICY_NONE:
        return CpuState(policy_name=POLICY_NONE)
    topo = CpuTopology.from_machine(machine)
    opts = options if options is not None else _options_of(machine, topo)
    default = set(topo.all_cpus)
    if opts.strict_cpu_reservation:
        default -= reserved_cpus(machine, topo, opts)
    return CpuState(default_set=default, policy_name=POLICY_STATIC)


# --------------------------------------------------------------------------------------------
# Hints
# --------------------------------------------------------------------------------------------


def min_affinity_size(capacities: Iterable[int], n: int, num_nodes: int) -> int:
    """The kubelet's ``minAffinitySize`` without enumerating masks.

    The kubelet starts from the number of NUMA nodes and lowers it to the popcount of every
    mask whose *total* CPUs (empty machine) reach ``n``. Claim: that is the smallest ``k``
    whose ``k`` largest nodes hold ``n`` CPUs (or the node count when no ``k`` does).
    Proof: a ``k``-mask holding ``n`` exists iff the best ``k``-mask does, and the best
    ``k``-mask (maximal total) is the ``k`` largest nodes; the totals of the best ``k``-masks
    grow with ``k``, so the smallest qualifying ``k`` is the minimum the kubelet finds. If
    even all nodes together hold fewer than ``n`` CPUs no mask qualifies and the kubelet keeps
    its initial value, the node count.
    """
    total = 0
    for k, cap in enumerate(sorted(capacities, reverse=True), start=1):
        total += cap
        if total >= n:
            return min(k, num_nodes)
    return num_nodes


# --------------------------------------------------------------------------------------------
# The provider
# --------------------------------------------------------------------------------------------


class CpuManager:
    """The kubelet CPU manager as a numalign provider (``name = "cpu"``).

    The policy (``none`` or ``static``) and its options come from ``machine.kubelet``;
    configuration errors raise :class:`InputError` (the kubelet would not start). ``state``
    defaults to :func:`new_cpu_state`. ``reserved`` overrides the reserved CPU set (the
    kubelet's own unit tests run the static policy with arbitrary reserved sets, including
    none); normally leave it ``None``.
    """

    name = "cpu"

    def __init__(
        self,
        machine: Machine,
        state: CpuState | None = None,
        *,
        reserved: Iterable[int] | None = None,
    ) -> None:
        self.machine = machine
        self.policy = _policy_name(machine)
        self.topology = CpuTopology.from_machine(machine)
        if self.policy == POLICY_STATIC:
            self.options = _options_of(machine, self.topology)
            self.reserved: frozenset[int] = (
                frozenset(reserved)
                if reserved is not None
                else reserved_cpus(machine, self.topology, self.options)
            )
        else:
            self.options = StaticPolicyOptions()
            self.reserved = frozenset()
        self.reserved_physical: frozenset[int] = self.topology.siblings(self.reserved)
        self.state = state if state is not None else self._initial_state()
        topo = self.topology
        # per-node total CPUs on the empty machine, for minAffinitySize
        self._capacity = {n: len(topo.cpus_in_numa[n]) for n in topo.numa_ids}
        self._universe = mask_of(topo.numa_ids)

    def _initial_state(self) -> CpuState:
        if self.policy == POLICY_NONE:
            return CpuState(policy_name=POLICY_NONE)
        default = set(self.topology.all_cpus)
        if self.options.strict_cpu_reservation:
            default -= self.reserved
        return CpuState(default_set=default, policy_name=POLICY_STATIC)

    @property
    def static(self) -> bool:
        return self.policy == POLICY_STATIC

    # -- kubelet Start -------------------------------------------------------------------

    def validate_state(self, kinds: Mapping[str, Mapping[str, str]] | None = None) -> None:
        """kubelet ``staticPolicy.Start`` / ``validateState`` (messages verbatim), and
        numalign's own: no CPU held by two pods, nor by two containers of one pod unless the
        kubelet's ``cpusToReuse`` handed it on (``kinds``: pod uid -> container -> kind where
        known; :func:`~numalign.resources.sharing.check_sharing`).

        An empty state (no default set, no assignments) is initialised; otherwise the
        reserved CPUs must be in the default set (out of it with strict reservation), no
        assignment may overlap the default set, and together they must be exactly the
        machine's CPUs. Raises :class:`StateError`.
        """
        if not self.static:
            return
        st = self.state
        all_cpus = set(self.topology.all_cpus)
        if self.options.strict_cpu_reservation:
            all_cpus -= self.reserved
        if not st.default_set:
            if st.assignments:
                raise StateError("default cpuset cannot be empty")
            st.default_set = set(all_cpus)
            return
        default = st.default_set
        if self.options.strict_cpu_reservation:
            overlap = self.reserved & default
            if overlap:
                raise StateError(
                    f'some of strictly reserved cpus: "{format_cpulist(overlap)}" are present '
                    f'in defaultCpuSet: "{format_cpulist(default)}"'
                )
        elif not self.reserved <= default:
            raise StateError(
                f'not all reserved cpus: "{format_cpulist(self.reserved)}" are present in '
                f'defaultCpuSet: "{format_cpulist(default)}"'
            )
        for uid, cs in st.assignments.items():
            for name, cset in cs.items():
                if cset & default:
                    raise StateError(
                        f'pod: {uid}, container: {name} cpuset: "{format_cpulist(cset)}" '
                        f'overlaps with default cpuset "{format_cpulist(default)}"'
                    )
        owner: dict[int, str] = {}
        for uid, cs in st.assignments.items():
            holders: dict[int, list[str]] = {}
            for name, cset in cs.items():
                for c in cset:
                    other = owner.setdefault(c, uid)
                    if other != uid:  # (a pod's app containers may reuse its init's CPUs)
                        raise StateError(f"CPU {c} is held exclusively by pods {other} and {uid}")
                    holders.setdefault(c, []).append(name)
            for c, names in sorted(holders.items()):
                if len(names) > 1:
                    check_sharing(f"CPU {c}", uid, names, (kinds or {}).get(uid))
        known = set(default) | st.assigned_cpus()
        if known != all_cpus:
            raise StateError(
                f'current set of available CPUs "{format_cpulist(all_cpus)}" doesn\'t match '
                f'with CPUs in state "{format_cpulist(known)}"'
            )

    # -- views ---------------------------------------------------------------------------

    def available_cpus(self) -> frozenset[int]:
        """kubelet ``GetAvailableCPUs``: default set minus reserved."""
        return frozenset(self.state.default_set - self.reserved)

    def available_physical_cpus(self) -> frozenset[int]:
        """kubelet ``GetAvailablePhysicalCPUs``: default set minus reserved cores."""
        return frozenset(self.state.default_set - self.reserved_physical)

    def allocatable_cpus(self) -> frozenset[int]:
        """kubelet ``GetAllocatableCPUs``: every CPU except the reserved ones."""
        return self.topology.all_cpus - self.reserved

    # -- hints ---------------------------------------------------------------------------

    def container_hints(self, pod: Pod, container: Container) -> ProviderHints:
        """kubelet ``GetTopologyHints`` for one container."""
        if not self.static:
            return None
        n = guaranteed_cpus(pod, container)
        if n == 0:
            return None
        allocated = self.state.cpuset(pod.uid, container.name)
        if allocated is not None:
            if len(allocated) != n:
                return {CPU: []}
            return {CPU: self.hint_set(allocated, (), n)}
        reusable = self.state.cpus_to_reuse.get(pod.uid, set())
        return {CPU: self.hint_set(self.available_cpus(), reusable, n)}

    def pod_hints(self, pod: Pod) -> ProviderHints:
        """kubelet ``GetPodTopologyHints`` (pod scope)."""
        if not self.static:
            return None
        n = pod_guaranteed_cpus(pod)
        if n == 0:
            return None
        assigned: set[int] = set()
        for c in pod.containers:
            allocated = self.state.cpuset(pod.uid, c.name)
            if allocated is None:
                continue
            if len(allocated) != guaranteed_cpus(pod, c):
                return {CPU: []}
            assigned |= allocated
        if len(assigned) == n:
            return {CPU: self.hint_set(assigned, (), n)}
        reusable = self.state.cpus_to_reuse.get(pod.uid, set()) | assigned
        return {CPU: self.hint_set(self.available_cpus(), reusable, n)}

    def hint_set(
        self, available: Iterable[int], reusable: Iterable[int], n: int
    ) -> GeneratedHints | list[TopologyHint]:
        """kubelet ``generateCPUTopologyHints`` as a rule; ``[]`` when no mask fits.

        Feasible mask M (inside the NUMA nodes that have CPUs): every reusable CPU's node is
        in M and ``|reusable| + |available CPUs on M|`` reaches ``n`` - monotone in M. The
        kubelet counts both terms without de-duplication; so does this. The rule is also
        handed over as data (a :class:`~numalign.engine.hints.Demand`: available CPUs per node,
        ``n - |reusable|`` needed, every reusable CPU's node touched).
        """
        d = self.topology.details
        counts: dict[int, int] = {}
        for c in available:
            info = d.get(c)
            if info is not None:
                counts[info.numa] = counts.get(info.numa, 0) + 1
        reuse = [c for c in reusable if c in d]
        reuse_nodes = sorted({d[c].numa for c in reuse})
        demand = Demand.per_node(
            {node: (k,) for node, k in counts.items()},
            (n - len(reuse),),
            touch=tuple(1 << node for node in reuse_nodes),
        )

        topo = self.topology
        preferred_size = min_affinity_size(self._capacity.values(), n, topo.num_numa)
        groups: tuple[int, ...] = ()
        group_count = 0
        if self.options.align_by_socket:
            per_socket = topo.num_numa // topo.num_sockets if topo.num_sockets else 0
            if per_socket:
                # socket-aligned (kubelet isHintSocketAligned): touches exactly the minimal
                # number of sockets; a group is the NUMA nodes with CPUs in one socket
                group_count = -(-preferred_size // per_socket)
                by_socket: dict[int, int] = {}
                for node in topo.numa_ids:
                    for sock in topo.sockets_of_numas((node,)):
                        by_socket[sock] = by_socket.get(sock, 0) | 1 << node
                groups = tuple(by_socket[k] for k in sorted(by_socket))
        gen = GeneratedHints(
            nodes=self.machine.node_ids,
            universe=self._universe,
            feasible=demand.feasible,
            preferred_size=preferred_size,
            demand=demand,
            preferred_groups=groups,
            preferred_group_count=group_count,
        )
        if gen.is_empty():
            return []
        return gen

    # -- allocation ----------------------------------------------------------------------

    def _enforce_smt_alignment(self, n: int) -> None:
        if not self.options.full_pcpus_only:
            return
        per_core = self.topology.cpus_per_core
        if per_core and n % per_core != 0:
            raise SMTAlignmentError(
                f"SMT Alignment Error: requested {n} cpus not multiple cpus per core = {per_core}"
            )
        physical = len(self.available_physical_cpus())
        if n > physical:
            raise SMTAlignmentError(
                "SMT Alignment Error: not enough free physical CPUs: available physical CPUs = "
                f"{physical}, requested CPUs = {n}, CPUs per core = {per_core}"
            )

    def _aligned(self, affinity: int, allocatable: frozenset[int]) -> frozenset[int]:
        nodes = ids_of(affinity)
        topo = self.topology
        if self.options.align_by_socket:
            return allocatable & topo.cpus_of_sockets(topo.sockets_of_numas(nodes))
        return allocatable & topo.cpus_of_numas(nodes)

    def allocate_cpus(
        self, n: int, affinity: int | None, reusable: Iterable[int] = ()
    ) -> frozenset[int]:
        """kubelet ``allocateCPUs`` without touching the state: hint-aligned CPUs first.

        Raises :class:`UnexpectedAdmissionError` with the allocator's error text.
        """
        allocatable = self.available_cpus() | frozenset(reusable)
        topo, opts = self.topology, self.options
        try:
            result: frozenset[int] = frozenset()
            if affinity is not None:
                aligned = self._aligned(affinity, allocatable)
                result = _take(topo, opts, aligned, min(n, len(aligned)))
            result |= _take(topo, opts, allocatable - result, n - len(result))
        except CpuAssignmentError as e:
            raise UnexpectedAdmissionError(str(e)) from None
        return result

    def allocate(self, pod: Pod, container: Container, hint: TopologyHint) -> None:
        """kubelet ``staticPolicy.Allocate``; raises before changing anything."""
        if not self.static:
            return
        n = guaranteed_cpus(pod, container)
        if n == 0:
            return
        self._enforce_smt_alignment(n)
        st = self.state
        existing = st.cpuset(pod.uid, container.name)
        if existing is not None:
            self._update_cpus_to_reuse(pod, container, existing)
            return
        cpus = self.allocate_cpus(n, hint.affinity, st.cpus_to_reuse.get(pod.uid, ()))
        st.default_set -= cpus
        st.assignments.setdefault(pod.uid, {})[container.name] = cpus
        self._update_cpus_to_reuse(pod, container, cpus)

    def _update_cpus_to_reuse(self, pod: Pod, container: Container, cpus: frozenset[int]) -> None:
        reuse = self.state.cpus_to_reuse
        for uid in [u for u in reuse if u != pod.uid]:
            del reuse[uid]
        mine = reuse.setdefault(pod.uid, set())
        if container.kind is ContainerKind.INIT:
            mine |= cpus
        else:
            # app containers, and restartable init containers (sidecars), which run beside
            # the app containers: their CPUs are never reusable (upstream treats a sidecar
            # exactly like an app container here)
            mine -= cpus

    # -- release -------------------------------------------------------------------------

    def release_container(self, pod_uid: str, container_name: str) -> None:
        """kubelet ``RemoveContainer``: the container's CPUs return to the default set, minus
        the CPUs still assigned to its siblings."""
        st = self.state
        containers = st.assignments.get(pod_uid)
        if containers is None or container_name not in containers:
            return
        cpus = containers.pop(container_name)
        if not containers:
            del st.assignments[pod_uid]
        in_use: set[int] = set()
        for s in containers.values():
            in_use |= s
        st.default_set |= cpus - in_use

    def release_pod(self, pod_uid: str) -> None:
        """Release every container of the pod and forget its reusable CPUs."""
        for name in list(self.state.assignments.get(pod_uid, {})):
            self.release_container(pod_uid, name)
        self.state.cpus_to_reuse.pop(pod_uid, None)
        self.state.exclusive.pop(pod_uid, None)
