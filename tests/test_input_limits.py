"""The caps of docs/limits.md, one by one: value, timing and message."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
import yaml

from conftest import REPO
from numalign.cli.merge_case import parse_case
from numalign.errors import InputError, one_line
from numalign.inputs import documents as yamlfiles
from numalign.kube.exporter import Exporter, ExportSources, run_loop
from numalign.machine import capture_archive, hwloc, sysfs

FIG1 = REPO / "examples" / "fig1.yaml"


def _err(fn: object, *args: object) -> str:
    with pytest.raises(InputError) as e:
        fn(*args)  # type: ignore[operator]
    msg = e.value.message
    assert "\n" not in msg
    return msg


@pytest.mark.parametrize("text", [
    "[" * 100_000 + "]" * 100_000,
    "{a: " * 100_000 + "1" + "}" * 100_000,
    "- " * 100_000 + "x",
    "".join("  " * i + "a:\n" for i in range(3000)),
])
def test_deep_yaml_refused_at_once(text: str) -> None:
    start = time.process_time()  # CPU time: the machine's load does not count
    msg = _err(yamlfiles.load_yaml_all, text, "f.yaml")
    assert time.process_time() - start < 1.0
    assert msg.startswith("f.yaml: nested deeper than 100 levels at line ")


def test_depth_boundary() -> None:
    assert yamlfiles.load_yaml_all("[" * 100 + "]" * 100, "f") == [_nest(100)]
    _err(yamlfiles.load_yaml_all, "[" * 101 + "]" * 101, "f")
    assert yamlfiles.loads_json("[" * 100 + "]" * 100, "f") == _nest(100)
    assert "nested deeper" in _err(yamlfiles.loads_json, "[" * 101 + "]" * 101, "f")
    assert "nested deeper" in _err(yamlfiles.loads_json, "[" * 100_000 + "]" * 100_000, "f")


def _nest(n: int) -> list[object]:
    out: list[object] = []
    for _ in range(n - 1):
        out = [out]
    return out


def test_alias_bomb_and_recursive_alias() -> None:
    lines = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 9):
        prev, cur = chr(ord("a") + i - 1), chr(ord("a") + i)
        lines.append(f"{cur}: &{cur} [" + ", ".join([f"*{prev}"] * 10) + "]")
    start = time.process_time()
    assert "more than 1000000 values (aliases expanded)" in _err(
        yamlfiles.load_yaml_all, "\n".join(lines), "f")
    assert time.process_time() - start < 2.0
    assert _err(yamlfiles.load_yaml_all, "a: &a [*a]", "f") == "f: recursive alias *a"
    assert yamlfiles.load_yaml_all("a: &a [1]\nb: *a", "f") == [{"a": [1], "b": [1]}]


def test_integer_literals() -> None:
    assert yamlfiles.load_yaml_all("a: " + "9" * 100, "f") == [{"a": int("9" * 100)}]
    assert "integer longer than 100 digits at line 1" in _err(
        yamlfiles.load_yaml_all, "a: " + "9" * 101, "f")
    assert "integer longer than 100 digits" in _err(yamlfiles.load_yaml_all, "a: " + "1:" * 5000 + "1", "f")
    assert _err(yamlfiles.loads_json, "[" + "9" * 5000 + "]", "f") == "f: integer longer than 100 digits"
    assert _err(yamlfiles.loads_json, "[" + "9" * 200 + "]", "f") == "f: integer longer than 100 digits"


def test_size_and_encoding(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "x.yaml"
    f.write_bytes(b"a: 1\n" + b"#" * 100)
    monkeypatch.setattr(yamlfiles, "MAX_DOCUMENT_BYTES", 64)
    assert _err(yamlfiles.read_yaml, str(f)) == f"{f}: larger than 16 MiB: refused"
    monkeypatch.undo()
    f.write_bytes(b"a: \xff\n")
    assert _err(yamlfiles.read_yaml, str(f)).startswith(f"{f}: not UTF-8 text: invalid start byte")
    f.write_bytes(b"\xef\xbb\xbfa: 1\n")  # a BOM is fine
    assert yamlfiles.read_yaml(str(f)) == {"a": 1}


def test_messages_are_one_line() -> None:
    assert one_line("a\nb\x1b[31m\u2028") == "a\\nb\\x1b[31m\\u2028"
    assert InputError('unknown policy: "x\ny"', "policy").message == 'policy: unknown policy: "x\\ny"'


@pytest.mark.parametrize(("case", "message"), [
    ({"policy": "restricted", "numa_nodes": [0], "scope": "pod"}, "scope: unknown field"),
    ({"policy": "Restricted", "numa_nodes": [0]}, 'policy: unknown policy: "Restricted"'),
    ({"policy": "RestrictedPodLevel", "numa_nodes": [0]}, 'policy: unknown policy: "RestrictedPodLevel"'),
    ({"policy": "", "numa_nodes": [0]}, 'policy: unknown policy: ""'),
])
def test_merge_case_is_kubelet_only(case: dict[str, object], message: str) -> None:
    assert _err(parse_case, case).startswith(message)


HWLOC = (REPO / "tests" / "test_cli_fuzz.py").read_text().split('HWLOC_XML = """', 1)[1].split('"""', 1)[0]


@pytest.mark.parametrize(("xml", "message"), [
    (HWLOC.replace('version="2.0"', 'version=""'), 'topology version="" is not a version like "2.0"'),
    (HWLOC.replace('version="2.0"', 'version="1e999"'), 'topology version="1e999" is not'),
    (HWLOC.replace('encoding="UTF-8"', 'encoding="bogus"'), 'unsupported encoding "bogus"'),
    (HWLOC.replace('encoding="UTF-8"', 'encoding="UTF-16"'), 'unsupported encoding "UTF-16"'),
    (HWLOC.replace('SYSTEM "hwloc2.dtd">', '[<!ATTLIST topology x CDATA "y">]>'), "internal DTD subsets"),
    (HWLOC.replace('<object type="Core"', '<object type="Group">' * 200 + "</object>" * 200
                   + '<object type="Core"', 1), "elements nested deeper than 128 levels"),
    (HWLOC.replace('type="PU" os_index="3"', 'type="PU" os_index="99999999999"'),
     "PU os_index 99999999999 is outside 0-65535"),
    (HWLOC.replace('type="PU" os_index="3"', 'type="PU" os_index="' + "9" * 5000 + '"'),
     "PU os_index='99999999999"),
])
def test_hwloc_hostile(xml: str, message: str) -> None:
    assert message in _err(hwloc.parse_hwloc_xml, xml, "t.xml")


def test_hwloc_seed_is_valid() -> None:
    d = hwloc.parse_hwloc_xml(HWLOC, "t.xml")
    assert d.machine.node_ids == (0, 1) and len(d.machine.cpus) == 4


def _capture(tmp_path: Path) -> Path:
    from test_cli_fuzz import make_sysfs

    return make_sysfs(tmp_path / "cap")


def test_sysfs_hostile_values(tmp_path: Path) -> None:
    root = _capture(tmp_path)
    topo = root / "sys/devices/system/cpu/cpu0/topology"
    (topo / "thread_siblings_list").write_text("0-99999999999\n")
    (topo / "core_id").write_text("9" * 5000)
    os.unlink(topo / "physical_package_id")
    os.mkfifo(topo / "physical_package_id")  # would block a plain read() forever
    (root / "sys/devices/system/node/node1/cpulist").write_text("0-" + "9" * 60_000)
    (root / "sys/devices/system/node/node0/distance").write_bytes(b"10 21 " * 20_000)
    (root / "sys/devices/system/cpu/cpu99999999999").mkdir()
    start = time.process_time()
    d = sysfs.load_sysfs(root)
    assert time.process_time() - start < 5.0
    assert all("\n" not in w and len(w) < 300 for w in d.warnings)
    assert any("cpu99999999999: ids above 65535 are ignored" in w for w in d.warnings)
    assert d.machine.node_ids == (0, 1)


def test_sysfs_tarball_caps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = _capture(tmp_path)
    big = root / "sys/devices/system/node/node0/meminfo"
    big.write_bytes(b"MemTotal: 1 kB\n" + b" " * (sysfs.MAX_SYSFS_FILE_BYTES + 1))
    tar = tmp_path / "cap.tar.gz"
    with tarfile.open(tar, "w:gz") as tf:
        tf.add(root, arcname="cap")
    d = sysfs.load_sysfs(tar)  # the oversized member is not unpacked: memory taken as 0
    assert d.machine.numa_nodes[0].memory == 0
    monkeypatch.setattr(capture_archive, "MAX_TAR_MEMBERS", 10)
    assert "capture has more than 10 members" in _err(sysfs.load_sysfs, tar)


def test_export_poll_and_single_failure(tmp_path: Path) -> None:
    exporter = Exporter(ExportSources(machine=str(FIG1), kubelet_state=str(tmp_path / "none")))
    with pytest.raises(InputError, match="--poll"):
        run_loop(exporter, lambda o: None, interval=1.0, poll=0.0)
    log = io.StringIO()
    assert run_loop(exporter, lambda o: None, interval=None, log=log) == 1
    assert log.getvalue().startswith("numalign export: error: cannot read a source: ")
    assert "retrying" not in log.getvalue() and log.getvalue().count("\n") == 1


@pytest.mark.parametrize("value", ["[" * 100_000 + "]" * 100_000, '{"a": ' + "9" * 5000 + "}"])
def test_koordinator_annotation_is_bounded(value: str) -> None:
    from numalign.pods import parse_pods
    from numalign.pods.annotations import KOORDINATOR_ANNOTATION

    doc = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "p", "annotations": {KOORDINATOR_ANNOTATION: value}},
           "spec": {"containers": [{"name": "c"}]}}
    (pod,) = parse_pods([doc])
    with pytest.raises(InputError):
        _ = pod.own_policy
    with pytest.raises(InputError):
        _ = pod.koordinator_numa_spec


@pytest.mark.parametrize(("stdin", "message"), [
    (b"[" * 100_000 + b"]" * 100_000, "nested deeper than 100 levels"),
    (b"\xff\xfe: x", "not UTF-8 text"),
])
def test_admit_pods_from_stdin_are_bounded(stdin: bytes, message: str) -> None:
    """`numalign admit ... -` reads stdin with the bounded reader: one line, exit 2."""
    out = subprocess.run([sys.executable, "-m", "numalign.cli", "admit", "-m", "examples/fig1.yaml", "-"],
                         input=stdin, capture_output=True, cwd=REPO, env=os.environ.copy(), timeout=120)
    err = out.stderr.decode()
    assert out.returncode == 2 and message in err and err.count("\n") == 1, err


class _RefusingLoader(yaml.SafeLoader):
    """A parser with a nesting limit of its own that fires before any event (as libyaml's
    look-ahead does in newer releases)."""

    def __init__(self, stream: object) -> None:
        raise yaml.scanner.ScannerError("while increasing flow level", None,
                                        "exceeded maximum nesting depth", None)


def test_depth_message_does_not_depend_on_the_parser_library(monkeypatch: pytest.MonkeyPatch) -> None:
    """numalign's caps decide the message even when the C parser refuses first; a document the
    caps allow keeps the library's own error."""
    monkeypatch.setattr(yamlfiles, "_Loader", _RefusingLoader)
    assert _err(yamlfiles.load_yaml_all, "[" * 101 + "]" * 101, "f").startswith(
        "f: nested deeper than 100 levels at line 1")
    assert "exceeded maximum nesting depth" in _err(yamlfiles.load_yaml_all, "[[1]]", "f")


@pytest.mark.parametrize(("text", "key", "line"), [
    ("a: 1\nb: 2\na: 3\n", "a", 3),
    ("kubelet:\n  topologyManagerPolicy: none\n  topologyManagerPolicy: restricted\n", "topologyManagerPolicy", 3),
    ("x: {1: a, 0x1: b}\n", "1", 1),  # equal as values
    ('{"a": 1, "a": 2}', "a", 1),  # JSON read where YAML is accepted
    ("base: &b {x: 1}\nc:\n  <<: *b\n  y: 1\n  y: 2\n", "y", 5),  # among a merging mapping's own keys
])
def test_a_yaml_key_given_twice_is_refused(text: str, key: str, line: int) -> None:
    message = _err(yamlfiles.load_yaml_all, text, "f")
    assert message.startswith(f"f: invalid YAML: key '{key}' given twice in one mapping at line {line}, column ")
    assert "\n" not in message


def test_distinct_keys_and_merge_overrides_are_kept() -> None:
    assert yamlfiles.load_yaml_all('x: {1: a, "1": b}', "f") == [{"x": {1: "a", "1": "b"}}]
    doc = "base: &b {x: 1, y: 2}\nc:\n  <<: *b\n  x: 3\n"  # an own key overrides a merged one
    assert yamlfiles.load_yaml_all(doc, "f") == [{"base": {"x": 1, "y": 2}, "c": {"x": 3, "y": 2}}]
    # JSON's own decoder keeps the last, as Go's encoding/json does
    assert yamlfiles.loads_json('{"a": 1, "a": 2}', "f") == {"a": 2}
