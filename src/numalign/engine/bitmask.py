"""NUMA affinity masks.

A mask is a plain Python ``int``: bit *i* set means NUMA node id *i*. Python integers have
arbitrary width, so a mask covers sparse node ids up to :data:`MAX_NUMA_ID` (real machines
number their nodes up to 255; the kubelet's own bitmask stops at 63).

Ordering follows the kubelet's ``bitmask.IsNarrowerThan``: fewer set bits is narrower; with
equal counts the numerically smaller integer is narrower (so {1,2} = 0b110 is narrower than
{0,3} = 0b1001). :func:`narrow_key` turns that into a sort key.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from functools import lru_cache
from itertools import combinations

from numalign.errors import InputError

#: Highest NUMA node id numalign accepts.
MAX_NUMA_ID = 1023


def mask_of(ids: Iterable[int]) -> int:
    """Return the mask with exactly the given node ids set."""
    mask = 0
    for i in ids:
        if not isinstance(i, int) or isinstance(i, bool) or i < 0 or i > MAX_NUMA_ID:
            raise InputError(f"NUMA node id {i!r} out of range 0-{MAX_NUMA_ID}")
        mask |= 1 << i
    return mask


def ids_of(mask: int) -> list[int]:
    """Set bits of ``mask`` in ascending order."""
    out: list[int] = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out


def count(mask: int) -> int:
    """Number of NUMA nodes in ``mask``."""
    return mask.bit_count()


def narrow_key(mask: int) -> tuple[int, int]:
    """Sort key of kubelet's narrowness: (popcount, integer value)."""
    return (mask.bit_count(), mask)


def is_narrower(a: int, b: int) -> bool:
    """kubelet ``IsNarrowerThan``: fewer bits, or equal bits and the smaller integer."""
    ca, cb = a.bit_count(), b.bit_count()
    if ca == cb:
        return a < b
    return ca < cb


def iterate_masks(ids: Iterable[int]) -> Iterator[int]:
    """kubelet ``IterateBitMasks``: every non-empty subset, by size, then lexicographically.

    ``ids`` should be ascending (callers pass sorted NUMA ids, as the kubelet does).
    """
    bits = list(ids)
    for k in range(1, len(bits) + 1):
        for combo in combinations(bits, k):
            m = 0
            for b in combo:
                m |= 1 << b
            yield m


def masks_of_size(ids: Iterable[int], k: int) -> Iterator[int]:
    """Subsets of exactly ``k`` of ``ids`` (ascending), in increasing integer order.

    For a fixed popcount, increasing integer order is the kubelet's narrowness order, so
    the first mask a predicate accepts is the narrowest one it accepts.
    """
    bits = sorted(ids)
    n = len(bits)
    if k <= 0 or k > n:
        return
    # Integer order of subsets of equal size = colexicographic order of their sorted
    # positions (the highest element decides first). Enumerate colex combinations.
    pos = list(range(k))
    while True:
        m = 0
        for p in pos:
            m |= 1 << bits[p]
        yield m
        # next colex combination: find the lowest j where pos[j] + 1 != pos[j + 1]
        j = 0
        while j < k - 1 and pos[j] + 1 == pos[j + 1]:
            j += 1
        if j == k - 1 and pos[j] == n - 1:
            return
        pos[j] += 1
        for i in range(j):
            pos[i] = i


def format_mask(mask: int | None) -> str:
    """Human form: ``{0,2}``; ``None`` prints as ``any``."""
    if mask is None:
        return "any"
    return "{" + ",".join(str(i) for i in ids_of(mask)) + "}"


@lru_cache(maxsize=1 << 12)
def go_string(mask: int) -> str:
    """The upstream bitmask's ``String()`` (the kubelet's ``topologymanager/bitmask`` and
    Koordinator's ``pkg/util/bitmask``, the same code): binary, zero-padded to the first even
    width ``shift + 2`` for which ``mask > 1 << shift`` (shifts 62, 60, ... 2), else to 2.

    The comparison is strict, so a power of four is not padded: ``{2}`` prints ``100`` and
    ``{4}`` ``10000``, while ``{0,2}`` prints ``0101``. Go's masks stop at bit 63; wider
    Python masks continue the same rule from the first even shift at or above their width."""
    if mask < 0:
        raise ValueError("a NUMA mask is never negative")
    shift = max(62, mask.bit_length() + (mask.bit_length() & 1))
    while shift > 0:
        if mask > 1 << shift:
            return format(mask, f"0{shift + 2}b")
        shift -= 2
    return format(mask, "02b")
