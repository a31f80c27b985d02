"""Known refusals left out of long node-by-node walks (:mod:`numalign.scheduler.known_refusals`):
the same choices, reasons and node states as a walk that asks every candidate's cached answer, on
a cluster that fills up (many walks where no node takes the pod) with releases between pods."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from numa2_template import numa2_template
from numalign.pods import Pod, parse_pods
from numalign.scheduler import Cluster, Scheduler, get_profile, known_refusals
from numalign.sim.cluster import load_cluster

NODES = load_cluster(numa2_template("restricted", 6, 6, "rst"), "known")


def _pod(step: int, cpu: int, gpus: int) -> Pod:
    limits = {"cpu": str(cpu), "memory": f"{cpu}Gi", **({"nvidia.com/gpu": str(gpus)} if gpus else {})}
    return parse_pods({"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": f"p{step}", "namespace": "ns", "uid": f"u{step}"},
                       "spec": {"containers": [{"name": "c", "resources": {"limits": limits}}]}})[0]


@pytest.mark.parametrize("profile", ["numalign", "nrt-snn-least-numa"])
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), look=st.sampled_from([0, 1, 3]))
def test_leaving_out_known_refusals_decides_like_asking_each(profile: str, seed: int, look: int) -> None:
    rng = random.Random(seed)
    steps = []
    for step in range(200):  # a pod, and which running pod to release first (None: none)
        steps.append((_pod(step, rng.choice([1, 2, 3, 4, 6, 7, 8]), rng.choice([0, 0, 0, 1, 2])),
                      rng.random() if rng.random() < 0.3 else None))
    outcomes = []
    for n in (look, 10**9):  # 10**9: every candidate asked one by one, as before
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(known_refusals, "LOOK", n)
            sched = Scheduler(Cluster(NODES), get_profile(profile), 4)
            if profile != "numalign":
                sched._groups = None  # the node-by-node walk of the grouped profiles
            running: list[tuple[int, Pod]] = []
            got = []
            for pod, release in steps:
                if release is not None and running:
                    node, old = running.pop(int(release * len(running)))
                    sched.release(old, node)
                out = sched.schedule(pod)
                got.append((out.placement, out.admitted, out.reason))
                if out.admitted and out.placement is not None:
                    running.append((out.placement.node, pod))
            outcomes.append((got, [cn.node.state.to_dict() for cn in sched.cluster.nodes]))
    assert outcomes[0] == outcomes[1]
    refused = sum(1 for p, _, _ in outcomes[0][0] if p is None)
    assert refused >= 10  # the cluster filled up: walks where no node takes the pod
