"""Scopes: the Topology Manager's admission loops (kubelet ``scope_container.go``,
``scope_pod.go``, ``scope_none.go``), over any providers.

For each container (container scope) or once for the pod (pod scope): ask every provider for
hints, merge them under the policy, reject with ``TopologyAffinityError`` if the policy says
so, otherwise let every provider allocate inside the merged hint, in provider order. Errors
raised by ``allocate`` propagate with their kubelet reason (``SMTAlignmentError``,
``UnexpectedAdmissionError``).

These loops mutate the providers' state as the kubelet does. All-or-nothing admission is the
caller's job (the node runs them on a copy of its state and keeps the copy only on success).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

from numalign.engine.hints import ProviderHints, TopologyHint
from numalign.engine.policies import MergeResult, Policy, Scope, TopologyPolicy
from numalign.errors import TopologyAffinityError
from numalign.record import Record


class ContainerLike(Protocol):
    """What a scope needs of a container: its name (the pod's type is the caller's)."""

    @property
    def name(self) -> str: ...


P = TypeVar("P")
C = TypeVar("C", bound=ContainerLike)
P_contra = TypeVar("P_contra", contravariant=True)
C_contra = TypeVar("C_contra", contravariant=True)


class HintProvider(Protocol[P_contra, C_contra]):
    """A hint provider and allocator (kubelet ``HintProvider``), over any pod and container
    types (the node's are :class:`numalign.pods.Pod` and :class:`numalign.pods.Container`)."""

    name: str

    def container_hints(self, pod: P_contra, container: C_contra) -> ProviderHints:
        """Hints for one container (container scope)."""
        ...

    def pod_hints(self, pod: P_contra) -> ProviderHints:
        """Hints for the whole pod (pod scope)."""
        ...

    def allocate(self, pod: P_contra, container: C_contra, hint: TopologyHint) -> None:
        """Allocate the container's resources inside ``hint`` (kubelet ``Allocate``)."""
        ...


class Decision(Record):
    """The merged hint a container got, and (for ``--explain``) what each provider said."""

    __slots__ = ("container", "hint", "provider_hints")
    container: str
    hint: TopologyHint
    provider_hints: list[tuple[str, ProviderHints]]

    def __init__(
        self,
        container: str,
        hint: TopologyHint,
        provider_hints: list[tuple[str, ProviderHints]] | None = None,
    ) -> None:
        self.container = container
        self.hint = hint
        self.provider_hints = [] if provider_hints is None else provider_hints


#: a merge of the providers' hints: the policy's own (the kubelet's), or an engine mode's
#: (:func:`numalign.modes.merge`) answering the same best hint / admit pair
Merge = Callable[[Sequence[ProviderHints]], MergeResult]


class Rejected(TopologyAffinityError):
    """TopologyAffinityError carrying the decisions made so far (for explanations) and the
    refused merge's own words, if its mode has any (:attr:`MergeResult.reasons`: Koordinator's
    reasons; empty for the kubelet's merge)."""

    def __init__(self, decisions: list[Decision], result: MergeResult | None = None) -> None:
        super().__init__()
        self.decisions = decisions
        self.result = result

    @property
    def reasons(self) -> tuple[str, ...]:
        return () if self.result is None else self.result.reasons


def admit(
    policy: TopologyPolicy,
    scope: Scope,
    providers: Sequence[HintProvider[P, C]],
    pod: P,
    containers: Sequence[C],
    merge: Merge | None = None,
) -> list[Decision]:
    """Run the admission loop of ``scope`` for ``pod`` (its ``containers`` in the kubelet's
    order); returns one decision per container. ``merge`` replaces the policy's merge (an engine
    mode's rules over the same merge)."""
    if policy.policy is Policy.NONE:
        return _admit_none(providers, pod, containers)
    if scope is Scope.POD:
        return _admit_pod(merge or policy.merge, providers, pod, containers)
    return _admit_container(merge or policy.merge, providers, pod, containers)


def _admit_none(providers: Sequence[HintProvider[P, C]], pod: P, containers: Sequence[C]) -> list[Decision]:
    hint = TopologyHint(None, False)  # kubelet: GetAffinity of the none scope
    out = []
    for c in containers:
        for p in providers:
            p.allocate(pod, c, hint)
        out.append(Decision(c.name, hint))
    return out


def _admit_container(
    merge: Merge, providers: Sequence[HintProvider[P, C]], pod: P, containers: Sequence[C]
) -> list[Decision]:
    out: list[Decision] = []
    for c in containers:
        hints = [(p.name, p.container_hints(pod, c)) for p in providers]
        result = merge([h for _, h in hints])
        out.append(Decision(c.name, result.hint, hints))
        if not result.admit:
            raise Rejected(out, result)
        for p in providers:
            p.allocate(pod, c, result.hint)
    return out


def _admit_pod(
    merge: Merge, providers: Sequence[HintProvider[P, C]], pod: P, containers: Sequence[C]
) -> list[Decision]:
    hints = [(p.name, p.pod_hints(pod)) for p in providers]
    result = merge([h for _, h in hints])
    out = [Decision(c.name, result.hint, hints) for c in containers]
    if not result.admit:
        raise Rejected(out, result)
    for c in containers:
        for p in providers:
            p.allocate(pod, c, result.hint)
    return out
