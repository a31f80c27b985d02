"""The provider interface, after the kubelet's ``HintProvider``.

A provider manages one kind of resource on one machine. It keeps its allocation state in a
mutable state object of its own (``state``), which the node's ``NodeState`` composes,
snapshots (``copy``) and persists (``to_dict`` / ``from_dict``). Hints never mutate state;
``allocate`` mutates it only on success (it raises :class:`numalign.errors.AdmissionError`
before changing anything).
"""

from __future__ import annotations

from typing import Any, Protocol

from numalign.engine.scopes import HintProvider
from numalign.pods import Container, Pod


class ProviderState(Protocol):
    def copy(self) -> ProviderState: ...

    def to_dict(self) -> dict[str, Any]: ...


class Provider(HintProvider[Pod, Container], Protocol):
    """One hint provider + allocator of a node (kubelet: device, CPU, memory manager)."""

    def release_pod(self, pod_uid: str) -> None:
        """Free everything held by the pod."""
        ...
