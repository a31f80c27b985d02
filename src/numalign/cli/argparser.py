"""The argument parser of every ``numalign`` command and sub-command: strict about flags.

* No abbreviations: ``--machin`` is not taken for ``--machine`` (``allow_abbrev=False``; a
  prefix that is accepted today would change meaning the day a longer flag is added).
* An unknown flag is named where it was given, with the closest flags of that command
  (:mod:`difflib`): ``numalign admit: error: unrecognized argument --machin (did you mean
  --machine?)``.
* Every error is one line and exit status 2 (no usage block: the line points to ``--help``).
* A value that starts with ``-`` and a digit (``--memory -1Gi``, ``--interval -.5``) is a
  value, not a flag, so the flag's own check says what is wrong with it; no numalign flag looks
  like that.

Sub-command parsers are made by ``add_subparsers().add_parser``, which uses the parent's class,
so the whole tree is made of :class:`StrictParser` (``tests/test_cli_flags.py`` checks it).
"""

from __future__ import annotations

import argparse
import functools
import gettext
import os
import re
import sys

from numalign.errors import one_line

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up time)
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any, NoReturn

# argparse looks each of its words up with gettext.gettext ("usage: ", "options", "show this help
# message and exit", ...), and gettext searches the locale directories on disk on every call,
# keeping no miss: 46 look-ups and 5-9 ms for `numalign --help`. One process asks each word
# once; the answer is gettext's own, in the same locale.
argparse._ = functools.lru_cache(maxsize=256)(gettext.gettext)  # type: ignore[attr-defined]

#: what argparse takes for a value although it starts with ``-``: a digit, or a dot and a digit
NEGATIVE_LOOKING = re.compile(r"^-\.?\d")


def terminal_columns() -> int:
    """``shutil.get_terminal_size().columns`` (``COLUMNS``, else the terminal of stdout, else
    80) without importing :mod:`shutil`, which loads zlib, bz2 and lzma."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns > 0:
        return columns
    out = sys.__stdout__
    try:
        return (os.get_terminal_size(out.fileno()).columns if out is not None else 0) or 80
    except (AttributeError, ValueError, OSError):  # closed, detached, not a terminal
        return 80


class Formatter(argparse.HelpFormatter):
    """argparse's help formatter, its width found by :func:`terminal_columns`: argparse makes
    one in every ``add_argument`` (to check the metavar), and its own default width imports
    :mod:`shutil` (about 2 ms of every command's start-up)."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:
        super().__init__(prog, indent_increment, max_help_position,
                         terminal_columns() - 2 if width is None else width)


class RawDescriptionFormatter(Formatter, argparse.RawDescriptionHelpFormatter):
    """:class:`Formatter` keeping the line breaks of descriptions and epilogs (the help pages)."""


class StrictParser(argparse.ArgumentParser):
    """:class:`argparse.ArgumentParser` without abbreviations, with suggestions for unknown
    flags and one-line errors (see the module docstring)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        kwargs.setdefault("formatter_class", Formatter)
        super().__init__(**kwargs)
        # argparse's own matcher takes only plain numbers (-1, -.5) for values
        self._negative_number_matcher = NEGATIVE_LOOKING
        #: run once before this parser's help is first formatted (the pages' texts are loaded then)
        self.before_help: Callable[[argparse.ArgumentParser], None] | None = None

    def format_help(self) -> str:
        hook, self.before_help = self.before_help, None
        if hook is not None:
            hook(self)
        return super().format_help()

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None,
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:  # refused here, where the flags they were meant for are known
            self.error(self.unrecognized(extras))
        return parsed, extras

    def flags(self) -> list[str]:
        """This command's long and short flags (``--help`` and ``-h`` left out)."""
        return [s for a in self._actions for s in a.option_strings if s not in ("-h", "--help")]

    def unrecognized(self, extras: Sequence[str]) -> str:
        """``unrecognized argument X (did you mean Y?)``, for every unknown argument."""
        flags = self.flags()
        parts = []
        for arg in extras:
            name = arg.split("=", 1)[0]
            close = _closest(name, flags) if name.startswith("-") else []
            hint = f" (did you mean {' or '.join(close)}?)" if close else ""
            parts.append(f"{arg}{hint}")
        noun = "argument" if len(extras) == 1 else "arguments"
        return f"unrecognized {noun} {', '.join(parts)}"

    def error(self, message: str) -> NoReturn:
        """One line on stderr, exit status 2: argparse's usage block is left out, and pointed
        to unless a flag is suggested."""
        hint = "" if "(did you mean " in message else f" (see {self.prog} --help)"
        self.exit(2, f"{self.prog}: error: {one_line(message)}{hint}\n")


def _closest(name: str, flags: Sequence[str]) -> list[str]:
    """The flags ``name`` was probably meant to be: the (at most two) it abbreviates, else the
    most similar one (:func:`difflib.get_close_matches`)."""
    import difflib

    longer = [f for f in flags if f.startswith(name) and len(name) > 2]
    return longer[:2] or difflib.get_close_matches(name, flags, n=1, cutoff=0.6)


def subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """``parser``'s sub-command parsers by name (none: empty)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}
