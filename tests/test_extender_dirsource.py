"""The extender's directory source (issue 26): a changed, added or removed NRT file is picked
up without reading the unchanged ones (reads counted), changes come as events (watchfiles) or
are found by the audit when an event is lost, a Kubernetes volume's ``..data`` swap leads to a
full check, and the decisions after incremental updates equal those of an extender that read
the final directory afresh. No test measures time: each waits for a condition."""

from __future__ import annotations

import copy
import io
import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import REPO
from extender_helpers import count_engine_builds, wait
from numalign.kube.exporter import write_object
from numalign.kube.extender import DirSource, ExtenderCore, dirwatch, run_source
from numalign.kube.extender.dirsource import read_file
from numalign.kube.extender.serving import start
from numalign.kube.topology import build_nrt
from numalign.machine.spec import read_machine_file
from numalign.node.admission import Node
from numalign.pods import Pod, parse_pods

FIG1 = build_nrt(Node(read_machine_file(str(REPO / "examples" / "fig1.yaml"))), name="t")
LONG_AGO = time.time_ns() - 3600 * 10**9


def nrt(name: str, free: int = 3) -> dict[str, Any]:
    """Figure 1's node with ``free`` CPUs available on each NUMA node."""
    out = copy.deepcopy(FIG1)
    out["metadata"]["name"] = name
    for zone in out["zones"]:
        for r in zone["resources"]:
            if r["name"] == "cpu":
                r["available"] = str(free)
    return out


def put(directory: Path, obj: Any, file: str | None = None, *, aged: bool = True) -> Path:
    """Write ``obj`` (one object, or a List of several) to ``file`` (default NAME.yaml);
    ``aged``: with times an hour old (a file not written in the last clock tick)."""
    path = directory / (file or f"{obj['metadata']['name']}.yaml")
    text = json.dumps(obj) if path.suffix == ".json" else yaml.safe_dump(obj)
    path.write_text(text)
    if aged:
        os.utime(path, ns=(LONG_AGO, LONG_AGO))
    return path


def pod(cpu: int) -> Pod:
    return parse_pods({"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": f"p{cpu}", "namespace": "ns", "uid": f"u{cpu}"},
                       "spec": {"containers": [{"name": "c", "resources": {
                           "limits": {"cpu": str(cpu), "memory": "1Gi"}}}]}})[0]


def decisions(core: ExtenderCore) -> list[tuple[list[str], dict[str, str]]]:
    """What the core answers for pods of 1 to 4 CPUs over every node it knows."""
    names = sorted(set(core.nodes) | set(core.broken))
    return [core.filter(pod(cpu), names, assume=False) for cpu in (1, 2, 3, 4)]


def fresh(directory: Path) -> ExtenderCore:
    core = ExtenderCore(log=io.StringIO())
    core.set_nodes(DirSource(directory, log=io.StringIO()).scan())
    return core


def state(core: ExtenderCore) -> dict[str, str]:
    """Each node's published NRT digest (or its reason when unusable)."""
    return {**{n: e.digest for n, e in core.nodes.items()}, **core.broken}


@pytest.fixture
def loaded(tmp_path: Path) -> tuple[Path, DirSource, ExtenderCore]:
    for i in range(30):
        put(tmp_path, nrt(f"n{i}", free=i % 4))
    src = DirSource(tmp_path, log=io.StringIO())
    core = ExtenderCore(log=io.StringIO())
    core.set_nodes(src.scan())
    assert src.files_read == 30 and len(core.nodes) == 30
    return tmp_path, src, core


def test_only_the_files_named_and_changed_are_read(
        loaded: tuple[Path, DirSource, ExtenderCore], monkeypatch: pytest.MonkeyPatch) -> None:
    d, src, core = loaded
    builds = count_engine_builds(monkeypatch)
    put(d, nrt("n3", free=1))  # changed
    put(d, nrt("n30"))  # added
    (d / "n5.yaml").unlink()  # removed
    (d / ".n7.yaml.tmp").write_text("not read: a writer's temporary file")
    named = ["n3.yaml", "n30.yaml", "n5.yaml", "n7.yaml", "n8.yaml", ".n7.yaml.tmp", "README"]
    assert src.apply(core, named) == 3
    assert src.files_read == 30 + 2  # n7 and n8 unchanged: checked, not read
    assert builds == ["n3", "n30"]
    assert "n5" not in core.nodes and len(core.nodes) == 30
    assert decisions(core) == decisions(fresh(d))


def test_poll_checks_every_file_and_reads_only_the_changed(
        loaded: tuple[Path, DirSource, ExtenderCore]) -> None:
    d, src, core = loaded
    checked = src.files_checked
    assert src.poll(core) == 0
    assert src.files_read == 30 and src.files_checked == checked + 30
    put(d, nrt("n13", free=0))
    assert src.poll(core) == 1 and src.files_read == 31
    assert decisions(core) == decisions(fresh(d))


def test_the_audit_finds_a_change_no_event_named(
        loaded: tuple[Path, DirSource, ExtenderCore]) -> None:
    d, src, core = loaded
    put(d, nrt("n29", free=0))  # an event lost (an inotify queue overflow)
    found = 0
    for _ in range(30 // 7 + 1):  # 7 files per tick: once round the 30 files
        checked = src.files_checked
        found += src.audit(core, 7)
        assert src.files_checked == checked + 7
    assert found == 1 and src.files_read == 31
    assert decisions(core) == decisions(fresh(d))


def test_a_file_read_in_its_own_clock_tick_is_read_again(tmp_path: Path) -> None:
    """A rewrite of the same size in the same tick of the coarse file clock keeps the key:
    a file read within RACY_NS of its mtime is read again at its next check."""
    put(tmp_path, nrt("a"), aged=False)
    src = DirSource(tmp_path, log=io.StringIO())
    core = ExtenderCore(log=io.StringIO())
    core.set_nodes(src.scan())
    assert src.apply(core, ["a.yaml"]) == 0 and src.files_read == 2  # racy: read again
    os.utime(tmp_path / "a.yaml", ns=(LONG_AGO, LONG_AGO))
    src.apply(core, ["a.yaml"])  # key changed (times): read, and no longer racy
    assert src.files_read == 3
    assert src.apply(core, ["a.yaml"]) == 0 and src.files_read == 3


def test_objects_move_between_files_and_lists(tmp_path: Path) -> None:
    both = {"apiVersion": "v1", "kind": "List", "items": [nrt("x"), nrt("y", free=0)]}
    put(tmp_path, both, "pair.yaml")
    src = DirSource(tmp_path, log=io.StringIO())
    core = ExtenderCore(log=io.StringIO())
    core.set_nodes(src.scan())
    assert sorted(core.nodes) == ["x", "y"]
    put(tmp_path, {"apiVersion": "v1", "kind": "List", "items": [nrt("x")]}, "pair.yaml")
    put(tmp_path, nrt("y", free=0), "y.json")  # y moves to its own file, as JSON
    assert src.apply(core, ["pair.yaml", "y.json"]) == 0  # nothing changed for the core
    (tmp_path / "pair.yaml").unlink()
    assert src.apply(core, ["pair.yaml"]) == 1 and sorted(core.nodes) == ["y"]
    assert state(core) == state(fresh(tmp_path))


def test_json_files_are_strict_json_and_other_files_yaml(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text(yaml.safe_dump(nrt("a")))  # YAML in a .json file
    (tmp_path / "b.yaml").write_text(json.dumps(nrt("b")))  # JSON is YAML
    (tmp_path / "c.json").write_text(json.dumps(nrt("c")).replace('"3"', "NaN", 1))
    log = io.StringIO()
    objects = DirSource(tmp_path, log=log).scan()
    assert sorted(objects) == ["b"]
    assert "a.json: cannot read (malformed JSON" in log.getvalue()
    assert "c.json: cannot read (malformed JSON: NaN is not a JSON value)" in log.getvalue()


def test_a_file_being_rewritten_in_place_keeps_its_objects(
        loaded: tuple[Path, DirSource, ExtenderCore]) -> None:
    """open(..., "w") truncates first: an event may name the file while it is empty."""
    d, src, core = loaded
    (d / "n4.yaml").write_text("")
    assert src.apply(core, ["n4.yaml"]) == 0 and "n4" in core.nodes
    put(d, nrt("n4", free=2))  # the write lands
    assert src.apply(core, ["n4.yaml"]) == 1
    assert decisions(core) == decisions(fresh(d))
    (d / "n4.yaml").unlink()  # removing the file removes its node
    assert src.apply(core, ["n4.yaml"]) == 1 and "n4" not in core.nodes


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_named_like_an_nrt_file_is_refused_unopened(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.yaml")  # opening it for reading would block without a writer
    got = read_file(str(tmp_path), "pipe.yaml")
    assert got.error == "not a regular file" and got.objects == {}


ACTIONS = st.lists(st.tuples(st.integers(0, 3), st.sampled_from(["one", "two", "bad", "gone"]),
                             st.integers(0, 3)), min_size=1, max_size=6)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ACTIONS)
def test_incremental_updates_equal_a_fresh_read(tmp_path_factory: pytest.TempPathFactory,
                                                actions: list[tuple[int, str, int]]) -> None:
    """Whatever is written, rewritten, broken or removed, applying the named files leaves the
    core as an extender reading the final directory afresh would have it (a broken file keeps
    its last good objects, which a fresh read does not have: compared on the good files)."""
    d = tmp_path_factory.mktemp("nrt")
    for f in range(4):
        put(d, nrt(f"n{f}"), f"f{f}.yaml")
    src = DirSource(d, log=io.StringIO())
    core = ExtenderCore(log=io.StringIO())
    core.set_nodes(src.scan())
    broken: set[int] = set()
    for f, action, free in actions:
        path = d / f"f{f}.yaml"
        broken.discard(f)
        if action == "one":
            put(d, nrt(f"n{f}", free), path.name)
        elif action == "two":  # a List: this file's node and a node shared with file 0
            put(d, {"apiVersion": "v1", "kind": "List",
                    "items": [nrt(f"n{f}", free), nrt("shared", 1)]}, path.name)
        elif action == "bad":
            path.write_text("zones: [unclosed")
            broken.add(f)
        elif path.exists():
            path.unlink()
        read = src.files_read
        src.apply(core, [path.name])
        assert src.files_read - read == (0 if action == "gone" else 1)
    for f in broken:  # keep their last good objects: give the fresh reader the same
        path = d / f"f{f}.yaml"
        path.unlink()
        src.apply(core, [path.name])
    again = fresh(d)
    assert state(core) == state(again)
    assert decisions(core) == decisions(again)


# ------------------------------------------------------------------- followed by events


@pytest.fixture
def following(tmp_path: Path) -> Iterator[tuple[Path, ExtenderCore, DirSource]]:
    """A directory source running as ``extender serve`` runs it (in-thread reads)."""
    for i in range(6):
        put(tmp_path, nrt(f"n{i}"))
    src = DirSource(tmp_path, log=io.StringIO())
    core = ExtenderCore(log=io.StringIO())
    stop = threading.Event()
    t = threading.Thread(target=run_source, args=(core, src, stop, 0.05),
                         kwargs={"log": io.StringIO()}, daemon=True)
    t.start()
    try:
        assert core.ready.wait(30)
        yield tmp_path, core, src
    finally:
        stop.set()
        t.join(10)


def test_events_bring_changes_without_a_rescan(
        following: tuple[Path, ExtenderCore, DirSource]) -> None:
    d, core, src = following
    wait(lambda: src.files_checked >= 6)  # the check made once the watch is in place
    checked = src.files_checked
    write_object(d, nrt("n1", free=0), "yaml")  # as `numalign export --out` writes
    write_object(d, nrt("n6"), "yaml")
    (d / "n2.yaml").unlink()
    wait(lambda: state(core) == state(fresh(d)), 30)
    assert decisions(core) == decisions(fresh(d)) and decisions(core)[3][1]["n1"]
    # each changed file read once (twice if a second event comes while its key is "racy"),
    # the 4 others never; the events named 3 files (the audit may check a few more)
    assert 6 + 2 <= src.files_read <= 6 + 4
    assert src.files_checked - checked < 6 + 3


def test_a_kubernetes_volume_swap_is_followed(tmp_path: Path) -> None:
    """A ConfigMap volume: NAME.yaml -> ..data/NAME.yaml, and the kubelet's atomic writer
    renames a new ``..data`` symlink over the old one (no event names NAME.yaml)."""
    v1 = tmp_path / "..v1"
    v1.mkdir()
    put(v1, nrt("a"))
    (tmp_path / "..data").symlink_to("..v1")
    (tmp_path / "a.yaml").symlink_to("..data/a.yaml")
    src = DirSource(tmp_path, log=io.StringIO())
    core = ExtenderCore(log=io.StringIO())
    stop = threading.Event()
    t = threading.Thread(target=run_source, args=(core, src, stop, 0.05),
                         kwargs={"log": io.StringIO()}, daemon=True)
    t.start()
    try:
        assert core.ready.wait(30)
        wait(lambda: src.files_checked >= 1)  # the watch is in place
        before = core.nodes["a"].digest
        v2 = tmp_path / "..v2"
        v2.mkdir()
        put(v2, nrt("a", free=0))
        (tmp_path / "..data_tmp").symlink_to("..v2")
        os.replace(tmp_path / "..data_tmp", tmp_path / "..data")
        wait(lambda: core.nodes["a"].digest != before, 30)
        assert state(core) == state(fresh(tmp_path))
        assert decisions(core) == decisions(fresh(tmp_path))
    finally:
        stop.set()
        t.join(10)


def test_without_a_watch_every_file_is_checked_each_interval(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def unavailable(source: DirSource, stop: threading.Event) -> Iterator[set[str] | None]:
        raise dirwatch.WatchUnavailable("inotify watch limit reached")
        yield None

    monkeypatch.setattr(dirwatch, "changes", unavailable)
    put(tmp_path, nrt("a"))
    src = DirSource(tmp_path, log=io.StringIO())
    core = ExtenderCore(log=io.StringIO())
    log = io.StringIO()
    stop = threading.Event()
    t = threading.Thread(target=run_source, args=(core, src, stop, 0.05),
                         kwargs={"log": log}, daemon=True)
    t.start()
    try:
        assert core.ready.wait(30)
        put(tmp_path, nrt("b"))
        wait(lambda: state(core) == state(fresh(tmp_path)))
        assert src.files_read == 2
        assert log.getvalue().count("cannot watch") == 1
        assert "(inotify watch limit reached); checking every file's" in log.getvalue()
    finally:
        stop.set()
        t.join(10)


def test_serve_reads_files_in_its_workers_and_follows_events(tmp_path: Path) -> None:
    """``extender serve --nrt-dir`` as started: the reads and builds in a worker process."""
    for i in range(4):
        put(tmp_path, nrt(f"n{i}"))
    running = start(nrt_dir=str(tmp_path), port=0, workers=1, log=io.StringIO())
    try:
        core, src = running.core, running.source
        assert isinstance(src, DirSource) and src.reader is not None
        assert core.ready.wait(60)
        assert running.builder is not None and running.builder.builds == 4
        wait(lambda: src.files_checked >= 4)  # the watch is in place
        write_object(tmp_path, nrt("n0", free=0), "yaml")
        wait(lambda: state(core) == state(fresh(tmp_path)), 60)
        assert decisions(core) == decisions(fresh(tmp_path))
        assert "n0" not in decisions(core)[0][0]  # no CPU free on n0: no pod passes
        assert 5 <= src.files_read <= 6 and running.builder.builds == 5
    finally:
        running.close()
