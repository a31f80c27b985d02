"""numalign.memo.remember: a bounded memo starts over when full, and never exceeds its limit."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from numalign.memo import remember


def test_a_full_memo_starts_over() -> None:
    memo: dict[int, str] = {1: "a", 2: "b"}
    assert remember(memo, 3, "c", 2) == "c"
    assert memo == {3: "c"}
    assert remember(memo, 4, "d", 2) == "d"
    assert memo == {3: "c", 4: "d"}


@given(keys=st.lists(st.integers(0, 50), max_size=200), limit=st.integers(1, 10))
def test_never_over_the_limit_and_the_last_value_is_kept(keys: list[int], limit: int) -> None:
    memo: dict[int, int] = {}
    for i, k in enumerate(keys):
        remember(memo, k, i, limit)
        assert len(memo) <= limit and memo[k] == i
