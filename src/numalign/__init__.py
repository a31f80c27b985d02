"""numalign: the kubelet's NUMA alignment as one Python engine.

Public API of the engine; adapters (node side, scheduler, simulator, launcher, CLI) build
on these names.
"""

from numalign.bitmask import format_mask, ids_of, iterate_masks, mask_of
from numalign.errors import (
    AdmissionError,
    InputError,
    NumalignError,
    SMTAlignmentError,
    StateError,
    TopologyAffinityError,
    UnexpectedAdmissionError,
)
from numalign.hints import GeneratedHints, ProviderHints, TopologyHint
from numalign.merge import FitOrder, merge_lists
from numalign.policies import (
    MergeResult,
    Policy,
    PolicyOptions,
    Scope,
    TopologyPolicy,
    parse_options,
    parse_policy,
)

__version__ = "0.1.0"

__all__ = [
    "AdmissionError",
    "FitOrder",
    "GeneratedHints",
    "InputError",
    "MergeResult",
    "NumalignError",
    "Policy",
    "PolicyOptions",
    "ProviderHints",
    "SMTAlignmentError",
    "Scope",
    "StateError",
    "TopologyAffinityError",
    "TopologyHint",
    "TopologyPolicy",
    "UnexpectedAdmissionError",
    "format_mask",
    "ids_of",
    "iterate_masks",
    "mask_of",
    "merge_lists",
    "parse_options",
    "parse_policy",
]
