"""An NRT beyond numalign's size caps is refused by size first (issue 23: a 5,000-zone NRT took
3.5-4 s of parsing before ``discover --nrt`` refused it). The counts are checked on the YAML
parser's event stream, before any object is built, and again on a decoded object before any
zone is parsed; the error names the cap. Work is asserted by what was not called, not by time."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from numalign.cli import main
from numalign.errors import InputError
from numalign.inputs import documents
from numalign.machine import nrt as nrt_module
from numalign.machine.nrt import MAX_NODE_CPUS, MAX_NODE_DEVICES, MAX_ZONES, nrt_to_machine


def nrt(zones: int, cpus: int = 4, gpus: int = 0, first: int = 0) -> dict[str, Any]:
    out = []
    for z in range(first, first + zones):
        res = [{"name": "cpu", "capacity": str(cpus)}, {"name": "memory", "capacity": "1Gi"}]
        if gpus:
            res.append({"name": "nvidia.com/gpu", "capacity": str(gpus)})
        out.append({"name": f"node-{z}", "type": "Node", "resources": res})
    return {"apiVersion": "topology.node.k8s.io/v1alpha2", "kind": "NodeResourceTopology",
            "metadata": {"name": "n"}, "zones": out}


@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_5000_zones_refused_while_parsing(tmp_path: Path, fmt: str, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    obj = nrt(5000)
    path = tmp_path / f"big.{fmt}"
    text = yaml.safe_dump(obj) if fmt == "yaml" else json.dumps(obj, indent=1)
    path.write_text(text)
    built: list[int] = []
    real = documents.yaml.load_all
    monkeypatch.setattr(documents.yaml, "load_all", lambda *a, **k: built.append(1) or real(*a, **k))
    assert main(["discover", "--nrt", str(path), "-o", "json"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert f"a list of more than {MAX_ZONES} items" in err and f"at most {MAX_ZONES} zones" in err
    assert built == []  # no document was constructed
    line = int(err.split(" at line ")[1].split()[0])
    assert line < len(text.splitlines()) // 4  # refused a fifth of the way in


def test_decoded_objects_are_refused_before_any_zone_is_parsed(monkeypatch: pytest.MonkeyPatch) -> None:
    parsed: list[Any] = []
    real = nrt_module.parse_quantity
    monkeypatch.setattr(nrt_module, "parse_quantity", lambda *a, **k: parsed.append(a) or real(*a, **k))
    with pytest.raises(InputError) as e:
        nrt_to_machine(nrt(MAX_ZONES + 1))
    assert f"{MAX_ZONES + 1} zones: more than numalign accepts ({MAX_ZONES}" in str(e.value)
    assert parsed == []
    obj = nrt(1)
    obj["zones"][0]["costs"] = [{"name": f"node-{k}", "value": 10} for k in range(MAX_ZONES + 1)]
    with pytest.raises(InputError, match=f"costs: more than numalign accepts \\({MAX_ZONES}\\)"):
        nrt_to_machine(obj)
    assert parsed == []


def test_zone_ids_and_node_totals_are_capped() -> None:
    with pytest.raises(InputError, match="NUMA node id 1024 is above 1023"):
        nrt_to_machine(nrt(1, first=1024))
    nrt_to_machine(nrt(1, first=1023))
    per_zone = MAX_NODE_CPUS // 4 + 1
    with pytest.raises(InputError, match=f"more than {MAX_NODE_CPUS} CPUs in all zones"):
        nrt_to_machine(nrt(4, cpus=per_zone))
    with pytest.raises(InputError, match=f"more than {MAX_NODE_DEVICES} devices in all zones"):
        nrt_to_machine(nrt(4, gpus=MAX_NODE_DEVICES // 4 + 1))
