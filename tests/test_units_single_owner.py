"""One owner per unit concept: the old copies must not come back.

Quantities, byte formatting and hugepage names live in ``numalign/inputs/quantity.py``; cpulists and
hex masks in ``numalign/cpulist.py``; Go's ParseBool/Atoi in ``numalign/goparse.py``. This test
greps ``src/numalign`` for the spellings of the copies that were removed.

``PENDING`` lists the copies still left in files this change could not edit (other branches
own them). Each entry must still match - a stale entry fails too - so the list only shrinks:
remove the copy, then its entry.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "numalign"

#: name -> (pattern, the files allowed to hold it)
RULES: dict[str, tuple[re.Pattern[str], frozenset[str]]] = {
    # tables of binary suffixes ("Gi", 30) / {"Ki": ...} / ("GiB", 30): formatting by hand
    "suffix table": (
        re.compile(r"""["'](?:Ki|Mi|Gi|Ti|Pi|Ei)B?["']\s*[,:)]"""),
        frozenset({"inputs/quantity.py"}),
    ),
    # f"{n >> 20}Mi", f"{v // MIB}Mi": a byte amount formatted inline
    "inline binary suffix": (re.compile(r"\}(?:Ki|Mi|Gi|Ti|Pi|Ei)\b"), frozenset({"inputs/quantity.py"})),
    # the hugepages-<size> spelling outside the owner
    "hugepages prefix": (
        re.compile(r"""(?:startswith|removeprefix)\(\s*["']hugepages-|f["']hugepages-\{"""),
        frozenset({"inputs/quantity.py"}),
    ),
    "memory-or-hugepages test": (
        re.compile(r"""==\s*["']memory["']\s+or\b"""),
        frozenset({"inputs/quantity.py"}),
    ),
    # Go's ParseBool accepted set
    "ParseBool set": (re.compile(r"""["']TRUE["']"""), frozenset({"inputs/goparse.py"})),
    # cpulist / cpumask parsers
    "cpulist parser": (
        re.compile(r"^\s*def\s+(?:parse_cpulist|parse_cpumask|_parse_list|parse_kernel_cpulist)\b", re.M),
        frozenset({"inputs/cpulist.py"}),
    ),
}

#: (rule, file) -> why the copy is still there
PENDING: dict[tuple[str, str], str] = {
}

#: quantity helpers that must be imported from numalign.inputs.quantity, not through pods
QUANTITY_NAMES = frozenset({"parse_quantity", "quantity_int", "cpu_millis", "Quantity"})
PENDING_POD_IMPORTS: dict[str, str] = {}


def _sources() -> dict[str, str]:
    return {p.relative_to(SRC).as_posix(): p.read_text() for p in sorted(SRC.rglob("*.py"))}


def _hits() -> dict[tuple[str, str], list[str]]:
    out: dict[tuple[str, str], list[str]] = {}
    for rel, text in _sources().items():
        for name, (pattern, owners) in RULES.items():
            if rel in owners:
                continue
            found = [m.group(0).strip() for m in pattern.finditer(text)]
            if found:
                out[(name, rel)] = found
    return out


def test_no_unit_copies_outside_their_owner() -> None:
    unexpected = {k: v for k, v in _hits().items() if k not in PENDING}
    assert not unexpected, (
        "unit logic copied outside its owner (use numalign.inputs.quantity / cpulist / goparse): "
        f"{unexpected}"
    )


@pytest.mark.parametrize("entry", sorted(PENDING))
def test_pending_entries_are_not_stale(entry: tuple[str, str]) -> None:
    assert entry in _hits(), f"{entry} no longer has the copy: remove it from PENDING"


def test_quantity_helpers_are_imported_from_their_owner() -> None:
    offenders: dict[str, list[str]] = {}
    for rel, text in _sources().items():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ImportFrom) and node.module == "numalign.pods":
                names = [a.name for a in node.names if a.name in QUANTITY_NAMES]
                if names:
                    offenders.setdefault(rel, []).extend(names)
    assert set(offenders) == set(PENDING_POD_IMPORTS), offenders


def test_one_definition_each() -> None:
    """The unit functions are defined once, in their owner."""
    owners: dict[str, list[str]] = {
        "parse_quantity": ["inputs/quantity.py"],
        "quantity_int": ["inputs/quantity.py"],
        "cpu_millis": ["inputs/quantity.py"],
        # spec's is the YAML form (an int when there is no suffix) over quantity's
        "format_bytes": ["inputs/quantity.py", "machine/spec.py"],
        "hugepage_resource_name": ["inputs/quantity.py"],
        "is_memory_resource": ["inputs/quantity.py"],
        "format_cpulist": ["inputs/cpulist.py"],
        "format_cpumask": ["inputs/cpulist.py"],
        "parse_go_bool": [],
        "quantity_text": [],
        "_quantity_text": [],
        "hugepage_resource": [],
        "_format_millis": [],
    }
    defined: dict[str, list[str]] = {}
    for rel, text in _sources().items():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef) and node.name in owners:
                defined.setdefault(node.name, []).append(rel)
    for name, owner in owners.items():
        assert sorted(defined.get(name, [])) == owner, (name, defined.get(name))
