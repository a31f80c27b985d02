"""A kubelet's version, as a node reports it and as a machine spec or a flag gives it.

The forms accepted are the ones ``Node.status.nodeInfo.kubeletVersion`` carries and
``kubelet --version`` prints after ``Kubernetes``: ``v1.33.4``, ``1.33.4``, ``v1.33`` and
semantic-version suffixes (``v1.34.4+k3s1``, ``v1.33.4-eks-3025e55``, ``v1.36.0-rc.1``). Only
the minor release decides what numalign models (``modes/kubelet/releases.py``); the rest is
kept as text for the reports. Anything else is a one-line error naming the field.
"""

from __future__ import annotations

import re

from numalign.errors import InputError
from numalign.record import Record, set_field

#: ``v``? major . minor [. patch] [-prerelease] [+build] (semver 2.0 identifiers)
_VERSION = re.compile(
    r"v?(0|[1-9][0-9]{0,3})\.(0|[1-9][0-9]{0,3})(?:\.(0|[1-9][0-9]{0,5}))?"
    r"(?:-[0-9A-Za-z.-]{1,64})?(?:\+[0-9A-Za-z.-]{1,64})?"
)
#: a version is a short string; anything longer is refused before matching
MAX_VERSION_CHARS = 96


class KubeletVersion(Record, frozen=True, uncompared=("source",)):
    """``major.minor.patch`` (patch ``None`` when not given) and the text as given; equal
    versions are equal wherever they were given (``source`` takes no part)."""

    __slots__ = ("major", "minor", "patch", "text", "source")
    major: int
    minor: int
    patch: int | None
    text: str
    #: where it was given (the field an error names)
    source: str

    def __init__(self, major: int, minor: int, patch: int | None = None, text: str = "",
                 source: str = "kubelet.kubeletVersion") -> None:
        set_field(self, "major", major)
        set_field(self, "minor", minor)
        set_field(self, "patch", patch)
        set_field(self, "text", text)
        set_field(self, "source", source)

    @property
    def minor_text(self) -> str:
        """``v1.33``: the release line this version belongs to."""
        return f"v{self.major}.{self.minor}"

    def __str__(self) -> str:
        return self.text or self.minor_text


def parse_kubelet_version(value: object, field: str = "kubelet.kubeletVersion") -> KubeletVersion:
    """Read a kubelet version (see the module docstring); a bad one raises :class:`InputError`."""
    if not isinstance(value, str):
        raise InputError(
            f"must be a string such as \"v1.33.4\", got {type(value).__name__}", field
        )
    if len(value) > MAX_VERSION_CHARS:
        raise InputError(f"a version is at most {MAX_VERSION_CHARS} characters", field)
    m = _VERSION.fullmatch(value)
    if m is None:
        raise InputError(
            f"{value!r} is not a kubelet version (expected vMAJOR.MINOR[.PATCH], e.g. v1.33.4)",
            field,
        )
    major, minor = int(m.group(1)), int(m.group(2))
    if major != 1:
        raise InputError(f"{value!r}: only Kubernetes 1.x releases exist", field)
    patch = int(m.group(3)) if m.group(3) is not None else None
    text = value if value.startswith("v") else f"v{value}"
    return KubeletVersion(major, minor, patch, text, field)


__all__ = ["MAX_VERSION_CHARS", "KubeletVersion", "parse_kubelet_version"]
