"""The ``k8s.io/kube-scheduler/extender/v1`` wire format: request parsing, result documents.

Go structs without JSON tags, so the field names are the Go names: ExtenderArgs ``{Pod,
Nodes, NodeNames}``; ExtenderFilterResult ``{Nodes, NodeNames, FailedNodes,
FailedAndUnresolvableNodes, Error}``; HostPriorityList ``[{Host, Score}]``; ExtenderBindingArgs
``{PodName, PodNamespace, PodUID, Node}`` -> ExtenderBindingResult ``{Error}``. Both node-list
forms are served: ``NodeNames`` in -> ``NodeNames`` out (``nodeCacheCapable: true``), ``Nodes``
(a v1 NodeList) in -> ``Nodes`` out (the same items, filtered).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from numalign.pods import Pod, parse_pods

_STR_ONLY = frozenset({str})


class BadRequest(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def pod_of(args: Mapping[str, Any]) -> Pod:
    raw = args.get("Pod")
    if not isinstance(raw, dict):
        raise BadRequest(400, "Pod: expected a v1.Pod object")
    body = dict(raw)
    # kube-scheduler's pods come from an informer: TypeMeta is usually empty
    body.setdefault("kind", "Pod")
    body.setdefault("apiVersion", "v1")
    if body.get("kind") in (None, ""):
        body["kind"] = "Pod"
    if body.get("apiVersion") in (None, ""):
        body["apiVersion"] = "v1"
    if body.get("kind") != "Pod":
        raise BadRequest(400, f"Pod: unexpected kind {body.get('kind')!r}")
    pods = parse_pods(body, "Pod", strict=False)  # the API server validated it
    if len(pods) != 1:
        raise BadRequest(400, "Pod: expected exactly one pod")
    return pods[0]


def node_args(args: Mapping[str, Any]) -> tuple[list[str], list[Any] | None]:
    """(node names, the NodeList items when the Nodes form is used)."""
    names = args.get("NodeNames")
    if names is not None:
        if not isinstance(names, list) or not _STR_ONLY.issuperset(map(type, names)):
            raise BadRequest(400, "NodeNames: expected a list of strings")
        return list(names), None
    nodes = args.get("Nodes")
    if nodes is None:
        raise BadRequest(400, "one of Nodes or NodeNames is required")
    if not isinstance(nodes, dict):
        raise BadRequest(400, "Nodes: expected a v1.NodeList object")
    items = nodes.get("items")
    if items is None:
        items = []
    if not isinstance(items, list):
        raise BadRequest(400, "Nodes.items: expected a list")
    out: list[str] = []
    for i, item in enumerate(items):
        meta = item.get("metadata") if isinstance(item, dict) else None
        name = meta.get("name") if isinstance(meta, dict) else None
        if not isinstance(name, str):
            raise BadRequest(400, f"Nodes.items[{i}].metadata.name: expected a string")
        out.append(name)
    return out, items


@dataclass(frozen=True)
class BindingArgs:
    """ExtenderBindingArgs: which pod to bind to which node."""

    name: str
    namespace: str
    uid: str
    node: str


def binding_args(args: Mapping[str, Any]) -> BindingArgs:
    fields: dict[str, str] = {}
    for key in ("PodName", "PodNamespace", "PodUID", "Node"):
        v = args.get(key)
        if not isinstance(v, str) or not v:
            raise BadRequest(400, f"{key}: expected a non-empty string")
        fields[key] = v
    return BindingArgs(fields["PodName"], fields["PodNamespace"], fields["PodUID"], fields["Node"])


def filter_result(
    args: Mapping[str, Any],
    names: Sequence[str],
    items: Sequence[Any] | None,
    passed: Sequence[str],
    failed: Mapping[str, str],
) -> dict[str, Any]:
    """ExtenderFilterResult in the form of the request: ``NodeNames`` when names came in,
    else ``Nodes`` (the request's NodeList with only the passing items)."""
    if items is None:
        return {"Nodes": None, "NodeNames": list(passed), "FailedNodes": dict(failed),
                "FailedAndUnresolvableNodes": {}, "Error": ""}
    ok = set(passed)
    kept = [it for it, n in zip(items, names, strict=True) if n in ok]
    node_list = dict(args["Nodes"])
    node_list["items"] = kept
    return {"Nodes": node_list, "NodeNames": None, "FailedNodes": dict(failed),
            "FailedAndUnresolvableNodes": {}, "Error": ""}


def host_priority_list(scores: Sequence[tuple[str, int]]) -> list[dict[str, Any]]:
    """HostPriorityList ``[{Host, Score}]``."""
    return [{"Host": n, "Score": s} for n, s in scores]


def error_result(message: str) -> dict[str, Any]:
    """A document with only ``Error`` (ExtenderBindingResult, and every error answer)."""
    return {"Error": message}
