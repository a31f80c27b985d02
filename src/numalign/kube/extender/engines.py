"""NRT objects turned into node engines: the digests that say "unchanged", and the build.

Used where updates are built - the serving process, or the builder's worker processes
(:mod:`~numalign.kube.extender.builder`) - and by the directory source's readers, which digest
each object they parse (:mod:`~numalign.kube.extender.dirsource`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from numalign.errors import NumalignError
from numalign.kube.extender.limits import check_nrt
from numalign.kube.topology import engine_from_nrt, fingerprint_of
from numalign.node.admission import Node
from numalign.resources.devices import machine_index

__all__ = ["LARGE_ENGINE", "Built", "build_engine", "content_digest", "engine_size",
           "nrt_digests"]


def _sha(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


def nrt_digests(obj: Any) -> tuple[str, str]:
    """(digest of the whole object - what "unchanged" compares -, :func:`content_digest`),
    serializing the content once for both: the whole object's digest is that of its content
    digest and its metadata. Raises ``TypeError``, ``ValueError`` or ``RecursionError`` when
    the object cannot be serialized."""
    if not isinstance(obj, dict):
        return _sha(obj), ""
    content = _sha({k: v for k, v in obj.items() if k != "metadata"})
    meta = json.dumps(obj["metadata"], sort_keys=True, default=str) if "metadata" in obj else ""
    return hashlib.sha256(f"{content}|{meta}".encode()).hexdigest(), content


def content_digest(obj: Any) -> str:
    """The digest of what an engine is built from: the NRT without ``metadata`` (names,
    resourceVersions, annotations); "" if it cannot be taken."""
    if not isinstance(obj, dict):
        return ""
    try:
        return _sha({k: v for k, v in obj.items() if k != "metadata"})
    except (TypeError, ValueError, RecursionError):
        return ""


@dataclass(frozen=True)
class Built:
    """An NRT object turned into an engine (or the reason it could not be), outside the lock."""

    digest: str
    node: Node | None
    fingerprint: str | None
    error: str
    content: str = ""
    #: the NRT object, kept for a large engine only (:data:`LARGE_ENGINE`): its first-time
    #: decisions are made in another process, which rebuilds the engine from it
    source: Any = None


#: engines with more CPUs + devices than this are "large" (kube/extender/bounded.py)
LARGE_ENGINE = 512


def engine_size(node: Node) -> int:
    """CPUs + devices of an engine: what a first-time decision's cost grows with."""
    return len(node.machine.cpus) + len(node.machine.devices)


def build_engine(obj: Any) -> Built:
    try:
        check_nrt(obj)
        digest, content = nrt_digests(obj)
    except NumalignError as e:
        return Built("", None, None, f"unusable NodeResourceTopology: {e.message}")
    except (TypeError, ValueError, RecursionError) as e:
        return Built("", None, None, f"unusable NodeResourceTopology: {type(e).__name__}: {e}")
    try:
        node = engine_from_nrt(obj)
        # the device index is made here, where the engine is built (the builder's worker
        # process), and travels with the machine: not on the server's loop at a first /filter
        machine_index(node.machine)
        fp = fingerprint_of(obj) if isinstance(obj, dict) else None
    except Exception as e:  # one bad object must not stop the others
        msg = e.message if isinstance(e, NumalignError) else f"{type(e).__name__}: {e}"
        return Built(digest, None, None, f"unusable NodeResourceTopology: {msg}")
    return Built(digest, node, fp if isinstance(fp, str) or fp is None else None, "", content,
                 obj if engine_size(node) > LARGE_ENGINE else None)
