"""A captured tarball is read in memory (:func:`numalign.machine.capture_archive.read_capture_tree`) for
``load_sysfs``; it must discover exactly what unpacking it to disk
(:func:`~numalign.machine.capture_archive.extract_capture` + :func:`~numalign.machine.sysfs.read_sysfs`)
discovers: the machine, the PCI inventory and the warnings, for every real capture and for
hostile hand-made archives (links, loops, escapes, devices, duplicates, oversized members)."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from conftest import SHARED
from numalign.errors import InputError
from numalign.machine import capture_archive
from numalign.machine.capture_archive import extract_capture
from numalign.machine.capture_tree import CaptureTree
from numalign.machine.sysfs import Discovery, load_sysfs, read_sysfs

LINUX = SHARED / "topologies" / "hwloc" / "linux"
CAPTURES = sorted(LINUX.glob("*.tar.bz2")) if LINUX.is_dir() else []


def on_disk(tarball: Path, dest: Path, name: str) -> Discovery | str:
    try:
        return read_sysfs(extract_capture(tarball, dest), name=name)
    except InputError as e:
        return e.problem


def in_memory(tarball: Path, name: str) -> Discovery | str:
    try:
        return load_sysfs(tarball, name=name)
    except InputError as e:
        return e.problem


@pytest.mark.skipif(not CAPTURES, reason=f"{LINUX} not found: ../shared is not beside this checkout")
@pytest.mark.parametrize("tarball", CAPTURES, ids=lambda p: p.name.removesuffix(".tar.bz2"))
def test_every_capture_same_discovery(tarball: Path, tmp_path: Path) -> None:
    name = tarball.name.removesuffix(".tar.bz2")
    disk = on_disk(tarball, tmp_path, name)
    memory = in_memory(tarball, name)
    assert memory == disk


def _tar(path: Path, entries: list[tuple[str, str, str | bytes]]) -> Path:
    """entries: (kind, name, content-or-link-target); kind in file/dir/sym/hard/fifo."""
    with tarfile.open(path, "w:gz") as tf:
        for kind, name, value in entries:
            info = tarfile.TarInfo(name)
            data = b""
            if kind == "file":
                data = value if isinstance(value, bytes) else value.encode()
                info.size = len(data)
            elif kind == "dir":
                info.type = tarfile.DIRTYPE
                info.mode = 0o755
            elif kind == "sym":
                info.type, info.linkname = tarfile.SYMTYPE, str(value)
            elif kind == "hard":
                info.type, info.linkname = tarfile.LNKTYPE, str(value)
            elif kind == "fifo":
                info.type = tarfile.FIFOTYPE
            tf.addfile(info, io.BytesIO(data) if kind == "file" else None)
    return path


CPU = "cap/sys/devices/system/cpu"
NODE = "cap/sys/devices/system/node"
PCI = "cap/sys/devices/pci0000:00"
BUS = "cap/sys/bus/pci/devices"


def _base() -> list[tuple[str, str, str | bytes]]:
    out: list[tuple[str, str, str | bytes]] = [("dir", "cap", ""), ("file", f"{CPU}/online", "0-3\n")]
    for c in range(4):
        out += [("file", f"{CPU}/cpu{c}/topology/core_id", f"{c // 2}\n"),
                ("file", f"{CPU}/cpu{c}/topology/physical_package_id", "0\n"),
                ("file", f"{CPU}/cpu{c}/topology/thread_siblings_list", f"{c - c % 2}-{c - c % 2 + 1}\n")]
    for n in range(2):
        out += [("file", f"{NODE}/node{n}/cpulist", f"{2 * n}-{2 * n + 1}\n"),
                ("file", f"{NODE}/node{n}/meminfo", f"Node {n} MemTotal: 1048576 kB\n"),
                ("file", f"{NODE}/node{n}/distance", "10 20\n" if n == 0 else "20 10\n")]
    out += [("file", f"{NODE}/online", "0-1\n")]
    for dev, numa in (("0000:00:01.0", "0"), ("0000:00:02.0", "1")):
        out += [("file", f"{PCI}/{dev}/class", "0x030200\n"), ("file", f"{PCI}/{dev}/vendor", "0x10de\n"),
                ("file", f"{PCI}/{dev}/device", "0x1db5\n"), ("file", f"{PCI}/{dev}/numa_node", f"{numa}\n"),
                ("sym", f"{BUS}/{dev}", f"../../../devices/pci0000:00/{dev}")]
    return out


HOSTILE: dict[str, list[tuple[str, str, str | bytes]]] = {
    "plain": [],
    "link loop": [("sym", f"{BUS}/0000:00:03.0", "0000:00:04.0"), ("sym", f"{BUS}/0000:00:04.0", "0000:00:03.0")],
    "link leaving the tree": [("sym", f"{BUS}/0000:00:05.0", "../../../../../etc")],
    "absolute link": [("sym", f"{BUS}/0000:00:06.0", "/sys/devices/pci0000:00/0000:00:01.0")],
    "name leaving the tree": [("file", "cap/../../evil/class", "0x030200\n")],
    "absolute name": [("file", f"/{NODE}/node0/meminfo", "MemTotal: 5 kB\n")],
    "fifo": [("fifo", f"{NODE}/node1/meminfo", "")],
    "duplicate member, later wins": [("file", f"{NODE}/node1/meminfo", "Node 1 MemTotal: 2048 kB\n")],
    "hard link": [("hard", f"{NODE}/node1/distance", f"{NODE}/node0/distance")],
    "oversized member": [("file", f"{NODE}/node1/distance", "10 " * 30000)],
    "NUL padding": [("file", f"{CPU}/cpu3/topology/core_id", b"1\x00\x00\n")],
    "file written through a link": [("sym", f"{NODE}/node1/meminfo", "../node0/meminfo"),
                                    ("file", f"{NODE}/node1/meminfo", "Node 1 MemTotal: 4096 kB\n")],
    "link over a directory": [("sym", f"{NODE}/node1", "node0")],
    "file under a file": [("file", f"{NODE}/node0/cpulist/x", "1\n")],
    "directory through a link": [("sym", "cap/sys/devices/system/cpu2", "cpu"),
                                 ("file", "cap/sys/devices/system/cpu2/cpu3/topology/die_id", "0\n")],
    "virtual functions": [("file", f"{PCI}/0000:00:01.1/class", "0x020000\n"),
                          ("file", f"{PCI}/0000:00:01.1/sriov_numvfs", "1\n"),
                          ("sym", f"{PCI}/0000:00:01.1/virtfn0", "../0000:00:01.2"),
                          ("file", f"{PCI}/0000:00:01.2/class", "0x020000\n"),
                          ("sym", f"{PCI}/0000:00:01.2/physfn", "../0000:00:01.1"),
                          ("sym", f"{BUS}/0000:00:01.1", "../../../devices/pci0000:00/0000:00:01.1"),
                          ("sym", f"{BUS}/0000:00:01.2", "../../../devices/pci0000:00/0000:00:01.2")],
    "no cpu directory": [("sym", "cap/sys/devices/system/cpu", "nowhere")],
    "two roots": [("file", "cap2/sys/devices/system/cpu/online", "0\n"),
                  ("dir", "cap2/sys/devices/system/cpu/cpu0", "")],
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_archive_same_discovery(case: str, tmp_path: Path) -> None:
    tarball = _tar(tmp_path / "cap.tar.gz", _base() + HOSTILE[case])
    (tmp_path / "x").mkdir()
    disk = on_disk(tarball, tmp_path / "x", "cap")
    memory = in_memory(tarball, "cap")
    if isinstance(disk, str):  # the messages name the temporary directory or the tarball
        assert isinstance(memory, str) and memory.split(":")[0] == disk.split(":")[0]
    else:
        assert memory == disk


def test_tree_resolution() -> None:
    t = CaptureTree()
    t.add_file("a/b/f", b"x")
    t.add_link("a/l", "b")
    t.add_link("a/loop", "loop")
    t.add_link("a/up", "../..")
    assert t.read("a/l/f") == b"x" and t.realpath("a/l/f") == ("a", "b", "f")
    assert t.read("a/loop") is None and t.realpath("a/loop/x") == ("a", "loop", "x")  # unresolved
    assert t.realpath("a/up") is None  # above the root
    assert t.is_link("a/l") and not t.is_link("a/b") and t.listdir("a") == ["b", "l", "loop", "up"]
    assert t.realpath("a/missing/../b") == ("a", "b")  # lexical past a missing component


@pytest.mark.parametrize("mode", ["w:gz", "w:bz2", "w:xz", "w:"])
@pytest.mark.parametrize("at_once", [True, False])
def test_decompressed_at_once_or_streaming_same_discovery(
    mode: str, at_once: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Small archives are decompressed at once, others read streaming: the same tree."""

    if not at_once:
        monkeypatch.setattr(capture_archive, "IN_MEMORY_TAR_BYTES", 0)
    src = _tar(tmp_path / "src.tar.gz", _base() + HOSTILE["virtual functions"])
    tarball = tmp_path / ("cap.tar" + {"w:gz": ".gz", "w:bz2": ".bz2", "w:xz": ".xz", "w:": ""}[mode])
    with tarfile.open(src) as tin, tarfile.open(tarball, mode) as tout:
        for m in tin.getmembers():
            tout.addfile(m, tin.extractfile(m) if m.isfile() else None)
    (tmp_path / "x").mkdir()
    assert at_once == (capture_archive._decompressed(tarball) is not None) or mode == "w:"
    assert in_memory(tarball, "cap") == on_disk(tarball, tmp_path / "x", "cap")


def test_damaged_archive_same_message(tmp_path: Path) -> None:
    good = _tar(tmp_path / "cap.tar.gz", _base())
    bad = tmp_path / "bad.tar.gz"
    bad.write_bytes(good.read_bytes()[: len(good.read_bytes()) // 2])
    (tmp_path / "x").mkdir()
    assert in_memory(bad, "cap") == on_disk(bad, tmp_path / "x", "cap")
