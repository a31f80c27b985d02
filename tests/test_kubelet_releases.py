"""Kubelet releases (issue 25): each row of docs/kubelet-releases.md per modelled release, the
upstream test tables of the releases where they changed (tests/data/kubelet_releases/), how a
release is known, and start-up refusals in the kubelet's words."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from numalign.engine.policies import MAX_ALLOWABLE, PREFER_CLOSEST
from numalign.errors import InputError
from numalign.machine.kubelet_version import parse_kubelet_version
from numalign.machine.spec import load_machine
from numalign.modes.kubelet import releases as rel
from numalign.node.rules import AdmissionStep, resolve_rules
from numalign.resources import cpu

DATA = Path(__file__).parent / "data" / "kubelet_releases"
MINORS = list(rel.RELEASES)


def _table(name: str) -> Any:
    return json.loads((DATA / name).read_text())


def _spec(minor: int | None, **kubelet: Any) -> dict[str, Any]:
    if minor is not None:
        kubelet["kubeletVersion"] = f"v1.{minor}.3"
    return {"name": "m", "shape": {"sockets": 2, "coresPerNuma": 4, "memoryPerNuma": "8Gi"},
            "kubelet": kubelet}


def _start(minor: int | None, **kubelet: Any) -> str | None:
    """None when the node's kubelet starts, else its one-line refusal."""
    try:
        resolve_rules(load_machine(_spec(minor, **kubelet)))
    except InputError as e:
        assert "\n" not in str(e)
        return str(e)
    return None


# ------------------------------------------------------------------ how a release is known


@pytest.mark.parametrize(("text", "minor", "patch"), [
    ("v1.33.4", 33, 4), ("1.33", 33, None), ("v1.34.4+k3s1", 34, 4),
    ("v1.33.4-eks-3025e55", 33, 4), ("v1.36.0-rc.1", 36, 0)])
def test_versions_nodes_report(text: str, minor: int, patch: int | None) -> None:
    v = parse_kubelet_version(text)
    assert (v.major, v.minor, v.patch) == (1, minor, patch)


@pytest.mark.parametrize("text", ["", "v1", "1.x", "v2.0.0", "v1.33.4 ", "vv1.2", "1.033", "v1." + "9" * 5])
def test_malformed_versions_are_one_line_errors_naming_the_field(text: str) -> None:
    with pytest.raises(InputError) as e:
        load_machine(_spec(None, kubeletVersion=text))
    assert str(e.value).startswith("machine: kubelet.kubeletVersion: ") and "\n" not in str(e.value)


@given(st.one_of(st.text(max_size=40), st.integers(), st.none(), st.lists(st.integers(), max_size=2)))
def test_any_value_parses_or_is_refused_by_field(value: object) -> None:
    try:
        v = parse_kubelet_version(value, "--kubelet-version")
    except InputError as e:
        assert e.field == "--kubelet-version"
        return
    assert v.major == 1 and str(v).startswith("v1.")


def test_missing_newer_and_older_versions() -> None:
    newest = rel.RELEASES[rel.NEWEST]
    got = resolve_rules(load_machine(_spec(None))).release
    assert got.release is newest and got.version is None
    assert got.how == f"no kubelet version given: decided as {newest.name}, the newest release numalign models"
    newer = resolve_rules(load_machine(_spec(rel.NEWEST + 2))).release
    assert newer.release is newest and "newer than the newest" in newer.how
    msg = _start(rel.OLDEST - 1)
    assert msg is not None and msg.startswith("kubelet.kubeletVersion: v1.27.3 is older than")


def test_a_kubelet_configuration_keeps_the_specs_version() -> None:
    from numalign.machine.kubelet_config import with_kubelet_configuration

    m = with_kubelet_configuration(load_machine(_spec(30)), {"topologyManagerPolicy": "restricted"}, "k.yaml")
    assert str(m.kubelet.kubelet_version) == "v1.30.3"


# ------------------------------------------------------------------ options and gates, per release


@pytest.mark.parametrize("minor", MINORS)
@pytest.mark.parametrize("option", [PREFER_CLOSEST, MAX_ALLOWABLE])
def test_topology_manager_options_per_release(minor: int, option: str) -> None:
    level = rel.TM_OPTIONS[option].get(minor)
    value = "true" if option == PREFER_CLOSEST else "8"
    msg = _start(minor, topologyManagerPolicy="restricted", topologyManagerPolicyOptions={option: value})
    if level is None:
        assert msg is not None and f'unknown Topology Manager Policy option: "{option}"' in msg
        assert f"(kubelet v1.{minor} refuses to start)" in msg
        return
    assert msg is None
    off = _start(minor, topologyManagerPolicyOptions={option: value},
                 featureGates={"TopologyManagerPolicyBetaOptions": False})
    if level != "beta":
        assert off is None
        return
    # the wording changed to lower case in 1.32 (policy_options_test.go @3ee28e97)
    words = "Topology Manager Policy Beta-level Options not enabled"
    assert off is not None and (words.lower() if minor >= 32 else words) in off


@pytest.mark.parametrize("minor", MINORS)
@pytest.mark.parametrize("option", sorted(rel.CPU_OPTIONS))
def test_cpu_manager_options_per_release(minor: int, option: str) -> None:
    level = rel.CPU_OPTIONS[option].get(minor)
    base = {"cpuManagerPolicy": "static", "reservedSystemCPUs": "0",
            "cpuManagerPolicyOptions": {option: "true"}}
    msg = _start(minor, **base)
    if level is None:
        assert msg is not None and f'unknown CPU Manager Policy option: "{option}"' in msg
    elif level == "alpha":
        assert msg is not None and "CPU Manager Policy Alpha-level Options not enabled" in msg
        assert _start(minor, **base, featureGates={"CPUManagerPolicyAlphaOptions": True}) is None
    else:
        assert msg is None
        off = _start(minor, **base, featureGates={"CPUManagerPolicyBetaOptions": False})
        assert (off is not None) == (level == "beta")


def test_an_option_alpha_in_its_release_but_beta_later_starts_with_the_alpha_gate() -> None:
    """distribute-cpus-across-numa is alpha in 1.32 and beta in 1.33: with the alpha gate on and
    the beta gate off, 1.32 starts and 1.33 refuses (the managers do not re-check newest gates)."""
    gates = {"CPUManagerPolicyAlphaOptions": True, "CPUManagerPolicyBetaOptions": False}
    base = {"cpuManagerPolicy": "static", "reservedSystemCPUs": "0",
            "cpuManagerPolicyOptions": {"distribute-cpus-across-numa": "true"}, "featureGates": gates}
    assert _start(32, **base) is None
    assert "Beta-level Options not enabled" in (_start(33, **base) or "")


@pytest.mark.parametrize("minor", MINORS)
def test_locked_gates_per_release(minor: int) -> None:
    msg = _start(minor, featureGates={"MemoryManager": False})
    if minor >= 32:
        assert msg == (f"kubelet.featureGates.MemoryManager: cannot set feature gate MemoryManager to "
                       f"false, feature is locked to true (kubelet v1.{minor})")
    else:
        assert msg is None
    opts = {"cpuManagerPolicy": "static", "reservedSystemCPUs": "0",
            "cpuManagerPolicyOptions": {"full-pcpus-only": "true"},
            "featureGates": {"CPUManagerPolicyOptions": False}}
    msg = _start(minor, **opts)
    assert msg is not None
    if minor >= 33:
        assert "feature is locked to true" in msg
    else:
        assert 'CPU Manager policy options map[full-pcpus-only:true] require feature gates "CPUManager", ' \
               '"CPUManagerPolicyOptions" enabled' in msg


@pytest.mark.parametrize("minor", MINORS)
def test_options_gate_errors_per_release(minor: int) -> None:
    """The "options require feature gates" refusals of cmd/kubelet/app/server.go, in full (the
    text @4a0608cb): one gate named for the Topology Manager, two for the CPU manager while its
    options gate can be switched off (to 1.32), the locked-gate refusal from 1.33."""
    tm = _start(minor, topologyManagerPolicyOptions={MAX_ALLOWABLE: "8", PREFER_CLOSEST: "true"},
                featureGates={"TopologyManagerPolicyOptions": False})
    assert tm == ('kubelet.topologyManagerPolicyOptions: topology manager policy options '
                  'map[max-allowable-numa-nodes:8 prefer-closest-numa-nodes:true] require feature gates '
                  f'"TopologyManagerPolicyOptions" enabled (kubelet v1.{minor} refuses to start)')
    cpu_msg = _start(minor, cpuManagerPolicy="static", reservedSystemCPUs="0",
                     cpuManagerPolicyOptions={"full-pcpus-only": "true", "align-by-socket": "false"},
                     featureGates={"CPUManagerPolicyOptions": False})
    if rel.RELEASES[minor].gates[rel.CPU_OPTIONS_GATE].locked:
        assert cpu_msg == ("kubelet.featureGates.CPUManagerPolicyOptions: cannot set feature gate "
                           f"CPUManagerPolicyOptions to false, feature is locked to true (kubelet v1.{minor})")
    else:
        assert cpu_msg == ('kubelet.cpuManagerPolicyOptions: CPU Manager policy options '
                           'map[align-by-socket:false full-pcpus-only:true] require feature gates '
                           f'"CPUManager", "CPUManagerPolicyOptions" enabled (kubelet v1.{minor} refuses to start)')


@pytest.mark.parametrize("minor", [m for m in MINORS if rel.TM_OPTIONS[MAX_ALLOWABLE].get(m) == "beta"])
def test_topology_manager_gate_error_wording_per_release(minor: int) -> None:
    """CheckPolicyOptionAvailable's words, in full: Capitalised to 1.31, lower case from 1.32
    (policy_options_test.go @4a0608cb and @3ee28e97)."""
    msg = _start(minor, topologyManagerPolicyOptions={MAX_ALLOWABLE: "8"},
                 featureGates={"TopologyManagerPolicyBetaOptions": False})
    words = "Topology Manager Policy Beta-level Options not enabled"
    if minor >= 32:
        words = words.lower()
    assert msg == (f'kubelet.topologyManagerPolicyOptions.max-allowable-numa-nodes: {words}, but option '
                   '"max-allowable-numa-nodes" provided (featureGates TopologyManagerPolicyBetaOptions: '
                   f'false) (kubelet v1.{minor} refuses to start)')


@pytest.mark.parametrize(("value", "ok"), [("7", False), ("8", True), ("34", True), ("x", False)])
def test_max_allowable_value_on_releases_that_know_it(value: str, ok: bool) -> None:
    """Upstream refuses values below 8 and accepts 8 (the default) and above; the issue's
    "must be > 8" is not what policy_options.go checks."""
    for minor in (31, 35):
        msg = _start(minor, topologyManagerPolicyOptions={MAX_ALLOWABLE: value})
        assert (msg is None) == ok


# ------------------------------------------------------------------ transcribed upstream tables


def _tm_cases(name: str, minor: int) -> list[Any]:
    return [pytest.param(minor, c, id=f"v1.{minor}/{c['description']}")
            for c in _table(name)["TestNewTopologyManagerOptions"]
            if not any(o.startswith("fancy-") for o in c["options"])]


@pytest.mark.parametrize(("minor", "case"), [
    *_tm_cases("topologymanager_policy_options_1.28-1.30.json", 28),
    *_tm_cases("topologymanager_policy_options_1.28-1.30.json", 30),
    *_tm_cases("topologymanager_policy_options_1.32-1.34.json", 32),
    *_tm_cases("topologymanager_policy_options_1.32-1.34.json", 34)])
def test_upstream_new_topology_manager_options(minor: int, case: dict[str, Any]) -> None:
    """TestNewTopologyManagerOptions of the releases whose table changed (the fake options the
    upstream test injects into the sets are left out: no release knows them)."""
    from numalign.engine.policies import parse_options

    r = rel.RELEASES[minor]
    gates = {**r.gate_defaults(), **case["gates"]}
    if "expected_error_substring" in case:
        with pytest.raises(InputError) as e:
            parse_options(case["options"], "o", gates, r.tm_options)
        assert case["expected_error_substring"] in e.value.problem
        return
    got = parse_options(case["options"], "o", gates, r.tm_options)
    want = case["expected"]
    assert got.prefer_closest == want["PreferClosestNUMA"]
    assert got.max_allowable_numa_nodes == want.get("MaxAllowableNUMANodes", 8)


@pytest.mark.parametrize(("minor", "case"), [
    pytest.param(m, c, id=f"v1.{m}/{c['option']}/{sorted(c.get('gates', {}).items())}")
    for name, minors in (("topologymanager_policy_options_1.28-1.30.json", (28, 29, 30)),
                         ("topologymanager_policy_options_1.32-1.34.json", (32, 33, 34)))
    for m in minors
    for c in _table(name)["TestPolicyDefaultsAvailable"] + _table(name)["TestPolicyOptionsAvailable"]
    if not c["option"].startswith("fancy-")])
def test_upstream_policy_options_available(minor: int, case: dict[str, Any]) -> None:
    r = rel.RELEASES[minor]
    try:
        r.tm_options.check(case["option"], {**r.gate_defaults(), **case.get("gates", {})})
    except InputError:
        assert not case["expected_available"]
    else:
        assert case["expected_available"]


_CPU31 = _table("cpumanager_policy_options_1.31.json")


@pytest.mark.parametrize("case", _CPU31["TestPolicyDefaultsAvailable"] + _CPU31["TestPolicyOptionsAvailable"],
                         ids=lambda c: f"{c['option']}/{sorted(c.get('gates', {}).items())}")
def test_upstream_cpu_policy_options_available_1_31(case: dict[str, Any]) -> None:
    r = rel.RELEASES[31]
    gates = {**r.gate_defaults(), **case.get("gates", {})}
    try:
        r.cpu_options.check(case["option"], gates)
    except InputError:
        assert not case["expected_available"]
    else:
        assert case["expected_available"]


@pytest.mark.parametrize("case", _CPU31["TestPolicyOptionsCompatibility"], ids=lambda c: c["description"])
def test_upstream_cpu_policy_options_compatibility_1_31(case: dict[str, Any]) -> None:
    r = rel.RELEASES[31]
    gates = {**r.gate_defaults(), case["gate_enabled"]: True}
    if case["expected_error"]:
        with pytest.raises(InputError) as e:
            cpu.parse_static_policy_options(case["options"], gates, r.cpu_options)
        assert e.value.problem == case["kubelet_error"]
    else:
        cpu.parse_static_policy_options(case["options"], gates, r.cpu_options)


# ------------------------------------------------------------------ merge and admission chain rows


@pytest.mark.parametrize("minor", MINORS)
def test_merge_and_admission_chain_rows(minor: int) -> None:
    rules = resolve_rules(load_machine(_spec(minor, topologyManagerPolicy="restricted")))
    r = rules.release.release
    assert r.merge == "equal-affinity" and r.memory_hints == "all-numa-nodes"
    assert rules.chain == (AdmissionStep.TOPOLOGY_MANAGER, AdmissionStep.PREDICATES)
    assert r.device_hints is (rel.DeviceHints.DEVICE_NUMA_NODES if minor >= 36
                              else rel.DeviceHints.ALL_NUMA_NODES)


def test_the_exported_nrt_carries_the_release_and_the_extender_reads_it() -> None:

    from numalign.kube.nrt_import import ATTR_KUBELET_VERSION, engine_from_nrt
    from numalign.kube.topology import build_nrt
    from numalign.node.admission import Node

    m = load_machine(_spec(33, cpuManagerPolicy="static", reservedSystemCPUs="0"))
    doc = build_nrt(Node(m))
    assert {"name": ATTR_KUBELET_VERSION, "value": "v1.33.3"} in doc["attributes"]
    assert engine_from_nrt(doc).rules.release.release is rel.RELEASES[33]
    unknown = build_nrt(Node(m.replace(kubelet=m.kubelet.replace(kubelet_version=None))))
    assert all(a["name"] != ATTR_KUBELET_VERSION for a in unknown["attributes"])
    assert engine_from_nrt(unknown).rules.release.release is rel.RELEASES[rel.NEWEST]
    for a in doc["attributes"]:
        if a["name"] == ATTR_KUBELET_VERSION:
            a["value"] = "1.x"
    with pytest.raises(InputError, match=f"attributes.{ATTR_KUBELET_VERSION}: '1.x' is not"):
        engine_from_nrt(doc)


# ------------------------------------------------------------------ the docs table is the model

_DOCS = Path(__file__).parent.parent / "docs" / "kubelet-releases.md"
#: the table's maturity marks (alpha, beta, GA, en dash = unknown to the release)
_LEVEL = {"\u03b1": "alpha", "\u03b2": "beta", "GA": "stable", "\u2013": None}


def _docs_rows() -> dict[str, list[str]]:
    """docs/kubelet-releases.md's release-by-behaviour rows: name -> one cell per modelled
    release, the \\* (not confirmed in source) taken off."""
    rows: dict[str, list[str]] = {}
    for line in _DOCS.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == len(MINORS) + 2 and cells[0] not in ("behaviour", "---"):
            rows[cells[0]] = [c.replace("\\*", "").strip() for c in cells[1:-1]]
    return rows


def test_the_docs_table_says_what_the_model_decides() -> None:
    """Every option, wording, gate and hint row of the table, release by release, against the
    rows in releases.py (a cell changed in one and not the other fails here)."""
    rows = _docs_rows()
    for prefix, table in (("TM", rel.TM_OPTIONS), ("CPU", rel.CPU_OPTIONS)):
        for option, by_minor in table.items():
            cells = rows[f"{prefix} `{option}`"]
            assert [_LEVEL[c] for c in cells] == [by_minor.get(m) for m in MINORS], option
    wording = rows["TM gate error wording (`policy_options.go`)"]
    assert [c.startswith("lower") for c in wording] == [rel.RELEASES[m].tm_options.lower_case for m in MINORS]
    for gate, row in ((rel.CPU_OPTIONS_GATE, "gate `CPUManagerPolicyOptions`"),
                      (rel.MEMORY_MANAGER_GATE, "gate `MemoryManager` (memory manager)"),
                      (rel.TM_OPTIONS_GATE, "gate `TopologyManagerPolicyOptions`")):
        got = [("locked" in c, "on" in c or "locked" in c) for c in rows[row]]
        want = [(rel.RELEASES[m].gates[gate].locked, rel.RELEASES[m].gates[gate].default) for m in MINORS]
        assert got == want, gate
    devices = rows["device manager hints: NUMA nodes enumerated"]
    assert [c == "all" for c in devices] == [
        rel.RELEASES[m].device_hints is rel.DeviceHints.ALL_NUMA_NODES for m in MINORS]
    assert all(c == "1 gate" for c in rows["TM options-gate error (`server.go`)"])
