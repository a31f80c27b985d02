"""What each install carries (issue 23): the exporter's and extender's image installs
``numalign[kube]``, which must not pull a plotting library; only ``numalign[report]`` does.

The dependency closure is resolved offline: numalign's own requirements from pyproject.toml
(the ranges users install from), every other package's from its installed metadata (this
environment is the lock's, ``requirements/dev.txt``), markers evaluated for this interpreter
and the extras asked for.
"""

from __future__ import annotations

import tomllib
from importlib import metadata

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from conftest import REPO

PLOTTING = {"matplotlib", "pillow", "contourpy", "kiwisolver", "fonttools", "cycler"}


def _wanted(requirement: Requirement, extras: set[str]) -> bool:
    if requirement.marker is None:
        return True
    return any(requirement.marker.evaluate({"extra": e}) for e in extras | {""})


def closure(extras: set[str]) -> set[str]:
    """The canonical names of every distribution ``pip install 'numalign[EXTRAS]'`` installs."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    lines = list(project["dependencies"])
    for extra in extras:
        lines += project["optional-dependencies"][extra]
    todo = [(Requirement(line), set[str]()) for line in lines]
    seen: set[str] = set()
    while todo:
        requirement, parent_extras = todo.pop()
        if not _wanted(requirement, parent_extras):
            continue
        name = canonicalize_name(requirement.name)
        key = f"{name}[{','.join(sorted(requirement.extras))}]"
        if key in seen:
            continue
        seen.add(key)
        todo += [(Requirement(r), set(requirement.extras))
                 for r in metadata.requires(requirement.name) or []]
    return {k.split("[", 1)[0] for k in seen}


def test_the_exporter_install_carries_no_plotting_library() -> None:
    kube = closure({"kube"})
    assert {"kubernetes", "grpcio", "protobuf", "prometheus-client", "pyyaml", "numpy"} <= kube
    assert not kube & PLOTTING, sorted(kube & PLOTTING)
    assert not closure(set()) & PLOTTING  # the runtime neither


def test_the_report_extra_is_where_the_plotting_library_comes_from() -> None:
    report = closure({"report"})
    assert {"matplotlib", "pillow"} <= report  # the walk finds a plotting library when it is there
    assert not report & {"kubernetes", "grpcio"}


def test_the_dockerfile_installs_the_kube_extra_only() -> None:
    text = (REPO / "Dockerfile").read_text()
    installs = [line for line in text.splitlines() if "pip install" in line and ".whl" in line]
    assert len(installs) == 1 and '[kube]"' in installs[0], installs
