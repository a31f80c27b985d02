"""Pods as the engine sees them: parsed once from manifests (strictly, like ``kubectl
--validate=strict``), with their QoS class, effective requests and the per-pod topology fields
and annotations decoded into typed values."""

from numalign.pods.model import (
    Container,
    ContainerKind,
    Pod,
    QOSClass,
    compute_qos,
    default_uid,
    effective_pod_limits,
    effective_pod_requests,
    guaranteed_cpus,
    parse_pods,
    pod_guaranteed_cpus,
    pod_qos,
    read_pod_files,
)

__all__ = [
    "Container",
    "ContainerKind",
    "Pod",
    "QOSClass",
    "compute_qos",
    "default_uid",
    "effective_pod_limits",
    "effective_pod_requests",
    "guaranteed_cpus",
    "parse_pods",
    "pod_guaranteed_cpus",
    "pod_qos",
    "read_pod_files",
]
