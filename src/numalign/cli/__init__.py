"""The ``numalign`` command: the parser and one handler per verb (thin: every decision is the
engine's or an adapter's)."""

from numalign.cli.main import build_parser, main, version

__all__ = ["build_parser", "main", "version"]
