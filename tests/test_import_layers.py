"""The house's imports, checked on the source: no import cycles.

Every module under ``src/numalign`` is parsed (not imported); every ``import`` and
``from ... import`` counts, wherever it is - module level, inside a function, or under
``if TYPE_CHECKING`` - so a cycle cannot hide behind a function-level import. ``from pkg
import name`` is an edge to the submodule ``pkg.name`` when that is a module, else to
``pkg``. The implicit import of a parent package (``a.b`` imports ``a`` first) is not an
edge.

The layers themselves (who may import whom) are import-linter's contract in ``pyproject.toml``,
checked by ``make test``'s ``lint-imports`` and ``tests/test_architecture.py``; this file adds
what that contract does not: no cycle, even inside a layer.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from conftest import REPO

SRC = REPO / "src"
PACKAGE = "numalign"

@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    line: int

    def __str__(self) -> str:
        return f"{self.source} -> {self.target} (line {self.line})"


def _module_name(path: Path, root: Path = SRC) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted((SRC / PACKAGE).rglob("*.py"))}


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The innermost known module that ``name`` is, or is inside of."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(module: str, path: Path, known: dict[str, Path]) -> list[Edge]:
    is_package = path.name == "__init__.py"
    here = module if is_package else module.rpartition(".")[0]
    edges: list[Edge] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here.split(".")
                base = base[: len(base) - (node.level - 1)]
                origin = ".".join([*base, *([node.module] if node.module else [])])
            else:
                origin = node.module or ""
            targets = [f"{origin}.{a.name}" if f"{origin}.{a.name}" in known else origin for a in node.names]
        for t in targets:
            if t == PACKAGE or t.startswith(PACKAGE + "."):
                resolved = _resolve(t, known)
                if resolved is not None and resolved != module:
                    edges.append(Edge(module, resolved, node.lineno))
    return edges


@cache
def graph() -> dict[str, list[Edge]]:
    known = modules()
    return {m: imports_of(m, p, known) for m, p in known.items()}


def find_cycle(edges: dict[str, list[Edge]]) -> list[Edge] | None:
    """One import cycle as its edges, or None (iterative depth-first search)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for root in sorted(edges):
        if root in state:
            continue
        path: list[Edge] = []
        stack = [(root, iter(edges[root]))]
        state[root] = 1
        while stack:
            node, it = stack[-1]
            edge = next(it, None)
            if edge is None:
                state[node] = 2
                stack.pop()
                if path:
                    path.pop()
                continue
            if state.get(edge.target) == 1:
                start = next((k for k, e in enumerate(path) if e.source == edge.target), len(path))
                return [*path[start:], edge]
            if edge.target not in state:
                state[edge.target] = 1
                path.append(edge)
                stack.append((edge.target, iter(edges.get(edge.target, []))))
    return None


# ---------------------------------------------------------------------------------- tests


def test_the_graph_sees_every_kind_of_import() -> None:
    g = graph()
    assert len(g) > 50
    # module level, a function-level import, relative-free package imports
    assert any(e.target == "numalign.sim.runner" for e in g["numalign.sim.cli_run"])
    assert any(e.target.startswith("numalign.launcher") for e in g["numalign.cli.main"])
    assert any(e.target == "numalign.kube.extender.core" for e in g["numalign.kube.extender"])


def test_a_function_level_cycle_is_found(tmp_path: Path) -> None:
    pkg = tmp_path / "numalign"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from numalign.b import x\n")
    (pkg / "b.py").write_text("def f():\n    from . import a\n    return a\nx = 1\n")
    known = {_module_name(p, tmp_path): p for p in pkg.rglob("*.py")}
    edges = {m: imports_of(m, p, known) for m, p in known.items()}
    cycle = find_cycle(edges)
    assert cycle is not None and {e.source for e in cycle} == {"numalign.a", "numalign.b"}
    (pkg / "b.py").write_text("x = 1\n")
    assert find_cycle({m: imports_of(m, p, known) for m, p in known.items()}) is None


def test_no_import_cycles() -> None:
    cycle = find_cycle(graph())
    assert cycle is None, "import cycle: " + "; ".join(map(str, cycle or []))
