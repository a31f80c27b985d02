"""Koordinator's own Topology Manager policy tests, restated as numalign regression tests.

Upstream: koordinator-sh/koordinator at commit a7a1b76bbf81abd26f9c377de1f31a60dd965f6e,
``pkg/scheduler/frameworkext/topologymanager/``: ``policy_test.go`` (the shared
``commonPolicyMergeTestCases``, each policy's ``mergeTestCases``, ``testPolicyMerge``,
``Test_checkExclusivePolicy``, ``Test_filterProvidersHints``), ``policy_none_test.go``,
``policy_best_effort_test.go``, ``policy_restricted_test.go``,
``policy_single_numa_node_test.go``; and ``pkg/util/bitmask/bitmask_test.go`` for the masks'
``String()``.

The merge tables are in ``tests/data/koordinator_policy_cases.json``: one ``numalign merge``
case per upstream case (``"mode": "koordinator"``), ``id`` = the upstream test function and
case name, ``source`` = the line of the case's ``name:`` in the upstream file. ``expect`` holds
what the upstream test asserts, and only that:

* ``TestPolicyNoneMerge``: ``result.IsEqual(expectedHint)`` (affinity and preferred) and
  ``admit``;
* ``TestPolicy{BestEffort,Restricted,SingleNumaNode}Merge`` (``testPolicyMerge``):
  ``reflect.DeepEqual`` of the whole hint - affinity, ``Unsatisfied``, preferred (and a zero
  ``Score``: the cases carry no scores) - and, for Restricted and SingleNUMANode only, the
  reasons (``nil`` is ``[]`` here). ``bestEffortPolicy.mergeTestCases`` lists
  ``expectedReason`` values too, which ``testPolicyMerge`` never compares (one starts with a
  stray ``[``); they are not transcribed. ``policy_best_effort.go`` returns no reasons, which
  :func:`test_best_effort_gives_no_reasons` checks.

Every case is run through :func:`numalign.cli.merge_case.run_case` (what ``numalign merge
--jsonl`` runs) and through :func:`_koordinator`, a literal port of the upstream functions
written here from the Go source, which also checks the transcription.

Go iterates a provider's resources in map order; the upstream expectations do not depend on
it, and both numalign and the port take them in sorted name order.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numalign.cli.merge_case import parse_case, run_case
from numalign.engine.bitmask import go_string, ids_of, mask_of
from numalign.engine.hints import (
    Demand,
    GeneratedHints,
    HintList,
    ProviderHints,
    TopologyHint,
    flatten,
)
from numalign.engine.policies import Policy, TopologyPolicy, _single_numa_only
from numalign.machine.spec import load_machine
from numalign.modes.koordinator.numa import NumaNodeStatus, exclusive_ok
from numalign.modes.koordinator.reasons import (
    first_reaching_unsatisfied,
    resource_summary,
    status_message,
    summaries,
    unsatisfied_reasons,
)
from numalign.modes.registry import Mode, merge
from numalign.node.rules import resolve_rules
from numalign.pods.annotations import Exclusive

DATA = Path(__file__).parent / "data" / "koordinator_policy_cases.json"
CASES: list[dict[str, Any]] = json.loads(DATA.read_text())
CASE_KEYS = {"mode", "policy", "numa_nodes", "providers"}


def _case_input(case: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in case.items() if k in CASE_KEYS}


# ------------------------------------------------------------------ a port of upstream's Go


@dataclass(frozen=True)
class _Hint:
    """NUMATopologyHint (no Score: the cases carry none)."""

    affinity: int | None
    unsatisfied: bool
    preferred: bool


def _go_string(mask: int) -> str:
    """bitmask.String(), line by line (uint64 masks)."""
    grouping = 2
    for shift in range(64 - grouping, 0, -grouping):
        if mask > (1 << shift):
            return format(mask, f"0{shift + grouping}b")
    return format(mask, f"0{grouping}b")


def _summary(resource: str, hints: Sequence[TopologyHint]) -> str:
    """getSummaryForResource."""
    preferred, possible = [], []
    for h in hints:
        raw = "<nil>" if h.affinity is None else _go_string(h.affinity)
        if h.preferred:
            preferred.append(raw)
        possible.append(raw)
    return f"{resource} prefer [{' '.join(preferred)}] among [{' '.join(possible)}]"


def _filter(providers: Sequence[ProviderHints]) -> tuple[list[list[_Hint]], list[str], list[str]]:
    """filterProvidersHints."""
    out: list[list[_Hint]] = []
    reasons: list[str] = []
    summary: list[str] = []
    for hints in providers:
        if not hints:
            out.append([_Hint(None, False, True)])
            continue
        for resource in sorted(hints):
            lst = hints[resource]
            if lst is None:
                out.append([_Hint(None, False, True)])
                continue
            assert not isinstance(lst, GeneratedHints)
            if len(lst) == 0:
                out.append([_Hint(None, True, False)])
                reasons.append(f"Unsatisfied NUMA {resource}")
                continue
            summary.append(_summary(resource, lst))
            out.append([_Hint(h.affinity, False, h.preferred) for h in lst])
    return out, reasons, sorted(summary)


def _merge_permutation(default: int, permutation: Sequence[_Hint]) -> _Hint:
    """mergePermutation."""
    preferred, satisfied, widest = True, True, 0
    affinities: list[int] = []
    for h in permutation:
        if h.affinity is not None:
            affinities.append(h.affinity)
            if h.affinity != affinities[0]:
                preferred = False
            widest = max(widest, h.affinity.bit_count())
        if not h.preferred:
            preferred = False
        if h.unsatisfied:
            satisfied = False
    merged = default
    for a in affinities:
        merged &= a
    satisfied = (not affinities or widest == merged.bit_count()) and satisfied
    return _Hint(merged, not satisfied, preferred)


def _narrower(a: int, b: int) -> bool:
    return (a.bit_count(), a) < (b.bit_count(), b)


def _merge_filtered(default: int, lists: Sequence[Sequence[_Hint]]) -> _Hint:
    """mergeFilteredHints under the Preferred exclusive policy (checkExclusivePolicy passes)."""
    best = _Hint(default, False, False)
    for permutation in itertools.product(*lists):
        merged = _merge_permutation(default, permutation)
        if merged.affinity is None or merged.affinity.bit_count() == 0:
            continue
        if (merged.preferred and not best.preferred) or (merged.preferred == best.preferred and best.affinity is not None and _narrower(
            merged.affinity, best.affinity
        )):
            best = merged
    return best


def _koordinator(policy: str, nodes: Sequence[int], providers: Sequence[ProviderHints]) -> dict[str, Any]:
    """Policy.Merge of policy_none.go / _best_effort.go / _restricted.go / _single_numa_node.go."""
    default = mask_of(nodes)

    def out(h: _Hint, admit: bool, reasons: list[str]) -> dict[str, Any]:
        return {"affinity": None if h.affinity is None else ids_of(h.affinity), "preferred": h.preferred,
                "admit": admit, "unsatisfied": h.unsatisfied, "reasons": reasons}

    if policy == "none":
        return out(_Hint(None, False, False), True, [])
    lists, reasons, summary = _filter(providers)
    if policy == "best-effort":
        best = _merge_filtered(default, lists)
        if best.unsatisfied:
            best = _Hint(default, False, False)
        return out(best, True, [])
    if policy == "restricted":
        if reasons:
            return out(_Hint(default, False, False), False, reasons)
        best = _merge_filtered(default, lists)
        if not best.preferred:
            return out(best, False, ["Unaligned NUMA Hint cause " + " & ".join(summary)])
        return out(best, True, [])
    assert policy == "single-numa-node"
    if reasons:
        return out(_Hint(None, False, False), False, reasons)
    single = [[h for h in lst if h.preferred and (h.affinity is None or h.affinity.bit_count() == 1)]
              for lst in lists]
    best = _merge_filtered(default, single)
    if best.affinity == default:
        best = _Hint(None, False, best.preferred)
    if not best.preferred:
        return out(best, False, ["Unaligned NUMA Hint cause " + ",".join(summary)])
    return out(best, True, [])


def _asserted(result: Mapping[str, Any], expect: Mapping[str, Any]) -> dict[str, Any]:
    return {k: result[k] for k in expect}


# ------------------------------------------------------------------ the data file itself


def test_data_file_shape() -> None:
    ids = [c["id"] for c in CASES]
    assert len(ids) == len(set(ids)), "case ids must be unique"
    per_func: dict[str, int] = {}
    for c in CASES:
        func = c["id"].split("/", 1)[0]
        per_func[func] = per_func.get(func, 0) + 1
    # 9 common cases + 13 / 13 / 12 of the policy's own mergeTestCases
    assert per_func == {"TestPolicyNoneMerge": 3, "TestPolicyBestEffortMerge": 22,
                        "TestPolicyRestrictedMerge": 22, "TestPolicySingleNumaNodeMerge": 21}
    for c in CASES:
        parse_case({k: v for k, v in _case_input(c).items() if k != "mode"})
        assert c["mode"] == "koordinator"
        expected_keys = {"none": {"affinity", "preferred", "admit"},
                         "best-effort": {"affinity", "preferred", "unsatisfied"}}.get(
            c["policy"], {"affinity", "preferred", "unsatisfied", "reasons"})
        assert set(c["expect"]) == expected_keys


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_port_matches_upstream(case: dict[str, Any]) -> None:
    """The Go port reproduces every upstream expectation (and so checks the transcription)."""
    policy, providers = parse_case({k: v for k, v in _case_input(case).items() if k != "mode"})
    got = _koordinator(case["policy"], policy.nodes, providers)
    assert _asserted(got, case["expect"]) == case["expect"]


# ------------------------------------------------------------------ engine vs upstream


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_engine_matches_koordinator(case: dict[str, Any]) -> None:
    got = run_case(_case_input(case))
    assert _asserted(got, case["expect"]) == case["expect"]


@pytest.mark.parametrize("case", [c for c in CASES if c["policy"] == "best-effort"],
                         ids=[c["id"] for c in CASES if c["policy"] == "best-effort"])
def test_best_effort_gives_no_reasons(case: dict[str, Any]) -> None:
    """policy_best_effort.go: ``return bestHint, admit, nil``; it always admits."""
    got = run_case(_case_input(case))
    assert got["reasons"] == [] and got["admit"] is True


def test_rejection_message_is_the_filter_status_message() -> None:
    """manager.go Admit: NewStatus(Unschedulable, reasons...); Status.Message() joins with ", "."""
    two = {"policy": "restricted", "numa_nodes": [0, 1], "mode": "koordinator",
           "providers": [{"cpu": [], "memory": []}]}
    reasons = run_case(two)["reasons"]
    assert reasons == ["Unsatisfied NUMA cpu", "Unsatisfied NUMA memory"]
    assert status_message(reasons) == "Unsatisfied NUMA cpu, Unsatisfied NUMA memory"
    machine = load_machine({"name": "k", "shape": {"sockets": 2, "coresPerNuma": 2},
                            "kubelet": {"topologyManagerPolicy": "restricted"}})
    rules = resolve_rules(machine, Mode.KOORDINATOR)
    assert rules.rejection_message(reasons) == "Unsatisfied NUMA cpu, Unsatisfied NUMA memory"
    assert rules.rejection_message(()) is None  # no words: the kubelet's message stays
    assert resolve_rules(machine, Mode.KUBELET).rejection_message(reasons) is None


# ------------------------------------------------------------------ random cases vs the port

_NODES = st.sampled_from([(0, 1), (0, 1, 2), (0, 1, 2, 3)])


@st.composite
def _providers(draw: st.DrawFn, nodes: tuple[int, ...], unaligned: bool = False) -> list[ProviderHints]:
    """Random provider answers; ``unaligned``: mostly non-preferred hints and no empty answer
    (the shapes whose best hint is non-preferred and narrower than all nodes)."""
    some = st.integers(1, mask_of(nodes))
    masks = st.one_of(some, some, some, st.none())  # mostly a mask, sometimes "any node"
    preferred = st.one_of(st.just(False), st.just(False), st.booleans()) if unaligned else st.booleans()
    hint = st.builds(TopologyHint, masks, preferred)
    hints = st.lists(hint, min_size=1, max_size=3)
    answer = st.one_of(hints, hints, hints, hints, st.none(), *(() if unaligned else (st.just([]),)))
    provider = st.one_of(st.dictionaries(st.sampled_from(["a", "b", "c"]), answer, min_size=1, max_size=2),
                         st.none())
    return draw(st.lists(provider, min_size=1, max_size=3))


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_engine_agrees_with_the_port(data: st.DataObject) -> None:
    """Wherever numalign's merged hint is Koordinator's, so are the flag, admit and reasons.

    (Among non-preferred masks numalign keeps the kubelet's ranking, Koordinator's fold the
    narrowest mask, docs/schedulers.md; there the hints can differ.)"""
    nodes = data.draw(_NODES)
    policy = data.draw(st.sampled_from(["none", "best-effort", "restricted", "single-numa-node"]))
    providers = data.draw(_providers(nodes, unaligned=data.draw(st.booleans())))
    want = _koordinator(policy, nodes, providers)
    got = merge(Mode.KOORDINATOR, TopologyPolicy(Policy(policy), nodes), providers)
    if policy == "best-effort" or (got.hint.affinity is None) != (want["affinity"] is None) or (
        got.hint.affinity is not None and ids_of(got.hint.affinity) != want["affinity"]
    ) or got.hint.preferred != want["preferred"]:
        return  # best-effort's fallback depends on which mask was chosen: see the next test
    assert (got.unsatisfied, got.admit, list(got.reasons)) == (
        want["unsatisfied"], want["admit"], want["reasons"])


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_first_reaching_unsatisfied_is_koordinators_flag(data: st.DataObject) -> None:
    """Given Koordinator's own best mask, the flag is the one its fold keeps."""
    nodes = data.draw(_NODES)
    providers = data.draw(_providers(nodes, unaligned=True))
    default = mask_of(nodes)
    lists, reasons, _ = _filter(providers)
    best = _merge_filtered(default, lists)
    if reasons or best.preferred or best.affinity in (None, default):
        return  # answered before the search (merge._koordinator)
    assert best.affinity is not None
    assert first_reaching_unsatisfied(flatten(providers), best.affinity, default) is best.unsatisfied


@st.composite
def _generated(draw: st.DrawFn, nodes: tuple[int, ...]) -> GeneratedHints:
    """A monotone family inside a universe: at least k of the nodes in S (preferred: k nodes),
    plus a few extra masks outside the universe."""
    universe = draw(st.integers(1, mask_of(nodes)))
    s = draw(st.integers(1, mask_of(nodes)))
    k = draw(st.integers(1, s.bit_count()))
    extra = draw(st.frozensets(st.integers(1, mask_of(nodes)).filter(lambda m: m & ~universe != 0), max_size=2))
    return GeneratedHints(nodes, universe, lambda m: (m & s).bit_count() >= k, k, extra)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_generated_lists_read_as_their_listing(data: st.DataObject) -> None:
    """A generated family answers as the list it stands for (IterateBitMasks order)."""
    nodes = data.draw(_NODES)
    lists: list[HintList] = [data.draw(_generated(nodes)) for _ in range(data.draw(st.integers(1, 3)))]
    listed = [lst.materialize() for lst in lists if isinstance(lst, GeneratedHints)]
    default = mask_of(nodes)
    assert resource_summary("r", lists[0]) == resource_summary("r", listed[0])
    reached = {_and(default, p) for p in itertools.product(*listed)} - {0, default}
    if not reached:
        return
    mask = data.draw(st.sampled_from(sorted(reached)))
    assert first_reaching_unsatisfied(lists, mask, default) is first_reaching_unsatisfied(listed, mask, default)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_demand_families_summarise_as_their_listing(data: st.DataObject) -> None:
    """A family carrying its rule as data (the managers' Demand, listed once per identical
    node) prints the summary of the list it stands for, extra masks inside the universe too."""
    nodes = data.draw(_NODES)
    full = mask_of(nodes)
    amounts = {n: [data.draw(st.integers(0, 4))] for n in nodes}
    need = data.draw(st.integers(0, 8))
    touch = data.draw(st.lists(st.integers(1, full), max_size=2))
    lonely = data.draw(st.integers(0, full))
    demand = Demand.per_node(amounts, [need], touch, lonely)
    universe = data.draw(st.integers(1, full))
    extra = data.draw(st.frozensets(st.integers(1, full), max_size=3))
    k = data.draw(st.integers(1, len(nodes)))
    gen = GeneratedHints(nodes, universe, demand.feasible, k, extra, demand=demand)
    assert resource_summary("r", gen) == resource_summary("r", gen.materialize())


def _and(default: int, permutation: Sequence[TopologyHint]) -> int:
    out = default
    for h in permutation:
        if h.affinity is not None:
            out &= h.affinity
    return out


# ------------------------------------------------------------------ canAdmitPodResult, Name


@pytest.mark.parametrize(
    ("policy", "preferred", "admit"),
    [
        pytest.param("none", False, True, id="TestPolicyNoneCanAdmitPodResult/Preferred is set to false in topology hints"),
        pytest.param("none", True, True, id="TestPolicyNoneCanAdmitPodResult/Preferred is set to true in topology hints"),
        pytest.param("best-effort", False, True,
                     id="TestPolicyBestEffortCanAdmitPodResult/Preferred is set to false in topology hints"),
        pytest.param("best-effort", True, True,
                     id="TestPolicyBestEffortCanAdmitPodResult/Preferred is set to true in topology hints"),
        pytest.param("restricted", False, False,
                     id="TestPolicyRestrictedCanAdmitPodResult/Preferred is set to false in topology hints"),
        pytest.param("restricted", True, True,
                     id="TestPolicyRestrictedCanAdmitPodResult/Preferred is set to true in topology hints"),
        pytest.param("single-numa-node", False, False,
                     id="TestPolicySingleNumaNodeCanAdmitPodResult/Preferred is set to false in topology hints"),
    ],
)
def test_can_admit_pod_result(policy: str, preferred: bool, admit: bool) -> None:
    """canAdmitPodResult(NUMATopologyHint{nil, false, preferred, 0}), on NUMA nodes 0-1: one
    provider answering exactly that hint makes the merged hint carry its preference."""
    got = merge(Mode.KOORDINATOR, TopologyPolicy(Policy(policy), (0, 1)), [{"resource": [TopologyHint(None, preferred)]}])
    assert got.admit is admit


@pytest.mark.parametrize(("policy", "name"), [(Policy.NONE, "none"), (Policy.RESTRICTED, "restricted")],
                         ids=["TestPolicyNoneName/New None Policy", "TestPolicyRestrictedName/New Restricted Policy"])
def test_policy_name(policy: Policy, name: str) -> None:
    assert policy.value == name
    assert run_case({"policy": name, "numa_nodes": [0, 1], "mode": "koordinator"})["admit"] is True


# ------------------------------------------------------------------ TestPolicySingleNumaNodeFilterHints


def _h(ids: tuple[int, ...] | None, preferred: bool) -> TopologyHint:
    return TopologyHint(None if ids is None else mask_of(ids), preferred)


FILTER_HINTS: list[tuple[str, list[list[TopologyHint]], list[list[TopologyHint]]]] = [
    ("filter empty resources", [], []),
    ("filter hints with nil socket mask 1/2", [[_h(None, False)], [_h(None, True)]], [[], [_h(None, True)]]),
    ("filter hints with nil socket mask 2/2",
     [[_h((0,), True), _h(None, False)], [_h((1,), True), _h(None, True)]],
     [[_h((0,), True)], [_h((1,), True), _h(None, True)]]),
    ("filter hints with empty resource socket mask",
     [[_h((1,), True), _h((0,), True), _h(None, False)], []],
     [[_h((1,), True), _h((0,), True)], []]),
    ("filter hints with wide sockemask",
     [[_h((0,), True), _h((1,), True), _h((1, 2), False), _h((0, 1, 2), False), _h(None, False)],
      [_h((1, 2), False), _h((0, 1, 2), False), _h((0, 2), False), _h((3,), False)],
      [_h((1, 2), False), _h((0, 1, 2), False), _h((0, 2), False)]],
     [[_h((0,), True), _h((1,), True)], [], []]),
]


@pytest.mark.parametrize(("resources", "expected"), [pytest.param(r, e, id=n) for n, r, e in FILTER_HINTS])
def test_filter_single_numa_hints(resources: list[list[TopologyHint]], expected: list[list[TopologyHint]]) -> None:
    """filterSingleNumaHints is the kubelet's filter, which the koordinator mode's merge runs
    (Go returns nil slices for emptied lists; an empty list is the same "no hint")."""
    assert [_single_numa_only(r) for r in resources] == expected


# ------------------------------------------------------------------ Test_checkExclusivePolicy

S, SH, IDLE = NumaNodeStatus.SINGLE, NumaNodeStatus.SHARED, NumaNodeStatus.IDLE
P, R = Exclusive.PREFERRED, Exclusive.REQUIRED

CHECK_EXCLUSIVE = [
    ("preferred policy 1", (0,), P, [SH, SH], True),
    ("preferred policy 2", (0, 1), P, [SH, SH], True),
    ("preferred policy 3", (0,), P, [IDLE, S], True),
    ("preferred policy 4", (0, 1), P, [IDLE, S], True),
    ("required policy 1", (0,), R, [IDLE, S], True),
    ("required policy 2", (0,), R, [SH, S], False),
    ("required policy 3", (0,), R, [SH, SH], False),
    ("required policy 4", (0,), R, [S, SH], True),
    ("required policy 5", (0, 1), R, [SH, S], False),
    ("required policy 6", (0, 1), R, [SH, IDLE], True),
    ("required policy 7", (0, 1), R, [SH, SH], True),
]


@pytest.mark.parametrize(("ids", "exclusive", "status", "want"),
                         [pytest.param(*c[1:], id=c[0]) for c in CHECK_EXCLUSIVE])
def test_check_exclusive_policy(ids: tuple[int, ...], exclusive: Exclusive, status: list[NumaNodeStatus],
                                want: bool) -> None:
    assert exclusive_ok(mask_of(ids), exclusive, dict(enumerate(status))) is want


# ------------------------------------------------------------------ Test_filterProvidersHints


@pytest.mark.parametrize(
    ("providers", "lists", "reasons", "summary"),
    [
        pytest.param([{"resource1": [_h((0,), True)]}, {"resource2": [_h((0,), True)]}],
                     [[_h((0,), True)], [_h((0,), True)]], [],
                     ["resource1 prefer [01] among [01]", "resource2 prefer [01] among [01]"],
                     id="Two providers, 1 hint each, same mask, both preferred 1/2"),
        pytest.param([{"resource1": [_h((0,), True)]}, {"resource2": [_h((1,), True)]}],
                     [[_h((0,), True)], [_h((1,), True)]], [],
                     ["resource1 prefer [01] among [01]", "resource2 prefer [10] among [10]"],
                     id="Two providers, 1 hint each, no common mask"),
        pytest.param([{"resource": []}], [[_h(None, False)]], ["Unsatisfied NUMA resource"], [],
                     id="NUMATopologyHintProvider returns empty non-nil map[string][]NUMATopologyHint from provider"),
    ],
)
def test_filter_providers_hints(providers: list[ProviderHints], lists: list[list[TopologyHint]],
                                reasons: list[str], summary: list[str]) -> None:
    # the "cannot satisfy" placeholder is {nil, Unsatisfied, not preferred} upstream; numalign
    # lists it as (None, not preferred) and tells it from a provider's own hint by the empty answer
    assert [list(x) for x in flatten(providers)] == lists
    assert list(unsatisfied_reasons(providers)) == reasons
    assert summaries(providers) == summary


# ------------------------------------------------------------------ bitmask String()


@pytest.mark.parametrize(
    ("ids", "text"),
    [
        pytest.param((), "00", id="TestNewEmptyiBitMask/New empty BitMask"),
        pytest.param((0,), "01", id="TestNewBitMask/New BitMask with bit 0 set"),
        pytest.param((1,), "10", id="TestNewBitMask/New BitMask with bit 1 set"),
        pytest.param((0, 1), "11", id="TestNewBitMask/New BitMask with bit 0 and bit 1 set"),
        pytest.param((3,), "1000", id="TestAnd/Mask 1111 AND mask 1110 AND mask 1100 AND mask 1000"),
        pytest.param((0, 1, 2, 3), "1111", id="TestOr/Mask 1000 OR mask 0100 OR mask 0010 OR mask 0001"),
        pytest.param(tuple(range(64)), "1" * 64, id="TestFill/Fill empty mask"),
    ],
)
def test_bitmask_string(ids: tuple[int, ...], text: str) -> None:
    assert go_string(mask_of(ids)) == text


@pytest.mark.parametrize(("ids", "text"), [((2,), "100"), ((0, 2), "0101"), ((4,), "10000"),
                                           ((0, 4), "010001"), ((63,), "1" + "0" * 63)])
def test_bitmask_string_pads_only_above_a_power_of_four(ids: tuple[int, ...], text: str) -> None:
    """String() compares ``mask > 1 << shift`` strictly (read from the code, not an upstream
    table): {2} = 4 is not above 1 << 2 and prints unpadded."""
    assert go_string(mask_of(ids)) == text


@given(st.integers(0, (1 << 64) - 1))
def test_bitmask_string_is_the_go_loop(mask: int) -> None:
    assert go_string(mask) == _go_string(mask)
