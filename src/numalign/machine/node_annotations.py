"""Node annotations numalign reads, decoded into typed values when a machine is loaded.

* ``kubelet.koordinator.sh/cpu-manager-policy`` - koordlet's report of the kubelet's CPU manager
  policy, options and reserved CPUs (koordinator ``apis/extension/numa_aware.go``
  ``KubeletCPUManagerPolicy``); Koordinator's CPU manager reads it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from numalign.errors import InputError
from numalign.inputs.cpulist import parse_cpulist
from numalign.inputs.documents import loads_json

#: the kubelet's CPU manager policy as koordlet reports it on its NodeResourceTopology
KUBELET_CPU_MANAGER_POLICY = "kubelet.koordinator.sh/cpu-manager-policy"


@dataclass(frozen=True)
class KubeletCpuPolicy:
    """The ``kubelet.koordinator.sh/cpu-manager-policy`` annotation
    (``apis/extension/numa_aware.go`` ``KubeletCPUManagerPolicy``): the kubelet's CPU manager
    policy, its options and its reserved CPUs, as koordlet reports them."""

    policy: str = ""
    options: Mapping[str, str] = field(default_factory=dict)
    reserved_cpus: frozenset[int] = frozenset()

    @property
    def full_pcpus_only(self) -> bool:
        """``GetNodeCPUBindPolicy``: ``static`` with the option ``full-pcpus-only`` exactly
        ``"true"`` makes the node ``FullPCPUsOnly``."""
        return self.policy == "static" and self.options.get("full-pcpus-only") == "true"


def parse_kubelet_cpu_policy(annotations: Mapping[str, str], where: str = "annotations") -> KubeletCpuPolicy:
    """``GetKubeletCPUManagerPolicy`` (absent -> empty policy) plus the ``cpuset.Parse`` of its
    ``reservedCPUs`` (``topology_options.go``). Upstream logs a bad value and goes on without
    it; numalign refuses it: bad JSON, types or cpulist -> one-line :class:`InputError`."""
    raw = annotations.get(KUBELET_CPU_MANAGER_POLICY)
    if raw is None:
        return KubeletCpuPolicy()
    field_ = f"{where}[{KUBELET_CPU_MANAGER_POLICY}]"
    doc = loads_json(raw, field_)  # bounded: depth, size, encoding
    if not isinstance(doc, dict):
        raise InputError("must be a JSON object", field_)
    policy = doc.get("policy") or ""
    if not isinstance(policy, str):
        raise InputError(f"must be a string, got {type(policy).__name__}", f"{field_}.policy")
    options = doc.get("options") or {}
    if not isinstance(options, dict) or not all(isinstance(v, str) for v in options.values()):
        raise InputError("must be an object of string values", f"{field_}.options")
    reserved = doc.get("reservedCPUs") or ""
    if not isinstance(reserved, str):
        raise InputError(f"must be a string, got {type(reserved).__name__}", f"{field_}.reservedCPUs")
    cpus = frozenset(parse_cpulist(reserved, f"{field_}.reservedCPUs")) if reserved else frozenset()
    return KubeletCpuPolicy(policy, dict(options), cpus)


__all__ = ["KUBELET_CPU_MANAGER_POLICY", "KubeletCpuPolicy", "parse_kubelet_cpu_policy"]
