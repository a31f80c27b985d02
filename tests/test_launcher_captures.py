"""Plans on captured multi-NUMA machines match what the node engine and ``numalign admit``
decide for the same machine configuration and request.

``numalign run --sysfs-root CAPTURE --dry-run -o json`` is compared with (a) ``Node.admit``
in this process on the same capture with the launcher's kubelet configuration, and (b) the
``numalign admit`` command given that configuration as a machine spec and the run's pod as
a manifest. Compared: admitted, reason, merged affinity, CPUs, memory, devices.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import shared_path
from test_launcher_helpers import cli, in_process

CASES = [
    # capture, extra run arguments
    ("16amd64-8n2c", ["--cpus", "2", "--memory", "1Gi"]),  # 8 nodes, 2 CPUs each
    ("16amd64-8n2c", ["--cpus", "5"]),  # more than a node: the smallest node set
    ("256ia64-64n2s2c", ["--cpus", "3", "--memory", "2Gi"]),  # 64 nodes: max-allowable raised
    ("32intel64-2p8co2t+8ve", ["--cpus", "4", "--device", "nec.com/ve=2"]),
    ("40intel64-2g2n4c+pcilocality", ["--cpus", "2", "--device", "rdma/hca=1"]),
    ("nvidiagpunumanodes", ["--cpus", "4", "--memory", "4Gi"]),  # sparse ids, CPU-less nodes
    ("offline-cpu0-node0", ["--cpus", "2"]),
    ("16amd64-8n2c", ["--cpus", "99"]),  # rejected: same reason both ways
]


def _capture(name: str) -> Path:
    return shared_path("topologies", "hwloc", "linux", f"{name}.tar.bz2")


@cache
def _machine(name: str) -> Any:
    from numalign.machine.sysfs import load_sysfs

    return load_sysfs(_capture(name)).machine


def _summary(alloc: dict[str, Any]) -> dict[str, Any]:
    out = {"admitted": alloc["admitted"], "reason": alloc["reason"], "policy": alloc["policy"]}
    for c in alloc["containers"]:
        out.update(affinity=c["affinity"], preferred=c["preferred"])
        if alloc["admitted"]:
            out.update(cpus=c["cpus"], memory=c["memory"], devices=c["devices"])
    return out


@pytest.mark.parametrize(("capture", "argv"), CASES, ids=[f"{c}:{' '.join(a)}" for c, a in CASES])
def test_dry_run_plan_matches_node_admit(tmp_path: Path, capture: str, argv: list[str]) -> None:
    from numalign.launcher import (
        Identity,
        LaunchRequest,
        launcher_machine,
        pod_manifest,
        request_pod,
    )
    from numalign.machine.spec import dump_machine
    from numalign.node.admission import Node
    from numalign.node.render import pod_doc

    # the first case as a real process, the others in this one (the same command)
    run = cli if (capture, argv) == CASES[0] else in_process
    out = run("run", "--sysfs-root", str(_capture(capture)), "--state-dir", str(tmp_path / "s"),
              "--dry-run", "-o", "json", *argv, "--", "true")
    assert out.returncode in (0, 1), out.stderr
    plan = json.loads(out.stdout)
    got = _summary(plan["allocation"])
    assert (out.returncode == 0) == got["admitted"]

    # (a) the engine, in process
    values: dict[str, Any] = {"devices": []}
    it = iter(argv)
    for flag, value in zip(it, it, strict=True):
        if flag == "--device":
            values["devices"].append(value)
        else:
            values[flag.lstrip("-")] = value
    base = launcher_machine(_machine(capture))
    request = LaunchRequest.from_values(["true"], **values)
    machine = launcher_machine(_machine(capture), memory=request.binds_memory)
    pod = request_pod(request, base, Identity(1, 1))
    expected = _summary(pod_doc(Node(machine).admit(pod)))
    assert got == expected

    # (b) numalign admit with the launcher's configuration as a machine spec
    (tmp_path / "m.yaml").write_text(yaml.safe_dump(dump_machine(machine)))
    (tmp_path / "pod.yaml").write_text(yaml.safe_dump(pod_manifest(pod)))
    adm = run("admit", "--machine", str(tmp_path / "m.yaml"), str(tmp_path / "pod.yaml"), "-o", "json")
    assert adm.returncode == (0 if got["admitted"] else 1), adm.stderr
    [doc] = json.loads(adm.stdout)["pods"]
    assert _summary(doc) == got

    if got["admitted"]:
        # the plan's summary fields agree with the allocation
        assert plan["numa_nodes"] == got["affinity"]
        assert plan["env"]["NUMALIGN_CPUS"] == got["cpus"]
        assert plan["devices"] == got["devices"]
        if request.binds_memory:
            nodes = sorted({int(n) for k in got["memory"] for n in k.split(",")})
            assert plan["memory_nodes"] == nodes
            assert set(nodes) <= set(got["affinity"])


def test_many_numa_nodes_raise_max_allowable() -> None:
    from numalign.launcher import launcher_machine

    m = launcher_machine(_machine("256ia64-64n2s2c"))
    assert len(m.numa_nodes) == 64
    assert m.kubelet.topology_manager_policy_options["max-allowable-numa-nodes"] == "64"
    assert m.kubelet.cpu_manager_policy == "static"
    assert m.kubelet.reserved_system_cpus == frozenset(
        c.id for c in m.online_cpus if c.core == m.online_cpus[0].core)
