"""The small-input fold (explicit lists, the kubelet's own input sizes) equals the product fold.

Its fast paths are checked on their own inputs: nodes ``0..n-1`` with ``n <= 4`` (per-byte
image tables), ``5..8`` (bitmap shifts), sparse node ids (sets of masks), preferred
candidates by intersection, Narrowest and Closest, and hints with nodes outside the default.
"""

from __future__ import annotations

import functools
import itertools

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import numalign.engine.merge as merge_module
import numalign.engine.merge_tiny as tiny_module
from numalign.engine.bitmask import mask_of
from numalign.engine.hints import HintList, TopologyHint
from numalign.engine.merge import FitOrder, merge_lists
from numalign.engine.reference import product_fold

SETTINGS = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])


@functools.cache
def hint_lists(ids: tuple[int, ...]) -> st.SearchStrategy[list[list[TopologyHint]]]:
    """Built once per id set: a strategy built inside a draw is validated on every example."""
    wide = (1 << (max(ids) + 1)) - 1
    mask = st.integers(1, wide).map(lambda m: m & mask_of(ids)).filter(bool) | st.just(None)
    hint = st.builds(TopologyHint, mask, st.booleans())
    return st.lists(st.lists(hint, min_size=1, max_size=6), min_size=1, max_size=4)


@st.composite
def small_cases(draw: st.DrawFn) -> tuple[int, list[HintList], FitOrder]:
    if draw(st.booleans()):
        ids = list(range(draw(st.integers(1, 8))))  # dense: the bitmap paths
    else:
        ids = sorted(draw(st.sets(st.integers(0, 11), min_size=1, max_size=6)))
    default = mask_of(ids)
    if len(ids) > 1 and draw(st.integers(0, 5)) == 0:
        default &= ~(1 << ids[-1])  # a hint may hold a node outside the default
    lists: list[HintList] = draw(hint_lists(tuple(ids)))
    fit = FitOrder()
    if draw(st.booleans()):
        rows = {i: {j: 10 if i == j else draw(st.sampled_from([20, 21, 30])) for j in ids} for i in ids}
        fit = FitOrder(rows)
    return default, lists, fit


@settings(SETTINGS, max_examples=300)
@given(small_cases())
def test_small_fold_equals_the_product_fold(case: tuple[int, list[HintList], FitOrder]) -> None:
    default, lists, fit = case
    assert merge_module._small_explicit(lists, default) == merge_module._SMALL
    expected = product_fold(lists, default, fit)
    assert merge_module._fold_small(lists, default, fit) == expected  # type: ignore[arg-type]
    assert merge_lists(lists, default, fit) == expected


#: hint lists whose masks may be empty (0 nodes) or reach beyond the default's nodes
TINY_LISTS = st.lists(
    st.lists(st.builds(TopologyHint, st.integers(0, 15) | st.just(None), st.booleans()), min_size=1, max_size=6),
    min_size=1, max_size=4,
)


@settings(SETTINGS, max_examples=300)
@given(small_cases() | st.tuples(st.sampled_from([3, 6, 7, 15]), TINY_LISTS, st.just(FitOrder())))
@example((520, [[TopologyHint(8, False), TopologyHint(0, False), TopologyHint(520, False)]], FitOrder()))
def test_tiny_fold_is_the_product_fold(case: tuple[int, list[HintList], FitOrder]) -> None:
    """The permutation-by-permutation fold of inputs of a few permutations (Narrowest)."""
    default, lists, _ = case
    assert tiny_module.fold_tiny(lists, default) == product_fold(lists, default, FitOrder())  # type: ignore[arg-type]
    count = 1
    for hints in lists:
        count *= len(hints)
    assert tiny_module.tiny_permutations(lists) == (count if count <= tiny_module.TINY_PERMUTATIONS else 0)


@settings(SETTINGS, max_examples=100)
@given(small_cases())
def test_small_fold_equals_the_search(case: tuple[int, list[HintList], FitOrder]) -> None:
    """The same answer as the searches that take every larger input."""
    default, lists, fit = case
    small = merge_lists(lists, default, fit)
    saved = merge_module.SMALL_FOLD_STEPS, tiny_module.TINY_PERMUTATIONS
    merge_module.SMALL_FOLD_STEPS = tiny_module.TINY_PERMUTATIONS = 0
    try:
        assert merge_lists(lists, default, fit) == small
    finally:
        merge_module.SMALL_FOLD_STEPS, tiny_module.TINY_PERMUTATIONS = saved


def test_empty_list_is_the_default_not_preferred() -> None:
    lists: list[HintList] = [[TopologyHint(1, True)], []]
    assert merge_lists(lists, 3) == TopologyHint(3, False)


def test_image_tables_are_the_and_images() -> None:
    """Per-byte tables: the image of every 16-bit set of 4-node masks under every AND."""
    chunks = merge_module._image_chunks(4)
    for m in range(16):
        for bits in itertools.chain(range(0, 1 << 16, 251), [0xFFFF, 0x8001]):
            expected = 0
            for x in range(16):
                if bits >> x & 1:
                    expected |= 1 << (x & m)
            assert chunks[m][0][bits & 0xFF] | chunks[m][1][bits >> 8] == expected
