"""The kubelet's ``bitmask/bitmask_test.go`` tables, restated against :mod:`numalign.engine.bitmask`.

Upstream masks are ``uint64`` with ``String()`` in binary; here a mask is a Python ``int``, so the
upstream expected strings ("1000") are read back with ``int(s, 2)``. ``IsNarrowerThan`` and
``IterateBitMasks`` (whose order decides every kubelet tie-break) are checked beyond the upstream
table: the equal-count tie-break is plain integer comparison, and the iteration order is by size,
then lexicographic by position in the input list.
"""

from __future__ import annotations

from itertools import combinations

import pytest

from numalign.engine.bitmask import (
    count,
    ids_of,
    is_narrower,
    iterate_masks,
    mask_of,
    masks_of_size,
    narrow_key,
)
from numalign.errors import InputError


def b(s: str) -> int:
    """An upstream expected ``String()`` value as an integer mask."""
    return int(s, 2)


# ------------------------------------------------------------------ TestNewBitMask / TestAdd


@pytest.mark.parametrize(
    ("bits", "expected"),
    [
        pytest.param([0], "01", id="New BitMask with bit 0 set"),
        pytest.param([1], "10", id="New BitMask with bit 1 set"),
        pytest.param([0, 1], "11", id="New BitMask with bit 0 and bit 1 set"),
        pytest.param([], "00", id="New empty BitMask"),
    ],
)
def test_new_bitmask(bits: list[int], expected: str) -> None:
    assert mask_of(bits) == b(expected)


def test_add_out_of_range() -> None:
    # upstream: Add(-1, 64) fails ("bit number must be in range 0-63") and leaves the mask empty.
    with pytest.raises(InputError):
        mask_of([-1])
    # numalign deliberately accepts NUMA ids above 63 (sparse ids on big machines, see
    # numalign.engine.bitmask); it still refuses ids beyond its own bound.
    assert mask_of([64]) == 1 << 64
    with pytest.raises(InputError):
        mask_of([10_000])


# ------------------------------------------------------------------ TestAnd / TestOr


@pytest.mark.parametrize(
    ("masks", "expected"),
    [
        pytest.param([[0, 1], [0, 1]], "11", id="Mask 11 AND mask 11"),
        pytest.param([[0, 1], [1]], "10", id="Mask 11 AND mask 10"),
        pytest.param([[0], [0, 1]], "01", id="Mask 01 AND mask 11"),
        pytest.param([[0, 1], [0, 1], [1]], "10", id="Mask 11 AND mask 11 AND mask 10"),
        pytest.param(
            [[0], [0], [1], [0, 1]], "00", id="Mask 01 AND mask 01 AND mask 10 AND mask 11"
        ),
        pytest.param(
            [[0, 1, 2, 3], [1, 2, 3], [2, 3], [3]],
            "1000",
            id="Mask 1111 AND mask 1110 AND mask 1100 AND mask 1000",
        ),
    ],
)
def test_and(masks: list[list[int]], expected: str) -> None:
    out = mask_of(masks[0])
    for m in masks:
        out &= mask_of(m)
    assert out == b(expected)


@pytest.mark.parametrize(
    ("masks", "expected"),
    [
        pytest.param([[0], []], "01", id="Mask 01 OR mask 00"),
        pytest.param([[1], [1]], "10", id="Mask 10 OR mask 10"),
        pytest.param([[0], [1]], "11", id="Mask 01 OR mask 10"),
        pytest.param([[0, 1], [0, 1]], "11", id="Mask 11 OR mask 11"),
        pytest.param([[0], [1], [0, 1]], "11", id="Mask 01 OR mask 10 OR mask 11"),
        pytest.param(
            [[3], [2], [1], [0]], "1111", id="Mask 1000 OR mask 0100 OR mask 0010 OR mask 0001"
        ),
    ],
)
def test_or(masks: list[list[int]], expected: str) -> None:
    out = 0
    for m in masks:
        out |= mask_of(m)
    assert out == b(expected)


# ------------------------------------------------------------------ TestCount / TestGetBits


@pytest.mark.parametrize(("bits", "expected"), [([], 0), ([0], 1), ([0, 1], 2), ([3, 7, 63], 3)])
def test_count(bits: list[int], expected: int) -> None:
    assert count(mask_of(bits)) == expected


@pytest.mark.parametrize("bits", [[], [0], [0, 1], [1, 5, 9], [0, 63]])
def test_get_bits(bits: list[int]) -> None:
    # ascending, and empty for the empty mask (Go: nil)
    assert ids_of(mask_of(bits)) == sorted(bits)


# ------------------------------------------------------------------ TestIsNarrowerThan


@pytest.mark.parametrize(
    ("first", "second", "expected"),
    [
        pytest.param([0], [0, 1], True, id="Check narrowness of masks with unequal bits set 1/2"),
        pytest.param([0, 1], [0], False, id="Check narrowness of masks with unequal bits set 2/2"),
        pytest.param([0], [1], True, id="Check narrowness of masks with equal bits set 1/2"),
        pytest.param([1], [0], False, id="Check narrowness of masks with equal bits set 2/2"),
        # bitmask.go: equal counts compare as integers (IsLessThan), so {1,2}=6 beats {0,3}=9
        pytest.param([1, 2], [0, 3], True, id="equal counts: integer order, {1,2} < {0,3}"),
        pytest.param([0, 3], [1, 2], False, id="equal counts: integer order, {0,3} > {1,2}"),
        pytest.param([0, 1], [0, 1], False, id="equal masks are not narrower"),
    ],
)
def test_is_narrower_than(first: list[int], second: list[int], expected: bool) -> None:
    assert is_narrower(mask_of(first), mask_of(second)) is expected


def test_narrow_key_is_is_narrower_than() -> None:
    masks = range(1 << 5)
    for a in masks:
        for c in masks:
            assert is_narrower(a, c) == (narrow_key(a) < narrow_key(c))


# ------------------------------------------------------------------ TestIterateBitMasks


@pytest.mark.parametrize("numbits", [1, 2, 4, 8, 16])
def test_iterate_bitmasks_count(numbits: int) -> None:
    # one mask for each integer 1 .. 2^n - 1, none repeated, never the empty mask
    masks = list(iterate_masks(range(numbits)))
    assert len(masks) == (1 << numbits) - 1
    assert set(masks) == set(range(1, 1 << numbits))


def test_iterate_bitmasks_order() -> None:
    # IterateBitMasks: for size 1..n, recursive choice in input order (= combinations)
    got = [ids_of(m) for m in iterate_masks([0, 1, 2])]
    assert got == [[0], [1], [2], [0, 1], [0, 2], [1, 2], [0, 1, 2]]
    got = [ids_of(m) for m in iterate_masks([0, 2, 5, 7])]
    assert got == [sorted(c) for k in range(1, 5) for c in combinations([0, 2, 5, 7], k)]


def test_iterate_bitmasks_follows_input_order() -> None:
    # the kubelet iterates the caller's list as given; numalign does the same
    assert list(iterate_masks([3, 1])) == [mask_of([3]), mask_of([1]), mask_of([1, 3])]


@pytest.mark.parametrize("ids", [[0, 1, 2, 3], [0, 2, 5, 7, 9], [1, 4, 6], list(range(8))])
def test_masks_of_size_is_narrowness_order(ids: list[int]) -> None:
    """For one popcount, masks_of_size yields the IterateBitMasks masks in integer order."""
    for k in range(len(ids) + 2):
        expected = sorted(m for m in iterate_masks(ids) if count(m) == k)
        assert list(masks_of_size(ids, k)) == expected
