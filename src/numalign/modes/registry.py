"""The registry of engine modes: one line per scheduler family, and the mode-level merge."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from numalign.engine.hints import ProviderHints
from numalign.engine.policies import TopologyPolicy
from numalign.modes.family import Family
from numalign.modes.koordinator import family as koordinator
from numalign.modes.koordinator.numa import NumaNodeStatus
from numalign.modes.kubelet import family as kubelet
from numalign.modes.merge import ModeResult
from numalign.modes.merge import merge as merge_rules
from numalign.modes.rules import MODE_LABEL, Mode, ModeRules, node_mode, parse_mode
from numalign.modes.volcano import family as volcano
from numalign.pods.annotations import Exclusive

#: every family, by mode: adding a mode is a folder and a line here
FAMILIES: dict[Mode, Family] = {
    Mode.KUBELET: kubelet.FAMILY,
    Mode.KOORDINATOR: koordinator.FAMILY,
    Mode.VOLCANO: volcano.FAMILY,
}

#: each mode's rule row over the merge
RULES: Mapping[Mode, ModeRules] = {mode: family.rules for mode, family in FAMILIES.items()}


def family_of(labels: Mapping[str, str], mode: Mode | None = None) -> Family:
    """The family of a node with these labels (``mode`` overrides the label: a profile's)."""
    return FAMILIES[mode if mode is not None else node_mode(labels)]


def merge(
    mode: Mode,
    policy: TopologyPolicy,
    providers: Sequence[ProviderHints],
    exclusive: Exclusive | None = None,
    status: Mapping[int, NumaNodeStatus] | None = None,
    score: Callable[[int], int] | None = None,
) -> ModeResult:
    """Merge provider hints under ``policy`` with ``mode``'s rule row
    (:func:`numalign.modes.merge.merge`)."""
    return merge_rules(FAMILIES[mode].rules, policy, providers, exclusive, status, score)


__all__ = [
    "FAMILIES",
    "MODE_LABEL",
    "RULES",
    "Family",
    "Mode",
    "ModeResult",
    "ModeRules",
    "family_of",
    "merge",
    "node_mode",
    "parse_mode",
]
