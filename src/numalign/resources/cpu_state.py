"""The CPU manager's state (kubelet ``cpumanager/state``): the shared pool, the exclusive
assignments and the CPUs a pod may reuse, with the reader methods everyone else uses and the
writer used for usage observed elsewhere. Decisions live in :mod:`numalign.resources.cpu`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from numalign.errors import InputError
from numalign.inputs.cpulist import format_cpulist, parse_cpulist
from numalign.record import Record

POLICY_NONE = "none"
POLICY_STATIC = "static"
#: Koordinator's CPU exclusive policies a pod's CPUs can be held under (``None`` is not kept)
EXCLUSIVE_POLICIES = ("PCPULevel", "NUMANodeLevel")


class CpuState(Record):
    """What the CPU manager has handed out (kubelet ``cpu_manager_state`` + ``cpusToReuse``).

    ``default_set`` is the shared pool (reserved CPUs included unless strict reservation);
    ``assignments`` maps pod uid -> container name -> exclusive CPUs; ``cpus_to_reuse`` holds
    the CPUs of a pod's finished init containers that its later containers may take (kubelet
    keeps it in memory only, for the pod being admitted). ``exclusive`` (``koordinator`` mode)
    maps a pod uid to the Koordinator CPU exclusive policy its CPUs are held under
    (:data:`EXCLUSIVE_POLICIES`), which later pods' CPU choice avoids; empty in ``kubelet`` mode.
    """

    __slots__ = ("default_set", "assignments", "cpus_to_reuse", "policy_name", "exclusive")
    default_set: set[int]
    assignments: dict[str, dict[str, frozenset[int]]]
    cpus_to_reuse: dict[str, set[int]]
    policy_name: str
    exclusive: dict[str, str]

    def __init__(
        self,
        default_set: set[int] | None = None,
        assignments: dict[str, dict[str, frozenset[int]]] | None = None,
        cpus_to_reuse: dict[str, set[int]] | None = None,
        policy_name: str = POLICY_STATIC,
        exclusive: dict[str, str] | None = None,
    ) -> None:
        self.default_set = set() if default_set is None else default_set
        self.assignments = {} if assignments is None else assignments
        self.cpus_to_reuse = {} if cpus_to_reuse is None else cpus_to_reuse
        self.policy_name = policy_name
        self.exclusive = {} if exclusive is None else exclusive

    def copy(self) -> CpuState:
        return CpuState(
            set(self.default_set),
            {uid: dict(cs) for uid, cs in self.assignments.items()},
            {uid: set(s) for uid, s in self.cpus_to_reuse.items()},
            self.policy_name,
            dict(self.exclusive),
        )

    def exclusive_cpus(self) -> dict[int, str]:
        """Each CPU held under an exclusive policy -> that policy (Koordinator's
        ``allocatedCPUs[cpu].ExclusivePolicy``)."""
        out: dict[int, str] = {}
        for uid, policy in self.exclusive.items():
            for cpus in self.assignments.get(uid, {}).values():
                out.update(dict.fromkeys(cpus, policy))
        return out

    def cpuset(self, pod_uid: str, container: str) -> frozenset[int] | None:
        return self.assignments.get(pod_uid, {}).get(container)

    def assigned_cpus(self) -> frozenset[int]:
        out: set[int] = set()
        for cs in self.assignments.values():
            for s in cs.values():
                out |= s
        return frozenset(out)

    # -- readers (the kubelet's state.Reader): nobody outside resources/ reads the tables --

    def shared_pool(self) -> frozenset[int]:
        """kubelet ``GetDefaultCPUSet``: the shared pool (reserved CPUs included)."""
        return frozenset(self.default_set)

    def pod_cpus(self, pod_uid: str) -> dict[str, frozenset[int]]:
        """Container name -> exclusive CPUs of one pod (kubelet ``GetCPUSet`` per container)."""
        return dict(self.assignments.get(pod_uid, {}))

    def pod_exclusive(self, pod_uid: str) -> str | None:
        """The Koordinator CPU exclusive policy ``pod_uid``'s CPUs are held under, if any."""
        return self.exclusive.get(pod_uid)

    def pod_uids(self) -> frozenset[str]:
        return frozenset(self.assignments)

    # -- writers used for usage observed elsewhere (an NRT, a checkpoint) ------------------

    def occupy(self, pod_uid: str, container: str, cpus: frozenset[int]) -> None:
        """Record ``cpus`` as exclusively held by ``pod_uid``/``container`` (taken from the
        shared pool); every CPU must be in the pool or already held by the same pod (a pod's
        later containers reuse its init containers' CPUs)."""
        mine = {c for cs in self.assignments.get(pod_uid, {}).values() for c in cs}
        missing = cpus - self.default_set - mine
        if missing:
            raise InputError(
                f"CPUs {format_cpulist(missing)} are not in the shared pool", "cpus"
            )
        self.default_set -= cpus
        held = self.assignments.setdefault(pod_uid, {})
        held[container] = held.get(container, frozenset()) | cpus

    def hold_exclusive(self, pod_uid: str, policy: str) -> None:
        """Record that ``pod_uid``'s CPUs are held under a Koordinator exclusive policy."""
        if policy not in EXCLUSIVE_POLICIES:
            raise InputError(f"expected {' or '.join(EXCLUSIVE_POLICIES)}, got {policy!r}", "cpuExclusivePolicy")
        self.exclusive[pod_uid] = policy

    def to_dict(self) -> dict[str, Any]:
        """JSON form, close to the kubelet checkpoint (cpulist strings, no checksum)."""
        d: dict[str, Any] = {
            "policyName": self.policy_name,
            "defaultCpuSet": format_cpulist(self.default_set),
        }
        if self.assignments:
            d["entries"] = {
                uid: {name: format_cpulist(s) for name, s in sorted(cs.items())}
                for uid, cs in sorted(self.assignments.items())
            }
        if self.cpus_to_reuse:
            d["cpusToReuse"] = {
                uid: format_cpulist(s) for uid, s in sorted(self.cpus_to_reuse.items())
            }
        if self.exclusive:
            d["cpuExclusivePolicy"] = dict(sorted(self.exclusive.items()))
        return d

    @staticmethod
    def from_dict(d: Mapping[str, Any]) -> CpuState:
        if not isinstance(d, Mapping):
            raise InputError("expected a mapping", "cpu")
        policy = d.get("policyName", POLICY_STATIC)
        if not isinstance(policy, str):
            raise InputError(f"expected a string, got {policy!r}", "cpu.policyName")
        default = parse_cpulist(d.get("defaultCpuSet", ""), "cpu.defaultCpuSet")
        assignments: dict[str, dict[str, frozenset[int]]] = {}
        entries = d.get("entries") or {}
        if not isinstance(entries, Mapping):
            raise InputError("expected a mapping of pod uid to containers", "cpu.entries")
        for uid, cs in entries.items():
            if not isinstance(cs, Mapping):
                raise InputError(
                    "expected a mapping of container name to cpuset", f"cpu.entries.{uid}"
                )
            assignments[str(uid)] = {
                str(name): parse_cpulist(v, f"cpu.entries.{uid}.{name}") for name, v in cs.items()
            }
        reuse_raw = d.get("cpusToReuse") or {}
        if not isinstance(reuse_raw, Mapping):
            raise InputError("expected a mapping of pod uid to cpuset", "cpu.cpusToReuse")
        reuse = {
            str(uid): set(parse_cpulist(v, f"cpu.cpusToReuse.{uid}"))
            for uid, v in reuse_raw.items()
        }
        raw_exclusive = d.get("cpuExclusivePolicy") or {}
        if not isinstance(raw_exclusive, Mapping):
            raise InputError("expected a mapping of pod uid to exclusive policy", "cpu.cpuExclusivePolicy")
        exclusive: dict[str, str] = {}
        for uid, value in raw_exclusive.items():
            if value not in EXCLUSIVE_POLICIES:
                shown = repr(value) if isinstance(value, str) and len(value) <= 64 else type(value).__name__
                raise InputError(
                    f"expected {' or '.join(EXCLUSIVE_POLICIES)}, got {shown}", f"cpu.cpuExclusivePolicy.{uid}"
                )
            exclusive[str(uid)] = value
        return CpuState(set(default), assignments, reuse, policy, exclusive)
