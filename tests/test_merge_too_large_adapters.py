"""The merge's step cap (``MergeTooLarge``) is a clear per-pod outcome in every adapter.

The cap is forced: ``STEP_LIMIT`` is 0 and every merge takes one step of a real
:class:`~numalign.engine.merge_budget.Budget` first, so the engine raises the real error on any
pod that reaches the Topology Manager's merge. Then:

* ``Node.admit`` raises it (an InputError with the stable reason ``MergeTooLarge``);
* the scheduler's filters fail that node for that pod with the reason; a topology-blind
  profile binds and the node's admission turns it into a rejection with that reason;
* the extender fails that node with the message;
* the simulator counts rejections with that reason and finishes;
* ``numalign admit`` exits 2 with one line on stderr.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import numalign.engine.merge_budget as budget_module
import numalign.engine.policies as policies_module
from numalign.cli import main
from numalign.engine.hints import HintList, TopologyHint
from numalign.engine.merge import NARROWEST, FitOrder
from numalign.engine.merge_budget import Budget, MergeTooLarge
from numalign.errors import InputError
from numalign.kube.extender.core import ExtenderCore
from numalign.kube.topology import build_nrt
from numalign.machine.spec import read_machine_file
from numalign.modes.koordinator.scheduling import koordinator_filter
from numalign.modes.volcano.predicate import volcano_filter
from numalign.node.admission import Node
from numalign.pods import Container, ContainerKind, Pod, QOSClass
from numalign.scheduler import Cluster, Scheduler, get_profile
from numalign.scheduler.filters import exact_filter
from numalign.sim.cluster import builtin_cluster
from numalign.sim.runner import simulate
from numalign.sim.sources import parse_workload_spec

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
GI = 1 << 30


@pytest.fixture
def capped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(budget_module, "STEP_LIMIT", 0)
    real = policies_module.merge_lists
    real_legacy = policies_module.merge_lists_legacy

    def merge(lists: Sequence[HintList], default: int, fit: FitOrder = NARROWEST) -> TopologyHint:
        Budget().tick("capped for the test")
        return real(lists, default, fit)

    def legacy(lists: Sequence[HintList], default: int) -> TopologyHint:
        Budget().tick("capped for the test")
        return real_legacy(lists, default)

    monkeypatch.setattr(policies_module, "merge_lists", merge)
    monkeypatch.setattr(policies_module, "merge_lists_legacy", legacy)


def guaranteed(cpus: int, name: str = "p") -> Pod:
    r = {"cpu": cpus * 1000, "memory": GI}
    return Pod("default", name, f"uid-{name}", QOSClass.GUARANTEED, (Container("c", ContainerKind.APP, r, r),))


def machine(name: str = "dual-socket-ht.yaml") -> Any:
    return read_machine_file(str(EXAMPLES / name))


def test_node_admit_raises_the_capped_merge(capped: None) -> None:
    with pytest.raises(MergeTooLarge) as err:
        Node(machine()).admit(guaranteed(4))
    assert isinstance(err.value, InputError)
    assert err.value.reason == "MergeTooLarge"
    assert "\n" not in err.value.message


def test_scheduler_filters_fail_the_node_with_the_reason(capped: None) -> None:
    node = Node(machine())
    res = exact_filter(node, guaranteed(4))
    assert not res.passed and res.reason.startswith("MergeTooLarge: ")
    volcano = volcano_filter(node, guaranteed(4))
    assert not volcano.passed and "merge needs more than" in volcano.reason
    koord = koordinator_filter(node, guaranteed(4))
    assert not koord.passed and koord.reason.startswith("MergeTooLarge: ")


def test_scheduler_never_crashes_on_the_cap(capped: None) -> None:
    nodes = builtin_cluster("small")
    exact = Scheduler(Cluster(nodes), get_profile("numalign"))
    out = exact.schedule(guaranteed(4, "a"))
    assert not out.admitted and out.placement is None  # every node infeasible for this pod
    blind = Scheduler(Cluster(nodes), get_profile("default"))
    out = blind.schedule(guaranteed(4, "b"))
    assert out.placement is not None and not out.admitted and out.reason == "MergeTooLarge"


def test_extender_fails_the_node_with_the_message(capped: None) -> None:
    core = ExtenderCore(log=io.StringIO())
    core.set_nodes({"ds": build_nrt(Node(machine()), name="ds")})
    passed, failed = core.filter(guaranteed(4), ["ds"])
    assert passed == []
    assert failed["ds"].startswith("MergeTooLarge: ") and "search steps" in failed["ds"]


def test_simulator_counts_rejections_with_the_reason(capped: None) -> None:
    nodes = builtin_cluster("small")
    wl = parse_workload_spec("synthetic:count=40,seed=2", None, cluster=nodes)
    result = simulate(nodes, wl, ["default", "numalign"], samples=2)
    summary = result.recorder.summary()["profiles"]
    assert summary["default"]["rejections"].get("MergeTooLarge", 0) > 0
    assert summary["numalign"]["rejections"].get("MergeTooLarge", 0) == 0  # filtered, never bound


def test_cli_admit_exits_2_with_one_line(capped: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pod = tmp_path / "pod.yaml"
    pod.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, uid: u1}\nspec:\n  containers:\n"
        "  - name: c\n    resources:\n      limits: {cpu: '4', memory: 1Gi}\n"
        "      requests: {cpu: '4', memory: 1Gi}\n"
    )
    assert main(["admit", "-m", str(EXAMPLES / "dual-socket-ht.yaml"), str(pod)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "merge needs more than" in err
