"""Pods as the engine sees them: containers with integer requests and limits, QoS class.

Parsing of Kubernetes manifests (``v1`` Pod, List, multi-document YAML), quantity syntax and
the QoS / effective-request rules live here too (see ``spec/kubelet.md`` section 7).

Units inside the engine: ``cpu`` in millicores; ``memory``, ``hugepages-<size>`` and
``ephemeral-storage`` in bytes; extended resources (``nvidia.com/gpu``) as counts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum


class QOSClass(StrEnum):
    GUARANTEED = "Guaranteed"
    BURSTABLE = "Burstable"
    BEST_EFFORT = "BestEffort"


class ContainerKind(StrEnum):
    INIT = "init"  # a regular init container: runs to completion before the next
    SIDECAR = "sidecar"  # a restartable init container (restartPolicy: Always)
    APP = "app"


@dataclass(frozen=True)
class Container:
    name: str
    kind: ContainerKind
    requests: Mapping[str, int] = field(default_factory=dict)
    limits: Mapping[str, int] = field(default_factory=dict)

    @property
    def is_init(self) -> bool:
        return self.kind is not ContainerKind.APP


@dataclass(frozen=True)
class Pod:
    namespace: str
    name: str
    uid: str
    qos: QOSClass
    #: init containers (regular and sidecar) in spec order, then app containers in spec order
    containers: tuple[Container, ...]
    annotations: Mapping[str, str] = field(default_factory=dict)
    #: KEP-693 ``spec.topologyPolicy`` (per-pod policy), when present
    topology_policy: str | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def init_containers(self) -> tuple[Container, ...]:
        return tuple(c for c in self.containers if c.is_init)

    @property
    def app_containers(self) -> tuple[Container, ...]:
        return tuple(c for c in self.containers if not c.is_init)
