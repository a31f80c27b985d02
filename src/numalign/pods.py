"""Pods as the engine sees them: containers with integer requests and limits, QoS class.

Parsing of Kubernetes manifests (``v1`` Pod, List, multi-document YAML), quantity syntax and
the QoS / effective-request rules live here too (see ``spec/kubelet.md`` section 7).

Units inside the engine: ``cpu`` in millicores; ``memory``, ``hugepages-<size>`` and
``ephemeral-storage`` in bytes; extended resources (``nvidia.com/gpu``) as counts.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from enum import StrEnum
from fractions import Fraction

from numalign.errors import InputError


class QOSClass(StrEnum):
    GUARANTEED = "Guaranteed"
    BURSTABLE = "Burstable"
    BEST_EFFORT = "BestEffort"


class ContainerKind(StrEnum):
    INIT = "init"  # a regular init container: runs to completion before the next
    SIDECAR = "sidecar"  # a restartable init container (restartPolicy: Always)
    APP = "app"


@dataclass(frozen=True)
class Container:
    name: str
    kind: ContainerKind
    requests: Mapping[str, int] = field(default_factory=dict)
    limits: Mapping[str, int] = field(default_factory=dict)

    @property
    def is_init(self) -> bool:
        return self.kind is not ContainerKind.APP


@dataclass(frozen=True)
class Pod:
    namespace: str
    name: str
    uid: str
    qos: QOSClass
    #: init containers (regular and sidecar) in spec order, then app containers in spec order
    containers: tuple[Container, ...]
    annotations: Mapping[str, str] = field(default_factory=dict)
    #: KEP-693 ``spec.topologyPolicy`` (per-pod policy), when present
    topology_policy: str | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def init_containers(self) -> tuple[Container, ...]:
        return tuple(c for c in self.containers if c.is_init)

    @property
    def app_containers(self) -> tuple[Container, ...]:
        return tuple(c for c in self.containers if not c.is_init)


# --------------------------------------------------------------------------------------------
# Quantities
# --------------------------------------------------------------------------------------------

#: A parsed Kubernetes quantity, exact.
Quantity = Fraction

_DECIMAL_SUFFIXES: dict[str, Fraction] = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_BINARY_SUFFIXES: dict[str, Fraction] = {
    "Ki": Fraction(2**10),
    "Mi": Fraction(2**20),
    "Gi": Fraction(2**30),
    "Ti": Fraction(2**40),
    "Pi": Fraction(2**50),
    "Ei": Fraction(2**60),
}
# sign, mantissa with at least one digit (``1``, ``1.5``, ``.5``, ``1.``), then a suffix
_QUANTITY_RE = re.compile(r"([+-]?)(\d+\.?\d*|\.\d+)([A-Za-z]*)([+-]?\d*)")
_EXPONENT_RE = re.compile(r"[eE]([+-]?\d+)")


def parse_quantity(value: object, field: str | None = None) -> Quantity:
    """Parse a Kubernetes resource quantity exactly.

    Accepts the ``resource.Quantity`` syntax: an optional sign, a decimal number, then one
    suffix: decimal SI (``n u m k M G T P E``), binary (``Ki Mi Gi Ti Pi Ei``) or a decimal
    exponent (``1e3``, ``1E-2``; a bare ``E`` is exa). YAML integers and floats are accepted
    as plain numbers. Anything else (``2Gx``, ``1.2.3``, ``Gi``, ``""``) raises
    :class:`InputError` naming ``field``. The result is an exact :class:`~fractions.Fraction`
    (``"1500m"`` -> 3/2, ``"2Gi"`` -> 2147483648).
    """
    if isinstance(value, bool):
        raise InputError(f"invalid quantity {value!r}: expected a number or string", field)
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InputError(f"invalid quantity {value!r}", field)
        # repr gives the shortest decimal that round-trips: 0.1 -> 1/10, not the binary value
        return Fraction(Decimal(repr(value)))
    if not isinstance(value, str):
        raise InputError(f"invalid quantity {value!r}: expected a number or string", field)
    bad = f'invalid quantity "{value}"'
    m = _QUANTITY_RE.fullmatch(value)
    if m is None:
        raise InputError(bad, field)
    sign, mantissa, letters, tail = m.groups()
    suffix = letters + tail
    try:
        number = Fraction(Decimal(mantissa))
    except (InvalidOperation, ValueError):  # pragma: no cover - the regex admits only numbers
        raise InputError(bad, field) from None
    if not tail and letters in _DECIMAL_SUFFIXES:
        scale = _DECIMAL_SUFFIXES[letters]
    elif not tail and letters in _BINARY_SUFFIXES:
        scale = _BINARY_SUFFIXES[letters]
    else:
        exp = _EXPONENT_RE.fullmatch(suffix)
        if exp is None:
            raise InputError(bad, field)
        power = int(exp.group(1))
        if abs(power) > 100:
            raise InputError(f"{bad}: exponent out of range", field)
        scale = Fraction(10) ** power
    result = number * scale
    return -result if sign == "-" else result


def _round_away(q: Fraction) -> int:
    """Round to an integer away from zero (Kubernetes ``Value``/``MilliValue`` rounding)."""
    return math.ceil(q) if q >= 0 else math.floor(q)


def cpu_millis(q: Fraction) -> int:
    """Millicores of a cpu quantity, rounded up like ``Quantity.MilliValue``."""
    return _round_away(q * 1000)


def quantity_int(q: Fraction) -> int:
    """Integer value (bytes, counts), rounded up like ``Quantity.Value``."""
    return _round_away(q)
