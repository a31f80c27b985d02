"""numalign: the kubelet's NUMA alignment as one Python engine.

The public API, for a Python user::

    import numalign

    machine = numalign.read_machine_file("examples/fig1.yaml")   # or load_sysfs("/").machine
    node = numalign.Node(machine)
    for pod in numalign.read_pod_files(["examples/fig1-pods.yaml"]):
        result = node.admit(pod)            # a PodResult: admitted, reason, per-container CPUs...
    numalign.numa_amounts(node)             # per NUMA node: capacity / allocatable / available

Names are loaded on first use (``numalign.Node`` imports the node side only then), so
``import numalign`` stays cheap. Everything not listed here is internal and may change.
"""

from __future__ import annotations

from numalign.lazy_exports import lazy_getattr

#: ``typing.TYPE_CHECKING`` without importing :mod:`typing` (start-up time): static checkers
#: take any ``TYPE_CHECKING`` as true
TYPE_CHECKING = False

__version__ = "0.1.0"

#: public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    # errors: one family, stable ``reason``
    "NumalignError": "numalign.errors",
    "InputError": "numalign.errors",
    "StateError": "numalign.errors",
    "AdmissionError": "numalign.errors",
    "TopologyAffinityError": "numalign.errors",
    "SMTAlignmentError": "numalign.errors",
    "UnexpectedAdmissionError": "numalign.errors",
    # the machine and where it comes from
    "Machine": "numalign.machine.model",
    "NumaNode": "numalign.machine.model",
    "Cpu": "numalign.machine.model",
    "Device": "numalign.machine.model",
    "KubeletConfig": "numalign.machine.model",
    "load_machine": "numalign.machine.spec",
    "read_machine_file": "numalign.machine.spec",
    "load_sysfs": "numalign.machine.sysfs",
    "load_hwloc_xml": "numalign.machine.hwloc",
    "load_nrt": "numalign.machine.nrt",
    # requests
    "Pod": "numalign.pods",
    "Container": "numalign.pods",
    "QOSClass": "numalign.pods",
    "parse_pods": "numalign.pods",
    "read_pod_files": "numalign.pods",
    # the node: admission, state, usage
    "Node": "numalign.node.admission",
    "PodResult": "numalign.node.admission",
    "ContainerResult": "numalign.node.admission",
    "NodeState": "numalign.node.state",
    "PodRecord": "numalign.node.state",
    "node_session": "numalign.node.session",
    "numa_amounts": "numalign.node.usage",
    "pod_usage": "numalign.node.usage",
    "pod_numa_nodes": "numalign.node.usage",
    # the Topology Manager's vocabulary
    "TopologyHint": "numalign.engine.hints",
    "GeneratedHints": "numalign.engine.hints",
    "ProviderHints": "numalign.engine.hints",
    "Policy": "numalign.engine.policies",
    "Scope": "numalign.engine.policies",
    "PolicyOptions": "numalign.engine.policies",
    "TopologyPolicy": "numalign.engine.policies",
    "MergeResult": "numalign.engine.policies",
    "parse_policy": "numalign.engine.policies",
    "parse_options": "numalign.engine.policies",
    "mask_of": "numalign.engine.bitmask",
    "ids_of": "numalign.engine.bitmask",
    "format_mask": "numalign.engine.bitmask",
}

__all__ = [
    "AdmissionError",
    "Container",
    "ContainerResult",
    "Cpu",
    "Device",
    "GeneratedHints",
    "InputError",
    "KubeletConfig",
    "Machine",
    "MergeResult",
    "Node",
    "NodeState",
    "NumaNode",
    "NumalignError",
    "Pod",
    "PodRecord",
    "PodResult",
    "Policy",
    "PolicyOptions",
    "ProviderHints",
    "QOSClass",
    "SMTAlignmentError",
    "Scope",
    "StateError",
    "TopologyAffinityError",
    "TopologyHint",
    "TopologyPolicy",
    "UnexpectedAdmissionError",
    "format_mask",
    "ids_of",
    "load_hwloc_xml",
    "load_machine",
    "load_nrt",
    "load_sysfs",
    "mask_of",
    "node_session",
    "numa_amounts",
    "parse_options",
    "parse_pods",
    "parse_policy",
    "pod_numa_nodes",
    "pod_usage",
    "read_machine_file",
    "read_pod_files",
]


__getattr__ = lazy_getattr(__name__, _EXPORTS)


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])


if TYPE_CHECKING:  # static checkers see the real names
    from numalign.engine.bitmask import format_mask, ids_of, mask_of
    from numalign.engine.hints import GeneratedHints, ProviderHints, TopologyHint
    from numalign.engine.policies import (
        MergeResult,
        Policy,
        PolicyOptions,
        Scope,
        TopologyPolicy,
        parse_options,
        parse_policy,
    )
    from numalign.errors import (
        AdmissionError,
        InputError,
        NumalignError,
        SMTAlignmentError,
        StateError,
        TopologyAffinityError,
        UnexpectedAdmissionError,
    )
    from numalign.machine.hwloc import load_hwloc_xml
    from numalign.machine.model import Cpu, Device, KubeletConfig, Machine, NumaNode
    from numalign.machine.nrt import load_nrt
    from numalign.machine.spec import load_machine, read_machine_file
    from numalign.machine.sysfs import load_sysfs
    from numalign.node.admission import ContainerResult, Node, PodResult
    from numalign.node.session import node_session
    from numalign.node.state import NodeState, PodRecord
    from numalign.node.usage import numa_amounts, pod_numa_nodes, pod_usage
    from numalign.pods import Container, Pod, QOSClass, parse_pods, read_pod_files
