"""`numalign merge`: JSON in, JSON out, one-line errors with exit status 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from numalign.cli import main

FIG1 = {
    "policy": "single-numa-node",
    "numa_nodes": [0, 1],
    "providers": [
        {"cpu": [{"affinity": [0], "preferred": True}, {"affinity": [1], "preferred": True},
                 {"affinity": [0, 1], "preferred": False}]},
        {"gpu": [{"affinity": [0], "preferred": True}, {"affinity": [1], "preferred": True}]},
    ],
}


def run(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, stdin: str, *args: str) -> tuple[int, str, str]:
    import io

    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    code = main(["merge", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_single_case_from_stdin(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, err = run(capsys, monkeypatch, json.dumps(FIG1))
    assert code == 0 and err == ""
    assert json.loads(out) == {"affinity": [0], "preferred": True, "admit": True}


def test_case_from_file(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "case.json"
    f.write_text(json.dumps({**FIG1, "policy": "restricted", "providers": [{"cpu": [{"affinity": [0, 1], "preferred": False}]}]}))
    code, out, _ = run(capsys, monkeypatch, "", str(f))
    assert code == 0
    assert json.loads(out) == {"affinity": [0, 1], "preferred": False, "admit": False}


def test_jsonl_keeps_order_and_reports_bad_lines(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    lines = [
        json.dumps(FIG1),
        "{not json",
        json.dumps({**FIG1, "policy": "best-effort", "providers": [{"gpu": []}]}),
        json.dumps({**FIG1, "policy": "bogus"}),
        json.dumps({**FIG1, "policy": "none"}),
    ]
    code, out, _ = run(capsys, monkeypatch, "\n".join(lines) + "\n", "--jsonl")
    results = [json.loads(x) for x in out.splitlines()]
    assert code == 2
    assert len(results) == 5
    assert results[0] == {"affinity": [0], "preferred": True, "admit": True}
    assert results[1]["error"].startswith("line 2: ")
    assert results[2] == {"affinity": [0, 1], "preferred": False, "admit": True}
    assert results[3] == {"error": 'line 4: policy: unknown policy: "bogus"'}
    assert results[4] == {"affinity": None, "preferred": False, "admit": True}


BAD = [
    ("{", "malformed JSON"),
    (json.dumps({**FIG1, "policy": "fastest"}), 'policy: unknown policy: "fastest"'),
    (json.dumps({**FIG1, "options": {"fast": "true"}}), 'options.fast: unknown Topology Manager Policy option: "fast"'),
    (json.dumps({**FIG1, "policy": "restricted", "options": {"prefer-closest-numa-nodes": "yes"}}), 'options.prefer-closest-numa-nodes: bad value'),
    (json.dumps({**FIG1, "options": {"max-allowable-numa-nodes": "4"}}), "should not be less than 8"),
    (json.dumps({**FIG1, "options": {"max-allowable-numa-nodes": "many"}}), "unable to convert policy option to integer"),
    (json.dumps({**FIG1, "numa_nodes": [0, 2048]}), "numa_nodes[1]: NUMA node id must be an integer 0-1023"),
    (json.dumps({**FIG1, "providers": [{"cpu": [{"affinity": [5], "preferred": True}]}]}), "providers[0].cpu[0].affinity[0]: 5 is not one of numa_nodes"),
    (json.dumps({**FIG1, "policy": "restricted", "options": {"prefer-closest-numa-nodes": "true"}}), "distances"),
    (json.dumps({**FIG1, "policy": "restricted", "numa_nodes": list(range(9))}), "unsupported on machines with more than 8 NUMA Nodes"),
    (json.dumps({**FIG1, "providers": [{"cpu": [{"affinity": [0]}]}]}), "providers[0].cpu[0].preferred: must be true or false"),
    (json.dumps([1, 2]), "case: a case must be a JSON object"),
    (json.dumps({**FIG1, "distances": {"0": {"0": 10}, "1": {"0": 21, "1": 10}}}), "distances.0: missing entry for node 1"),
]


@pytest.mark.parametrize(("stdin", "message"), BAD, ids=[m for _, m in BAD])
def test_bad_input_one_line_exit_2(stdin: str, message: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, err = run(capsys, monkeypatch, stdin)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1 and message in err, err
    assert "Traceback" not in err


def test_max_allowable_lifts_the_limit(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    nodes = list(range(16))
    case = {"policy": "restricted", "numa_nodes": nodes, "options": {"max-allowable-numa-nodes": "16"},
            "providers": [{"cpu": [{"affinity": [i], "preferred": True} for i in nodes]},
                          {"gpu": [{"affinity": [7], "preferred": True}]}]}
    code, out, _ = run(capsys, monkeypatch, json.dumps(case))
    assert code == 0
    assert json.loads(out) == {"affinity": [7], "preferred": True, "admit": True}


def test_console_script_no_traceback(tmp_path: Path) -> None:
    """The installed entry point, as a user runs it."""
    exe = Path(sys.executable).with_name("numalign")
    proc = subprocess.run([str(exe), "merge"], input="[", capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.startswith("numalign merge: error: ") and "Traceback" not in proc.stderr
