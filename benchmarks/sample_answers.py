"""The filter answers a pod's sample needs, beside the filter runs the scheduler's walk makes.

    python -m benchmarks.sample_answers [CELL ...] [--profiles P,P,...] [--pods N]

For the profiles whose filter is asked once per node key (``koordinator``, the ``nrt-snn``
variants: :mod:`numalign.scheduler.node_groups`), on :mod:`benchmarks.placement_digest`'s cells
(the same clusters and pods), per pod on average:

* ``groups``: the node-key groups among the pod's sampled nodes (the first ``nodes_to_score``
  nodes that fit, from the round-robin start);
* ``unanswered``: those groups with no answer kept yet for the pod's shape. kube-scheduler's
  ``findNodesThatPassFilters`` runs every filter plugin on each node it looks at and counts a
  node as feasible only once all passed, so a scheduler that decides as it does asks at least
  these (it also looks past the sample for every node its filter refuses);
* ``walk``: the filter runs numalign's walk made (``Outcome.checked``): it asks only the groups
  that can still win.

Each pod is then scheduled by numalign's walk, so both counts read the same cluster states. Not
part of ``make bench``: it measures no time.
"""

from __future__ import annotations

import numpy as np

from benchmarks.placement_digest import CELLS, cell_arguments
from benchmarks.scheduler_bench import template

PROFILES = ("nrt-snn", "nrt-snn-least-numa", "koordinator")


def sample_answers(cell: str, profile: str, pods: int) -> tuple[float, float, float]:
    """Per pod: (sampled groups, sampled groups without an answer for its shape, walk's filter
    runs) of ``profile`` on ``cell``."""
    from numalign.scheduler.cluster import Cluster
    from numalign.scheduler.profiles import get_profile
    from numalign.scheduler.scheduler import Scheduler
    from numalign.sim.cluster import load_cluster
    from numalign.sim.sources import parse_workload_spec

    nodes = load_cluster(template(5000, CELLS[cell]), "bench")
    workload = [a.pod for a in parse_workload_spec(f"synthetic:count={pods},seed=7", None, cluster=nodes)]
    sched = Scheduler(Cluster(nodes), get_profile(profile))
    groups = sched._groups
    if groups is None:
        raise SystemExit(f"profile {profile!r} has no node key: its filter is asked node by node")
    sampled = unanswered = runs = 0
    for pod in workload:
        vec = sched.cluster.request_vector(pod)
        if vec is not None:
            start, per_found = sched._next_start, sched._scan_per_found  # a look, not a step
            idx, _ = sched._sample(pod, vec)
            sched._next_start, sched._scan_per_found = start, per_found
            if idx.size:
                table = groups.table(pod.shape, tuple(c.name for c in pod.containers))
                numbers = {int(n) for n in np.unique(groups.refresh(idx))}
                sampled += len(numbers)
                unanswered += sum(n not in table.answers for n in numbers)
        runs += sched.schedule(pod).checked
    return sampled / pods, unanswered / pods, runs / pods


def main(argv: list[str] | None = None) -> None:
    args = cell_arguments("benchmarks.sample_answers", __doc__ or "", PROFILES, argv)
    print(f"{'profile':24s} {'cell':8s} per pod: groups unanswered   walk")
    for cell in args.cells:
        for profile in args.profiles.split(","):
            groups, unanswered, walk = sample_answers(cell, profile, args.pods)
            print(f"{profile:24s} {cell:8s}          {groups:6.1f} {unanswered:10.2f} {walk:6.2f}", flush=True)


if __name__ == "__main__":
    main()
