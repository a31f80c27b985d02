"""The node side end to end: machines, pods, providers, scopes, all-or-nothing admission."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from numalign.cli import main
from numalign.engine.bitmask import ids_of
from numalign.machine.spec import load_machine, read_machine_file
from numalign.node.admission import Node
from numalign.pods import Container, ContainerKind, Pod, QOSClass, parse_pods

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
GI = 1 << 30


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_blog_example_two_containers(capsys: pytest.CaptureFixture[str]) -> None:
    """Blog: container0 gets CPUs {0,1} + gpu0 + nic0, container1 CPUs {4,5} + gpu1 + nic1."""
    code, out, _ = run_cli(capsys, "admit", "-m", str(EXAMPLES / "fig1.yaml"), str(EXAMPLES / "fig1-pods.yaml"))
    assert code == 0
    pod = json.loads(out)["pods"][0]
    assert pod["admitted"] and pod["reason"] is None
    c0, c1 = pod["containers"]
    assert (c0["affinity"], c0["cpus"], c0["devices"]) == (
        [0], "0-1", {"gpu-vendor.com/gpu": ["gpu0"], "nic-vendor.com/nic": ["nic0"]})
    assert (c1["affinity"], c1["cpus"], c1["devices"]) == (
        [1], "4-5", {"gpu-vendor.com/gpu": ["gpu1"], "nic-vendor.com/nic": ["nic1"]})
    assert c0["memory"] == {"0": {"memory": 200 * 1024 * 1024}}


def test_explain_lists_provider_hints(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "admit", "--explain", "-m", str(EXAMPLES / "fig1.yaml"), str(EXAMPLES / "fig1-pods.yaml"))
    assert code == 0
    c1 = json.loads(out)["pods"][0]["containers"][1]["explain"]
    assert c1["merged"] == {"affinity": [1], "preferred": True}
    # the blog shows only {10: True}; the kubelet's device manager also lists the wider mask
    assert c1["providers"]["devices"]["gpu-vendor.com/gpu"] == [
        {"affinity": [1], "preferred": True}, {"affinity": [0, 1], "preferred": False}]
    cpu = c1["providers"]["cpu"]["cpu"]
    assert {"affinity": [0], "preferred": True} in cpu and {"affinity": [0, 1], "preferred": False} in cpu


def test_state_dir_keeps_allocations_and_release_frees(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = tmp_path / "state"
    pods = tmp_path / "pods.yaml"
    one = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
           "spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": "2", "memory": "1Gi", "gpu-vendor.com/gpu": 1}}}]}}
    docs = [dict(one, metadata={"name": f"p{i}"}) for i in range(3)]
    pods.write_text("\n---\n".join(json.dumps(d) for d in docs))
    code, out, _ = run_cli(capsys, "admit", "-m", str(EXAMPLES / "fig1.yaml"), "--state-dir", str(state), str(pods))
    res = json.loads(out)["pods"]
    assert code == 1  # the third pod finds no GPU left
    assert [p["admitted"] for p in res] == [True, True, False]
    # the kubelet's Topology Manager answers before its predicates: both GPUs are taken, so
    # the device manager has no hint for the third pod and single-numa-node rejects it
    assert res[2]["reason"] == "TopologyAffinityError"
    assert {tuple(p["containers"][0]["affinity"]) for p in res[:2]} == {(0,), (1,)}
    before = (state / "state.json").read_bytes()
    # a rejected pod changes nothing on disk
    code, out, _ = run_cli(capsys, "admit", "--state-dir", str(state), str(pods))
    assert (state / "state.json").read_bytes() == before
    assert run_cli(capsys, "release", "--state-dir", str(state), "default/p0")[0] == 0
    code, out, _ = run_cli(capsys, "state", "--state-dir", str(state), "-o", "json")
    doc = json.loads(out)
    assert [p["name"] for p in doc["pods"]] == ["default/p1"]
    assert doc["numaNodes"]["0"]["available"]["gpu-vendor.com/gpu"] == 1


BAD_POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bad"},
           "spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": "2Gx"}}}]}}


@pytest.mark.parametrize(
    ("machine", "pod", "message"),
    [
        ("fig1.yaml", BAD_POD, 'spec.containers[0].resources.limits.cpu'),
        ("fig1.yaml", {"kind": "Deployment"}, "kind"),
        ("fig1.yaml", {"apiVersion": "v1", "kind": "Pod", "metadata": {}}, "metadata.name"),
        ({"name": "m", "numaNodes": [{"id": 0, "memory": "1Gi", "distances": {0: 10, 1: 20}}, {"id": 1, "memory": "1Gi", "distances": {1: 10}}], "cpus": []}, None, "numaNodes[1].distances: missing entry for node 0"),
        ({"name": "m", "shape": {"sockets": 1}, "kubelet": {"topologyManagerPolicy": "fastest"}}, None, 'kubelet.topologyManagerPolicy: unknown policy: "fastest"'),
        ({"name": "m", "shape": {"sockets": 1}, "kubelet": {"cpuManagerPolicy": "static"}}, None, "kubelet"),
    ],
)
def test_bad_input_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], machine: Any, pod: Any, message: str) -> None:
    if isinstance(machine, dict):
        mpath = tmp_path / "m.json"
        mpath.write_text(json.dumps(machine))
    else:
        mpath = EXAMPLES / machine
    ppath = tmp_path / "p.json"
    ppath.write_text(json.dumps(pod or {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"}, "spec": {"containers": [{"name": "c"}]}}))
    state = tmp_path / "state"
    code, out, err = run_cli(capsys, "admit", "-m", str(mpath), "--state-dir", str(state), str(ppath))
    assert code == 2, (out, err)
    assert err.count("\n") == 1 and message in err, err
    assert not (state / "state.json").exists()


def test_state_of_another_machine_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = tmp_path / "s"
    assert run_cli(capsys, "admit", "-m", str(EXAMPLES / "fig1.yaml"), "--state-dir", str(state), str(EXAMPLES / "fig1-pods.yaml"))[0] == 0
    before = (state / "state.json").read_bytes()
    code, _, err = run_cli(capsys, "admit", "-m", str(EXAMPLES / "dual-socket-ht.yaml"), "--state-dir", str(state), str(EXAMPLES / "fig1-pods.yaml"))
    assert code == 2 and "another machine" in err and err.count("\n") == 1
    assert (state / "state.json").read_bytes() == before


def test_cli_subprocess_has_no_traceback(tmp_path: Path) -> None:
    exe = Path(sys.executable).with_name("numalign")
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: Pod\nmetadata: {name: x}\nspec: {containers: [{name: c, resources: {limits: {memory: 2Gx}}}]}\n")
    proc = subprocess.run([str(exe), "admit", "-m", str(EXAMPLES / "fig1.yaml"), str(bad)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "2Gx" in proc.stderr


# ------------------------------------------------------------------ property tests

MACHINE = {
    "name": "prop",
    "shape": {"sockets": 2, "numaPerSocket": 2, "coresPerNuma": 3, "threadsPerCore": 2,
              "memoryPerNuma": "8Gi", "hugepages1GiPerNuma": "2Gi", "gpusPerNuma": 1},
    "devices": [{"resource": "example.com/nic", "id": "nicX", "numa": [0, 1]}],
    "kubelet": {"cpuManagerPolicy": "static", "reservedSystemCPUs": "0,12",
                "memoryManagerPolicy": "Static", "systemReserved": {"memory": "256Mi"},
                "reservedMemory": [{"numaNode": 0, "limits": {"memory": "356Mi"}}]},
}


def machine_with(policy: str, scope: str) -> Any:
    spec = json.loads(json.dumps(MACHINE))
    spec["kubelet"]["topologyManagerPolicy"] = policy
    spec["kubelet"]["topologyManagerScope"] = scope
    return load_machine(spec)


@st.composite
def pods(draw: st.DrawFn, i: int) -> Pod:
    guaranteed = draw(st.booleans())
    containers = []
    kinds = [ContainerKind.INIT] * draw(st.integers(0, 1)) + [ContainerKind.SIDECAR] * draw(st.integers(0, 1)) + [ContainerKind.APP] * draw(st.integers(1, 2))
    for k, kind in enumerate(kinds):
        cpu = draw(st.sampled_from([1000, 2000, 3000, 4000, 500]))
        mem = draw(st.sampled_from([GI // 4, GI, 3 * GI]))
        req: dict[str, int] = {"cpu": cpu, "memory": mem}
        if draw(st.integers(0, 3)) == 0:
            req["hugepages-1Gi"] = GI
        if draw(st.booleans()):
            req["nvidia.com/gpu"] = draw(st.integers(1, 2))
        if draw(st.integers(0, 4)) == 0:
            req["example.com/nic"] = 1
        lim = dict(req)
        if not guaranteed:
            lim["cpu"] = cpu * 2
        containers.append(Container(f"c{k}", kind, req, lim))
    qos = QOSClass.GUARANTEED if guaranteed else QOSClass.BURSTABLE
    return Pod("default", f"p{i}", f"uid-{i}", qos, tuple(containers))


def held(node: Node, pods: dict[str, Pod]) -> tuple[list[int], list[str]]:
    """Exclusive CPUs and devices held by containers that run at the same time.

    A regular init container has finished when the next containers start: the kubelet hands
    its CPUs and devices on to them (both records then name them), so init containers are
    left out; sidecars and app containers run together.
    """
    def running(uid: str, name: str) -> bool:
        kind = next(c.kind for c in pods[uid].containers if c.name == name)
        return kind is not ContainerKind.INIT

    cpus = [c for uid, cs in node.state.cpu.assignments.items() for n, s in cs.items() if running(uid, n) for c in s]
    devs = [f"{r}/{d}" for uid, cs in node.state.devices.allocated.items() for n, per in cs.items()
            if running(uid, n) for r, ids in per.items() for d in ids]
    return cpus, devs


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(["best-effort", "restricted", "single-numa-node", "none"]),
       st.sampled_from(["container", "pod"]), st.data())
def test_admission_invariants(policy: str, scope: str, data: st.DataObject) -> None:
    machine = machine_with(policy, scope)
    node = Node(machine)
    admitted: list[Pod] = []
    for i in range(data.draw(st.integers(1, 6))):
        pod = data.draw(pods(i))
        before = json.dumps(node.state.to_dict(), sort_keys=True)
        result = node.admit(pod)
        after = json.dumps(node.state.to_dict(), sort_keys=True)
        if not result.admitted:
            assert after == before, "a rejected pod changed the state"
            continue
        admitted.append(pod)
        cpus, devs = held(node, {p.uid: p for p in admitted})
        assert len(cpus) == len(set(cpus)), "an exclusive CPU is held twice"
        assert len(devs) == len(set(devs)), "a device is held twice"
        assert not set(cpus) & node.state.cpu.default_set
        if policy in ("restricted", "single-numa-node"):
            for c in result.containers:
                if c.affinity is None:
                    continue
                nodes = set(ids_of(c.affinity))
                assert {machine.cpu_by_id[x].numa for x in c.cpus} <= nodes
                for key in c.memory:
                    assert {int(x) for x in key.split(",")} <= nodes
                by_id = {d.id: d for d in machine.devices}
                for ids in c.devices.values():
                    assert all(set(by_id[d].numa) & nodes for d in ids)
                if policy == "single-numa-node":
                    assert len(nodes) == 1
    # release in random order restores the empty state exactly
    empty = json.dumps(Node(machine).state.to_dict(), sort_keys=True)
    for pod in data.draw(st.permutations(admitted)):
        assert node.release(pod.key)
    assert json.dumps(node.state.to_dict(), sort_keys=True) == empty


def test_release_then_readmit_gives_same_result() -> None:
    machine = read_machine_file(str(EXAMPLES / "fig1.yaml"))
    pod = parse_pods(json.loads(json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a"}, "spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": "2", "memory": "1Gi"}}}]}})))[0]
    node = Node(machine)
    first = node.admit(pod)
    node.release(pod.key)
    second = node.admit(pod)
    assert first.containers[0].cpus == second.containers[0].cpus


def test_admit_starts_from_the_kubelets_checkpoints(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A real node's cpu_manager_state: CPUs it assigned are not handed out again."""
    kdir = tmp_path / "kubelet"
    kdir.mkdir()
    (kdir / "cpu_manager_state").write_text(json.dumps(
        {"policyName": "static", "defaultCpuSet": "2-7", "entries": {"uid-x": {"c": "0-1"}}, "checksum": 1}))
    code, out, _ = run_cli(capsys, "admit", "-m", str(EXAMPLES / "fig1.yaml"), "--kubelet-state", str(kdir),
                           str(EXAMPLES / "fig1-pods.yaml"))
    assert code == 0
    c0, c1 = json.loads(out)["pods"][0]["containers"]
    assert (c0["cpus"], c1["cpus"]) == ("2-3", "4-5")
    (kdir / "cpu_manager_state").write_text(json.dumps(
        {"policyName": "static", "defaultCpuSet": "1-7", "entries": {"uid-x": {"c": "0-1"}}}))
    code, _, err = run_cli(capsys, "admit", "-m", str(EXAMPLES / "fig1.yaml"), "--kubelet-state", str(kdir),
                           str(EXAMPLES / "fig1-pods.yaml"))
    assert code == 2 and "overlaps with default cpuset" in err and err.count("\n") == 1
