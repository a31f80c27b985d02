"""A captured root (``sys/`` and optionally ``proc/`` below it) as a directory or a tarball.

A tarball (``.tar.bz2``/``.tar.gz``/``.tar.xz``/``.tar``) is read in memory by
:func:`read_capture_tree` with the rules of ``tarfile``'s ``data`` filter: no absolute paths, no
``..``, no links leaving the tree; :func:`extract_capture` unpacks the same members to a
directory. Bounded (``docs/limits.md``): a tarball is at most :data:`MAX_TARBALL_BYTES`,
:data:`MAX_TAR_MEMBERS` members and :data:`MAX_TAR_CONTENT_BYTES` of content, and members larger
than :data:`MAX_SYSFS_FILE_BYTES` are not unpacked.
"""

from __future__ import annotations

import bz2
import io
import lzma
import os
import posixpath
import re
import tarfile
import tempfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from numalign.errors import InputError
from numalign.machine.capture_tree import CaptureTree, escapes

#: the largest sysfs/proc file read (kernel attributes are at most a page, 4 KiB)
MAX_SYSFS_FILE_BYTES = 64 * 1024
#: the largest captured tarball opened, in bytes (compressed)
MAX_TARBALL_BYTES = 256 * 1024 * 1024
#: the most members scanned in a tarball
MAX_TAR_MEMBERS = 200_000
#: the most content (sum of member sizes) scanned in a tarball, in bytes
MAX_TAR_CONTENT_BYTES = 256 * 1024 * 1024
#: the largest uncompressed archive decompressed at once (larger ones are read streaming)
IN_MEMORY_TAR_BYTES = 32 * 1024 * 1024
TAR_SUFFIXES = (".tar.bz2", ".tbz2", ".tar.gz", ".tgz", ".tar.xz", ".txz", ".tar")


# --------------------------------------------------------------------------- list formats


def is_tarball(path: str | Path) -> bool:
    return str(path).endswith(TAR_SUFFIXES)


def find_root(directory: str | Path) -> Path:
    """The directory holding ``sys/devices/system/cpu``: ``directory`` itself, or its only
    subdirectory that does (captures often have one top-level folder).

    Raises :class:`InputError` when there is none: the directory is not a sysfs root.
    """
    d = Path(directory)
    if not d.is_dir():
        raise InputError("not a directory", str(directory))
    if (d / "sys" / "devices" / "system" / "cpu").is_dir():
        return d
    try:
        subdirs = sorted(p for p in d.iterdir() if p.is_dir())
    except OSError as e:
        raise InputError(e.strerror or str(e), str(directory)) from None
    hits = [p for p in subdirs if (p / "sys" / "devices" / "system" / "cpu").is_dir()]
    if len(hits) == 1:
        return hits[0]
    if len(hits) > 1:
        raise InputError(
            f"several captured roots below it ({', '.join(h.name for h in hits[:3])}...); name one",
            str(directory),
        )
    raise InputError("not a sysfs root: no sys/devices/system/cpu in it", str(directory))


_WANTED = re.compile(
    r"(?:^|/)(?:"
    r"sys/devices/system/(?:cpu|node)(?:/|$)"
    r"|sys/bus/pci/devices(?:/|$)"
    r"|sys/devices/pci[0-9a-f:]+(?:/|$)"
    r"|sys/?$|sys/devices/?$|sys/devices/system/?$|sys/bus/?$|sys/bus/pci/?$"
    r"|proc/?$|proc/meminfo$|proc/sys/kernel/hostname$|proc/sys/?$|proc/sys/kernel/?$"
    r")"
)
_UNWANTED = re.compile(r"/node\d+/memory\d+$|/(?:cpufreq|cpuidle|power|msi_irqs)(?:/|$)")


_LEAVES = frozenset(
    {
        "core_id", "physical_package_id", "die_id", "thread_siblings_list", "thread_siblings",
        "online", "possible", "level", "id", "shared_cpu_list", "shared_cpu_map", "cpulist",
        "cpumap", "meminfo", "distance", "nr_hugepages", "class", "vendor", "device",
        "numa_node", "local_cpus", "local_cpulist", "sriov_numvfs", "hostname",
    }
)  # fmt: skip


def _wanted(member: tarfile.TarInfo) -> bool:
    """Members discovery reads (the rest of a capture is skipped: it is large and unused)."""
    return _wanted_name(member.name, member.isfile())


def _wanted_name(name: str, is_file: bool) -> bool:
    if _WANTED.search(name) is None or _UNWANTED.search(name) is not None:
        return False
    return not is_file or name.rsplit("/", 1)[-1] in _LEAVES


def _check_size(tarball: str | Path) -> None:
    if os.stat(tarball).st_size > MAX_TARBALL_BYTES:
        raise InputError(
            f"capture larger than {MAX_TARBALL_BYTES // (1024 * 1024)} MiB: refused", str(tarball)
        )


def _check_caps(scanned: int, content: int, tarball: str | Path) -> None:
    if scanned > MAX_TAR_MEMBERS or content > MAX_TAR_CONTENT_BYTES:
        raise InputError(
            f"capture has more than {MAX_TAR_MEMBERS} members or "
            f"{MAX_TAR_CONTENT_BYTES // (1024 * 1024)} MiB of content: refused",
            str(tarball),
        )


def _cannot_read(e: BaseException, tarball: str | Path) -> InputError:
    first = str(e).splitlines()[0].rstrip(":") if str(e) else type(e).__name__
    return InputError(f"cannot read capture: {first[:200]}", str(tarball))


def _data_name(member: tarfile.TarInfo) -> str | None:
    """``tarfile``'s ``data`` filter, lexically (nothing is on disk yet when it runs): the
    member's name without leading slashes, or ``None`` when it is refused - a device file or
    FIFO, a name or a link leaving the tree, an absolute link."""
    if not (member.isreg() or member.islnk() or member.isdir() or member.issym()):
        return None
    name = member.name.lstrip("/")
    if escapes(name):
        return None
    if member.issym() or member.islnk():
        if member.linkname.startswith("/"):
            return None
        target = posixpath.join(posixpath.dirname(name), member.linkname) if member.issym() \
            else member.linkname
        if escapes(target):
            return None
    return name


def _decompressed(tarball: str | Path) -> bytes | None:
    """The whole uncompressed archive when it is small (at most :data:`IN_MEMORY_TAR_BYTES`):
    decompressing at once is twice as fast as ``tarfile``'s streaming reads. ``None`` = read
    it streaming (larger, several compressed streams, damaged: the streaming path says why)."""
    with open(tarball, "rb") as fh:
        raw = fh.read(MAX_TARBALL_BYTES + 1)
    decompressor: Any
    if raw.startswith(b"BZh"):
        decompressor = bz2.BZ2Decompressor()
    elif raw.startswith(b"\x1f\x8b"):
        decompressor = zlib.decompressobj(wbits=31)
    elif raw.startswith(b"\xfd7zXZ\x00"):
        decompressor = lzma.LZMADecompressor()
    else:
        return None
    try:
        data: bytes = decompressor.decompress(raw, IN_MEMORY_TAR_BYTES + 1)
    except (OSError, EOFError, ValueError, zlib.error, lzma.LZMAError):
        return None
    if len(data) > IN_MEMORY_TAR_BYTES or not decompressor.eof or decompressor.unused_data:
        return None
    return data


def _open_tar(tarball: str | Path) -> tarfile.TarFile:
    whole = _decompressed(tarball)
    if whole is None:
        return tarfile.open(tarball, "r:*")
    return tarfile.open(fileobj=io.BytesIO(whole), mode="r:")


def _members(tf: tarfile.TarFile, tarball: str | Path) -> Iterator[tarfile.TarInfo]:
    """The archive's members in order, under the member-count and content caps (raising past
    them); files larger than any sysfs file are left out."""
    scanned = content = 0
    while (member := tf.next()) is not None:
        scanned += 1
        content += max(member.size, 0)
        _check_caps(scanned, content, tarball)
        if member.isfile() and member.size > MAX_SYSFS_FILE_BYTES:
            continue
        yield member


def read_capture_tree(tarball: str | Path) -> CaptureTree:
    """A captured tree, in memory: the members :func:`extract_capture` would unpack, as it
    would unpack them (same caps, filter and order), without touching the disk."""
    tree = CaptureTree()
    try:
        _check_size(tarball)
        with _open_tar(tarball) as tf:
            for member in _members(tf, tarball):
                name = _data_name(member)
                if name is None or not _wanted_name(name, member.isfile()):
                    continue
                if member.isdir():
                    tree.add_dir(name)
                elif member.issym():
                    tree.add_link(name, member.linkname)
                elif member.islnk():
                    data = tree.read(posixpath.normpath(member.linkname))
                    if data is not None:
                        tree.add_file(name, data)
                else:
                    fh = tf.extractfile(member)
                    if fh is not None:
                        tree.add_file(name, fh.read())
    except (OSError, tarfile.TarError, EOFError) as e:
        raise _cannot_read(e, tarball) from None
    return tree


def extract_capture(tarball: str | Path, dest: str | Path) -> Path:
    """Safely unpack a captured tree into ``dest`` and return its root (the parent of ``sys/``).

    Members that would escape ``dest`` (absolute paths, ``..``, links pointing outside), device
    files and the like are skipped, and so is what discovery does not read (only the CPU,
    NUMA node and PCI parts of ``sys/`` and ``proc/meminfo`` are unpacked).
    """
    dest = Path(dest)
    try:
        _check_size(tarball)
        with _open_tar(tarball) as tf:
            safe: list[tarfile.TarInfo] = []
            for member in _members(tf, tarball):
                # the lexical checks first (cheap): most of a capture is not wanted, and the
                # data filter resolves every path on disk
                name = _data_name(member)
                if name is None or not _wanted_name(name, member.isfile()):
                    continue
                try:
                    checked = tarfile.data_filter(member, str(dest))
                except tarfile.FilterError:
                    continue
                if checked is not None and _wanted(checked):
                    safe.append(checked)
            tf.errorlevel = 0  # a member that cannot be written is skipped, not fatal
            # one pass in archive order (per-member extraction would rewind compressed streams)
            tf.extractall(dest, members=safe, filter="fully_trusted")
    except (OSError, tarfile.TarError, EOFError) as e:
        raise _cannot_read(e, tarball) from None
    return find_root(dest)


@contextmanager
def opened_capture(path: str | Path) -> Iterator[Path]:
    """Yield the sysfs root of a directory or tarball (extracted for the duration)."""
    if is_tarball(path) and Path(path).is_file():
        with tempfile.TemporaryDirectory(prefix="numalign-sysfs-") as tmp:
            yield extract_capture(path, tmp)
    else:
        yield find_root(path)
