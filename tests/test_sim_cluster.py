"""Cluster templates: expansion, kubelet overrides, built-ins and one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import REPO
from numalign.errors import InputError
from numalign.sim.cluster import (
    BUILTIN_CLUSTERS,
    builtin_cluster,
    builtin_template,
    cluster_capacity,
    load_cluster,
    read_cluster_file,
    resolve_cluster,
)

SHAPE = {"name": "box", "shape": {"sockets": 2, "coresPerNuma": 4}}


def test_inline_and_file_machines(tmp_path: Path) -> None:
    (tmp_path / "machines").mkdir()
    (tmp_path / "machines" / "gpu.yaml").write_text(
        (REPO / "examples" / "gpu-8x-rdma.yaml").read_text()
    )
    (tmp_path / "cluster.yaml").write_text(
        "nodes:\n"
        "  - {machine: machines/gpu.yaml, count: 3, namePrefix: gpu}\n"
        "  - machine: {name: box, shape: {sockets: 2, coresPerNuma: 4}}\n"
        "    count: 12\n"
        "    kubelet: {topologyManagerPolicy: restricted, topologyManagerScope: pod}\n"
    )
    nodes = read_cluster_file(tmp_path / "cluster.yaml")
    names = [n for n, _ in nodes]
    assert names[:3] == ["gpu-0", "gpu-1", "gpu-2"]
    assert names[3] == "box-00" and names[-1] == "box-11"
    gpu = nodes[0][1]
    assert gpu.name == "gpu-8x-rdma" and len(gpu.devices_of("nvidia.com/gpu")) == 8
    box = nodes[3][1]
    assert box.kubelet.topology_manager_policy == "restricted"
    assert box.kubelet.topology_manager_scope == "pod"
    assert len(box.numa_nodes) == 2 and len(box.cpus) == 8


def test_kubelet_override_merges_over_machine_file(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text(
        f"nodes:\n  - machine: {REPO / 'examples' / 'gpu-8x-rdma.yaml'}\n"
        "    kubelet: {topologyManagerPolicy: best-effort}\n"
    )
    [(name, m)] = read_cluster_file(tmp_path / "c.yaml")
    assert name == "gpu-8x-rdma-0"
    assert m.kubelet.topology_manager_policy == "best-effort"
    assert m.kubelet.topology_manager_scope == "pod"  # kept from the file
    assert m.kubelet.cpu_manager_policy == "static"


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        ([], "c.yaml: expected a mapping with a 'nodes' list"),
        ({}, "c.yaml: nodes: missing required field"),
        ({"nodes": []}, "c.yaml: nodes: must list at least one node entry"),
        ({"nodes": {"a": 1}}, "c.yaml: nodes: expected a list"),
        ({"nodes": [], "extra": 1}, "c.yaml: extra: unknown field"),
        ({"nodes": [5]}, "c.yaml: nodes[0]: expected a mapping"),
        ({"nodes": [{"count": 2}]}, "c.yaml: nodes[0].machine: missing required field"),
        ({"nodes": [{"machine": SHAPE, "count": 0}]}, "c.yaml: nodes[0].count: must be a positive"),
        (
            {"nodes": [{"machine": SHAPE, "count": "3"}]},
            "c.yaml: nodes[0].count: must be a positive",
        ),
        (
            {"nodes": [{"machine": SHAPE, "count": True}]},
            "c.yaml: nodes[0].count: must be a positive",
        ),
        ({"nodes": [{"machine": SHAPE, "cnt": 1}]}, "c.yaml: nodes[0].cnt: unknown field"),
        (
            {"nodes": [{"machine": SHAPE, "namePrefix": ""}]},
            "c.yaml: nodes[0].namePrefix: expected",
        ),
        (
            {"nodes": [{"machine": 7}]},
            "c.yaml: nodes[0].machine: expected a file path or a machine",
        ),
        (
            {"nodes": [{"machine": SHAPE, "kubelet": []}]},
            "c.yaml: nodes[0].kubelet: expected a mapping",
        ),
        (
            {"nodes": [{"machine": {"shape": {"sockets": 0}}}]},
            "c.yaml: nodes[0].machine: shape.sockets",
        ),
        (
            {"nodes": [{"machine": {"shape": {}, "cpus": []}}]},
            "c.yaml: nodes[0].machine: cpus: cannot be combined with shape",
        ),
        (
            {"nodes": [{"machine": SHAPE, "kubelet": {"reservedSystemCPUs": "x"}}]},
            "c.yaml: nodes[0].machine: kubelet.reservedSystemCPUs",
        ),
        (
            {"nodes": [{"machine": SHAPE, "count": 2}, {"machine": SHAPE, "count": 1}]},
            "c.yaml: nodes[1].namePrefix: node name 'box-0' also produced by nodes[0]",
        ),
    ],
)
def test_template_errors(doc: object, expected: str) -> None:
    with pytest.raises(InputError) as e:
        load_cluster(doc, "c.yaml")
    msg = str(e.value)
    assert msg.startswith(expected), msg
    assert "\n" not in msg


def test_file_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read cluster template"):
        read_cluster_file(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("nodes: [\n")
    with pytest.raises(InputError, match=r"bad\.yaml: invalid YAML: .* at line \d+, column \d+"):
        read_cluster_file(bad)
    bad.write_text("")
    with pytest.raises(InputError, match="empty cluster template"):
        read_cluster_file(bad)
    bad.write_text("nodes: [{machine: missing.yaml}]\n")
    with pytest.raises(InputError, match=r"missing\.yaml: cannot read machine spec"):
        read_cluster_file(bad)


def test_builtin_default_cluster() -> None:
    nodes = builtin_cluster("default")
    assert len(nodes) == 40
    assert len({n for n, _ in nodes}) == 40
    gpu = [m for _, m in nodes if m.devices_of("nvidia.com/gpu")]
    cpu = [m for _, m in nodes if not m.devices_of("nvidia.com/gpu")]
    assert len(gpu) == len(cpu) == 20
    assert all(len(m.numa_nodes) == 2 and len(m.devices_of("nvidia.com/gpu")) == 8 for m in gpu)
    assert all(len(m.devices_of("rdma/hca")) == 16 for m in gpu)  # 4 NICs x 4 VFs
    assert all(len(m.numa_nodes) == 4 for m in cpu)
    combos = {
        (m.kubelet.topology_manager_policy, m.kubelet.topology_manager_scope) for _, m in nodes
    }
    assert {p for p, _ in combos} == {"single-numa-node", "restricted"}
    assert {s for _, s in combos} == {"container", "pod"}
    assert all(m.kubelet.cpu_manager_policy == "static" for _, m in nodes)
    cap = cluster_capacity(nodes)
    assert cap["nvidia.com/gpu"] == 160 and cap["cpu"] == (20 * 128 + 20 * 192) * 1000


def test_builtins_and_resolve(tmp_path: Path) -> None:
    assert set(BUILTIN_CLUSTERS) >= {"default", "small", "alibaba2025"}
    assert len(builtin_cluster("alibaba2025")) == 1000
    assert len(resolve_cluster(None)) == 40
    assert len(resolve_cluster("builtin:small")) == 4
    assert len(resolve_cluster("small")) == 4
    with pytest.raises(InputError, match="cluster: unknown built-in cluster 'huge'"):
        resolve_cluster("builtin:huge")
    doc = builtin_template("small")
    doc["nodes"][0]["count"] = 1
    assert len(load_cluster(doc)) == 3
    assert len(builtin_cluster("small")) == 4  # templates are copies
