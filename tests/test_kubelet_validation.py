"""Kubelet start-up validation of a machine spec's kubelet section, and size caps (issue 13)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from numalign.errors import InputError
from numalign.machine.spec import load_machine
from numalign.node.admission import Node


def _spec(**kubelet: Any) -> dict[str, Any]:
    return {"name": "m", "shape": {"sockets": 2, "coresPerNuma": 4, "memoryPerNuma": "8Gi",
                                   "hugepages2MiPerNuma": "1Gi"}, "kubelet": kubelet}


def _error(doc: dict[str, Any]) -> str:
    with pytest.raises(InputError) as e:
        load_machine(doc, "m.yaml")
    msg = str(e.value)
    assert "\n" not in msg
    return msg


@pytest.mark.parametrize("name", ["SingleNUMANodePodLevel", "Restricted", "BestEffort",
                                  "pod-level-single-numa-node", "fastest", "None"])
def test_policy_spellings_the_kubelet_refuses(name: str) -> None:
    msg = _error(_spec(topologyManagerPolicy=name))
    assert msg.startswith(f'm.yaml: kubelet.topologyManagerPolicy: unknown policy: "{name}"')
    assert '"none" "best-effort" "restricted" "single-numa-node"' in msg


@pytest.mark.parametrize("name", ["none", "best-effort", "restricted", "single-numa-node", "dynamic"])
def test_kubelet_policy_names_and_dynamic_are_accepted(name: str) -> None:
    assert load_machine(_spec(topologyManagerPolicy=name)).kubelet.topology_manager_policy == name


def test_empty_policy_and_scope_are_the_kubelet_defaults() -> None:
    kc = load_machine(_spec(topologyManagerPolicy="", topologyManagerScope="")).kubelet
    assert (kc.topology_manager_policy, kc.topology_manager_scope) == ("none", "container")
    # "" did not switch the scope, and "Pod" is no scope
    assert "kubelet.topologyManagerScope: unknown scope" in _error(_spec(topologyManagerScope="Pod"))


def test_policy_option_gates() -> None:
    """Like upstream TestPolicyOptionsAvailable: the node's release decides the option's
    maturity (tests/test_kubelet_releases.py has every release); checked when the node's rules
    are resolved, as the kubelet checks at start-up."""
    from numalign.node.rules import resolve_rules

    def start(doc: dict[str, Any]) -> str:
        with pytest.raises(InputError) as e:
            resolve_rules(load_machine(doc, "m.yaml"))
        assert "\n" not in str(e.value)
        return str(e.value)

    assert resolve_rules(load_machine(_spec(topologyManagerPolicyOptions={"prefer-closest-numa-nodes": "true"})))
    assert "unknown Topology Manager Policy option" in start(
        _spec(topologyManagerPolicyOptions={"no-such-option": "true"}))
    beta = _spec(topologyManagerPolicyOptions={"prefer-closest-numa-nodes": "true"},
                 featureGates={"TopologyManagerPolicyBetaOptions": False}, kubeletVersion="v1.31.0")
    assert "Topology Manager Policy Beta-level Options not enabled" in start(beta)
    beta["kubelet"]["featureGates"] = {}
    assert resolve_rules(load_machine(beta))  # beta gates default to on
    beta["kubelet"]["kubeletVersion"] = "v1.32.0"  # GA there: the gate no longer matters
    beta["kubelet"]["featureGates"] = {"TopologyManagerPolicyBetaOptions": False}
    assert resolve_rules(load_machine(beta))


def test_reserved_memory_must_add_up_with_eviction_hard() -> None:
    base = {"memoryManagerPolicy": "Static", "systemReserved": {"memory": "1Gi"},
            "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1Gi"}}]}
    msg = _error(_spec(**base))  # the kubelet's default evictionHard memory.available is 100Mi
    assert ('kubelet.reservedMemory: the total amount "1Gi" of type "memory" is not equal to the '
            'value "1124Mi" determined by Node Allocatable feature') in msg
    assert load_machine(_spec(**base, evictionHard={"memory.available": "0%"}))
    ok = dict(base, reservedMemory=[{"numaNode": 0, "limits": {"memory": "1024Mi"}},
                                    {"numaNode": 1, "limits": {"memory": "100Mi"}}])
    assert load_machine(_spec(**ok))
    # hugepages reserved by systemReserved must be in reservedMemory too
    hp = dict(ok, systemReserved={"memory": "1Gi", "hugepages-2Mi": "4Mi"})
    assert 'of type "hugepages-2Mi"' in _error(_spec(**hp))
    # the None memory manager checks nothing
    assert load_machine(_spec(reservedMemory=[{"numaNode": 0, "limits": {"memory": "5Mi"}}]))


def test_reserved_memory_limits_and_eviction_hard_values() -> None:
    assert "only [memory hugepages-<HugePageSize>]" in _error(
        _spec(reservedMemory=[{"numaNode": 0, "limits": {"cpu": "1"}}]))
    assert "may not be zero" in _error(_spec(reservedMemory=[{"numaNode": 0, "limits": {"memory": 0}}]))
    assert "unsupported eviction signal" in _error(_spec(evictionHard={"memory.free": "1Gi"}))
    assert "must be positive" in _error(_spec(evictionHard={"memory.available": "0"}))
    assert "must be <= 100%" in _error(_spec(evictionHard={"memory.available": "120%"}))
    assert "kubelet.maxPods" in _error(_spec(maxPods=-1))


def test_shape_and_device_caps_answer_fast() -> None:
    t0 = time.monotonic()
    msg = _error({"shape": {"coresPerNuma": 4096, "threadsPerCore": 4096}})
    assert "m.yaml: shape:" in msg and "65536" in msg
    assert "devices" in _error({"shape": {"sockets": 64, "numaPerSocket": 16, "gpusPerNuma": 4096}})
    assert "65535" in _error(_spec(reservedSystemCPUs="0-99999999999"))
    assert time.monotonic() - t0 < 5


def test_dynamic_node_reads_the_keps_pod_field() -> None:
    from numalign.pods import parse_pods

    node = Node(load_machine(_spec(topologyManagerPolicy="dynamic", cpuManagerPolicy="static",
                                   reservedSystemCPUs="0")))
    doc = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
           "spec": {"topology": {"policy": "single-numa-node"},
                    "containers": [{"name": "c", "resources": {"limits": {"cpu": "5", "memory": "1Gi"}}}]}}
    r = node.admit(parse_pods(doc)[0])
    # 5 CPUs on NUMA nodes of 4: the pod's own single-numa-node refuses it
    assert (r.admitted, r.reason, r.policy) == (False, "TopologyAffinityError", "single-numa-node")
    doc["spec"]["topology"]["policy"] = "best-effort"
    assert node.admit(parse_pods(doc)[0]).admitted


@pytest.mark.parametrize(("text", "capacity", "want"), [
    # float32(10)/100 = 0.10000000149011612: 1 TiB reserves 1,639 bytes more than a tenth
    ("10%", 1 << 40, 109_951_164_416),
    ("7.3%", 3 << 30, 235_149_456),  # 3 bytes fewer than 7.3 % exactly
    ("100Mi", 1 << 40, 100 << 20),
    ("0%", 1 << 40, 0), ("100%", 1 << 40, 0),  # the kubelet ignores exactly these two
    ("100.0%", 1 << 40, 1 << 40),  # ... but not this one
    ("10%%", 1 << 40, 109_951_164_416),  # every trailing % is trimmed
])
def test_eviction_percentages_are_the_kubelets_float32(text: str, capacity: int, want: int) -> None:
    """``parsePercentage``: ``float32(ParseFloat(s, 32)) / 100``; ``GetThresholdQuantity``:
    ``int64(float64(capacity) * float64(percentage))``."""
    from numalign.machine.allocatable import eviction_memory

    kc = load_machine(_spec(evictionHard={"memory.available": text})).kubelet
    assert eviction_memory(kc, capacity) == want


@pytest.mark.parametrize(("text", "message"), [
    ("-5%", "must be >= 0%"), ("100.01%", "must be <= 100%"), ("inf%", "must be <= 100%"),
    ("nan%", "is not a number"), ("1/2%", "invalid percentage"), ("ten%", "invalid percentage"),
    ("1e39%", "value out of range"),
])
def test_eviction_percentages_refused(text: str, message: str) -> None:
    msg = _error(_spec(evictionHard={"memory.available": text}))
    assert message in msg and "kubelet.evictionHard.memory.available" in msg and "\n" not in msg
