"""``numalign run`` and issue 13: the spec's kubelet section, pinning that cannot happen, causes."""

from __future__ import annotations

import json
from pathlib import Path

from test_launcher_helpers import cli

SPEC = """\
name: k
shape: {sockets: 2, numaPerSocket: 1, coresPerNuma: 4, threadsPerCore: 1, memoryPerNuma: 8Gi,
        gpusPerNuma: 2}
kubelet:
  topologyManagerPolicy: single-numa-node
  topologyManagerScope: pod
  cpuManagerPolicy: static
  reservedSystemCPUs: "7"
"""


def _spec(tmp: Path, text: str = SPEC) -> Path:
    p = tmp / "k.yaml"
    p.write_text(text)
    return p


def test_run_honours_the_specs_kubelet_section(tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    out = cli("run", "--machine", str(spec), "--state-dir", str(tmp_path / "s"), "--cpus", "2",
              "--dry-run", "-o", "json", "--", "true")
    assert out.returncode == 0, out.stderr
    alloc = json.loads(out.stdout)["allocation"]
    assert (alloc["policy"], alloc["scope"]) == ("single-numa-node", "pod")
    # the spec reserves CPU 7, not the launcher's default core of CPU 0
    assert alloc["containers"][0]["cpus"] == "0-1"
    # an explicit --policy still wins
    out = cli("run", "--machine", str(spec), "--state-dir", str(tmp_path / "s"), "--cpus", "2",
              "--policy", "best-effort", "--dry-run", "-o", "json", "--", "true")
    assert json.loads(out.stdout)["allocation"]["policy"] == "best-effort"
    # 5 CPUs cannot sit on one NUMA node of 4: the spec's single-numa-node refuses, with a hint
    out = cli("run", "--machine", str(spec), "--state-dir", str(tmp_path / "s"), "--cpus", "5",
              "--", "true")
    assert out.returncode == 1
    assert out.stderr.startswith("numalign run: TopologyAffinityError: ")
    assert "try --policy best-effort" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_spec_without_static_cpu_manager_is_refused(tmp_path: Path) -> None:
    spec = _spec(tmp_path, SPEC.replace("cpuManagerPolicy: static", "cpuManagerPolicy: none")
                 .replace('  reservedSystemCPUs: "7"\n', ""))
    out = cli("run", "--machine", str(spec), "--state-dir", str(tmp_path / "s"), "--", "true")
    assert out.returncode == 2
    assert "kubelet.cpuManagerPolicy" in out.stderr and "static" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_pinning_impossible_is_an_error_unless_allowed(tmp_path: Path) -> None:
    # CPUs 1000+ exist in no test box: the plan cannot be applied to this process
    spec = _spec(tmp_path, "name: far\nnumaNodes: [{id: 0, memory: 8Gi}]\ncpus:\n"
                 + "".join(f"  - {{id: {1000 + i}, core: {1000 + i}, socket: 0, numa: 0}}\n"
                           for i in range(4)))
    state = str(tmp_path / "s")
    out = cli("run", "--machine", str(spec), "--state-dir", state, "--", "true")
    assert out.returncode == 1
    assert "cannot pin as planned" in out.stderr and "--allow-unpinned" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
    out = cli("run", "--machine", str(spec), "--state-dir", state, "--allow-unpinned", "--", "true")
    assert out.returncode == 0, out.stderr
    assert "warning: pinning skipped" in out.stderr
    # nothing stays allocated after either run
    ps = cli("ps", "--state-dir", state, "-o", "json")
    assert json.loads(ps.stdout)["runs"] == []
