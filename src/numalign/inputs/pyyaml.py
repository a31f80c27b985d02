"""PyYAML, imported with its regular expressions compiled on first use.

PyYAML compiles its regular expressions when its modules are imported: the pure-Python reader's
class of non-printable characters, the resolver's patterns for booleans, numbers, nulls and
timestamps, the constructor's timestamp pattern. On CPython 3.11 that is about 20 ms, the largest
single cost of a short command such as ``numalign admit`` (the reader's pattern alone, a class
of ranges up to U+10FFFF, takes about 10 ms). The libyaml loader numalign uses never reads the
reader's pattern, and a document compiles only the resolver patterns its scalars' first
characters select.

So while ``yaml`` is imported here, a ``re.compile`` called *from one of PyYAML's modules* returns
a :class:`PatternOnFirstUse`, which compiles the same pattern with the same flags the first time
one of its attributes is read, and from then on hands out the compiled pattern's own bound
methods (no extra call per match). A call from any other module, in any thread, gets
``re.compile``'s own answer. When ``yaml`` was already imported (by another library, before
numalign), it is used as it is.

Every module of numalign that uses PyYAML imports it from here (``from numalign.inputs.pyyaml
import yaml``); ``tests/test_pyyaml_import.py`` checks that the patterns are deferred, that they
match exactly as compiled ones do, and that documents load the same.
"""

from __future__ import annotations

import re
import sys
from typing import Any

#: the compiled pattern's attributes a PyYAML module reads (all of ``re.Pattern``'s public ones)
FORWARDED = ("match", "search", "fullmatch", "sub", "subn", "split", "findall", "finditer",
             "scanner", "pattern", "flags", "groups", "groupindex")


class PatternOnFirstUse:
    """A regular expression compiled the first time it is used; then, its compiled form's
    attributes are kept on this object (so ``p.match`` is the compiled pattern's own method)."""

    __slots__ = ("_args", "_compiled", *FORWARDED)

    def __init__(self, pattern: Any, flags: int) -> None:
        self._args = (pattern, flags)
        self._compiled: re.Pattern[Any] | None = None

    @property
    def compiled(self) -> bool:
        """Whether the pattern has been compiled yet."""
        return self._compiled is not None

    def __getattr__(self, name: str) -> Any:
        # called only for what is not set yet: the forwarded attributes before the first use,
        # and any other attribute of a pattern
        compiled = self._compiled
        if compiled is None:
            compiled = self._compiled = _compile_now(*self._args)
            for attr in FORWARDED:
                object.__setattr__(self, attr, getattr(compiled, attr))
        return getattr(compiled, name)

    def __repr__(self) -> str:
        state = "compiled" if self._compiled is not None else "not compiled yet"
        return f"<pattern {self._args[0]!r}, {state}>"


_compile_now = re.compile


def _compile_from_yaml(pattern: Any, flags: int = 0) -> Any:
    caller = sys._getframe(1).f_globals.get("__name__", "")
    if caller == "yaml" or caller.startswith("yaml."):
        return PatternOnFirstUse(pattern, flags)
    return _compile_now(pattern, flags)


if "yaml" in sys.modules:
    import yaml
else:
    re.compile = _compile_from_yaml
    try:
        import yaml
    finally:
        re.compile = _compile_now

__all__ = ["PatternOnFirstUse", "yaml"]
