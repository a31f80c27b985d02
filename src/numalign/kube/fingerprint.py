"""The pod-set fingerprint NodeResourceTopology consumers compare: ``pfp0v001<16 hex digits>``.

This is the algorithm of the podfingerprint library (k8stopologyawareschedwg/podfingerprint,
version ``v001``) that the resource-topology-exporter publishes and scheduler-plugins'
overreserve cache checks, re-implemented here:

* each pod (namespace, name) hashes to ``XXH64(name, seed=XXH64(namespace, seed=0))``;
* the per-pod hashes are sorted as unsigned 64-bit integers (duplicates kept) and each is fed,
  8 bytes little-endian, to one XXH64 stream with seed 0;
* the result is ``pfp0`` + ``v001`` + the 8-byte digest in big-endian hex (16 digits).

XXH64 is implemented below from its public specification (no dependency), which is fast enough
for the few hundred pods of a node.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

PREFIX = "pfp0"
VERSION = "v001"
ATTRIBUTE = "nodeTopologyPodsFingerprint"
ATTRIBUTE_METHOD = "nodeTopologyPodsFingerprintMethod"
ANNOTATION = "topology.node.k8s.io/fingerprint"
#: the library's methods (which pods the set covers)
METHOD_ALL = "all"
METHOD_WITH_EXCLUSIVE_RESOURCES = "with-exclusive-resources"
METHOD_EXCLUDE_TERMINAL = "exclude-terminal"

_M = (1 << 64) - 1
_P1 = 0x9E3779B185EBCA87
_P2 = 0xC2B2AE3D27D4EB4F
_P3 = 0x165667B19E3779F9
_P4 = 0x85EBCA77C2B2AE63
_P5 = 0x27D4EB2F165667C5


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _M


def _round(acc: int, lane: int) -> int:
    acc = (acc + lane * _P2) & _M
    return (_rotl(acc, 31) * _P1) & _M


def _merge(acc: int, val: int) -> int:
    acc ^= _round(0, val)
    return (acc * _P1 + _P4) & _M


def xxh64(data: bytes, seed: int = 0) -> int:
    """XXH64 of ``data`` (the 64-bit xxHash), as an unsigned integer."""
    n = len(data)
    p = 0
    if n >= 32:
        v1 = (seed + _P1 + _P2) & _M
        v2 = (seed + _P2) & _M
        v3 = seed & _M
        v4 = (seed - _P1) & _M
        while p + 32 <= n:
            a, b, c, d = struct.unpack_from("<4Q", data, p)
            v1, v2, v3, v4 = _round(v1, a), _round(v2, b), _round(v3, c), _round(v4, d)
            p += 32
        h = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & _M
        for v in (v1, v2, v3, v4):
            h = _merge(h, v)
    else:
        h = (seed + _P5) & _M
    h = (h + n) & _M
    while p + 8 <= n:
        (k,) = struct.unpack_from("<Q", data, p)
        h ^= _round(0, k)
        h = (_rotl(h, 27) * _P1 + _P4) & _M
        p += 8
    if p + 4 <= n:
        (k4,) = struct.unpack_from("<I", data, p)
        h ^= (k4 * _P1) & _M
        h = (_rotl(h, 23) * _P2 + _P3) & _M
        p += 4
    while p < n:
        h ^= (data[p] * _P5) & _M
        h = (_rotl(h, 11) * _P1) & _M
        p += 1
    h ^= h >> 33
    h = (h * _P2) & _M
    h ^= h >> 29
    h = (h * _P3) & _M
    h ^= h >> 32
    return h


def pod_hash(namespace: str, name: str) -> int:
    """One pod's hash: its name hashed with its namespace's hash as the seed."""
    return xxh64(name.encode(), xxh64(namespace.encode()))


def pods_fingerprint(pods: Iterable[tuple[str, str]]) -> str:
    """The ``pfp0v001...`` fingerprint of a pod set given as (namespace, name) pairs.

    Order does not matter; a pair listed twice counts twice (as in the library).
    """
    hashes = sorted(pod_hash(ns, name) for ns, name in pods)
    digest = xxh64(b"".join(struct.pack("<Q", h) for h in hashes))
    return PREFIX + VERSION + f"{digest:016x}"


def split_key(key: str) -> tuple[str, str]:
    """``namespace/name`` -> (namespace, name); a key without ``/`` is in namespace ``""``."""
    ns, sep, name = key.partition("/")
    return (ns, name) if sep else ("", key)


def is_compatible(sign: str) -> bool:
    """Whether ``sign`` is a well-formed fingerprint of this version (comparable with ours)."""
    return len(sign) >= 16 and sign[:4] == PREFIX and sign[4:8] == VERSION
