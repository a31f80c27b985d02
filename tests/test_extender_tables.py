"""The extender's flat decision tables (:class:`ExtenderCore`, shape -> node name -> verdict):
every answer equals the node engine's admission on the published snapshot, through updates,
removals, unusable objects, assumptions, binds and expiry; a table never keeps a verdict of a
snapshot that is no longer published; tables are bounded."""

from __future__ import annotations

import contextlib
import io
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from numalign.kube.extender import ExtenderCore
from numalign.kube.extender.core import MAX_TABLES, NO_REASON, NodeEntry
from numalign.pods import Pod
from numalign.scheduler import get_profile
from test_extender_concurrency import CPUS, pod, reference, version

NAMES = ["a", "b", "c"]


def expected(core: ExtenderCore, p: Pod, names: list[str]) -> tuple[list[str], dict[str, str]]:
    """What a filter must answer, from the published snapshots (before the call)."""
    decide = get_profile("numalign").filter
    assert decide is not None
    passed: list[str] = []
    failed: dict[str, str] = {}
    for name in names:
        entry = core.nodes.get(name)
        if entry is None:
            failed[name] = core.broken.get(name, "")
        elif p.uid in entry.assumed:
            passed.append(name)
        else:
            res = decide(entry.node, p)
            if res.passed:
                passed.append(name)
            else:
                failed[name] = res.reason or NO_REASON
    return passed, failed


op = st.one_of(
    st.tuples(st.just("update"), st.sampled_from(NAMES), st.integers(0, 3)),
    st.tuples(st.just("unusable"), st.sampled_from(NAMES), st.just(0)),
    st.tuples(st.just("remove"), st.sampled_from(NAMES), st.just(0)),
    st.tuples(st.just("filter"), st.sampled_from(CPUS), st.integers(1, 3)),
    st.tuples(st.just("bind"), st.sampled_from(NAMES), st.just(0)),
    st.tuples(st.just("tick"), st.just(""), st.just(0)),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(op, min_size=1, max_size=40))
def test_every_answer_is_the_published_snapshots_admission(ops: list[tuple[str, Any, int]]
                                                           ) -> None:
    now = [0.0]
    core = ExtenderCore(log=io.StringIO(), clock=lambda: now[0], assume_ttl=3.0)
    core.set_nodes({n: version(n, 3) for n in NAMES})
    k = 0
    last_uid = ""
    for kind, arg, n in ops:
        if kind == "update":
            core.update_node(arg, version(arg, n))
        elif kind == "unusable":
            core.update_node(arg, {"zones": "not a list"})
        elif kind == "remove":
            core.remove_node(arg)
        elif kind == "bind" and last_uid:
            with contextlib.suppress(LookupError):  # a node unusable or removed: 404
                core.bind("ns", last_uid[2:], last_uid, arg)
        elif kind == "tick":
            now[0] += 2.0
        elif kind == "filter":
            k += 1
            p = pod(f"p{k}", arg)
            last_uid = p.uid
            names = [*NAMES[:n], "unknown"]
            if now[0] >= core._next_expiry:
                core._expire()  # what the filter does first
            want = expected(core, p, names)
            got = core.filter(p, names)
            assert got[0] == want[0]
            assert set(got[1]) == set(want[1]) | ({"unknown"} - set(want[0]))
            for name, why in want[1].items():
                if name in core.nodes or name in core.broken:
                    assert got[1][name] == why
            for again in (pod(f"q{k}", arg),):  # a second pod of the shape: from the tables
                want = expected(core, again, names)
                got = core.filter(again, names)
                assert got[0] == want[0]
        # a table holds only verdicts of published snapshots without assumed pods
        for table in core._tables.values():
            for name in table:
                assert name in core.nodes and not core.nodes[name].assumed


def test_a_verdict_decided_on_a_replaced_snapshot_is_not_entered() -> None:
    """A reader decides on snapshot E; a writer publishes E' before the reader enters the
    decision: the table must not keep E's verdict (the next filter answers E')."""
    ref = reference()
    cpu = next(c for c in CPUS if ref[(0, c)] != ref[(3, c)])
    core = ExtenderCore(log=io.StringIO())
    core.set_nodes({"a": version("a", 3), "b": version("b", 3), "c": version("c", 3)})
    real_miss = core._miss
    raced = []

    def miss_then_update(entry: NodeEntry, p: Pod, shape: int) -> Any:
        d = real_miss(entry, p, shape)
        if entry.name == "a" and not raced:
            raced.append(True)
            core.update_node("a", version("a", 0))  # published between decide and enter
        return d

    core._miss = miss_then_update  # type: ignore[method-assign]
    passed, _ = core.filter(pod("x", cpu), ["a", "b", "c"])
    assert raced and ("a" in passed) == ref[(3, cpu)]  # decided on the snapshot it read
    core._miss = real_miss  # type: ignore[method-assign]
    passed, _ = core.filter(pod("y", cpu), ["a", "b", "c"])
    assert ("a" in passed) == ref[(0, cpu)]


def test_updates_enter_their_warm_decisions_and_drop_the_old_ones() -> None:
    ref = reference()
    core = ExtenderCore(log=io.StringIO())
    core.set_nodes({n: version(n, 3) for n in NAMES})
    for cpu in CPUS:
        core.filter(pod(f"w{cpu}", cpu), NAMES)
    before = core.metrics.admission_requests._value.get()
    core.update_node("a", version("a", 0))
    rewarmed = core.metrics.admission_requests._value.get() - before
    assert rewarmed == len(CPUS)
    for cpu in CPUS:
        sid = core.shape_id(pod("s", cpu))
        assert core._tables[sid]["a"] == (True if ref[(0, cpu)] else core.nodes["a"].cache[sid][2]
                                          or NO_REASON)
        passed, _ = core.filter(pod(f"x{cpu}", cpu), NAMES)
        assert ("a" in passed) == ref[(0, cpu)]
    assert core.metrics.admission_requests._value.get() - before == rewarmed  # lookups only
    core.remove_node("b")
    assert all("b" not in t for t in core._tables.values())


def test_nodes_with_assumed_pods_stay_out_of_the_tables() -> None:
    core = ExtenderCore(log=io.StringIO())
    core.set_nodes({n: version(n, 3) for n in NAMES})
    p = pod("only", "1")
    assert core.filter(p, ["a"])[0] == ["a"]  # one node left: assumed there
    assert core.nodes["a"].assumed
    assert all("a" not in t for t in core._tables.values())
    assert core.filter(p, NAMES)[0] == NAMES  # its own node passes it (assumed)


def test_tables_are_bounded() -> None:
    core = ExtenderCore(log=io.StringIO())
    core.set_nodes({n: version(n, 3) for n in NAMES})
    for i in range(MAX_TABLES + 20):
        core.filter(pod(f"m{i}", f"{1000 + i}m"), NAMES)
    assert len(core._tables) == MAX_TABLES
    assert all(len(t) <= len(NAMES) for t in core._tables.values())
