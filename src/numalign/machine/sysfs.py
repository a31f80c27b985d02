"""Discover a :class:`~numalign.machine.model.Machine` from Linux sysfs.

Sources: the live system (root ``/``), a captured root directory (``sys/`` and optionally
``proc/`` below it, as written by ``hwloc-gather-topology``), or such a capture packed as
``.tar.bz2``/``.tar.gz``/``.tar.xz``/``.tar`` (read in memory by :func:`read_capture_tree`
with the rules of ``tarfile``'s ``data`` filter: no absolute paths, no ``..``, no links leaving
the tree; :func:`extract_capture` unpacks the same members to a directory).

What is read:

* NUMA nodes: ``node/online`` (else the ``nodeN`` directories), ``nodeN/cpulist`` (else the hex
  ``cpumap``), ``nodeN/meminfo`` ``MemTotal``, ``nodeN/hugepages/hugepages-<size>kB/nr_hugepages``
  and ``nodeN/distance`` (columns = the online nodes, else the possible nodes).
* CPUs: ``cpuN/topology/{core_id,physical_package_id,die_id}``, online state (``cpu/online`` or
  ``cpuN/online``), the L3 cache id (``cache/index*/level`` = 3, its ``id``, else the lowest CPU of
  ``shared_cpu_list``/``shared_cpu_map``).
* PCI functions under ``bus/pci/devices``: ``numa_node``, ``class``, ``vendor``, ``device``, the
  root port and switch above (from the resolved device path), ``sriov_numvfs``, ``virtfn*``,
  ``physfn``, ``infiniband/`` and ``net/``.

Hostile captures are bounded (``docs/limits.md``): a file read is at most
:data:`MAX_SYSFS_FILE_BYTES` (a larger one, a FIFO or a device counts as unreadable), a number
longer than 24 characters is unparsable, ``cpuN``/``nodeN`` entries above
:data:`numalign.inputs.cpulist.MAX_ID` and PCI devices beyond :data:`MAX_PCI_DEVICES` are ignored with a
warning, symlink loops read as missing files; a tarball is at most :data:`MAX_TARBALL_BYTES`,
:data:`MAX_TAR_MEMBERS` members and :data:`MAX_TAR_CONTENT_BYTES` of content, and members
larger than :data:`MAX_SYSFS_FILE_BYTES` are not unpacked.

Real machines are messy; these are reported as warnings (:attr:`Discovery.warnings`), never
as crashes: NUL-padded files, missing files, node ids that are not ``0..N-1``, memory-only
nodes, an offline node 0, CPUs listed by nodes but absent, online CPUs on no online node (left
out: the kubelet does not see them either), offline CPUs, ``physical_package_id`` = -1 (the NUMA
node id stands in), and firmware that lists the same CPUs on several nodes: when every such node
lists the same CPU set, only the lowest of them is kept (hwloc does the same); otherwise each CPU
goes to the lowest node listing it.

``Cpu.core`` is normalised to the kubelet's machine-wide core id: the lowest CPU id among the
threads of the core. Threads of one core share (NUMA node, package, die, ``core_id``) and,
when the kernel provides ``thread_siblings_list`` (or the ``thread_siblings`` mask), are
siblings of each other.
"""

from __future__ import annotations

import os
import posixpath
import re
import socket
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from numalign.errors import InputError, one_line
from numalign.inputs.cpulist import MAX_ID, format_cpulist, parse_cpumask, parse_kernel_cpulist
from numalign.machine.capture_archive import (
    MAX_SYSFS_FILE_BYTES,
    TAR_SUFFIXES,
    find_root,
    is_tarball,
    read_capture_tree,
)
from numalign.machine.capture_tree import CaptureTree
from numalign.machine.devices_naming import DeviceRules, PciDevice
from numalign.machine.model import Cpu, Machine, NumaNode

_NODE_RE = re.compile(r"node(\d+)")
_CPU_RE = re.compile(r"cpu(\d+)")
_BUSID_RE = re.compile(r"[0-9a-fA-F]{4,}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]")
#: the most PCI functions read from ``bus/pci/devices``
MAX_PCI_DEVICES = 65536
_MAX_NUMBER_CHARS = 24


@dataclass(frozen=True)
class Discovery:
    """The result of a discovery: the machine, what looked odd, and the raw PCI inventory."""

    machine: Machine
    warnings: list[str] = field(default_factory=list)
    pci: tuple[PciDevice, ...] = ()
    #: what was found along the way that is no problem (``discover --verbose`` prints it)
    notes: list[str] = field(default_factory=list)


# --------------------------------------------------------------------------- reading


class _Fs:
    """File access below a root that remembers quirks instead of failing (a directory)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.nul_padded: list[str] = []
        self.missing: dict[str, list[str]] = {}
        self._root_real: Path | None = None

    def where(self, rel: str) -> str:
        """``rel`` as a path for messages."""
        return str(self.root / rel)

    def text(self, rel: str, what: str | None = None) -> str | None:
        data = self._read(rel)
        if data is None:
            if what is not None:
                self.missing.setdefault(what, []).append(rel)
            return None
        if b"\x00" in data:
            self.nul_padded.append(rel)
            data = data.replace(b"\x00", b"")
        return data.decode("utf-8", "replace").strip()

    def _read(self, rel: str) -> bytes | None:
        """The bytes of a regular file of at most :data:`MAX_SYSFS_FILE_BYTES`; else None
        (missing, a symlink loop, a FIFO or device that could block, too large)."""
        try:
            fd = os.open(self.root / rel, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None
            with os.fdopen(fd, "rb", closefd=False) as fh:
                data = fh.read(MAX_SYSFS_FILE_BYTES + 1)
        except OSError:
            return None
        finally:
            os.close(fd)
        return data if len(data) <= MAX_SYSFS_FILE_BYTES else None

    def int_(self, rel: str, what: str | None = None) -> int | None:
        t = self.text(rel, what)
        if t is None:
            return None
        try:
            if len(t) > _MAX_NUMBER_CHARS:
                raise ValueError(t)
            return int(t, 0) if t.startswith("0x") else int(t)
        except ValueError:
            if what is not None:
                self.missing.setdefault(what, []).append(rel + " (unparsable)")
            return None

    def listdir(self, rel: str) -> list[str]:
        try:
            return sorted(os.listdir(self.root / rel))
        except OSError:
            return []

    def realpath(self, rel: str) -> tuple[str, ...] | None:
        """Where ``rel`` really is, links resolved: parts below the root; ``None`` outside it."""
        if self._root_real is None:
            self._root_real = Path(os.path.realpath(self.root))
        real = Path(os.path.realpath(self.root / rel))
        if not real.is_relative_to(self._root_real):
            return None
        return real.relative_to(self._root_real).parts

    def real_name(self, rel: str) -> str:
        """The name of what ``rel`` resolves to (a link's target's last component)."""
        return Path(os.path.realpath(self.root / rel)).name

    def is_link(self, rel: str) -> bool:
        return os.path.islink(self.root / rel)


class _TreeFs(_Fs):
    """The same access over a capture held in memory (:class:`CaptureTree`); ``prefix`` = the
    directory of the tree holding ``sys/``, ``source`` = the tarball, for messages."""

    def __init__(self, tree: CaptureTree, prefix: str, source: str | Path) -> None:
        super().__init__(Path(source) / prefix if prefix else Path(source))
        self.tree = tree
        self.prefix = f"{prefix}/" if prefix else ""

    def _read(self, rel: str) -> bytes | None:
        data = self.tree.read(self.prefix + rel)
        return data if data is not None and len(data) <= MAX_SYSFS_FILE_BYTES else None

    def listdir(self, rel: str) -> list[str]:
        return self.tree.listdir(self.prefix + rel) or []

    def realpath(self, rel: str) -> tuple[str, ...] | None:
        real = self.tree.realpath(self.prefix + rel)
        base = tuple(p for p in self.prefix.split("/") if p)
        if real is None or real[: len(base)] != base:
            return None
        return real[len(base):]

    def real_name(self, rel: str) -> str:
        real = self.tree.realpath(self.prefix + rel)
        return real[-1] if real else posixpath.basename(rel)

    def is_link(self, rel: str) -> bool:
        return self.tree.is_link(self.prefix + rel)


def tree_root(tree: CaptureTree, source: str | Path) -> str:
    """The directory of ``tree`` holding ``sys/devices/system/cpu`` (``""`` = the top, else its
    only top-level directory that does), as :func:`find_root` finds it on disk."""
    if tree.is_dir("sys/devices/system/cpu"):
        return ""
    subdirs = [n for n in tree.listdir("") or [] if tree.is_dir(n)]
    hits = [n for n in subdirs if tree.is_dir(f"{n}/sys/devices/system/cpu")]
    if len(hits) == 1:
        return hits[0]
    if len(hits) > 1:
        raise InputError(
            f"several captured roots below it ({', '.join(hits[:3])}...); name one", str(source)
        )
    raise InputError("not a sysfs root: no sys/devices/system/cpu in it", str(source))


def _numbered(names: Iterable[str], pattern: re.Pattern[str], ignored: list[str] | None = None) -> list[int]:
    """The ids of ``names`` matching ``pattern`` (``cpu12`` -> 12); ids above MAX_ID are
    left out (and named in ``ignored``)."""
    out = []
    for n in names:
        m = pattern.fullmatch(n)
        if m:
            digits = m.group(1)
            if len(digits) > len(str(MAX_ID)) or int(digits) > MAX_ID:
                if ignored is not None:
                    ignored.append(n[:40])
                continue
            out.append(int(digits))
    return sorted(out)


def _shown(text: str, limit: int = 40) -> str:
    """A file's text quoted for a warning, cut short (it can be 64 KiB of garbage)."""
    return repr(text if len(text) <= limit else text[:limit] + "...")


def _plural(ids: Iterable[int]) -> str:
    return format_cpulist(ids)


@dataclass
class _RawCpu:
    id: int
    online: bool
    package: int | None
    core_id: int | None
    die: int | None
    l3: int | None
    siblings: frozenset[int] | None = None


def _read_cpus(fs: _Fs, warnings: list[str]) -> dict[int, _RawCpu]:
    base = "sys/devices/system/cpu"
    too_high: list[str] = []
    ids = _numbered(fs.listdir(base), _CPU_RE, too_high)
    if too_high:
        warnings.append(f"{base}: {', '.join(too_high[:3])}: ids above {MAX_ID} are ignored")
    online_txt = fs.text(f"{base}/online")
    online_set: frozenset[int] | None = None
    if online_txt is not None:
        try:
            online_set = parse_kernel_cpulist(online_txt)
        except InputError:
            warnings.append(f"{base}/online is unparsable ({_shown(online_txt)}); using cpuN/online")
    out: dict[int, _RawCpu] = {}
    no_topo: list[int] = []
    for c in ids:
        d = f"{base}/cpu{c}"
        if online_set is not None:
            online = c in online_set
        else:
            flag = fs.int_(f"{d}/online")
            online = flag is None or flag != 0
        package = fs.int_(f"{d}/topology/physical_package_id")
        core_id = fs.int_(f"{d}/topology/core_id")
        die = fs.int_(f"{d}/topology/die_id")
        if die is not None and die < 0:
            die = None
        siblings = _cpu_set_file(fs, f"{d}/topology/thread_siblings_list", f"{d}/topology/thread_siblings")
        if siblings is not None and c not in siblings:
            siblings = None
        if online and (package is None or core_id is None):
            no_topo.append(c)
        l3: int | None = None
        for idx in fs.listdir(f"{d}/cache"):
            if not idx.startswith("index"):
                continue
            if fs.int_(f"{d}/cache/{idx}/level") != 3:
                continue
            l3 = fs.int_(f"{d}/cache/{idx}/id")
            if l3 is None:
                shared = fs.text(f"{d}/cache/{idx}/shared_cpu_list")
                try:
                    if shared is not None:
                        l3 = min(parse_kernel_cpulist(shared), default=None)
                    else:
                        mask = fs.text(f"{d}/cache/{idx}/shared_cpu_map")
                        if mask is not None:
                            l3 = min(parse_cpumask(mask), default=None)
                except InputError:
                    l3 = None
            break
        out[c] = _RawCpu(c, online, package, core_id, die, l3, siblings)
    if no_topo:
        warnings.append(
            f"CPUs {_plural(no_topo)}: topology/core_id or physical_package_id missing; "
            "each is taken as its own core"
        )
    return out


@dataclass
class _RawNode:
    id: int
    cpus: frozenset[int]
    memory: int
    hugepages: dict[int, int]
    distance_row: list[int] | None


def _read_node(fs: _Fs, n: int, warnings: list[str]) -> _RawNode:
    d = f"sys/devices/system/node/node{n}"
    cpus: frozenset[int] | None = None
    t = fs.text(f"{d}/cpulist")
    if t is not None:
        try:
            cpus = parse_kernel_cpulist(t)
        except InputError:
            warnings.append(f"node {n}: cpulist unparsable ({_shown(t)})")
    if cpus is None:
        t = fs.text(f"{d}/cpumap")
        if t is not None:
            try:
                cpus = parse_cpumask(t)
            except InputError:
                warnings.append(f"node {n}: cpumap unparsable ({_shown(t)})")
    if cpus is None:
        links = _numbered(fs.listdir(d), _CPU_RE)
        if not links:
            warnings.append(f"node {n}: no cpulist, cpumap or cpuN entries; taken as CPU-less")
        cpus = frozenset(links)
    memory = 0
    meminfo = fs.text(f"{d}/meminfo")
    m = re.search(r"MemTotal:\s*(\d{1,20})\s*kB", meminfo or "")
    if m:
        memory = int(m.group(1)) * 1024
    else:
        warnings.append(f"node {n}: no MemTotal in meminfo; memory taken as 0")
    huge: dict[int, int] = {}
    for h in fs.listdir(f"{d}/hugepages"):
        hm = re.fullmatch(r"hugepages-(\d{1,15})kB", h)
        if not hm:
            continue
        size = int(hm.group(1)) * 1024
        nr = fs.int_(f"{d}/hugepages/{h}/nr_hugepages")
        if nr is None:
            warnings.append(f"node {n}: {h}/nr_hugepages missing; taken as 0")
            nr = 0
        huge[size] = nr * size
    row: list[int] | None = None
    dist = fs.text(f"{d}/distance")
    if dist is None:
        warnings.append(f"node {n}: no distance file")
    else:
        try:
            parts = dist.split()
            if any(len(x) > _MAX_NUMBER_CHARS for x in parts):
                raise ValueError(dist)
            row = [int(x) for x in parts]
        except ValueError:
            warnings.append(f"node {n}: distance unparsable ({_shown(dist)})")
    return _RawNode(n, cpus, memory, huge, row)


def _proc_memtotal(fs: _Fs) -> int:
    m = re.search(r"MemTotal:\s*(\d{1,20})\s*kB", fs.text("proc/meminfo") or "")
    return int(m.group(1)) * 1024 if m else 0


def _read_nodes(
    fs: _Fs, cpu_ids: list[int], warnings: list[str]
) -> tuple[list[_RawNode], frozenset[int] | None, frozenset[int] | None]:
    base = "sys/devices/system/node"
    too_high: list[str] = []
    dirs = set(_numbered(fs.listdir(base), _NODE_RE, too_high))
    if too_high:
        warnings.append(f"{base}: {', '.join(too_high[:3])}: ids above {MAX_ID} are ignored")

    def lst(name: str) -> frozenset[int] | None:
        t = fs.text(f"{base}/{name}")
        if t is None:
            return None
        try:
            return parse_kernel_cpulist(t)
        except InputError:
            warnings.append(f"{base}/{name} unparsable ({_shown(t)})")
            return None

    online = lst("online")
    possible = lst("possible")
    if not dirs:
        warnings.append(
            "no NUMA information (sys/devices/system/node absent or empty): one node 0 with "
            "every CPU and the memory of /proc/meminfo"
        )
        node = _RawNode(0, frozenset(cpu_ids), _proc_memtotal(fs), {}, [10])
        return [node], frozenset({0}), None
    if online is None:
        ids = sorted(dirs)
    else:
        ids = sorted(i for i in online if i in dirs)
        absent = sorted(online - dirs)
        if absent:
            warnings.append(f"nodes {_plural(absent)} are online but have no directory; ignored")
        offline_dirs = sorted(dirs - online)
        if offline_dirs:
            warnings.append(
                f"nodes {_plural(offline_dirs)} have a directory but are not online; ignored"
            )
    if not ids:
        raise InputError("no online NUMA node", fs.where(base))
    return [_read_node(fs, n, warnings) for n in ids], online, possible


def _distance_columns(
    row_len: int, ids: list[int], online: frozenset[int] | None, possible: frozenset[int] | None
) -> list[int] | None:
    for cand in (sorted(online) if online else None, ids, sorted(possible) if possible else None):
        if cand is not None and len(cand) == row_len:
            return cand
    if row_len > max(ids, default=0):
        return list(range(row_len))
    return None


def _hostname(fs: _Fs, live: bool, fallback: str) -> str:
    if live:
        return socket.gethostname() or fallback
    for rel in ("proc/sys/kernel/hostname", "etc/hostname"):
        t = fs.text(rel)
        if t:
            return t.splitlines()[0].strip()
    return fallback


def _cpu_set_file(fs: _Fs, list_path: str, mask_path: str) -> frozenset[int] | None:
    """A CPU set the kernel shows twice: ``list_path`` (a CPU list) or, without it,
    ``mask_path`` (a hex mask). None if neither file is there or the text does not parse."""
    try:
        text = fs.text(list_path)
        if text is not None:
            return parse_kernel_cpulist(text)
        text = fs.text(mask_path)
        return None if text is None else parse_cpumask(text)
    except InputError:
        return None


def _locality_from_cpus(fs: _Fs, rel: str, node_cpus: dict[int, frozenset[int]]) -> tuple[int, ...]:
    """Without ``numa_node``: the nodes whose CPUs meet ``local_cpulist``/``local_cpus``.

    Only a proper subset of the nodes counts (local CPUs = every CPU says nothing).
    """
    local = _cpu_set_file(fs, f"{rel}/local_cpulist", f"{rel}/local_cpus")
    if not local:
        return ()
    near = tuple(sorted(n for n, cpus in node_cpus.items() if cpus & local))
    with_cpus = [n for n, cpus in node_cpus.items() if cpus]
    if not near or len(near) >= len(with_cpus):
        return ()
    return near


def _read_pci(
    fs: _Fs, node_ids: set[int], node_cpus: dict[int, frozenset[int]], warnings: list[str]
) -> list[PciDevice]:
    base = "sys/bus/pci/devices"
    names = fs.listdir(base)
    if len(names) > MAX_PCI_DEVICES:
        warnings.append(f"{base}: {len(names)} entries; only the first {MAX_PCI_DEVICES} are read")
        names = names[:MAX_PCI_DEVICES]
    out: list[PciDevice] = []
    bad_numa: dict[int, list[str]] = {}
    for name in names:
        rel = f"{base}/{name}"
        real = fs.realpath(rel)
        if real is None:
            warnings.append(f"PCI device {name}: link leaves the sysfs root; ignored")
            continue
        cls = fs.int_(f"{rel}/class", "PCI class")
        vendor = fs.int_(f"{rel}/vendor", "PCI vendor")
        device = fs.int_(f"{rel}/device", "PCI device")
        if cls is None:
            continue
        vendor = vendor or 0
        device = device or 0
        class_code = cls >> 8
        if class_code >> 8 == 0x06:  # bridges: topology, not devices
            continue
        bridges: list[str] = []
        host: str | None = None
        if real[:2] == ("sys", "devices"):
            parts = real[2:]
            if parts and parts[0].startswith("pci"):
                host = parts[0]
            bridges = [p for p in parts[:-1] if _BUSID_RE.fullmatch(p)]
        numa: tuple[int, ...] = ()
        nn = fs.int_(f"{rel}/numa_node")
        if nn is not None and nn >= 0:
            if nn in node_ids:
                numa = (nn,)
            else:
                bad_numa.setdefault(nn, []).append(name)
        elif nn is None:
            numa = _locality_from_cpus(fs, rel, node_cpus)
        physfn: str | None = None
        if fs.is_link(f"{rel}/physfn"):
            physfn = fs.real_name(f"{rel}/physfn")
        virtfns = tuple(
            sorted(
                fs.real_name(f"{rel}/{v}")
                for v in fs.listdir(rel)
                if re.fullmatch(r"virtfn\d+", v)
            )
        )
        out.append(
            PciDevice(
                bus_id=name,
                vendor=vendor,
                device=device,
                class_code=class_code,
                numa=numa,
                pcie_root=bridges[0] if bridges else host,
                pcie_switch=bridges[1] if len(bridges) >= 2 else None,
                physfn=physfn,
                sriov_numvfs=fs.int_(f"{rel}/sriov_numvfs") or 0,
                virtfns=virtfns,
                rdma=tuple(fs.listdir(f"{rel}/infiniband")),
                netdevs=tuple(fs.listdir(f"{rel}/net")),
            )
        )
    for nn, devs in sorted(bad_numa.items()):
        warnings.append(
            f"PCI devices {', '.join(devs)} report numa_node {nn}, which is not an online node; "
            "taken as without NUMA locality"
        )
    return out


def read_sysfs(
    root: str | Path = "/", rules: DeviceRules | None = None, name: str | None = None
) -> Discovery:
    """Discover the machine below ``root`` (a directory holding ``sys/``; ``/`` = live)."""
    live = os.path.realpath(root) == "/"
    root_path = Path(root) if live else find_root(root)
    fallback = Path(root).resolve().name or "localhost"
    return _discover(_Fs(root_path), rules, name, live, fallback, str(root))


def _discover(
    fs: _Fs, rules: DeviceRules | None, name: str | None, live: bool, fallback: str, where: str
) -> Discovery:
    """Discover the machine readable through ``fs``."""
    warnings: list[str] = []
    raw_cpus = _read_cpus(fs, warnings)
    if not raw_cpus:
        raise InputError("not a sysfs root: no cpuN under sys/devices/system/cpu", where)
    nodes, online_nodes, possible_nodes = _read_nodes(fs, sorted(raw_cpus), warnings)
    node_by_id = {n.id: n for n in nodes}
    ids = sorted(node_by_id)
    all_ids = list(ids)

    # -- quirks of the node list
    if 0 not in node_by_id:
        warnings.append(f"NUMA node 0 is offline or absent (online nodes: {_plural(ids)})")
    if ids != list(range(len(ids))):
        warnings.append(f"NUMA node ids are not 0..{len(ids) - 1}: {_plural(ids)}")

    # -- firmware listing the same CPUs on several nodes
    listing: dict[int, list[int]] = {}
    for n in nodes:
        for c in n.cpus:
            listing.setdefault(c, []).append(n.id)
    shared = {c: ns for c, ns in listing.items() if len(ns) > 1}
    if shared:
        with_cpus = [n for n in nodes if n.cpus]
        if len({n.cpus for n in with_cpus}) == 1:
            keep = with_cpus[0].id
            dropped = [n.id for n in with_cpus[1:]]
            warnings.append(
                f"firmware lists the same CPUs {_plural(with_cpus[0].cpus)} on nodes "
                f"{_plural(n.id for n in with_cpus)}: kept node {keep} only, as hwloc does "
                f"(nodes {_plural(dropped)} ignored)"
            )
            for d in dropped:
                del node_by_id[d]
            nodes = [n for n in nodes if n.id in node_by_id]
            ids = sorted(node_by_id)
        else:
            warnings.append(
                f"CPUs {_plural(shared)} are listed on several NUMA nodes; each is given to the "
                "lowest node listing it"
            )

    cpu_node: dict[int, int] = {}
    for n in nodes:
        for c in n.cpus:
            cpu_node.setdefault(c, n.id)
            cpu_node[c] = min(cpu_node[c], n.id)
    ghost = sorted(c for c in cpu_node if c not in raw_cpus)
    if ghost:
        warnings.append(
            f"CPUs {_plural(ghost)} are listed by NUMA nodes but absent from "
            "sys/devices/system/cpu; ignored"
        )
    if not any(c in raw_cpus for c in cpu_node):
        first = ids[0]
        warnings.append(f"no NUMA node lists an existing CPU: every CPU put on node {first}")
        cpu_node = {c: first for c in raw_cpus}
    nodeless = sorted(c for c in raw_cpus if c not in cpu_node)
    if nodeless:
        on = [c for c in nodeless if raw_cpus[c].online]
        off = [c for c in nodeless if not raw_cpus[c].online]
        detail = []
        if on:
            detail.append(f"online {_plural(on)}")
        if off:
            detail.append(f"offline {_plural(off)}")
        warnings.append(
            f"CPUs on no online NUMA node ({'; '.join(detail)}) are left out, as the kubelet does"
        )
    offline = sorted(c for c, r in raw_cpus.items() if not r.online and c in cpu_node)
    if offline:
        warnings.append(f"CPUs {_plural(offline)} are offline")
    memless = [n.id for n in nodes if not any(c in raw_cpus for c in n.cpus)]
    if memless:
        warnings.append(f"NUMA nodes {_plural(memless)} have no CPUs (memory-only)")

    # -- CPUs
    no_pkg = sorted(
        c for c, r in raw_cpus.items() if c in cpu_node and r.package is not None and r.package < 0
    )
    if no_pkg:
        warnings.append(
            f"CPUs {_plural(no_pkg)} report physical_package_id -1; their NUMA node id is used "
            "as the socket"
        )
    # a core = the CPUs sharing (node, package, die, core_id) that are also thread siblings
    # (old platforms repeat core_id across packages; Bulldozer modules share siblings)
    groups: dict[tuple[int, ...], list[int]] = {}
    keys: dict[int, tuple[int, ...]] = {}
    sockets: dict[int, int] = {}
    for c, r in raw_cpus.items():
        if c not in cpu_node:
            continue
        numa = cpu_node[c]
        sock = r.package if r.package is not None and r.package >= 0 else numa
        sockets[c] = sock
        core = r.core_id if r.core_id is not None else -1 - c  # own core when unknown
        sib = c
        if r.siblings is not None:
            sib = min(s for s in r.siblings if s == c or cpu_node.get(s) == numa)
        key: tuple[int, ...] = (numa, sock, r.die if r.die is not None else 0, core, sib)
        keys[c] = key
        groups.setdefault(key, []).append(c)
    core_of: dict[tuple[int, ...], int] = {}
    for gkey, members in groups.items():
        on = [c for c in members if raw_cpus[c].online]
        core_of[gkey] = min(on or members)
    cpus = tuple(
        Cpu(
            id=c,
            core=core_of[keys[c]],
            socket=sockets[c],
            numa=cpu_node[c],
            uncore_cache=raw_cpus[c].l3,
            die=raw_cpus[c].die,
            online=raw_cpus[c].online,
        )
        for c in sorted(keys)
    )

    # -- distances
    distances: dict[int, dict[int, int]] = {}
    bad_rows: list[int] = []
    for n in nodes:
        if n.distance_row is None:
            continue
        cols = _distance_columns(len(n.distance_row), all_ids, online_nodes, possible_nodes)
        if cols is None:
            bad_rows.append(n.id)
            continue
        distances[n.id] = {
            j: v for j, v in zip(cols, n.distance_row, strict=True) if j in node_by_id
        }
    if bad_rows:
        warnings.append(
            f"nodes {_plural(bad_rows)}: the distance row does not match the node list; ignored"
        )
    incomplete = [i for i in ids if any(j not in distances.get(i, {}) for j in ids)]
    if incomplete and len(ids) > 1:
        warnings.append(f"the distance matrix is incomplete (rows of nodes {_plural(incomplete)})")

    numa_nodes = tuple(
        NumaNode(
            id=n.id,
            memory=n.memory,
            hugepages=dict(sorted(n.hugepages.items())),
            distances=dict(sorted(distances.get(n.id, {}).items())),
        )
        for n in sorted(nodes, key=lambda x: x.id)
    )

    node_cpus: dict[int, set[int]] = {i: set() for i in ids}
    for cpu in cpus:
        if cpu.online:
            node_cpus[cpu.numa].add(cpu.id)
    pci = _read_pci(fs, set(ids), {k: frozenset(v) for k, v in node_cpus.items()}, warnings)
    if fs.nul_padded:
        warnings.append(
            f"{len(fs.nul_padded)} files padded with NUL bytes (e.g. {fs.nul_padded[0]}); "
            "the NULs were dropped"
        )
    for what, rels in fs.missing.items():
        warnings.append(f"{what}: {len(rels)} files missing or unreadable (e.g. {rels[0]})")
    machine = Machine(
        name=name or _hostname(fs, live, fallback),
        numa_nodes=numa_nodes,
        cpus=cpus,
        devices=(rules or DeviceRules()).name_devices(pci),
    )
    return Discovery(machine=machine, warnings=[one_line(w) for w in warnings], pci=tuple(pci))


def load_sysfs(
    path: str | Path = "/", rules: DeviceRules | None = None, name: str | None = None
) -> Discovery:
    """Discover from ``/`` (live), a captured root directory, or a captured tarball."""
    p = Path(path)
    if not p.exists():
        raise InputError("no such file or directory", str(path))
    if os.path.realpath(p) == "/":
        return read_sysfs("/", rules, name)
    fallback = p.name
    for suffix in TAR_SUFFIXES:
        if fallback.endswith(suffix):
            fallback = fallback[: -len(suffix)]
            break
    if is_tarball(p) and p.is_file():  # read in memory: nothing unpacked to disk
        tree = read_capture_tree(p)
        prefix = tree_root(tree, p)
        fs = _TreeFs(tree, prefix, p)
        return _discover(fs, rules, name or fallback or None, False, prefix or "localhost", str(p))
    return read_sysfs(find_root(p), rules, name or fallback)
