"""CPU and NUMA node id lists: the one parser and formatter of numalign.

Two list grammars and one mask format, as the sources that write them define them:

* :func:`parse_cpulist` - the **kubelet's** ``cpuset.Parse`` (``k8s.io/utils/cpuset``): ``a`` and
  ``a-b`` separated by single commas. This is the grammar of ``--reserved-cpus`` /
  ``reservedSystemCPUs``, the CPU sets in ``cpu_manager_state`` and the cpulists that
  NodeResourceTopology producers write (``cpuset.String()``). Strides, empty elements
  (``"1,,2"``) and inner whitespace (``"1 2"``) are errors, as in the kubelet; numalign
  additionally tolerates whitespace/NUL padding around the list and around each element, and a
  YAML integer (``reservedSystemCPUs: 0``) as a one-element list.
* :func:`parse_kernel_cpulist` - the **Linux kernel's** ``bitmap_parselist``: what sysfs
  (``cpu/online``, ``nodeN/cpulist``, ``thread_siblings_list``...), ``/proc/self/status``
  (``Cpus_allowed_list``, ``Mems_allowed_list``) and cgroup ``cpuset.cpus`` files hold. Regions
  ``a``, ``a-b`` and ``a-b:used/group`` (in each group of ``group`` ids starting at ``a``, the
  first ``used``: ``0-7:2/4`` is ``{0, 1, 4, 5}``), separated by any run of commas and
  whitespace (newlines included); a NUL ends the text. ``N`` (the last id) and ``all`` are
  understood when the caller knows the last id (``last=``).
* :func:`parse_cpumask` / :func:`format_cpumask` - the kernel's hex masks (``cpumap``,
  ``thread_siblings``, ``local_cpus``; ``bitmap_parse``): 32-bit words of 1 to 8 hex digits,
  most significant first, separated by commas (``"ff,00000001"`` is ``{0, 32..39}``).

In both list grammars a descending range (``"3-1"``) is an error, never the empty set.

Size cap: an id above :data:`MAX_ID` (65535, far above any kernel's ``CONFIG_NR_CPUS`` - 8192 on
x86 ``MAXSMP`` - and any ``NODES_SHIFT``) is an :class:`~numalign.errors.InputError` naming the
field, so no input can make a parser build a set of billions of ids.

:func:`format_cpulist` writes the canonical list: ascending, consecutive ids folded into ``a-b``
ranges (also for two ids, ``"0-1"``), which is what both the kernel (``%*pbl``) and the kubelet
(``CPUSet.String``) write; every list grammar above reads it back.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from numalign.errors import InputError

__all__ = [
    "MAX_ID",
    "format_cpulist",
    "format_cpumask",
    "parse_cpulist",
    "parse_cpumask",
    "parse_kernel_cpulist",
]

#: The largest CPU or NUMA node id any parser accepts.
MAX_ID = 65535

_PAD = " \t\r\n\x00"
# The kernel formats' patterns are compiled on first use (``re``'s cache): the kubelet's
# cpulist (a machine spec) never needs them, and start-up time counts.
# C isspace(): the kernel's region separators besides the comma
_KERNEL_SEPARATORS = r"[ \t\n\v\f\r,]+"
_KUBELET_NUMBER = re.compile(r"\+?[0-9]+")  # strconv.Atoi, minus the sign the grammar cannot use
_KERNEL_NUMBER = r"[0-9]+|N"
_KERNEL_REGION = (
    rf"(?:(?P<all>all)|(?P<start>{_KERNEL_NUMBER})(?:-(?P<end>{_KERNEL_NUMBER}))?)"
    rf"(?::(?P<used>{_KERNEL_NUMBER})/(?P<group>{_KERNEL_NUMBER}))?"
)
_HEX_WORD = r"[0-9a-fA-F]{1,8}"


def _cut(text: str, limit: int = 40) -> str:
    """``text`` cut short for an error message: inputs can be megabytes long."""
    return text if len(text) <= limit else text[:limit] + "..."


def _shown(text: str) -> str:
    return repr(_cut(text))


def _number(digits: str, whole: str, field: str | None) -> int:
    """``int(digits)``, refusing a number too long to convert (Python stops at 4,300 digits)."""
    if len(digits) > 1000:
        raise InputError(
            f"invalid cpulist {_shown(whole)}: id {_cut(digits)} exceeds the maximum {MAX_ID}", field
        )
    return int(digits)


def _capped(n: int, whole: str, field: str | None, maximum: int = MAX_ID) -> int:
    if n > maximum:
        raise InputError(f"invalid cpulist {_shown(whole)}: id {n} exceeds the maximum {maximum}", field)
    return n


def _span_bits(start: int, end: int, used: int = 1, group: int = 1) -> int:
    """Ids ``start..end`` as bits; with a stride, in each group of ``group`` ids from ``start``
    only the first ``used`` (the kernel's ``bitmap_set_region``).

    Bit arithmetic, like the kernel's bitmap: a region costs O(width / 64) whatever its
    spelling, so many wide regions cannot make a parser slow.
    """
    width = end - start + 1
    if used >= group:
        return ((1 << width) - 1) << start
    bits, period = (1 << used) - 1, group
    while period < width:  # double the periodic pattern until it covers the span
        bits |= bits << period
        period *= 2
    return (bits & ((1 << width) - 1)) << start


def _ids(bits: int) -> frozenset[int]:
    text = f"{bits:b}"  # most significant first; linear, unlike testing bit by bit
    top = len(text) - 1
    return frozenset(top - k for k, bit in enumerate(text) if bit == "1")


def _kubelet_number(text: str, whole: str, field: str | None) -> int:
    text = text.strip(_PAD)
    if not _KUBELET_NUMBER.fullmatch(text):
        raise InputError(f"invalid cpulist {_shown(whole)}: {_shown(text)} is not a CPU number", field)
    return _capped(_number(text, whole, field), whole, field)


def parse_cpulist(text: object, field: str | None = None) -> frozenset[int]:
    """Parse the kubelet's cpulist (``"0-3,8"``) into a set of ids.

    ``field`` names the input in the error message (``kubelet.reservedSystemCPUs``).
    """
    if isinstance(text, bool) or not isinstance(text, str | int):
        raise InputError(f'expected a cpulist string like "0-3,8", got {_cut(repr(text))}', field)
    if isinstance(text, int):
        # YAML turns `reservedSystemCPUs: 0` into an int; treat it as the one-element list.
        if text < 0:
            raise InputError(f"invalid cpulist {_cut(repr(text))}: negative CPU number", field)
        return frozenset((_capped(text, str(text), field),))
    known = _PARSED.get(text)
    if known is not None:
        return known
    ids = _parse_text(text, field)
    if len(_PARSED) < MAX_PARSED:  # machines of a kind repeat the same lists
        _PARSED[text] = ids
    return ids


#: cpulist strings parsed so far and their ids (immutable: shared); bounded
MAX_PARSED = 4096
_PARSED: dict[str, frozenset[int]] = {}


def _parse_text(text: str, field: str | None) -> frozenset[int]:
    whole = text.strip(_PAD)
    if not whole:
        return frozenset()
    bits = 0
    for item in whole.split(","):
        item = item.strip(_PAD)
        if "-" in item[1:]:
            lo_text, _, hi_text = item.partition("-")
            lo = _kubelet_number(lo_text, whole, field)
            hi = _kubelet_number(hi_text, whole, field)
            if hi < lo:
                raise InputError(f"invalid cpulist {_shown(whole)}: range {lo}-{hi} is descending", field)
            bits |= _span_bits(lo, hi)
        else:
            bits |= 1 << _kubelet_number(item, whole, field)
    return _ids(bits)


def _kernel_number(value: str, last: int | None, whole: str, field: str | None) -> int:
    if value != "N":
        return _number(value, whole, field)
    if last is None:
        raise InputError(f"invalid cpulist {_shown(whole)}: 'N' needs the number of CPUs", field)
    return last


def _kernel_region(m: re.Match[str], last: int | None, whole: str, field: str | None) -> int:
    """The bits of one matched region (``bitmap_parse_region`` + ``bitmap_check_region``)."""
    maximum = MAX_ID if last is None else min(last, MAX_ID)
    if m.group("all") is not None:
        if last is None:
            raise InputError(f"invalid cpulist {_shown(whole)}: 'all' needs the number of CPUs", field)
        start, end = 0, last
    else:
        start = _kernel_number(m.group("start"), last, whole, field)
        if m.group("end") is None:
            if m.group("used") is not None:
                raise InputError(f"invalid cpulist {_shown(whole)}: a stride needs a range", field)
            end = start
        else:
            end = _kernel_number(m.group("end"), last, whole, field)
    if end < start:
        raise InputError(f"invalid cpulist {_shown(whole)}: range {start}-{end} is descending", field)
    _capped(end, whole, field, maximum)
    if m.group("used") is None:
        return _span_bits(start, end)
    used = _kernel_number(m.group("used"), last, whole, field)
    group = _kernel_number(m.group("group"), last, whole, field)
    if group == 0 or used > group:
        raise InputError(
            f"invalid cpulist {_shown(whole)}: stride {used}/{group} needs 0 <= used <= group > 0", field
        )
    return _span_bits(start, end, used, group)


def parse_kernel_cpulist(
    text: str, field: str | None = None, *, last: int | None = None
) -> frozenset[int]:
    """Parse a list the way the Linux kernel's ``bitmap_parselist`` does.

    ``last`` is the highest valid id (``nr_cpu_ids - 1``) when the caller knows it: it gives
    ``N`` and ``all`` their meaning and bounds every id, as the bitmap size does in the kernel.
    Without it ``N``/``all`` are errors and ids are bounded by :data:`MAX_ID`.
    """
    if not isinstance(text, str):
        raise InputError(f'expected a cpulist string like "0-3,8", got {_cut(repr(text))}', field)
    body = text.split("\x00", 1)[0]
    whole = body.strip(_PAD)
    bits = 0
    region_pattern = re.compile(_KERNEL_REGION)
    for region in re.split(_KERNEL_SEPARATORS, body):
        if not region:
            continue
        m = region_pattern.fullmatch(region)
        if m is None:
            raise InputError(f"invalid cpulist {_shown(whole)}: bad region {_shown(region)}", field)
        bits |= _kernel_region(m, last, whole, field)
    return _ids(bits)


def parse_cpumask(text: str, field: str | None = None) -> frozenset[int]:
    """Parse a kernel hex mask (``"ff,00000001"``: 32-bit words, most significant first).

    As ``bitmap_parse``: the text ends at the first newline or NUL; words are 1 to 8 hex
    digits separated by commas or whitespace; no ``0x`` prefix. Set bits above :data:`MAX_ID`
    are an error.
    """
    if not isinstance(text, str):
        raise InputError(f'expected a hex mask like "ff,00000001", got {_cut(repr(text))}', field)
    body = re.split(r"[\n\x00]", text, maxsplit=1)[0]
    shown = _shown(body.strip())
    words = [w for w in re.split(_KERNEL_SEPARATORS, body) if w]
    for w in words:
        if not re.fullmatch(_HEX_WORD, w):
            raise InputError(f"invalid cpumask {shown}: {_shown(w)} is not a 32-bit hex word", field)
    while words and int(words[0], 16) == 0:
        del words[0]
    if words:
        top = (len(words) - 1) * 32 + int(words[0], 16).bit_length() - 1
        if top > MAX_ID:
            raise InputError(f"invalid cpumask {shown}: id {top} exceeds the maximum {MAX_ID}", field)
    return _ids(int("".join(w.rjust(8, "0") for w in words) or "0", 16))


def format_cpumask(ids: Iterable[int], nbits: int | None = None) -> str:
    """Format ids as a kernel hex mask, as ``cpumap`` files show them.

    ``nbits`` is the mask width (``nr_cpu_ids``; default: just wide enough). The first word
    has the digits the width needs, the others all 8: ``format_cpumask({0}, 40)`` is
    ``"00,00000001"``.
    """
    wanted = set(ids)
    if any(i < 0 for i in wanted):
        raise ValueError(f"negative id {min(wanted)}")
    width = max(nbits if nbits is not None else max(wanted, default=0) + 1, 1)
    if wanted and max(wanted) >= width:
        raise ValueError(f"id {max(wanted)} does not fit in {width} bits")
    bits = bytearray(b"0" * width)
    for i in wanted:
        bits[width - 1 - i] = ord("1")
    value = int(bits, 2)
    digits = f"{value:0{(width + 3) // 4}x}"
    head = len(digits) % 8 or 8
    return ",".join([digits[:head]] + [digits[k : k + 8] for k in range(head, len(digits), 8)])


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
