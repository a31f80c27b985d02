"""Start-up cost of the ``numalign`` command: building the parser (``--help``, a sub-command's
``--help``) imports no heavy module - numpy, yaml, the Kubernetes adapter, the simulator, the
scheduler, the launcher's library, the node engine - and not even :mod:`typing` or
:mod:`dataclasses`; ``admit`` on a kubelet node loads the node engine and nothing of the other
families, the scheduler, the state directory, the help pages, the kubelet version parser, the
``--explain`` release notes or the node-wide NUMA amounts, each until it is used, and never
:mod:`dataclasses`, :mod:`inspect`, :mod:`hashlib`, :mod:`shutil` or :mod:`copy`. Checked in a
subprocess from ``python -X importtime`` or ``sys.modules`` (what was imported, not how long it took: timings are
not reliable on a shared box; ``benchmarks/startup_bench.py`` measures them).
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import REPO
from numalign.cli import build_parser
from numalign.cli.argparser import Formatter, subparsers, terminal_columns
from numalign.cli.main import COMMANDS

EXAMPLES = REPO / "examples"

ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}

#: modules (with their submodules) that registering the sub-commands must not load; "pkg." = the
#: package's submodules (the lazy package itself is cheap)
HEAVY = ("numpy", "yaml", "matplotlib", "kubernetes", "grpc", "numalign.kube.", "numalign.sim.",
         "numalign.scheduler.",
         "numalign.node.", "numalign.machine.", "numalign.engine.merge", "numalign.launcher.admission",
         "numalign.launcher.runs", "numalign.launcher.plan", "numalign.launcher.pinning",
         "importlib.metadata", "dask", "distributed")
#: the sub-command registration modules that are expected (cheap, no library behind them)
ALLOWED = {"numalign.kube.cli", "numalign.launcher.cli", "numalign.launcher.defaults"}


def imported_modules(*argv: str) -> list[str]:
    """The modules ``python -X importtime -m numalign.cli ARGV`` imports, in order."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "numalign.cli", *argv],
                          capture_output=True, text=True, env=ENV, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    names = []
    for line in proc.stderr.splitlines():
        if line.startswith("import time:") and line.count("|") == 2:
            name = line.rsplit("|", 1)[1].strip()
            if name != "imported package":  # the header line
                names.append(name)
    assert "numalign.cli.main" in names  # the parse worked: importtime lines were found
    return names


def heavy(names: list[str]) -> list[str]:
    return [n for n in names if n not in ALLOWED
            and any(n.startswith(h) if h.endswith(".") else n == h or n.startswith(f"{h}.")
                    for h in HEAVY)]


@pytest.mark.parametrize("argv", [
    ("--help",), ("admit", "--help"), ("merge", "--help"), ("run", "--help"),
    ("simulate", "--help"), ("sweep", "--help"), ("export", "--help"),
    ("extender", "serve", "--help"),
])
def test_help_imports_no_heavy_module(argv: tuple[str, ...]) -> None:
    names = imported_modules(*argv)
    assert heavy(names) == [], f"numalign {' '.join(argv)} imported {heavy(names)}"
    assert ("numalign.cli.help" in names) == (argv != ("--help",))  # a page's texts, to print it
    assert not {"typing", "dataclasses", "json"} & set(names), "help pages are plain data"
    if argv[0] not in ("--help", "run", "export", "extender"):  # only the commands asked for
        assert not [n for n in names if n.startswith(("numalign.kube", "numalign.launcher"))]


def test_commands_constant_is_the_parser() -> None:
    """``main`` builds one command's parser when the command line names one of COMMANDS: the
    constant lists the full parser's commands, in order."""
    assert tuple(subparsers(build_parser())) == COMMANDS


#: runs ``numalign ARGV`` (output discarded) and prints the loaded modules: importtime does not
#: see what ``importlib.import_module`` loads (the registry's families)
PROBE = """
import contextlib, io, json, sys
from numalign.cli import main
with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
    main(json.loads(sys.argv[1]))
print(json.dumps(sorted(sys.modules)))
"""


def loaded_by(*argv: str) -> set[str]:
    """The modules in ``sys.modules`` after ``numalign ARGV`` ran in a fresh interpreter."""
    out = subprocess.run([sys.executable, "-c", PROBE, json.dumps(argv)], capture_output=True,
                         text=True, env=ENV, check=True, timeout=120).stdout
    return set(json.loads(out))


#: what a plain ``admit`` of one pod on a kubelet node does not use: other families, adapters,
#: the state directory, the help pages; the kubelet version parser (the spec gives no
#: version), the ``--explain`` release notes, the node-wide NUMA amounts of ``node/usage.py``
#: (admission reads ``node/holdings.py``)
ADMIT_UNUSED = ("numpy", "matplotlib", "kubernetes", "grpc", "dask", "distributed", "numalign.sim",
                "numalign.scheduler", "numalign.kube", "numalign.launcher", "numalign.cli.help",
                "numalign.modes.koordinator", "numalign.modes.volcano", "numalign.modes.merge",
                "numalign.pods.annotations", "numalign.node.plan_cache", "numalign.node.store",
                "numalign.machine.kubelet_version", "numalign.modes.kubelet.release_explain",
                "numalign.node.usage", "uuid", "tempfile")


#: what a plain ``admit`` never loads: its classes are plain slotted records (``numalign/record.py``;
#: creating 42 dataclasses took about a third of its start-up, and ``dataclasses`` imports
#: ``inspect``), a pod without a uid gets its SHA-1 without ``hashlib`` (OpenSSL), argparse's
#: formatter its width without ``shutil`` (``cli/argparser.py``), and only a node's twin copies
ADMIT_NEVER = ("dataclasses", "inspect", "hashlib", "shutil", "copy")


def _unused(names: set[str]) -> list[str]:
    return sorted(n for n in names
                  if n in ADMIT_UNUSED or n.startswith(tuple(f"{u}." for u in ADMIT_UNUSED)))


def test_admit_on_a_kubelet_node_loads_what_it_uses() -> None:
    names = loaded_by("admit", "-m", str(EXAMPLES / "fig1.yaml"), str(EXAMPLES / "fig1-pods.yaml"),
                      "-o", "json")
    assert {"numalign.node.admission", "numalign.node.holdings", "numalign.modes.kubelet.family",
            "yaml"} <= names
    assert _unused(names) == []
    assert sorted(names & set(ADMIT_NEVER)) == []


def test_admit_loads_the_lazy_modules_when_it_uses_them(tmp_path: Path) -> None:
    """The check can fail: a kubelet version in the spec loads its parser, ``--explain`` the
    release notes, a state directory the store."""
    spec = tmp_path / "fig1-v133.yaml"
    spec.write_text((EXAMPLES / "fig1.yaml").read_text().replace(
        "kubelet:\n", "kubelet:\n  kubeletVersion: v1.33.2\n", 1))
    names = loaded_by("admit", "-m", str(spec), str(EXAMPLES / "fig1-pods.yaml"), "-o", "json",
                      "--explain", "--state-dir", str(tmp_path / "state"))
    assert _unused(names) == ["numalign.machine.kubelet_version", "numalign.modes.kubelet.release_explain",
                              "numalign.node.store", "tempfile"]  # the store's atomic write
    # the store's checksums and its temporary files (tempfile imports shutil); the version
    # parser's KubeletVersion is a record, so dataclasses stays out
    assert sorted(names & set(ADMIT_NEVER)) == ["hashlib", "shutil"]


def test_importtime_parse_sees_heavy_imports() -> None:
    """The check can fail: a command that runs the engine does import the heavy modules."""
    names = imported_modules("schema", "machine")
    assert "numalign.cli.schemas" in names
    names = imported_modules("merge", "--jsonl", os.devnull)
    assert "numalign.engine.merge" in heavy(names)


def test_importing_the_packages_is_cheap() -> None:
    code = ("import sys, numalign, numalign.launcher, numalign.kube\n"
            "print(sorted(m for m in sys.modules if m.startswith(('numpy', 'yaml', 'numalign.'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV,
                         check=True, timeout=120)
    loaded = ast.literal_eval(out.stdout)
    assert loaded == ["numalign.kube", "numalign.launcher", "numalign.lazy_exports"]


def test_launcher_public_names_still_resolve() -> None:
    """The lazy launcher package: ``admit`` is the function even after the module that defines
    it (``numalign.launcher.admission``) was imported."""
    code = ("import numalign.launcher.admission, numalign.launcher as l\n"
            "print(callable(l.admit), l.admit.__module__, l.DEFAULT_POLICY,\n"
            "      sorted(set(l.__all__) - set(dir(l))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV,
                         check=True, timeout=120)
    assert out.stdout.split() == ["True", "numalign.launcher.admission", "restricted", "[]"]


DASK = ("dask", "distributed")


def _dask_modules(names: list[str]) -> list[str]:
    return [n for n in names if n.split(".")[0] in DASK]


def test_only_running_cells_imports_dask(tmp_path: Path) -> None:
    """Dask is the sweep extra's: ``import numalign``, ``simulate``, and a sweep that has no
    cell to run (``--dry-run``) never load it."""
    code = ("import sys, numalign, numalign.sim, numalign.sim.sweep.command, numalign.sim.sweep.cell\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV,
                         check=True, timeout=120)
    assert ast.literal_eval(out.stdout) == []
    names = imported_modules("simulate", "--cluster", "builtin:small", "--workload",
                             "synthetic:count=5", "--profiles", "numalign", "--quiet", "--out",
                             str(tmp_path / "sim"))
    assert "numalign.sim.runner" in names and _dask_modules(names) == []
    sweep = tmp_path / "s.yaml"
    sweep.write_text("axes: {cluster: builtin:small, profile: numalign}\n")
    names = imported_modules("sweep", str(sweep), "--dry-run")
    assert "numalign.sim.sweep.grid" in names and _dask_modules(names) == []


@given(st.one_of(st.none(), st.integers(-5, 500).map(str), st.text(max_size=4)))
def test_terminal_columns_is_shutils(columns: str | None) -> None:
    """argparse's width without :mod:`shutil` is the width shutil gives (``COLUMNS``, else the
    terminal, else 80)."""
    import shutil
    from unittest import mock

    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    if columns is not None:
        if "\x00" in columns:
            return  # not an environment value
        env["COLUMNS"] = columns
    with mock.patch.dict(os.environ, env, clear=True):
        assert terminal_columns() == shutil.get_terminal_size().columns


def test_every_parser_uses_the_formatter() -> None:
    parser = build_parser()
    assert parser.formatter_class is Formatter
    assert all(issubclass(p.formatter_class, Formatter) for p in subparsers(parser).values())
    assert all(p.formatter_class is Formatter
               for p in subparsers(build_parser(documented=False)).values())
