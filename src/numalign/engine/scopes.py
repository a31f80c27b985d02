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
from dataclasses import dataclass, field

from numalign.engine.hints import ProviderHints, TopologyHint
from numalign.engine.policies import MergeResult, Policy, Scope, TopologyPolicy
from numalign.errors import TopologyAffinityError
from numalign.pods import Pod
from numalign.resources.base import Provider


@dataclass
class Decision:
    """The merged hint a container got, and (for ``--explain``) what each provider said."""

    container: str
    hint: TopologyHint
    provider_hints: list[tuple[str, ProviderHints]] = field(default_factory=list)


#: a merge of the providers' hints: the policy's own (the kubelet's), or an engine mode's
#: (:func:`numalign.modes.merge`) answering the same best hint / admit pair
Merge = Callable[[Sequence[ProviderHints]], MergeResult]


class Rejected(TopologyAffinityError):
    """TopologyAffinityError carrying the decisions made so far (for explanations)."""

    def __init__(self, decisions: list[Decision]) -> None:
        super().__init__()
        self.decisions = decisions


def admit(
    policy: TopologyPolicy, scope: Scope, providers: Sequence[Provider], pod: Pod, merge: Merge | None = None
) -> list[Decision]:
    """Run the admission loop of ``scope`` for ``pod``; returns one decision per container.
    ``merge`` replaces the policy's merge (an engine mode's rules over the same merge)."""
    if policy.policy is Policy.NONE:
        return _admit_none(providers, pod)
    if scope is Scope.POD:
        return _admit_pod(merge or policy.merge, providers, pod)
    return _admit_container(merge or policy.merge, providers, pod)


def _admit_none(providers: Sequence[Provider], pod: Pod) -> list[Decision]:
    hint = TopologyHint(None, False)  # kubelet: GetAffinity of the none scope
    out = []
    for c in pod.containers:
        for p in providers:
            p.allocate(pod, c, hint)
        out.append(Decision(c.name, hint))
    return out


def _admit_container(merge: Merge, providers: Sequence[Provider], pod: Pod) -> list[Decision]:
    out: list[Decision] = []
    for c in pod.containers:
        hints = [(p.name, p.container_hints(pod, c)) for p in providers]
        result = merge([h for _, h in hints])
        out.append(Decision(c.name, result.hint, hints))
        if not result.admit:
            raise Rejected(out)
        for p in providers:
            p.allocate(pod, c, result.hint)
    return out


def _admit_pod(merge: Merge, providers: Sequence[Provider], pod: Pod) -> list[Decision]:
    hints = [(p.name, p.pod_hints(pod)) for p in providers]
    result = merge([h for _, h in hints])
    out = [Decision(c.name, result.hint, hints) for c in pod.containers]
    if not result.admit:
        raise Rejected(out)
    for c in pod.containers:
        for p in providers:
            p.allocate(pod, c, result.hint)
    return out
