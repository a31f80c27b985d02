"""The node: a machine, its kubelet configuration and its state; pods in, decisions out.

:class:`Node` is what the kubelet does at pod admission, with one difference the kubelet
lacks: admission is **all-or-nothing**. The admission loop runs on a copy of the node state;
the copy replaces the state only if every container of the pod was admitted and allocated.
(The kubelet keeps the allocations of a rejected pod's earlier containers until its managers'
stale-state cleanup runs; numalign never leaks them.)

The kubelet's admit handlers run in the order of the node's rules (``NodeRules.chain``, the
kubelet's registration order in ``pkg/kubelet/kubelet.go``), and the first rejection is the
pod's: the resource allocation handler - the Topology Manager, which merges the providers'
hints and then calls every provider's ``Allocate`` (``TopologyAffinityError``,
``SMTAlignmentError``, ``UnexpectedAdmissionError``) - then the predicate admission
(:mod:`numalign.node.predicates`: pod count, cpu, memory, hugepages, extended resources against
node allocatable and the pods already admitted, ``OutOfcpu`` and friends). A pod the predicates
refuse after the Topology Manager allocated for it keeps nothing (all-or-nothing; the kubelet
leaves that allocation to its managers' stale-state cleanup).

Provider order is the kubelet's: device manager, CPU manager, memory manager.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from numalign.engine.bitmask import ids_of
from numalign.engine.policies import Policy, PolicyOptions, Scope, TopologyPolicy
from numalign.engine.scopes import Decision, Rejected, admit
from numalign.errors import AdmissionError, InputError
from numalign.machine.allocatable import node_allocatable
from numalign.machine.model import Machine
from numalign.modes.registry import Mode
from numalign.node.holdings import container_usage
from numalign.node.predicates import Insufficient, fits
from numalign.node.rules import DYNAMIC, AdmissionStep, resolve_rules
from numalign.node.state import ContainerRecord, NodeState, PodRecord
from numalign.pods import Pod, effective_pod_requests
from numalign.record import Record, set_field
from numalign.resources.base import Provider
from numalign.resources.cpu import CpuManager
from numalign.resources.devices import DeviceManager
from numalign.resources.memory import MemoryManager

if TYPE_CHECKING:
    from numalign.node.plan_cache import PlanCache

__all__ = ["DYNAMIC", "ContainerResult", "Node", "PodResult", "machine_fingerprint"]


class ContainerResult(Record, frozen=True):
    """One container's admission: its merged hint, CPUs, memory and devices."""

    __slots__ = ("name", "affinity", "preferred", "cpus", "memory", "devices", "explain")
    name: str
    affinity: int | None
    preferred: bool
    cpus: frozenset[int]
    #: NUMA node id (or "0,1" for a multi-node block) -> resource -> bytes
    memory: dict[str, dict[str, int]]
    devices: dict[str, list[str]]
    #: --explain: each provider's answer and the merged hint
    explain: Decision | None

    def __init__(
        self,
        name: str,
        affinity: int | None,
        preferred: bool,
        cpus: frozenset[int] = frozenset(),
        memory: dict[str, dict[str, int]] | None = None,
        devices: dict[str, list[str]] | None = None,
        explain: Decision | None = None,
    ) -> None:
        set_field(self, "name", name)
        set_field(self, "affinity", affinity)
        set_field(self, "preferred", preferred)
        set_field(self, "cpus", cpus)
        set_field(self, "memory", {} if memory is None else memory)
        set_field(self, "devices", {} if devices is None else devices)
        set_field(self, "explain", explain)


class PodResult(Record, frozen=True):
    """One pod's admission: admitted or the rejection's reason, and its containers."""

    __slots__ = (
        "pod",
        "admitted",
        "reason",
        "message",
        "policy",
        "scope",
        "containers",
        "kubelet",
        "family_message",
    )
    pod: Pod
    admitted: bool
    reason: str | None
    message: str | None
    policy: str
    scope: str
    containers: tuple[ContainerResult, ...]
    #: --explain: the node's kubelet release and what its hint providers would enumerate
    kubelet: tuple[str, ...]
    #: ``message`` is the node family's own words for a Topology Manager rejection
    #: (:meth:`~numalign.node.rules.NodeRules.rejection_message`: Koordinator's Filter status
    #: message), not the kubelet's
    family_message: bool

    def __init__(
        self,
        pod: Pod,
        admitted: bool,
        reason: str | None = None,
        message: str | None = None,
        policy: str = "none",
        scope: str = "container",
        containers: tuple[ContainerResult, ...] = (),
        kubelet: tuple[str, ...] = (),
        family_message: bool = False,
    ) -> None:
        set_field(self, "pod", pod)
        set_field(self, "admitted", admitted)
        set_field(self, "reason", reason)
        set_field(self, "message", message)
        set_field(self, "policy", policy)
        set_field(self, "scope", scope)
        set_field(self, "containers", containers)
        set_field(self, "kubelet", kubelet)
        set_field(self, "family_message", family_message)


def machine_fingerprint(machine: Machine) -> str:
    """Identifies the topology a state belongs to: NUMA node ids, CPUs (id, core, socket,
    NUMA node) and devices. Not the name, not memory sizes: a VM whose memory grew keeps its
    state (the memory manager's tables are rebuilt from the assignments on load)."""
    doc = {
        "nodes": [n.id for n in machine.numa_nodes],
        "cpus": [[c.id, c.core, c.socket, c.numa] for c in machine.cpus],
        "devices": [[d.resource, d.id, list(d.numa)] for d in machine.devices],
    }
    import hashlib
    import json

    digest = hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]
    return f"{machine.name}:{digest}"


class Node:
    """A machine with its kubelet configuration, admitting pods against a :class:`NodeState`."""

    def __init__(self, machine: Machine, state: NodeState | None = None, *, mode: Mode | None = None) -> None:
        self.machine = machine
        #: how this node decides, resolved once (mode, kubelet settings, labels, annotations)
        self.rules = resolve_rules(machine, mode)
        # kubelet manager construction checks (NUMA limit, distances) happen here, once
        self._policies: dict[Policy, TopologyPolicy] = {}
        self._policy(self.node_policy)
        self._reserved: frozenset[int] | None = None
        #: node allocatable per resource (the kubelet's node status), for predicate admission
        self.allocatable = node_allocatable(machine)
        #: node-level requests and pod count of pods this engine knows only as totals (an
        #: NRT's ``numalign.io/nodeRequested``), added to the state's pods in predicate admission
        self.external_requests: dict[str, int] = {}
        self.external_pods = 0
        #: False where node-level figures are unknown (an NRT of another producer): the
        #: kube-scheduler's own NodeResourcesFit judges node-level fit there
        self.check_node_fit = True
        #: what happened on the way (a reconcile's kept and dropped pods), for the CLI to show
        self.notes: list[str] = []
        self.state = state if state is not None else NodeState.empty(machine)
        #: admissions shared with nodes in the same situation (a cluster's nodes share one)
        self.plan_cache: PlanCache | None = None

    # ------------------------------------------------------------------ rules

    @property
    def mode(self) -> Mode:
        """The engine mode this node decides by (its label, or a scheduler profile's)."""
        return self.rules.mode

    def with_machine(self, machine: Machine) -> Node:
        """This node - its state, reserved CPUs and node-level figures - over ``machine``, which
        differs from :attr:`machine` in its kubelet section only (another kubelet release: the
        extender's Node objects). The rules are resolved anew, in this node's engine mode; a
        kubelet that would not start with it raises :class:`InputError`."""
        import copy  # here: an admit never copies a node (start-up time)

        twin = copy.copy(self)
        twin.machine = machine
        twin.rules = resolve_rules(machine, self.rules.mode)
        twin._policies = {}
        twin._policy(twin.node_policy)
        twin.plan_cache = None  # its admissions were made under the other rules
        twin.notes = []
        return twin

    def twin(self) -> Node:
        """Another node of this machine with a copy of this node's state, for a node as its
        constructor left it (the state aside): what ``Node(self.machine, self.state.copy(),
        mode=...)`` builds, sharing what depends only on the machine and the rules - the
        resolved rules, the Topology Manager policies, the reserved CPUs, the node allocatable
        (none of them is changed in place) - instead of resolving it again: a cluster's nodes
        come from a few machine templates."""
        import copy  # here: an admit never copies a node (start-up time)

        twin = copy.copy(self)
        twin._policies = dict(self._policies)
        twin.state = self.state.copy()
        twin.external_requests = {}
        twin.notes = []
        twin.plan_cache = None
        return twin

    def use_mode(self, mode: Mode | None) -> None:
        """Decide by ``mode``'s rules from now on (a scheduler profile that decides every
        node's NUMA allocation, e.g. Koordinator's); None keeps the node's own."""
        self.rules = self.rules.with_mode(self.machine, mode)

    @property
    def node_policy(self) -> Policy:
        return self.rules.node.policy

    @property
    def node_scope(self) -> Scope:
        return self.rules.node.scope

    @property
    def options(self) -> PolicyOptions:
        return self.rules.node.options

    @property
    def dynamic(self) -> bool:
        return self.rules.node.dynamic

    # ------------------------------------------------------------------ policy

    def _policy(self, policy: Policy) -> TopologyPolicy:
        cached = self._policies.get(policy)
        if cached is None:
            cached = self._policies[policy] = self._new_policy(policy)
        return cached

    def _new_policy(self, policy: Policy) -> TopologyPolicy:
        m = self.machine
        distances = m.distances if m.has_distances else None
        try:
            return TopologyPolicy(policy, m.node_ids, self.options, distances)
        except InputError as e:
            raise e.within("kubelet") if e.field else InputError(e.problem, "kubelet") from None

    def policy_for(self, pod: Pod) -> tuple[TopologyPolicy, Scope]:
        """The policy and scope that apply to ``pod`` on this node."""
        policy, scope = self.rules.policy_for(pod)
        return self._policy(policy), scope

    @property
    def reserved_cpus(self) -> frozenset[int]:
        """The CPU manager's reserved CPUs (computed once per node)."""
        if self._reserved is None:
            self._reserved = CpuManager(self.machine, self.state.cpu).reserved
        return self._reserved

    def providers(self, state: NodeState) -> list[Provider]:
        """The hint providers and allocators of this node's rules over ``state``."""
        return self.rules.providers(state, self.reserved_cpus, self._policy_of)

    def _policy_of(self, pod: Pod) -> Policy:
        return self.policy_for(pod)[0].policy

    def validate_state(self) -> None:
        """The kubelet managers' start-up validation of a loaded state, plus numalign's own:
        no CPU or device held by two pods, devices that exist. Raises :class:`StateError`."""
        kinds = {uid: {c.name: c.kind for c in p.containers if c.kind is not None}
                 for uid, p in self.state.pods.items()}
        CpuManager(self.machine, self.state.cpu, reserved=self.reserved_cpus).validate_state(kinds)
        MemoryManager(self.machine, self.state.memory).validate_state()
        DeviceManager(self.machine, self.state.devices).validate_state(kinds)

    # --------------------------------------------------------------- admission

    def admit(self, pod: Pod, *, explain: bool = False) -> PodResult:
        """Admit ``pod`` all-or-nothing; the state changes only if it is admitted."""
        result, planned = self.plan(pod, explain=explain)
        if planned is not None:
            self.state = planned
        return result

    def plan(self, pod: Pod, *, explain: bool = False) -> tuple[PodResult, NodeState | None]:
        """What :meth:`admit` would decide, and the state it would leave; changes nothing.

        The scheduler "assumes" with this: a plan made on the current state and committed
        with :meth:`commit` is exactly what the node's own admission produces.
        """
        result, planned = self._plan_chain(pod, explain)
        if explain:
            result = result.replace(kubelet=tuple(self.rules.release_notes(self.machine, pod)))
        return result, planned

    def _plan_chain(self, pod: Pod, explain: bool) -> tuple[PodResult, NodeState | None]:
        policy, scope = self.policy_for(pod)
        pol, sc = policy.policy.value, scope.value
        if self.state.holds(pod.uid, pod.key):
            return PodResult(pod, False, "UnexpectedAdmissionError",
                             f"pod {pod.key} is already admitted on this node", policy=pol, scope=sc), None
        requests = {r: v for r, v in effective_pod_requests(pod).items() if v > 0}
        result: PodResult | None = None
        planned: NodeState | None = None
        for step in self.rules.chain:  # the kubelet's admit handlers, first rejection wins
            if step is AdmissionStep.PREDICATES:
                short = self._predicates(requests)
                if short:
                    return PodResult(pod, False, short[0].reason, short[0].message, policy=pol,
                                     scope=sc), None
            else:
                result, planned = self._topology_manager(pod, policy, scope, requests, explain)
                if planned is None:
                    return result, None
        assert result is not None, "the admission chain runs the Topology Manager"
        return result, planned

    def _predicates(self, requests: Mapping[str, int]) -> list[Insufficient]:
        """The predicate admit handler's node fit (``OutOfcpu`` and friends)."""
        if not self.check_node_fit:
            return []
        used, count = self.requested()
        return fits(self.allocatable, requests, used, count)

    def _topology_manager(
        self, pod: Pod, policy: TopologyPolicy, scope: Scope, requests: dict[str, int], explain: bool
    ) -> tuple[PodResult, NodeState | None]:
        """The resource allocation admit handler (the Topology Manager), through the plan cache:
        its decision reads only the managers' states and the pod."""
        cache = None if explain else self.plan_cache
        if cache is None:
            return self._plan(pod, policy, scope, requests, explain)
        from numalign.node.plan_cache import PlanCache, plan_key  # a cluster's nodes only
        key = plan_key(self.machine, self.mode, self.state, pod)
        hit = cache.get(key)
        if hit is not None:
            cached: PodResult = hit.result
            if hit.delta is None:
                return cached.replace(pod=pod), None
            replayed = PlanCache.replay(hit, pod, self.state)
            if replayed is not None:
                return cached.replace(pod=pod), replayed
        result, planned = self._plan(pod, policy, scope, requests, explain)
        entry = PlanCache.entry(pod, result, result.admitted, self.state, planned,
                                f"{result.reason} {result.message}")
        if entry is not None:
            cache.put(key, self.machine, entry)
        return result, planned

    def _plan(
        self, pod: Pod, policy: TopologyPolicy, scope: Scope, requests: dict[str, int], explain: bool
    ) -> tuple[PodResult, NodeState | None]:
        """The Topology Manager's admission on a copy of the state."""
        pol, sc = policy.policy.value, scope.value
        work = self.state.copy()
        try:
            providers = self.providers(work)
            decisions = admit(policy, scope, providers, pod, pod.containers,
                              self.rules.merge(policy, providers))
        except Rejected as e:
            words = self.rules.rejection_message(e.reasons)  # the family's words, if it has any
            return PodResult(pod, False, e.reason, e.message if words is None else words, policy=pol,
                             scope=sc, containers=tuple(self._rejected(d, explain) for d in e.decisions),
                             family_message=words is not None), None
        except AdmissionError as e:
            return PodResult(pod, False, e.reason, e.message, policy=pol, scope=sc), None
        results = tuple(self._container_result(work, pod, d, explain) for d in decisions)
        kinds = {c.name: c.kind.value for c in pod.containers}
        work.pods[pod.uid] = PodRecord(
            pod.uid, pod.key, pol, sc,
            tuple(ContainerRecord(r.name, None if r.affinity is None else tuple(ids_of(r.affinity)),
                                  r.preferred, kinds.get(r.name)) for r in results),
            requests=requests,
        )
        return PodResult(pod, True, None, None, policy=pol, scope=sc, containers=results), work

    def _admitted_requests(self) -> list[Mapping[str, int]]:
        """The requests of every admitted pod (one entry per pod) plus the external totals."""
        out: list[Mapping[str, int]] = [p.requests for p in self.state.pods.values()]
        if self.external_pods > 0:
            out.append(self.external_requests)
            out.extend({} for _ in range(self.external_pods - 1))
        elif self.external_requests:
            out.append(self.external_requests)  # totals only: counted, but not as a pod
        return out

    def requested(self) -> tuple[dict[str, int], int]:
        """Node-level requests of every admitted pod together, and how many pods there are
        (kube-scheduler's ``NodeInfo.Requested`` and pod count)."""
        total: dict[str, int] = {}
        for r in self._admitted_requests():
            for name, v in r.items():
                total[name] = total.get(name, 0) + v
        return total, len(self.state.pods) + self.external_pods

    def commit(self, planned: NodeState) -> None:
        """Adopt a state returned by :meth:`plan` (made on the current state)."""
        self.state = planned

    def release(self, key: str) -> bool:
        """Free everything the pod ``namespace/name`` (or uid) holds; False if unknown."""
        uid = self.state.find(key)
        if uid is None:
            return False
        work = self.state.copy()
        for p in self.providers(work):
            p.release_pod(uid)
        del work.pods[uid]
        self.state = work
        return True

    # ----------------------------------------------------------------- results

    @staticmethod
    def _rejected(d: Decision, explain: bool) -> ContainerResult:
        return ContainerResult(d.container, d.hint.affinity, d.hint.preferred,
                               explain=d if explain else None)

    def _container_result(
        self, state: NodeState, pod: Pod, d: Decision, explain: bool
    ) -> ContainerResult:
        held = container_usage(self.machine, state, pod.uid, d.container)
        return ContainerResult(
            d.container, d.hint.affinity, d.hint.preferred, held.cpus, held.memory_by_numa(),
            {r: list(ids) for r, ids in held.devices.items()},
            explain=d if explain else None,
        )
