"""Engine modes: which scheduler family's rules a node decides by, and the rule row each family
sets over the one merge (:mod:`numalign.modes.merge`).

The mode of a node comes from its ``numalign.io/engine-mode`` label (``kubelet`` when absent) or
from a scheduler profile; the families themselves are registered in :mod:`numalign.modes`.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum

from numalign.errors import InputError
from numalign.record import Record, set_field


class Mode(StrEnum):
    KUBELET = "kubelet"
    KOORDINATOR = "koordinator"
    VOLCANO = "volcano"


#: a node label (or NRT attribute) choosing the engine mode of a node (numalign's own)
MODE_LABEL = "numalign.io/engine-mode"


class ModeRules(Record, frozen=True):
    """One mode's rules over the shared merge."""

    __slots__ = (
        "mode",
        "legacy_merge",
        "snn_all_nodes_to_none",
        "best_effort_unsatisfied_to_all",
        "reports_unsatisfied",
        "task_policy_must_match_node",
        "pod_policy_annotations",
        "node_policy_label",
    )
    mode: Mode
    #: preferred = every picked hint preferred, without the equal-affinity rule
    legacy_merge: bool
    #: single-numa-node turns an all-nodes result into "no affinity" (None)
    snn_all_nodes_to_none: bool
    #: best-effort replaces an unsatisfied best hint by the all-nodes affinity
    best_effort_unsatisfied_to_all: bool
    #: the merge reports ``unsatisfied`` and per-resource reasons
    reports_unsatisfied: bool
    #: a pod with a policy is only placed on a node with the same policy
    task_policy_must_match_node: bool
    #: where the pod's own policy is read (annotation keys, in order)
    pod_policy_annotations: tuple[str, ...]
    #: the node label holding the node's policy, if the mode reads one
    node_policy_label: str | None

    def __init__(
        self,
        mode: Mode,
        legacy_merge: bool,
        snn_all_nodes_to_none: bool,
        best_effort_unsatisfied_to_all: bool,
        reports_unsatisfied: bool,
        task_policy_must_match_node: bool,
        pod_policy_annotations: tuple[str, ...],
        node_policy_label: str | None,
    ) -> None:
        set_field(self, "mode", mode)
        set_field(self, "legacy_merge", legacy_merge)
        set_field(self, "snn_all_nodes_to_none", snn_all_nodes_to_none)
        set_field(self, "best_effort_unsatisfied_to_all", best_effort_unsatisfied_to_all)
        set_field(self, "reports_unsatisfied", reports_unsatisfied)
        set_field(self, "task_policy_must_match_node", task_policy_must_match_node)
        set_field(self, "pod_policy_annotations", pod_policy_annotations)
        set_field(self, "node_policy_label", node_policy_label)


def parse_mode(value: object, field: str = "mode") -> Mode:
    if value is None:
        return Mode.KUBELET
    try:
        return Mode(str(value))
    except ValueError:
        raise InputError(f"unknown engine mode {value!r} (known: {', '.join(m.value for m in Mode)})", field) from None

def node_mode(labels: Mapping[str, str], field: str = f"labels[{MODE_LABEL}]") -> Mode:
    """A node's engine mode from its ``numalign.io/engine-mode`` label (default ``kubelet``)."""
    raw = labels.get(MODE_LABEL)
    return parse_mode(raw or None, field)


__all__ = ["MODE_LABEL", "Mode", "ModeRules", "node_mode", "parse_mode"]
