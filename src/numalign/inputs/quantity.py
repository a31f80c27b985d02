"""Kubernetes resource quantities and resource names: the one owner of units in numalign.

* Parsing: :func:`parse_quantity` reads the ``resource.Quantity`` syntax exactly (a
  :class:`~fractions.Fraction`); :func:`quantity_int` and :func:`cpu_millis` round it the way
  ``Quantity.Value`` / ``Quantity.MilliValue`` do.
* Formatting: :func:`format_bytes` writes a byte count as ``resource.NewQuantity(n,
  BinarySI).String()`` does (``"64Gi"``, ``"1536Mi"``, ``"1000"``...), :func:`format_cpu_millis`
  millicores as a cpu quantity (``"2"``, ``"1500m"``), and :func:`format_amount` any amount in
  its resource's base unit (bytes for :func:`is_bytes_resource` names, a plain integer for
  ``cpu`` in CPUs and for counted resources such as ``nvidia.com/gpu``).
* Resource names: :data:`MEMORY`, :data:`HUGEPAGES_PREFIX`, :func:`is_memory_resource`,
  :func:`is_hugepages_resource`, :func:`hugepage_resource_name` (the kubelet's
  ``"hugepages-" + Quantity(size, BinarySI).String()``: ``hugepages-2Mi``, ``hugepages-64Ki``)
  and its inverse :func:`hugepage_size`.
* :func:`format_bytes_human` is the one display form (``"1.5 GiB"``) for tables meant for people.

The module sits on the bottom floor: it imports only :mod:`numalign.errors` and the standard
library.
"""

from __future__ import annotations

import functools
import math
import re
from decimal import Decimal, InvalidOperation
from fractions import Fraction

from numalign.errors import InputError

__all__ = [
    "CPU",
    "HUGEPAGES_PREFIX",
    "MEMORY",
    "Quantity",
    "cpu_millis",
    "format_amount",
    "format_bytes",
    "format_bytes_human",
    "format_cpu_millis",
    "hugepage_resource_name",
    "hugepage_size",
    "is_bytes_resource",
    "is_hugepages_resource",
    "is_memory_resource",
    "parse_quantity",
    "quantity_int",
]

CPU = "cpu"
MEMORY = "memory"
HUGEPAGES_PREFIX = "hugepages-"
#: Native resources counted in bytes besides memory and hugepages.
_STORAGE = frozenset({"ephemeral-storage", "storage"})

#: A parsed Kubernetes quantity, exact.
Quantity = Fraction

_DECIMAL_SUFFIXES: dict[str, int] = {"k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DECIMAL_SUFFIXES_SMALL: dict[str, int] = {"n": -9, "u": -6, "m": -3, "": 0}
#: BinarySI suffixes by power of 1024 (Ki = 1024**1 ... Ei = 1024**6)
_BINARY_SUFFIXES: tuple[str, ...] = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
_BINARY_POWER: dict[str, int] = {s: k for k, s in enumerate(_BINARY_SUFFIXES) if s}
_HUMAN_UNITS: tuple[str, ...] = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")
# sign, mantissa with at least one digit (``1``, ``1.5``, ``.5``, ``1.``), then a suffix
_QUANTITY_RE = re.compile(r"([+-]?)([0-9]+\.?[0-9]*|\.[0-9]+)([A-Za-z]*)([+-]?[0-9]*)")
_EXPONENT_RE = re.compile(r"[eE]([+-]?[0-9]{1,6})")


# --------------------------------------------------------------------------------------------
# parsing
# --------------------------------------------------------------------------------------------


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
    known = _PARSED.get(value)
    if known is not None:
        return known
    result = _parse_text(value, field)
    if len(_PARSED) < MAX_PARSED:  # the same few strings recur in every NRT and pod
        _PARSED[value] = result
    return result


#: quantity strings parsed so far and their values (exact and immutable: shared); bounded
MAX_PARSED = 4096
_PARSED: dict[str, Fraction] = {}


def _parse_text(value: str, field: str | None) -> Quantity:
    bad = f'invalid quantity "{value}"'
    m = _QUANTITY_RE.fullmatch(value)
    if m is None:
        raise InputError(bad, field)
    sign, mantissa, letters, tail = m.groups()
    try:
        number = Fraction(Decimal(mantissa))
    except (InvalidOperation, ValueError):  # pragma: no cover - the regex admits only numbers
        raise InputError(bad, field) from None
    if not tail and letters in _DECIMAL_SUFFIXES_SMALL:
        scale = Fraction(10) ** _DECIMAL_SUFFIXES_SMALL[letters]
    elif not tail and letters in _DECIMAL_SUFFIXES:
        scale = Fraction(10) ** _DECIMAL_SUFFIXES[letters]
    elif not tail and letters in _BINARY_POWER:
        scale = Fraction(1024) ** _BINARY_POWER[letters]
    else:
        exp = _EXPONENT_RE.fullmatch(letters + tail)
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


# --------------------------------------------------------------------------------------------
# resource names
# --------------------------------------------------------------------------------------------


def is_hugepages_resource(name: str) -> bool:
    """``hugepages-<size>`` (any page size)."""
    return name.startswith(HUGEPAGES_PREFIX)


def is_memory_resource(name: str) -> bool:
    """What the memory manager handles: ``memory`` and every ``hugepages-<size>``."""
    return name == MEMORY or is_hugepages_resource(name)


def is_bytes_resource(name: str) -> bool:
    """Native resources counted in bytes: memory, hugepages, (ephemeral) storage."""
    return is_memory_resource(name) or name in _STORAGE


@functools.lru_cache(maxsize=256)
def hugepage_resource_name(page_size: int) -> str:
    """The kubelet's resource name of a page size in bytes.

    ``"hugepages-" + resource.NewQuantity(size, BinarySI).String()``: 2097152 ->
    ``hugepages-2Mi``, 65536 -> ``hugepages-64Ki``, 1073741824 -> ``hugepages-1Gi``.
    """
    if isinstance(page_size, bool) or not isinstance(page_size, int) or page_size <= 0:
        raise InputError(f"hugepage size must be a positive number of bytes, got {page_size!r}")
    return HUGEPAGES_PREFIX + format_bytes(page_size)


def hugepage_size(name: str, field: str | None = None) -> int:
    """The page size in bytes of a ``hugepages-<size>`` resource name (inverse of the above)."""
    if not is_hugepages_resource(name):
        raise InputError(f"{name!r} is not a hugepages-<size> resource name", field)
    q = parse_quantity(name.removeprefix(HUGEPAGES_PREFIX), field)
    if q <= 0 or q.denominator != 1:
        raise InputError(f"page size must be a positive whole number of bytes in {name!r}", field)
    return int(q)


# --------------------------------------------------------------------------------------------
# formatting
# --------------------------------------------------------------------------------------------


def _decimal_si(n: int) -> str:
    """``NewQuantity(n, DecimalSI).String()`` for an integer: exponent a multiple of 3."""
    mantissa, exponent = n, 0
    while mantissa and mantissa % 1000 == 0 and exponent < 18:
        mantissa //= 1000
        exponent += 3
    suffix = {0: ""} | {e: s for s, e in _DECIMAL_SUFFIXES.items()}
    return f"{mantissa}{suffix[exponent]}"


def format_bytes(n: int) -> str:
    """A byte count as ``resource.NewQuantity(n, BinarySI).String()`` writes it.

    From 1024 up (and down from -1024): the largest power of 1024 that divides ``n`` exactly
    (``68719476736`` -> ``"64Gi"``, ``1572864`` -> ``"1536Ki"``, ``1536`` -> ``"1536"``).
    Below 1024 in magnitude Kubernetes switches to DecimalSI, so 1000 is ``"1k"`` there.
    """
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"format_bytes needs an integer number of bytes, got {n!r}")
    if -1024 < n < 1024:
        return _decimal_si(n)
    mantissa, power = n, 0
    while mantissa % 1024 == 0 and power < len(_BINARY_SUFFIXES) - 1:
        mantissa //= 1024
        power += 1
    return f"{mantissa}{_BINARY_SUFFIXES[power]}"


def format_cpu_millis(millis: int) -> str:
    """Millicores as a cpu quantity: whole CPUs as an integer (``"2"``), else ``"1500m"``."""
    return str(millis // 1000) if millis % 1000 == 0 else f"{millis}m"


def format_amount(resource: str, amount: int) -> str:
    """An amount in its resource's base unit as a quantity string.

    Bytes (:func:`is_bytes_resource`) with :func:`format_bytes`; everything else (``cpu`` in
    whole CPUs, devices and other counted resources) as a plain integer.
    """
    return format_bytes(amount) if is_bytes_resource(resource) else str(amount)


def format_bytes_human(n: int) -> str:
    """A byte count for people: one decimal in the largest binary unit (``"1.5 GiB"``)."""
    power = 0
    while power + 1 < len(_HUMAN_UNITS) and abs(n) >= 1 << (10 * (power + 1)):
        power += 1
    if power == 0:
        return f"{n} B"
    text = f"{n / (1 << (10 * power)):.1f}".removesuffix(".0")
    return f"{text} {_HUMAN_UNITS[power]}"
