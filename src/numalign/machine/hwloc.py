"""Discover a :class:`~numalign.machine.model.Machine` from an hwloc XML topology.

Reads the XML that ``lstopo --of xml`` writes: format v2 (``topology version="2.0"``/``"3.0"``)
and, where cheap, v1 (no ``version``; ``Socket`` for packages, ``Cache`` objects with a depth,
I/O below NUMA nodes, ``<distances>`` with ``latency`` children).

* NUMA nodes: ``os_index``, ``local_memory`` (= the node's MemTotal on Linux), hugepages from
  ``page_type`` children (every size but the smallest base page), the NUMA latency matrix from
  ``distances2`` (``name="NUMALatency"``, else the first latency kind over NUMA nodes).
* CPUs: every ``PU`` (its ``os_index`` is the Linux CPU id), its ``Core`` (the machine-wide core
  id is the lowest PU of the core, as the kubelet derives it), ``Package``, ``Die`` and
  ``L3Cache`` ancestors. A PU belongs to the NUMA node attached nearest above it (v2 memory
  children, v1 NUMA ancestors); among several nodes at one level a plain/DRAM node comes
  before HBM, NVM or GPU-memory nodes, then the lowest id.
* Devices: ``PCIDev`` objects (class, vendor, device from ``pci_type``) with their OS devices
  (network, OpenFabrics = RDMA, GPU, co-processor). A device's NUMA locality is that of its
  first non-I/O ancestor: every NUMA node attached within it (a device below a Package or
  Group with several NUMA nodes is near all of them); a device attached to the Machine itself
  has no locality (unless the machine has one node).

The XML is parsed with the standard library, under caps (``docs/limits.md``): at most
:data:`MAX_XML_BYTES`, elements nested at most :data:`MAX_XML_DEPTH` deep and at most
:data:`MAX_XML_ELEMENTS` elements (checked while the document is read, in chunks); the
encoding must be UTF-8 (or ASCII/Latin-1), as hwloc writes; entity declarations and
internal DTD subsets are refused (no entity expansion, no external resources; hwloc's own
``<!DOCTYPE topology SYSTEM "hwloc2.dtd">`` is fine, it is never fetched).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

from numalign.errors import InputError, one_line
from numalign.inputs.cpulist import MAX_ID, format_cpulist, parse_cpumask
from numalign.machine.devices_naming import DeviceRules, PciDevice
from numalign.machine.model import Cpu, Machine, NumaNode
from numalign.machine.sysfs import Discovery

#: the largest hwloc XML document read, in bytes
MAX_XML_BYTES = 64 * 1024 * 1024
#: the deepest element nesting accepted (hwloc's deepest trees are a few tens of levels)
MAX_XML_DEPTH = 128
#: the most elements in one document
MAX_XML_ELEMENTS = 2_000_000
_CHUNK = 1 << 20
_ENCODINGS = frozenset({"utf-8", "utf8", "us-ascii", "ascii", "iso-8859-1", "latin-1", "latin1"})
_DECLARED_ENCODING = re.compile(rb"""\s*<\?xml[^>]*?encoding\s*=\s*["']([^"']{0,40})["']""")
_INTERNAL_SUBSET = re.compile(rb"<!DOCTYPE[^>\[]*\[")
_VERSION = re.compile(r"([0-9]{1,3})(?:\.[0-9]{1,3}){0,2}")
_MAX_ATTR_DIGITS = 24

_IO_TYPES = frozenset({"Bridge", "PCIDev", "OSDev", "Misc", "MemCache"})
_PLAIN_SUBTYPES = frozenset({"", "DRAM"})

# OS device kinds: hwloc 3 writes a bit mask, hwloc 1 and 2 an enumeration.
_V3_NET, _V3_OFED, _V3_GPU, _V3_COPROC = 16, 32, 4, 8
_V2_NET, _V2_OFED, _V2_GPU, _V2_COPROC = 2, 3, 1, 5


@dataclass
class _Obj:
    type: str
    attrs: dict[str, str]
    parent: _Obj | None
    children: list[_Obj] = field(default_factory=list)
    infos: dict[str, str] = field(default_factory=dict)
    page_types: list[tuple[int, int]] = field(default_factory=list)

    def int_attr(self, name: str) -> int | None:
        v = self.attrs.get(name)
        if v is None:
            return None
        shown = repr(v if len(v) <= 40 else v[:40] + "...")
        try:
            if len(v.strip()) > _MAX_ATTR_DIGITS:
                raise ValueError(v)
            n = int(v)
        except ValueError:
            raise InputError(f"{self.type} {name}={shown} is not an integer") from None
        if name == "os_index" and not 0 <= n <= MAX_ID:
            raise InputError(f"{self.type} os_index {n} is outside 0-{MAX_ID}")
        return n

    def ancestors(self) -> list[_Obj]:
        out = []
        p = self.parent
        while p is not None:
            out.append(p)
            p = p.parent
        return out

    def walk(self) -> list[_Obj]:
        out = [self]
        for c in self.children:
            out.extend(c.walk())
        return out


def parse_hwloc_bitmap(text: str, field: str | None = None) -> frozenset[int]:
    """Parse an hwloc bitmap string (``0x000000ff,,0xffffffff``; ``0xf...f,...`` = infinite).

    hwloc writes 32-bit words most significant first like the kernel's masks, but with a
    ``0x`` prefix and an empty word for a zero word; the infinite tail is dropped (only the
    bits written explicitly count). The rest is :func:`numalign.inputs.cpulist.parse_cpumask`.
    """
    text = text.strip()
    if not text:
        return frozenset()
    words = text.split(",")
    if words[0] == "0xf...f":
        words = words[1:]
    return parse_cpumask(",".join(w.strip().removeprefix("0x") or "0" for w in words), field)


def _object_type(el: ET.Element, version: int) -> str:
    t = el.get("type", "")
    if t == "Socket":
        return "Package"
    if t == "Cache":  # v1
        return f"L{el.get('depth', '0')}Cache"
    if t == "L1Cache" and el.get("cache_type") == "2":
        return "L1iCache"
    return t


def _build(el: ET.Element, parent: _Obj | None, version: int) -> _Obj:
    obj = _Obj(_object_type(el, version), dict(el.attrib), parent)
    for child in el:
        if child.tag == "object":
            obj.children.append(_build(child, obj, version))
        elif child.tag == "info":
            name, value = child.get("name"), child.get("value")
            if name is not None and value is not None:
                obj.infos[name] = value
        elif child.tag == "page_type":
            try:
                obj.page_types.append((int(child.get("size", "0")), int(child.get("count", "0"))))
            except ValueError:
                raise InputError("page_type size/count must be integers") from None
    return obj


def _subtype(o: _Obj) -> str:
    return o.attrs.get("subtype", o.infos.get("Type", ""))


def _node_rank(o: _Obj) -> tuple[bool, int]:
    return (_subtype(o) not in _PLAIN_SUBTYPES, o.int_attr("os_index") or 0)


def _numa_children(o: _Obj) -> list[_Obj]:
    return [c for c in o.children if c.type == "NUMANode"]


def _numa_within(o: _Obj) -> list[_Obj]:
    return [x for x in o.walk() if x.type == "NUMANode"]


def _distances_v2(
    root: ET.Element, objs: list[_Obj], warnings: list[str]
) -> dict[int, dict[int, int]] | None:
    by_gp = {o.attrs["gp_index"]: o for o in objs if "gp_index" in o.attrs}
    cands = [d for d in root.iter("distances2") if d.get("type") == "NUMANode"]
    if not cands:
        return None
    chosen = next((d for d in cands if d.get("name") == "NUMALatency"), None)
    if chosen is None:
        chosen = next((d for d in cands if _kind(d) & 4), cands[0])
    try:
        n = int(chosen.get("nbobjs", "0"))
        indexes = [i for x in chosen.findall("indexes") for i in (x.text or "").split()]
        values = [int(v) for u in chosen.findall("u64values") for v in (u.text or "").split()]
    except ValueError:
        raise InputError("distances2: values must be integers") from None
    if len(indexes) != n or len(values) != n * n:
        raise InputError(
            f"distances2: expected {n} indexes and {n * n} values, got {len(indexes)} and {len(values)}"
        )
    ids: list[int] = []
    for i in indexes:
        if chosen.get("indexing") == "gp":
            o = by_gp.get(i)
            if o is None or o.int_attr("os_index") is None:
                warnings.append(f"distances2 names unknown object gp_index {i}; no distances")
                return None
            ids.append(o.int_attr("os_index") or 0)
        else:
            try:
                ids.append(int(i))
            except ValueError:
                raise InputError(f"distances2: bad index {i!r}") from None
    return {a: {b: values[r * n + c] for c, b in enumerate(ids)} for r, a in enumerate(ids)}


def _kind(d: ET.Element) -> int:
    try:
        return int(d.get("kind", "0")[:_MAX_ATTR_DIGITS])
    except ValueError:
        raise InputError(f"distances2 kind={d.get('kind', '')[:20]!r} is not an integer") from None


def _distances_v1(root: ET.Element, nodes: list[_Obj]) -> dict[int, dict[int, int]] | None:
    for d in root.iter("distances"):
        try:
            n = int(d.get("nbobjs", "0"))
            base = float(d.get("latency_base", "1"))
            values = [float(x.get("value", "0")) for x in d.findall("latency")]
        except ValueError:
            raise InputError("distances: values must be numbers") from None
        if n != len(nodes) or len(values) != n * n:
            continue
        ids = [o.int_attr("os_index") or 0 for o in nodes]  # logical (document) order
        return {
            a: {b: round(values[r * n + c] * base) for c, b in enumerate(ids)}
            for r, a in enumerate(ids)
        }
    return None


def _parse_pci_type(text: str) -> tuple[int, int, int]:
    # "0302 [10de:1db8] [10de:131d] a1 00" -> class, vendor, device
    parts = text.replace("[", " ").replace("]", " ").replace(":", " ").split()
    try:
        return int(parts[0], 16), int(parts[1], 16), int(parts[2], 16)
    except (IndexError, ValueError):
        raise InputError(f"PCIDev pci_type {text!r} is not 'CLASS [VENDOR:DEVICE] ...'") from None


def parse_hwloc_xml(
    text: str | bytes,
    source: str = "hwloc XML",
    rules: DeviceRules | None = None,
    name: str | None = None,
) -> Discovery:
    """Discover from the text of an hwloc XML document. Malformed input -> :class:`InputError`."""
    raw = text.encode() if isinstance(text, str) else text
    root = _parse_bounded(raw, source)
    try:
        return _discover(root, rules, name or source)
    except InputError as e:
        raise e.within(source) if e.field is None else e from None
    except (ValueError, ArithmeticError) as e:  # a number no check foresaw
        raise InputError(f"malformed hwloc XML: {one_line(str(e))[:120]}", source) from None


def _parse_bounded(raw: bytes, source: str) -> ET.Element:
    """The document's root element, refusing what :data:`MAX_XML_BYTES` and friends forbid."""
    if len(raw) > MAX_XML_BYTES:
        raise InputError(f"larger than {MAX_XML_BYTES // (1024 * 1024)} MiB: refused", source)
    if raw[:2] in (b"\xff\xfe", b"\xfe\xff") or b"\x00" in raw[:4]:
        raise InputError("not UTF-8 text (hwloc writes UTF-8 XML)", source)
    m = _DECLARED_ENCODING.match(raw)
    if m is not None and m.group(1).decode("latin-1").lower() not in _ENCODINGS:
        declared = one_line(m.group(1).decode("latin-1"))
        raise InputError(
            f'unsupported encoding "{declared}" in the XML declaration (hwloc writes UTF-8)', source
        )
    if b"<!ENTITY" in raw:
        raise InputError("XML entity declarations are not accepted", source)
    if _INTERNAL_SUBSET.search(raw):
        raise InputError("XML internal DTD subsets are not accepted", source)
    parser: ET.XMLPullParser[ET.Element] = ET.XMLPullParser(events=("start", "end"))
    root: ET.Element | None = None
    depth = elements = 0
    try:
        for at in range(0, max(len(raw), 1), _CHUNK):
            parser.feed(raw[at : at + _CHUNK])
            for item in parser.read_events():
                event, el = cast(tuple[str, ET.Element], item)
                if event == "end":
                    depth -= 1
                    continue
                depth += 1
                elements += 1
                if root is None:
                    root = el
                if depth > MAX_XML_DEPTH:
                    raise InputError(f"elements nested deeper than {MAX_XML_DEPTH} levels", source)
                if elements > MAX_XML_ELEMENTS:
                    raise InputError(f"more than {MAX_XML_ELEMENTS} elements", source)
        parser.close()
    except ET.ParseError as e:
        raise InputError(f"malformed XML: {one_line(str(e))}", source) from None
    except (LookupError, ValueError) as e:  # an encoding expat cannot use
        raise InputError(f"unsupported XML encoding: {one_line(str(e))[:80]}", source) from None
    if root is None:
        raise InputError("malformed XML: no element found", source)
    return root


def _discover(root: ET.Element, rules: DeviceRules | None, name: str) -> Discovery:
    if root.tag != "topology":
        raise InputError(f"not an hwloc topology: root element <{root.tag}>")
    declared = root.get("version", "1.0")
    vm = _VERSION.fullmatch(declared.strip())
    if vm is None:
        shown = declared if len(declared) <= 20 else declared[:20] + "..."
        raise InputError(f'topology version="{shown}" is not a version like "2.0"')
    version = int(vm.group(1))
    top = root.find("object")
    if top is None:
        raise InputError("no top-level <object> (truncated or empty topology)")
    machine_obj = _build(top, None, version)
    objs = machine_obj.walk()
    warnings: list[str] = []

    node_objs = [o for o in objs if o.type == "NUMANode"]
    if not node_objs:
        # hwloc always has one; a document without is a single-node machine
        warnings.append("no NUMANode object: one node 0 with every PU")
    seen: dict[int, _Obj] = {}
    for o in node_objs:
        i = o.int_attr("os_index")
        if i is None:
            raise InputError("NUMANode without os_index")
        if i in seen:
            raise InputError(f"duplicate NUMANode os_index {i}")
        seen[i] = o

    # -- CPUs
    pus = [o for o in objs if o.type == "PU"]
    if not pus:
        raise InputError("no PU objects")
    l3_ids: dict[int, int] = {}
    for k, o in enumerate(x for x in objs if x.type == "L3Cache"):
        l3_os = o.int_attr("os_index")
        l3_ids[id(o)] = l3_os if l3_os is not None else k
    pkg_ord: dict[int, int] = {
        id(o): k for k, o in enumerate(x for x in objs if x.type == "Package")
    }
    raw: list[
        tuple[int, int, int, int | None, int | None, int]
    ] = []  # cpu, numa, socket, die, l3, corekey
    cpu_seen: set[int] = set()
    for pu in pus:
        cpu = pu.int_attr("os_index")
        if cpu is None:
            raise InputError("PU without os_index")
        if cpu in cpu_seen:
            raise InputError(f"duplicate PU os_index {cpu}")
        cpu_seen.add(cpu)
        anc = pu.ancestors()
        numa: int | None = None
        for a in anc:
            if a.type == "NUMANode":  # v1
                numa = a.int_attr("os_index")
                break
            kids = _numa_children(a)
            if kids:
                numa = min(kids, key=_node_rank).int_attr("os_index")
                break
        if numa is None:
            numa = min(seen) if seen else 0
        core = next((a for a in anc if a.type == "Core"), None)
        pkg = next((a for a in anc if a.type == "Package"), None)
        die = next((a for a in anc if a.type == "Die"), None)
        l3 = next((a for a in anc if a.type == "L3Cache"), None)
        socket = 0
        if pkg is not None:
            p_os = pkg.int_attr("os_index")
            socket = p_os if p_os is not None else pkg_ord[id(pkg)]
        raw.append(
            (
                cpu,
                numa,
                socket,
                die.int_attr("os_index") if die is not None else None,
                l3_ids[id(l3)] if l3 is not None else None,
                id(core) if core is not None else -1 - cpu,
            )
        )
    core_min: dict[int, int] = {}
    for cpu, *_rest, key in raw:
        core_min[key] = min(core_min.get(key, cpu), cpu)
    cpus = tuple(
        sorted(
            (
                Cpu(id=cpu, core=core_min[key], socket=sock, numa=numa, uncore_cache=l3, die=die)
                for cpu, numa, sock, die, l3, key in raw
            ),
            key=lambda c: c.id,
        )
    )

    # -- NUMA nodes
    dist = _distances_v2(root, objs, warnings) if version >= 2 else _distances_v1(root, node_objs)
    ids = sorted(seen) or [0]
    if dist is not None:
        missing = [i for i in ids if i not in dist]
        if missing:
            warnings.append(f"the latency matrix does not cover nodes {format_cpulist(missing)}")
    elif len(ids) > 1:
        warnings.append("no NUMA latency matrix (distances2); distances unknown")
    nodes: list[NumaNode] = []
    for i in ids:
        nobj = seen.get(i)
        memory = (nobj.int_attr("local_memory") or 0) if nobj is not None else 0
        huge: dict[int, int] = {}
        if nobj is not None and nobj.page_types:
            base = min(s for s, _ in nobj.page_types)
            for size, cnt in nobj.page_types:
                if size != base or base > 65536:
                    huge[size] = size * cnt
        row = {j: v for j, v in (dist or {}).get(i, {}).items() if j in ids}
        nodes.append(
            NumaNode(
                id=i,
                memory=memory,
                hugepages=dict(sorted(huge.items())),
                distances=dict(sorted(row.items())),
            )
        )
    with_cpus = {c.numa for c in cpus}
    memless = [i for i in ids if i not in with_cpus]
    if memless:
        warnings.append(f"NUMA nodes {format_cpulist(memless)} have no CPUs (memory-only)")

    # -- PCI devices
    pci: list[PciDevice] = []
    for o in objs:
        if o.type != "PCIDev":
            continue
        cls, vendor, device = _parse_pci_type(o.attrs.get("pci_type", ""))
        anc = o.ancestors()
        host = next((a for a in anc if a.type not in _IO_TYPES), machine_obj)
        if host.type == "NUMANode":
            near: list[int] = [host.int_attr("os_index") or 0]
        elif host is machine_obj and len(ids) > 1:
            near = []
        else:
            within = _numa_within(host) + [a for a in host.ancestors() if a.type == "NUMANode"][:1]
            if not within:  # v2 without memory children here: the nearest node above
                for a in host.ancestors():
                    if _numa_children(a):
                        within = _numa_children(a)
                        break
            plain = [w for w in within if _subtype(w) != "GPUMemory"] or within
            near = sorted({w.int_attr("os_index") or 0 for w in plain})
        bridges = [a for a in reversed(anc) if a.type == "Bridge" and "pci_busid" in a.attrs]
        nets: list[str] = []
        ofed: list[str] = []
        others: list[str] = []
        for c in o.children:
            if c.type != "OSDev":
                continue
            t = c.int_attr("osdev_type") or 0
            nm = c.attrs.get("name", "")
            is_net = bool(t & _V3_NET) if version >= 3 else t == _V2_NET
            is_ofed = bool(t & _V3_OFED) if version >= 3 else t == _V2_OFED
            if is_ofed:
                ofed.append(nm)
            elif is_net:
                nets.append(nm)
            else:
                others.append(nm)
        pci.append(
            PciDevice(
                bus_id=o.attrs.get("pci_busid", f"unknown{len(pci)}"),
                vendor=vendor,
                device=device,
                class_code=cls,
                numa=tuple(near),
                pcie_root=bridges[0].attrs["pci_busid"] if bridges else None,
                pcie_switch=bridges[1].attrs["pci_busid"] if len(bridges) >= 2 else None,
                rdma=tuple(ofed),
                netdevs=tuple(nets),
                osdevs=tuple(others),
            )
        )
    host_name = machine_obj.infos.get("HostName") or name
    machine = Machine(
        name=host_name,
        numa_nodes=tuple(nodes),
        cpus=cpus,
        devices=(rules or DeviceRules()).name_devices(pci),
    )
    return Discovery(machine=machine, warnings=[one_line(w) for w in warnings], pci=tuple(pci))


def load_hwloc_xml(
    path: str | Path, rules: DeviceRules | None = None, name: str | None = None
) -> Discovery:
    """Discover from an hwloc XML file."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_XML_BYTES + 1)
    except OSError as e:
        raise InputError(e.strerror or str(e), str(path)) from None
    d = parse_hwloc_xml(data, str(path), rules, None)
    if name is not None or d.machine.name == str(path):
        m = d.machine
        fixed = Machine(
            name=name or Path(path).stem, numa_nodes=m.numa_nodes, cpus=m.cpus, devices=m.devices
        )
        return Discovery(machine=fixed, warnings=d.warnings, pci=d.pci)
    return d


def lstopo_available() -> bool:
    return shutil.which("lstopo") is not None or shutil.which("lstopo-no-graphics") is not None


def hwloc_synthetic(desc: str, rules: DeviceRules | None = None) -> Discovery:
    """A machine from an hwloc synthetic description (``"pack:2 numa:2 core:8 pu:2"``).

    Needs Debian's ``hwloc`` package (``lstopo``); without it raises :class:`InputError`
    saying so.
    """
    exe = shutil.which("lstopo-no-graphics") or shutil.which("lstopo")
    if exe is None:
        raise InputError(
            "hwloc's lstopo is not installed (apt-get install hwloc)", "--hwloc-synthetic"
        )
    try:
        res = subprocess.run(
            [exe, "--if", "synthetic", "--input", desc, "--of", "xml", "-"],
            capture_output=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise InputError(f"lstopo failed: {e}", "--hwloc-synthetic") from None
    if res.returncode != 0:
        msg = res.stderr.decode(errors="replace").strip().splitlines()
        raise InputError(
            f"lstopo rejected {desc!r}: {msg[0] if msg else 'error'}", "--hwloc-synthetic"
        )
    return parse_hwloc_xml(res.stdout, "synthetic", rules, "synthetic")
