"""The kubelet's own Topology Manager test tables, restated as numalign regression tests.

Upstream: kubernetes/kubernetes ``pkg/kubelet/cm/topologymanager/`` - ``policy_test.go``,
``policy_best_effort_test.go``, ``policy_restricted_test.go``, ``policy_single_numa_node_test.go``,
``policy_options_test.go``, ``numa_info_test.go``, ``topology_manager_test.go``. The merge tables
live in ``tests/data/kubelet_policy_cases.json`` (one ``numalign merge`` case per upstream case,
plus ``id``/``source``/``expect``); the smaller tables are restated inline below.

Every merge case runs twice: through the engine (:func:`numalign.cli.merge_case.run_case`) and
through an independent oracle - the literal product fold (:func:`numalign.engine.reference.product_fold`)
plus the policies' post-processing written out here from the spec, for every Go map iteration
order of each provider's resources.

Version notes: the stored copies of ``policy_test.go`` (4 versions read: a pre-contextual-logging
one and three newest ones from score/allocation-strategy PR branches) agree on every merge table
used here; the score/strategy-only tests (``TestAggregateHintScores``, ``TestCompareHintScores``
...) are PR-only (spec section 9) and are not transcribed. ``TestPolicySingleNumaNodeMerge`` uses
the newest layout (4-node ``commonNUMAInfoFourNodes``); the older 2-node layout of the same
tables is kept as ``TestPolicySingleNumaNodeMerge[2 NUMA nodes]`` (its expectations are equal).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from numalign.cli.merge_case import parse_case, run_case
from numalign.engine.bitmask import ids_of, mask_of
from numalign.engine.hints import HintList, ProviderHints, TopologyHint, flatten
from numalign.engine.merge import NARROWEST, FitOrder, _View, non_preferred_key, preferred_key
from numalign.engine.policies import (
    Policy,
    PolicyOptions,
    TopologyPolicy,
    _single_numa_only,
    parse_options,
    parse_policy,
    parse_scope,
)
from numalign.engine.reference import _compare, _fitter, _narrowest_count, product_fold
from numalign.errors import InputError

DATA = Path(__file__).parent / "data" / "kubelet_policy_cases.json"
CASES: list[dict[str, Any]] = json.loads(DATA.read_text())
CASE_KEYS = {"policy", "numa_nodes", "distances", "options", "providers", "scope"}

#: Engine results that differ from upstream, with the reason (strict xfail). None found so far.
ENGINE_XFAIL: dict[str, str] = {}


def _case_input(case: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in case.items() if k in CASE_KEYS}


def _params() -> list[Any]:
    out = []
    for c in CASES:
        marks = []
        if c["id"] in ENGINE_XFAIL:
            marks.append(pytest.mark.xfail(strict=True, reason=ENGINE_XFAIL[c["id"]]))
        out.append(pytest.param(c, id=c["id"], marks=marks))
    return out


def _check(actual: Mapping[str, Any], expect: Mapping[str, Any]) -> None:
    # TestAdmit cases state only the admit decision upstream; the others state all three.
    got = {k: actual[k] for k in expect}
    assert got == dict(expect)


# ------------------------------------------------------------------ the data file itself


def test_data_file_shape() -> None:
    ids = [c["id"] for c in CASES]
    assert len(ids) == len(set(ids)), "case ids must be unique"
    per_func: dict[str, int] = {}
    for c in CASES:
        per_func[c["id"].split("/", 1)[0]] = per_func.get(c["id"].split("/", 1)[0], 0) + 1
    # 9 common + 17 best-effort + 2 no-policies (+4 closest instead of the 2) per BE/restricted
    assert per_func == {
        "TestPolicyBestEffortMerge": 28,
        "TestPolicyBestEffortMergeClosestNUMA": 30,
        "TestPolicyRestrictedMerge": 28,
        "TestPolicyRestrictedMergeClosestNUMA": 30,
        "TestPolicySingleNumaNodeMerge": 21,
        "TestPolicySingleNumaNodeMerge[2 NUMA nodes]": 21,
        "TestPolicyNoneMerge": 3,
        "TestAdmit": 14,
    }
    for c in CASES:
        parse_case(_case_input(c))  # every case is a valid `numalign merge` case


# ------------------------------------------------------------------ engine vs upstream


@pytest.mark.parametrize("case", _params())
def test_engine_matches_kubelet(case: dict[str, Any]) -> None:
    _check(run_case(_case_input(case)), case["expect"])


# ------------------------------------------------------------------ oracle vs upstream


def _go_orders(providers: Sequence[ProviderHints]) -> Iterator[list[HintList]]:
    """filterProvidersHints for every Go map iteration order of each provider's resources."""
    per_provider: list[list[list[ProviderHints]]] = []
    for p in providers:
        if not p:
            per_provider.append([[p]])
            continue
        per_provider.append(
            [[{name: p[name]} for name in order] for order in itertools.permutations(p)]
        )
    for choice in itertools.product(*per_provider):
        # one single-resource provider per resource keeps flatten's order = the chosen order
        yield flatten([q for provider in choice for q in provider])


def _single_numa_filter(hints: HintList) -> list[TopologyHint]:
    """filterSingleNumaHints, from the spec: preferred and (nil or one NUMA node)."""
    assert isinstance(hints, Sequence)
    return [h for h in hints if h.preferred and (h.affinity is None or h.affinity.bit_count() == 1)]


def _oracle(case: Mapping[str, Any]) -> list[dict[str, Any]]:
    policy, providers = parse_case(_case_input(case))
    results = []
    for lists in _go_orders(providers):
        default = mask_of(policy.nodes)
        if policy.policy is Policy.NONE:
            hint, admit = TopologyHint(None, False), True
        elif policy.policy is Policy.SINGLE_NUMA_NODE:
            hint = product_fold([_single_numa_filter(h) for h in lists], default, NARROWEST)
            if hint.affinity == default:
                hint = TopologyHint(None, hint.preferred)
            admit = hint.preferred
        else:
            fit = FitOrder(policy.distances) if policy.options.prefer_closest else NARROWEST
            hint = product_fold(lists, default, fit)
            admit = True if policy.policy is Policy.BEST_EFFORT else hint.preferred
        aff = None if hint.affinity is None else ids_of(hint.affinity)
        results.append({"affinity": aff, "preferred": hint.preferred, "admit": admit})
    return results


@pytest.mark.parametrize("case", [pytest.param(c, id=c["id"]) for c in CASES])
def test_product_fold_oracle_matches_kubelet(case: dict[str, Any]) -> None:
    for result in _oracle(case):
        _check(result, case["expect"])


# ------------------------------------------------------------------ TestMaxOfMinAffinityCounts


def _hints(*masks: tuple[int, ...]) -> list[TopologyHint]:
    return [TopologyHint(mask_of(m), True) for m in masks]


MAX_OF_MIN = [
    ([], 0),
    ([_hints(())], 0),
    ([_hints((0,))], 1),
    ([_hints((0, 1))], 2),
    ([_hints((0, 1), (0, 1, 2))], 2),
    ([_hints((0, 1), (0, 1, 2)), _hints((0, 1, 2))], 3),
    ([_hints((0, 1), (0, 1, 2)), _hints((0, 1, 2), (0, 1, 2, 3))], 3),
]


@pytest.mark.parametrize(("lists", "expected"), MAX_OF_MIN)
def test_max_of_min_affinity_counts(lists: list[list[TopologyHint]], expected: int) -> None:
    oracle = max((c for c in (_narrowest_count(h) for h in lists) if c is not None), default=0)
    assert oracle == expected
    engine = [_View(h).narrowest_count() for h in lists]
    assert max((c for c in engine if c is not None), default=0) == expected


# ------------------------------------------------------------------ TestCompareHintsNarrowest


def _h(ids: tuple[int, ...], preferred: bool) -> TopologyHint:
    return TopologyHint(mask_of(ids), preferred)


# (description, bestNonPreferredAffinityCount, current, candidate, expected)
# fmt: off
COMPARE_NARROWEST: list[tuple[str, int, TopologyHint | None, TopologyHint, str]] = [
    ("candidate.NUMANodeAffinity.Count() == 0 (1)", -1, None, _h((), False), "current"),
    ("candidate.NUMANodeAffinity.Count() == 0 (2)", -1, _h((), True), _h((), False), "current"),
    ("current == nil (1)", -1, None, _h((0,), True), "candidate"),
    ("current == nil (2)", -1, None, _h((0,), False), "candidate"),
    ("!current.Preferred && candidate.Preferred", -1, _h((0,), False), _h((0,), True), "candidate"),
    ("current.Preferred && !candidate.Preferred", -1, _h((0,), True), _h((0,), False), "current"),
    ("current.Preferred && candidate.Preferred (1)", -1, _h((0,), True), _h((0,), True), "current"),
    ("current.Preferred && candidate.Preferred (2)", -1, _h((0, 1), True), _h((0,), True), "candidate"),
    ("current.Preferred && candidate.Preferred (3)", -1, _h((0,), True), _h((0, 1), True), "current"),
    ("!current.Preferred && !candidate.Preferred (1.1)", 1, _h((0, 1), False), _h((0, 1), False), "current"),
    ("!current.Preferred && !candidate.Preferred (1.2)", 1, _h((1, 2), False), _h((0, 1), False), "candidate"),
    ("!current.Preferred && !candidate.Preferred (1.3)", 1, _h((0, 1), False), _h((1, 2), False), "current"),
    ("!current.Preferred && !candidate.Preferred (2.1)", 2, _h((0, 1), False), _h((0,), False), "current"),
    ("!current.Preferred && !candidate.Preferred (2.2)", 2, _h((0, 1), False), _h((0, 1), False), "current"),
    ("!current.Preferred && !candidate.Preferred (2.3)", 2, _h((1, 2), False), _h((0, 1), False), "candidate"),
    ("!current.Preferred && !candidate.Preferred (2.4)", 2, _h((0, 1), False), _h((1, 2), False), "current"),
    ("!current.Preferred && !candidate.Preferred (3a)", 2, _h((0,), False), _h((0, 1, 2), False), "current"),
    ("!current.Preferred && !candidate.Preferred (3b)", 2, _h((0,), False), _h((0, 1), False), "candidate"),
    ("!current.Preferred && !candidate.Preferred (3ca.1)", 3, _h((0,), False), _h((0, 1), False), "candidate"),
    ("!current.Preferred && !candidate.Preferred (3ca.2)", 3, _h((0,), False), _h((1, 2), False), "candidate"),
    ("!current.Preferred && !candidate.Preferred (3ca.3)", 4, _h((0, 1), False), _h((1, 2, 3), False), "candidate"),
    ("!current.Preferred && !candidate.Preferred (3cb)", 4, _h((1, 2, 3), False), _h((0, 1), False), "current"),
    ("!current.Preferred && !candidate.Preferred (3cc.1)", 4, _h((0, 1, 2), False), _h((0, 1, 2), False), "current"),
    ("!current.Preferred && !candidate.Preferred (3cc.2)", 4, _h((0, 1, 2), False), _h((1, 2, 3), False), "current"),
    ("!current.Preferred && !candidate.Preferred (3cc.3)", 4, _h((1, 2, 3), False), _h((0, 1, 2), False), "candidate"),
]
# fmt: on


@pytest.mark.parametrize(
    ("bnp", "current", "candidate", "expected"),
    [pytest.param(*row[1:], id=row[0]) for row in COMPARE_NARROWEST],
)
def test_compare_hints_narrowest(
    bnp: int, current: TopologyHint | None, candidate: TopologyHint, expected: str
) -> None:
    # the oracle's compare returns one of its two arguments, like the kubelet's
    result = _compare(current, candidate, bnp, NARROWEST)
    assert result is (current if expected == "current" else candidate)


@pytest.mark.parametrize(
    ("bnp", "current", "candidate", "expected"),
    [
        pytest.param(*row[1:], id=row[0])
        for row in COMPARE_NARROWEST
        if row[2] is not None and row[2].affinity and row[3].affinity
    ],
)
def test_engine_total_order_agrees_with_compare(
    bnp: int, current: TopologyHint, candidate: TopologyHint, expected: str
) -> None:
    """merge.py's claim: compare() keeps the smaller of two hints under one total order."""

    def key(h: TopologyHint) -> tuple[Any, ...]:
        assert h.affinity is not None
        if h.preferred:
            return (0, *preferred_key(NARROWEST)(h.affinity))
        return (1, *non_preferred_key(NARROWEST, bnp)(h.affinity))

    if current == candidate:
        assert expected == "current"  # identical hints: kubelet keeps current
    else:
        winner = "candidate" if key(candidate) < key(current) else "current"
        assert winner == expected


# ------------------------------------------------------------------ TestPolicySingleNumaNodeFilterHints

FILTER_HINTS: list[tuple[str, list[list[TopologyHint]], list[list[TopologyHint]]]] = [
    ("filter empty resources", [], []),
    (
        "filter hints with nil socket mask 1/2",
        [[TopologyHint(None, False)], [TopologyHint(None, True)]],
        [[], [TopologyHint(None, True)]],
    ),
    (
        "filter hints with nil socket mask 2/2",
        [
            [_h((0,), True), TopologyHint(None, False)],
            [_h((1,), True), TopologyHint(None, True)],
        ],
        [[_h((0,), True)], [_h((1,), True), TopologyHint(None, True)]],
    ),
    (
        "filter hints with empty resource socket mask",
        [[_h((1,), True), _h((0,), True), TopologyHint(None, False)], []],
        [[_h((1,), True), _h((0,), True)], []],
    ),
    (
        "filter hints with wide sockemask",
        [
            [
                _h((0,), True),
                _h((1,), True),
                _h((1, 2), False),
                _h((0, 1, 2), False),
                TopologyHint(None, False),
            ],
            [_h((1, 2), False), _h((0, 1, 2), False), _h((0, 2), False), _h((3,), False)],
            [_h((1, 2), False), _h((0, 1, 2), False), _h((0, 2), False)],
        ],
        [[_h((0,), True), _h((1,), True)], [], []],
    ),
]


@pytest.mark.parametrize(
    ("resources", "expected"), [pytest.param(r, e, id=n) for n, r, e in FILTER_HINTS]
)
def test_policy_single_numa_node_filter_hints(
    resources: list[list[TopologyHint]], expected: list[list[TopologyHint]]
) -> None:
    # Go returns nil slices for emptied lists; an empty Python list is the same "no hint"
    assert [_single_numa_only(r) for r in resources] == expected
    assert [_single_numa_filter(r) for r in resources] == expected


# ------------------------------------------------------------------ canAdmitPodResult tables


def _policy(name: str) -> TopologyPolicy:
    return TopologyPolicy(parse_policy(name)[0], (0, 1))


@pytest.mark.parametrize(
    ("policy", "provider_hint", "admit"),
    [
        # TestPolicyBestEffortCanAdmitPodResult: best-effort admits whatever the hint
        ("best-effort", TopologyHint(None, False), True),
        ("best-effort", TopologyHint(None, True), True),
        # TestPolicyRestrictedCanAdmitPodResult: admit = preferred
        ("restricted", TopologyHint(None, False), False),
        ("restricted", TopologyHint(None, True), True),
        # TestPolicySingleNumaNodeCanAdmitPodResult
        ("single-numa-node", TopologyHint(None, False), False),
    ],
)
def test_can_admit_pod_result(policy: str, provider_hint: TopologyHint, admit: bool) -> None:
    # a single provider answering exactly this hint makes the merged hint carry its preference
    result = _policy(policy).merge([{"resource": [provider_hint]}])
    assert result.hint.preferred is provider_hint.preferred
    assert result.admit is admit


# ------------------------------------------------------------------ numa_info_test.go


def _rows(rows: list[list[int]]) -> dict[int, dict[int, int]]:
    return {i: dict(enumerate(row)) for i, row in enumerate(rows)}


FOUR_ROWS = [[10, 11, 12, 12], [11, 10, 12, 12], [12, 12, 10, 11], [12, 12, 11, 10]]

AVG_DISTANCE = [
    ("1 NUMA node", (0,), [[10]], 10.0),
    ("2 NUMA node, 1 set in bitmask", (0,), [[10, 11], [11, 10]], 10.0),
    ("2 NUMA node, 2 set in bitmask", (0, 1), [[10, 11], [11, 10]], 10.5),
    ("4 NUMA node, 2 set in bitmask", (0, 2), FOUR_ROWS, 11.0),
    ("4 NUMA node, 3 set in bitmask", (0, 2, 3), FOUR_ROWS, 11.11111111111111),
    ("0 NUMA node, 0 set in bitmask", (), [], 0.0),
]


@pytest.mark.parametrize(
    ("bits", "rows", "expected"), [pytest.param(b, r, e, id=n) for n, b, r, e in AVG_DISTANCE]
)
def test_calculate_avg_distance_for(
    bits: tuple[int, ...], rows: list[list[int]], expected: float
) -> None:
    # exact float64 equality, as upstream (Closest ties on ==)
    assert FitOrder(_rows(rows)).average_distance(mask_of(bits)) == expected


UNIFORM3 = [[10, 10, 10]] * 3
UNIFORM4 = [[10, 10, 10, 10]] * 4

# (description, current, candidate, distances or None for an empty NUMAInfo, expected)
# fmt: off
CLOSEST: list[tuple[str, tuple[int, ...], tuple[int, ...], list[list[int]] | None, str]] = [
    ("current and candidate length is not the same, current narrower", (0,), (0, 2), None, "current"),
    (
        "current and candidate length is the same, distance is the same, current more lower bits set",
        (0, 1), (0, 2), UNIFORM3, "current",
    ),
    (
        "current and candidate length is the same, distance is the same, candidate more lower bits set",
        (0, 3), (0, 2), UNIFORM4, "candidate",
    ),
    (
        "current and candidate length is the same, candidate average distance is smaller",
        (0, 3), (0, 1), FOUR_ROWS, "candidate",
    ),
    (
        "current and candidate length is the same, current average distance is smaller",
        (2, 3), (0, 3), FOUR_ROWS, "current",
    ),
]
# fmt: on


@pytest.mark.parametrize(
    ("current", "candidate", "rows", "expected"),
    [pytest.param(*row[1:], id=row[0]) for row in CLOSEST],
)
def test_closest(
    current: tuple[int, ...],
    candidate: tuple[int, ...],
    rows: list[list[int]] | None,
    expected: str,
) -> None:
    fit = FitOrder(_rows(rows) if rows is not None else {})
    cur, cand = _h(current, True), _h(candidate, True)
    assert _fitter(cur, cand, fit) is (cur if expected == "current" else cand)
    if rows is None:
        # Upstream passes an empty NUMAInfo: Closest falls back to Narrowest before it
        # looks at distances. The engine's sort key always reads distances; with
        # prefer-closest a TopologyPolicy requires a complete matrix, so this never arises.
        return
    key = preferred_key(fit)
    winner = "candidate" if key(cand.affinity or 0) < key(cur.affinity or 0) else "current"
    assert winner == expected


def test_closest_eight_node_fixture_is_asymmetric() -> None:
    """commonNUMAInfoEightNodes has 6->7 = 11 but 7->6 = 13: averages use ordered pairs."""
    case = next(c for c in CASES if c["id"].startswith("TestPolicyBestEffortMergeClosestNUMA/"))
    policy, _ = parse_case(_case_input(case))
    assert policy.distances is not None
    fit = FitOrder(policy.distances)
    assert fit.average_distance(mask_of((6, 7))) == (10 + 11 + 13 + 10) / 4
    assert fit.average_distance(mask_of((4, 5))) == 10.5


# ------------------------------------------------------------------ policy_options_test.go


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param(
            {"prefer-closest-numa-nodes": "true", "max-allowable-numa-nodes": "8"},
            PolicyOptions(prefer_closest=True, max_allowable_numa_nodes=8),
            id="return TopologyManagerOptions with PreferClosestNUMA set to true",
        ),
        pytest.param(
            {"max-allowable-numa-nodes": "12"},
            PolicyOptions(max_allowable_numa_nodes=12),
            id="return TopologyManagerOptions with MaxAllowableNUMANodes set to 12",
        ),
        pytest.param(None, PolicyOptions(), id="return empty TopologyManagerOptions"),
        pytest.param({}, PolicyOptions(), id="return empty TopologyManagerOptions (empty map)"),
    ],
)
def test_new_topology_manager_options(raw: dict[str, str] | None, expected: PolicyOptions) -> None:
    assert parse_options(raw) == expected
    assert expected.max_allowable_numa_nodes >= 8


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        pytest.param(
            {"prefer-closest-numa-nodes": "not a boolean"},
            "bad value for option",
            id="fail to parse options with error PreferClosestNUMANodes",
        ),
        pytest.param(
            {"max-allowable-numa-nodes": "can't parse to int"},
            "unable to convert policy option to integer",
            id="fail to parse options with error MaxAllowableNUMANodes",
        ),
        pytest.param(
            {"this-option-does-not-exist": "true"},
            'unknown Topology Manager Policy option: "this-option-does-not-exist"',
            id="TestPolicyDefaultsAvailable/this-option-does-not-exist",
        ),
        pytest.param(
            {"max-allowable-numa-nodes": "7"},
            "should not be less than 8",
            id="policy_options.go minimum value of max-allowable-numa-nodes",
        ),
    ],
)
def test_new_topology_manager_options_errors(raw: dict[str, str], fragment: str) -> None:
    with pytest.raises(InputError) as e:
        parse_options(raw)
    assert fragment in e.value.problem


@pytest.mark.parametrize("text", ["1", "t", "T", "TRUE", "true", "True"])
def test_prefer_closest_parse_bool_true(text: str) -> None:
    assert parse_options({"prefer-closest-numa-nodes": text}).prefer_closest is True


@pytest.mark.parametrize("text", ["0", "f", "F", "FALSE", "false", "False"])
def test_prefer_closest_parse_bool_false(text: str) -> None:
    assert parse_options({"prefer-closest-numa-nodes": text}).prefer_closest is False


@pytest.mark.parametrize("text", ["tRUE", "yes", "on", "", " true"])
def test_prefer_closest_parse_bool_rejects(text: str) -> None:
    with pytest.raises(InputError) as e:
        parse_options({"prefer-closest-numa-nodes": text})
    assert e.value.problem == (
        f'bad value for option "prefer-closest-numa-nodes": '
        f'strconv.ParseBool: parsing "{text}": invalid syntax'
    )


@pytest.mark.parametrize(("text", "value"), [("8", 8), ("12", 12), ("+12", 12), ("012", 12)])
def test_max_allowable_atoi_accepts(text: str, value: int) -> None:
    """Go strconv.Atoi accepts an optional sign and leading zeros."""
    assert parse_options({"max-allowable-numa-nodes": text}).max_allowable_numa_nodes == value


@pytest.mark.parametrize(
    "text",
    [
        " 12",
        "12 ",
        "1_2",
        "\u0661\u0662",
        "99999999999999999999",
        "12.0",
        "0x10",
        "",
    ],
)
def test_max_allowable_atoi_rejects(text: str) -> None:
    """Inputs Go strconv.Atoi (64-bit int) rejects -> the kubelet refuses the option."""
    with pytest.raises(InputError) as e:
        parse_options({"max-allowable-numa-nodes": text})
    assert "unable to convert policy option to integer" in e.value.problem


_QUOTING = (
    "policy_options.go formats the option name with Go %q (double quotes); numalign uses "
    "Python repr (single quotes): 'max-allowable-numa-nodes'"
)


def test_max_allowable_conversion_message_exact() -> None:
    with pytest.raises(InputError) as e:
        parse_options({"max-allowable-numa-nodes": "can't parse to int"})
    assert e.value.problem == (
        'unable to convert policy option to integer "max-allowable-numa-nodes": '
        'strconv.Atoi: parsing "can\'t parse to int": invalid syntax'
    )


def test_max_allowable_minimum_message_exact() -> None:
    with pytest.raises(InputError) as e:
        parse_options({"max-allowable-numa-nodes": "7"})
    # upstream text; numalign may append detail after it
    assert e.value.problem.startswith(
        'the minimum value of "max-allowable-numa-nodes" should not be less than 8'
    )


# ------------------------------------------------------------------ topology_manager_test.go


def test_new_manager_policy_names() -> None:
    # TestNewManager: none / best-effort / restricted / single-numa-node are accepted
    for name in ("none", "best-effort", "restricted", "single-numa-node"):
        assert parse_policy(name)[0].value == name
    with pytest.raises(InputError) as e:
        parse_policy("unknown")
    assert 'unknown policy: "unknown"' in e.value.problem


@pytest.mark.parametrize("policy", ["best-effort", "restricted"])
def test_new_manager_unknown_option(policy: str) -> None:
    case = {"policy": policy, "numa_nodes": [0], "options": {"unknown-option": "true"}}
    with pytest.raises(InputError) as e:
        run_case(case)
    assert "unknown Topology Manager Policy option:" in e.value.problem


def test_new_manager_cannot_get_numa_distances() -> None:
    # "can't get NUMA distances": prefer-closest on a machine without distances fails
    with pytest.raises(InputError):
        TopologyPolicy(Policy.BEST_EFFORT, (0,), PolicyOptions(prefer_closest=True))
    with pytest.raises(InputError):
        run_case(
            {
                "policy": "best-effort",
                "numa_nodes": [0],
                "options": {"prefer-closest-numa-nodes": "true"},
                "providers": [],
            }
        )


def test_new_manager_cannot_get_numa_distances_message() -> None:
    with pytest.raises(InputError) as e:
        TopologyPolicy(Policy.BEST_EFFORT, (0,), PolicyOptions(prefer_closest=True))
    assert "error getting NUMA distances from cadvisor" in e.value.problem


@pytest.mark.parametrize("policy", ["best-effort", "restricted", "single-numa-node"])
def test_new_manager_more_than_8_numa_nodes(policy: str) -> None:
    nodes = tuple(range(9))
    with pytest.raises(InputError) as e:
        TopologyPolicy(parse_policy(policy)[0], nodes)
    assert "unsupported on machines with more than 8 NUMA Nodes" in e.value.problem
    with pytest.raises(InputError) as e2:
        run_case({"policy": policy, "numa_nodes": list(nodes), "providers": []})
    assert "unsupported on machines with more than 8 NUMA Nodes" in e2.value.problem


def test_new_manager_more_than_8_numa_nodes_limits() -> None:
    # exactly 8 is fine; policy none never checks; max-allowable-numa-nodes raises the limit
    TopologyPolicy(Policy.BEST_EFFORT, tuple(range(8)))
    TopologyPolicy(Policy.NONE, tuple(range(9)))
    opts = parse_options({"max-allowable-numa-nodes": "16"})
    TopologyPolicy(Policy.BEST_EFFORT, tuple(range(16)), opts)
    with pytest.raises(InputError) as e:
        TopologyPolicy(Policy.BEST_EFFORT, tuple(range(17)), opts)
    assert "unsupported on machines with more than 16 NUMA Nodes" in e.value.problem


def test_manager_scope() -> None:
    # TestManagerScope
    assert parse_scope("container").value == "container"
    assert parse_scope("pod").value == "pod"
    with pytest.raises(InputError) as e:
        parse_scope("unknown")
    assert 'unknown scope: "unknown"' in e.value.problem
