"""The cluster's cached answers: request vectors per pod shape and ``any_fits`` per vector,
against the computations they stand for, through binds and unbinds."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from numalign.scheduler import Cluster, Scheduler, get_profile
from numalign.scheduler import cluster as cluster_module
from numalign.sim.cluster import builtin_cluster
from numalign.sim.sources import parse_workload_spec

NODES = builtin_cluster("small")
PODS = list(parse_workload_spec("synthetic:count=60,seed=3", None, cluster=NODES).pods)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(0, len(PODS) - 1), st.booleans()), min_size=1, max_size=40),
       st.sampled_from([cluster_module.CHANGE_LOG_KEPT, 3]))
def test_any_fits_and_vectors_match_the_full_computation(steps: list[tuple[int, bool]], log: int) -> None:
    kept = cluster_module.CHANGE_LOG_KEPT
    cluster_module.CHANGE_LOG_KEPT = log  # 3: the change log starts over often
    try:
        _replay(steps)
    finally:
        cluster_module.CHANGE_LOG_KEPT = kept


def _replay(steps: list[tuple[int, bool]]) -> None:
    cluster = Cluster(NODES)
    sched = Scheduler(cluster, get_profile("numalign"))
    # besides the pods' vectors, shares of a node's allocatable: some fit only on a node
    # that is (nearly) empty, so answers flip from none to some as pods leave
    shares = [np.asarray(cluster.allocatable[i] * f // 10, dtype=np.int64)
              for i in range(len(cluster.nodes)) for f in (3, 6, 9)]
    placed: list[tuple[int, int]] = []  # (pod index, node)
    for k, unbind in steps:
        if unbind and placed:
            j, node = placed.pop(0)
            sched.release(PODS[j], node)
        elif all(j != k for j, _ in placed):
            out = sched.schedule(PODS[k])
            if out.admitted and out.placement is not None:
                placed.append((k, out.placement.node))
        vectors = list(shares)
        for pod in PODS[:20]:
            vec = cluster.request_vector(pod)
            fresh = cluster._request_vector(pod)
            assert (vec is None) == (fresh is None)
            if vec is not None and fresh is not None:
                assert np.array_equal(vec, fresh) and not vec.flags.writeable
                vectors.append(vec)
        for vec in vectors:
            assert cluster.any_fits(vec) == bool(cluster.fits(vec).any())
        assert np.array_equal(cluster._free_by_col, cluster.free.T)
