"""A machine's devices indexed once per resource, for the device manager's linear work.

:class:`ResourceIndex` (natural rank, NUMA mask, PCIe root and health of every device of one
resource) is made on first use by :func:`machine_index` and kept in the machine's instance
dictionary; :func:`device_sort_key` is the natural order of device ids; :func:`mask_items`
turns devices into demand items, one per distinct NUMA mask.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping

from numalign.engine.bitmask import mask_of
from numalign.machine.model import Device, Machine
from numalign.record import Record, set_field

__all__ = ["EMPTY_INDEX", "ResourceIndex", "device_sort_key", "machine_index", "mask_items",
           "share_index"]

_DIGITS = re.compile(r"(\d+)")


def device_sort_key(device_id: str) -> tuple[tuple[int, int | str], ...]:
    """Natural order of device ids: ``gpu2`` < ``gpu10``. The runs of decimal digits (the
    regular expression's, which ``int`` reads) are numbers; the rest is text (``str.isdigit``
    would also take ``²``, which ``int`` refuses)."""
    key: list[tuple[int, int | str]] = []
    for k, part in enumerate(_DIGITS.split(device_id)):
        if k % 2:  # the split's captured digit runs sit at odd positions
            key.append((0, int(part)))
        elif part:
            key.append((1, part))
    return tuple(key)


def mask_items(masks: Iterable[int | None]) -> tuple[tuple[int, int], ...]:
    """Devices as demand items: one ``(NUMA mask, how many devices)`` per distinct mask (devices
    without a NUMA node - mask 0 or None - left out). Equal masks are summed, so a rule over
    thousands of devices on a few NUMA nodes has a few items, and ``Demand.feasible`` costs
    the same for any count."""
    counts = Counter(masks)
    counts.pop(0, None)
    counts.pop(None, None)
    return tuple(sorted((m, c) for m, c in counts.items() if m is not None))


class ResourceIndex(Record, frozen=True, eq=False):
    """One resource's devices on one machine, looked up in O(1): the manager's work per pod
    is then linear in the devices it looks at, never in devices times devices."""

    __slots__ = ("by_id", "rank", "mask", "root", "healthy", "topology", "all_items", "rooted")
    by_id: Mapping[str, Device]
    #: device id -> position in the natural order (ties: the id's text)
    rank: Mapping[str, int]
    #: device id -> NUMA mask (0: no NUMA node)
    mask: Mapping[str, int]
    #: device id -> PCIe root (None: unknown)
    root: Mapping[str, str | None]
    healthy: frozenset[str]
    #: some device has a NUMA node (kubelet ``deviceHasTopologyAlignment``)
    topology: bool
    #: every device's NUMA mask as demand items (what ``minAffinitySize`` counts)
    all_items: tuple[tuple[int, int], ...]
    #: some device has a PCIe root
    rooted: bool

    def __init__(
        self,
        by_id: Mapping[str, Device],
        rank: Mapping[str, int],
        mask: Mapping[str, int],
        root: Mapping[str, str | None],
        healthy: frozenset[str],
        topology: bool,
        all_items: tuple[tuple[int, int], ...],
        rooted: bool,
    ) -> None:
        set_field(self, "by_id", by_id)
        set_field(self, "rank", rank)
        set_field(self, "mask", mask)
        set_field(self, "root", root)
        set_field(self, "healthy", healthy)
        set_field(self, "topology", topology)
        set_field(self, "all_items", all_items)
        set_field(self, "rooted", rooted)

    @staticmethod
    def of(devices: Iterable[Device]) -> ResourceIndex:
        by_id = {d.id: d for d in devices}
        order = sorted(by_id, key=lambda i: (device_sort_key(i), i))
        mask = {i: mask_of(d.numa) for i, d in by_id.items()}
        return ResourceIndex(
            by_id,
            {i: k for k, i in enumerate(order)},
            mask,
            {i: d.pcie_root for i, d in by_id.items()},
            frozenset(i for i, d in by_id.items() if d.healthy),
            any(mask.values()),
            mask_items(mask.values()),
            any(d.pcie_root is not None for d in by_id.values()),
        )

    def natural(self, ids: Iterable[str]) -> list[str]:
        """``ids`` (all of this resource) in natural order."""
        return sorted(ids, key=self.rank.__getitem__)


EMPTY_INDEX = ResourceIndex.of(())
#: where a machine keeps its index (in its instance dictionary, as ``cached_property`` does:
#: made once, shared by every manager on the machine, and pickled with it - an engine built
#: in the extender's worker process arrives with its index)
_INDEX_ATTR = "_device_index"


def machine_index(machine: Machine) -> dict[str, ResourceIndex]:
    """resource -> :class:`ResourceIndex` of ``machine`` (made on first use, then kept)."""
    got: dict[str, ResourceIndex] | None = machine.__dict__.get(_INDEX_ATTR)
    if got is None:
        per: dict[str, list[Device]] = {}
        for d in machine.devices:
            per.setdefault(d.resource, []).append(d)
        got = machine.__dict__[_INDEX_ATTR] = {r: ResourceIndex.of(ds) for r, ds in per.items()}
    return got


def share_index(source: Machine, target: Machine) -> None:
    """Give ``target``, which has ``source``'s devices (the same machine with another kubelet
    section), ``source``'s index instead of making its own."""
    if target.devices is not source.devices and target.devices != source.devices:
        raise ValueError("share_index: the machines' devices differ")
    target.__dict__[_INDEX_ATTR] = machine_index(source)
