"""Strict pod parsing (kubectl --validate=strict), empty pod files, KEP-693's field (issue 13)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from numalign.cli import main
from numalign.errors import InputError
from numalign.pods import parse_pods, read_pod_files


def _pod(**spec_extra: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": "1"}}}], **spec_extra}}


def _error(doc: object) -> str:
    with pytest.raises(InputError) as e:
        parse_pods(doc, "pod.yaml")
    return str(e.value)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d["spec"]["containers"][0].update(resource=d["spec"]["containers"][0].pop("resources")),
         'pod.yaml: spec.containers[0].resource: unknown field (did you mean "resources"?)'),
        (lambda d: d["spec"]["containers"][0]["resources"].update(limit=d["spec"]["containers"][0]["resources"].pop("limits")),
         'pod.yaml: spec.containers[0].resources.limit: unknown field (did you mean "limits"?)'),
        (lambda d: d["spec"].update(container=[]), 'pod.yaml: spec.container: unknown field (did you mean "containers"?)'),
        (lambda d: d["metadata"].update(nmae="x"), 'pod.yaml: metadata.nmae: unknown field (did you mean "name"?)'),
        (lambda d: d.update(specs={}), 'pod.yaml: specs: unknown field (did you mean "spec"?)'),
        (lambda d: d["spec"].update(topology={"polcy": "restricted"}),
         'pod.yaml: spec.topology.polcy: unknown field (did you mean "policy"?)'),
    ],
)
def test_typos_are_errors_with_their_path(mutate: Any, message: str) -> None:
    doc = _pod()
    mutate(doc)
    assert _error(doc) == message


def test_fields_the_api_has_are_accepted() -> None:
    doc = _pod(tolerations=[], nodeSelector={"a": "b"}, priorityClassName="x", overhead={})
    doc["status"] = {"phase": "Pending"}
    doc["metadata"].update(labels={"a": "b"}, ownerReferences=[], managedFields=[])
    doc["spec"]["containers"][0].update(image="busybox", command=["true"], env=[], ports=[])
    assert parse_pods(doc)[0].name == "p"
    # an API server's object (the scheduler extender) skips strictness
    doc["spec"]["futureField"] = 1
    assert parse_pods(doc, strict=False)[0].name == "p"


def test_keps_per_pod_field() -> None:
    assert parse_pods(_pod(topology={"policy": "restricted"}))[0].topology_policy == "restricted"
    assert parse_pods(_pod(topologyPolicy="restricted"))[0].topology_policy == "restricted"
    assert "differs from spec.topologyPolicy" in _error(
        _pod(topology={"policy": "restricted"}, topologyPolicy="best-effort"))


def test_empty_pod_file_is_an_error_for_admit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "empty.yaml"
    f.write_text("# nothing\n---\n")
    with pytest.raises(InputError, match="no pod in this file"):
        read_pod_files([str(f)], require_pods=True)
    spec = Path(__file__).resolve().parents[1] / "examples" / "fig1.yaml"
    code = main(["admit", "-m", str(spec), "--state-dir", str(tmp_path / "s"), str(f)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "no pod in this file" in err


def test_typo_pod_is_exit_2_not_best_effort(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = _pod()
    doc["spec"]["containers"][0]["resource"] = doc["spec"]["containers"][0].pop("resources")
    f = tmp_path / "p.json"
    f.write_text(json.dumps(doc))
    spec = Path(__file__).resolve().parents[1] / "examples" / "fig1.yaml"
    code = main(["admit", "-m", str(spec), "--state-dir", str(tmp_path / "s"), str(f)])
    err = capsys.readouterr().err
    assert code == 2 and "spec.containers[0].resource: unknown field" in err
