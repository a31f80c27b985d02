"""Koordinator's own merge test tables, transcribed (koordinator-sh/koordinator
``pkg/scheduler/frameworkext/topologymanager/policy_test.go``: ``commonPolicyMergeTestCases`` and
``bestEffortPolicy.mergeTestCases``, NUMA nodes 0-3), run in the ``koordinator`` engine mode;
plus ``checkExclusivePolicy``, the ``koordinator`` profile's filter and the SamePCIe joint
allocation on the DGX-2 capture. Every policy's merge table, with the ``Unsatisfied`` flag and
the reasons upstream asserts, is in ``tests/test_koordinator_policy_cases.py``."""

from __future__ import annotations

import json
import re

import pytest

from numalign.engine.bitmask import mask_of
from numalign.engine.hints import ProviderHints, TopologyHint
from numalign.engine.policies import Policy, TopologyPolicy
from numalign.modes.koordinator.numa import NumaNodeStatus, exclusive_ok
from numalign.modes.registry import Mode, merge
from numalign.pods.annotations import Exclusive

NODES = (0, 1, 2, 3)
ALL = NODES


def h(*ids: int, p: bool = True) -> TopologyHint:
    return TopologyHint(mask_of(ids), p)


def one(res: str, *hints: TopologyHint) -> ProviderHints:
    return {res: list(hints)}


COMMON = [
    ("Two providers, 1 hint each, same mask, both preferred 1/2",
     [one("resource1", h(0)), one("resource2", h(0))], (0,), True),
    ("Two providers, 1 hint each, same mask, both preferred 2/2",
     [one("resource1", h(1)), one("resource2", h(1))], (1,), True),
    ("Two providers, 1 no hints, 1 single hint preferred 1/2", [None, one("resource", h(0))], (0,), True),
    ("Two providers, 1 no hints, 1 single hint preferred 2/2", [None, one("resource", h(1))], (1,), True),
    ("Two providers, 1 with 2 hints, 1 with single hint matching 1/2",
     [one("resource1", h(0), h(1)), one("resource2", h(0))], (0,), True),
    ("Two providers, 1 with 2 hints, 1 with single hint matching 2/2",
     [one("resource1", h(0), h(1)), one("resource2", h(1))], (1,), True),
    ("Two providers, both with 2 hints, matching narrower preferred hint from both",
     [one("resource1", h(0), h(1)), one("resource2", h(0), h(0, 1, p=False))], (0,), True),
    ("Ensure less narrow preferred hints are chosen over narrower non-preferred hints",
     [one("resource1", h(1), h(0, 1, p=False)), one("resource2", h(0), h(1), h(0, 1, p=False))], (1,), True),
    ("Multiple resources, same provider",
     [{"resource1": [h(1), h(0, 1, p=False)], "resource2": [h(0), h(1), h(0, 1, p=False)]}], (1,), True),
]

BEST_EFFORT = [
    ("Two providers, 2 hints each, same mask (some with different bits), same preferred",
     [one("resource1", h(0, 1), h(0, 2)), one("resource2", h(0, 1), h(0, 2))], (0, 1), True, []),
    ("NUMATopologyHint not set", [], ALL, True, []),
    ("NUMATopologyHintProvider returns empty non-nil map", [{}], ALL, True, []),
    ("NUMATopologyHintProvider returns -nil map from provider", [{"resource": None}], ALL, True, []),
    # policy_best_effort.go returns no reasons (Restricted and SingleNUMANode say "Unsatisfied NUMA
    # resource": tests/test_koordinator_policy_cases.py)
    ("NUMATopologyHintProvider returns empty non-nil hints from provider", [{"resource": []}], ALL, False, []),
    ("Single NUMATopologyHint with Preferred as true and NUMANodeAffinity as nil",
     [one("resource", TopologyHint(None, True))], ALL, True, []),
    ("Single NUMATopologyHint with Preferred as false and NUMANodeAffinity as nil",
     [one("resource", TopologyHint(None, False))], ALL, False, []),
    ("Two providers, 1 hint each, no common mask", [one("resource1", h(0)), one("resource2", h(1))], ALL, False, []),
    ("Two providers, 1 hint each, same mask, 1 preferred, 1 not 1/2",
     [one("resource1", h(0)), one("resource2", h(0, p=False))], (0,), False, []),
    ("Two providers, 1 hint each, same mask, 1 preferred, 1 not 2/2",
     [one("resource1", h(1)), one("resource2", h(1, p=False))], (1,), False, []),
    ("Two providers, 1 hint each, 1 wider mask, both preferred 1/2",
     [one("resource1", h(0)), one("resource2", h(0, 1))], ALL, False, []),
    ("Two providers, 1 with 2 hints, 1 with single non-preferred hint matching",
     [one("resource1", h(0), h(1)), one("resource2", h(0, 1, p=False))], ALL, False, []),
]


@pytest.mark.parametrize(("providers", "ids", "preferred"), [c[1:] for c in COMMON], ids=[c[0] for c in COMMON])
@pytest.mark.parametrize("policy", [Policy.BEST_EFFORT, Policy.RESTRICTED])
def test_common_policy_merge(policy: Policy, providers: list[ProviderHints], ids: tuple[int, ...],
                             preferred: bool) -> None:
    got = merge(Mode.KOORDINATOR, TopologyPolicy(policy, NODES), providers)
    assert got.hint == h(*ids, p=preferred) and not got.unsatisfied and got.admit


@pytest.mark.parametrize(("providers", "ids", "preferred", "reasons"), [c[1:] for c in BEST_EFFORT],
                         ids=[c[0] for c in BEST_EFFORT])
def test_best_effort_merge(providers: list[ProviderHints], ids: tuple[int, ...], preferred: bool,
                           reasons: list[str]) -> None:
    """An unsatisfied best hint falls back to every NUMA node (BestEffort only)."""
    got = merge(Mode.KOORDINATOR, TopologyPolicy(Policy.BEST_EFFORT, NODES), providers)
    assert got.hint == h(*ids, p=preferred)
    assert got.admit and not got.unsatisfied
    assert list(got.reasons) == reasons


def test_restricted_keeps_the_unsatisfied_hint_and_says_so() -> None:
    got = merge(Mode.KOORDINATOR, TopologyPolicy(Policy.RESTRICTED, NODES),
                [one("resource1", h(0)), one("resource2", h(0, 1))])
    assert got.hint == h(0, p=False) and got.unsatisfied and not got.admit
    kubelet = merge(Mode.KUBELET, TopologyPolicy(Policy.BEST_EFFORT, NODES),
                    [one("resource1", h(0)), one("resource2", h(0, 1))])
    assert kubelet.hint == h(0, p=False) and not kubelet.unsatisfied  # the kubelet keeps {0}


# ------------------------------------------------------------------ checkExclusivePolicy

S, SH, IDLE = NumaNodeStatus.SINGLE, NumaNodeStatus.SHARED, NumaNodeStatus.IDLE


@pytest.mark.parametrize(("ids", "exclusive", "status", "ok"), [
    ((0, 1), Exclusive.REQUIRED, {0: S, 1: IDLE}, False),  # multi-NUMA next to a single-NUMA pod
    ((0, 1), Exclusive.REQUIRED, {0: SH, 1: IDLE}, True),
    ((0,), Exclusive.REQUIRED, {0: SH}, False),  # single-NUMA on a shared node
    ((0,), Exclusive.REQUIRED, {0: S}, True),
    ((0, 1), Exclusive.PREFERRED, {0: S, 1: S}, True),
    (None, Exclusive.PREFERRED, {}, False),
])
def test_check_exclusive_policy(ids: tuple[int, ...] | None, exclusive: Exclusive,
                                status: dict[int, NumaNodeStatus], ok: bool) -> None:
    assert exclusive_ok(None if ids is None else mask_of(ids), exclusive, status) is ok


def test_exclusive_required_makes_the_multi_numa_hint_non_preferred() -> None:
    providers = [one("cpu", h(0, 1))]
    got = merge(Mode.KOORDINATOR, TopologyPolicy(Policy.RESTRICTED, (0, 1)), providers,
                Exclusive.REQUIRED, {0: S, 1: IDLE})
    assert not got.hint.preferred and not got.admit
    ok = merge(Mode.KOORDINATOR, TopologyPolicy(Policy.RESTRICTED, (0, 1)), providers,
               Exclusive.PREFERRED, {0: S, 1: IDLE})
    assert ok.hint == h(0, 1) and ok.admit


# ------------------------------------------------------------------ the koordinator profile


def _pod(name: str, cpus: int, spec: dict[str, str] | None = None) -> object:
    from numalign.pods import Container, ContainerKind, Pod, QOSClass, default_uid
    from numalign.pods.annotations import KOORDINATOR_ANNOTATION as NUMA_TOPOLOGY_SPEC

    req = {"cpu": cpus * 1000, "memory": 1 << 30}
    c = Container("main", ContainerKind.APP, requests=req, limits=dict(req))
    ann = {NUMA_TOPOLOGY_SPEC: json.dumps(spec)} if spec else {}
    return Pod("t", name, default_uid("t", name), QOSClass.GUARANTEED, (c,), ann)


def _node(policy: str = "best-effort") -> object:
    from numalign.machine.spec import load_machine
    from numalign.node.admission import Node

    return Node(load_machine({
        "name": "k", "shape": {"sockets": 2, "coresPerNuma": 4, "threadsPerCore": 2},
        "kubelet": {"cpuManagerPolicy": "static", "topologyManagerPolicy": policy, "kubeReserved": {"cpu": "1"}},
    }))


def test_koordinator_filter_policy_must_match() -> None:
    from numalign.modes.koordinator.scheduling import ERR_POLICY_NOT_MATCH, koordinator_filter

    node = _node("restricted")
    res = koordinator_filter(node, _pod("a", 2, {"numaTopologyPolicy": "SingleNUMANode"}))  # type: ignore[arg-type]
    assert not res.passed and res.reason == ERR_POLICY_NOT_MATCH
    assert koordinator_filter(node, _pod("b", 2, {"numaTopologyPolicy": "Restricted"})).passed  # type: ignore[arg-type]
    assert koordinator_filter(_node("none"), _pod("c", 2, {"numaTopologyPolicy": "Restricted"})).passed  # type: ignore[arg-type]


def test_koordinator_exclusive_keeps_multi_numa_pods_off_single_numa_pods() -> None:
    """The issue's example: a multi-NUMA pod is not placed next to a single-NUMA exclusive pod."""
    from numalign.modes.koordinator.scheduling import ERR_EXCLUSIVE, koordinator_filter, numa_status

    node = _node("best-effort")
    small = _pod("small", 2)
    assert node.admit(small).admitted  # type: ignore[attr-defined]
    assert set(numa_status(node).values()) == {S, IDLE}  # type: ignore[arg-type]
    wide = _pod("wide", 10, {"numaTopologyPolicy": "BestEffort"})  # needs both NUMA nodes
    res = koordinator_filter(node, wide)  # type: ignore[arg-type]
    assert not res.passed and res.reason == ERR_EXCLUSIVE
    relaxed = _pod("relaxed", 10, {"numaTopologyPolicy": "BestEffort", "singleNUMANodeExclusive": "Preferred"})
    assert koordinator_filter(node, relaxed).passed  # type: ignore[arg-type]


def test_koordinator_profile_is_known() -> None:
    from numalign.modes.koordinator.scheduling import koordinator_filter
    from numalign.scheduler import get_profile

    assert get_profile("koordinator").filter is koordinator_filter


# ------------------------------------------------------------- SamePCIe on the DGX-2 capture


def test_same_pcie_joint_allocation_on_dgx2() -> None:
    """GPU + RDMA NIC under one PCIe switch on the DGX-2 capture. The capture lists the 16 GPUs
    under 4 PCIe switches but no NICs; one RDMA NIC per switch is added under the switch ids of
    the capture (a real DGX-2 has its NICs on those switches)."""

    from conftest import shared_path
    from numalign.errors import InputError
    from numalign.machine.hwloc import load_hwloc_xml
    from numalign.machine.model import Device
    from numalign.modes.koordinator.scheduling import ERR_JOINT, joint_allocate

    m = load_hwloc_xml(shared_path("topologies", "hwloc", "xml", "nvidiaDGX2.xml")).machine
    gpus = [d for d in m.devices if d.resource == "nvidia.com/gpu"]
    roots = sorted({d.pcie_root for d in gpus if d.pcie_root})
    assert len(gpus) == 16 and len(roots) == 4
    numa = {d.pcie_root: d.numa for d in gpus}
    nics = tuple(Device("koordinator.sh/rdma", f"mlx5_{i}", numa[r], pcie_root=r) for i, r in enumerate(roots))
    m = m.replace(devices=m.devices + nics)
    root_of = {d.id: d.pcie_root for d in m.devices}

    two = joint_allocate(m, [("nvidia.com/gpu", 2), ("koordinator.sh/rdma", 1)])
    assert len(two.pcie) == 1
    assert {root_of[i] for ids in two.devices.values() for i in ids} == set(two.pcie)

    # six GPUs span two switches: one NIC under each, even though one NIC was asked for
    six = joint_allocate(m, [("nvidia.com/gpu", 6), ("koordinator.sh/rdma", 1)])
    assert len(six.pcie) == 2 and len(six.devices["koordinator.sh/rdma"]) == 2
    assert {root_of[i] for i in six.devices["koordinator.sh/rdma"]} == set(six.pcie)

    # the NIC of the fullest free switch is taken: the GPUs move to a switch whose NIC is free
    busy = {("koordinator.sh/rdma", n.id) for n in nics[:3]}
    last = joint_allocate(m, [("nvidia.com/gpu", 2), ("koordinator.sh/rdma", 1)], busy | {
        ("nvidia.com/gpu", g.id) for g in gpus if g.pcie_root != roots[3]})
    assert last.pcie == (roots[3],)
    with pytest.raises(InputError, match=re.escape(ERR_JOINT)):
        joint_allocate(m, [("nvidia.com/gpu", 2), ("koordinator.sh/rdma", 1)], busy)


def test_merge_case_mode_field() -> None:
    from numalign.cli.merge_case import run_case
    from numalign.errors import InputError

    case = {"policy": "best-effort", "numa_nodes": [0, 1],
            "providers": [{"cpu": [{"affinity": [0], "preferred": True}]},
                          {"gpu": [{"affinity": [0, 1], "preferred": True}]}]}
    assert run_case(case) == {"affinity": [0], "preferred": False, "admit": True}
    assert run_case({**case, "mode": "koordinator"}) == {
        "affinity": [0, 1], "preferred": False, "admit": True, "unsatisfied": False, "reasons": []}
    assert run_case({**case, "mode": "volcano"}) == {"affinity": [0], "preferred": True, "admit": True}
    with pytest.raises(InputError, match="mode"):
        run_case({**case, "mode": "yarn"})
