"""The public API a Python user imports (README "Python API")."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numalign

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def test_every_public_name_resolves() -> None:
    for name in numalign.__all__:
        assert getattr(numalign, name) is not None, name


def test_readme_walkthrough() -> None:
    machine = numalign.read_machine_file(str(EXAMPLES / "fig1.yaml"))
    node = numalign.Node(machine)
    results = [node.admit(p) for p in numalign.read_pod_files([str(EXAMPLES / "fig1-pods.yaml")])]
    assert results and all(isinstance(r, numalign.PodResult) for r in results)
    admitted = [r for r in results if r.admitted]
    assert admitted
    uid = node.state.find(admitted[0].pod.key)
    assert uid is not None
    held = numalign.pod_usage(machine, node.state, uid)
    assert held is not None and held.numa_nodes == numalign.pod_numa_nodes(machine, node.state, uid)
    zones = numalign.numa_amounts(node)
    assert set(zones) == set(machine.node_ids)


def test_merge_internals_are_not_public() -> None:
    for internal in ("merge_lists", "FitOrder", "iterate_masks"):
        assert internal not in numalign.__all__


def test_import_is_cheap() -> None:
    code = "import sys, numalign; print(sorted(m for m in ('numpy', 'numalign.node.admission', 'yaml') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_all_lists_exactly_the_exports() -> None:
    assert sorted(numalign.__all__) == sorted(numalign._EXPORTS)
