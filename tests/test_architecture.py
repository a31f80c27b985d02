"""The shape of the house, checked on the source (issue 22).

* the root package keeps at most six modules;
* every module sits in a layer of the import-linter contract (``pyproject.toml``), so a new
  module cannot escape it, and the contract holds (an upward import fails here and in
  ``make test``'s ``lint-imports``);
* no engine-mode or kubelet-release comparison outside ``modes/`` and the rules resolver
  (``node/rules.py``): everything else asks the node's rules;
* a file longer than 700 lines is named, with the reason it is one file, in
  ``docs/architecture.md``.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from conftest import REPO

SRC = REPO / "src"
PACKAGE = SRC / "numalign"
MAX_LINES = 700
#: where a mode or a release may be compared
RULE_OWNERS = ("modes/", "node/rules.py")


def _modules(root: Path = SRC) -> dict[str, Path]:
    out = {}
    for p in sorted((root / "numalign").rglob("*.py")):
        parts = list(p.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = p
    return out


def _layers() -> list[list[str]]:
    conf = tomllib.loads((REPO / "pyproject.toml").read_text())
    (contract,) = conf["tool"]["importlinter"]["contracts"]
    assert contract["type"] == "layers"
    return [re.split(r"\s*[|:]\s*", layer.strip()) for layer in contract["layers"]]


def _is_face(path: Path) -> bool:
    """A package ``__init__`` that defines and imports nothing at run time (a docstring, or
    lazy names whose real imports sit under ``TYPE_CHECKING``)."""
    if path.name != "__init__.py":
        return False
    tree = ast.parse(path.read_text())
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            return False
        if isinstance(node, ast.ImportFrom) and node.module not in (
            "__future__", "typing", "numalign.lazy_exports"
        ):
            return False
    return True


def test_root_package_keeps_at_most_six_modules() -> None:
    root = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(root) <= 6, root
    assert {"__init__.py", "__main__.py", "errors.py"} <= set(root)


def test_every_module_is_in_a_layer() -> None:
    layers = [m for layer in _layers() for m in layer]
    outside = [
        name for name, path in _modules().items()
        if not any(name == m or name.startswith(m + ".") for m in layers)
        and not _is_face(path) and name != "numalign"  # the public face: lazy names only
    ]
    assert outside == [], f"modules in no layer of pyproject's import-linter contract: {outside}"


def _lint(root: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` on the package under ``root`` (a subprocess: the package it reads is the
    one ``PYTHONPATH`` finds first)."""
    exe = Path(sys.executable).with_name("lint-imports")
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run([str(exe), "--config", str(REPO / "pyproject.toml"), "--no-cache"],
                          capture_output=True, text=True, env=env, cwd=root, timeout=120)


def test_the_layers_contract_holds_and_sees_an_upward_import(tmp_path: Path) -> None:
    if not Path(sys.executable).with_name("lint-imports").exists():
        pytest.skip("import-linter is not installed (make test installs it)")
    ok = _lint(SRC)
    assert ok.returncode == 0, ok.stdout[-2000:]
    copy = tmp_path / "src"
    shutil.copytree(PACKAGE, copy / "numalign", ignore=shutil.ignore_patterns("__pycache__"))
    bitmask = copy / "numalign" / "engine" / "bitmask.py"
    bitmask.write_text(bitmask.read_text() + "\nfrom numalign.node import rules  # noqa\n")
    broken = _lint(copy)
    assert broken.returncode != 0 and "numalign.engine.bitmask -> numalign.node.rules" in broken.stdout


# ------------------------------------------------------------------ modes and releases


_RULE_NAMES = {"Mode", "KubeletRelease", "Release"}
_RULE_ATTRS = {"mode", "release", "kubelet_version", "kubelet_release"}
#: plain names that hold a release (``mode`` alone is too common: file and memory-policy modes)
_RULE_NAMES_PLAIN = {"release", "kubelet_version", "kubelet_release"}


def _rule_comparisons(tree: ast.AST) -> list[int]:
    """Lines comparing a mode or a release: ``x.mode is ...``, ``... == Mode.X``,
    ``release >= ...``, ``match mode:`` over ``Mode.X`` patterns."""

    def touches(e: ast.expr) -> bool:
        for n in ast.walk(e):
            if isinstance(n, ast.Attribute) and (
                n.attr in _RULE_ATTRS
                or (isinstance(n.value, ast.Name) and n.value.id in _RULE_NAMES)
            ):
                return True
            if isinstance(n, ast.Name) and n.id in _RULE_NAMES_PLAIN:
                return True
        return False

    lines: list[int] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and any(touches(e) for e in [node.left, *node.comparators]):
            lines.append(node.lineno)
        elif isinstance(node, ast.match_case) and touches_pattern(node.pattern):
            lines.append(node.pattern.lineno)
    return lines


def touches_pattern(p: ast.pattern) -> bool:
    return any(isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
               and n.value.id in _RULE_NAMES for n in ast.walk(p))


def test_no_mode_or_release_comparison_outside_the_rules() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel.startswith(RULE_OWNERS):
            continue
        found += [f"{rel}:{line}" for line in _rule_comparisons(ast.parse(path.read_text()))]
    assert found == [], f"compare modes and releases in modes/ or node/rules.py only: {found}"


@pytest.mark.parametrize("code", [
    "if node.mode is Mode.KOORDINATOR: pass",
    "x = rules.mode != other",
    "ok = Mode.KUBELET == m",
    "if release >= (1, 32): pass",
    "match m:\n    case Mode.VOLCANO: pass",
])
def test_the_comparison_guard_sees_a_violation(code: str) -> None:
    assert _rule_comparisons(ast.parse(code))


# ------------------------------------------------------------------ long files


def _justified() -> set[str]:
    """Files named in architecture.md's "Files longer than 700 lines" section."""
    text = (REPO / "docs" / "architecture.md").read_text()
    section = text.split("## Files longer than 700 lines", 1)
    assert len(section) == 2, "docs/architecture.md has no 'Files longer than 700 lines' section"
    body = section[1].split("\n## ", 1)[0]
    return set(re.findall(r"^- `src/numalign/([^`]+)`: \S", body, re.M))


def test_long_files_are_justified() -> None:
    long = {p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py")
            if p.read_text().count("\n") > MAX_LINES}
    justified = _justified()
    assert long - justified == set(), "over 700 lines without a reason in docs/architecture.md"
    assert justified - long == set(), "docs/architecture.md names files that are no longer long"


def _imports_pyyaml_directly(tree: ast.AST) -> list[int]:
    """Lines of ``tree`` that import PyYAML itself (``import yaml``, ``from yaml import ...``)."""
    def names(node: ast.AST) -> list[str]:
        if isinstance(node, ast.Import):
            return [a.name for a in node.names]
        if isinstance(node, ast.ImportFrom) and node.level == 0:
            return [node.module or ""]
        return []
    return [node.lineno for node in ast.walk(tree)  # type: ignore[attr-defined]
            if any(n.split(".")[0] == "yaml" for n in names(node))]


def test_pyyaml_is_imported_only_through_inputs_pyyaml() -> None:
    """docs/architecture.md: every module that uses PyYAML imports it from
    ``numalign.inputs.pyyaml`` (its patterns compiled on first use); a direct import, run first,
    would compile them all at import again."""
    direct = {str(p.relative_to(PACKAGE)): lines for p in sorted(PACKAGE.rglob("*.py"))
              if (lines := _imports_pyyaml_directly(ast.parse(p.read_text(encoding="utf-8"))))}
    assert list(direct) == ["inputs/pyyaml.py"], direct
    # the check sees a direct import
    assert sorted(_imports_pyyaml_directly(ast.parse("def f():\n    import yaml\nfrom yaml import safe_load\n"))) == [2, 3]
