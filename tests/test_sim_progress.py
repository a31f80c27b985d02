"""``numalign simulate``'s progress (issue 23): a bar redrawn with ``\\r`` only on a terminal;
a log file or a pipe gets one plain line per profile; ``--quiet`` gets nothing."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from numalign.cli import main
from numalign.sim.cli_run import ReplayProgress


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _feed(progress: ReplayProgress) -> None:
    for profile in ("default", "numalign"):
        for done in (200, 400, 600, 650):
            progress(profile, done, 650)


def test_a_terminal_gets_the_bar_redrawn_in_place() -> None:
    tty = _Terminal()
    _feed(ReplayProgress(tty, quiet=False))
    text = tty.getvalue()
    assert text.count("\r") == 8 and text.count("\n") == 2
    assert "[##############################] 650/650 pods" in text


def test_a_file_gets_one_plain_line_per_profile() -> None:
    log = io.StringIO()
    _feed(ReplayProgress(log, quiet=False))
    lines = log.getvalue().splitlines()
    assert "\r" not in log.getvalue()
    assert [line.split(" pods")[0] for line in lines] == ["  default: 650", "  numalign: 650"]


@pytest.mark.parametrize("stream", [io.StringIO(), _Terminal()])
def test_quiet_is_silent(stream: io.StringIO) -> None:
    _feed(ReplayProgress(stream, quiet=True))
    assert stream.getvalue() == ""


def test_simulate_into_a_log_file_writes_no_carriage_return(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import numalign.sim.report as report

    monkeypatch.setattr(report, "plotting_available", lambda: False)  # the plots are not the point
    argv = ["simulate", "--cluster", "builtin:small", "--workload", "synthetic:count=12",
            "--profiles", "default,numalign", "--out", str(tmp_path)]
    assert main(argv) == 0
    err = capsys.readouterr().err  # captured: not a terminal, like a log file
    assert "\r" not in err
    lines = err.splitlines()
    assert lines[0].startswith("cluster: 4 nodes; workload: ")
    assert [line.split(":")[0] for line in lines[1:3]] == ["  default", "  numalign"]
    assert main([*argv, "--quiet"]) == 0
    assert "pods replayed" not in capsys.readouterr().err
