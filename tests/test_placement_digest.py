"""benchmarks.placement_digest: the digest of a cell's scheduling outcomes, used to show that a
speed change changed no decision, is the same on every run and covers every outcome."""

from __future__ import annotations

import pytest
from benchmarks.placement_digest import digest, main


def test_digest_is_repeatable_and_covers_every_outcome() -> None:
    placed, first = digest("5000x2", "nrt-snn", 12)
    assert (placed, first) == digest("5000x2", "nrt-snn", 12)  # a fresh cluster: the same outcomes
    more_placed, more = digest("5000x2", "nrt-snn", 13)
    assert more != first and more_placed in (placed, placed + 1)  # one more outcome hashed
    assert 0 < placed <= 12


def test_an_unknown_cell_is_refused() -> None:
    with pytest.raises(SystemExit) as exc:
        main(["9x9"])
    assert exc.value.code == 2


@pytest.mark.parametrize("pods", ["0", "1000000000", "1e18", "x"])
def test_a_pod_count_out_of_range_is_refused(pods: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["5000x2", "--pods", pods])
    assert exc.value.code == 2
    assert "--pods" in capsys.readouterr().err
