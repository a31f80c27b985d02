"""Every example of every ``--help`` page runs from the root of a fresh clone (issue 23).

The fresh clone is a copy of the repository's tracked files (``git ls-files``) in a temporary
directory with no ``../shared`` beside it, so an example that reads a file which is not
committed, or the shared reference data, fails here. Each example runs as the user would run
it: its own process, from the clone's root, with a timeout; the scratch directory
``/tmp/numalign-demo`` becomes a fresh one per test. An example whose output another one reads
(a state directory, NRT files) is run first, as its declaration says (``after``). An example
that serves (``extender serve``) is started on a free port, must answer ``/readyz``, and is
stopped. One that needs a live cluster is skipped with that reason, which its help line shows.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import REPO
from numalign.cli import build_parser
from numalign.cli import help as cli_help

SCRATCH = "/tmp/numalign-demo"
TIMEOUT = 120  # seconds, per example: a hang guard on a shared, loaded machine
DECLARED = {e.line: e for _, examples in cli_help.COMMANDS.values() for e in examples}


def _pages(parser: argparse.ArgumentParser, prefix: str = "") -> dict[str, list[str]]:
    """Sub-command path -> the example lines its ``--help`` prints (comments left out)."""
    out: dict[str, list[str]] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                path = f"{prefix} {name}".strip()
                text = sub.format_help().split("\nexamples:\n", 1)[1]
                out[path] = [line.split("   # ", 1)[0].strip() for line in text.splitlines()
                             if line.strip()]
                out.update(_pages(sub, path))
    return out


def test_the_pages_print_the_declared_examples_and_their_needs() -> None:
    pages = _pages(build_parser())
    assert set(pages) == set(cli_help.COMMANDS)
    for path, lines in pages.items():
        assert lines == [e.line for e in cli_help.COMMANDS[path][1]], path
    for example in DECLARED.values():
        for before in example.after:  # what it reads is made by an example the user sees
            assert before in DECLARED, (example.line, before)
    rendered = {e.rendered() for e in DECLARED.values()}
    assert "numalign extender serve --kubeconfig ~/.kube/config   # needs a live cluster" in rendered


@pytest.fixture(scope="session")
def fresh_clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tracked files of this checkout, copied; nothing beside them."""
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout: the tracked files are not known")
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True,
                            timeout=60).stdout.decode().split("\0")
    root = tmp_path_factory.mktemp("fresh") / "numalign"
    for rel in filter(None, listed):
        src = REPO / rel
        if src.is_file():  # a tracked file deleted in the work tree is not in a clone either
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, root / rel)
    assert not (root.parent / "shared").exists()
    return root


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "NUMALIGN_SHARED"}
    return {**env, "PYTHONPATH": str(REPO / "src")}


def _command(line: str, scratch: Path) -> tuple[list[str], Path | None]:
    """The argv of ``python -m numalign`` for an example line, and the file its stdin reads."""
    argv = shlex.split(line.replace(SCRATCH, str(scratch)))
    assert argv[0] == "numalign", line
    stdin = None
    if "<" in argv:  # the shell's redirection
        i = argv.index("<")
        stdin = Path(argv[i + 1])
        argv = argv[:i] + argv[i + 2:]
    return [sys.executable, "-m", "numalign", *argv[1:]], stdin


def _run(line: str, root: Path, scratch: Path) -> None:
    example = DECLARED[line]
    for before in example.after:
        _run(before, root, scratch)
    argv, stdin = _command(line, scratch)
    with open(root / stdin if stdin else os.devnull, "rb") as fh:
        proc = subprocess.run(argv, cwd=root, stdin=fh, capture_output=True, text=True,
                              timeout=TIMEOUT, env=_env())
    assert proc.returncode == example.status, (line, proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr, (line, proc.stderr)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


def _serve(line: str, root: Path, scratch: Path) -> None:
    """Start a serving example on a free port, wait until it is ready, stop it with SIGTERM;
    whatever of its process group is left is killed."""
    example = DECLARED[line]
    for before in example.after:
        _run(before, root, scratch)
    argv, _ = _command(line, scratch)
    port = _free_port()
    argv[argv.index("--port") + 1] = str(port)  # 8888 may be taken on the test machine
    log = scratch / "serve.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(argv, cwd=root, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                env=_env(), start_new_session=True)
    try:
        deadline = time.monotonic() + TIMEOUT
        while not _ready(port):
            assert proc.poll() is None, (line, log.read_text())
            assert time.monotonic() < deadline, f"{line}: not ready after {TIMEOUT} s"
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)
        assert "Traceback" not in log.read_text(), log.read_text()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@pytest.mark.parametrize("line", sorted(DECLARED))
def test_example_runs_from_a_fresh_clone(line: str, fresh_clone: Path, tmp_path: Path) -> None:
    example = DECLARED[line]
    if example.needs:
        pytest.skip(f"needs {example.needs}")
    scratch = tmp_path / "numalign-demo"
    if example.serves:
        _serve(line, fresh_clone, scratch)
    else:
        _run(line, fresh_clone, scratch)
