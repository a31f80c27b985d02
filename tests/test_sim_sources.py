"""The workload-source registry, and how ``numalign simulate`` finds the shared data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from numalign.cli import main
from numalign.errors import InputError
from numalign.pods import Pod
from numalign.sim.cli_run import SHARED_ENV, find_shared
from numalign.sim.sources import SOURCES, Source, parse_workload_spec, split_spec
from numalign.sim.workloads import Arrival, Workload, WorkloadSpec, single_container_pod

# -- registry --------------------------------------------------------------------------------


def test_registry_lists_every_source_once() -> None:
    assert list(SOURCES) == ["alibaba2025", "alibaba2023", "synthetic", "dir"]
    with pytest.raises(InputError) as e:
        parse_workload_spec("nope:x")
    assert "expected one of: alibaba2025, alibaba2023, synthetic, dir" in str(e.value)


@pytest.mark.parametrize(
    ("spec", "source", "path", "options"),
    [
        ("alibaba2025", "alibaba2025", "", {}),
        ("alibaba2025:/t/x.csv?limit=3", "alibaba2025", "/t/x.csv", {"limit": "3"}),
        ("alibaba2023:multigpu50?limit=2&gpu_share=drop", "alibaba2023", "multigpu50",
         {"limit": "2", "gpu_share": "drop"}),
        ("synthetic:count=5,seed=2", "synthetic", "", {"count": "5", "seed": "2"}),
        ("synthetic?count=5&seed=2", "synthetic", "", {"count": "5", "seed": "2"}),
        (" dir:/pods?interval=2 ", "dir", "/pods", {"interval": "2"}),
    ],
)
def test_split_spec(spec: str, source: str, path: str, options: dict[str, str]) -> None:
    parsed = split_spec(spec)
    assert (parsed.source, parsed.path, dict(parsed.options)) == (source, path, options)


def _ramp(spec: WorkloadSpec) -> Workload:
    """A stand-in trace format: ``ramp[:PATH]?n=N`` - N pods, one a second."""
    spec.check_options(("n",))
    n = int(spec.options.get("n", "1"))
    pods: list[Pod] = [single_container_pod("ramp", f"p{i}", {"cpu": 1000}, {}) for i in range(n)]
    return Workload("ramp", tuple(Arrival(float(i), p) for i, p in enumerate(pods)),
                    params={"path": spec.path, "shared": str(spec.shared_dir)})


def test_a_registered_source_is_reachable_by_its_spec(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(SOURCES, "ramp", Source(_ramp))
    w = parse_workload_spec("ramp:/data/r.csv?n=3", "/shared")
    assert [a.time_s for a in w] == [0.0, 1.0, 2.0]
    assert w.params == {"path": "/data/r.csv", "shared": "/shared"}
    with pytest.raises(InputError, match="workload ramp: m: unknown option 'm'"):
        parse_workload_spec("ramp?m=1")


# -- shared data -----------------------------------------------------------------------------


def _shared(root: Path) -> Path:
    (root / "traces").mkdir(parents=True)
    return root


def test_find_shared_order(tmp_path: Path) -> None:
    work = tmp_path / "checkout"
    work.mkdir()
    assert find_shared(environ={}, cwd=work) is None
    beside = _shared(tmp_path / "shared")
    assert find_shared(environ={}, cwd=work) == beside
    inside = _shared(work / "shared")
    assert find_shared(environ={}, cwd=work) == inside
    env = _shared(tmp_path / "env")
    assert find_shared(environ={SHARED_ENV: str(env)}, cwd=work) == env
    explicit = _shared(tmp_path / "explicit")
    assert find_shared(str(explicit), environ={SHARED_ENV: str(env)}, cwd=work) == explicit


def test_find_shared_ignores_a_shared_dir_without_traces(tmp_path: Path) -> None:
    (tmp_path / "w" / "shared").mkdir(parents=True)
    assert find_shared(environ={}, cwd=tmp_path / "w") is None


@pytest.mark.parametrize("where", ["--shared", SHARED_ENV])
def test_find_shared_rejects_a_missing_directory(tmp_path: Path, where: str) -> None:
    missing = str(tmp_path / "missing")
    with pytest.raises(InputError) as e:
        if where == "--shared":
            find_shared(missing, environ={}, cwd=tmp_path)
        else:
            find_shared(environ={SHARED_ENV: missing}, cwd=tmp_path)
    assert str(e.value).startswith(f"{where}: no such directory")


def test_simulate_without_shared_data_names_what_to_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(SHARED_ENV, raising=False)
    code = main(["simulate", "--quiet", "--out", str(tmp_path / "out"), "--workload", "alibaba2025"])
    _, err = capsys.readouterr()
    assert code == 2 and err.count("\n") == 1, err
    assert "--shared DIR" in err and SHARED_ENV in err and "alibaba2025:PATH" in err


def test_simulate_reads_traces_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No source checkout needed: NUMALIGN_SHARED points at a directory holding traces/."""
    shared = tmp_path / "data"
    trace_dir = shared / "traces" / "alibaba-cluster-trace-gpu-v2023"
    trace_dir.mkdir(parents=True)
    rows = "".join(f"p{i},1000,512,0,0\n" for i in range(12))
    (trace_dir / "openb_pod_list_tiny.csv").write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli\n" + rows)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(SHARED_ENV, str(shared))
    code = main(["simulate", "--quiet", "--cluster", "builtin:small", "--profiles", "numalign",
                 "--out", str(tmp_path / "out"), "--workload", "alibaba2023:tiny"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "numalign" in out
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["workload"]["pods"] == 12
