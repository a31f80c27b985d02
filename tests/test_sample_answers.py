"""benchmarks.sample_answers: the node-key groups of each pod's sample, those without an answer for
its shape, and the filter runs of the walk, on the benchmark cells."""

from __future__ import annotations

import pytest
from benchmarks.sample_answers import main, sample_answers


def test_the_first_pod_finds_every_sampled_group_unanswered() -> None:
    groups, unanswered, walk = sample_answers("5000x2", "nrt-snn", 1)
    assert groups >= 1 and unanswered == groups  # nothing asked before the first pod
    assert 1 <= walk <= groups  # the walk asked the groups it needed, at least one


def test_answers_kept_leave_fewer_unanswered_groups() -> None:
    groups, unanswered, walk = sample_answers("5000x2", "nrt-snn", 30)
    assert 0 < unanswered < groups
    assert walk > 0


def test_a_profile_without_node_key_and_an_unknown_cell_are_refused() -> None:
    with pytest.raises(SystemExit, match="no node key"):
        sample_answers("5000x2", "numalign", 1)
    with pytest.raises(SystemExit) as exc:
        main(["9x9"])
    assert exc.value.code == 2
