"""The sweep file, the grid and its cell ids, the cluster variants and workload specs of cells,
and trace sampling: everything a sweep decides before Dask is involved."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numalign.errors import InputError
from numalign.sim.cluster import builtin_template, load_cluster, template_variant
from numalign.sim.sources import (
    check_workload_spec,
    format_spec,
    has_randomness,
    parse_workload_spec,
    seeded_spec,
    split_spec,
    with_pod_limit,
)
from numalign.sim.sweep.grid import (
    CellParams,
    cell_id,
    effective_workload,
    expand,
    parse_only,
    select,
)
from numalign.sim.sweep.spec import AXES, MAX_CELLS, parse_sweep
from numalign.sim.workloads import (
    Arrival,
    Workload,
    WorkloadSpec,
    sample_workload,
    single_container_pod,
)
from sweep_helpers import write_trace

# -- the sweep file ------------------------------------------------------------------------------


@pytest.mark.parametrize(("doc", "message"), [
    ({"axes": {"policyy": "x"}}, "s.yaml: axes.policyy: unknown axis 'policyy' (known: cluster, "
                                 "scale, policy, scope, profile, workload, seed)"),
    ({"axes": {"seed": []}}, "s.yaml: axes.seed: empty list: the grid would have no cell"),
    ({"axes": {}}, "s.yaml: axes: no axis given"),
    ({"axes": {"seed": list(range(MAX_CELLS + 1))}},
     "s.yaml: axes: the grid has 40,004 cells, more than the cap of 10,000 (MAX_CELLS)"),
    ({"axes": {"seed": list(range(200)), "scale": list(range(1, 101)), "profile": "default"}},
     "the grid has 20,000 cells, more than the cap of 10,000 (MAX_CELLS)"),
    ({"axes": {"seed": [1, 1]}}, "s.yaml: axes.seed[1]: 1 given twice"),
    ({"axes": {"scale": 0}}, "s.yaml: axes.scale: must be 1 to 1000, got 0"),
    ({"axes": {"seed": [True]}}, "s.yaml: axes.seed[0]: expected a whole number, got True"),
    ({"axes": {"profile": " "}}, "s.yaml: axes.profile: expected a non-empty string"),
    ({"axes": {"workload": "x" * 5000}}, "s.yaml: axes.workload: longer than 4096 characters"),
    ({"axes": {"seed": 1}, "colour": 1}, "s.yaml: colour: unknown field (known: name,"),
    ({"axes": {"seed": 1}, "podLimit": 0}, "s.yaml: podLimit: expected a whole number >= 1, got 0"),
    ({"axes": {"seed": 1}, "recreate": "yes"}, "s.yaml: recreate: expected true or false"),
    ({"axes": {"seed": [1, 2]}, "report": {"x": "seed"}}, "s.yaml: report.x: unknown axis 'seed'"),
    ({"axes": {"seed": 1}, "report": {"metrics": ["speed"]}},
     "s.yaml: report.metrics[0]: unknown metric 'speed'"),
    ({"axes": {"seed": 1}, "report": {"x": "policy", "panels": ["policy"]}},
     "s.yaml: report: an axis is placed twice"),
    ({"axes": {"seed": 1}, "name": "../x"}, "s.yaml: name: must not be a path"),
    ([1, 2], "s.yaml: expected a mapping with 'axes', got list"),
])
def test_bad_sweep_documents_are_one_line_errors(doc: Any, message: str) -> None:
    with pytest.raises(InputError) as e:
        parse_sweep(doc, "s.yaml")
    assert message in e.value.message and "\n" not in e.value.message


def test_defaults_and_the_report_places_every_varying_axis() -> None:
    spec = parse_sweep({"axes": {"policy": ["restricted", "none"], "scale": [1, 2],
                                 "scope": ["pod", "container"], "seed": [1, 2]}}, "s.yaml", "n")
    assert spec.name == "n" and spec.axes["profile"] == ("default", "nrt-snn", "volcano", "numalign")
    assert spec.axes["cluster"] == ("builtin:default",) and spec.axes["workload"] == ("synthetic",)
    assert spec.cell_count == 2 * 2 * 2 * 4 * 2
    layout = spec.report
    assert (layout.x, layout.series, layout.panels) == ("scale", "policy", ("scope", "profile"))
    explicit = parse_sweep({"axes": {"policy": ["a", "b"], "profile": ["default", "numalign"]},
                            "report": {"x": "profile", "metrics": "pending"}}, "s.yaml")
    assert (explicit.report.x, explicit.report.series) == ("profile", "policy")
    assert explicit.report.metrics == ("pending",)


# -- cells and their ids -------------------------------------------------------------------------

AXIS_VALUES = {"policy": ["restricted", "single-numa-node", "best-effort"], "seed": [1, 2, 3],
               "profile": ["default", "numalign"], "scale": [1, 2]}


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_cell_ids_do_not_depend_on_the_order_of_axes_or_values(data: st.DataObject) -> None:
    chosen = {a: data.draw(st.lists(st.sampled_from(v), min_size=1, unique=True), label=a)
              for a, v in AXIS_VALUES.items()}
    shuffled = {a: data.draw(st.permutations(v), label=f"{a} order") for a, v in chosen.items()}
    keys = data.draw(st.permutations(list(chosen)), label="key order")
    one = expand(parse_sweep({"axes": chosen}, "a.yaml"), "1.0")
    two = expand(parse_sweep({"axes": {k: shuffled[k] for k in keys}}, "b.yaml"), "1.0")
    assert {c.id: c.params for c in one} == {c.id: c.params for c in two}
    assert len(one) == len({c.id for c in one})  # distinct parameters, distinct ids
    assert not {c.id for c in one} & {c.id for c in expand(parse_sweep({"axes": chosen}), "1.1")}


def test_cell_id_is_a_hash_of_the_parameters_and_version() -> None:
    p = CellParams("builtin:small", 1, "restricted", None, "numalign", "synthetic:seed=1", 1, False)
    assert cell_id(p, "0.1.0") == cell_id(CellParams(**vars(p)), "0.1.0")
    assert len(cell_id(p, "0.1.0")) == 16 and int(cell_id(p, "0.1.0"), 16) >= 0
    assert cell_id(p, "0.1.0") != cell_id(CellParams(**{**vars(p), "scope": "pod"}), "0.1.0")


@pytest.mark.parametrize(("spec", "seed", "limit", "effective"), [
    ("synthetic", 2, None, "synthetic:seed=2"),
    ("synthetic?seed=9&count=50", 3, 20, "synthetic:count=20,seed=9"),
    ("synthetic:load=1.1, count=10", 1, 50, "synthetic:count=10,load=1.1,seed=1"),
    ("alibaba2025?sample=0.5", 3, 1000, "alibaba2025?limit=1000&sample=0.5&seed=3"),
    ("alibaba2025", 3, 1000, "alibaba2025?limit=1000"),
    ("alibaba2023:multigpu50?limit=50", 2, 1000, "alibaba2023:multigpu50?limit=50"),
    ("dir:examples/pods", 2, None, "dir:examples/pods"),
])
def test_effective_workload_writes_the_limit_and_seed_in(spec: str, seed: int, limit: int | None,
                                                         effective: str) -> None:
    assert effective_workload(spec, seed, limit) == effective


@pytest.mark.parametrize(("doc", "message"), [
    ({"axes": {"workload": "alibaba2025", "seed": [1, 2]}},
     "s.yaml: axes.seed: 2 seeds but workload 'alibaba2025' has no randomness"),
    ({"axes": {"workload": "synthetic:seed=4", "seed": [1, 2]}},
     "s.yaml: axes.seed: 2 seeds but workload 'synthetic:seed=4' sets its own seed"),
    ({"axes": {"workload": "dir:x"}, "podLimit": 5},
     "s.yaml: podLimit: workload 'dir:x': workload dir: takes no pod limit"),
])
def test_grid_errors(doc: dict[str, Any], message: str) -> None:
    with pytest.raises(InputError) as e:
        expand(parse_sweep(doc, "s.yaml"), "1.0")
    assert message in e.value.message


def test_only_selects_cells_by_the_values_as_written() -> None:
    spec = parse_sweep({"axes": {"policy": ["restricted", "none"], "seed": [1, 2],
                                 "profile": ["default", "numalign"],
                                 "workload": ["synthetic:count=5"]}}, "s.yaml")
    cells = expand(spec, "1")
    picked = select(cells, parse_only(["seed=2", "profile=numalign", "profile=default",
                                       "workload=synthetic:count=5"]), spec)
    assert len(picked) == 4 and {c.params.seed for c in picked} == {2}
    with pytest.raises(InputError, match="--only: seed has no value '7'"):
        select(cells, parse_only(["seed=7"]), spec)
    with pytest.raises(InputError, match="--only: expected AXIS=VALUE"):
        parse_only(["colour=red"])


# -- cluster variants ----------------------------------------------------------------------------


@settings(max_examples=30, deadline=None)
@given(counts=st.lists(st.integers(1, 50), min_size=1, max_size=5), scale=st.integers(1, 20),
       policy=st.sampled_from(["none", "best-effort", "restricted", "single-numa-node"]))
def test_template_variant_scales_and_overrides_every_node_group(counts: list[int], scale: int,
                                                                 policy: str) -> None:
    doc = {"nodes": [{"machine": "m.yaml", "count": c, "kubelet": {"topologyManagerScope": "pod"}}
                     for c in counts]}
    out = template_variant(doc, scale=scale, kubelet={"topologyManagerPolicy": policy})
    assert [g["count"] for g in out["nodes"]] == [c * scale for c in counts]
    assert all(g["kubelet"] == {"topologyManagerScope": "pod", "topologyManagerPolicy": policy}
               for g in out["nodes"])
    assert [g["count"] for g in doc["nodes"]] == counts  # the template is not changed


def test_a_variant_of_a_builtin_cluster_loads_with_the_override_on_every_node() -> None:
    doc = builtin_template("default")  # mixed policies and scopes
    nodes = load_cluster(template_variant(doc, scale=2, kubelet={
        "topologyManagerPolicy": "best-effort", "topologyManagerScope": "pod"}), "builtin:default")
    assert len(nodes) == 80
    assert {(str(m.kubelet.topology_manager_policy), str(m.kubelet.topology_manager_scope))
            for _, m in nodes} == {("best-effort", "pod")}


# -- workload specs and sampling -----------------------------------------------------------------

OPTION = st.from_regex(r"[a-z]{1,6}", fullmatch=True)
VALUE = st.from_regex(r"[a-zA-Z0-9._=/-]{0,8}", fullmatch=True)


@settings(max_examples=100, deadline=None)
@given(source=st.sampled_from(["alibaba2025", "alibaba2023", "synthetic", "dir"]),
       path=st.from_regex(r"([a-zA-Z0-9._/-][a-zA-Z0-9._/ :-]{0,20}[a-zA-Z0-9._/-])?", fullmatch=True),
       options=st.dictionaries(OPTION, VALUE, max_size=4))
def test_format_spec_reads_back_to_the_same_spec(source: str, path: str,
                                                 options: dict[str, str]) -> None:
    if source == "synthetic":
        path = ""
    spec = WorkloadSpec(source, path, options)
    again = split_spec(format_spec(spec))
    assert (again.source, again.path, dict(again.options)) == (source, path, options)


def test_seeds_reach_only_what_has_randomness() -> None:
    assert seeded_spec("synthetic", 3) == "synthetic:seed=3"
    assert seeded_spec("synthetic?count=4", 3) == "synthetic?count=4,seed=3"
    assert seeded_spec("synthetic:seed=1", 3) == "synthetic:seed=1"
    assert seeded_spec("alibaba2025?sample=0.5", 3) == "alibaba2025?sample=0.5&seed=3"
    assert seeded_spec("alibaba2025?limit=4", 3) == "alibaba2025?limit=4"
    assert has_randomness("synthetic") and has_randomness("dir:x?sample=1")
    assert not has_randomness("alibaba2023:multigpu50")
    assert with_pod_limit("alibaba2025?limit=400&sample=0.5", 100) == \
        "alibaba2025?limit=100&sample=0.5"


def _workload(n: int) -> Workload:
    return Workload("w", tuple(Arrival(float(i), single_container_pod("ns", f"p{i}", {"cpu": 1000}, {}))
                               for i in range(n)))


@settings(max_examples=50, deadline=None)
@given(n=st.integers(0, 300), fraction=st.floats(0.01, 1.0), seed=st.integers(0, 2**32))
def test_a_sample_is_an_ordered_deterministic_subset(n: int, fraction: float, seed: int) -> None:
    wl = _workload(n)
    a, b = sample_workload(wl, fraction, seed), sample_workload(wl, fraction, seed)
    assert a.arrivals == b.arrivals
    names = [x.pod.name for x in wl]
    kept = [x.pod.name for x in a]
    it = iter(names)
    assert all(k in it for k in kept)  # a subsequence: order kept
    assert a.params["sample"] == fraction and a.params["seed"] == seed
    if fraction == 1.0:
        assert kept == names


def test_seeds_draw_different_samples_of_a_trace(tmp_path: Any) -> None:
    trace = write_trace(tmp_path / "t.csv", 200)
    samples = {s: [a.pod.name for a in parse_workload_spec(f"alibaba2025:{trace}?sample=0.5&seed={s}")]
               for s in (1, 2, 3)}
    assert len({tuple(v) for v in samples.values()}) == 3
    assert all(60 < len(v) < 140 for v in samples.values())
    rng = random.Random(1)
    assert samples[1] == [f"instance-{i}" for i in range(1, 201) if rng.random() < 0.5]


@pytest.mark.parametrize(("spec", "message"), [
    ("alibaba2025?seed=2", "workload alibaba2025: seed: only with sample=F"),
    ("alibaba2025?sample=0", "workload alibaba2025: sample: must be a finite number > 0"),
    ("alibaba2025?sample=1.5", "workload alibaba2025: sample: must be a fraction in (0, 1]"),
    ("alibaba2025?limit=x", "workload alibaba2025: limit: expected a whole number, got 'x'"),
    ("synthetic:count=x", "workload synthetic: count: expected a whole number"),
    ("synthetic:sample=0.5", "workload synthetic: sample: unknown option 'sample'"),
])
def test_workload_spec_checks_without_loading(spec: str, message: str, tmp_path: Any) -> None:
    with pytest.raises(InputError) as e:
        check_workload_spec(spec, tmp_path)
    assert message in e.value.message


def test_the_trace_probe_reads_the_header_and_first_row_only(tmp_path: Any) -> None:
    bad = write_trace(tmp_path / "bad.csv", 40, bad_row=30)
    check_workload_spec(f"alibaba2025:{bad}")  # the malformed row is further down
    with pytest.raises(InputError, match=r"bad\.csv:31: cpu_limit"):
        parse_workload_spec(f"alibaba2025:{bad}")
    (tmp_path / "h.csv").write_text("instance_sn,role\n")
    with pytest.raises(InputError, match="missing column 'app_name'"):
        check_workload_spec(f"alibaba2025:{tmp_path / 'h.csv'}")
    with pytest.raises(InputError, match="cannot read"):
        check_workload_spec("alibaba2025:nope.csv", base_dir=tmp_path)


def test_axes_are_the_params_fields() -> None:
    assert set(AXES) <= set(CellParams.__dataclass_fields__)
