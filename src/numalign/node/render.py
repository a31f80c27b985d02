"""Admission results as JSON-able documents and as a terminal table."""

from __future__ import annotations

from itertools import islice
from typing import Any

from numalign.engine.bitmask import format_mask, ids_of
from numalign.engine.hints import GeneratedHints, ProviderHints, ResourceHints, TopologyHint
from numalign.engine.scopes import Decision
from numalign.inputs.cpulist import format_cpulist
from numalign.inputs.quantity import format_bytes, is_memory_resource
from numalign.node.admission import ContainerResult, Node, PodResult

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
        **({"kubelet": list(r.kubelet)} if r.kubelet else {}),
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
    for r in results:
        if r.kubelet:
            lines.append(f"kubelet ({r.pod.key}): " + "; ".join(r.kubelet[:1]))
            lines.extend(f"  {line}" for line in r.kubelet[1:])
    explained = [(r, c) for r in results for c in r.containers if c.explain is not None]
    if explained:
        lines.append("")
        lines.append("explain (per container: each provider's hints, narrowest preferred first; the merged hint):")
        for r, c in explained:
            assert c.explain is not None
            lines.extend(explain_lines(r, c.name, c.explain))
    return "\n".join(lines)


#: masks shown per resource in the explain summary before "+N more"
EXPLAIN_SHOW = 4
#: preferred masks counted in the explain summary (beyond: "over N")
EXPLAIN_COUNT_LIMIT = 1000


def _masks_text(masks: list[int], total: int) -> str:
    shown = " ".join(format_mask(m) for m in masks[:EXPLAIN_SHOW])
    more = total - min(len(masks), EXPLAIN_SHOW)
    return shown + (f" +{more} more" if more > 0 else "")


def _summarize(answer: ResourceHints) -> str:
    """One line for one resource's answer: the narrowest preferred masks and the counts."""
    if answer is None:
        return "no preference"
    if isinstance(answer, GeneratedHints):
        if answer.is_empty():
            return "cannot be satisfied (no hint)"
        generated = answer.preferred_masks()
        if generated is not None:
            sample = list(islice(generated, EXPLAIN_COUNT_LIMIT + 1))
            width = answer.preferred_size
            count = (f"{len(sample)}" if len(sample) <= EXPLAIN_COUNT_LIMIT
                     else f"over {EXPLAIN_COUNT_LIMIT}")
            if sample:
                return (f"preferred: {_masks_text(sample, len(sample))} "
                        f"({count} preferred {width}-node masks of {len(answer.nodes)} NUMA nodes)")
            return f"no preferred hint (narrowest would be {width} node(s))"
        if 2 ** len(answer.nodes) > 1 << 16:
            return f"rule-generated hints over {len(answer.nodes)} NUMA nodes"
        answer = answer.materialize()
    hints = list(answer)
    if not hints:
        return "cannot be satisfied (no hint)"
    masks = [h.affinity for h in hints if h.affinity is not None]
    if len(masks) < len(hints):
        return "no preference" if all(h.preferred for h in hints) else "cannot be satisfied"
    preferred = [h.affinity for h in hints if h.preferred and h.affinity is not None]
    pool, label = (preferred, "preferred") if preferred else (masks, "none preferred; narrowest")
    narrowest = min(m.bit_count() for m in pool)
    best = sorted(m for m in pool if m.bit_count() == narrowest)
    return (f"{label}: {_masks_text(best, len(best))} "
            f"({len(preferred)} preferred of {len(hints)} hints)")


def explain_lines(r: PodResult, container: str, d: Decision) -> list[str]:
    """A readable summary of one container's decision: per provider and resource, the
    narrowest preferred masks and counts (not every mask), then the merged hint and the verdict."""
    verdict = "admitted" if r.admitted else f"{r.reason}"
    lines = [f"{r.pod.key} {container} ({r.policy}/{r.scope}):"]
    rows: list[tuple[str, str]] = []
    for name, hints in d.provider_hints:
        if not hints:
            rows.append((name, "no preference (nothing to align)"))
            continue
        for res, answer in sorted(hints.items()):
            rows.append((name if name == res else f"{name} {res}", _summarize(answer)))
    rows.append(("merged", f"{format_mask(d.hint.affinity)}" + ("" if d.hint.preferred else " (not preferred)")))
    rows.append(("result", verdict if r.admitted else f"{verdict}: {r.message}"))
    width = max(len(k) for k, _ in rows)
    lines.extend(f"  {k.ljust(width)}  {v}" for k, v in rows)
    return lines


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
