"""The kubelet release a Node object names decides for that node.

kube-scheduler sends the extender whole Node objects (ExtenderArgs ``Nodes.items``) unless it
is configured ``nodeCacheCapable`` (then only ``NodeNames``). A Node's
``status.nodeInfo.kubeletVersion`` is what its kubelet reports now; the NRT attribute
``numalign.io/kubeletVersion`` is what the exporter published last, which may lag an upgrade
(or be missing: another exporter). So when a Node object carries the field, the release it
names decides for that node (:mod:`numalign.modes.kubelet.releases`).

The core (:meth:`~numalign.kube.extender.core.ExtenderCore.use_node_versions`) remembers the
text each node's Node object carried last and acts only when it changes: the node's snapshot
is then replaced by one whose engine decides by that release (:func:`under_release`: the same
state and assumptions over a machine whose kubelet section names the version, the rules
resolved anew), and a rebuild from a new NRT object gets the same treatment when it is
published. So an engine is made once per (NRT object, release), not per request; decisions
are shared between nodes of equal NRT content *and* release (the snapshot's ``content`` key
carries the release). A version that is malformed or older than every modelled release, or
a kubelet configuration that release would refuse at start-up, makes the node unusable with
a one-line reason naming the field, until its Node object or its NRT changes; the other
nodes are decided as usual.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from numalign.errors import InputError
from numalign.machine.kubelet_version import MAX_VERSION_CHARS, parse_kubelet_version
from numalign.machine.model import Machine
from numalign.modes.kubelet.releases import release_of
from numalign.node.admission import Node
from numalign.resources.device_index import share_index

#: the field of a Node object that names its kubelet's version
FIELD = "status.nodeInfo.kubeletVersion"

__all__ = ["FIELD", "NrtKubelet", "Under", "kubelet_texts", "under_release"]


@dataclass(frozen=True)
class NrtKubelet:
    """What a node's snapshot had from its NRT object, kept while its Node object's release
    decides instead: the machine (its kubelet section names the NRT's version, or none), the
    content digest and the NRT object of a large engine."""

    machine: Machine
    content: str
    source: Any = None


def kubelet_texts(names: Sequence[str], items: Sequence[Any]) -> list[tuple[str, str | None]]:
    """(node name, what its Node object carries at ``status.nodeInfo.kubeletVersion``: None
    when absent) for each item of a request's ``Nodes.items`` (``names``: their names). A
    string longer than a version can be is cut (it is refused anyway)."""
    out: list[tuple[str, str | None]] = []
    for name, item in zip(names, items, strict=True):
        status = item.get("status") if isinstance(item, dict) else None
        info = status.get("nodeInfo") if isinstance(status, dict) else None
        value = info.get("kubeletVersion") if isinstance(info, dict) else None
        if isinstance(value, str) and len(value) > MAX_VERSION_CHARS:
            value = value[:MAX_VERSION_CHARS + 1]
        elif value is not None and not isinstance(value, str):
            value = f"<{type(value).__name__}>"  # kept short; refused as not a string
        out.append((name, value))
    return out


@dataclass(frozen=True)
class Under:
    """A node's engine under another kubelet release, and the snapshot fields that go with
    it: the decision-sharing key, the NRT object of a large engine, what the NRT gave."""

    node: Node
    content: str
    source: Any
    nrt: NrtKubelet | None


def under_release(node: Node, content: str, source: Any, nrt: NrtKubelet | None,
                  text: str | None) -> Under | str | None:
    """A snapshot's engine ``node`` (its ``content`` key, ``source`` and ``nrt``) deciding by
    the kubelet release ``text`` names (None: the NRT's own): ``None`` when it already does;
    else the engine re-resolved under it (the same state); or the one-line reason the node
    cannot decide under it."""
    machine = nrt.machine if nrt is not None else node.machine
    if text is None:
        if nrt is None:
            return None
        version = None
    else:
        if text.startswith("<"):
            return f"{FIELD}: must be a string such as \"v1.33.4\", got {text[1:-1]}"
        try:
            version = parse_kubelet_version(text, FIELD)
            release_of(version)  # older than every modelled release: said so
        except InputError as e:
            return e.message
        if node.rules.decides_as(version):
            return None
    wanted = machine
    if version is not None:
        wanted = machine.replace(kubelet=machine.kubelet.replace(kubelet_version=version))
        share_index(machine, wanted)  # the same devices: not made again
    try:
        twin = node.with_machine(wanted)
    except InputError as e:
        return (f"the node's kubelet {text} ({FIELD}) would not start with its configuration: "
                f"{e.message}")
    if version is None or twin.rules.decides_as(machine.kubelet.kubelet_version):
        # the NRT's own release after all: its content key and NRT object again
        if nrt is None:
            return Under(twin, content, source, None)
        return Under(twin, nrt.content, nrt.source, None)
    kept = nrt or NrtKubelet(machine, content, source)
    # large engines are decided in this process (the evaluation worker rebuilds engines from
    # the NRT object, which names another release)
    return Under(twin, f"{kept.content}@{version.minor_text}" if kept.content else "", None, kept)
