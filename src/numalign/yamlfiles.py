"""Reading YAML/JSON files with one-line errors (every file reader of numalign uses these).

Errors are :class:`~numalign.errors.InputError` naming the path: ``cannot read <what>: <reason>``,
``not UTF-8 text: ...``, ``invalid YAML: <problem> at line L, column C``.
"""

from __future__ import annotations

from typing import Any

import yaml

from numalign.errors import InputError


def yaml_problem(e: Exception) -> str:
    """A one-line description of a PyYAML error, with its line and column."""
    problem = getattr(e, "problem", None) or (str(e).splitlines() or ["syntax error"])[0]
    mark = getattr(e, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return " ".join(f"{problem}{where}".split())


def _text(path: str, what: str) -> str:
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except OSError as e:
        label = f"cannot read {what}" if what else "cannot read"
        raise InputError(f"{label}: {e.strerror or e}", path) from None
    except UnicodeDecodeError as e:
        raise InputError(f"not UTF-8 text: {e.reason}", path) from None


def read_yaml(path: str, what: str = "", *, invalid: str = "invalid YAML") -> Any:
    """The single YAML (or JSON) document in ``path``; ``None`` if it is empty.

    ``invalid`` starts the message of a syntax error (discovery says "malformed YAML").
    """
    text = _text(path, what)
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise InputError(f"{invalid}: {yaml_problem(e)}", path) from None


def read_yaml_documents(path: str, what: str = "", *, invalid: str = "invalid YAML") -> list[Any]:
    """Every document of a multi-document YAML file, in order (empty ones included)."""
    text = _text(path, what)
    try:
        return list(yaml.safe_load_all(text))
    except yaml.YAMLError as e:
        raise InputError(f"{invalid}: {yaml_problem(e)}", path) from None
