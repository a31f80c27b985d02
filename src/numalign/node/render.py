"""Admission results as JSON-able documents and as a terminal table."""

from __future__ import annotations

from itertools import islice
from typing import Any

from numalign.bitmask import format_mask, ids_of
from numalign.cpulist import format_cpulist
from numalign.hints import GeneratedHints, ProviderHints, ResourceHints, TopologyHint
from numalign.node.admission import ContainerResult, Node, PodResult
from numalign.quantity import format_bytes, is_memory_resource
from numalign.scopes import Decision

#: Rule-generated hint sets are listed in full up to this many masks in explanations.
EXPLAIN_LIST_LIMIT = 255


def _hint(h: TopologyHint) -> dict[str, Any]:
    return {"affinity": None if h.affinity is None else ids_of(h.affinity), "preferred": h.preferred}


def _answer(a: ResourceHints) -> Any:
    if a is None:
        return None
    if isinstance(a, GeneratedHints):
        if 2 ** len(a.nodes) - 1 <= EXPLAIN_LIST_LIMIT:
            return [_hint(h) for h in a.materialize()]
        preferred = a.preferred_masks()
        sample = [] if preferred is None else [ids_of(m) for m in islice(preferred, 8)]
        return {
            "generated": True,
            "numa_nodes": len(a.nodes),
            "preferred_size": a.preferred_size,
            "preferred_sample": sample,
        }
    return [_hint(h) for h in a]


def _provider(p: ProviderHints) -> Any:
    if p is None:
        return None
    return {res: _answer(a) for res, a in sorted(p.items())}


def explain_doc(d: Decision) -> dict[str, Any]:
    return {
        "providers": {name: _provider(h) for name, h in d.provider_hints},
        "merged": _hint(d.hint),
    }


def container_doc(c: ContainerResult) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "name": c.name,
        "affinity": None if c.affinity is None else ids_of(c.affinity),
        "preferred": c.preferred,
        "cpus": format_cpulist(c.cpus),
        "memory": c.memory,
        "devices": c.devices,
    }
    if c.explain is not None:
        doc["explain"] = explain_doc(c.explain)
    return doc


def pod_doc(r: PodResult) -> dict[str, Any]:
    return {
        "name": r.pod.key,
        "admitted": r.admitted,
        "reason": r.reason,
        "message": r.message,
        "policy": r.policy,
        "scope": r.scope,
        "containers": [container_doc(c) for c in r.containers],
    }


def results_doc(results: list[PodResult]) -> dict[str, Any]:
    return {"pods": [pod_doc(r) for r in results]}


def _mem(memory: dict[str, dict[str, int]]) -> str:
    parts = []
    for node, res in memory.items():
        for name, size in res.items():
            parts.append(f"{name}@{node}={format_bytes(size)}")
    return " ".join(parts) or "-"


def results_table(results: list[PodResult]) -> str:
    rows = [("POD", "CONTAINER", "RESULT", "AFFINITY", "CPUS", "MEMORY", "DEVICES")]
    for r in results:
        verdict = "admitted" if r.admitted else f"{r.reason}"
        if not r.containers:
            rows.append((r.pod.key, "-", verdict, "-", "-", "-", "-"))
        for c in r.containers:
            aff = format_mask(c.affinity) + ("" if c.preferred else "*")
            devs = " ".join(f"{k}={','.join(v)}" for k, v in c.devices.items()) or "-"
            rows.append((r.pod.key, c.name, verdict, aff, format_cpulist(c.cpus) or "-", _mem(c.memory), devs))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    for r in results:
        if not r.admitted:
            lines.append(f"{r.pod.key}: {r.reason}: {r.message}")
    lines.append("(* = merged hint not preferred; policy " + ", ".join(sorted({f'{r.policy}/{r.scope}' for r in results})) + ")")
    return "\n".join(lines)


def state_doc(node: Node) -> dict[str, Any]:
    """A node's allocations: per NUMA node amounts, and per pod what it holds."""
    from numalign.node.usage import numa_amounts, pods_usage

    zones = {
        str(i): {"capacity": z.capacity, "allocatable": z.allocatable, "available": z.available}
        for i, z in numa_amounts(node).items()
    }
    pods = []
    for u in pods_usage(node.machine, node.state):
        recorded = {c.name for c in u.record.containers}
        containers = [
            {
                "name": c.name,
                "affinity": None if c.affinity is None else list(c.affinity),
                "cpus": format_cpulist(c.cpus),
                "memory": [b.to_dict() for b in c.memory],
                "devices": {r: list(ids) for r, ids in c.devices.items()},
            }
            for c in u.containers
            if c.name in recorded
        ]
        pods.append({"name": u.record.key, "uid": u.uid, "policy": u.record.policy,
                     "scope": u.record.scope, "containers": containers})
    return {"machine": node.machine.name, "numaNodes": zones, "pods": pods}


def state_table(node: Node) -> str:
    doc = state_doc(node)
    resources: list[str] = []
    for z in doc["numaNodes"].values():
        for r in z["capacity"]:
            if r not in resources:
                resources.append(r)
    header = ["NUMA"] + [f"{r} avail/alloc" for r in resources]
    rows = [header]
    for i, z in doc["numaNodes"].items():
        row = [i]
        for r in resources:
            a, b = z["available"].get(r), z["allocatable"].get(r)
            if a is None:
                row.append("-")
            elif is_memory_resource(r):
                row.append(f"{format_bytes(a)}/{format_bytes(b or 0)}")
            else:
                row.append(f"{a}/{b}")
        rows.append(row)
    widths = [max(len(r[k]) for r in rows) for k in range(len(header))]
    lines = [f"machine {doc['machine']}: {len(doc['pods'])} pod(s) admitted"]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    for p in doc["pods"]:
        lines.append(f"{p['name']} ({p['policy']}/{p['scope']})")
        for c in p["containers"]:
            aff = "any" if c["affinity"] is None else "{" + ",".join(map(str, c["affinity"])) + "}"
            devs = " ".join(f"{k}={','.join(v)}" for k, v in c["devices"].items())
            lines.append(f"  {c['name']}: numa {aff} cpus {c['cpus'] or '-'} {devs}".rstrip())
    return "\n".join(lines)
