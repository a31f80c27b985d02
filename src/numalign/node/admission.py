"""The node: a machine, its kubelet configuration and its state; pods in, decisions out.

:class:`Node` is what the kubelet does at pod admission, with one difference the kubelet
lacks: admission is **all-or-nothing**. The admission loop runs on a copy of the node state;
the copy replaces the state only if every container of the pod was admitted and allocated.
(The kubelet keeps the allocations of a rejected pod's earlier containers until its managers'
stale-state cleanup runs; numalign never leaks them.)

Before the Topology Manager, the kubelet's predicate admission (:mod:`numalign.node.predicates`)
checks that the pod fits the node at all (pod count, cpu, memory, hugepages, devices against
node allocatable and the requests of the pods already admitted): ``OutOfcpu`` and friends.

Provider order is the kubelet's: device manager, CPU manager, memory manager.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from numalign import modes
from numalign.engine.bitmask import ids_of
from numalign.engine.hints import ProviderHints
from numalign.engine.policies import (
    MergeResult,
    Policy,
    Scope,
    TopologyPolicy,
    parse_options,
    parse_policy,
    parse_scope,
)
from numalign.engine.scopes import Decision, Merge, Rejected, admit
from numalign.errors import AdmissionError, InputError
from numalign.machine.allocatable import node_allocatable
from numalign.machine.model import Machine
from numalign.modes import Mode, koordinator_policy, node_mode
from numalign.modes.koordinator.cpu import KoordinatorCpuManager
from numalign.modes.koordinator.devices import KoordinatorDeviceManager
from numalign.modes.koordinator.memory import KoordinatorNumaResource
from numalign.node.plan_cache import PlanCache, plan_key
from numalign.node.predicates import fits
from numalign.node.state import ContainerRecord, NodeState, PodRecord
from numalign.node.usage import container_usage
from numalign.pods import Pod, effective_pod_requests
from numalign.pods.policy import pod_policy
from numalign.resources.base import Provider
from numalign.resources.cpu import CpuManager
from numalign.resources.devices import DeviceManager
from numalign.resources.memory import POLICY_STATIC as MEMORY_STATIC
from numalign.resources.memory import MemoryManager

DYNAMIC = "dynamic"  # KEP-693: the node applies each pod's own policy


@dataclass(frozen=True)
class ContainerResult:
    name: str
    affinity: int | None
    preferred: bool
    cpus: frozenset[int] = frozenset()
    #: NUMA node id (or "0,1" for a multi-node block) -> resource -> bytes
    memory: dict[str, dict[str, int]] = field(default_factory=dict)
    devices: dict[str, list[str]] = field(default_factory=dict)
    #: --explain: each provider's answer and the merged hint
    explain: Decision | None = None


@dataclass(frozen=True)
class PodResult:
    pod: Pod
    admitted: bool
    reason: str | None = None
    message: str | None = None
    policy: str = "none"
    scope: str = "container"
    containers: tuple[ContainerResult, ...] = ()


def machine_fingerprint(machine: Machine) -> str:
    """Identifies the topology a state belongs to: NUMA node ids, CPUs (id, core, socket,
    NUMA node) and devices. Not the name, not memory sizes: a VM whose memory grew keeps its
    state (the memory manager's tables are rebuilt from the assignments on load)."""
    doc = {
        "nodes": [n.id for n in machine.numa_nodes],
        "cpus": [[c.id, c.core, c.socket, c.numa] for c in machine.cpus],
        "devices": [[d.resource, d.id, list(d.numa)] for d in machine.devices],
    }
    digest = hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]
    return f"{machine.name}:{digest}"


class Node:
    """A machine with its kubelet configuration, admitting pods against a :class:`NodeState`."""

    def __init__(self, machine: Machine, state: NodeState | None = None) -> None:
        self.machine = machine
        kc = machine.kubelet
        self.dynamic = kc.topology_manager_policy == DYNAMIC
        self.options = parse_options(
            dict(kc.topology_manager_policy_options), "kubelet.topologyManagerPolicyOptions",
            kc.feature_gates,
        )
        if self.dynamic:
            self.node_policy, implied = Policy.NONE, None
        else:
            self.node_policy, implied = parse_policy(
                kc.topology_manager_policy, "kubelet.topologyManagerPolicy"
            )
        self.node_scope = implied or parse_scope(
            kc.topology_manager_scope, "kubelet.topologyManagerScope"
        )
        #: the engine mode (label ``numalign.io/engine-mode``; a scheduler profile may set it)
        self.mode = node_mode(machine.labels)
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
        if self.mode is Mode.KOORDINATOR:
            koord, koord_scope = koordinator_policy(self.machine.labels, self.node_policy, pod)
            return self._policy(koord), koord_scope
        if not self.dynamic:
            return self._policy(self.node_policy), self.node_scope
        asked = pod_policy(pod)
        if asked is None:
            return self._policy(Policy.NONE), self.node_scope
        policy, scope = asked
        return self._policy(policy), scope or self.node_scope

    @property
    def reserved_cpus(self) -> frozenset[int]:
        """The CPU manager's reserved CPUs (computed once per node)."""
        if self._reserved is None:
            self._reserved = CpuManager(self.machine, self.state.cpu).reserved
        return self._reserved

    @property
    def koordinator_numa(self) -> bool:
        """Koordinator's own NUMA rules apply: the ``koordinator`` mode without the kubelet's
        Static memory manager (whose NUMA-group rule and tables then stay in charge)."""
        return self.mode is Mode.KOORDINATOR and self.machine.kubelet.memory_manager_policy != MEMORY_STATIC

    def providers(self, state: NodeState) -> list[Provider]:
        m = self.machine
        cpu = (
            KoordinatorCpuManager(m, state.cpu, reserved=self.reserved_cpus,
                                  policy_of=lambda pod: self.policy_for(pod)[0].policy)
            if self.mode is Mode.KOORDINATOR else CpuManager(m, state.cpu, reserved=self.reserved_cpus)
        )
        if isinstance(cpu, KoordinatorCpuManager) and self.koordinator_numa:
            # Koordinator's NodeNUMAResource: CPUs and per-NUMA memory hinted jointly
            # and DeviceShare: device hints joint over the device types, preferred = fewest now
            return [KoordinatorDeviceManager(m, state.devices),
                    KoordinatorNumaResource(m, cpu, state.memory, cpu.policy_of)]
        return [DeviceManager(m, state.devices), cpu, MemoryManager(m, state.memory)]

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
        policy, scope = self.policy_for(pod)
        pol, sc = policy.policy.value, scope.value
        if pod.uid in self.state.pods or any(p.key == pod.key for p in self.state.pods.values()):
            return PodResult(pod, False, "UnexpectedAdmissionError",
                             f"pod {pod.key} is already admitted on this node", policy=pol, scope=sc), None
        requests = {r: v for r, v in effective_pod_requests(pod).items() if v > 0}
        used, count = self.requested()
        short = fits(self.allocatable, requests, used, count) if self.check_node_fit else []
        if short:
            return PodResult(pod, False, short[0].reason, short[0].message, policy=pol,
                             scope=sc), None
        # past predicate admission, the decision reads only the managers' states and the pod
        cache = None if explain else self.plan_cache
        if cache is None:
            return self._plan(pod, policy, scope, requests, explain)
        key = plan_key(self.machine, self.mode, self.state, pod)
        hit = cache.get(key)
        if hit is not None:
            cached: PodResult = hit.result
            if hit.delta is None:
                return replace(cached, pod=pod), None
            replayed = PlanCache.replay(hit, pod, self.state)
            if replayed is not None:
                return replace(cached, pod=pod), replayed
        result, planned = self._plan(pod, policy, scope, requests, explain)
        entry = PlanCache.entry(pod, result, result.admitted, self.state, planned,
                                f"{result.reason} {result.message}")
        if entry is not None:
            cache.put(key, self.machine, entry)
        return result, planned

    def _merge(self, policy: TopologyPolicy, providers: Sequence[Provider] = ()) -> Merge | None:
        """The merge of this node's engine mode (None: the policy's own, the kubelet's).

        A koordinator-mode node merges as Koordinator's topology manager does (a BestEffort
        best hint that cannot hold every resource falls back to all NUMA nodes) when the
        kubelet's Static memory manager is off, as Koordinator deployments run it; with the
        Static memory manager on, the kubelet's memory manager allocates and its NUMA-group
        rule refuses such a fallback mask, so the kubelet's merge is kept there.

        Koordinator's hints carry scores (NodeNUMAResource's NUMA scorer): equally narrow
        preferred masks are chosen by them (:func:`numalign.modes.score_tie_break`)."""
        if not self.koordinator_numa:
            return None
        mode = self.mode
        scorers = [p for p in providers if isinstance(p, (KoordinatorNumaResource, KoordinatorDeviceManager))]

        def score(mask: int) -> int:
            return sum(p.hint_score(mask) for p in scorers)

        def merge(hints: Sequence[ProviderHints]) -> MergeResult:
            out = modes.merge(mode, policy, hints, score=score if scorers else None)
            return MergeResult(out.hint, out.admit)

        return merge

    def _plan(
        self, pod: Pod, policy: TopologyPolicy, scope: Scope, requests: dict[str, int], explain: bool
    ) -> tuple[PodResult, NodeState | None]:
        """The Topology Manager's admission on a copy of the state (predicates passed)."""
        pol, sc = policy.policy.value, scope.value
        work = self.state.copy()
        try:
            providers = self.providers(work)
            decisions = admit(policy, scope, providers, pod, self._merge(policy, providers))
        except Rejected as e:
            return PodResult(pod, False, e.reason, e.message, policy=pol, scope=sc,
                             containers=tuple(self._rejected(d, explain) for d in e.decisions)), None
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
