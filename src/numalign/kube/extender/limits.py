"""Size and shape limits an NRT object must meet before the extender builds an engine from it.

The NRT CRD's quantity type lets a zone claim ``1e18`` GPUs and a producer (or an attacker with
write access to the CRD) can publish objects nested thousands deep, mapping keys of mixed types
or CPU lists spanning billions of ids. None of that is a machine the kubelet runs; building an
engine from it would take unbounded time and memory. :func:`check_nrt` rejects such an object in
time linear in its size (iteratively: no recursion), so only that node becomes unusable.
"""

from __future__ import annotations

import re
from typing import Any

from numalign.errors import InputError
from numalign.inputs.quantity import CPU, is_memory_resource, parse_quantity
from numalign.machine.nrt import MAX_ZONES as NRT_MAX_ZONES
from numalign.machine.nrt import is_zone_device_resource

#: deepest nesting of mappings/lists an NRT object may have (a real one has about 6)
MAX_DEPTH = 32
#: most values (mapping entries + list items + scalars) in one object
MAX_VALUES = 200_000
#: most zones (one per NUMA node id: machine/nrt.py's cap), resources per zone, attributes
MAX_ZONES = NRT_MAX_ZONES
MAX_RESOURCES = 256
#: highest CPU count per zone and highest CPU id in a CPU list attribute
MAX_CPUS = 16_384
#: most devices of one resource in one zone
MAX_DEVICES = 65_536
#: most CPUs and most devices of one node, all zones together (an engine holds an object per
#: CPU and per device; the largest machines have a few thousand CPUs and a few hundred devices)
MAX_NODE_CPUS = 16_384
MAX_NODE_DEVICES = 65_536

_NUMBER = re.compile(r"\d+")
_EXPONENT = re.compile(r"[eE]([+-]?\d+)")


def check_depth(obj: Any, *, max_depth: int = MAX_DEPTH, max_values: int = MAX_VALUES) -> None:
    """Raise :class:`InputError` if ``obj`` is nested deeper than ``max_depth``, holds more than
    ``max_values`` values, or has a mapping key that is not a string."""
    stack: list[tuple[Any, int]] = [(obj, 1)]
    seen = 0
    while stack:
        value, depth = stack.pop()
        seen += 1
        if seen > max_values:
            raise InputError(f"more than {max_values} values")
        if depth > max_depth:
            raise InputError(f"nested deeper than {max_depth} levels")
        if isinstance(value, dict):
            for k, v in value.items():
                if not isinstance(k, str):
                    raise InputError(f"mapping key {k!r} is not a string")
                stack.append((v, depth + 1))
        elif isinstance(value, list):
            stack.extend((v, depth + 1) for v in value)


def _count(value: Any, where: str) -> int:
    if isinstance(value, bool):
        raise InputError("expected a quantity", where)
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise InputError("expected a finite quantity", where)
        return int(value)
    if isinstance(value, str):
        if len(value) > 64:
            raise InputError("quantity longer than 64 characters", where)
        exp = _EXPONENT.search(value)
        if exp is not None and abs(int(exp.group(1))) > 30:
            raise InputError(f"quantity {value!r} out of range", where)
        try:
            return int(parse_quantity(value, where))
        except (ValueError, OverflowError):
            raise InputError(f"bad quantity {value!r}", where) from None
    raise InputError("expected a quantity", where)


def _check_cpulist_text(text: str, where: str) -> None:
    if len(text) > 65_536:
        raise InputError("CPU list longer than 65536 characters", where)
    for m in _NUMBER.finditer(text):
        if len(m.group()) > 6 or int(m.group()) >= MAX_CPUS:
            raise InputError(f"CPU id {m.group()[:12]} above {MAX_CPUS - 1}", where)


def _check_attributes(items: Any, where: str) -> None:
    if not isinstance(items, list):
        return
    if len(items) > MAX_RESOURCES:
        raise InputError(f"more than {MAX_RESOURCES} attributes", where)
    for i, a in enumerate(items):
        if isinstance(a, dict) and isinstance(a.get("name"), str) and isinstance(a.get("value"), str):
            name = a["name"]
            if name.lower().endswith(("cpus", "numagroup")):
                _check_cpulist_text(a["value"], f"{where}[{i}].value")


def check_nrt(obj: Any) -> None:
    """Raise :class:`InputError` (with a field path) if ``obj`` is too large or too deep to be a
    NodeResourceTopology the extender should build an engine from."""
    check_depth(obj)
    if not isinstance(obj, dict):
        raise InputError("expected a NodeResourceTopology object")
    _check_attributes(obj.get("attributes"), "attributes")
    zones = obj.get("zones")
    if not isinstance(zones, list):
        return
    if len(zones) > MAX_ZONES:
        raise InputError(f"more than {MAX_ZONES} zones", "zones")
    cpus = devices = 0
    for z, zone in enumerate(zones):
        if not isinstance(zone, dict):
            continue
        _check_attributes(zone.get("attributes"), f"zones[{z}].attributes")
        costs = zone.get("costs")
        if isinstance(costs, list) and len(costs) > MAX_ZONES:
            raise InputError(f"more than {MAX_ZONES} costs", f"zones[{z}].costs")
        resources = zone.get("resources")
        if not isinstance(resources, list):
            continue
        if len(resources) > MAX_RESOURCES:
            raise InputError(f"more than {MAX_RESOURCES} resources", f"zones[{z}].resources")
        for r, res in enumerate(resources):
            if not isinstance(res, dict):
                continue
            name = res.get("name")
            if not isinstance(name, str):
                continue
            cap = MAX_CPUS if name == CPU else MAX_DEVICES
            for key in ("capacity", "allocatable", "available"):
                if key not in res:
                    continue
                where = f"zones[{z}].resources[{r}].{key}"
                n = _count(res[key], where)
                # bytes (memory, hugepages) may be large: nothing is built per byte
                if not is_memory_resource(name) and (n > cap or n < -cap):
                    raise InputError(f"{n} {name} is more than numalign accepts ({cap})", where)
                if key != "capacity" or n <= 0:
                    continue
                if name == CPU:
                    cpus += n
                    if cpus > MAX_NODE_CPUS:
                        raise InputError(f"more than {MAX_NODE_CPUS} CPUs in all zones", where)
                elif is_zone_device_resource(name):
                    devices += n
                    if devices > MAX_NODE_DEVICES:
                        raise InputError(f"more than {MAX_NODE_DEVICES} devices in all zones", where)
