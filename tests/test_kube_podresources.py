"""The exporter reading the kubelet's pod-resources gRPC API (an in-process server on a unix
socket in tmp_path): the same NRT as from the equivalent numalign state, devices included;
the podfingerprint compat vectors through ``numalign export``; checkpoints as the fallback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

pytest.importorskip("grpc")
pytest.importorskip("google.protobuf")

from conftest import REPO
from numalign.cli import main
from numalign.errors import InputError
from numalign.kube.exporter import Exporter, ExportSources
from numalign.kube.podresources.client import read_podresources
from numalign.kube.podresources.observe import machine_with_allocatable
from numalign.kube.topology import build_nrt
from numalign.machine.spec import read_machine_file
from numalign.node.admission import Node
from numalign.node.usage import numa_amounts, pods_usage
from numalign.pods import parse_pods, read_pod_files
from podresources_fake import (
    allocatable_from_node,
    list_from_node,
    pods_listing,
    serve,
)

EXAMPLES = REPO / "examples"
VECTORS = Path(__file__).parent / "data" / "podfingerprint"


def pod(name: str, cpu: str, memory: str, ns: str = "t", **extra: str) -> Any:
    limits = {"cpu": cpu, "memory": memory, **extra}
    return parse_pods({"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": name, "namespace": ns},
                       "spec": {"containers": [{"name": "c", "resources": {"limits": limits}}]}})[0]


def busy_node(spec: str) -> Node:
    node = Node(read_machine_file(str(EXAMPLES / spec)))
    for p in read_pod_files([str(EXAMPLES / "pods" / "gpu-training.yaml")])[:1]:
        assert node.admit(p).admitted
    for i, (cpu, mem, extra) in enumerate([
        ("4", "8Gi", {"nvidia.com/gpu": "1"}),
        ("2", "2Gi", {}),
        ("2", "1Gi", {"hugepages-1Gi": "2Gi"}),
        ("500m", "1Gi", {}),  # shared pool: no exclusive CPUs
    ]):
        res = node.admit(pod(f"p{i}", cpu, mem, **extra))
        assert res.admitted, res.message
    return node


def socket_path(tmp_path: Path) -> Path:
    return tmp_path / "kubelet.sock"


@pytest.mark.parametrize("spec", ["gpu-8x-rdma.yaml", "dual-socket-ht.yaml"])
def test_same_nrt_as_from_numalign_state(tmp_path: Path, spec: str) -> None:
    node = busy_node(spec) if spec == "gpu-8x-rdma.yaml" else Node(read_machine_file(str(EXAMPLES / spec)))
    if spec == "dual-socket-ht.yaml":
        for i in range(3):
            assert node.admit(pod(f"q{i}", "2", "1Gi", ns="other")).admitted
    expected = build_nrt(node, node_level=False)  # podresources reports holdings, not requests
    with serve(socket_path(tmp_path), lambda: list_from_node(node),
               lambda: allocatable_from_node(node)) as sock:
        got = Exporter(ExportSources(machine=str(EXAMPLES / spec), podresources_socket=sock)).collect()
    assert got == expected
    # the devices the pods hold are what the zones no longer have available
    if spec == "gpu-8x-rdma.yaml":
        taken = sum(int(r["allocatable"]) - int(r["available"])
                    for z in got["zones"] for r in z["resources"] if r["name"] == "nvidia.com/gpu")
        held = sum(len(c.devices.get("nvidia.com/gpu", ())) for u in pods_usage(node.machine, node.state)
                   for c in u.containers)
        assert taken == held > 0


def test_client_reads_snapshot(tmp_path: Path) -> None:
    node = busy_node("gpu-8x-rdma.yaml")
    with serve(socket_path(tmp_path), lambda: list_from_node(node),
               lambda: allocatable_from_node(node)) as sock:
        snap = read_podresources(sock, timeout=5)
    keys = sorted(p.key for p in snap.pods)
    assert keys == sorted(r.key for r in node.state.pods.values())
    assert snap.allocatable.cpus == frozenset(c.id for c in node.machine.cpus) - node.reserved_cpus
    gpus = [d for d in snap.allocatable.devices if d.resource == "nvidia.com/gpu"]
    assert len(gpus) == sum(1 for d in node.machine.devices if d.resource == "nvidia.com/gpu")
    held = [d for p in snap.pods for c in p.containers for d in c.devices]
    assert held and all(d.numa for d in held)


def test_device_ids_come_from_the_kubelet(tmp_path: Path) -> None:
    """Device plugins name devices their own way: the kubelet's ids and NUMA nodes win."""
    machine = read_machine_file(str(EXAMPLES / "gpu-8x-rdma.yaml"))
    node = busy_node("gpu-8x-rdma.yaml")
    alloc = allocatable_from_node(node)
    for d in alloc.devices:
        if d.resource_name == "nvidia.com/gpu":
            d.device_ids[0] = "GPU-" + d.device_ids[0]
    listed = list_from_node(node)
    for p in listed.pod_resources:
        for c in p.containers:
            for d in c.devices:
                if d.resource_name == "nvidia.com/gpu":
                    d.device_ids[0] = "GPU-" + d.device_ids[0]
    with serve(socket_path(tmp_path), lambda: listed, lambda: alloc) as sock:
        got = Exporter(ExportSources(machine=str(EXAMPLES / "gpu-8x-rdma.yaml"),
                                     podresources_socket=sock)).collect()
        snap = read_podresources(sock)
    assert all(d.id.startswith("GPU-") for d in machine_with_allocatable(machine, snap.allocatable).devices
               if d.resource == "nvidia.com/gpu")
    assert got["zones"] == build_nrt(node)["zones"]


@pytest.mark.parametrize("vector", sorted(p.stem for p in VECTORS.glob("*.txt")))
def test_podfingerprint_compat_vectors_through_export(
    tmp_path: Path, vector: str, capsys: pytest.CaptureFixture[str]
) -> None:
    pods = [tuple(line.split()[:2]) for line in (VECTORS / f"{vector}.txt").read_text().splitlines()
            if line.strip() and not line.startswith("#")]
    sign = (VECTORS / f"{vector}.sign").read_text().strip()
    machine = read_machine_file(str(EXAMPLES / "fig1.yaml"))
    listed = pods_listing(pods)  # type: ignore[arg-type]
    alloc = allocatable_from_node(Node(machine))
    with serve(socket_path(tmp_path), lambda: listed, lambda: alloc) as sock:
        assert main(["export", "--machine", str(EXAMPLES / "fig1.yaml"),
                     "--podresources-socket", sock, "-o", "json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    attrs = {a["name"]: a["value"] for a in obj["attributes"]}
    assert attrs["nodeTopologyPodsFingerprint"] == sign
    assert attrs["nodeTopologyPodsFingerprintMethod"] == "all"
    assert obj["metadata"]["annotations"]["topology.node.k8s.io/fingerprint"] == sign


def test_checkpoints_are_the_fallback(tmp_path: Path) -> None:
    spec = str(EXAMPLES / "gpu-8x-rdma.yaml")
    node = busy_node("gpu-8x-rdma.yaml")
    kdir = tmp_path / "kubelet"
    kdir.mkdir()
    (kdir / "cpu_manager_state").write_text(json.dumps({**node.state.cpu.to_dict(), "checksum": 1}))
    (kdir / "memory_manager_state").write_text(json.dumps(node.state.memory.to_dict()))
    missing = str(tmp_path / "absent.sock")
    exporter = Exporter(ExportSources(machine=spec, podresources_socket=missing, kubelet_state=str(kdir)))
    obj = exporter.collect()
    assert exporter.fallback is not None and "absent.sock" in exporter.fallback
    cpu = {z["name"]: next(r for r in z["resources"] if r["name"] == "cpu") for z in obj["zones"]}
    want = {z["name"]: next(r for r in z["resources"] if r["name"] == "cpu")
            for z in build_nrt(node)["zones"]}
    assert cpu == want
    # without a fallback the failure is one line naming the socket
    with pytest.raises(InputError, match=r"absent\.sock"):
        Exporter(ExportSources(machine=spec, podresources_socket=missing)).collect()


def test_export_cli_reports_unreachable_socket(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["export", "--machine", str(EXAMPLES / "fig1.yaml"),
                 "--podresources-socket", str(tmp_path / "none.sock")])
    assert code != 0
    err = capsys.readouterr().err
    assert "none.sock" in err and "Traceback" not in err


def test_cpu_none_kubelet_lists_no_cpus(tmp_path: Path) -> None:
    """Under the CPU manager ``none`` the kubelet lists no allocatable CPUs; the exporter
    keeps the configured policy and every CPU stays available."""
    machine = read_machine_file(str(EXAMPLES / "fig1.yaml"))
    node = Node(machine)
    with serve(socket_path(tmp_path), lambda: list_from_node(node),
               lambda: allocatable_from_node(node)) as sock:
        got = Exporter(ExportSources(machine=str(EXAMPLES / "fig1.yaml"), podresources_socket=sock)).collect()
    assert got == build_nrt(node, node_level=False)
    assert numa_amounts(node)


def test_regenerated_messages_match_the_proto() -> None:
    pytest.importorskip("grpc_tools")
    from numalign.kube.podresources.regen import main as regen

    assert regen(["--check"]) == 0


def test_yaml_output_is_valid(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    node = busy_node("gpu-8x-rdma.yaml")
    with serve(socket_path(tmp_path), lambda: list_from_node(node),
               lambda: allocatable_from_node(node)) as sock:
        assert main(["export", "--machine", str(EXAMPLES / "gpu-8x-rdma.yaml"),
                     "--podresources-socket", sock]) == 0
    assert yaml.safe_load(capsys.readouterr().out)["kind"] == "NodeResourceTopology"
