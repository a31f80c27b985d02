"""Bounded memos: a dict that starts over when full.

The engine, the scheduler and the NRT scores keep answers in plain dicts keyed by content (node
states, zone amounts, pod shapes). A memo that reaches its size limit is cleared and refilled:
losing it costs only the recomputation, and clearing keeps each store O(1) with no bookkeeping
per entry (a least-recently-used order would cost more than most of the answers it keeps).
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up time)
if TYPE_CHECKING:
    from collections.abc import Hashable, MutableMapping
    from typing import TypeVar

    K = TypeVar("K", bound=Hashable)
    V = TypeVar("V")


def remember(memo: MutableMapping[K, V], key: K, value: V, limit: int) -> V:
    """``memo[key] = value``, clearing ``memo`` first when it holds ``limit`` entries; returns
    ``value``."""
    if len(memo) >= limit:
        memo.clear()
    memo[key] = value
    return value


__all__ = ["remember"]
