"""The upstream pod fingerprint (podfingerprint v001): XXH64 against reference digests, the
library's published compat vectors, and the same vectors through ``numalign export``."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import REPO
from numalign.cli import main
from numalign.kube.fingerprint import is_compatible, pods_fingerprint, xxh64
from numalign.machine.spec import read_machine_file
from numalign.node.session import node_session
from numalign.pods import parse_pods

VECTORS = Path(__file__).parent / "data" / "podfingerprint"
CASES = sorted(p.stem for p in VECTORS.glob("*.txt"))


def load(case: str) -> tuple[list[tuple[str, str]], str]:
    pods = [(f[0], f[1]) for f in (line.split() for line in (VECTORS / f"{case}.txt").read_text().splitlines())
            if len(f) >= 2 and not f[0].startswith("#")]
    return pods, (VECTORS / f"{case}.sign").read_text().strip()


def test_xxh64_reference_digests() -> None:
    # the xxHash reference values (seed 0 and a seed) for short and multi-stripe inputs
    assert xxh64(b"") == 0xEF46DB3751D8E999
    assert xxh64(b"a") == 0xD24EC4F1A98C6E5B
    assert xxh64(b"abc") == 0x44BC2CF5AD770999
    assert xxh64(b"", seed=1) == 0xD5AFBA1336A3BE4B


@pytest.mark.parametrize("case", CASES)
def test_compat_vectors(case: str) -> None:
    pods, sign = load(case)
    assert len(CASES) >= 4
    assert pods_fingerprint(pods) == sign
    shuffled = list(pods)
    random.Random(12345).shuffle(shuffled)
    assert pods_fingerprint(shuffled) == sign
    assert is_compatible(sign)


@given(st.lists(st.tuples(st.text(max_size=12), st.text(max_size=20)), max_size=12), st.randoms())
def test_order_independent(pods: list[tuple[str, str]], rnd: random.Random) -> None:
    other = list(pods)
    rnd.shuffle(other)
    fp = pods_fingerprint(pods)
    assert fp == pods_fingerprint(other)
    assert fp.startswith("pfp0v001") and len(fp) == 24


@pytest.mark.parametrize("case", CASES[:2])
def test_compat_vectors_through_export_state_dir(tmp_path: Path, case: str,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """numalign's own node state holding the vector's pods: ``numalign export`` publishes the
    library's fingerprint for them (the podresources path is in test_kube_podresources)."""
    pods, sign = load(case)
    spec = REPO / "examples" / "fig1.yaml"
    with node_session(tmp_path / "state", read_machine_file(str(spec))) as node:
        for ns, name in pods:
            p = parse_pods({"apiVersion": "v1", "kind": "Pod",
                            "metadata": {"name": name, "namespace": ns},
                            "spec": {"containers": [{"name": "c"}]}})[0]
            assert node.admit(p).admitted
    assert main(["export", "--machine", str(spec), "--state-dir", str(tmp_path / "state"),
                 "-o", "json"]) == 0
    obj = json.loads(capsys.readouterr().out)
    attrs = {a["name"]: a["value"] for a in obj["attributes"]}
    assert attrs["nodeTopologyPodsFingerprint"] == sign
    assert attrs["nodeTopologyPodsFingerprintMethod"] == "all"
    assert obj["metadata"]["annotations"]["topology.node.k8s.io/fingerprint"] == sign
