"""The provider interface, after the kubelet's ``HintProvider``.

A provider manages one kind of resource on one machine. It keeps its allocation state in a
mutable state object of its own (``state``), which the node's ``NodeState`` composes,
snapshots (``copy``) and persists (``to_dict`` / ``from_dict``). Hints never mutate state;
``allocate`` mutates it only on success (it raises :class:`numalign.errors.AdmissionError`
before changing anything).
"""

from __future__ import annotations

from typing import Any, Protocol

from numalign.engine.hints import ProviderHints, TopologyHint
from numalign.pods import Container, Pod


class ProviderState(Protocol):
    def copy(self) -> ProviderState: ...

    def to_dict(self) -> dict[str, Any]: ...


class Provider(Protocol):
    """One hint provider + allocator (kubelet: device, CPU, memory manager)."""

    name: str

    def container_hints(self, pod: Pod, container: Container) -> ProviderHints:
        """Hints for one container (container scope)."""
        ...

    def pod_hints(self, pod: Pod) -> ProviderHints:
        """Hints for the whole pod (pod scope)."""
        ...

    def allocate(self, pod: Pod, container: Container, hint: TopologyHint) -> None:
        """Allocate the container's resources inside ``hint`` (kubelet ``Allocate``)."""
        ...

    def release_pod(self, pod_uid: str) -> None:
        """Free everything held by the pod."""
        ...
