"""The node: a machine, its kubelet configuration and its state; pods in, decisions out.

:class:`Node` is what the kubelet does at pod admission, with one difference the kubelet
lacks: admission is **all-or-nothing**. The admission loop runs on a copy of the node state;
the copy replaces the state only if every container of the pod was admitted and allocated.
(The kubelet keeps the allocations of a rejected pod's earlier containers until its managers'
stale-state cleanup runs; numalign never leaks them.)

Provider order is the kubelet's: device manager, CPU manager, memory manager.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from numalign.bitmask import ids_of
from numalign.errors import AdmissionError, InputError, StateError
from numalign.machine.model import Machine
from numalign.pod_policy import pod_policy
from numalign.pods import Pod
from numalign.policies import (
    Policy,
    Scope,
    TopologyPolicy,
    parse_options,
    parse_policy,
    parse_scope,
)
from numalign.resources.base import Provider
from numalign.resources.cpu import CpuManager, CpuState, new_cpu_state
from numalign.resources.devices import DeviceManager, DeviceState
from numalign.resources.memory import MemoryManager, MemoryState, new_memory_state
from numalign.scopes import Decision, Rejected, admit

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


@dataclass
class NodeState:
    """Everything allocated on one node: the three managers' states and the admitted pods."""

    cpu: CpuState
    memory: MemoryState
    devices: DeviceState
    pods: dict[str, dict[str, Any]] = field(default_factory=dict)  # uid -> {key, policy, ...}

    def copy(self) -> NodeState:
        return NodeState(
            self.cpu.copy(),
            self.memory.copy(),
            self.devices.copy(),
            dict(self.pods),  # records are never mutated once written, only added/removed
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "cpu": self.cpu.to_dict(),
            "memory": self.memory.to_dict(),
            "devices": self.devices.to_dict(),
            "pods": self.pods,
        }


def machine_fingerprint(machine: Machine) -> str:
    """Identifies the hardware a state belongs to (NUMA nodes, CPUs, devices, not the name)."""
    doc = {
        "nodes": [[n.id, n.memory, sorted(n.hugepages.items())] for n in machine.numa_nodes],
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
            dict(kc.topology_manager_policy_options), "kubelet.topologyManagerPolicyOptions"
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
        # kubelet manager construction checks (NUMA limit, distances) happen here, once
        self._policy(self.node_policy)
        self._reserved: frozenset[int] | None = None
        self.state = state if state is not None else self.empty_state(machine)

    @staticmethod
    def empty_state(machine: Machine) -> NodeState:
        return NodeState(
            new_cpu_state(machine), new_memory_state(machine), DeviceState()
        )

    @classmethod
    def state_from_dict(cls, machine: Machine, data: dict[str, Any]) -> NodeState:
        try:
            return NodeState(
                CpuState.from_dict(data["cpu"]),
                MemoryState.from_dict(data["memory"]),
                DeviceState.from_dict(data["devices"]),
                dict(data.get("pods", {})),
            )
        except (KeyError, TypeError, ValueError, InputError) as e:
            raise StateError(f"state payload is malformed: {e}") from None

    # ------------------------------------------------------------------ policy

    def _policy(self, policy: Policy) -> TopologyPolicy:
        m = self.machine
        distances = m.distances if m.has_distances else None
        try:
            return TopologyPolicy(policy, m.node_ids, self.options, distances)
        except InputError as e:
            raise e.within("kubelet") if e.field else InputError(e.problem, "kubelet") from None

    def policy_for(self, pod: Pod) -> tuple[TopologyPolicy, Scope]:
        """The policy and scope that apply to ``pod`` on this node."""
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

    def providers(self, state: NodeState) -> list[Provider]:
        m = self.machine
        return [
            DeviceManager(m, state.devices),
            CpuManager(m, state.cpu, reserved=self.reserved_cpus),
            MemoryManager(m, state.memory),
        ]

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
        if pod.uid in self.state.pods or any(
            p.get("key") == pod.key for p in self.state.pods.values()
        ):
            return PodResult(pod, False, "UnexpectedAdmissionError",
                             f"pod {pod.key} is already admitted on this node", policy=pol, scope=sc), None
        work = self.state.copy()
        try:
            decisions = admit(policy, scope, self.providers(work), pod)
        except Rejected as e:
            return PodResult(pod, False, e.reason, e.message, policy=pol, scope=sc,
                             containers=tuple(self._rejected(d, explain) for d in e.decisions)), None
        except AdmissionError as e:
            return PodResult(pod, False, e.reason, e.message, policy=pol, scope=sc), None
        results = tuple(self._container_result(work, pod, d, explain) for d in decisions)
        work.pods[pod.uid] = {
            "key": pod.key,
            "policy": policy.policy.value,
            "scope": scope.value,
            "containers": [
                {"name": r.name, "affinity": None if r.affinity is None else ids_of(r.affinity),
                 "preferred": r.preferred}
                for r in results
            ],
        }
        return PodResult(pod, True, None, None, policy=pol, scope=sc, containers=results), work

    def commit(self, planned: NodeState) -> None:
        """Adopt a state returned by :meth:`plan` (made on the current state)."""
        self.state = planned

    def release(self, key: str) -> bool:
        """Free everything the pod ``namespace/name`` (or uid) holds; False if unknown."""
        uid = next((u for u, p in self.state.pods.items() if p.get("key") == key or u == key), None)
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
        cpus = state.cpu.assignments.get(pod.uid, {}).get(d.container, frozenset())
        memory: dict[str, dict[str, int]] = {}
        for block in state.memory.assignments.get(pod.uid, {}).get(d.container, []):
            share = memory.setdefault(",".join(str(i) for i in block.numa_affinity), {})
            share[block.type] = share.get(block.type, 0) + block.size
        devices = {
            r: list(ids)
            for r, ids in state.devices.allocated.get(pod.uid, {}).get(d.container, {}).items()
        }
        return ContainerResult(
            d.container, d.hint.affinity, d.hint.preferred, frozenset(cpus), memory, devices,
            explain=d if explain else None,
        )
