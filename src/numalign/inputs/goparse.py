"""Go's ``strconv`` parsers, for the kubelet settings that go through them.

The kubelet reads policy option values with ``strconv.ParseBool`` and ``strconv.Atoi``;
numalign accepts and rejects exactly the same strings, with Go's error text:

* :func:`parse_bool` - ``1 t T TRUE true True`` and ``0 f F FALSE false False``, nothing else
  (no ``yes``, no surrounding spaces);
* :func:`atoi` - ASCII digits with one optional sign, within int64 (a 64-bit kubelet);
* :func:`parse_float32` - ``strconv.ParseFloat(s, 32)``: a decimal number rounded once, to the
  nearest float32 (ties to even), ``inf``/``infinity``/``nan`` in any case with an optional
  sign; beyond float32's range an error (Go: ``value out of range``). Go's hexadecimal form
  (``0x1p-2``) is refused with its own message: numalign does not read it; so is a text of
  more than :data:`MAX_FLOAT_CHARS` characters.

Errors are :class:`GoSyntaxError` (a ``ValueError``) whose message is Go's, e.g.
``strconv.ParseBool: parsing "yes": invalid syntax``; callers add their context and turn it
into an :class:`~numalign.errors.InputError`. Bottom floor: standard library only.
"""

from __future__ import annotations

import re
import struct
from fractions import Fraction

__all__ = ["GoSyntaxError", "atoi", "go_quote", "parse_bool", "parse_float32", "to_float32"]

_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})
_INT = r"[+-]?[0-9]+"  # compiled on first use (re's cache): start-up time
_INT64 = (-(1 << 63), (1 << 63) - 1)
#: Go's decimal floating-point syntax (no underscores: Go takes them in the hexadecimal form only)
_DECIMAL = r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
_SPECIAL = {"inf": float("inf"), "+inf": float("inf"), "-inf": float("-inf"),
            "infinity": float("inf"), "+infinity": float("inf"), "-infinity": float("-inf"),
            "nan": float("nan"), "+nan": float("nan"), "-nan": float("nan")}
_INF = float("inf")
#: beyond this decimal exponent a number of at most MAX_FLOAT_CHARS characters is 0 or too large
_EXPONENT_CAP = 400
#: the longest number text read (an exponent of thousands of digits would be slow to convert)
MAX_FLOAT_CHARS = 64
_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t",
            "\v": "\\v", "\\": "\\\\", '"': '\\"'}


class GoSyntaxError(ValueError):
    """A value Go's ``strconv`` rejects; the message is Go's ``*NumError`` text."""


def go_quote(text: str) -> str:
    """``strconv.Quote``: double quotes, control and non-printable characters escaped."""
    out = []
    for ch in text:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ch.isprintable():
            out.append(ch)
        elif ord(ch) < 0x80:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) < 0x10000:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    return '"' + "".join(out) + '"'


def parse_bool(text: str) -> bool:
    """Go ``strconv.ParseBool``."""
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise GoSyntaxError(f"strconv.ParseBool: parsing {go_quote(text)}: invalid syntax")


def atoi(text: str) -> int:
    """Go ``strconv.Atoi`` on a 64-bit platform."""
    if not re.fullmatch(_INT, text):
        raise GoSyntaxError(f"strconv.Atoi: parsing {go_quote(text)}: invalid syntax")
    n = int(text)
    if not _INT64[0] <= n <= _INT64[1]:
        raise GoSyntaxError(f"strconv.Atoi: parsing {go_quote(text)}: value out of range")
    return n


def to_float32(value: float) -> float:
    """``float32(value)``: the nearest float32 (ties to even), as a Python float; beyond
    float32's range an ``OverflowError``."""
    return float(struct.unpack("<f", struct.pack("<f", value))[0])


def _bits(value: float) -> int:
    """The IEEE 754 bits of float32 ``value``."""
    return int(struct.unpack("<I", struct.pack("<f", value))[0])


def _next_float32(value: float, up: bool) -> float:
    """The float32 next to ``value`` (a finite float32) toward +inf (``up``) or -inf."""
    if value == 0:
        return 2.0**-149 if up else -(2.0**-149)
    bits = _bits(value)
    sign, magnitude = bits & 0x80000000, bits & 0x7FFFFFFF
    magnitude += 1 if (value > 0) == up else -1
    return float(struct.unpack("<f", struct.pack("<I", sign | magnitude))[0])


def _exact(value: float) -> Fraction:
    """A float32's exact value; infinity stands at 2**128 (the step past the largest float32)."""
    if abs(value) == _INF:
        return Fraction(2**128) if value > 0 else Fraction(-(2**128))
    return Fraction(value)


def parse_float32(text: str) -> float:
    """Go ``strconv.ParseFloat(text, 32)``: the decimal value rounded once to float32."""
    special = _SPECIAL.get(text.lower())
    if special is not None:
        return special
    if len(text) > MAX_FLOAT_CHARS:
        raise GoSyntaxError(f"strconv.ParseFloat: parsing {go_quote(text[:MAX_FLOAT_CHARS])}...: "
                            f"longer than {MAX_FLOAT_CHARS} characters (numalign's cap)")
    if not re.fullmatch(_DECIMAL, text):
        if re.fullmatch(r"[+-]?0[xX][0-9a-fA-F_.]*[pP][+-]?[0-9_]+", text):
            raise GoSyntaxError(f"strconv.ParseFloat: parsing {go_quote(text)}: hexadecimal "
                                "floating-point numbers are not read by numalign")
        raise GoSyntaxError(f"strconv.ParseFloat: parsing {go_quote(text)}: invalid syntax")
    out_of_range = GoSyntaxError(f"strconv.ParseFloat: parsing {go_quote(text)}: value out of range")
    mantissa, _, exponent = text.lower().partition("e")
    negative = mantissa.startswith("-")
    if exponent and abs(int(exponent)) > _EXPONENT_CAP:  # never 10**huge: at most 64 digits
        if int(exponent) > 0 and any(c in "123456789" for c in mantissa):
            raise out_of_range
        chosen = 0.0
    else:
        chosen = _nearest_float32(Fraction(text), out_of_range)
    return -0.0 if chosen == 0 and negative else chosen


def _nearest_float32(exact: Fraction, out_of_range: GoSyntaxError) -> float:
    """The float32 nearest ``exact`` (ties to even); ``out_of_range`` past the largest."""
    try:
        nearest = to_float32(float(exact))  # rounded twice: right but at an exact midpoint
    except OverflowError:
        raise out_of_range from None
    if _exact(nearest) == exact:
        return nearest
    # the exact value lies between two float32s; the double rounding gave one of them
    if _exact(nearest) > exact:
        low, high = _next_float32(nearest, up=False), nearest
    else:
        low, high = nearest, _next_float32(nearest, up=True)
    gap_low, gap_high = exact - _exact(low), _exact(high) - exact
    if gap_low != gap_high:
        chosen = low if gap_low < gap_high else high
    else:
        chosen = low if _bits(low) % 2 == 0 else high
    if abs(chosen) == _INF:
        raise out_of_range
    return chosen
