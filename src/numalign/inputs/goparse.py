"""Go's ``strconv`` parsers, for the kubelet settings that go through them.

The kubelet reads policy option values with ``strconv.ParseBool`` and ``strconv.Atoi``;
numalign accepts and rejects exactly the same strings, with Go's error text:

* :func:`parse_bool` - ``1 t T TRUE true True`` and ``0 f F FALSE false False``, nothing else
  (no ``yes``, no surrounding spaces);
* :func:`atoi` - ASCII digits with one optional sign, within int64 (a 64-bit kubelet).

Errors are :class:`GoSyntaxError` (a ``ValueError``) whose message is Go's, e.g.
``strconv.ParseBool: parsing "yes": invalid syntax``; callers add their context and turn it
into an :class:`~numalign.errors.InputError`. Bottom floor: standard library only.
"""

from __future__ import annotations

import re

__all__ = ["GoSyntaxError", "atoi", "go_quote", "parse_bool"]

_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})
_INT = r"[+-]?[0-9]+"  # compiled on first use (re's cache): start-up time
_INT64 = (-(1 << 63), (1 << 63) - 1)
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
