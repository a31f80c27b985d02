"""The kubelet version of a live host, asked of its kubelet binary.

``kubelet --version`` prints ``Kubernetes v1.33.4`` (``k8s.io/component-base/version/verflag``:
``fmt.Printf("%s %s\\n", programName, version.Get())`` with ``programName`` "Kubernetes").
:func:`ask_kubelet` runs the first of ``kubelet`` on ``PATH`` and :data:`KUBELET_PATHS` that
exists, with a :data:`TIMEOUT` second deadline and at most :data:`MAX_OUTPUT` bytes read. It
never fails: a binary that is absent, does not run, hangs, exits non-zero or prints something
else gives no version, and one line that says why (what ``numalign discover --verbose`` prints).
"""

from __future__ import annotations

import contextlib
import os
import selectors
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass

from numalign.errors import InputError
from numalign.machine.kubelet_version import KubeletVersion, parse_kubelet_version

#: where the kubelet is looked for when it is not on ``PATH`` (distribution packages install
#: it there)
KUBELET_PATHS = ("/usr/bin/kubelet",)
#: seconds the binary gets to print its version
TIMEOUT = 2.0
#: bytes of its output read at most (``Kubernetes v1.33.4-eks-3025e55`` is 30)
MAX_OUTPUT = 4096
#: the field a version read this way is named by in errors and reports
FIELD = "kubelet --version"


@dataclass(frozen=True)
class KubeletAnswer:
    """What asking the kubelet gave: its version (None: none), and one line saying how."""

    version: KubeletVersion | None
    note: str


def find_kubelet() -> str | None:
    """``kubelet`` on ``PATH``, else the first of :data:`KUBELET_PATHS` that is executable."""
    found = shutil.which("kubelet")
    if found:
        return found
    for path in KUBELET_PATHS:
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def ask_kubelet(timeout: float | None = None) -> KubeletAnswer:
    """The version the host's kubelet binary prints (see the module docstring); ``timeout``:
    seconds, default :data:`TIMEOUT`."""
    timeout = TIMEOUT if timeout is None else timeout
    exe = find_kubelet()
    if exe is None:
        where = ", ".join(KUBELET_PATHS)
        return KubeletAnswer(None, f"no kubelet binary on PATH or at {where}: "
                                   "no kubelet version discovered")
    out, why = _run(exe, timeout)
    if why:
        return KubeletAnswer(None, f"{exe} --version {why}: no kubelet version discovered")
    return parse_answer(exe, out)


def parse_answer(exe: str, out: bytes) -> KubeletAnswer:
    """The version in ``kubelet --version``'s output ``out`` (first line ``Kubernetes vX.Y.Z``)."""
    text = out.decode("utf-8", "replace").strip()
    first = text.splitlines()[0].strip() if text else ""
    word, _, rest = first.partition(" ")
    if word == "Kubernetes" and rest:
        try:
            version = parse_kubelet_version(rest.strip(), FIELD)
        except InputError:
            pass
        else:
            return KubeletAnswer(version, f"{exe} --version: kubelet {version}")
    shown = first[:60] + ("..." if len(first) > 60 else "")
    return KubeletAnswer(None, f"{exe} --version printed {shown!r}, not \"Kubernetes vX.Y.Z\": "
                               "no kubelet version discovered")


def _run(exe: str, timeout: float) -> tuple[bytes, str]:
    """(stdout, "") or (b"", why it gave no answer). The binary runs in its own session, so
    that it and whatever it started are killed together at the deadline."""
    try:
        proc = subprocess.Popen([exe, "--version"], stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                start_new_session=True)
    except OSError as e:
        return b"", f"could not run ({e.strerror or e})"
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    data = b""
    late = False
    try:
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ)
            while len(data) < MAX_OUTPUT:
                left = deadline - time.monotonic()
                if left <= 0:
                    late = True
                    break
                if not sel.select(left):
                    continue
                chunk = os.read(proc.stdout.fileno(), MAX_OUTPUT - len(data))
                if not chunk:
                    break
                data += chunk
        try:
            code = proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            late = True
    finally:
        if proc.poll() is None or late:
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
    if late:
        return b"", f"gave no answer within {timeout:g} s (killed)"
    if code != 0:
        return b"", f"exited with status {code}"
    return data, ""


__all__ = ["FIELD", "KUBELET_PATHS", "MAX_OUTPUT", "TIMEOUT", "KubeletAnswer", "ask_kubelet",
           "find_kubelet", "parse_answer"]
