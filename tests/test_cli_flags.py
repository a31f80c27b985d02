"""Flags are taken as written (issue 23): no abbreviations on any parser, a misspelled flag
gets a suggestion, every parse error is one line with exit status 2, and a value that starts
with ``-`` and a digit reaches the flag's own check."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

import pytest

from conftest import REPO
from numalign.cli import build_parser, main
from numalign.cli.argparser import StrictParser

FIG1 = str(REPO / "examples" / "fig1.yaml")
PODS = str(REPO / "examples" / "fig1-pods.yaml")


def _parsers(parser: argparse.ArgumentParser, path: str = "numalign") -> list[tuple[str, argparse.ArgumentParser]]:
    out = [(path, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out += _parsers(sub, f"{path} {name}")
    return out


PARSERS = _parsers(build_parser())


def test_every_parser_is_strict() -> None:
    assert {p for p, _ in PARSERS} >= {"numalign", "numalign run", "numalign ps", "numalign export",
                                       "numalign extender", "numalign extender serve"}
    for path, parser in PARSERS:
        assert isinstance(parser, StrictParser) and parser.allow_abbrev is False, path


def _fails(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The stderr of a command that must fail with one line and exit status 2."""
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2, err
    assert err.count("\n") == 1 and err.startswith("numalign"), err
    return err.strip()


@pytest.mark.parametrize(("argv", "message"), [
    (["admit", "--machin", FIG1, PODS],
     "numalign admit: error: unrecognized argument --machin (did you mean --machine?)"),
    (["admit", "-m", FIG1, "--explian", PODS],
     "numalign admit: error: unrecognized argument --explian (did you mean --explain?)"),
    (["extender", "serve", "--nrt", "/tmp"],
     "numalign extender serve: error: unrecognized arguments --nrt (did you mean --nrt-dir?), /tmp"),
    (["run", "--dry", "--", "true"],
     "numalign run: error: unrecognized argument --dry (did you mean --dry-run?)"),
    (["export", "-m", FIG1, "--node", "x"],
     "numalign export: error: unrecognized arguments --node (did you mean --node-name?), x"),
    (["simulate", "--quite"], "numalign simulate: error: unrecognized argument --quite (did you mean --quiet?)"),
    (["schema", "machine", "--zzz"],
     "numalign schema: error: unrecognized argument --zzz (see numalign schema --help)"),
    ([], "numalign: error: the following arguments are required: COMMAND (see numalign --help)"),
    (["extender"], "numalign extender: error: the following arguments are required: COMMAND"
                   " (see numalign extender --help)"),
])
def test_prefixes_and_misspellings_are_refused_with_a_suggestion(
        argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert _fails(argv, capsys) == message


def test_every_long_flag_without_its_last_letter_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    """The property behind the table above, for every flag of every command: the prefix is
    not taken for the flag, and the flag is suggested. (A command with required arguments
    says that first; the others name the prefix.)"""
    checked = 0
    for path, parser in PARSERS:
        assert isinstance(parser, StrictParser)
        required = any(a.required for a in parser._actions)
        flags = parser.flags()
        for flag in flags:
            prefix = flag[:-1]
            if not flag.startswith("--") or prefix in flags or len(prefix) < 4:
                continue
            with pytest.raises(SystemExit) as exc:
                parser.parse_known_args([f"{prefix}=1"])
            err = capsys.readouterr().err
            assert exc.value.code == 2 and err.count("\n") == 1, (path, err)
            if not required:
                assert f"unrecognized argument {prefix}=1 (did you mean " in err, (path, err)
                checked += 1
            message = parser.unrecognized([prefix])
            assert message.startswith(f"unrecognized argument {prefix} (did you mean "), (path, message)
            assert flag in message, (path, message)
    assert checked > 40


@pytest.mark.parametrize(("argv", "message"), [
    (["run", "-m", FIG1, "--memory", "-1Gi", "--dry-run"],
     "numalign run: error: --memory: a memory amount must be positive, got '-1Gi'"),
    (["run", "-m", FIG1, "--hugepages-2Mi", "-.5Gi", "--dry-run"],
     "numalign run: error: --hugepages-2Mi: a hugepage amount must be positive, got '-.5Gi'"),
    (["run", "-m", FIG1, "--cpus", "-2", "--dry-run"],
     "numalign run: error: --cpus: must be at least 1, got -2"),
    (["export", "-m", FIG1, "--interval", "-5s"],
     "numalign export: error: argument --interval: invalid float value: '-5s' (see numalign export --help)"),
    (["export", "-m", FIG1, "--interval", "-5"], "numalign export: error: --interval: must be positive"),
])
def test_negative_looking_values_reach_their_check(
        argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    try:
        code = main(argv)
    except SystemExit as e:  # argparse's own type check
        code = e.code
    err = capsys.readouterr().err
    assert code == 2 and err.strip() == message and err.count("\n") == 1, err


def test_a_flag_still_ends_a_value_list(capsys: pytest.CaptureFixture[str]) -> None:
    """``-m`` after a positional is a flag, not a value: only ``-<digit>`` became a value."""
    assert main(["admit", PODS, "-m", FIG1, "-o", "json"]) == 0
    assert '"admitted": true' in capsys.readouterr().out


def test_the_command_line_says_it_in_one_line() -> None:
    """The real process: one line on stderr, exit 2, nothing on stdout."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    proc = subprocess.run([sys.executable, "-m", "numalign", "run", "--memory", "-1Gi", "--machin",
                           FIG1, "--", "true"],
                          capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == "numalign run: error: unrecognized argument --machin (did you mean --machine?)\n"


def test_argparse_asks_gettext_once_per_word(monkeypatch: pytest.MonkeyPatch) -> None:
    """argparse's words come from gettext, looked up once per process (the locale search on
    disk is not repeated for every parser), and they are gettext's own answers."""
    import gettext

    from numalign.cli import argparser

    real = gettext.gettext
    # the parser module installed a memo over gettext itself
    assert getattr(argparse._, "__wrapped__", None) is real  # type: ignore[attr-defined]
    asked: list[str] = []

    def counting(message: str) -> str:
        asked.append(message)
        return real(message)

    remembered = argparser.functools.lru_cache(maxsize=256)(counting)
    monkeypatch.setattr(argparse, "_", remembered)
    build_parser()
    build_parser()
    assert asked and len(asked) == len(set(asked))  # each word once, over two whole trees
    assert all(argparse._(m) == real(m) for m in asked)  # type: ignore[attr-defined]
