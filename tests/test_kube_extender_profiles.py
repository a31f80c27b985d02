"""The extender decides and scores with its scheduler profile's strategies (no hard-coded score)."""

from __future__ import annotations

import io
from dataclasses import dataclass, replace

import pytest

from numalign.kube.extender import MAX_EXTENDER_PRIORITY, ExtenderCore
from numalign.kube.topology import build_nrt
from numalign.scheduler import Profile, get_profile
from numalign.scheduler.scorers import (
    AbsoluteNumaScore,
    VolcanoNumaAware,
    least_numa_nodes,
    volcano_numa_aware,
)
from test_kube_extender import WORKLOAD, engine_pod, reference_nodes


def _core(profile: Profile) -> tuple[ExtenderCore, list[str]]:
    ref = reference_nodes()
    core = ExtenderCore(profile, log=io.StringIO())
    core.set_nodes({name: build_nrt(node, name=name) for name, node in ref.items()})
    return core, sorted(ref)


def _passing_counts(profile: Profile, pod_doc: dict[str, object]) -> dict[str, int]:
    assert profile.filter is not None
    pod = engine_pod(pod_doc)  # type: ignore[arg-type]
    out = {}
    for name, node in reference_nodes().items():
        r = profile.filter(node, pod)
        if r.passed:
            out[name] = r.numa_count
    return out


@pytest.mark.parametrize("doc", WORKLOAD, ids=[d["metadata"]["name"] for d in WORKLOAD])
def test_relative_numa_score_is_taken_over_the_passing_nodes(doc: dict[str, object]) -> None:
    """Volcano's numa-aware score, relative to the most NUMA nodes among the passing nodes."""
    profile = replace(get_profile("numalign"), name="exact-volcano-score", numa_score=VolcanoNumaAware())
    core, names = _core(profile)
    counts = _passing_counts(profile, doc)
    passing = [n for n in names if n in counts]
    want = dict.fromkeys(names, 0)
    for n, s in zip(passing, volcano_numa_aware([counts[n] for n in passing]), strict=True):
        want[n] = s * MAX_EXTENDER_PRIORITY // 100
    got = dict(core.prioritize(engine_pod(doc), [*names, "unknown"]))  # type: ignore[arg-type]
    assert got == {**want, "unknown": 0}


def test_volcano_and_least_numa_nodes_rank_differently() -> None:
    """The same pod, two profiles: the extender's scores follow the profile's NUMA score."""
    two = next(d for d in WORKLOAD if d["metadata"]["name"] == "two")
    pod = engine_pod(two)
    least, names = _core(get_profile("numalign"))
    volcano, _ = _core(replace(get_profile("numalign"), numa_score=VolcanoNumaAware()))
    counts = _passing_counts(get_profile("numalign"), two)
    assert set(counts.values()) == {1, 2}
    max_numa = least.max_numa
    assert dict(least.prioritize(pod, names)) == {
        n: least_numa_nodes(counts[n], max_numa) * 10 // 100 for n in names
    }
    assert dict(volcano.prioritize(pod, names)) == {n: 5 if counts[n] == 1 else 0 for n in names}


@dataclass(frozen=True)
class Flat(AbsoluteNumaScore):
    value: int

    def score(self, count: int, max_numa: int) -> int:
        return self.value


@pytest.mark.parametrize(("value", "scaled"), [(0, 0), (73, 7), (100, 10), (250, 10), (-5, 0)])
def test_custom_numa_score_is_scaled_and_clamped(value: int, scaled: int) -> None:
    core, names = _core(replace(get_profile("numalign"), numa_score=Flat(value)))
    g4 = next(d for d in WORKLOAD if d["metadata"]["name"] == "g4")
    counts = _passing_counts(get_profile("numalign"), g4)
    got = dict(core.prioritize(engine_pod(g4), names))
    assert got == {n: scaled if n in counts else 0 for n in names}


def test_profile_without_numa_score_gives_no_priority() -> None:
    core, names = _core(replace(get_profile("numalign"), numa_score=None))
    for doc in WORKLOAD:
        assert {s for _, s in core.prioritize(engine_pod(doc), names)} == {0}
