"""The ``volcano`` profile's decisions are pinned: on the bench's 500-node, 8-NUMA cell
(half ``single-numa-node``, half ``restricted`` with pod scope; 1,000 synthetic pods, seed 7)
every pod's (uid, node, admitted, reason, NUMA count) hashes to the value computed on the
code before the fit, node score and walk were vectorised together (whose walk
``tests/test_volcano_speed.py`` checks against the reference predicate). A speed-up that
moves one pod, or changes one reason or NUMA count, fails here."""

from __future__ import annotations

import hashlib

from benchmarks.scheduler_bench import template

from numalign.scheduler import Cluster, Scheduler, get_profile
from numalign.sim.cluster import load_cluster
from numalign.sim.sources import parse_workload_spec

#: sha256 (first 16 hex digits) of the bind sequence, and the outcome counts
PINNED = {"volcano": ("645a029d0be64851", (676, 324, 0))}


def bind_sequence_hash(profile: str) -> tuple[str, tuple[int, int, int]]:
    nodes = load_cluster(template(500, 8), "bench")
    pods = [a.pod for a in parse_workload_spec("synthetic:count=1000,seed=7", None, cluster=nodes)]
    sched = Scheduler(Cluster(nodes), get_profile(profile))
    h = hashlib.sha256()
    admitted = refused = pending = 0
    for pod in pods:
        out = sched.schedule(pod)
        at = out.placement
        node = None if at is None else at.node
        count = None if at is None else at.numa_count
        h.update(repr((pod.uid, node, out.admitted, out.reason, count)).encode())
        admitted += out.admitted
        refused += at is not None and not out.admitted
        pending += at is None
    return h.hexdigest()[:16], (admitted, refused, pending)


def test_volcano_bind_sequence_is_pinned() -> None:
    assert bind_sequence_hash("volcano") == PINNED["volcano"]
