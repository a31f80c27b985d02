"""The pod's own topology requests, decoded from its spec and annotations into typed values.

Each source is decoded once per pod object, when first asked (:class:`numalign.pods.Pod`'s
``own_policy``, ``koordinator_numa_spec`` and ``koordinator_resource_spec``), and a malformed
value is a one-line :class:`~numalign.errors.InputError` naming the annotation. Decoding is lazy
on purpose: the kubelet ignores annotations it does not read, so a pod carrying a malformed
Koordinator annotation is still admitted by a kubelet node; only a decision that reads the
annotation refuses it.

Sources:

* the pod's own policy (KEP-693 ``dynamic`` nodes), first found wins: ``spec.topology.policy``
  (or ``spec.topologyPolicy``), annotation ``volcano.sh/numa-topology-policy`` (kubelet policy
  names), annotation ``scheduling.koordinator.sh/numa-topology-spec`` (JSON
  ``{"numaTopologyPolicy": "SingleNUMANode", "singleNUMANodeExclusive": "Required"}``);
* Koordinator's ``numa-topology-spec`` as Koordinator's scheduler reads it (policy and
  single-NUMA exclusivity);
* Koordinator's ``scheduling.koordinator.sh/resource-spec`` (CPU bind and exclusive policies).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypeVar

from numalign.engine.policies import Policy, Scope, parse_policy
from numalign.errors import InputError
from numalign.inputs.documents import loads_json

VOLCANO_ANNOTATION = "volcano.sh/numa-topology-policy"
KOORDINATOR_ANNOTATION = "scheduling.koordinator.sh/numa-topology-spec"
RESOURCE_SPEC = "scheduling.koordinator.sh/resource-spec"

E = TypeVar("E", bound=StrEnum)

#: (policy, implied scope or None) a pod asks for, or None
OwnPolicy = tuple[Policy, Scope | None] | None


def own_policy(topology_policy: str | None, annotations: Mapping[str, str], where: str) -> OwnPolicy:
    """The policy the pod asks for (first source found), or ``None`` if it asks for none.
    ``where`` prefixes the field of an error (the pod's key)."""
    if topology_policy is not None:
        return parse_policy(topology_policy, f"{where}: spec.topologyPolicy")
    if VOLCANO_ANNOTATION in annotations:
        return parse_policy(annotations[VOLCANO_ANNOTATION],
                            f"{where}: metadata.annotations[{VOLCANO_ANNOTATION}]")
    if KOORDINATOR_ANNOTATION in annotations:
        field = f"{where}: metadata.annotations[{KOORDINATOR_ANNOTATION}]"
        spec = _json_object(annotations[KOORDINATOR_ANNOTATION], field)
        return parse_policy(spec.get("numaTopologyPolicy", ""), f"{field}.numaTopologyPolicy")
    return None


def _json_object(raw: str, field: str) -> dict[str, Any]:
    doc = loads_json(raw, field)  # bounded: depth, size, encoding
    if not isinstance(doc, dict):
        raise InputError("must be a JSON object", field)
    return doc


# ------------------------------------------------------------------ Koordinator numa-topology-spec


class Exclusive(StrEnum):
    """Koordinator ``NumaTopologyExclusive`` (``numaTopologyPolicy.singleNUMANodeExclusive``)."""

    REQUIRED = "Required"
    PREFERRED = "Preferred"


@dataclass(frozen=True)
class PodNumaSpec:
    """The ``numa-topology-spec`` annotation as Koordinator's scheduler reads it."""

    policy: Policy | None
    #: None: no exclusivity check (neither a policy nor ``singleNUMANodeExclusive`` given)
    exclusive: Exclusive | None


NO_NUMA_SPEC = PodNumaSpec(None, None)


def numa_spec(annotations: Mapping[str, str], where: str) -> PodNumaSpec:
    """``""``/absent is no policy; the exclusivity is ``Required`` when not given and the pod has
    a policy, else none (plugin.go Filter: ``podNUMAExclusive == "" && podNUMATopologyPolicy !=
    ""``); ``None`` as a policy counts as no policy."""
    raw = annotations.get(KOORDINATOR_ANNOTATION)
    if not raw:
        return NO_NUMA_SPEC
    field = f"{where}: metadata.annotations[{KOORDINATOR_ANNOTATION}]"
    spec = _json_object(raw, field)
    pol = spec.get("numaTopologyPolicy")
    policy = parse_policy(pol, f"{field}.numaTopologyPolicy")[0] if pol else None
    policy = policy if policy is not Policy.NONE else None
    exc = spec.get("singleNUMANodeExclusive") or ("Required" if policy is not None else None)
    try:
        exclusive = None if exc is None else Exclusive(exc)
    except ValueError:
        raise InputError(f"must be Required or Preferred, got {exc!r}",
                         f"{field}.singleNUMANodeExclusive") from None
    return PodNumaSpec(policy, exclusive)


# ------------------------------------------------------------------ Koordinator resource-spec


class BindPolicy(StrEnum):
    DEFAULT = "Default"
    FULL_PCPUS = "FullPCPUs"
    SPREAD_BY_PCPUS = "SpreadByPCPUs"
    CONSTRAINED_BURST = "ConstrainedBurst"


class ExclusivePolicy(StrEnum):
    NONE = "None"
    PCPU_LEVEL = "PCPULevel"
    NUMA_NODE_LEVEL = "NUMANodeLevel"


@dataclass(frozen=True)
class ResourceSpec:
    """The pod's ``scheduling.koordinator.sh/resource-spec`` annotation."""

    required: BindPolicy | None = None
    preferred: BindPolicy | None = None
    exclusive: ExclusivePolicy | None = None


def parse_enum(kind: type[E], raw: object, field: str) -> E | None:
    """``raw`` as a member of ``kind`` (``None``/``""``: None); otherwise a one-line error
    listing the known values."""
    if raw is None or raw == "":
        return None
    if not isinstance(raw, str):
        raise InputError(f"must be a string, got {type(raw).__name__}", field)
    try:
        return kind(raw)
    except ValueError:
        known = ", ".join(m.value for m in kind)
        raise InputError(f"unknown value {raw!r} (known: {known})", field) from None


def parse_resource_spec(annotations: Mapping[str, str], where: str = "metadata.annotations") -> ResourceSpec:
    """Koordinator ``GetResourceSpec``: absent -> empty; bad JSON or values -> InputError.
    ``where`` names the annotations (``<pod key>: metadata.annotations``)."""
    raw = annotations.get(RESOURCE_SPEC)
    if raw is None:
        return ResourceSpec()
    field = f"{where}[{RESOURCE_SPEC}]"
    doc = _json_object(raw, field)
    return ResourceSpec(
        parse_enum(BindPolicy, doc.get("requiredCPUBindPolicy"), f"{field}.requiredCPUBindPolicy"),
        parse_enum(BindPolicy, doc.get("preferredCPUBindPolicy"), f"{field}.preferredCPUBindPolicy"),
        parse_enum(ExclusivePolicy, doc.get("preferredCPUExclusivePolicy"),
                   f"{field}.preferredCPUExclusivePolicy"),
    )


__all__ = [
    "KOORDINATOR_ANNOTATION",
    "NO_NUMA_SPEC",
    "RESOURCE_SPEC",
    "VOLCANO_ANNOTATION",
    "BindPolicy",
    "Exclusive",
    "ExclusivePolicy",
    "OwnPolicy",
    "PodNumaSpec",
    "ResourceSpec",
    "numa_spec",
    "own_policy",
    "parse_enum",
    "parse_resource_spec",
]
