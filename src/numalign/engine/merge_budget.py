"""The step budget of one merge: exact searches that stop with a clear error, never hang.

Every search step of :mod:`numalign.engine.merge_search` and :mod:`numalign.engine.merge_order` is
counted against one :class:`Budget` per merge; running out raises :class:`MergeTooLarge`, an
:class:`~numalign.errors.InputError` (the CLI exits 2) that names the search.
"""

from __future__ import annotations

from numalign.errors import InputError

#: Search steps one merge may take before :class:`MergeTooLarge` is raised. A step costs
#: 10-100 us, so the error comes within seconds; the heaviest realistic merges measured
#: (prefer-closest with a pod over 20-45 of the 64 nodes of the SGI capture: at most 2,200;
#: adversarial device layouts) take under 10,000 steps, most merges under 500.
STEP_LIMIT = 100_000


class MergeTooLarge(InputError):
    """The exact merge would need more than :data:`STEP_LIMIT` search steps.

    Adapters treat it as a per-pod outcome with this ``reason``: the scheduler and the
    extender fail that node for that pod, the simulator counts a rejection, the CLI exits 2.
    """

    reason = "MergeTooLarge"

    def __init__(self, what: str) -> None:
        super().__init__(
            f"merge needs more than {STEP_LIMIT:,} search steps ({what}); "
            "the inputs are too large for an exact answer",
            "hints",
        )


class Budget:
    """Counts search steps of one merge."""

    __slots__ = ("left",)

    def __init__(self, steps: int | None = None) -> None:
        self.left = STEP_LIMIT if steps is None else steps

    def tick(self, what: str, n: int = 1) -> None:
        self.left -= n
        if self.left < 0:
            raise MergeTooLarge(what)


def popcount(mask: int) -> int:
    return mask.bit_count()
