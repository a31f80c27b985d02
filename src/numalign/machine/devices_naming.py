"""Map discovered PCI devices to Kubernetes extended-resource names.

Discovery (sysfs, hwloc XML) produces a neutral inventory of :class:`PciDevice` objects;
:class:`DeviceRules` decides which of them are schedulable devices and under which resource
name, giving the :class:`numalign.machine.model.Device` objects of a machine.

Built-in rules (first match wins):

==============================================  =====================================
device                                          resource
==============================================  =====================================
NVIDIA (vendor ``0x10de``), display class 03xx  ``nvidia.com/gpu``
AMD (``0x1002``), display 03xx or accel 12xx    ``amd.com/gpu`` (not the ES1000/Rage BMC VGA)
Intel (``0x8086``), display class 0380          ``gpu.intel.com/i915``
NEC Vector Engine (``0x1bcf``), class 0b40      ``nec.com/ve``
SR-IOV virtual function (has a ``physfn``)      ``sriov/<pf>`` (PF netdev name, else bus id)
RDMA (``infiniband/`` entries, an OpenFabrics   ``rdma/hca``
OS device, or class 0207 InfiniBand)
other processing accelerators (12xx) and        ``accelerator/<vendor>``
co-processors (0b40)
==============================================  =====================================

Everything else (plain NICs, storage, bridges, ...) is not a device-plugin resource and is
left out. A rules file overrides or extends this. Format (YAML)::

    defaults: true          # keep the built-in rules after these (default: true)
    rules:                  # tried in order, before the built-in rules; first match wins
      - resource: intel.com/sriov_netdevice
        vendor: "0x8086"    # optional; hex string or integer
        device: ["0x154c", "0x10ed"]   # optional; one value or a list
        class: "02"         # optional; hex prefix of the 4-digit class code (0200 = Ethernet)
        kind: vf            # optional: vf | pf | rdma | any (default any)
      - resource: null      # a null resource drops the matching devices
        vendor: "0x1a03"

``resource`` is a template: ``{vendor}`` (name such as ``nvidia`` or the hex id),
``{vendor_id}`` and ``{device_id}`` (4 hex digits), ``{pf}`` (the physical function's
network interface name, else its bus id with ``:`` replaced by ``_``) and ``{bus_id}``
(sanitised the same way).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from numalign.errors import InputError
from numalign.inputs.documents import read_yaml
from numalign.machine.model import Device

#: Short vendor names used in resource-name templates.
VENDOR_NAMES: Mapping[int, str] = {
    0x10DE: "nvidia",
    0x1002: "amd",
    0x8086: "intel",
    0x1BCF: "nec",
    0x15B3: "mellanox",
    0x14E4: "broadcom",
    0x1137: "cisco",
    0x1077: "qlogic",
    0x1924: "solarflare",
    0x1DED: "alibaba",
    0x1E52: "habana",
    0x1D0F: "amazon",
}

KINDS = ("any", "vf", "pf", "rdma")


@dataclass(frozen=True)
class PciDevice:
    """One PCI function as discovered, before naming.

    ``class_code`` is the 16-bit class/subclass (``0x0302`` = 3D controller).
    ``numa`` is () when the platform does not say (``numa_node`` = -1).
    """

    bus_id: str
    vendor: int
    device: int
    class_code: int
    numa: tuple[int, ...] = ()
    pcie_root: str | None = None  # root port (or host bridge) above the device
    pcie_switch: str | None = None  # upstream port of the PCIe switch above, if any
    physfn: str | None = None  # bus id of the PF when this function is an SR-IOV VF
    sriov_numvfs: int = 0
    virtfns: tuple[str, ...] = ()
    rdma: tuple[str, ...] = ()  # RDMA device names (infiniband/, OpenFabrics OS devices)
    netdevs: tuple[str, ...] = ()
    osdevs: tuple[str, ...] = ()  # other OS device names (cuda0, ve0, ...)

    @property
    def is_vf(self) -> bool:
        return self.physfn is not None

    @property
    def is_pf(self) -> bool:
        return self.sriov_numvfs > 0 or bool(self.virtfns)

    @property
    def is_rdma(self) -> bool:
        return bool(self.rdma) or self.class_code == 0x0207

    @property
    def is_bridge(self) -> bool:
        return self.class_code >> 8 == 0x06


@dataclass(frozen=True)
class Rule:
    resource: str | None
    vendor: frozenset[int] | None = None
    device: frozenset[int] | None = None
    class_prefix: str | None = None  # lowercase hex prefix of the 4-digit class
    kind: str = "any"

    def matches(self, d: PciDevice) -> bool:
        if self.vendor is not None and d.vendor not in self.vendor:
            return False
        if self.device is not None and d.device not in self.device:
            return False
        if self.class_prefix is not None and not f"{d.class_code:04x}".startswith(
            self.class_prefix
        ):
            return False
        if self.kind == "vf":
            return d.is_vf
        if self.kind == "pf":
            return d.is_pf
        if self.kind == "rdma":
            return d.is_rdma and not d.is_vf
        return True


def _sanitise(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", s)


DEFAULT_RULES: tuple[Rule, ...] = (
    # server management VGA (ATI ES1000, Rage XL, RV100): not a compute GPU
    Rule(None, vendor=frozenset({0x1002}), device=frozenset({0x515E, 0x4752, 0x5159})),
    Rule("nvidia.com/gpu", vendor=frozenset({0x10DE}), class_prefix="03"),
    Rule("amd.com/gpu", vendor=frozenset({0x1002}), class_prefix="03"),
    Rule("amd.com/gpu", vendor=frozenset({0x1002}), class_prefix="12"),
    Rule("gpu.intel.com/i915", vendor=frozenset({0x8086}), class_prefix="0380"),
    Rule("nec.com/ve", vendor=frozenset({0x1BCF}), class_prefix="0b40"),
    Rule("sriov/{pf}", kind="vf"),
    Rule("rdma/hca", kind="rdma"),
    Rule("accelerator/{vendor}", class_prefix="12"),
    Rule("accelerator/{vendor}", class_prefix="0b40"),
)


@dataclass(frozen=True)
class DeviceRules:
    """An ordered rule list; the first rule matching a device names it."""

    rules: tuple[Rule, ...] = DEFAULT_RULES
    extra: Mapping[str, str] = field(default_factory=dict)

    def resource_of(
        self, d: PciDevice, by_bus: Mapping[str, PciDevice] | None = None
    ) -> str | None:
        for rule in self.rules:
            if rule.matches(d):
                if rule.resource is None:
                    return None
                return _expand(rule.resource, d, by_bus or {})
        return None

    def name_devices(self, pci: Iterable[PciDevice]) -> tuple[Device, ...]:
        """The schedulable devices among ``pci``, ordered by resource then bus id."""
        devs = [d for d in pci if not d.is_bridge]
        by_bus = {d.bus_id: d for d in devs}
        out: list[Device] = []
        for d in devs:
            res = self.resource_of(d, by_bus)
            if res is None:
                continue
            out.append(
                Device(
                    resource=res,
                    id=d.bus_id,
                    numa=d.numa,
                    pcie_root=d.pcie_root,
                    bus_id=d.bus_id,
                )
            )
        out.sort(key=lambda x: (x.resource, x.id))
        return tuple(out)


def _expand(template: str, d: PciDevice, by_bus: Mapping[str, PciDevice]) -> str:
    pf_name = ""
    if d.physfn is not None:
        pf = by_bus.get(d.physfn)
        pf_name = pf.netdevs[0] if pf is not None and pf.netdevs else _sanitise(d.physfn)
    values = {
        "vendor": VENDOR_NAMES.get(d.vendor, f"{d.vendor:04x}"),
        "vendor_id": f"{d.vendor:04x}",
        "device_id": f"{d.device:04x}",
        "pf": pf_name,
        "bus_id": _sanitise(d.bus_id),
    }
    try:
        return template.format(**values)
    except (KeyError, IndexError, ValueError) as e:
        raise InputError(f"bad resource template {template!r}: {e}") from None


def _hex_set(value: Any, where: str) -> frozenset[int]:
    items = value if isinstance(value, list) else [value]
    out: set[int] = set()
    for i, v in enumerate(items):
        if isinstance(v, bool):
            raise InputError(f"expected a hex id, got {v!r}", f"{where}[{i}]")
        if isinstance(v, int):
            out.add(v)
            continue
        if not isinstance(v, str):
            raise InputError(f"expected a hex id, got {v!r}", f"{where}[{i}]")
        try:
            out.add(int(v, 16))
        except ValueError:
            raise InputError(f"expected a hex id, got {v!r}", f"{where}[{i}]") from None
    return frozenset(out)


def parse_rules(doc: Any, where: str = "rules") -> DeviceRules:
    """Build :class:`DeviceRules` from a parsed rules document (see the module docstring)."""
    if doc is None:
        return DeviceRules()
    if not isinstance(doc, dict):
        raise InputError("a device rules file must be a mapping with a 'rules' list", where)
    unknown = set(doc) - {"rules", "defaults"}
    if unknown:
        raise InputError(f"unknown keys {sorted(unknown)}", where)
    raw = doc.get("rules", [])
    if not isinstance(raw, list):
        raise InputError("must be a list", f"{where}.rules")
    keep_defaults = doc.get("defaults", True)
    if not isinstance(keep_defaults, bool):
        raise InputError("must be true or false", f"{where}.defaults")
    rules: list[Rule] = []
    for i, r in enumerate(raw):
        at = f"{where}.rules[{i}]"
        if not isinstance(r, dict):
            raise InputError("must be a mapping", at)
        bad = set(r) - {"resource", "vendor", "device", "class", "kind"}
        if bad:
            raise InputError(f"unknown keys {sorted(bad)}", at)
        if "resource" not in r:
            raise InputError("missing 'resource' (use null to drop devices)", at)
        res = r["resource"]
        if res is not None and (not isinstance(res, str) or not res):
            raise InputError("must be a non-empty string or null", f"{at}.resource")
        cls = r.get("class")
        if cls is not None:
            cls = str(cls).lower().removeprefix("0x")
            if not re.fullmatch(r"[0-9a-f]{1,4}", cls):
                raise InputError(f"expected 1-4 hex digits, got {r['class']!r}", f"{at}.class")
        kind = r.get("kind", "any")
        if kind not in KINDS:
            raise InputError(f"expected one of {', '.join(KINDS)}, got {kind!r}", f"{at}.kind")
        rules.append(
            Rule(
                resource=res,
                vendor=_hex_set(r["vendor"], f"{at}.vendor") if "vendor" in r else None,
                device=_hex_set(r["device"], f"{at}.device") if "device" in r else None,
                class_prefix=cls,
                kind=kind,
            )
        )
    if keep_defaults:
        rules.extend(DEFAULT_RULES)
    return DeviceRules(rules=tuple(rules))


def load_rules(path: str | Path | None) -> DeviceRules:
    """Read a YAML rules file; ``None`` gives the built-in rules."""
    if path is None:
        return DeviceRules()
    doc = read_yaml(str(path), invalid="malformed YAML")
    return parse_rules(doc, str(path))
