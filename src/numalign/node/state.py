"""What is allocated on one node: the three managers' states and the pods admitted there.

:class:`NodeState` composes the CPU, memory and device managers' own state objects (each
manager owns its tables; nobody else reads or writes them - see :mod:`numalign.node.usage`
for every question about usage) and one typed, immutable :class:`PodRecord` per pod.

The JSON form (:meth:`NodeState.to_dict`) is what ``numalign`` persists in a state directory;
it is validated on the way back in (:meth:`NodeState.from_dict`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from numalign.errors import InputError, StateError
from numalign.machine.model import Machine
from numalign.pods import ContainerKind
from numalign.record import Record, set_field
from numalign.resources.cpu import new_cpu_state
from numalign.resources.cpu_state import CpuState
from numalign.resources.devices import DeviceState
from numalign.resources.memory import new_memory_state
from numalign.resources.memory_state import MemoryState

CONTAINER_KINDS = tuple(k.value for k in ContainerKind)


class ContainerRecord(Record, frozen=True):
    """One admitted container: the NUMA affinity the Topology Manager chose for it."""

    __slots__ = ("name", "affinity", "preferred", "kind")
    name: str
    affinity: tuple[int, ...] | None
    preferred: bool
    #: ``init``, ``sidecar`` or ``app`` (:class:`~numalign.pods.ContainerKind`); None in states
    #: written before it was kept. Which containers may share a device depends on it.
    kind: str | None

    def __init__(
        self,
        name: str,
        affinity: tuple[int, ...] | None = None,
        preferred: bool = False,
        kind: str | None = None,
    ) -> None:
        set_field(self, "name", name)
        set_field(self, "affinity", affinity)
        set_field(self, "preferred", preferred)
        set_field(self, "kind", kind)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "affinity": None if self.affinity is None else list(self.affinity),
            "preferred": self.preferred,
        }
        if self.kind is not None:
            out["kind"] = self.kind
        return out

    @staticmethod
    def from_dict(d: object, where: str) -> ContainerRecord:
        if not isinstance(d, Mapping):
            raise InputError("expected an object", where)
        name = d.get("name")
        if not isinstance(name, str) or not name:
            raise InputError("expected a non-empty string", f"{where}.name")
        raw = d.get("affinity")
        affinity: tuple[int, ...] | None = None
        if raw is not None:
            if not isinstance(raw, list) or not all(
                isinstance(i, int) and not isinstance(i, bool) and 0 <= i < 1 << 16 for i in raw
            ):
                raise InputError("expected a list of NUMA node ids or null", f"{where}.affinity")
            affinity = tuple(sorted(set(raw)))
        preferred = d.get("preferred", False)
        if not isinstance(preferred, bool):
            raise InputError("expected true or false", f"{where}.preferred")
        kind = d.get("kind")
        if kind is not None and kind not in CONTAINER_KINDS:
            raise InputError(f"expected one of {', '.join(CONTAINER_KINDS)}", f"{where}.kind")
        return ContainerRecord(name, affinity, preferred, kind)


class PodRecord(Record, frozen=True):
    """A pod admitted on the node (or usage observed elsewhere, ``observed=True``).

    ``key`` is ``namespace/name`` (the kubelet's checkpoints know only uids: then the uid).
    """

    __slots__ = ("uid", "key", "policy", "scope", "containers", "observed", "requests")
    uid: str
    key: str
    policy: str
    scope: str
    containers: tuple[ContainerRecord, ...]
    #: usage learnt from outside numalign (an NRT, a kubelet checkpoint), not an admission
    observed: bool
    #: the pod's effective requests (cpu in millicores, bytes, counts; non-zero only), what the
    #: kubelet's predicate admission counts as used; {} in states written before it was kept
    requests: Mapping[str, int]

    def __init__(
        self,
        uid: str,
        key: str,
        policy: str,
        scope: str,
        containers: tuple[ContainerRecord, ...] = (),
        observed: bool = False,
        requests: Mapping[str, int] | None = None,
    ) -> None:
        set_field(self, "uid", uid)
        set_field(self, "key", key)
        set_field(self, "policy", policy)
        set_field(self, "scope", scope)
        set_field(self, "containers", containers)
        set_field(self, "observed", observed)
        set_field(self, "requests", {} if requests is None else requests)

    def container(self, name: str) -> ContainerRecord | None:
        return next((c for c in self.containers if c.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "key": self.key,
            "policy": self.policy,
            "scope": self.scope,
            "containers": [c.to_dict() for c in self.containers],
        }
        if self.observed:
            out["observed"] = True
        if self.requests:
            out["requests"] = dict(sorted(self.requests.items()))
        return out

    @staticmethod
    def from_dict(uid: str, d: object, where: str) -> PodRecord:
        if not isinstance(d, Mapping):
            raise InputError("expected an object", where)
        fields: dict[str, str] = {}
        for name in ("key", "policy", "scope"):
            v = d.get(name, uid if name == "key" else "")
            if not isinstance(v, str):
                raise InputError("expected a string", f"{where}.{name}")
            fields[name] = v
        raw = d.get("containers", [])
        if not isinstance(raw, list):
            raise InputError("expected a list", f"{where}.containers")
        containers = tuple(
            ContainerRecord.from_dict(c, f"{where}.containers[{i}]") for i, c in enumerate(raw)
        )
        observed = d.get("observed", False)
        if not isinstance(observed, bool):
            raise InputError("expected true or false", f"{where}.observed")
        raw_requests = d.get("requests", {})
        if not isinstance(raw_requests, Mapping):
            raise InputError("expected an object", f"{where}.requests")
        requests: dict[str, int] = {}
        for name, amount in raw_requests.items():
            if (not isinstance(name, str) or isinstance(amount, bool) or not isinstance(amount, int)
                    or amount < 0):
                raise InputError("expected resource name -> non-negative integer",
                                 f"{where}.requests")
            requests[name] = amount
        return PodRecord(uid, fields["key"], fields["policy"], fields["scope"], containers, observed,
                         requests)


class NodeState(Record):
    """Everything allocated on one node: the three managers' states and the admitted pods."""

    __slots__ = ("cpu", "memory", "devices", "pods", "__weakref__")  # weakly keyed caches
    cpu: CpuState
    memory: MemoryState
    devices: DeviceState
    pods: dict[str, PodRecord]  # uid -> record

    def __init__(
        self,
        cpu: CpuState,
        memory: MemoryState,
        devices: DeviceState,
        pods: dict[str, PodRecord] | None = None,
    ) -> None:
        self.cpu = cpu
        self.memory = memory
        self.devices = devices
        self.pods = {} if pods is None else pods

    @staticmethod
    def empty(machine: Machine) -> NodeState:
        """The state of a node with nothing allocated (the kubelet's start on empty checkpoints)."""
        return NodeState(new_cpu_state(machine), new_memory_state(machine), DeviceState())

    def copy(self) -> NodeState:
        return NodeState(
            self.cpu.copy(),
            self.memory.copy(),
            self.devices.copy(),
            dict(self.pods),  # records are immutable: the dict is enough
        )

    def holds(self, uid: str, key: str) -> bool:
        """Does the node hold a pod with this uid or this ``namespace/name`` (what admission
        refuses as "already admitted")?"""
        return uid in self.pods or any(p.key == key for p in self.pods.values())

    def pod_names(self) -> frozenset[str]:
        """The uids and ``namespace/name`` keys of the pods held: :meth:`holds` is true for a
        pod whose uid or key is in it (for callers that keep it while the state stays)."""
        return frozenset(x for p in self.pods.values() for x in (p.uid, p.key))

    def find(self, key_or_uid: str) -> str | None:
        """The uid of the pod ``namespace/name`` (or with that uid); None if unknown."""
        if key_or_uid in self.pods:
            return key_or_uid
        return next((u for u, p in self.pods.items() if p.key == key_or_uid), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "cpu": self.cpu.to_dict(),
            "memory": self.memory.to_dict(),
            "devices": self.devices.to_dict(),
            "pods": {uid: p.to_dict() for uid, p in self.pods.items()},
        }

    @staticmethod
    def from_dict(data: object) -> NodeState:
        """A state read back from :meth:`to_dict`'s JSON; malformed -> :class:`StateError`."""
        try:
            if not isinstance(data, Mapping):
                raise InputError("expected an object", "node")
            for part in ("cpu", "memory", "devices"):
                if part not in data:
                    raise InputError("missing", f"node.{part}")
            raw_pods = data.get("pods", {})
            if not isinstance(raw_pods, Mapping):
                raise InputError("expected an object", "node.pods")
            pods = {
                str(uid): PodRecord.from_dict(str(uid), p, f"node.pods.{uid}")
                for uid, p in raw_pods.items()
            }
            return NodeState(
                CpuState.from_dict(data["cpu"]),
                MemoryState.from_dict(data["memory"]),
                DeviceState.from_dict(data["devices"]),
                pods,
            )
        except InputError as e:
            raise StateError(f"state payload is malformed: {e.message}") from None
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise StateError(f"state payload is malformed: {type(e).__name__}: {e}") from None
