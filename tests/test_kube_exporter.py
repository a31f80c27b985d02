"""numalign export: NRT objects valid against the CRD schema, read back unchanged, sources
that fail never published, re-export on state-file change."""

from __future__ import annotations

import io
import json
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from conftest import REPO, shared_path
from numalign.cli import main
from numalign.kube.exporter import Exporter, ExportSources, run_loop
from numalign.kube.topology import build_nrt, engine_from_nrt, pods_fingerprint
from numalign.machine.model import Machine
from numalign.machine.nrt import nrt_to_machine
from numalign.machine.spec import read_machine_file
from numalign.machine.sysfs import load_sysfs
from numalign.node.admission import Node
from numalign.node.session import node_session
from numalign.node.usage import numa_amounts
from numalign.pods import parse_pods, read_pod_files

EXAMPLES = REPO / "examples"
CRD = REPO / "deploy" / "crd" / "noderesourcetopology-crd.yaml"


def crd_schema() -> dict[str, Any]:
    crd = yaml.safe_load(CRD.read_text())
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1alpha2")
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return schema


def validate(obj: dict[str, Any]) -> None:
    # through JSON, as the API server sees it
    jsonschema.validate(json.loads(json.dumps(obj)), crd_schema())


def pod(name: str, cpu: str, memory: str = "1Gi", **extra: str) -> Any:
    limits = {"cpu": cpu, "memory": memory, **extra}
    return parse_pods({"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": name, "namespace": "t"},
                       "spec": {"containers": [{"name": "c", "resources": {"limits": limits}}]}})[0]


def assert_same_machine(a: Machine, b: Machine) -> None:
    assert [n.id for n in a.numa_nodes] == [n.id for n in b.numa_nodes]
    assert [(n.memory, dict(n.hugepages), dict(n.distances)) for n in a.numa_nodes] == [
        (n.memory, dict(n.hugepages), dict(n.distances)) for n in b.numa_nodes]
    assert {i: len(c) for i, c in a.cpus_by_numa.items()} == {
        i: len(c) for i, c in b.cpus_by_numa.items()}
    assert a.cpus_by_numa == b.cpus_by_numa
    assert a.cpus_per_core == b.cpus_per_core

    def devs(m: Machine) -> Counter[tuple[str, int]]:
        return Counter((d.resource, d.numa[0]) for d in m.devices if d.numa and d.healthy)

    assert devs(a) == devs(b)
    assert a.kubelet.topology_manager_policy == b.kubelet.topology_manager_policy
    assert a.kubelet.topology_manager_scope == b.kubelet.topology_manager_scope


SPECS = ["gpu-8x-rdma.yaml", "dual-socket-ht.yaml", "fig1.yaml"]


@pytest.mark.parametrize("spec", SPECS)
def test_spec_machines_validate_and_round_trip(spec: str) -> None:
    m = read_machine_file(str(EXAMPLES / spec))
    node = Node(m)
    for i, (cpu, mem) in enumerate([("2", "2Gi"), ("4", "4Gi"), ("1", "512Mi")]):
        node.admit(pod(f"p{i}", cpu, mem))
    obj = build_nrt(node)
    validate(obj)
    back = nrt_to_machine(obj)
    assert_same_machine(m, back)
    # the extender's engine shows exactly the exported amounts
    engine = engine_from_nrt(obj)
    assert numa_amounts(engine) == numa_amounts(node)
    assert engine.reserved_cpus == node.reserved_cpus


@pytest.mark.parametrize("capture", ["48amd64-4pa2n6c-sparse", "256ia64-64n2s2c"])
def test_sysfs_captures_export_cli(capture: str, capsys: pytest.CaptureFixture[str]) -> None:
    tarball = shared_path("topologies", "hwloc", "linux", f"{capture}.tar.bz2")
    assert main(["export", "--sysfs-root", str(tarball), "--node-name", "w1"]) == 0
    obj = yaml.safe_load(capsys.readouterr().out)
    validate(obj)
    assert obj["metadata"]["name"] == "w1"
    assert_same_machine(load_sysfs(tarball).machine, nrt_to_machine(obj))


def test_attributes_from_kubelet_config_and_fingerprint(tmp_path: Path) -> None:
    cfg = tmp_path / "config.yaml"
    cfg.write_text(yaml.safe_dump({
        "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
        "topologyManagerPolicy": "restricted", "topologyManagerScope": "pod",
        "topologyManagerPolicyOptions": {"prefer-closest-numa-nodes": "true"},
        "cpuManagerPolicy": "static", "reservedSystemCPUs": "0-1",
        "cpuManagerPolicyOptions": {"full-pcpus-only": "true"},
        "memoryManagerPolicy": "None", "clusterDNS": ["10.0.0.10"],  # unknown: ignored
    }))
    obj = Exporter(ExportSources(machine=str(EXAMPLES / "dual-socket-ht.yaml"),
                                 kubelet_config=str(cfg), node_name="n1")).collect()
    validate(obj)
    attrs = {a["name"]: a["value"] for a in obj["attributes"]}
    assert attrs["topologyManagerPolicy"] == "restricted"
    assert attrs["topologyManagerScope"] == "pod"
    assert attrs["topologyManagerMaxNUMANodes"] == "8"
    assert attrs["topologyManagerOptionPreferClosestNumaNodes"] == "true"
    assert attrs["numalign.io/reservedSystemCPUs"] == "0-1"
    assert attrs["nodeTopologyPodsFingerprintMethod"] == "all"  # issue 12: upstream pfp0v001
    assert attrs["nodeTopologyPodsFingerprint"] == pods_fingerprint([])
    assert obj["metadata"]["annotations"]["topology.node.k8s.io/fingerprint"] == pods_fingerprint([])
    assert pods_fingerprint(["a/x", "b/y"]) == pods_fingerprint(["b/y", "a/x", "a/x"])
    assert pods_fingerprint(["a/x"]) != pods_fingerprint(["a/y"])


def test_state_dir_and_kubelet_checkpoints(tmp_path: Path) -> None:
    spec = str(EXAMPLES / "gpu-8x-rdma.yaml")
    machine = read_machine_file(spec)
    state_dir = tmp_path / "state"
    train = read_pod_files([str(EXAMPLES / "pods" / "gpu-training.yaml")])
    with node_session(state_dir, machine) as node:
        assert node.admit(train[0]).admitted
        expected = numa_amounts(node)
        state = node.state
    obj = Exporter(ExportSources(machine=spec, state_dir=str(state_dir))).collect()
    validate(obj)
    assert numa_amounts(engine_from_nrt(obj)) == expected
    attrs = {a["name"]: a["value"] for a in obj["attributes"]}
    assert attrs["nodeTopologyPodsFingerprint"] == pods_fingerprint(["ml/train-0"])
    # the same allocations as the kubelet's own checkpoints
    kdir = tmp_path / "kubelet"
    kdir.mkdir()
    (kdir / "cpu_manager_state").write_text(json.dumps({**state.cpu.to_dict(), "checksum": 1}))
    (kdir / "memory_manager_state").write_text(json.dumps(state.memory.to_dict()))
    obj2 = Exporter(ExportSources(machine=spec, kubelet_state=str(kdir))).collect()
    validate(obj2)
    z = {zone["name"]: {r["name"]: r for r in zone["resources"]} for zone in obj2["zones"]}
    z1 = {zone["name"]: {r["name"]: r for r in zone["resources"]} for zone in obj["zones"]}
    for zone in z:  # devices are not in the kubelet checkpoints; cpu and memory are
        for r in ("cpu", "memory", "hugepages-1Gi"):
            assert z[zone][r] == z1[zone][r]


def test_unreadable_source_keeps_last_good(tmp_path: Path) -> None:
    spec = str(EXAMPLES / "fig1.yaml")
    kdir = tmp_path / "kubelet"
    kdir.mkdir()
    m = read_machine_file(spec)
    (kdir / "cpu_manager_state").write_text(json.dumps(Node(m).state.cpu.to_dict()))
    exporter = Exporter(ExportSources(machine=spec, kubelet_state=str(kdir)))
    log = io.StringIO()
    good = exporter.refresh(log)
    assert good is not None
    (kdir / "cpu_manager_state").write_text('{"policyName": "static", "defaultCpuSet": "0-')
    assert exporter.refresh(log) is None
    assert exporter.last_good is good
    assert "cannot read a source" in log.getvalue()
    assert "keeping the last good object" in log.getvalue()
    # a single export with a broken source publishes nothing and fails
    published: list[Any] = []
    assert run_loop(Exporter(exporter.sources), published.append, interval=None, log=log) == 1
    assert published == []


def test_reexport_on_state_file_change(tmp_path: Path) -> None:
    spec = str(EXAMPLES / "fig1.yaml")
    m = read_machine_file(spec)
    kdir = tmp_path / "kubelet"
    kdir.mkdir()
    node = Node(m)
    (kdir / "cpu_manager_state").write_text(json.dumps(node.state.cpu.to_dict()))
    published: list[dict[str, Any]] = []
    stop = threading.Event()
    t = threading.Thread(target=run_loop, kwargs={
        "exporter": Exporter(ExportSources(machine=spec, kubelet_state=str(kdir))),
        "publish": published.append, "interval": 60.0, "poll": 0.02, "stop": stop,
        "log": io.StringIO()})
    t.start()
    try:
        deadline = time.monotonic() + 5
        while not published and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(published) == 1
        assert node.admit(pod("g", "2", "1Gi")).admitted
        time.sleep(0.02)  # a distinct mtime
        (kdir / "cpu_manager_state").write_text(json.dumps(node.state.cpu.to_dict()))
        while len(published) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(published) == 2
        cpu = [r for z in published[1]["zones"] for r in z["resources"] if r["name"] == "cpu"]
        cpu0 = [r for z in published[0]["zones"] for r in z["resources"] if r["name"] == "cpu"]
        assert sum(int(r["available"]) for r in cpu) == sum(int(r["available"]) for r in cpu0) - 2
    finally:
        stop.set()
        t.join(5)
    assert not t.is_alive()


def test_cli_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", "-m", str(EXAMPLES / "fig1.yaml"), "--kubelet-state",
                 str(tmp_path / "missing")]) == 1
    err = capsys.readouterr().err
    assert "cannot read a source" in err
    assert main(["export", "-m", str(EXAMPLES / "fig1.yaml"), "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["kind"] == "NodeResourceTopology"


def test_out_writes_one_file_per_node_that_the_extender_reads(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 23: `extender serve --nrt-dir` had no step that made its directory."""
    from numalign.kube.extender.sources import DirSource

    out = tmp_path / "nrt"  # created
    assert main(["export", "-m", str(EXAMPLES / "fig1.yaml"), "--node-name", "worker-1",
                 "--out", str(out)]) == 0
    assert main(["export", "-m", str(EXAMPLES / "gpu-8x-rdma.yaml"), "--out", str(out),
                 "-o", "json"]) == 0
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("numalign export: wrote ") == 2
    assert sorted(p.name for p in out.iterdir()) == ["gpu-8x-rdma.json", "worker-1.yaml"]
    assert yaml.safe_load((out / "worker-1.yaml").read_text())["metadata"]["name"] == "worker-1"
    objects = DirSource(out, log=io.StringIO()).scan()  # what extender serve --nrt-dir reads
    assert sorted(objects) == ["gpu-8x-rdma", "worker-1"]
    assert engine_from_nrt(objects["gpu-8x-rdma"]).machine.node_ids == (0, 1, 2, 3)
    # written again: replaced, not appended
    assert main(["export", "-m", str(EXAMPLES / "fig1.yaml"), "--node-name", "worker-1",
                 "--out", str(out)]) == 0
    assert len(list(out.iterdir())) == 2


@pytest.mark.parametrize(("argv", "message"), [
    (["--node-name", "../escape"], "metadata.name: '../escape' is not a Kubernetes object name"),
    (["--node-name", "Worker_1"], "metadata.name: 'Worker_1' is not a Kubernetes object name"),
    (["--apply"], "--out: give one of --apply and --out"),
])
def test_out_refuses_what_is_not_a_file_in_it(
        argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "nrt"
    code = main(["export", "-m", str(EXAMPLES / "fig1.yaml"), "--out", str(out), *argv])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and message in err, err
    assert not out.exists() or list(out.iterdir()) == []


def test_out_must_be_a_writable_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "file"
    f.write_text("")
    assert main(["export", "-m", str(EXAMPLES / "fig1.yaml"), "--out", str(f)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("numalign export: error: --out: cannot write there") and err.count("\n") == 1


def test_the_files_text_is_what_safe_dump_writes() -> None:
    """write_object uses libyaml's emitter where PyYAML has it: for every shipped machine's
    NRT the text is the pure-Python emitter's, byte for byte."""
    from numalign.kube.exporter import dump_yaml

    checked = 0
    for spec in sorted(EXAMPLES.glob("*.yaml")):
        try:
            machine = read_machine_file(str(spec))
        except Exception:  # pod files, clusters, sweeps: not machines
            continue
        obj = build_nrt(Node(machine), name=machine.name or "m")
        assert dump_yaml(obj) == yaml.safe_dump(obj, sort_keys=False), spec.name
        checked += 1
    assert checked >= 4  # dual-socket-ht, fig1, gb200, gpu-8x-rdma at least
