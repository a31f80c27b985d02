"""The simulator's verdicts on a real trace speak the kubelet's reasons.

On the head of the Alibaba 2025 trace, on the built-in 1,000-node template of that trace:

* the numalign profile runs the node's own admission as its filter, so no pod it binds is
  rejected: 0 ``TopologyAffinityError`` and no rejection of any other reason;
* the topology-blind default profile binds pods that the node then refuses, and the
  simulator's breakdown names each refusal as the kubelet names it (``TopologyAffinityError``
  from the Topology Manager, ``UnexpectedAdmissionError`` when a provider's ``Allocate`` fails
  after the merge admitted, ``OutOf<resource>`` from the predicate handler,
  ``SMTAlignmentError`` from the CPU manager's option checks).
"""

from __future__ import annotations

from conftest import shared_path
from numalign.sim import trace_alibaba2025 as t25
from numalign.sim.cluster import resolve_cluster
from numalign.sim.runner import simulate
from numalign.sim.sources import parse_workload_spec

KUBELET_REASONS = {"TopologyAffinityError", "UnexpectedAdmissionError", "SMTAlignmentError"}


def test_numalign_never_rejected_and_default_rejections_named_as_the_kubelet_names_them() -> None:
    trace = shared_path("traces", t25.TRACE_DIR, t25.FILE_NAME)
    nodes = resolve_cluster("builtin:alibaba2025")
    wl = parse_workload_spec("alibaba2025?limit=2500", trace.parents[2], cluster=nodes)
    result = simulate(nodes, wl, ["numalign", "default"])
    summary = result.recorder.summary()["profiles"]
    ours, blind = summary["numalign"], summary["default"]
    assert ours["scheduled"] > 0
    assert ours["topology_affinity_errors"] == 0
    assert ours["rejections"] == {}
    assert blind["topology_affinity_errors"] > 0
    assert blind["rejections"]["TopologyAffinityError"] == blind["topology_affinity_errors"]
    for reason in blind["rejections"]:
        assert reason in KUBELET_REASONS or reason.startswith("OutOf"), reason
