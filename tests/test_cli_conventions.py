"""CLI conventions: --version, ``python -m numalign``, help with examples and flag help for
every sub-command (the examples run in test_cli_examples.py), admit's machine sources and stdin, release's
namespace default and output, the default output rule, the explain and discover tables, and
the JSON Schemas of the input formats (every example validates; parsers and schemas agree)."""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from conftest import REPO, SHARED
from numalign.cli import build_parser, main, version
from numalign.cli import help as cli_help
from numalign.cli.schemas import load_schema
from numalign.errors import InputError
from numalign.machine import spec
from numalign.machine.kubelet_config import MODELLED_FIELDS, kubelet_section

EXAMPLES = REPO / "examples"
SCRATCH = "/tmp/numalign-demo"
ENV = {**os.environ, "PYTHONPATH": str(REPO / "src")}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# ----------------------------------------------------------------------------- version, -m


def test_version_flag(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    out = capsys.readouterr().out.strip()
    assert out == f"numalign {version()}" and version()[0].isdigit()


def test_python_dash_m_numalign() -> None:
    proc = subprocess.run([sys.executable, "-m", "numalign", "--help"], capture_output=True,
                          text=True, env=ENV, timeout=60)
    assert proc.returncode == 0 and "admit" in proc.stdout and "discover" in proc.stdout
    proc = subprocess.run([sys.executable, "-m", "numalign", "--version"], capture_output=True,
                          text=True, env=ENV, timeout=60)
    assert proc.returncode == 0 and proc.stdout.startswith("numalign ")


# ----------------------------------------------------------------------------- help


def _commands(parser: argparse.ArgumentParser, prefix: str = "") -> list[tuple[str, argparse.ArgumentParser]]:
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                path = f"{prefix} {name}".strip()
                out.append((path, sub))
                out.extend(_commands(sub, path))
    return out


COMMANDS = _commands(build_parser())


def test_every_command_is_listed() -> None:
    assert {p for p, _ in COMMANDS} == set(cli_help.COMMANDS)
    assert {"merge", "admit", "release", "state", "discover", "schema", "run", "ps", "simulate",
            "export", "extender serve", "demo"} <= set(cli_help.COMMANDS)


@pytest.mark.parametrize(("path", "parser"), COMMANDS, ids=[p for p, _ in COMMANDS])
def test_help_has_description_examples_and_flag_help(path: str, parser: argparse.ArgumentParser) -> None:
    text = parser.format_help()
    assert parser.description and parser.description.split("\n")[0] in text
    assert "\nexamples:\n" in text
    examples = [line.strip() for line in text.split("\nexamples:\n", 1)[1].splitlines() if line.strip()]
    assert 1 <= len(examples) <= 4 and all(e.startswith(f"numalign {path}") for e in examples)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            continue
        assert action.help, f"{path}: {action.option_strings or action.dest} has no help"


# ----------------------------------------------------------------------------- admit


def test_admit_pods_from_stdin(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO((EXAMPLES / "fig1-pods.yaml").read_text()))
    code, out, _ = run(capsys, "admit", "-m", str(EXAMPLES / "fig1.yaml"), "-")
    assert code == 0
    [pod] = json.loads(out)["pods"]
    assert [c["cpus"] for c in pod["containers"]] == ["0-1", "4-5"]


def test_admit_stdin_yaml_error_is_one_line(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("a: [\n"))
    code, _, err = run(capsys, "admit", "-m", str(EXAMPLES / "fig1.yaml"), "-")
    assert code == 2 and err.count("\n") == 1 and "stdin: invalid YAML" in err


def _kubelet_yaml(tmp_path: Path, **fields: Any) -> Path:
    doc = {"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
           "address": "0.0.0.0", "authentication": {"anonymous": {"enabled": False}}, **fields}
    p = tmp_path / "config.yaml"
    p.write_text(yaml.safe_dump(doc))
    return p


def test_kubelet_config_turns_a_policy_none_machine_into_single_numa_node(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    machine = tmp_path / "m.yaml"
    machine.write_text(yaml.safe_dump({"name": "m", "shape": {"sockets": 2, "coresPerNuma": 4},
                                       "devices": [{"resource": "gpu", "perNuma": 1}]}))
    pod = tmp_path / "p.yaml"
    pod.write_text(yaml.safe_dump({"kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [
        {"name": "c", "resources": {"limits": {"cpu": "6", "memory": "1Gi", "gpu": 1}}}]}}))
    code, out, _ = run(capsys, "admit", "-m", str(machine), str(pod))
    assert code == 0 and json.loads(out)["pods"][0]["policy"] == "none"
    config = _kubelet_yaml(tmp_path, topologyManagerPolicy="single-numa-node", cpuManagerPolicy="static",
                           reservedSystemCPUs="0", featureGates={"CPUManager": True})
    code, out, _ = run(capsys, "admit", "-m", str(machine), "--kubelet-config", str(config), str(pod))
    doc = json.loads(out)["pods"][0]
    assert code == 1 and doc["policy"] == "single-numa-node" and doc["reason"] == "TopologyAffinityError"


@pytest.mark.parametrize(("fields", "where"), [
    ({"topologyManagerPolicy": 3}, "topologyManagerPolicy: expected a string"),
    ({"cpuManagerPolicyOptions": {"full-pcpus-only": True}}, "cpuManagerPolicyOptions.full-pcpus-only: expected a string"),
    ({"featureGates": {"X": "yes"}}, "featureGates.X: expected true or false"),
    ({"reservedMemory": [{"numaNode": "0", "limits": {"memory": "1Gi"}}]}, "reservedMemory[0].numaNode"),
    ({"kubeReserved": ["cpu"]}, "kubeReserved: expected a mapping"),
    ({"kind": "Pod"}, "kind: expected KubeletConfiguration"),
    ({"apiVersion": "v1"}, "apiVersion: expected kubelet.config.k8s.io/v1beta1"),
])
def test_kubelet_config_wrong_types_are_one_line_errors(
        fields: dict[str, Any], where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = _kubelet_yaml(tmp_path, **fields)
    code, _, err = run(capsys, "admit", "-m", str(EXAMPLES / "fig1.yaml"), "--kubelet-config", str(config),
                       str(EXAMPLES / "fig1-pods.yaml"))
    assert code == 2 and err.count("\n") == 1 and where in err and str(config) in err


def test_kubelet_section_keeps_modelled_fields_only() -> None:
    section = kubelet_section({"kind": "KubeletConfiguration", "cgroupDriver": "systemd",
                               "evictionHard": {"memory.available": "100Mi"},
                               "topologyManagerScope": "pod", "systemReserved": None})
    assert section == {"evictionHard": {"memory.available": "100Mi"}, "topologyManagerScope": "pod"}
    with pytest.raises(InputError):
        kubelet_section(["not", "a", "mapping"])


def test_kubelet_config_needs_a_machine(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, "admit", "--kubelet-config", str(EXAMPLES / "kubelet" / "config.yaml"),
                       str(EXAMPLES / "fig1-pods.yaml"))
    assert code == 2 and "--kubelet-config: needs a machine" in err


def test_admit_from_captured_sysfs_with_kubelet_config(capsys: pytest.CaptureFixture[str]) -> None:
    tar = SHARED / "topologies" / "hwloc" / "linux" / "32intel64-2p8co2t+8ve.tar.bz2"
    if not tar.exists():
        pytest.skip(f"{tar} not found")
    code, out, _ = run(capsys, "admit", "--sysfs-root", str(tar), "--kubelet-config",
                       str(EXAMPLES / "kubelet" / "config.yaml"), "-o", "json",
                       str(EXAMPLES / "pods" / "mixed-qos.yaml"))
    pods = {p["name"]: p for p in json.loads(out)["pods"]}
    assert code == 1 and pods["default/web"]["admitted"] and pods["default/web"]["policy"] == "restricted"
    assert pods["default/odd"]["reason"] == "SMTAlignmentError"  # full-pcpus-only from the config
    assert "0" not in pods["default/web"]["containers"][0]["cpus"].split(",")  # reservedSystemCPUs


# ----------------------------------------------------------------------------- release


def test_release_defaults_to_namespace_default_prints_and_fails_on_unknown(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = tmp_path / "s"
    assert run(capsys, "admit", "-m", str(EXAMPLES / "dual-socket-ht.yaml"), "--state-dir", str(state),
               str(EXAMPLES / "pods" / "dual-socket-list.yaml"))[0] == 0
    code, out, _ = run(capsys, "state", "--state-dir", str(state), "-o", "json")
    names = [p["name"] for p in json.loads(out)["pods"]]
    assert names == ["default/db-0", "default/db-1"]
    code, out, err = run(capsys, "release", "--state-dir", str(state), "db-0", "default/nope")
    assert code == 1 and out == "released default/db-0\n" and "default/nope" in err
    code, out, _ = run(capsys, "release", "--state-dir", str(state), "default/db-1")
    assert code == 0 and out == "released default/db-1\n"
    code, out, _ = run(capsys, "state", "--state-dir", str(state), "-o", "json")
    assert json.loads(out)["pods"] == []


# ----------------------------------------------------------------------------- output rule


@pytest.mark.parametrize("argv", [
    ["admit", "-m", "examples/fig1.yaml", "examples/fig1-pods.yaml"],
    ["discover", "--nrt", "NRT"],
])
def test_default_output_is_json_when_piped_and_table_on_a_terminal(
        argv: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    monkeypatch.chdir(REPO)
    if "NRT" in argv:
        assert main(["export", "-m", "examples/fig1.yaml"]) == 0
        nrt = tmp_path / "nrt.yaml"
        nrt.write_text(capsys.readouterr().out)
        argv = [str(nrt) if a == "NRT" else a for a in argv]
    assert main(argv) == 0
    json.loads(capsys.readouterr().out)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    assert main(argv) == 0
    out = capsys.readouterr().out
    with pytest.raises(json.JSONDecodeError):
        json.loads(out)


# ----------------------------------------------------------------------------- tables


def test_explain_table_is_a_summary(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "admit", "-o", "table", "--explain", "-m", str(EXAMPLES / "gpu-8x-rdma.yaml"),
                       str(EXAMPLES / "pods" / "gpu-too-wide.yaml"))
    assert code == 1
    summary = out.split("explain", 1)[1]
    assert "ml/train-wide trainer (single-numa-node/pod):" in summary
    assert "devices nvidia.com/gpu  preferred: {0,1} {0,2} {1,2} {0,3} +2 more" in summary
    assert "merged" in summary and "result" in summary and "TopologyAffinityError" in summary


def test_explain_table_on_64_numa_nodes_stays_short(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    machine = tmp_path / "m.yaml"
    machine.write_text(yaml.safe_dump({"shape": {"sockets": 8, "numaPerSocket": 8, "coresPerNuma": 2},
                                       "kubelet": {"topologyManagerPolicy": "restricted",
                                                   "cpuManagerPolicy": "static", "reservedSystemCPUs": "0",
                                                   "topologyManagerPolicyOptions": {"max-allowable-numa-nodes": "64"}}}))
    pod = tmp_path / "p.yaml"
    pod.write_text(yaml.safe_dump({"kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [
        {"name": "c", "resources": {"limits": {"cpu": "4", "memory": "1Gi"}}}]}}))
    code, out, _ = run(capsys, "admit", "-o", "table", "--explain", "-m", str(machine), str(pod))
    assert code == 0
    assert len(out.splitlines()) < 20 and max(map(len, out.splitlines())) < 200


def test_discover_table_reads_like_numactl() -> None:
    from numalign.machine.render import render_table
    from numalign.machine.spec import read_machine_file

    m = read_machine_file(str(EXAMPLES / "gpu-8x-rdma.yaml"))
    reserved = {e.numa_node: e.limits["memory"] for e in m.kubelet.reserved_memory}
    lines = render_table(m).splitlines()
    assert lines[0] == "available: 4 nodes (0-3)"
    assert lines[1] == "node 0 cpus: " + " ".join(str(c) for c in [*range(16), *range(64, 80)])
    assert lines[2] == "node 0 size: 262144 MB" and lines[3] == f"node 0 free: {262144 - (reserved.get(0, 0) >> 20)} MB"
    i = lines.index("node distances:")
    assert lines[i + 1].split() == ["node", "0", "1", "2", "3"]
    assert lines[i + 2].split() == ["0:", "10", "12", "32", "32"]
    assert "node 0 devices: nvidia.com/gpu x2, rdma/hca x1" in lines


# ----------------------------------------------------------------------------- schemas


def _as_json(doc: Any) -> Any:
    return json.loads(json.dumps(doc))  # YAML's integer keys become strings, as in JSON


def _validator(name: str) -> jsonschema.protocols.Validator:
    schema = load_schema(name)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


MACHINE_FILES = sorted(p for p in EXAMPLES.glob("*.yaml") if "kind:" not in p.read_text())


@pytest.mark.parametrize("path", MACHINE_FILES, ids=[p.name for p in MACHINE_FILES])
def test_example_machines_validate(path: Path) -> None:
    doc = yaml.safe_load(path.read_text())
    _validator("machine").validate(_as_json(doc))
    spec.load_machine(doc, str(path))


def test_dumped_machines_validate() -> None:
    for path in MACHINE_FILES:
        _validator("machine").validate(_as_json(spec.dump_machine(spec.read_machine_file(str(path)))))


def test_kubelet_config_example_is_a_valid_kubelet_section() -> None:
    section = kubelet_section(yaml.safe_load((EXAMPLES / "kubelet" / "config.yaml").read_text()))
    _validator("machine").validate({"shape": {}, "kubelet": section})


def _merge_cases() -> list[Any]:
    cases: list[Any] = [json.loads((EXAMPLES / "merge-case.json").read_text())]
    cases += [json.loads(line) for line in (EXAMPLES / "merge-cases.jsonl").read_text().splitlines() if line.strip()]
    table = json.loads((REPO / "tests" / "data" / "kubelet_policy_cases.json").read_text())
    cases += [{k: v for k, v in c.items() if k not in ("id", "source", "expect")} for c in table]
    from test_merge_cli import FIG1

    cases.append(FIG1)
    return cases


def test_merge_cases_validate() -> None:
    from numalign.cli.merge_case import parse_case

    v = _validator("merge-case")
    for case in _merge_cases():
        v.validate(case)
        parse_case(case)


def test_schemas_list_exactly_the_fields_the_parsers_accept() -> None:
    m = load_schema("machine")
    defs = m["$defs"]
    assert set(m["properties"]) == set(spec._TOP_KEYS)
    assert set(defs["numaNode"]["properties"]) == set(spec._NODE_KEYS)
    assert set(defs["cpu"]["properties"]) == set(spec._CPU_KEYS)
    assert set(defs["device"]["properties"]) == set(spec._DEVICE_KEYS)
    assert set(defs["compactDevice"]["properties"]) == set(spec._COMPACT_DEVICE_KEYS)
    assert set(defs["shape"]["properties"]) == set(spec._SHAPE_KEYS)
    assert set(defs["shape"]["properties"]["distances"]["properties"]) == set(spec._DISTANCE_KEYS)
    kubelet = set(defs["kubelet"]["properties"])
    assert set(MODELLED_FIELDS) <= kubelet
    from numalign.machine.model import KubeletConfig

    assert set(spec._dump_kubelet(KubeletConfig())) <= kubelet
    from numalign.cli import merge_case

    c = load_schema("merge-case")
    assert set(c["properties"]) == set(merge_case._CASE_KEYS)
    assert set(c["$defs"]["hint"]["properties"]) == {"affinity", "preferred"}


def test_schema_rejects_what_the_parser_rejects() -> None:
    v = _validator("machine")
    for bad in ({"shape": {}, "numaNodes": []}, {"shape": {"cores": 2}}, {"numaNodes": [{"id": 0, "memory": "1Gi"}]},
                {"shape": {}, "colour": "red"}):
        assert list(v.iter_errors(bad))
        with pytest.raises(InputError):
            spec.load_machine(bad)


@pytest.mark.parametrize("name", ["machine", "merge-case"])
def test_schema_command_prints_the_schema(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "schema", name)
    assert code == 0 and json.loads(out) == load_schema(name)


def test_docs_name_every_schema_field() -> None:
    machine_doc = (REPO / "docs" / "machine-spec.md").read_text()
    m = load_schema("machine")
    fields: set[str] = set(m["properties"])
    for d in ("numaNode", "cpu", "device", "compactDevice", "shape", "kubelet"):
        fields |= set(m["$defs"][d]["properties"])
    missing = sorted(f for f in fields if f"`{f}`" not in machine_doc)
    assert not missing, f"docs/machine-spec.md does not describe {missing}"
    case_doc = (REPO / "docs" / "merge-case.md").read_text()
    c = load_schema("merge-case")
    missing = sorted(f for f in [*c["properties"], "affinity", "preferred"] if f"`{f}`" not in case_doc)
    assert not missing, f"docs/merge-case.md does not describe {missing}"


def test_doc_examples_are_valid() -> None:
    import re

    blocks = re.findall(r"```yaml\n(.*?)```", (REPO / "docs" / "machine-spec.md").read_text(), re.S)
    assert len(blocks) >= 2
    for block in blocks:
        doc = yaml.safe_load(block)
        _validator("machine").validate(_as_json(doc))
        spec.load_machine(doc)
    blocks = re.findall(r"```json\n(.*?)```", (REPO / "docs" / "merge-case.md").read_text(), re.S)
    from numalign.cli.merge_case import parse_case

    [case] = [json.loads(b) for b in blocks if '"policy"' in b]
    _validator("merge-case").validate(case)
    parse_case(case)
    assert case == json.loads((EXAMPLES / "merge-case.json").read_text())
