"""The extender's lock-free read path under concurrent writers: per-node snapshots swapped in
by node updates and assumptions while readers filter.

* Every decision a concurrent filter returns for a node equals the serial reference (the
  node engine's own answer) on one of the NRT versions that node had while the call ran.
* Concurrent single-node filters on one node (each assumes its pod there) admit exactly as
  many pods as the serial order does: an assumption is never lost and never doubled, and a
  pod assumed on a node is seen by the next filter of that node.
* Readers do not wait for a writer: a filter completes while the write lock is held.
"""

from __future__ import annotations

import copy
import io
import random
import threading
import time
from typing import Any

from conftest import REPO
from numalign.kube.extender import ExtenderCore
from numalign.kube.extender.builder import ProcessBuilder, build_and_decide
from numalign.kube.topology import build_nrt, engine_from_nrt
from numalign.machine.spec import read_machine_file
from numalign.node.admission import Node
from numalign.pods import Pod, parse_pods
from numalign.scheduler import get_profile

NODES = [f"n{i}" for i in range(6)]
CPUS = ["1", "2", "3", "4"]


def fig_nrt(name: str) -> dict[str, Any]:
    return build_nrt(Node(read_machine_file(str(REPO / "examples" / "fig1.yaml"))), name=name)


def version(name: str, v: int) -> dict[str, Any]:
    """NRT version ``v`` (0..3) of a node: ``v + 1`` CPUs available per NUMA node (at most
    its allocatable), so the decisions for 2..4-CPU pods differ between versions."""
    obj = copy.deepcopy(fig_nrt(name))
    for zone in obj["zones"]:
        for r in zone["resources"]:
            if r["name"] == "cpu":
                r["available"] = str(min(1 + v % 4, int(r["allocatable"])))
    return obj


def pod(name: str, cpu: str) -> Pod:
    return parse_pods({"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": name, "namespace": "ns", "uid": f"u-{name}"},
                       "spec": {"containers": [{"name": "c", "resources": {
                           "limits": {"cpu": cpu, "memory": "1Gi"}}}]}})[0]


def reference() -> dict[tuple[int, str], bool]:
    """(version, cpu) -> does the node engine admit such a pod (serially, fresh)."""
    out = {}
    decide = get_profile("numalign").filter
    assert decide is not None
    for v in range(4):
        node = engine_from_nrt(version("r", v))
        for cpu in CPUS:
            out[(v, cpu)] = decide(node, pod(f"ref-{cpu}", cpu)).passed
    assert len({out[(v, "3")] for v in range(4)}) == 2  # versions do change decisions
    return out


def test_concurrent_updates_and_filters_equal_a_serial_reference() -> None:
    ref = reference()
    # two nodes that admit every probe and are never updated: no filter leaves exactly one
    # node, so nothing is assumed and every decision is the engine's on a published version
    big = ["big0", "big1"]
    assert all(ref[(3, cpu)] for cpu in CPUS)
    core = ExtenderCore(log=io.StringIO())
    core.set_nodes({n: version(n, 3 if n in big else 0) for n in NODES + big})
    # history[node] = [(update index, version)]; updates are indexed in publish order
    history: dict[str, list[tuple[int, int]]] = {n: [(-1, 0)] for n in NODES}
    history.update({n: [(-1, 3)] for n in big})
    done = [0]  # updates published so far
    stop = threading.Event()
    errors: list[str] = []

    def writer() -> None:
        rng = random.Random(7)
        k = 0
        while not stop.is_set() and k < 400:
            name = rng.choice(NODES)
            v = rng.randrange(4)
            history[name].append((done[0], v))  # in flight: index done[0]
            core.update_node(name, version(name, v))
            done[0] += 1
            k += 1
        stop.set()

    def reader(seed: int) -> None:
        rng = random.Random(seed)
        k = 0
        while not stop.is_set():
            cpu = rng.choice(CPUS)
            p = pod(f"r{seed}-{k}", cpu)
            k += 1
            start = done[0]
            passed, _ = core.filter(p, NODES + big)
            end = done[0]
            assert len(passed) >= 2
            for name in NODES + big:
                seen = [v for i, v in history[name] if i < start]
                allowed = {seen[-1]} | {v for i, v in history[name] if start <= i <= end}
                got = name in passed
                if got not in {ref[(v, cpu)] for v in allowed}:
                    errors.append(f"{name} cpu={cpu}: {got}, versions {sorted(allowed)}")

    threads = [threading.Thread(target=reader, args=(s,)) for s in range(4)]
    threads.append(threading.Thread(target=writer))
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors[:5]
    assert done[0] == 400


def test_concurrent_single_node_filters_assume_exactly_as_the_serial_order() -> None:
    def fresh() -> ExtenderCore:
        core = ExtenderCore(log=io.StringIO())
        core.set_nodes({"n": fig_nrt("n")})
        return core

    pods = [pod(f"p{i}", "1") for i in range(40)]
    serial = fresh()
    admitted_serially = sum(serial.filter(p, ["n"])[0] == ["n"] for p in pods)
    assert 0 < admitted_serially < len(pods)

    core = fresh()
    results: dict[str, bool] = {}
    barrier = threading.Barrier(8)

    def worker(chunk: list[Pod]) -> None:
        barrier.wait()
        for p in chunk:
            results[p.uid] = core.filter(p, ["n"])[0] == ["n"]

    threads = [threading.Thread(target=worker, args=(pods[i::8],)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sum(results.values()) == admitted_serially
    entry = core.nodes["n"]
    assert sorted(entry.assumed) == sorted(u for u, ok in results.items() if ok)
    # the next filter of that node sees every assumed pod
    assert core.filter(pod("late", "1"), ["n"])[0] == []


def test_filter_does_not_wait_for_a_writer() -> None:
    core = ExtenderCore(log=io.StringIO())
    core.set_nodes({"a": fig_nrt("a"), "b": fig_nrt("b")})
    holding = threading.Event()
    release = threading.Event()

    def hold() -> None:
        with core._write:
            holding.set()
            release.wait(5)

    t = threading.Thread(target=hold)
    t.start()
    try:
        assert holding.wait(5)
        t0 = time.monotonic()
        # (a filter that leaves exactly one node assumes the pod there: that part is a write)
        passed, _ = core.filter(pod("x", "1"), ["a", "b", "missing"])
        assert passed == ["a", "b"]
        assert core.prioritize(pod("y", "1"), ["a"])[0][0] == "a"
        assert time.monotonic() - t0 < 1.0
    finally:
        release.set()
        t.join()


def test_rebuilt_node_answers_its_shapes_from_the_cache() -> None:
    core = ExtenderCore(log=io.StringIO())
    # b and c admit every probe: no filter leaves one node (nothing is assumed)
    core.set_nodes({n: version(n, 3) for n in ("a", "b", "c")})
    for cpu in CPUS:
        core.filter(pod(f"w{cpu}", cpu), ["a", "b", "c"])
    before = core.metrics.admission_requests._value.get()
    core.update_node("a", version("a", 1))
    rewarmed = core.metrics.admission_requests._value.get() - before
    assert rewarmed == len(CPUS)  # evaluated once each, by the writer
    assert set(core.nodes["a"].cache) == set(core.nodes["b"].cache)
    for cpu in CPUS:  # readers: dictionary lookups only, with the new version's answers
        passed, _ = core.filter(pod(f"x{cpu}", cpu), ["a", "b", "c"])
        assert ("a" in passed) == reference()[(1, cpu)]
    assert core.metrics.admission_requests._value.get() - before == rewarmed


def test_builder_in_a_worker_process_matches_the_in_process_build() -> None:
    obj = version("a", 2)
    pods = [(i, pod(f"s{i}", cpu)) for i, cpu in enumerate(CPUS)]
    local, local_d, _ = build_and_decide("numalign", obj, pods)
    builder = ProcessBuilder()
    try:
        built, decisions, durations = builder(obj, pods)
        assert built.node is not None and built.digest == local.digest
        assert decisions == local_d and len(durations) == len(pods)
        bad, _, _ = builder(["not", "an", "nrt"], pods)
        assert bad.node is None and bad.error.startswith("unusable NodeResourceTopology")
        core = ExtenderCore(log=io.StringIO(), builder=builder)
        core.set_nodes({"a": version("a", 0)})
        core.filter(pod("w", "3"), ["a"])
        core.update_node("a", obj)
        assert core.engines_built == 2
        assert ("a" in core.filter(pod("z", "3"), ["a", "b"])[0]) == reference()[(2, "3")]
    finally:
        builder.close()


def test_async_updates_apply_in_order_and_a_removal_voids_them() -> None:
    from numalign.kube.extender.core import content_digest

    builder = ProcessBuilder()
    try:
        builder.start().result(120)
        core = ExtenderCore(log=io.StringIO(), builder=builder)
        core.set_nodes({"a": version("a", 0), "c": version("c", 3)})
        futures = [core.update_node_async("a", version("a", v)) for v in (1, 2, 3, 0, 2)]
        results = [f.result(120) for f in futures]
        assert results[-1] is True  # the newest is published, earlier ones may be superseded
        assert core.nodes["a"].content == content_digest(version("a", 2))
        assert core.engines_built == 2 + 5
        pending = core.update_node_async("b", version("b", 1))
        core.remove_node("b")
        pending.result(120)  # built before or after the removal: never re-adds the node
        assert "b" not in core.nodes
        hostile = core.update_node_async("c", ["not", "an", "nrt"])
        assert hostile.result(120) is False and "c" in core.broken
    finally:
        builder.close()
