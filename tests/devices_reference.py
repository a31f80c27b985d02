"""The device manager as it was before it was made linear (issue 23), kept as the reference of
``tests/test_devices_linear.py`` and ``benchmarks/devices_bench.py``: hints with one demand item
per device, classes sorted by :func:`device_sort_key`, the PCIe-aware walk pick by pick
(quadratic in the devices of a class)."""

from __future__ import annotations

from typing import Any

from numalign.engine.bitmask import mask_of
from numalign.engine.hints import Demand, GeneratedHints, ResourceHints, TopologyHint
from numalign.machine.model import Device
from numalign.resources.devices import DeviceManager, device_sort_key


def _reference_generate_hints(
    nodes: list[int], all_devices: list[Device], available: list[Device],
    reusable: list[Device], request: int,
) -> ResourceHints:
    """The former ``generate_hints``: one demand item per device."""
    from numalign.engine.merge_budget import Budget
    from numalign.engine.merge_search import Family, min_size

    node_list = sorted(nodes)
    n = len(node_list)
    masks = [mask_of(d.numa) for d in all_devices if d.numa]
    if request <= 0:
        preferred = 1 if n else 0
    elif len(masks) < request:
        preferred = n
    else:
        demand = Demand((tuple((m, 1) for m in masks),), (request,))
        gen = GeneratedHints(tuple(node_list), mask_of(node_list), demand.feasible, 1, demand=demand)
        found = min_size(Family(gen), Budget())
        preferred = n if found is None else found
    reuse_masks = [mask_of(d.numa) for d in reusable if d.numa]
    avail_masks = [mask_of(d.numa) for d in available if d.numa]
    demand = Demand((tuple((m, 1) for m in avail_masks),), (request - len(reuse_masks),),
                    touch=tuple(reuse_masks))
    gen = GeneratedHints(tuple(node_list), mask_of(node_list), demand.feasible, preferred,
                         demand=demand)
    return [] if gen.is_empty() else gen


class ReferenceDeviceManager(DeviceManager):
    """The device manager as it was before it was made linear (hints and allocation)."""

    def _generate(self, resource: str, available: Any, reusable: Any, request: int) -> ResourceHints:
        devices = list(self._ix(resource).by_id.values())
        return _reference_generate_hints(
            list(self.machine.node_ids), devices, [self._device(resource, i) for i in available],
            [self._device(resource, i) for i in reusable], request)

    def _sorted(self, resource: str, ids: Any) -> list[str]:
        return sorted(ids, key=device_sort_key)

    def _filter_by_affinity(self, resource: str, available: Any, hint: TopologyHint,
                            ) -> tuple[list[str], list[str], list[str]]:
        ids = sorted(available, key=device_sort_key)
        if not self._has_topology(resource) or hint.affinity is None:
            return [], [], ids
        aligned: list[str] = []
        unaligned: list[str] = []
        none: list[str] = []
        for i in ids:
            d = self._device(resource, i)
            if not d.numa:
                none.append(i)
            elif mask_of(d.numa) & hint.affinity:
                aligned.append(i)
            else:
                unaligned.append(i)
        return aligned, unaligned, none

    def _take(self, resource: str, group: list[str], needed: int, chosen: list[str]) -> int:
        left = list(group)
        while needed > 0 and left:
            roots = {self._device(resource, c).pcie_root for c in chosen} - {None}
            same = [i for i in left if self._device(resource, i).pcie_root in roots]
            if same:
                pick = same[0]
            else:
                by_root: dict[str, list[str]] = {}
                for i in left:
                    root = self._device(resource, i).pcie_root
                    by_root.setdefault(root if root is not None else f"\0{i}", []).append(i)
                groups = list(by_root.values())
                fitting = [g for g in groups if len(g) >= needed]
                if fitting:
                    best = min(fitting, key=lambda g: (len(g), device_sort_key(g[0])))
                else:
                    best = min(groups, key=lambda g: (-len(g), device_sort_key(g[0])))
                pick = best[0]
            chosen.append(pick)
            left.remove(pick)
            needed -= 1
        return needed
