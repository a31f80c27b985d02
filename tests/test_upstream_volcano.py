"""Volcano's own unit-test tables, transcribed (volcano-sh/volcano
``pkg/scheduler/plugins/numaaware/policy/policy_{best_effort,restricted,single_numa_node}_test.go``
and ``provider/cpumanager/cpu_mng_test.go``), run in the ``volcano`` engine mode."""

from __future__ import annotations

import pytest

from numalign.engine.bitmask import mask_of
from numalign.engine.hints import GeneratedHints, TopologyHint
from numalign.engine.policies import Policy, TopologyPolicy
from numalign.machine.model import Machine
from numalign.machine.spec import load_machine
from numalign.modes.registry import Mode, merge
from numalign.resources.cpu import CpuManager


def h(ids: tuple[int, ...], preferred: bool) -> TopologyHint:
    return TopologyHint(mask_of(ids), preferred)


# the providers of test-1 .. test-6 (cpu, gpu), as written in all three policy test files
CASES = {
    "test-1": ([h((0, 1), False), h((0,), True)], [h((0, 1), False), h((0,), True)]),
    "test-2": ([h((0, 1), False), h((1,), True)], [h((0, 1), False), h((1,), True)]),
    "test-3": ([h((0, 1), False), h((0,), True), h((1,), True)], [h((0, 1), False), h((0,), True), h((1,), True)]),
    "test-4": ([h((0, 1), False), h((0,), True)], [h((0, 1), False), h((1,), True)]),
    "test-5": ([h((0, 1), False), h((0,), True)], [h((0, 1), True)]),
    "test-6": ([h((0, 1), True)], [h((0, 1), True)]),
}
BEST_EFFORT = {"test-1": ((0,), True), "test-2": ((1,), True), "test-3": ((0,), True), "test-4": ((0,), False),
               "test-5": ((0,), True), "test-6": ((0, 1), True)}
SINGLE_NUMA_NODE = {"test-1": ((0,), True), "test-2": ((1,), True), "test-3": ((0,), True),
                    "test-4": ((0, 1), False), "test-5": ((0, 1), False)}


def _run(policy: Policy, name: str) -> TopologyHint:
    cpu, gpu = CASES[name]
    return merge(Mode.VOLCANO, TopologyPolicy(policy, (0, 1)), [{"cpu": cpu}, {"gpu": gpu}]).hint


@pytest.mark.parametrize("name", sorted(BEST_EFFORT))
def test_best_effort_predicate(name: str) -> None:
    ids, preferred = BEST_EFFORT[name]
    assert _run(Policy.BEST_EFFORT, name) == h(ids, preferred)


@pytest.mark.parametrize("name", sorted(BEST_EFFORT))
def test_restricted_predicate(name: str) -> None:
    ids, preferred = BEST_EFFORT[name]  # policy_restricted_test.go has the same table
    assert _run(Policy.RESTRICTED, name) == h(ids, preferred)


@pytest.mark.parametrize("name", sorted(SINGLE_NUMA_NODE))
def test_single_numa_node_predicate(name: str) -> None:
    """Volcano returns the all-nodes mask where the kubelet returns no affinity."""
    ids, preferred = SINGLE_NUMA_NODE[name]
    assert _run(Policy.SINGLE_NUMA_NODE, name) == h(ids, preferred)


def test_the_kubelet_mode_differs_where_the_merge_rules_do() -> None:
    cpu, gpu = CASES["test-5"]
    kubelet = merge(Mode.KUBELET, TopologyPolicy(Policy.BEST_EFFORT, (0, 1)), [{"cpu": cpu}, {"gpu": gpu}])
    # equal-affinity rule: {0} & {0,1} is not preferred, and the kubelet ranks non-preferred
    # masks by bestNonPreferredAffinityCount: the widest feasible hint
    assert kubelet.hint == h((0, 1), False)
    cpu, gpu = CASES["test-4"]
    snn = merge(Mode.KUBELET, TopologyPolicy(Policy.SINGLE_NUMA_NODE, (0, 1)), [{"cpu": cpu}, {"gpu": gpu}])
    assert snn.hint == TopologyHint(None, False)


# ------------------------------------------------------------------ cpu_mng_test.go


@pytest.fixture(scope="module")
def machine() -> Machine:
    """``numaInfo``: CPUs 0-3 on NUMA 0 / socket 0, 4-7 on NUMA 1 / socket 1, two threads a core."""
    return load_machine({
        "name": "volcano-cpu-mng-test",
        "numaNodes": [{"id": 0, "memory": "8Gi"}, {"id": 1, "memory": "8Gi"}],
        "cpus": [{"id": i, "core": i // 2, "socket": i // 4, "numa": i // 4} for i in range(8)],
        "kubelet": {"cpuManagerPolicy": "static"},
    })


HINTS = [
    ("test-1", 4, range(8), [h((0,), True), h((1,), True), h((0, 1), False)]),
    ("test-2", 4, range(1, 8), [h((1,), True), h((0, 1), False)]),
    ("test-3", 5, range(8), [h((0, 1), True)]),
    ("test-4", 8, range(8), [h((0, 1), True)]),
    ("test-5", 9, range(8), []),
    ("test-6", 4, (2, 3, 4, 5), [h((0, 1), False)]),
]


@pytest.mark.parametrize(("request_", "free", "want"), [c[1:] for c in HINTS], ids=[c[0] for c in HINTS])
def test_get_topology_hints(machine: Machine, request_: int, free: range, want: list[TopologyHint]) -> None:
    got = CpuManager(machine, reserved=[]).hint_set(set(free), (), request_)
    assert (got.materialize() if isinstance(got, GeneratedHints) else list(got)) == want


ALLOCATE = [
    ("test-1", 4, range(8), (0,), {0, 1, 2, 3}),
    ("test-2", 4, range(1, 8), (1,), {4, 5, 6, 7}),
    ("test-3", 5, range(8), (0, 1), {0, 1, 2, 3, 4}),
    ("test-4", 5, range(1, 8), (0, 1), {1, 4, 5, 6, 7}),
    ("test-5", 8, range(1, 8), (0, 1), set()),
]


@pytest.mark.parametrize(("request_", "free", "hint", "want"), [c[1:] for c in ALLOCATE],
                         ids=[c[0] for c in ALLOCATE])
def test_allocate(machine: Machine, request_: int, free: range, hint: tuple[int, ...], want: set[int]) -> None:
    from numalign.errors import NumalignError

    cpu = CpuManager(machine, reserved=[])
    cpu.state.default_set = set(free)
    try:
        got = set(cpu.allocate_cpus(request_, mask_of(hint)))
    except NumalignError:
        got = set()  # Volcano's provider answers an empty cpuset on failure
    assert got == want


# ------------------------------------------------------------- Volcano on the cluster side


def _snn_machine(policy: str = "single-numa-node") -> Machine:
    return load_machine({
        "name": "vc", "shape": {"sockets": 2, "coresPerNuma": 4},
        "kubelet": {"cpuManagerPolicy": "static", "topologyManagerPolicy": policy, "kubeReserved": {"cpu": "1"}},
    })


def _pod(name: str, cpus: int, annotations: dict[str, str] | None = None) -> object:
    from numalign.pods import Container, ContainerKind, Pod, QOSClass, default_uid

    req = {"cpu": cpus * 1000, "memory": 1 << 30}
    c = Container("main", ContainerKind.APP, requests=req, limits=dict(req))
    return Pod("t", name, default_uid("t", name), QOSClass.GUARANTEED, (c,), dict(annotations or {}))


@pytest.mark.parametrize(("task", "node", "passes"), [
    ("single-numa-node", "single-numa-node", True),
    ("single-numa-node", "restricted", False),
    ("single-numa-node", "best-effort", False),
    ("restricted", "restricted", True),
    ("best-effort", "single-numa-node", False),
    ("SingleNUMANode", "single-numa-node", False),  # Volcano compares the strings
])
def test_volcano_policy_match_filter(task: str, node: str, passes: bool) -> None:
    from numalign.modes.volcano.predicate import volcano_filter
    from numalign.node.admission import Node

    pod = _pod("p", 2, {"volcano.sh/numa-topology-policy": task})
    assert volcano_filter(Node(_snn_machine(node)), pod).passed is passes  # type: ignore[arg-type]


def test_volcano_weight_is_configurable() -> None:
    from numalign.errors import InputError
    from numalign.scheduler import get_profile

    assert get_profile("volcano").numa_weight == 10
    assert get_profile("volcano:weight=3").numa_weight == 3
    assert get_profile("volcano:weight=3").numa_score == get_profile("volcano").numa_score
    for bad in ("volcano:weight=x", "volcano:weight=-1", "volcano:speed=1", "default:weight=2"):
        with pytest.raises(InputError):
            get_profile(bad)


JOB = """
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: train, namespace: ml}
spec:
  schedulerName: volcano
  tasks:
  - name: worker
    replicas: 2
    topologyPolicy: single-numa-node
    template:
      metadata: {annotations: {numalign.io/duration-seconds: "30"}}
      spec:
        containers:
        - name: c
          resources:
            requests: {cpu: "4", memory: 4Gi}
            limits: {cpu: "4", memory: 4Gi}
  - name: ps
    template:
      spec:
        containers:
        - name: c
          resources: {requests: {cpu: "1"}}
---
apiVersion: v1
kind: Pod
metadata: {name: plain}
spec:
  containers: [{name: c, image: x}]
"""


def test_volcano_job_tasks_become_pods_with_their_policy(tmp_path: object) -> None:
    from pathlib import Path

    from numalign.pods.annotations import VOLCANO_ANNOTATION
    from numalign.sim.manifests import read_manifest_dir

    d = Path(str(tmp_path))
    (d / "job.yaml").write_text(JOB)
    wl = read_manifest_dir(d)
    pods = {a.pod.key: a for a in wl.arrivals}
    assert sorted(pods) == ["default/plain", "ml/train-ps-0", "ml/train-worker-0", "ml/train-worker-1"]
    w = pods["ml/train-worker-1"]
    assert w.pod.annotations[VOLCANO_ANNOTATION] == "single-numa-node" and w.duration_s == 30
    assert VOLCANO_ANNOTATION not in pods["ml/train-ps-0"].pod.annotations


def test_volcano_job_errors_name_the_field(tmp_path: object) -> None:
    from pathlib import Path

    from numalign.errors import InputError
    from numalign.sim.manifests import read_manifest_dir

    d = Path(str(tmp_path))
    (d / "job.yaml").write_text(JOB.replace("topologyPolicy: single-numa-node", "topologyPolicy: widest"))
    with pytest.raises(InputError, match=r"spec\.tasks\[0\]\.topologyPolicy"):
        read_manifest_dir(d)


def test_numatopo_export_import_round_trip() -> None:
    """Export a node with admitted pods as a Numatopology; reading it back gives the same
    machine and, through apply_observed, the same CPUs in use."""
    from numalign.machine.numatopo import numatopo_to_machine
    from numalign.node.admission import Node
    from numalign.node.numatopo import build_numatopo, numatopo_usage
    from numalign.node.usage import apply_observed, pods_usage

    m = load_machine({
        "name": "vc", "shape": {"sockets": 2, "coresPerNuma": 4, "threadsPerCore": 2},
        "kubelet": {"cpuManagerPolicy": "static", "topologyManagerPolicy": "single-numa-node",
                    "reservedSystemCPUs": "0", "kubeReserved": {"cpu": "1", "memory": "1Gi"}},
    })
    node = Node(m)
    for k, n in enumerate((2, 4, 3)):
        assert node.admit(_pod(f"p{k}", n)).admitted  # type: ignore[arg-type]
    obj = build_numatopo(node, "vc")
    spec = obj["spec"]
    assert obj["kind"] == "Numatopology" and spec["policies"]["TopologyManagerPolicy"] == "single-numa-node"
    assert spec["numares"]["cpu"]["capacity"] == 16 and spec["resReserved"]["memory"] == str(1 << 30)
    held = {c for pu in pods_usage(m, node.state) for cu in pu.containers for c in cu.cpus}
    assert len(held) == 9 and len(spec["podAllocations"]) == 3
    back = numatopo_to_machine(obj)
    assert [(c.id, c.numa, c.socket, c.core) for c in back.cpus] == [(c.id, c.numa, c.socket, c.core) for c in m.cpus]
    assert back.kubelet.system_reserved["memory"] == 1 << 30
    usage = numatopo_usage(obj, m)
    assert set().union(*usage.cpus.values()) == held
    fresh = Node(m)
    state = apply_observed(fresh, usage)
    again = {c for pu in pods_usage(m, state) for cu in pu.containers for c in cu.cpus}
    assert again == held
    # allocatable alone (an older exporter without podAllocations) says the same
    del spec["podAllocations"]
    assert set().union(*numatopo_usage(obj, m).cpus.values()) == held


def test_export_numatopo_cli(capsys: pytest.CaptureFixture[str]) -> None:
    """``numalign export -o numatopo`` prints the Numatopology; it reads back as the machine."""
    import yaml

    from conftest import shared_path
    from numalign.cli import main
    from numalign.machine.numatopo import numatopo_to_machine
    from numalign.machine.sysfs import load_sysfs

    tarball = shared_path("topologies", "hwloc", "linux", "48amd64-4pa2n6c-sparse.tar.bz2")
    assert main(["export", "--sysfs-root", str(tarball), "--node-name", "w1", "-o", "numatopo"]) == 0
    obj = yaml.safe_load(capsys.readouterr().out)
    assert obj["apiVersion"] == "nodeinfo.volcano.sh/v1alpha1" and obj["metadata"]["name"] == "w1"
    m = load_sysfs(tarball).machine
    back = numatopo_to_machine(obj)
    assert {c.id: c.numa for c in back.cpus} == {c.id: c.numa for c in m.cpus}
    assert obj["spec"]["numares"]["cpu"]["capacity"] == len(m.cpus)
