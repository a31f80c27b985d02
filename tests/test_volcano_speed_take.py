"""take_packed's free-CPU counts without a Counter per call: the accumulator's per-level
counts and members equal the direct count over the CPU details (the kubelet's maps), on random
machines and free sets, so every sort order - and so every allocation - is unchanged."""

from __future__ import annotations

from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from numalign.machine.model import Machine
from numalign.resources.cpu_assignment import (
    CORE,
    NUMA,
    SOCKET,
    UNCORE,
    CpuSorting,
    CpuTopology,
    _Accumulator,
)
from test_cpu_properties import machines

LEVELS = (CORE, SOCKET, NUMA, UNCORE)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(machines(), st.data())
def test_counts_and_members_equal_the_direct_count(m: Machine, data: st.DataObject) -> None:
    topo = CpuTopology.from_machine(m)
    free = data.draw(st.sets(st.sampled_from(sorted(topo.all_cpus))))
    acc = _Accumulator(topo, free, 1, CpuSorting.PACKED)
    for level in LEVELS:
        want = Counter(getattr(topo.details[c], level) for c in free)
        assert acc._count(level) == dict(want)
        for within in LEVELS:
            for outer in {getattr(i, within) for i in topo.details.values()}:
                direct = {getattr(topo.details[c], level) for c in free
                          if getattr(topo.details[c], within) == outer}
                assert acc._members(level, within, outer) == direct
