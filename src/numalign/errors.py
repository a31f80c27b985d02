"""The one exception family of numalign.

Every error numalign raises on purpose derives from :class:`NumalignError`. Two branches:

* :class:`InputError` - the user's input is wrong (a malformed pod, machine spec, state
  file, option or HTTP body). The message is one line and names the field, e.g.
  ``numaNodes[1].distances: missing entry for node 0``. The CLI prints it and exits 2.
* :class:`AdmissionError` - a well-formed request the node refuses, with the kubelet's
  ``reason`` (``TopologyAffinityError``, ``SMTAlignmentError``, ``UnexpectedAdmissionError``)
  and message.
"""

from __future__ import annotations

import re

#: compiled on first use (start-up time: most messages are printable and never need it)
_CONTROL = "[\x00-\x1f\x7f-\x9f\u2028\u2029]"


def one_line(text: str) -> str:
    """``text`` with newlines and other control characters escaped (``\\n``, ``\\x1b``):
    an error message is one line whatever the values quoted in it."""
    if text.isprintable():  # none of _CONTROL's characters is printable
        return text
    return re.sub(_CONTROL, lambda m: repr(m.group())[1:-1], text)


def escape_newlines(text: str) -> str:
    """``text`` with its line breaks escaped (``\\r``, ``\\n``): user-supplied names in a
    file path or a field may contain them."""
    return text.replace("\r", "\\r").replace("\n", "\\n")


class NumalignError(Exception):
    """Base class of every numalign error."""

    reason: str = "NumalignError"

    def __init__(self, message: str) -> None:
        message = one_line(message)
        super().__init__(message)
        self.message = message


class InputError(NumalignError):
    """Invalid user input; the message names the offending field."""

    reason = "InvalidInput"

    def __init__(self, problem: str, field: str | None = None) -> None:
        super().__init__(f"{field}: {problem}" if field else problem)
        self.problem = problem
        self.field = field

    def within(self, prefix: str) -> InputError:
        """The same error with its field path prefixed (``pods[2]`` + ``spec.x``)."""
        if not self.field:
            return InputError(self.problem, prefix)
        sep = "" if self.field.startswith("[") else "."
        return InputError(self.problem, f"{prefix}{sep}{self.field}")


class StateError(NumalignError):
    """A state directory that cannot be used (corrupt, foreign, locked)."""

    reason = "StateError"


class AdmissionError(NumalignError):
    """A pod the node refuses, with the kubelet's reason."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class TopologyAffinityError(AdmissionError):
    """The policy found no acceptable NUMA affinity (kubelet's message)."""

    def __init__(self) -> None:
        super().__init__(
            "TopologyAffinityError", "Resources cannot be allocated with Topology locality"
        )


class SMTAlignmentError(AdmissionError):
    """full-pcpus-only could not give whole physical cores."""

    def __init__(self, message: str) -> None:
        super().__init__("SMTAlignmentError", message)


class UnexpectedAdmissionError(AdmissionError):
    """A provider's Allocate failed for a reason without its own type."""

    def __init__(self, cause: str) -> None:
        super().__init__(
            "UnexpectedAdmissionError", f"Allocate failed due to {cause}, which is unexpected"
        )
