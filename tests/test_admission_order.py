"""The kubelet's admission in the kubelet's order (issue 24; spec/kubelet.md 2.11).

``pkg/kubelet/kubelet.go`` registers the resource allocation admit handler (the Topology
Manager: merge, then every provider's ``Allocate``) before the predicate admit handler
(``lifecycle.NewPredicateAdmitHandler``), and ``canAdmitPod`` stops at the first rejection. So:

* an unalignable pod gets ``TopologyAffinityError`` even when it is also over the node's
  capacity;
* under ``none`` and ``best-effort`` the merge admits and the provider's ``Allocate`` fails:
  ``UnexpectedAdmissionError`` with "Allocate failed due to <err>, which is unexpected";
* only what the Topology Manager lets through reaches the predicates (``OutOfcpu``...);
* an extended resource no device plugin registered is dropped by both.

Every table row names the upstream code that gives its answer. numalign's one deliberate
difference - all-or-nothing: a rejected pod keeps no allocation - is asserted on every row.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from conftest import REPO
from numalign.engine.bitmask import mask_of
from numalign.engine.hints import ProviderHints, TopologyHint
from numalign.engine.policies import MergeResult, Policy, Scope, TopologyPolicy
from numalign.engine.scopes import Rejected, admit
from numalign.machine.model import Machine
from numalign.machine.spec import read_machine_file
from numalign.node.admission import Node
from numalign.node.rules import ADMISSION_CHAIN, AdmissionStep
from numalign.pods import Container, Pod, parse_pods

FIG1 = REPO / "examples" / "fig1.yaml"
TAE = "Resources cannot be allocated with Topology locality"
POLICIES = ("none", "best-effort", "restricted", "single-numa-node")
SCOPES = ("container", "pod")


def test_the_chain_is_the_kubelets_registration_order() -> None:
    assert ADMISSION_CHAIN == (AdmissionStep.TOPOLOGY_MANAGER, AdmissionStep.PREDICATES)


# ----------------------------------------------------------------------------------- fixtures


def machine(policy: str = "single-numa-node", scope: str = "container", **kubelet: Any) -> Machine:
    base = read_machine_file(str(FIG1))
    return base.replace(kubelet=base.kubelet.replace(topology_manager_policy=policy,
                                         topology_manager_scope=scope, **kubelet))


def pod(name: str, resources: Mapping[str, str], *, guaranteed: bool = True) -> Pod:
    req = dict(resources)
    body = {"requests": req, "limits": dict(req) if guaranteed else {}}
    doc = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
           "spec": {"containers": [{"name": "c", "resources": body}]}}
    return parse_pods(doc)[0]


#: the blog's container: 2 CPUs, 200Mi, one GPU and one NIC
ALIGNED = {"cpu": "2", "memory": "200Mi", "gpu-vendor.com/gpu": "1", "nic-vendor.com/nic": "1"}


# ------------------------------------------------------------------- the blog's Figure 1


def test_blog_figure_1_every_step() -> None:
    """shared/seeds/topology-manager-blog.txt, on its Figure 1 machine under
    single-numa-node: "this would result in one of the following aligned allocations:
    {cpu: {0, 1}, gpu: 0, nic: 0} ... {cpu: {4, 5}, gpu: 1, nic: 1}"; container 1 then sees
    "only the following set of hints ... {{10: True}} {{10: True}}" for the devices; and
    "if a pod is rejected by one of the TopologyManager policies, it will be placed in a
    Terminated state with a pod admission error and a reason of 'TopologyAffinityError'"."""
    node = Node(machine())
    first = node.admit(pod("container0", ALIGNED))
    assert first.admitted
    (c0,) = first.containers
    assert (c0.affinity, c0.preferred, sorted(c0.cpus)) == (mask_of([0]), True, [0, 1])
    assert c0.devices == {"gpu-vendor.com/gpu": ["gpu0"], "nic-vendor.com/nic": ["nic0"]}
    second = node.admit(pod("container1", ALIGNED))
    assert second.admitted
    (c1,) = second.containers
    assert (c1.affinity, c1.preferred, sorted(c1.cpus)) == (mask_of([1]), True, [4, 5])
    assert c1.devices == {"gpu-vendor.com/gpu": ["gpu1"], "nic-vendor.com/nic": ["nic1"]}
    before = node.state.to_dict()
    third = node.admit(pod("container2", ALIGNED))
    # the kubelet's predicate handler would say OutOfgpu-vendor.com/gpu, but the Topology
    # Manager runs first: no device is left, the device hints are [], the pod cannot be aligned
    assert (third.admitted, third.reason, third.message) == (False, "TopologyAffinityError", TAE)
    assert node.state.to_dict() == before  # all-or-nothing: nothing taken


# ------------------------------------------------------------- policy x scope x shortfall


@dataclass(frozen=True)
class Row:
    shortfall: str
    #: policy -> (reason, message) or None (admitted); the same for both scopes
    want: Mapping[str, tuple[str, str] | None]
    #: the upstream code that gives the answer
    source: str


def _unexpected(err: str) -> tuple[str, str]:
    return "UnexpectedAdmissionError", f"Allocate failed due to {err}, which is unexpected"


def _each(answer: tuple[str, str] | None) -> dict[str, tuple[str, str] | None]:
    return dict.fromkeys(POLICIES, answer)


CPU_SHORT = "not enough cpus available to satisfy request"
MEMORY_DEFAULT = ("[memorymanager] failed to get the default NUMA affinity, no NUMA nodes with "
                  "enough memory is available")
MEMORY_EXTEND = "[memorymanager] failed to find NUMA nodes to extend the current topology hint"
GPU_SHORT = ("requested number of devices unavailable for gpu-vendor.com/gpu. "
             "Requested: 1, Available: 0")

ROWS = [
    Row("exclusive CPUs: 100 on an 8-CPU node",
        {"none": _unexpected(f"{CPU_SHORT}: requested=100, available=7"),
         # best-effort: CPU hints [] count as {nil, false}; the memory manager's {0} wins, the
         # 4 aligned CPUs of node 0 are taken, the remaining 96 cannot be
         "best-effort": _unexpected(f"{CPU_SHORT}: requested=96, available=3"),
         "restricted": ("TopologyAffinityError", TAE),
         "single-numa-node": ("TopologyAffinityError", TAE)},
        "cpumanager/policy_static.go GetTopologyHints ([] when too few CPUs), "
        "topologymanager/policy.go filterProvidersHints, cpu_assignment.go takeByTopology"),
    Row("devices: the blog's third pod (every GPU taken)",
        {"none": _unexpected(GPU_SHORT), "best-effort": _unexpected(GPU_SHORT),
         "restricted": ("TopologyAffinityError", TAE),
         "single-numa-node": ("TopologyAffinityError", TAE)},
        "devicemanager/topology_hints.go ([] when fewer available than requested), "
        "devicemanager/manager.go devicesToAllocate"),
    Row("Static memory: 200Gi on a 128Gi node",
        # the memory manager answers an empty map ("no preference") when no NUMA combination
        # holds the request, so the merge admits and Allocate fails (spec/kubelet.md 10)
        {"none": _unexpected(MEMORY_DEFAULT), "best-effort": _unexpected(MEMORY_EXTEND),
         "restricted": _unexpected(MEMORY_EXTEND), "single-numa-node": _unexpected(MEMORY_EXTEND)},
        "memorymanager/policy_static.go GetTopologyHints / Allocate (getDefaultHint, "
        "extended hint)"),
    Row("hugepages under the Static memory manager: 4Gi of hugepages-1Gi, none configured",
        {"none": _unexpected(MEMORY_DEFAULT), "best-effort": _unexpected(MEMORY_EXTEND),
         "restricted": _unexpected(MEMORY_EXTEND), "single-numa-node": _unexpected(MEMORY_EXTEND)},
        "memorymanager/policy_static.go (hugepages are NUMA resources of the memory manager)"),
    Row("Burstable over-request: 100 CPUs",
        _each(("OutOfcpu", "Node didn't have enough resource: cpu, requested: 100000, used: 0, "
                           "capacity: 7000")),
        "cpumanager/policy_static.go (no hints, no Allocate for a non-Guaranteed pod), then "
        "lifecycle/predicate.go generalFilter -> noderesources fitsRequest"),
    Row("missing extended resource: example.com/fpga the node never had",
        _each(None),
        "lifecycle/predicate.go removeMissingExtendedResources, devicemanager/manager.go "
        "isDevicePluginResource"),
]

SHORT_PODS = {
    "exclusive CPUs: 100 on an 8-CPU node": {"cpu": "100", "memory": "1Gi"},
    "Static memory: 200Gi on a 128Gi node": {"cpu": "1", "memory": "200Gi"},
    "hugepages under the Static memory manager: 4Gi of hugepages-1Gi, none configured":
        {"cpu": "1", "memory": "1Gi", "hugepages-1Gi": "4Gi"},
    "missing extended resource: example.com/fpga the node never had":
        {"cpu": "1", "memory": "1Gi", "example.com/fpga": "1"},
}


def _shortfall_pod(node: Node, row: Row) -> Pod:
    if row.shortfall.startswith("devices"):
        for i in range(2):
            assert node.admit(pod(f"aligned{i}", ALIGNED)).admitted
        return pod("third", ALIGNED)
    if row.shortfall.startswith("Burstable"):
        return pod("burst", {"cpu": "100"}, guaranteed=False)
    return pod("short", SHORT_PODS[row.shortfall])


@pytest.mark.parametrize("scope", SCOPES)
@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.shortfall.split(":")[0])
def test_shortfalls_get_the_kubelets_reason(row: Row, policy: str, scope: str) -> None:
    node = Node(machine(policy, scope))
    p = _shortfall_pod(node, row)
    before = node.state.to_dict()
    result = node.admit(p)
    want = row.want[policy]
    if want is None:
        assert result.admitted, (result.reason, result.message)
        return
    assert (result.reason, result.message) == want, row.source
    assert not result.admitted and node.state.to_dict() == before


@pytest.mark.parametrize("policy", POLICIES)
def test_a_full_maxpods_node_answers_by_the_topology_manager_first(policy: str) -> None:
    """maxPods reached: a pod the Topology Manager admits meets ``OutOfpods``; an unalignable
    one never gets there under restricted/single-numa-node (policy_*.go canAdmitPodResult)."""
    node = Node(machine(policy, max_pods=2))
    for i in range(2):
        assert node.admit(pod(f"p{i}", {"cpu": "1", "memory": "1Gi"})).admitted
    best_effort = node.admit(pod("be", {}, guaranteed=False))
    assert (best_effort.reason, best_effort.message) == (
        "OutOfpods", "Node didn't have enough resource: pods, requested: 1, used: 2, capacity: 2")
    huge = node.admit(pod("huge", {"cpu": "100", "memory": "1Gi"}))
    if policy in ("restricted", "single-numa-node"):
        assert (huge.reason, huge.message) == ("TopologyAffinityError", TAE)
    else:
        assert huge.reason == "UnexpectedAdmissionError"


def test_static_memory_off_hugepages_are_a_predicate_shortfall() -> None:
    """Without the Static memory manager nothing hints hugepages: the Topology Manager admits
    and the predicate refuses (hugepages are native resources: a size the node lacks is short)."""
    node = Node(machine("single-numa-node", memory_manager_policy="None", reserved_memory=()))
    r = node.admit(pod("hp", {"cpu": "1", "memory": "1Gi", "hugepages-1Gi": "4Gi"}))
    assert (r.reason, r.message) == (
        "OutOfhugepages-1Gi",
        "Node didn't have enough resource: hugepages-1Gi, requested: 4294967296, used: 0, "
        "capacity: 0")


# ----------------------------------------- upstream topology_manager_test.go TestAdmit


class _Mock:
    """``mockHintProvider``: the same hints for every container and for the pod; ``Allocate``
    succeeds."""

    name = "mock"

    def __init__(self, hints: ProviderHints) -> None:
        self.hints = hints

    def container_hints(self, pod: Pod, container: Container) -> ProviderHints:
        return self.hints

    def pod_hints(self, pod: Pod) -> ProviderHints:
        return self.hints

    def allocate(self, pod: Pod, container: Container, hint: TopologyHint) -> None:
        return None


def _hints(raw: Mapping[str, Any] | None) -> ProviderHints:
    if raw is None:
        return None
    return {r: None if hs is None else [TopologyHint(None if h["affinity"] is None else
                                                     mask_of(h["affinity"]), h["preferred"])
                                        for h in hs]
            for r, hs in raw.items()}


def _test_admit_cases() -> list[dict[str, Any]]:
    cases = json.loads((REPO / "tests" / "data" / "kubelet_policy_cases.json").read_text())
    return [c for c in cases if c["id"].startswith("TestAdmit/")]


ONE_CONTAINER = pod("p", {}, guaranteed=False)


@pytest.mark.parametrize("case", _test_admit_cases(), ids=lambda c: c["id"])
@pytest.mark.parametrize("scope", [Scope.CONTAINER, Scope.POD])
def test_upstream_test_admit_through_both_scopes(case: dict[str, Any], scope: Scope) -> None:
    """TestAdmit runs every case through a container-scope and a pod-scope manager: the admit
    decision, and ``TopologyAffinityError`` as the reason of a rejection."""
    assert len(_test_admit_cases()) == 14
    policy = TopologyPolicy(Policy(case["policy"]), tuple(case["numa_nodes"]))
    providers = [_Mock(_hints(p)) for p in case["providers"]]
    try:
        admit(policy, scope, providers, ONE_CONTAINER, ONE_CONTAINER.containers)
        admitted = True
    except Rejected as e:
        admitted = False
        assert e.reason == "TopologyAffinityError" and e.message == TAE
    assert admitted is case["expect"]["admit"]


# --------------------------------- upstream scope_container_test.go / scope_pod_test.go


A = TopologyHint(mask_of([0]), True)
A_WIDE = TopologyHint(mask_of([0, 1]), False)
B = TopologyHint(mask_of([1]), True)
B_WIDE = TopologyHint(mask_of([1, 2]), False)
C = TopologyHint(mask_of([2]), True)
C_WIDE = TopologyHint(mask_of([3, 4]), False)
EMPTY = TopologyHint(None, False)  # TopologyHint{}

#: (name, providers' hints, what the policy's Merge receives): TestContainerCalculateAffinity,
#: TestContainerAccumulateProvidersHints and their pod-scope twins (same tables)
ACCUMULATE: list[tuple[str, list[ProviderHints], list[ProviderHints]]] = [
    ("No hint providers", [], []),
    ("HintProvider returns empty non-nil map[string][]TopologyHint", [{}], [{}]),
    ("HintProvider returns -nil map[string][]TopologyHint from provider",
     [{"resource": None}], [{"resource": None}]),
    ("Assorted HintProviders",
     [{"resource-1/A": [A, A_WIDE], "resource-1/B": [B, B_WIDE]},
      {"resource-2/A": [C, C_WIDE], "resource-2/B": [C, C_WIDE]},
      {"resource-3": None}],
     [{"resource-1/A": [A, A_WIDE], "resource-1/B": [B, B_WIDE]},
      {"resource-2/A": [C, C_WIDE], "resource-2/B": [C, C_WIDE]},
      {"resource-3": None}]),
    ("2 HintProviders with 1 resource returns hints",
     [{"resource1": [EMPTY]}, {"resource2": [EMPTY]}], [{"resource1": [EMPTY]}, {"resource2": [EMPTY]}]),
    ("2 HintProviders 1 with 1 resource 1 with nil hints",
     [{"resource1": [EMPTY]}, None], [{"resource1": [EMPTY]}, None]),
    ("2 HintProviders 1 with 1 resource 1 empty hints",
     [{"resource1": [EMPTY]}, {}], [{"resource1": [EMPTY]}, {}]),
    ("HintProvider with 2 resources returns hints",
     [{"resource1": [EMPTY], "resource2": [EMPTY]}], [{"resource1": [EMPTY], "resource2": [EMPTY]}]),
]


@pytest.mark.parametrize(("name", "given", "merged"), ACCUMULATE, ids=[c[0] for c in ACCUMULATE])
@pytest.mark.parametrize("scope", [Scope.CONTAINER, Scope.POD])
def test_upstream_scope_accumulates_providers_hints(
    name: str, given: list[ProviderHints], merged: list[ProviderHints], scope: Scope
) -> None:
    """The scope hands the policy every provider's hints, in provider order, unchanged
    (``mockPolicy`` records them and admits with ``TopologyHint{}``)."""
    seen: list[Sequence[ProviderHints]] = []

    def mock_policy(hints: Sequence[ProviderHints]) -> MergeResult:
        seen.append(list(hints))
        return MergeResult(EMPTY, True)

    policy = TopologyPolicy(Policy.BEST_EFFORT, (0, 1, 2, 3, 4))
    admit(policy, scope, [_Mock(h) for h in given], ONE_CONTAINER, ONE_CONTAINER.containers,
          mock_policy)
    assert seen == [merged]


# ------------------------------------------------------------------ the cluster side predicts


@pytest.mark.parametrize("policy", ["none", "best-effort"])
@pytest.mark.parametrize("profile", ["numalign", "koordinator"])
def test_exact_profiles_filter_a_node_whose_kubelet_answers_unexpected_admission_error(
    policy: str, profile: str
) -> None:
    """Under ``none``/``best-effort`` the blog's third pod passes the merge and fails the device
    manager's ``Allocate``: the node's answer is ``UnexpectedAdmissionError``, and an exact
    profile's filter (which runs the node's own admission) refuses the node with that reason."""
    from numalign.scheduler import get_profile

    node = Node(machine(policy))
    for i in range(2):
        assert node.admit(pod(f"aligned{i}", ALIGNED)).admitted
    third = pod("third", ALIGNED)
    want = node.plan(third)[0]
    assert want.reason == "UnexpectedAdmissionError"
    flt = get_profile(profile).filter
    assert flt is not None
    res = flt(node, third)
    assert not res.passed and res.reason.startswith("UnexpectedAdmissionError"), res.reason
