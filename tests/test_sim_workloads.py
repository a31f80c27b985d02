"""Synthetic generator, manifest directories and workload spec strings."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from conftest import REPO, SHARED, shared_path
from numalign.errors import InputError
from numalign.pods import ContainerKind, QOSClass, effective_pod_requests, guaranteed_cpus
from numalign.sim.cluster import builtin_cluster, cluster_capacity
from numalign.sim.sources import parse_workload_spec
from numalign.sim.synthetic import SyntheticParams, generate
from numalign.sim.workloads import Arrival, Workload

# -- synthetic ------------------------------------------------------------------------------


def test_synthetic_same_seed_same_workload() -> None:
    cluster = builtin_cluster("small")
    a = generate(SyntheticParams(seed=7, count=300), cluster)
    b = generate(SyntheticParams(seed=7, count=300), cluster)
    c = generate(SyntheticParams(seed=8, count=300), cluster)
    assert a.arrivals == b.arrivals
    assert a.arrivals != c.arrivals
    assert len(a) == 300


def test_synthetic_default_count_is_deterministic_and_scaled() -> None:
    small = generate(SyntheticParams(), builtin_cluster("small"))
    again = generate(SyntheticParams(), builtin_cluster("small"))
    big = generate(SyntheticParams(), builtin_cluster("default"))
    assert small.arrivals == again.arrivals
    assert 200 <= len(small) < len(big) <= 4000


def test_synthetic_mix_has_every_kind() -> None:
    w = generate(SyntheticParams(seed=3, count=400), builtin_cluster("default"))
    kinds = Counter(a.pod.name.rsplit("-", 1)[0] for a in w)
    assert set(kinds) == {"guaranteed", "burstable", "besteffort", "gpu", "sidecar"}
    for a in w:
        pod = a.pod
        kind = pod.name.rsplit("-", 1)[0]
        if kind == "guaranteed":
            assert pod.qos is QOSClass.GUARANTEED
            assert guaranteed_cpus(pod, pod.containers[0]) >= 2
        elif kind == "gpu":
            req = pod.containers[0].requests
            assert pod.qos is QOSClass.GUARANTEED
            assert req["nvidia.com/gpu"] == req["rdma/hca"] >= 1
        elif kind == "sidecar":
            assert [c.kind for c in pod.containers] == [
                ContainerKind.INIT,
                ContainerKind.SIDECAR,
                ContainerKind.APP,
            ]
            assert pod.qos is QOSClass.GUARANTEED
        elif kind == "burstable":
            assert pod.qos is QOSClass.BURSTABLE
        else:
            assert pod.qos is QOSClass.BEST_EFFORT
    assert any("hugepages-1Gi" in a.pod.containers[0].requests for a in w)
    times = [a.time_s for a in w]
    assert times == sorted(times) and times[0] > 0
    assert all(a.duration_s is not None and a.duration_s >= 1 for a in w)


def test_synthetic_load_makes_contention() -> None:
    """Offered load (Little's law) on the bottleneck resource is about ``load`` x capacity."""
    cluster = builtin_cluster("default")
    w = generate(SyntheticParams(seed=1, load=1.3), cluster)
    cap = cluster_capacity(cluster)
    rate = float(w.params["arrival_rate"])  # type: ignore[arg-type]
    bottleneck = str(w.params["bottleneck"])
    mean = sum(effective_pod_requests(a.pod).get(bottleneck, 0) for a in w) / len(w)
    offered = rate * 600.0 * mean / cap[bottleneck]
    assert offered == pytest.approx(1.3)


def test_synthetic_without_gpus_skips_gpu_pods() -> None:
    cpu_only = [(n, m) for n, m in builtin_cluster("small") if not m.devices_of("nvidia.com/gpu")]
    w = generate(SyntheticParams(seed=2, count=200), cpu_only)
    assert not any("nvidia.com/gpu" in effective_pod_requests(a.pod) for a in w)
    with pytest.raises(InputError, match="no pod kind left"):
        generate(SyntheticParams(weights={"gpu": 1.0}, count=10), cpu_only)


# -- manifests ------------------------------------------------------------------------------

POD = """apiVersion: v1
kind: Pod
metadata:
  name: {name}
  annotations: {annotations}
spec:
  containers:
    - name: c
      resources:
        limits: {{cpu: "2", memory: 1Gi}}
"""


def test_manifest_dir_spacing_and_annotations(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(
        POD.format(name="p1", annotations="{}")
        + "---\n"
        + POD.format(
            name="p2",
            annotations='{"numalign.io/arrival-seconds": "100", "numalign.io/duration-seconds": "30"}',
        )
    )
    (tmp_path / "b.yml").write_text(POD.format(name="p3", annotations="{}"))
    (tmp_path / "notes.txt").write_text("ignored")
    w = parse_workload_spec(f"dir:{tmp_path}?interval=10")
    assert [(a.pod.name, a.time_s, a.duration_s) for a in w] == [
        ("p1", 0.0, None),
        ("p3", 10.0, None),
        ("p2", 100.0, 30.0),
    ]


def test_manifest_dir_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no manifest files"):
        parse_workload_spec(f"dir:{tmp_path}")
    (tmp_path / "a.yaml").write_text(
        POD.format(name="p1", annotations='{"numalign.io/arrival-seconds": "soon"}')
    )
    with pytest.raises(InputError) as e:
        parse_workload_spec(f"dir:{tmp_path}")
    assert "pod default/p1: metadata.annotations.numalign.io/arrival-seconds" in str(e.value)
    (tmp_path / "a.yaml").write_text(POD.format(name="p1", annotations="{}"))
    (tmp_path / "b.yaml").write_text(POD.format(name="p1", annotations="{}"))
    with pytest.raises(InputError, match="duplicate pod default/p1"):
        parse_workload_spec(f"dir:{tmp_path}")
    (tmp_path / "b.yaml").write_text("kind: Pod\nmetadata: {name: x}\nspec: {containers: []}\n")
    with pytest.raises(InputError, match=r"b\.yaml: spec\.containers"):
        parse_workload_spec(f"dir:{tmp_path}")


def test_manifest_dir_examples() -> None:
    w = parse_workload_spec(f"dir:{REPO / 'examples' / 'pods'}")
    assert len(w) >= 4
    assert [a.time_s for a in w] == [float(i) for i in range(len(w))]


# -- spec strings ---------------------------------------------------------------------------


def test_spec_synthetic_options() -> None:
    w = parse_workload_spec("synthetic:count=50,seed=4,gpu=0", cluster=builtin_cluster("small"))
    assert isinstance(w, Workload) and len(w) == 50
    assert all(isinstance(a, Arrival) for a in w)
    assert not any("nvidia.com/gpu" in effective_pod_requests(a.pod) for a in w)
    same = parse_workload_spec("synthetic?count=50&seed=4&gpu=0", cluster=builtin_cluster("small"))
    assert same.arrivals == w.arrivals


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("", "workload: empty workload spec"),
        ("trace:foo", "workload 'trace:foo': unknown source 'trace'"),
        ("synthetic:count=x", "workload synthetic: count: expected a whole number, got 'x'"),
        ("synthetic:count=0", "workload synthetic: count: must be at least 1"),
        ("synthetic:colour=red", "workload synthetic: colour: unknown option 'colour'"),
        ("synthetic:seed", "workload synthetic: expected key=value, got 'seed'"),
        ("synthetic:seed=1,seed=2", "workload synthetic: option 'seed' given twice"),
        ("synthetic:load=-1", "workload synthetic: load: must be a finite number > 0"),
        ("synthetic:hugepages=2", "workload synthetic: hugepages: must be a probability 0-1"),
        ("synthetic:gpu=nan", "workload synthetic: gpu: must be a finite number"),
        ("syntheticfoo", "workload 'syntheticfoo': unknown source"),
        ("alibaba2025?limit=0", "workload alibaba2025: limit: must be at least 1"),
        ("alibaba2025?rows=5", "workload alibaba2025: rows: unknown option 'rows'"),
        (
            "alibaba2023?gpu_share=half",
            "workload alibaba2023: gpu_share: expected one of whole, drop",
        ),
        ("dir:", "workload dir: missing directory (dir:PATH)"),
        ("dir", "workload dir: missing directory (dir:PATH)"),
    ],
)
def test_spec_errors(spec: str, expected: str) -> None:
    with pytest.raises(InputError) as e:
        parse_workload_spec(spec, "/nonexistent-shared", cluster=builtin_cluster("small"))
    msg = str(e.value)
    assert msg.startswith(expected), msg
    assert "\n" not in msg


def test_spec_trace_paths(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="workload alibaba2025: no trace path given"):
        parse_workload_spec("alibaba2025")
    with pytest.raises(InputError, match="cannot read"):
        parse_workload_spec("alibaba2025", tmp_path)
    with pytest.raises(InputError, match="variant 'default' needs the shared directory"):
        parse_workload_spec("alibaba2023:default")
    csv = tmp_path / "pods.csv"
    csv.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1000,10,0,0\np1,1000,10,0,0\n")
    w = parse_workload_spec(f"alibaba2023:{csv}?interval=3")
    assert [a.time_s for a in w] == [0.0, 3.0]


def test_spec_real_traces() -> None:
    shared_path("traces")
    w = parse_workload_spec("alibaba2025?limit=300", SHARED)
    assert len(w) == 300 and w.params["rdma_units"] == 4
    w = parse_workload_spec("alibaba2025?limit=300&rdma_units=2", SHARED)
    assert w.params["rdma_units"] == 2
    w = parse_workload_spec("alibaba2023:multigpu50?limit=200&gpu_share=drop", SHARED)
    assert len(w) == 200 and w.params["gpu_share"] == "drop"
    assert str(w.params["path"]).endswith("openb_pod_list_multigpu50.csv")
    w = parse_workload_spec("alibaba2023?limit=100", SHARED)
    assert str(w.params["path"]).endswith("openb_pod_list_default.csv")
