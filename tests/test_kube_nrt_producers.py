"""NRT objects in each producer's shape -> the extender's filter decides as the node would.

The renderers below publish a node (machine + kubelet configuration + allocations) the way
each producer does, as read from their sources:

* NFD topology-updater / RTE (``resourcemonitor``): ``cpu`` allocatable = the CPUs the kubelet's
  ``GetAllocatableResources`` lists (none under the CPU manager ``none``), capacity = the zone's
  CPUs; ``memory``/``hugepages-*`` only when the kubelet lists them (Static memory manager),
  memory capacity = MemTotal; devices with topology per NUMA node, devices without topology in
  no zone; NFD adds ``topologyPolicies`` and the attributes, RTE the attributes and the pod
  fingerprint;
* v1alpha1: ``topologyPolicies`` only (``SingleNUMANodePodLevel``...);
* scheduler-plugins' test fixtures: every resource with ``capacity == allocatable`` (no
  reservation shown) and ``available`` as given; checked against their filter's rule.

For each node and pod, the extender's filter (``ExtenderCore.filter`` over the NRT) must equal
the node engine's admission (``Node.plan``) of the same pod on the same node.
"""

from __future__ import annotations

import io
from typing import Any

import pytest

from conftest import REPO
from numalign.inputs.quantity import format_amount, hugepage_resource_name, is_hugepages_resource
from numalign.kube.extender import ExtenderCore
from numalign.kube.nrt_import import engine_from_nrt
from numalign.machine.model import Device, Machine
from numalign.machine.spec import read_machine_file
from numalign.node.admission import Node
from numalign.node.usage import numa_amounts
from numalign.pods import Pod, parse_pods

GI = 1 << 30
FIG1 = REPO / "examples" / "fig1.yaml"
LEGACY = {"none": "None", "best-effort": "BestEffort", "restricted": "Restricted",
          "single-numa-node": "SingleNUMANode"}


# ------------------------------------------------------------------------------ nodes


def fig1(*, cpu: str = "static", memory: str = "Static", policy: str = "single-numa-node",
         scope: str = "container", gpus_without_topology: bool = False) -> Machine:
    m = read_machine_file(str(FIG1))
    nodes = tuple(n.replace(hugepages={GI: 4 * GI}) for n in m.numa_nodes)
    kc = m.kubelet.replace(cpu_manager_policy=cpu, memory_manager_policy=memory,
                 topology_manager_policy=policy, topology_manager_scope=scope)
    if cpu != "static":
        kc = kc.replace(reserved_system_cpus=None)
    if memory != "Static":
        kc = kc.replace(reserved_memory=())
    devices = m.devices
    if gpus_without_topology:
        devices = tuple(d.replace(numa=()) if "gpu" in d.resource else d for d in devices)
    return m.replace(numa_nodes=nodes, kubelet=kc, devices=devices)


def pod(name: str, *containers: dict[str, str], guaranteed: bool = True) -> Pod:
    def res(limits: dict[str, str]) -> dict[str, Any]:
        if guaranteed:
            return {"limits": dict(limits), "requests": dict(limits)}
        return {"requests": {k: v for k, v in limits.items() if "/" not in k},
                "limits": {k: v for k, v in limits.items() if "/" in k}}

    return parse_pods({"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": name, "namespace": "t"},
                       "spec": {"containers": [{"name": f"c{i}", "resources": res(c)}
                                               for i, c in enumerate(containers)]}})[0]


def busy(machine: Machine) -> Node:
    """The node with a few pods already running."""
    node = Node(machine)
    for p in (pod("run-a", {"cpu": "2", "memory": "40Gi"}),
              pod("run-b", {"cpu": "1", "memory": "1Gi", "hugepages-1Gi": "3Gi",
                            "nic-vendor.com/nic": "1"}),
              pod("run-c", {"cpu": "500m", "memory": "1Gi"})):
        res = node.admit(p)
        assert res.admitted or machine.kubelet.topology_manager_policy != "none", res.message
    return node


PODS = [
    pod("cpu1", {"cpu": "1", "memory": "1Gi"}),
    pod("cpu2", {"cpu": "2", "memory": "1Gi"}),
    pod("cpu3", {"cpu": "3", "memory": "1Gi"}),
    pod("cpu4", {"cpu": "4", "memory": "1Gi"}),
    pod("cpu6", {"cpu": "6", "memory": "1Gi"}),
    pod("frac", {"cpu": "1500m", "memory": "1Gi"}),
    pod("mem30", {"cpu": "1", "memory": "30Gi"}),
    pod("mem63", {"cpu": "1", "memory": "63Gi"}),
    pod("huge2", {"cpu": "1", "memory": "1Gi", "hugepages-1Gi": "2Gi"}),
    pod("huge4", {"cpu": "1", "memory": "1Gi", "hugepages-1Gi": "4Gi"}),
    pod("huge5", {"cpu": "1", "memory": "1Gi", "hugepages-1Gi": "5Gi"}),
    pod("gpu1", {"cpu": "2", "memory": "2Gi", "gpu-vendor.com/gpu": "1"}),
    pod("gpu2", {"cpu": "2", "memory": "2Gi", "gpu-vendor.com/gpu": "2"}),
    pod("gpu-nic", {"cpu": "2", "memory": "2Gi", "gpu-vendor.com/gpu": "1", "nic-vendor.com/nic": "1"}),
    pod("two", {"cpu": "2", "memory": "1Gi"}, {"cpu": "2", "memory": "1Gi"}),
    pod("two-big", {"cpu": "3", "memory": "1Gi"}, {"cpu": "3", "memory": "1Gi"}),
    pod("burst", {"cpu": "3", "memory": "50Gi", "gpu-vendor.com/gpu": "1"}, guaranteed=False),
]

SCENARIOS = {
    "cpu-none": fig1(cpu="none", memory="None"),
    "cpu-none-pod": fig1(cpu="none", memory="None", scope="pod"),
    "static": fig1(memory="None"),
    "static-restricted-pod": fig1(memory="None", policy="restricted", scope="pod"),
    "static-memory": fig1(),
    "static-memory-pod": fig1(scope="pod"),
    "static-memory-restricted": fig1(policy="restricted"),
    "gpus-without-topology": fig1(gpus_without_topology=True),
    "gpus-without-topology-pod": fig1(gpus_without_topology=True, scope="pod", memory="None"),
}


# -------------------------------------------------------------------------- renderers


def _amount(name: str, value: int) -> str:
    return format_amount(name, value)


def _resources(node: Node) -> dict[int, list[dict[str, str]]]:
    """Zone resources as the podresources-based producers compute them."""
    m = node.machine
    kc = m.kubelet
    amounts = numa_amounts(node)
    out: dict[int, list[dict[str, str]]] = {}
    for n in m.numa_nodes:
        z = amounts[n.id]
        res = []
        if kc.cpu_manager_policy == "static":
            cap, alloc, avail = z.capacity["cpu"], z.allocatable["cpu"], z.available["cpu"]
        else:  # GetAllocatableResources lists no CPUs: everything looks reserved
            cap, alloc, avail = z.capacity["cpu"], 0, 0
        res.append({"name": "cpu", "capacity": str(cap), "allocatable": str(alloc), "available": str(avail)})
        if kc.memory_manager_policy == "Static":
            for r in sorted(z.capacity):
                if r == "memory" or is_hugepages_resource(r):
                    res.append({"name": r, "capacity": _amount(r, z.capacity[r]),
                                "allocatable": _amount(r, z.allocatable[r]),
                                "available": _amount(r, z.available[r])})
        for r in sorted(z.capacity):
            if "/" in r:
                res.append({"name": r, "capacity": str(z.allocatable[r]),
                            "allocatable": str(z.allocatable[r]), "available": str(z.available[r])})
        out[n.id] = res
    return out


def _zones(node: Node) -> list[dict[str, Any]]:
    m = node.machine
    return [{"name": f"node-{n.id}", "type": "Node",
             "costs": [{"name": f"node-{j}", "value": v} for j, v in sorted(n.distances.items())],
             "resources": res}
            for n, res in zip(m.numa_nodes, _resources(node).values(), strict=True)]


def _tm(node: Node) -> tuple[str, str]:
    kc = node.machine.kubelet
    return kc.topology_manager_policy, kc.topology_manager_scope


def _legacy(policy: str, scope: str) -> str:
    base = LEGACY[policy]
    return base if policy == "none" else base + ("PodLevel" if scope == "pod" else "ContainerLevel")


def render_nfd(node: Node, name: str) -> dict[str, Any]:
    policy, scope = _tm(node)
    return {"apiVersion": "topology.node.k8s.io/v1alpha2", "kind": "NodeResourceTopology",
            "metadata": {"name": name}, "topologyPolicies": [_legacy(policy, scope)],
            "attributes": [{"name": "topologyManagerPolicy", "value": policy},
                           {"name": "topologyManagerScope", "value": scope}],
            "zones": _zones(node)}


def render_rte(node: Node, name: str) -> dict[str, Any]:
    policy, scope = _tm(node)
    return {"apiVersion": "topology.node.k8s.io/v1alpha2", "kind": "NodeResourceTopology",
            "metadata": {"name": name, "annotations": {"topology.node.k8s.io/fingerprint": "pfp0v001abcd"}},
            "topologyPolicies": [],
            "attributes": [{"name": "topologyManagerPolicy", "value": policy},
                           {"name": "topologyManagerScope", "value": scope},
                           {"name": "topologyManagerMaxNUMANodes", "value": "8"},
                           {"name": "nodeTopologyPodsFingerprint", "value": "pfp0v001abcd"},
                           {"name": "nodeTopologyPodsFingerprintMethod", "value": "with-exclusive-resources"}],
            "zones": _zones(node)}


def render_v1alpha1(node: Node, name: str) -> dict[str, Any]:
    policy, scope = _tm(node)
    return {"apiVersion": "topology.node.k8s.io/v1alpha2", "kind": "NodeResourceTopology",
            "metadata": {"name": name}, "topologyPolicies": [_legacy(policy, scope)],
            "zones": _zones(node)}


RENDERERS = {"nfd": render_nfd, "rte": render_rte, "v1alpha1": render_v1alpha1}


# ------------------------------------------------------------------------------ tests


def extender_with(obj: dict[str, Any], name: str = "w1") -> ExtenderCore:
    """An extender serving ``obj`` as ``name`` and as an identical ``twin``: filtering both
    keeps the extender from assuming a pod that only one node passes, so every pod is
    decided on the published state."""
    core = ExtenderCore(log=io.StringIO())
    core.set_nodes({name: obj, "twin": obj})
    return core


@pytest.mark.parametrize("producer", sorted(RENDERERS))
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_extender_filter_equals_node_admission(producer: str, scenario: str) -> None:
    machine = SCENARIOS[scenario]
    truth = busy(machine)
    obj = RENDERERS[producer](truth, "w1")
    core = extender_with(obj)
    assert "w1" in core.nodes, "the NRT was not usable"
    engine = core.nodes["w1"].node
    kc, want = engine.machine.kubelet, machine.kubelet
    assert (kc.cpu_manager_policy, kc.memory_manager_policy) == (want.cpu_manager_policy,
                                                               want.memory_manager_policy)
    assert (kc.topology_manager_policy, kc.topology_manager_scope) == _tm(truth)
    for p in PODS:
        expected, _ = truth.plan(p)
        if (expected.reason or "").startswith("OutOf"):
            # node-level fit (the kubelet's predicate admission): kube-scheduler's own
            # NodeResourcesFit rejects such a pod before the extender is asked
            continue
        passed, failed = core.filter(p, ["w1", "twin"])
        assert ("w1" in passed) == expected.admitted, (p.name, expected.message, failed)


def test_invalid_topology_attributes_keep_defaults() -> None:
    """Bad values are ignored as scheduler-plugins ignores them: the node stays usable."""
    truth = Node(fig1(memory="None", policy="none"))
    obj = render_rte(truth, "w1")
    obj["attributes"] = [{"name": "topologyManagerPolicy", "value": ""},
                         {"name": "topologyManagerScope", "value": "Pod"},
                         {"name": "topologyManagerMaxNUMANodes", "value": "4"},
                         {"name": "topologyManagerOptionBogus", "value": "true"}]
    obj["topologyPolicies"] = ["SingleNUMANodePodLevel"]
    node = engine_from_nrt(obj)
    kc = node.machine.kubelet
    assert (kc.topology_manager_policy, kc.topology_manager_scope) == ("single-numa-node", "pod")
    assert dict(kc.topology_manager_policy_options) == {}
    obj["attributes"][2]["value"] = "16"
    assert engine_from_nrt(obj).machine.kubelet.topology_manager_policy_options == {
        "max-allowable-numa-nodes": "16"}


def test_unprefixed_device_resources_are_devices() -> None:
    truth = Node(fig1(memory="None"))
    obj = render_nfd(truth, "w1")
    for z in obj["zones"]:
        z["resources"].append({"name": "gpu", "capacity": "1", "allocatable": "1", "available": "1"})
    node = engine_from_nrt(obj)
    assert sum(1 for d in node.machine.devices if d.resource == "gpu") == 2
    ok, _ = node.plan(pod("g1", {"cpu": "2", "memory": "1Gi", "gpu": "1"}))
    no, _ = node.plan(pod("g2", {"cpu": "2", "memory": "1Gi", "gpu": "2"}))
    assert ok.admitted and not no.admitted


def test_device_without_topology_admitted_on_foreign_nrt() -> None:
    """NFD/RTE leave a device plugin without topology out of every zone: the kubelet admits
    its pods (no hint), so the extender does too; numalign's own NRT lists such devices."""
    from numalign.kube.topology import build_nrt

    truth = Node(fig1(gpus_without_topology=True))
    p = pod("g", {"cpu": "2", "memory": "1Gi", "gpu-vendor.com/gpu": "2"})
    assert truth.plan(p)[0].admitted
    assert engine_from_nrt(render_rte(truth, "w1")).plan(p)[0].admitted
    own = engine_from_nrt(build_nrt(truth))
    assert own.plan(p)[0].admitted
    assert not own.plan(pod("x", {"cpu": "2", "memory": "1Gi", "gpu-vendor.com/gpu": "3"}))[0].admitted
    # a resource no device plugin ever registered: the kubelet drops it (predicate) and skips
    # it (device manager), so the pod is admitted
    assert own.plan(pod("y", {"cpu": "2", "memory": "1Gi", "other.com/thing": "1"}))[0].admitted


# --------------------------------------------------- scheduler-plugins' test fixtures


def sp_fixture(policy: str, scope: str, zones: dict[int, dict[str, tuple[str, str]]]) -> dict[str, Any]:
    """An NRT as scheduler-plugins' tests build them: capacity == allocatable, available set."""
    return {"apiVersion": "topology.node.k8s.io/v1alpha2", "kind": "NodeResourceTopology",
            "metadata": {"name": "fx"},
            "attributes": [{"name": "topologyManagerPolicy", "value": policy},
                           {"name": "topologyManagerScope", "value": scope}],
            "zones": [{"name": f"node-{nid}", "type": "Node",
                       "resources": [{"name": r, "capacity": cap, "allocatable": cap, "available": av}
                                     for r, (cap, av) in res.items()]}
                      for nid, res in zones.items()]}


def sp_filter(obj: dict[str, Any], p: Pod) -> bool:
    """scheduler-plugins' NodeResourceTopologyMatch filter (single-numa-node only; others pass):
    some zone must have every requested resource it lists available (cpu, memory and
    hugepages only for Guaranteed pods; per container, subtracting placed containers, or for
    the pod's effective request); a cpu/memory/hugepages request the zones do not list is
    refused (the node has none), another unlisted resource is host-level."""
    from numalign.inputs.quantity import parse_quantity
    from numalign.pods import QOSClass, effective_pod_requests

    attrs = {a["name"]: a["value"] for a in obj.get("attributes", [])}
    if attrs.get("topologyManagerPolicy") != "single-numa-node":
        return True
    avail = {int(z["name"][5:]): {r["name"]: parse_quantity(r["available"], "x") for r in z["resources"]}
             for z in obj["zones"]}
    listed = {r for z in avail.values() for r in z}
    guaranteed = p.qos is QOSClass.GUARANTEED

    def fits(req: dict[str, int]) -> int | None:
        for nid in sorted(avail):
            ok = True
            for r, q in req.items():
                affine = r in ("cpu", "memory") or is_hugepages_resource(r)
                if q == 0 or (not guaranteed and affine):
                    continue
                if r not in listed:
                    if affine:  # not on the node at all (the node's allocatable lacks it)
                        return None
                    continue  # host-level resource

                if avail[nid].get(r, 0) < q:
                    ok = False
            if ok:
                return nid
        return None

    def requests_of(req: dict[str, int]) -> dict[str, int]:
        return {r: (v / 1000 if r == "cpu" else v) for r, v in req.items()}  # type: ignore[misc]

    if attrs.get("topologyManagerScope") == "pod":
        return fits(requests_of(dict(effective_pod_requests(p)))) is not None
    for c in p.containers:
        req = requests_of(dict(c.requests))
        nid = fits(req)
        if nid is None:
            return False
        for r, q in req.items():
            if r in avail[nid] and (guaranteed or "/" in r):
                avail[nid][r] -= q
    return True


FIXTURES = {
    "sp-cpu-mem": {0: {"cpu": ("4", "2"), "memory": ("8Gi", "4Gi")},
                   1: {"cpu": ("4", "2"), "memory": ("8Gi", "3Gi")}},
    "sp-gpu": {0: {"cpu": ("8", "8"), "memory": ("16Gi", "16Gi"), "nvidia.com/gpu": ("1", "1")},
               1: {"cpu": ("8", "1"), "memory": ("16Gi", "16Gi"), "nvidia.com/gpu": ("1", "1")}},
    "sp-hugepages": {0: {"cpu": ("4", "4"), "memory": ("8Gi", "8Gi"), "hugepages-2Mi": ("1Gi", "256Mi")},
                     1: {"cpu": ("4", "4"), "memory": ("8Gi", "8Gi"), "hugepages-2Mi": ("1Gi", "1Gi")}},
}
FIXTURE_PODS = [
    pod("f-cpu4", {"cpu": "4", "memory": "1Gi"}),
    pod("f-cpu2", {"cpu": "2", "memory": "1Gi"}),
    pod("f-cpu2-mem4", {"cpu": "2", "memory": "4Gi"}),
    pod("f-cpu2-mem5", {"cpu": "2", "memory": "5Gi"}),
    pod("f-two", {"cpu": "1", "memory": "1Gi"}, {"cpu": "1", "memory": "1Gi"}),
    pod("f-gpu", {"cpu": "2", "memory": "1Gi", "nvidia.com/gpu": "1"}),
    pod("f-gpu2", {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "2"}),
    pod("f-huge", {"cpu": "1", "memory": "1Gi", "hugepages-2Mi": "512Mi"}),
    pod("f-huge-big", {"cpu": "1", "memory": "1Gi", "hugepages-2Mi": "2Gi"}),
    pod("f-burst", {"cpu": "6", "memory": "6Gi"}, guaranteed=False),
]


@pytest.mark.parametrize("scope", ["container", "pod"])
@pytest.mark.parametrize("fixture", sorted(FIXTURES))
def test_scheduler_plugins_fixtures_decided_as_their_filter(fixture: str, scope: str) -> None:
    obj = sp_fixture("single-numa-node", scope, FIXTURES[fixture])
    core = extender_with(obj, "fx")
    assert "fx" in core.nodes
    kc = core.nodes["fx"].node.machine.kubelet
    assert (kc.cpu_manager_policy, kc.memory_manager_policy) == ("static", "Static")
    for p in FIXTURE_PODS:
        passed, failed = core.filter(p, ["fx", "twin"])
        assert ("fx" in passed) == sp_filter(obj, p), (fixture, p.name, failed)


def test_fixture_cpu_four_on_two_available_each_is_rejected() -> None:
    """The issue's case: capacity == allocatable, 2 CPUs available per zone, 4-CPU pod."""
    obj = sp_fixture("single-numa-node", "container", FIXTURES["sp-cpu-mem"])
    node = engine_from_nrt(obj)
    assert not node.plan(pod("x", {"cpu": "4", "memory": "1Gi"}))[0].admitted
    # and a 2-CPU + 4Gi pod fits node-0 only; + 5Gi fits nowhere (Static memory inferred)
    assert node.plan(pod("y", {"cpu": "2", "memory": "4Gi"}))[0].admitted
    assert not node.plan(pod("z", {"cpu": "2", "memory": "5Gi"}))[0].admitted


def test_cpu_none_rendering_admits_integer_cpu_pods() -> None:
    """NFD/RTE render the CPU manager ``none`` as allocatable 0 / available 0: not a node
    with every CPU reserved."""
    truth = Node(fig1(cpu="none", memory="None"))
    node = engine_from_nrt(render_nfd(truth, "w1"))
    assert node.machine.kubelet.cpu_manager_policy == "none"
    assert node.plan(pod("x", {"cpu": "4", "memory": "1Gi"}))[0].admitted


def test_devices_helper_sanity() -> None:
    # the scenario machines are what they say
    m = SCENARIOS["gpus-without-topology"]
    assert all(not d.numa for d in m.devices if "gpu" in d.resource)
    assert isinstance(m.devices[0], Device)
    assert hugepage_resource_name(GI) == "hugepages-1Gi"


def test_hostile_counts_are_input_errors() -> None:
    """A zone claiming 1e18 GPUs (or CPUs) is refused in O(1), not expanded."""
    import time

    from numalign.errors import InputError

    truth = Node(fig1(memory="None"))
    for res, value in (("gpu-vendor.com/gpu", "1e18"), ("cpu", "1e18")):
        obj = render_nfd(truth, "w1")
        for r in obj["zones"][0]["resources"]:
            if r["name"] == res:
                r.update(capacity=value, allocatable=value, available=value)
        t0 = time.monotonic()
        with pytest.raises(InputError, match="more than"):
            engine_from_nrt(obj)
        assert time.monotonic() - t0 < 1.0
