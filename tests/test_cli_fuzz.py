"""Hostile input against every subcommand and every file kind (hypothesis + a few subprocesses).

The invariant (issue 13): whatever the bytes of an input file, ``numalign`` exits 0, 1 or 2,
never prints a traceback, prints an error as exactly one line, answers in under 10 s (of CPU
time; wall time only guards against hangs, as the test machines are shared), and
(checked in subprocesses) stays within a bounded peak RSS. The caps that make this true are
listed in ``docs/limits.md``.

Mutations: deep nesting, huge integers, non-UTF-8 bytes, newlines and escape sequences in
values, empty files, wrong types, huge cpulists, truncation, YAML alias bombs; for hwloc XML
bad versions, bogus encodings, entities and deep elements; for sysfs captures hostile file
contents, FIFOs, symlink loops and huge ids.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import REPO
from numalign.cli import main
from numalign.kube.topology import build_nrt
from numalign.machine.spec import read_machine_file
from numalign.node import store
from numalign.node.admission import Node

EXAMPLES = REPO / "examples"
FIG1 = EXAMPLES / "fig1.yaml"
PODS = EXAMPLES / "fig1-pods.yaml"
TIME_LIMIT = 10.0
RSS_LIMIT_KB = 1024 * 1024  # 1 GiB

SETTINGS = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

MERGE_CASE = {
    "policy": "single-numa-node",
    "numa_nodes": [0, 1],
    "providers": [
        {"cpu": [{"affinity": [0], "preferred": True}, {"affinity": [0, 1], "preferred": False}]},
        {"gpu": [{"affinity": [0], "preferred": True}, {"affinity": [1], "preferred": True}]},
    ],
}
NUMATOPO = {
    "apiVersion": "nodeinfo.volcano.sh/v1alpha1",
    "kind": "Numatopology",
    "metadata": {"name": "node-1"},
    "spec": {
        "policies": {"CPUManagerPolicy": "static", "TopologyManagerPolicy": "single-numa-node"},
        "resReserved": {"cpu": "1000m", "memory": "1Gi"},
        "numares": {"cpu": {"allocatable": "1-3", "capacity": 4}},
        "cpuDetail": {str(i): {"numa": i // 2, "socket": i // 2, "core": i % 2} for i in range(4)},
    },
}
HWLOC_XML = """<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE topology SYSTEM "hwloc2.dtd">
<topology version="2.0">
 <object type="Machine" os_index="0" cpuset="0x0000000f" gp_index="1">
  <object type="Package" os_index="0" cpuset="0x0000000f" gp_index="2">
   <object type="NUMANode" os_index="0" cpuset="0x00000003" local_memory="1073741824" gp_index="3"/>
   <object type="NUMANode" os_index="1" cpuset="0x0000000c" local_memory="1073741824" gp_index="4"/>
   <object type="Core" os_index="0" cpuset="0x00000003" gp_index="5">
    <object type="PU" os_index="0" cpuset="0x00000001" gp_index="6"/>
    <object type="PU" os_index="1" cpuset="0x00000002" gp_index="7"/>
   </object>
   <object type="Core" os_index="1" cpuset="0x0000000c" gp_index="8">
    <object type="PU" os_index="2" cpuset="0x00000004" gp_index="9"/>
    <object type="PU" os_index="3" cpuset="0x00000008" gp_index="10"/>
   </object>
  </object>
 </object>
</topology>
"""


# ----------------------------------------------------------------------------- seed inputs


def make_sysfs(root: Path) -> Path:
    """A small valid sysfs capture: 2 NUMA nodes, 4 CPUs, 2Mi hugepages."""
    files = {
        "sys/devices/system/cpu/online": "0-3\n",
        "sys/devices/system/node/online": "0-1\n",
        "sys/devices/system/node/possible": "0-1\n",
        "proc/meminfo": "MemTotal: 8388608 kB\n",
    }
    for c in range(4):
        d = f"sys/devices/system/cpu/cpu{c}/topology"
        files[f"{d}/core_id"] = f"{c // 2}\n"
        files[f"{d}/physical_package_id"] = f"{c // 2}\n"
        files[f"{d}/thread_siblings_list"] = f"{c}\n"
        files[f"sys/devices/system/cpu/cpu{c}/cache/index3/level"] = "3\n"
        files[f"sys/devices/system/cpu/cpu{c}/cache/index3/shared_cpu_list"] = "0-3\n"
    for n in range(2):
        d = f"sys/devices/system/node/node{n}"
        files[f"{d}/cpulist"] = f"{2 * n}-{2 * n + 1}\n"
        files[f"{d}/cpumap"] = f"{3 << (2 * n):x}\n"
        files[f"{d}/meminfo"] = f"Node {n} MemTotal: 4194304 kB\n"
        files[f"{d}/distance"] = "10 21\n" if n == 0 else "21 10\n"
        files[f"{d}/hugepages/hugepages-2048kB/nr_hugepages"] = "4\n"
    dev = "sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0"
    files.update({f"{dev}/class": "0x030200\n", f"{dev}/vendor": "0x10de\n",
                  f"{dev}/device": "0x1db8\n", f"{dev}/numa_node": "1\n"})
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    link = root / "sys/bus/pci/devices/0000:01:00.0"
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(os.path.relpath(root / dev, link.parent))
    return root


@pytest.fixture(scope="module")
def seeds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Valid documents of every kind (as Python objects or text), the fuzz's starting points."""
    tmp = tmp_path_factory.mktemp("seeds")
    fig1 = read_machine_file(str(FIG1))
    state_dir = tmp / "state"
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["admit", "-m", str(FIG1), "--state-dir", str(state_dir), str(PODS)]) in (0, 1)
    node = Node(fig1)
    return {
        "machine": yaml.safe_load(FIG1.read_text()),
        "pods": list(yaml.safe_load_all(PODS.read_text())),
        "merge": MERGE_CASE,
        "nrt": build_nrt(node, name="fig1"),
        "numatopo": NUMATOPO,
        "state": json.loads((state_dir / store.STATE_FILE).read_text()),
        "checkpoint": node.state.cpu.to_dict(),
        "kubelet_config": {"kind": "KubeletConfiguration", "topologyManagerPolicy": "restricted",
                           "cpuManagerPolicy": "static", "reservedSystemCPUs": "0"},
        "cluster": {"nodes": [{"machine": yaml.safe_load(FIG1.read_text()), "count": 1}]},
    }


# ----------------------------------------------------------------------------- mutations

HUGE_CPULISTS = ["0-99999999999", "0-65535", "0-" + "9" * 5000, "0-65535:1/" + "9" * 50, "4-1"]
WRONG_TYPES: list[Any] = [None, True, 1.5, "x", [], {}, -1, 2**70]
NASTY_STRINGS = ["a\nb", "\x1b[31mred\x1b[0m", "line\r\nbreak\u2028", "", " " * 3, "é" * 3]


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every path to a value in a JSON-like tree (iterative; the seeds are shallow)."""
    yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _paths(v, (*prefix, i))


def _replace(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    out = dict(doc) if isinstance(doc, dict) else list(doc)
    out[path[0]] = _replace(doc[path[0]], path[1:], value)  # type: ignore[index]
    return out


def _dump(doc: Any, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(doc)
    return yaml.safe_dump(doc, sort_keys=False)


PLACEHOLDER = "@@HOSTILE@@"


def mutate_tree(doc: Any, fmt: str, rnd: random.Random, kind: str) -> bytes:
    """One hostile version of a JSON/YAML document."""
    paths = list(_paths(doc))
    path = rnd.choice(paths)
    if kind == "deep":
        n = rnd.choice([99, 150, 5000, 100_000])
        text = _dump(_replace(doc, path, PLACEHOLDER), "json")
        return text.replace(json.dumps(PLACEHOLDER), "[" * n + "]" * n).encode()
    if kind == "deep_map":
        n = rnd.choice([120, 3000])
        text = _dump(_replace(doc, path, PLACEHOLDER), "json")
        return text.replace(json.dumps(PLACEHOLDER), '{"a":' * n + "1" + "}" * n).encode()
    if kind == "huge_int":
        digits = rnd.choice([19, 40, 4301, 100_000])
        text = _dump(_replace(doc, path, PLACEHOLDER), fmt)
        quoted = json.dumps(PLACEHOLDER) if fmt == "json" else PLACEHOLDER
        return text.replace(quoted, "9" * digits).encode()
    if kind == "non_utf8":
        data = _dump(doc, fmt).encode()
        at = rnd.randrange(len(data) + 1)
        return data[:at] + rnd.choice([b"\xff\xfe", b"\xc3", b"\xed\xa0\x80", b"\x00"]) + data[at:]
    if kind == "newline":
        return _dump(_replace(doc, path, rnd.choice(NASTY_STRINGS)), fmt).encode()
    if kind == "empty":
        return rnd.choice([b"", b"\n", b"---\n", b"null\n", b"[]", b"{}"])
    if kind == "wrong_type":
        return _dump(_replace(doc, path, rnd.choice(WRONG_TYPES)), fmt).encode()
    if kind == "cpulist":
        return _dump(_replace(doc, path, rnd.choice(HUGE_CPULISTS)), fmt).encode()
    if kind == "truncate":
        data = _dump(doc, fmt).encode()
        return data[: rnd.randrange(len(data) + 1)]
    if kind == "alias_bomb":
        lines = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
        for i in range(1, 9):
            prev = chr(ord("a") + i - 1)
            lines.append(f"{chr(ord('a') + i)}: &{chr(ord('a') + i)} [" + ", ".join([f"*{prev}"] * 10) + "]")
        return ("\n".join(lines) + "\n").encode()
    if kind == "recursive_alias":
        return b"a: &a [*a]\n" if rnd.random() < 0.5 else b"- &x {k: [*x]}\n"
    raise AssertionError(kind)


TREE_MUTATIONS = ["deep", "deep_map", "huge_int", "non_utf8", "newline", "empty", "wrong_type",
                  "cpulist", "truncate", "alias_bomb", "recursive_alias"]


def mutate_xml(rnd: random.Random, kind: str) -> bytes:
    x = HWLOC_XML
    if kind == "version":
        v = rnd.choice(["", "x", "1e999", "2.0.0.0", "-1", "9" * 5000, "2.\n0"])
        return x.replace('version="2.0"', f'version="{v}"').encode()
    if kind == "encoding":
        e = rnd.choice(["bogus", "UTF-16", "utf-32", "cp1252", "", "EBCDIC-CP-US"])
        return x.replace('encoding="UTF-8"', f'encoding="{e}"').encode()
    if kind == "entity":
        return x.replace('<!DOCTYPE topology SYSTEM "hwloc2.dtd">',
                         '<!DOCTYPE topology [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;">]>'
                         ).replace('os_index="0" cpuset="0x00000001"', 'os_index="&b;" cpuset="0x00000001"').encode()
    if kind == "deep":
        n = rnd.choice([129, 10_000, 200_000])
        return x.replace("<object type=\"Core\"", '<object type="Group">' * n + "</object>" * n
                         + '<object type="Core"', 1).encode()
    if kind == "huge_index":
        v = rnd.choice(["99999999999", "9" * 5000, "-5", "0x10", ""])
        return x.replace('type="PU" os_index="3"', f'type="PU" os_index="{v}"').encode()
    if kind == "bad_number":
        attr = rnd.choice(["local_memory", "cpuset", "gp_index"])
        return x.replace(f'{attr}="', f'{attr}="1e99999x', 1).encode()
    if kind == "non_utf8":
        data = x.encode()
        at = rnd.randrange(len(data))
        return data[:at] + b"\xff\xfe" + data[at:]
    if kind == "utf16":
        return x.replace('encoding="UTF-8"', 'encoding="UTF-16"').encode("utf-16")
    if kind == "truncate":
        data = x.encode()
        return data[: rnd.randrange(len(data))]
    if kind == "empty":
        return b""
    raise AssertionError(kind)


XML_MUTATIONS = ["version", "encoding", "entity", "deep", "huge_index", "bad_number", "non_utf8",
                 "utf16", "truncate", "empty"]

SYSFS_FILES = [
    "sys/devices/system/cpu/online",
    "sys/devices/system/cpu/cpu0/topology/thread_siblings_list",
    "sys/devices/system/cpu/cpu1/topology/core_id",
    "sys/devices/system/cpu/cpu2/topology/physical_package_id",
    "sys/devices/system/cpu/cpu3/cache/index3/shared_cpu_list",
    "sys/devices/system/node/online",
    "sys/devices/system/node/node0/cpulist",
    "sys/devices/system/node/node1/cpumap",
    "sys/devices/system/node/node0/meminfo",
    "sys/devices/system/node/node1/distance",
    "sys/devices/system/node/node0/hugepages/hugepages-2048kB/nr_hugepages",
    "sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/class",
    "sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/numa_node",
    "proc/meminfo",
]
SYSFS_VALUES = [
    b"0-99999999999\n", b"0-" + b"9" * 5000 + b"\n", b"9" * 100_000, b"-1\n", b"\x00" * 64,
    b"\xff\xfe\x00garbage\x80", b"", b"0x" + b"f" * 5000, b"ffffffff," * 5000,
    b"MemTotal: " + b"9" * 5000 + b" kB\n", b"10 21 " * 20_000, b"1\n2\n3\n", b"\n" * 70_000,
]


def mutate_sysfs(root: Path, rnd: random.Random, kind: str) -> None:
    if kind == "value":
        (root / rnd.choice(SYSFS_FILES)).write_bytes(rnd.choice(SYSFS_VALUES))
    elif kind == "fifo":
        p = root / rnd.choice(SYSFS_FILES)
        p.unlink()
        os.mkfifo(p)
    elif kind == "loop":
        p = root / rnd.choice(SYSFS_FILES)
        p.unlink()
        p.symlink_to(p.name)
    elif kind == "dir_loop":
        d = root / "sys/devices/system/node/node1"
        shutil.rmtree(d)
        d.symlink_to("node1")
    elif kind == "huge_id":
        name = rnd.choice(["cpu99999999999999999999", "cpu65536", "node" + "9" * 300])
        sub = "cpu" if name.startswith("cpu") else "node"
        (root / f"sys/devices/system/{sub}/{name}").mkdir()
    elif kind == "deep_tree":
        d = root / "sys/devices/system/cpu/cpu0/cache"
        for _ in range(60):
            d = d / "index3"
            d.mkdir(exist_ok=True)
    elif kind == "missing":
        shutil.rmtree(root / "sys/devices/system/node")
    else:
        raise AssertionError(kind)


SYSFS_MUTATIONS = ["value", "value", "value", "fifo", "loop", "dir_loop", "huge_id", "deep_tree",
                   "missing"]


# ----------------------------------------------------------------------------- the invariant


def check_run(argv: list[str], stdin: bytes = b"") -> tuple[int, str, str]:
    """Run ``numalign argv`` in-process; assert the invariant; return (code, out, err)."""
    out, err = io.StringIO(), io.StringIO()
    start, wall = time.process_time(), time.monotonic()
    old_stdin = sys.stdin
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as e:  # argparse
                code = int(e.code or 0)
    finally:
        sys.stdin = old_stdin
    elapsed = time.process_time() - start  # CPU time: the test machine is shared
    assert time.monotonic() - wall < TIME_LIMIT * 6, argv  # hang guard
    if "--jsonl" in argv and not err.getvalue():  # per-line errors are results on stdout
        for line in out.getvalue().splitlines():
            result = json.loads(line)
            assert "\n" not in result.get("error", ""), line
        assert code in (0, 2) and elapsed < TIME_LIMIT
    else:
        check_output(argv, code, err.getvalue(), elapsed)
    return code, out.getvalue(), err.getvalue()


def check_output(argv: list[str], code: int, err: str, elapsed: float) -> None:
    assert code in (0, 1, 2), (argv, code, err)
    assert "Traceback" not in err, (argv, err)
    assert elapsed < TIME_LIMIT, (argv, elapsed)
    lines = err.splitlines()
    errors = [line for line in lines if ": error: " in line]
    if code == 2:
        assert len(errors) == 1, (argv, err)
    if argv[0] != "simulate":
        for line in lines:
            assert line.startswith("numalign "), (argv, err)  # no continuation lines


def write(path: Path, data: bytes) -> str:
    path.write_bytes(data)
    return str(path)


# ----------------------------------------------------------------------------- document kinds

#: kind -> (seed key, format, argv given the mutated file and a scratch directory)
Argv = Callable[[str, Path], list[str]]
DOC_KINDS: dict[str, tuple[str, str, Argv]] = {
    "machine/admit": ("machine", "yaml", lambda f, d: ["admit", "-m", f, str(PODS)]),
    "machine/json": ("machine", "json", lambda f, d: ["admit", "-o", "table", "-m", f, str(PODS)]),
    "machine/export": ("machine", "yaml", lambda f, d: ["export", "-m", f]),
    "machine/run": ("machine", "yaml", lambda f, d: [
        "run", "--dry-run", "-m", f, "--state-dir", str(d / "runs"), "--", "true"]),
    "machine/state": ("machine", "yaml", lambda f, d: [
        "state", "--state-dir", str(d / "st"), "--reconcile", "-m", f]),
    "pods/admit": ("pods", "yaml", lambda f, d: ["admit", "-m", str(FIG1), "--explain", f]),
    "pods/json": ("pods", "json", lambda f, d: ["admit", "-m", str(FIG1), "-o", "yaml", f]),
    "merge": ("merge", "json", lambda f, d: ["merge", f]),
    "merge/yaml-ish": ("merge", "yaml", lambda f, d: ["merge", f]),
    "merge/jsonl": ("merge", "json", lambda f, d: ["merge", "--jsonl", f]),
    "nrt": ("nrt", "yaml", lambda f, d: ["discover", "--nrt", f, "-o", "json"]),
    "numatopo": ("numatopo", "yaml", lambda f, d: ["discover", "--numatopo", f]),
    "kubelet_config": ("kubelet_config", "yaml", lambda f, d: [
        "export", "-m", str(FIG1), "--kubelet-config", f]),
    "cluster": ("cluster", "yaml", lambda f, d: [
        "simulate", "--cluster", f, "--workload", "synthetic:count=3", "--profiles", "numalign",
        "--out", str(d / "sim"), "--quiet"]),
}


@pytest.fixture()
def scratch() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="numalign-fuzz-") as d:
        yield Path(d)


@SETTINGS
@given(kind=st.sampled_from(sorted(k for k in DOC_KINDS if k != "cluster")),
       mutation=st.sampled_from(TREE_MUTATIONS), seed=st.integers(0, 2**32 - 1))
def test_document_kinds(seeds: dict[str, Any], kind: str, mutation: str, seed: int) -> None:
    key, fmt, argv = DOC_KINDS[kind]
    rnd = random.Random(seed)
    with tempfile.TemporaryDirectory(prefix="numalign-fuzz-") as tmp:
        d = Path(tmp)
        data = mutate_tree(seeds[key], fmt, rnd, mutation)
        if kind == "merge/jsonl":  # a valid line, the hostile one, a valid line
            good = json.dumps(MERGE_CASE).encode()
            data = good + b"\n" + data.replace(b"\n", b" ") + b"\n" + good + b"\n"
        f = write(d / f"input.{fmt}", data)
        check_run(argv(f, d))


@pytest.mark.parametrize("mutation", TREE_MUTATIONS)
def test_simulate_cluster_template(seeds: dict[str, Any], scratch: Path, mutation: str) -> None:
    """Few examples: a cluster that parses runs a (small) simulation and its report."""
    data = mutate_tree(seeds["cluster"], "yaml", random.Random(7), mutation)
    check_run(DOC_KINDS["cluster"][2](write(scratch / "cluster.yaml", data), scratch))


def _write_state(state_dir: Path, doc: dict[str, Any]) -> None:
    state_dir.mkdir(mode=0o700, exist_ok=True)
    (state_dir / store.STATE_FILE).write_text(json.dumps(doc))


@SETTINGS
@given(mutation=st.sampled_from(TREE_MUTATIONS), seed=st.integers(0, 2**32 - 1),
       command=st.sampled_from(["state", "admit", "release", "export", "ps"]),
       resign=st.booleans())
def test_state_files(seeds: dict[str, Any], mutation: str, seed: int, command: str,
                     resign: bool) -> None:
    """A hostile state.json (with a recomputed checksum, or not) under every state reader."""
    rnd = random.Random(seed)
    with tempfile.TemporaryDirectory(prefix="numalign-fuzz-") as tmp:
        d = Path(tmp) / "st"
        d.mkdir(mode=0o700)
        state = seeds["state"]
        data = mutate_tree(state["payload"], "json", rnd, mutation)
        if resign:
            try:
                payload = json.loads(data)
                doc = {**state, "payload": payload, "checksum": store.checksum(payload)}
                data = json.dumps(doc).encode()
            except (ValueError, RecursionError):
                data = mutate_tree(state, "json", rnd, mutation)
        else:
            data = mutate_tree(state, "json", rnd, mutation)
        (d / store.STATE_FILE).write_bytes(data)
        argv = {
            "state": ["state", "--state-dir", str(d)],
            "admit": ["admit", "--state-dir", str(d), str(PODS)],
            "release": ["release", "--state-dir", str(d), "default/a"],
            "export": ["export", "-m", str(FIG1), "--state-dir", str(d)],
            "ps": ["ps", "--state-dir", str(d), "-o", "json"],
        }[command]
        check_run(argv)


def _ps_with_runs(state: dict[str, Any], mutation: str, seed: int) -> None:
    with tempfile.TemporaryDirectory(prefix="numalign-fuzz-") as tmp:
        d = Path(tmp) / "st"
        _write_state(d, state)
        runs = {"format": "numalign-runs", "version": 1, "runs": {"default/a": {"pid": 1}}}
        (d / "runs.json").write_bytes(mutate_tree(runs, "json", random.Random(seed), mutation))
        check_run(["ps", "--state-dir", str(d), "-o", "json"])


@settings(SETTINGS, max_examples=30)
@given(mutation=st.sampled_from(TREE_MUTATIONS), seed=st.integers(0, 2**32 - 1))
def test_runs_file(seeds: dict[str, Any], mutation: str, seed: int) -> None:
    """``ps`` over a hostile runs.json beside a valid state."""
    _ps_with_runs(seeds["state"], mutation, seed)


def test_runs_file_deep(seeds: dict[str, Any]) -> None:
    for seed in range(4):  # depths 99, 150, 5000, 100000 among them
        _ps_with_runs(seeds["state"], "deep", seed)


@SETTINGS
@given(mutation=st.sampled_from(TREE_MUTATIONS), seed=st.integers(0, 2**32 - 1),
       command=st.sampled_from(["admit", "export"]))
def test_kubelet_checkpoints(seeds: dict[str, Any], mutation: str, seed: int, command: str) -> None:
    rnd = random.Random(seed)
    with tempfile.TemporaryDirectory(prefix="numalign-fuzz-") as tmp:
        d = Path(tmp)
        (d / "cpu_manager_state").write_bytes(mutate_tree(seeds["checkpoint"], "json", rnd, mutation))
        argv = (["admit", "-m", str(FIG1), "--kubelet-state", str(d), str(PODS)]
                if command == "admit" else ["export", "-m", str(FIG1), "--kubelet-state", str(d)])
        check_run(argv)


@SETTINGS
@given(mutation=st.sampled_from(XML_MUTATIONS), seed=st.integers(0, 2**32 - 1))
def test_hwloc_xml(mutation: str, seed: int) -> None:
    with tempfile.TemporaryDirectory(prefix="numalign-fuzz-") as tmp:
        f = write(Path(tmp) / "topo.xml", mutate_xml(random.Random(seed), mutation))
        check_run(["discover", "--hwloc-xml", f, "-o", "table"])


@settings(SETTINGS, max_examples=40)
@given(mutations=st.lists(st.sampled_from(SYSFS_MUTATIONS), min_size=1, max_size=3),
       seed=st.integers(0, 2**32 - 1),
       command=st.sampled_from(["discover", "export", "run"]),
       tarball=st.booleans())
def test_sysfs_captures(mutations: list[str], seed: int, command: str, tarball: bool) -> None:
    rnd = random.Random(seed)
    with tempfile.TemporaryDirectory(prefix="numalign-fuzz-") as tmp:
        root = make_sysfs(Path(tmp) / "cap")
        for m in mutations:
            with contextlib.suppress(OSError):  # a mutation on an already-broken tree
                mutate_sysfs(root, rnd, m)
        src = str(root)
        if tarball and "fifo" not in mutations:
            import tarfile

            src = str(Path(tmp) / "cap.tar.gz")
            with tarfile.open(src, "w:gz") as tf:
                tf.add(root, arcname="cap")
        argv = {
            "discover": ["discover", "--sysfs-root", src, "-o", "table"],
            "export": ["export", "--sysfs-root", src],
            "run": ["run", "--dry-run", "--sysfs-root", src, "--state-dir", str(Path(tmp) / "r"),
                    "--", "true"],
        }[command]
        check_run(argv)


@pytest.mark.parametrize(
    ("args", "expect"),
    [
        (["export", "-m", str(FIG1), "--poll", "0", "--interval", "5"], "--poll"),
        (["export", "-m", str(FIG1), "--poll", "nan"], "--poll"),
        (["export", "-m", str(FIG1), "--interval", "0"], "--interval"),
        (["export", "-m", str(FIG1), "--kubelet-state", "/nonexistent"], "cannot read a source"),
        (["merge", "/nonexistent"], "cannot read"),
        (["discover", "--hwloc-xml", "/nonexistent"], "/nonexistent"),
        (["discover", "--sysfs-root", "/nonexistent"], "/nonexistent"),
        (["ps", "--state-dir", "/nonexistent/x"], ""),
    ],
)
def test_bad_arguments(args: list[str], expect: str) -> None:
    code, _, err = check_run(args)
    assert code in (1, 2) or args[0] == "ps"
    assert expect in err
    assert "retrying" not in err


def test_merge_stdin_and_jsonl_prefix_once() -> None:
    code, out, err = check_run(["merge", "--jsonl", "-"], b'{"policy": "x"}\nnot json\n')
    assert code == 2 and err == ""
    assert [json.loads(x)["error"] for x in out.splitlines()] == [
        'line 1: policy: unknown policy: "x"',
        "line 2: malformed JSON: Expecting value at line 1 column 1",
    ]


@pytest.mark.parametrize("case", [
    {**MERGE_CASE, "scope": "pod"},
    {**MERGE_CASE, "policy": "Restricted"},
    {**MERGE_CASE, "policy": "SingleNUMANodePodLevel"},
    {**MERGE_CASE, "policy": ""},
])
def test_merge_rejects_non_kubelet_fields(case: dict[str, Any]) -> None:
    code, _, err = check_run(["merge", "-"], json.dumps(case).encode())
    assert code == 2
    assert "scope: unknown field" in err or "policy: unknown policy" in err


# ----------------------------------------------------------------------------- subprocesses

RSS_PROBE = (
    "import json, os, resource, sys\n"
    "from numalign.cli import main\n"
    "try:\n"
    "    code = main(sys.argv[1:])\n"
    "finally:\n"
    "    u = resource.getrusage(resource.RUSAGE_SELF)\n"
    "    with open(os.environ['NUMALIGN_RSS_FILE'], 'w') as f:\n"
    "        f.write(f'{u.ru_maxrss} {u.ru_utime + u.ru_stime}')\n"
    "sys.exit(code)\n"
)


def run_subprocess(argv: list[str], tmp: Path) -> tuple[int, str]:
    """Run in a child: CPU time (not wall time: the test machine is shared) under the time
    limit, wall time under a hang guard, peak RSS under :data:`RSS_LIMIT_KB`."""
    rss_file = tmp / "rss"
    env = {**os.environ, "NUMALIGN_RSS_FILE": str(rss_file),
           "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", RSS_PROBE, *argv], capture_output=True,
                          timeout=TIME_LIMIT * 6, env=env, text=True, check=False)
    rss, cpu = rss_file.read_text().split()
    check_output(argv, proc.returncode, proc.stderr, float(cpu))
    assert int(rss) < RSS_LIMIT_KB, argv
    return proc.returncode, proc.stderr


def _big_documents(tmp: Path) -> dict[str, Path]:
    out: dict[str, Path] = {}
    out["deep_yaml"] = tmp / "deep.yaml"
    out["deep_yaml"].write_text("[" * 100_000 + "]" * 100_000)
    out["deep_json"] = tmp / "deep.json"
    out["deep_json"].write_text("[" * 100_000 + "]" * 100_000)
    out["too_big"] = tmp / "big.yaml"
    out["too_big"].write_bytes(b"# " + b"x" * (17 * 1024 * 1024) + b"\n")
    out["many_values"] = tmp / "many.json"
    out["many_values"].write_text("[" + "0," * 1_100_000 + "0]")
    out["bomb"] = tmp / "bomb.yaml"
    out["bomb"].write_bytes(mutate_tree({}, "yaml", random.Random(0), "alias_bomb"))
    out["xml_deep"] = tmp / "deep.xml"
    out["xml_deep"].write_text(HWLOC_XML.replace('<object type="Core"', '<object type="Group">' * 300_000
                                                 + "</object>" * 300_000 + '<object type="Core"', 1))
    cap = make_sysfs(tmp / "cap")
    (cap / SYSFS_FILES[1]).write_text("0-99999999999\n")
    (cap / SYSFS_FILES[6]).write_text("0-" + "9" * 60_000)
    (cap / SYSFS_FILES[3]).unlink()
    os.mkfifo(cap / SYSFS_FILES[3])  # a plain read() would block forever
    out["sysfs"] = cap
    return out


@pytest.mark.parametrize("case", ["deep_yaml", "deep_json", "too_big", "many_values", "bomb",
                                  "xml_deep", "sysfs", "poll0"])
def test_subprocess_bounded(tmp_path: Path, case: str) -> None:
    docs = _big_documents(tmp_path)
    argv = {
        "deep_yaml": ["admit", "-m", str(docs["deep_yaml"]), str(PODS)],
        "deep_json": ["merge", str(docs["deep_json"])],
        "too_big": ["admit", "-m", str(FIG1), str(docs["too_big"])],
        "many_values": ["merge", str(docs["many_values"])],
        "bomb": ["discover", "--nrt", str(docs["bomb"])],
        "xml_deep": ["discover", "--hwloc-xml", str(docs["xml_deep"])],
        "sysfs": ["discover", "--sysfs-root", str(docs["sysfs"])],
        "poll0": ["export", "-m", str(FIG1), "--interval", "5", "--poll", "0"],
    }[case]
    code, err = run_subprocess(argv, tmp_path)
    if case != "sysfs":
        assert code == 2, err
