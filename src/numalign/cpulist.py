"""Linux cpulist syntax: ``"0-3,8,10-11"``.

This is the format of ``/sys/devices/system/cpu/online``, ``cpuset.cpus``, the kubelet's
``--reserved-cpus`` and the CPU sets in ``cpu_manager_state``. It is used for NUMA node lists
too (``/sys/devices/system/node/online``).

:func:`parse_cpulist` accepts the empty string (the empty set) and tolerates whitespace,
newline and NUL padding around the list and around each element (sysfs files end in a
newline, some end in a NUL). Overlapping or repeated entries are merged. Descending ranges
(``"3-1"``), negative numbers, empty elements (``"1,,2"``) and anything else are an
:class:`~numalign.errors.InputError`.

:func:`format_cpulist` writes the canonical form: ascending, consecutive ids folded into
``a-b`` ranges (also for two ids, ``"0-1"``, as Linux and the kubelet's ``cpuset`` do).
"""

from __future__ import annotations

from collections.abc import Iterable

from numalign.errors import InputError

__all__ = ["format_cpulist", "parse_cpulist"]

_PAD = " \t\r\n\x00"


def _number(text: str, whole: str, field: str | None) -> int:
    text = text.strip(_PAD)
    if not text or not text.isascii() or not text.isdigit():
        raise InputError(f"invalid cpulist {whole!r}: {text!r} is not a CPU number", field)
    return int(text)


def parse_cpulist(text: object, field: str | None = None) -> frozenset[int]:
    """Parse Linux cpulist syntax (``"0-3,8"``) into a set of ids.

    ``field`` names the input in the error message (``kubelet.reservedSystemCPUs``).
    """
    if isinstance(text, bool) or not isinstance(text, str | int):
        raise InputError(f'expected a cpulist string like "0-3,8", got {text!r}', field)
    if isinstance(text, int):
        # YAML turns `reservedSystemCPUs: 0` into an int; treat it as the one-element list.
        if text < 0:
            raise InputError(f"invalid cpulist {text!r}: negative CPU number", field)
        return frozenset((text,))
    whole = text.strip(_PAD)
    if not whole:
        return frozenset()
    out: set[int] = set()
    for item in whole.split(","):
        if "-" in item.strip(_PAD)[1:]:
            lo_text, _, hi_text = item.strip(_PAD).partition("-")
            lo = _number(lo_text, whole, field)
            hi = _number(hi_text, whole, field)
            if hi < lo:
                raise InputError(f"invalid cpulist {whole!r}: range {lo}-{hi} is descending", field)
            out.update(range(lo, hi + 1))
        else:
            out.add(_number(item, whole, field))
    return frozenset(out)


def format_cpulist(ids: Iterable[int]) -> str:
    """Format ids as a canonical cpulist (``[0, 1, 2, 3, 8]`` -> ``"0-3,8"``)."""
    parts: list[str] = []
    ordered = sorted(set(ids))
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(parts)
