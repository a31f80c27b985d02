"""The JSON Schemas of numalign's input formats, shipped as package data
(``numalign/data/*.schema.json``) and printed by ``numalign schema``."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from numalign.errors import InputError

#: schema name (``numalign schema NAME``) -> package data file
SCHEMAS = {
    "machine": "machine-spec.schema.json",
    "merge-case": "merge-case.schema.json",
}


def schema_text(name: str) -> str:
    """The schema ``name`` as JSON text."""
    if name not in SCHEMAS:
        raise InputError(f"unknown schema {name!r}; expected one of {', '.join(SCHEMAS)}")
    return resources.files("numalign").joinpath("data", SCHEMAS[name]).read_text(encoding="utf-8")


def load_schema(name: str) -> dict[str, Any]:
    """The schema ``name`` as a mapping."""
    doc: dict[str, Any] = json.loads(schema_text(name))
    return doc
