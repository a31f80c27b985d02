"""The managers own their tables: no module outside ``resources/``, Koordinator's managers
(``modes/koordinator/``) and ``node/usage.py`` reads
or writes them (issue 11). Everything else asks :mod:`numalign.node.usage` or a manager's
reader methods."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "numalign"

#: the managers' internal tables (CpuState, MemoryState, NodeMemoryState, DeviceState)
TABLES = frozenset({
    "default_set", "assignments", "cpus_to_reuse",
    "machine_state", "memory_map", "number_of_assignments", "cells", "reusable",
    "allocated",
})
OWNERS = ("resources/", "modes/koordinator/cpu.py", "modes/koordinator/memory.py",
          "modes/koordinator/devices.py", "node/usage.py")


def _offenders() -> list[str]:
    out: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith(OWNERS):
            continue
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in TABLES:
                out.append(f"{rel}:{node.lineno}: .{node.attr}")
    return out


def test_no_module_outside_the_owners_touches_manager_tables() -> None:
    assert _offenders() == []


def test_the_guard_sees_a_violation(tmp_path: Path) -> None:
    # the scan itself must be able to fail: the attribute names are found in real code
    tree = ast.parse("def f(node):\n    return node.state.cpu.default_set\n")
    found = [n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr in TABLES]
    assert found == ["default_set"]
