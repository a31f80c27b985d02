"""Shared test helpers: where ../shared lives, and skipping cleanly without it; the package's
bytecode compiled once for the processes the tests start."""

from __future__ import annotations

import compileall
from pathlib import Path

import pytest
from hypothesis import settings

# no per-example wall-clock deadline: the suite runs on shared, loaded machines (CI), and a
# deadline there fails at random; work that must stay bounded is asserted in CPU time
settings.register_profile("numalign", deadline=None)
settings.load_profile("numalign")

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"


def shared_path(*parts: str) -> Path:
    """A path under ../shared, or skip the test with a clear reason when it is absent."""
    p = SHARED.joinpath(*parts)
    if not p.exists():
        pytest.skip(f"{p} not found: the shared reference data (../shared) is not beside this checkout")
    return p


def pytest_configure(config: pytest.Config) -> None:
    """Compile ``src/numalign`` once, before the workers start. The tests start numalign in
    a few hundred processes; where Python writes no bytecode (``PYTHONDONTWRITEBYTECODE``, a
    read-only checkout) each of them would compile the package again, about 0.2 s of CPU each.
    ``compileall`` writes the cache whatever that setting; Python reads it either way."""
    if not hasattr(config, "workerinput"):  # the controller (or a run without xdist)
        compileall.compile_dir(REPO / "src" / "numalign", quiet=1)
