"""The JSON "merge case" of ``numalign merge``: parse a case, run the policy, render the result.

Case::

    {"policy": "restricted", "numa_nodes": [0, 1],
     "distances": {"0": {"0": 10, "1": 21}, "1": {"0": 21, "1": 10}},      (optional)
     "options": {"prefer-closest-numa-nodes": "true"},                     (optional)
     "mode": "kubelet" | "koordinator" | "volcano",                          (optional)
     "providers": [null, {}, {"cpu": null}, {"gpu": []},
                   {"cpu": [{"affinity": [0], "preferred": true}, {"affinity": null, "preferred": false}]}]}

Result: ``{"affinity": [ids] | null, "preferred": bool, "admit": bool}``; in the
``koordinator`` mode also ``"unsatisfied": bool, "reasons": [...]`` (see :mod:`numalign.modes`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from numalign.engine.bitmask import MAX_NUMA_ID, ids_of, mask_of
from numalign.engine.hints import ProviderHints, TopologyHint
from numalign.engine.policies import (
    MergeResult,
    TopologyPolicy,
    parse_options,
    parse_policy,
)
from numalign.errors import InputError
from numalign.modes import registry as modes
from numalign.modes.registry import RULES, parse_mode

_CASE_KEYS = ("policy", "numa_nodes", "distances", "options", "providers", "mode")
#: the kubelet's ``--topology-manager-policy`` names (other spellings belong to NRT/Koordinator)
_KUBELET_POLICIES = ("none", "best-effort", "restricted", "single-numa-node")


def parse_case(case: object) -> tuple[TopologyPolicy, list[ProviderHints]]:
    """Validate a case; every error names its field."""
    if not isinstance(case, Mapping):
        raise InputError("a case must be a JSON object", "case")
    unknown = sorted(str(k) for k in case if k not in _CASE_KEYS)
    if unknown:
        raise InputError(f"unknown field (a case has {', '.join(_CASE_KEYS)})", unknown[0][:60])
    if "policy" not in case:
        raise InputError("missing", "policy")
    name = case["policy"]
    if isinstance(name, str) and name not in _KUBELET_POLICIES:
        shown = name if len(name) <= 60 else name[:60] + "..."
        raise InputError(f'unknown policy: "{shown}"', "policy")  # the kubelet's message
    policy, _scope = parse_policy(name, "policy")
    nodes = _parse_nodes(case.get("numa_nodes"))
    options = parse_options(case.get("options"), "options")
    distances = _parse_distances(case.get("distances"), nodes)
    providers = _parse_providers(case.get("providers"), set(nodes))
    return TopologyPolicy(policy, tuple(nodes), options, distances), providers


def run_case(case: object) -> dict[str, Any]:
    policy, providers = parse_case(case)
    mode = parse_mode(case.get("mode") if isinstance(case, Mapping) else None, "mode")
    result = modes.merge(mode, policy, providers)
    out = render(MergeResult(result.hint, result.admit))
    if RULES[mode].reports_unsatisfied:
        out.update(unsatisfied=result.unsatisfied, reasons=list(result.reasons))
    return out


def render(result: MergeResult) -> dict[str, Any]:
    aff = result.hint.affinity
    return {
        "affinity": None if aff is None else ids_of(aff),
        "preferred": result.hint.preferred,
        "admit": result.admit,
    }


def _is_int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _parse_nodes(raw: object) -> list[int]:
    if raw is None:
        raise InputError("missing", "numa_nodes")
    if not isinstance(raw, list) or not raw:
        raise InputError("must be a non-empty list of NUMA node ids", "numa_nodes")
    seen: set[int] = set()
    for i, x in enumerate(raw):
        if not _is_int(x) or not 0 <= x <= MAX_NUMA_ID:
            raise InputError(f"NUMA node id must be an integer 0-{MAX_NUMA_ID}", f"numa_nodes[{i}]")
        if x in seen:
            raise InputError(f"duplicate NUMA node id {x}", f"numa_nodes[{i}]")
        seen.add(x)
    return sorted(raw)


def _parse_distances(raw: object, nodes: list[int]) -> dict[int, dict[int, int]] | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise InputError("must be an object of node id to {node id: distance}", "distances")
    out: dict[int, dict[int, int]] = {}
    for k, row in raw.items():
        src = _node_key(k, f"distances.{k}", nodes)
        if not isinstance(row, Mapping):
            raise InputError("must be an object of node id to distance", f"distances.{k}")
        out[src] = {}
        for k2, d in row.items():
            dst = _node_key(k2, f"distances.{k}.{k2}", nodes)
            if not _is_int(d) or d < 0:
                raise InputError("distance must be a non-negative integer", f"distances.{k}.{k2}")
            out[src][dst] = d
    for i in nodes:
        if i not in out:
            raise InputError(f"missing row for node {i}", "distances")
        for j in nodes:
            if j not in out[i]:
                raise InputError(f"missing entry for node {j}", f"distances.{i}")
    return out


def _node_key(k: object, field: str, nodes: list[int]) -> int:
    try:
        i = int(str(k), 10)
    except ValueError:
        raise InputError("not a NUMA node id", field) from None
    if i not in nodes:
        raise InputError(f"NUMA node {i} is not in numa_nodes", field)
    return i


def _parse_providers(raw: object, nodes: set[int]) -> list[ProviderHints]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise InputError("must be a list (one entry per provider)", "providers")
    out: list[ProviderHints] = []
    for p, prov in enumerate(raw):
        field = f"providers[{p}]"
        if prov is None:
            out.append(None)
            continue
        if not isinstance(prov, Mapping):
            raise InputError("must be null or an object of resource to hints", field)
        answer: dict[str, list[TopologyHint] | None] = {}
        for res, hints in prov.items():
            rfield = f"{field}.{res}"
            if hints is None:
                answer[res] = None
                continue
            if not isinstance(hints, list):
                raise InputError("must be null or a list of hints", rfield)
            answer[res] = [_parse_hint(h, f"{rfield}[{i}]", nodes) for i, h in enumerate(hints)]
        out.append(answer)
    return out


def _parse_hint(raw: object, field: str, nodes: set[int]) -> TopologyHint:
    if not isinstance(raw, Mapping):
        raise InputError('must be an object {"affinity": [ids] | null, "preferred": bool}', field)
    unknown = sorted(set(raw) - {"affinity", "preferred"})
    if unknown:
        raise InputError("unknown field", f"{field}.{unknown[0]}")
    if "preferred" not in raw or not isinstance(raw["preferred"], bool):
        raise InputError("must be true or false", f"{field}.preferred")
    aff = raw.get("affinity")
    if aff is None:
        return TopologyHint(None, raw["preferred"])
    if not isinstance(aff, list):
        raise InputError("must be a list of NUMA node ids or null", f"{field}.affinity")
    for i, x in enumerate(aff):
        if not _is_int(x) or x not in nodes:
            raise InputError(f"{x!r} is not one of numa_nodes", f"{field}.affinity[{i}]")
    return TopologyHint(mask_of(aff), raw["preferred"])
