"""The registry of engine modes: one line per scheduler family, and the mode-level merge.

A family's module is imported when a node of that family is first resolved (or its rule row
first read): ``numalign admit`` on a kubelet node never loads the Koordinator or Volcano
managers.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

from numalign.engine.hints import ProviderHints
from numalign.engine.policies import TopologyPolicy
from numalign.modes.family import Family
from numalign.modes.rules import MODE_LABEL, Mode, ModeRules, node_mode, parse_mode

if TYPE_CHECKING:
    from numalign.modes.koordinator.numa import NumaNodeStatus
    from numalign.modes.merge import ModeResult
    from numalign.pods.annotations import Exclusive

#: every family, by mode: the module whose ``FAMILY`` it is. Adding a mode is a folder and a
#: line here.
FAMILY_MODULES: dict[Mode, str] = {
    Mode.KUBELET: "numalign.modes.kubelet.family",
    Mode.KOORDINATOR: "numalign.modes.koordinator.family",
    Mode.VOLCANO: "numalign.modes.volcano.family",
}


class _Families(Mapping[Mode, Family]):
    """Mode -> :class:`Family`, each imported on first use."""

    def __init__(self) -> None:
        self._loaded: dict[Mode, Family] = {}

    def __getitem__(self, mode: Mode) -> Family:
        family = self._loaded.get(mode)
        if family is None:
            family = importlib.import_module(FAMILY_MODULES[mode]).FAMILY
            assert isinstance(family, Family) and family.mode is mode, mode
            self._loaded[mode] = family
        return family

    def __iter__(self) -> Iterator[Mode]:
        return iter(FAMILY_MODULES)

    def __len__(self) -> int:
        return len(FAMILY_MODULES)


class _Rules(Mapping[Mode, ModeRules]):
    """Mode -> its family's rule row (the family is imported on first use)."""

    def __getitem__(self, mode: Mode) -> ModeRules:
        return FAMILIES[mode].rules

    def __iter__(self) -> Iterator[Mode]:
        return iter(FAMILY_MODULES)

    def __len__(self) -> int:
        return len(FAMILY_MODULES)


#: every family, by mode
FAMILIES: Mapping[Mode, Family] = _Families()

#: each mode's rule row over the merge
RULES: Mapping[Mode, ModeRules] = _Rules()


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
    from numalign.modes.merge import merge as merge_rules

    return merge_rules(FAMILIES[mode].rules, policy, providers, exclusive, status, score)


__all__ = [
    "FAMILIES",
    "MODE_LABEL",
    "RULES",
    "Family",
    "Mode",
    "ModeRules",
    "family_of",
    "merge",
    "node_mode",
    "parse_mode",
]
