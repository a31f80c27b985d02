"""A captured sysfs tarball held in memory: what :func:`numalign.machine.sysfs.extract_capture`
would have written to a temporary directory, without writing it.

Unpacking the 64-NUMA capture to disk, reading it back and removing it cost most of a
``numalign admit --sysfs-root CAPTURE``; the tree needs only the ~1,500 small members discovery
reads (a few hundred KiB). The rules are the ones of the disk path, so both give the same
machine: the same members are kept (the caps on size, member count and content, ``tarfile``'s
``data`` filter - no absolute names or links, nothing leaving the tree, no device files or
FIFOs - and the discovery whitelist), applied in archive order as extraction would (parent
directories created on the way, a later member replacing an earlier one, a file written through
an existing link); reads follow symbolic links inside the tree (at most :data:`MAX_LINK_HOPS`,
a loop or a link leaving the tree reads as missing).
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field

#: symbolic links followed while resolving one path (Linux's limit; more = a loop)
MAX_LINK_HOPS = 40


@dataclass(frozen=True)
class Link:
    """A symbolic link: its target as written in the archive."""

    target: str


@dataclass
class Dir:
    """A directory: its entries by name."""

    entries: dict[str, Node] = field(default_factory=dict)


Node = Dir | Link | bytes


def escapes(path: str) -> bool:
    """True when the relative ``path`` leaves the tree (after lexical normalisation)."""
    norm = posixpath.normpath(path)
    return norm == ".." or norm.startswith("../")


class CaptureTree:
    """An in-memory directory tree; paths are relative to its root, ``/``-separated."""

    def __init__(self) -> None:
        self.root = Dir()

    # ------------------------------------------------------------------ resolution

    def _resolve(
        self, base: tuple[str, ...], rest: str, seen: dict[tuple[str, ...], tuple[str, ...] | None]
    ) -> tuple[tuple[str, ...], bool, bool] | None:
        """``base`` (a real location) joined with ``rest``, links resolved the way
        ``os.path.realpath`` resolves them: ``(location, resolved, exists)``; ``resolved`` is
        False after a link loop (the rest is then joined unresolved), ``exists`` False when a
        component is missing or not a directory (the rest is joined lexically). ``None`` = the
        path leaves the tree (or a link is absolute)."""
        path = list(base)
        here: Node | None = self._at(path)  # the node at ``path`` (None once a part is missing)
        exists = True
        parts = [p for p in rest.split("/") if p not in ("", ".")]
        for i, part in enumerate(parts):
            if part == "..":
                if not path:
                    return None
                path.pop()
                here = self._at(path)
                continue
            node = here.entries.get(part) if isinstance(here, Dir) else None
            newpath = (*path, part)
            if node is None:
                exists = False
            if not isinstance(node, Link):
                path.append(part)
                here = node
                continue
            if newpath in seen:
                known = seen[newpath]
                if known is None:  # a loop: give up, the rest unresolved
                    return ((*newpath, *parts[i + 1:]), False, False)
                path = list(known)
                here = self._at(path)
                continue
            seen[newpath] = None
            if node.target.startswith("/"):
                return None
            found = self._resolve(tuple(path), node.target, seen)
            if found is None:
                return None
            location, resolved, there = found
            if not resolved:
                return ((*location, *parts[i + 1:]), False, False)
            seen[newpath] = location
            path = list(location)
            here = self._at(path)
            exists = exists and there
        return (tuple(path), True, exists)

    def _walk(self, path: str) -> tuple[Node | None, tuple[str, ...]] | None:
        """The node at ``path``, links followed (``None`` = missing, a loop or a dangling
        link), and its real location (parts below the root); ``None`` = it leaves the tree."""
        found = self._resolve((), path, {})
        if found is None:
            return None
        location, resolved, exists = found
        node = self._at(location) if resolved and exists else None
        return (None if isinstance(node, Link) else node, location)

    def _at(self, parts: tuple[str, ...] | list[str]) -> Node | None:
        """The node at real (link-free) location ``parts``."""
        node: Node | None = self.root
        for part in parts:
            if not isinstance(node, Dir):
                return None
            node = node.entries.get(part)
        return node

    def node(self, path: str) -> Node | None:
        """What ``path`` is, links followed; ``None`` when missing, outside or a loop."""
        found = self._walk(path)
        return None if found is None else found[0]

    def realpath(self, path: str) -> tuple[str, ...] | None:
        """The real location of ``path`` (parts below the root); ``None`` outside the tree."""
        found = self._walk(path)
        return None if found is None else found[1]

    def is_link(self, path: str) -> bool:
        """Whether ``path`` itself is a link (its directory's links followed), as ``lstat``."""
        head, name = posixpath.split(path)
        if name in ("", ".", ".."):
            return False
        found = self._resolve((), head, {})
        return (found is not None and found[1] and found[2]
                and isinstance(self._at((*found[0], name)), Link))

    def read(self, path: str) -> bytes | None:
        node = self.node(path)
        return node if isinstance(node, bytes) else None

    def listdir(self, path: str) -> list[str] | None:
        node = self.node(path)
        return sorted(node.entries) if isinstance(node, Dir) else None

    def is_dir(self, path: str) -> bool:
        return isinstance(self.node(path), Dir)

    # ------------------------------------------------------------------ building

    def _parent(self, path: str) -> tuple[Dir, str] | None:
        """The directory that will hold ``path`` (missing directories created, as
        ``os.makedirs`` would through existing links) and the entry name."""
        head, name = posixpath.split(path)
        if not name:
            return None
        node: Node | None = self.root
        real: list[str] = []
        if head:
            found = self._walk(head)
            if found is None:
                return None
            node, location = found
            if node is None:  # create the missing part, from the deepest existing directory
                real = list(location)
                node = self.root
                for part in real:
                    if not isinstance(node, Dir):
                        return None
                    nxt = node.entries.get(part)
                    if nxt is None:
                        nxt = node.entries[part] = Dir()
                    node = nxt
        return (node, name) if isinstance(node, Dir) else None

    def add_dir(self, path: str) -> None:
        if posixpath.normpath(path) == ".":
            return
        found = self._parent(path)
        if found is None:
            return
        parent, name = found
        existing = parent.entries.get(name)
        if existing is None:
            parent.entries[name] = Dir()
        # an existing directory (or a link to one) stays; a file or a dangling link: mkdir fails

    def add_link(self, path: str, target: str) -> None:
        found = self._parent(path)
        if found is None:
            return
        parent, name = found
        if isinstance(parent.entries.get(name), Dir):  # unlink of a directory fails
            return
        parent.entries[name] = Link(target)

    def add_file(self, path: str, data: bytes) -> None:
        found = self._parent(path)
        if found is None:
            return
        parent, name = found
        existing = parent.entries.get(name)
        if isinstance(existing, Link):  # open(..., "wb") writes through the link
            target = self._walk(path)
            if target is None or not target[1] or isinstance(target[0], Dir):
                return
            holder = self._at(target[1][:-1])
            if isinstance(holder, Dir):
                holder.entries[target[1][-1]] = data
            return
        if isinstance(existing, Dir):
            return
        parent.entries[name] = data
