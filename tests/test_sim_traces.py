"""Alibaba trace readers: mapping rows to pods, validation, and the real files in ../shared."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import shared_path
from numalign.errors import InputError
from numalign.pods import QOSClass, guaranteed_cpus
from numalign.sim import trace_alibaba2023 as t23
from numalign.sim import trace_alibaba2025 as t25
from numalign.sim.workloads import kube_name, read_csv_rows

GIB = 1 << 30
MIB = 1 << 20

H25 = (
    "instance_sn,role,app_name,cpu_request,cpu_limit,gpu_request,gpu_limit,rdma_request,"
    "rdma_limit,memory_request,memory_limit,disk_request,disk_limit,max_instance_per_node,"
    "creation_time,scheduled_time,deletion_time"
)
ROWS25 = [
    "instance_0,HN,app_0,12,12,1,1,25,25,120.0,120.0,640.0,800.0,8,,,",
    "instance_13574,CN,app_130,64,64,0,0,1,1,320.0,320.0,255.0,300.0,-1,1435629.0,1435629.0,1435760.0",
    "instance_5,HN,app_1,8,8,1,1,51,51,937.5,937.5,10,10,2,475.00000000000006,480,",
    "instance_6,CN,app_2,96,96,0,0,100,100,480.0,480.0,425.0,500.0,-1,300.0,300.0,900.0",
]

H23 = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
    "deletion_time,scheduled_time"
)
ROWS23 = [
    "openb-pod-0000,12000,16384,1,1000,,LS,Running,0,12537496,0",
    "openb-pod-0001,6000,12288,1,460,,LS,Running,427061,12902960,427061",
    "openb-pod-0002,3152,5600,1,590,,BE,Failed,12900505,12900526,12900505",
    "openb-pod-0003,88000,327680,8,1000,V100M16|V100M32,Burstable,Succeeded,9437497,10769854,9437497",
    "openb-pod-0004,4000,1024,0,0,,Guaranteed,Pending,100,,",
]


def write(tmp_path: Path, name: str, header: str, rows: list[str]) -> Path:
    p = tmp_path / name
    p.write_text("\n".join([header, *rows]) + "\n", encoding="utf-8")
    return p


# -- 2025 -----------------------------------------------------------------------------------


def test_2025_mapping(tmp_path: Path) -> None:
    w = t25.read_trace(write(tmp_path, "t.csv", H25, ROWS25))
    assert [a.pod.name for a in w] == ["instance-0", "instance-6", "instance-5", "instance-13574"]
    by = {a.pod.name: a for a in w}
    hn = by["instance-0"]
    assert hn.time_s == 0.0 and hn.duration_s is None  # pre-existing, never deleted
    c = hn.pod.containers[0]
    expected = {"cpu": 12000, "memory": 120 * GIB, "nvidia.com/gpu": 1, "rdma/hca": 1}
    assert c.requests == c.limits == expected
    assert hn.pod.qos is QOSClass.GUARANTEED
    assert guaranteed_cpus(hn.pod, c) == 12  # exclusive CPUs
    cn = by["instance-13574"]
    assert cn.time_s == 1435629.0 and cn.duration_s == pytest.approx(131.0)
    assert "nvidia.com/gpu" not in cn.pod.containers[0].requests
    assert cn.pod.containers[0].requests["rdma/hca"] == 1  # 1 % of a NIC -> one VF
    half = by["instance-5"].pod.containers[0].requests
    assert half["rdma/hca"] == 3  # 51 % of 4 VFs -> 3
    assert half["memory"] == int(937.5 * GIB)
    assert by["instance-6"].pod.containers[0].requests["rdma/hca"] == 4
    assert by["instance-6"].duration_s == 600.0
    assert all(a.pod.namespace == "alibaba2025" for a in w)


def test_2025_rdma_units_and_limit(tmp_path: Path) -> None:
    p = write(tmp_path, "t.csv", H25, ROWS25)
    w = t25.read_trace(p, rdma_units=1, limit=2)
    assert len(w) == 2
    assert all(a.pod.containers[0].requests.get("rdma/hca") == 1 for a in w)
    assert t25.rdma_devices(0, 4) == 0
    shares = (1, 10, 25, 26, 50, 51, 75, 100)
    assert [t25.rdma_devices(x, 4) for x in shares] == [1, 1, 1, 2, 2, 3, 3, 4]


def test_2025_burstable_when_limit_above_request(tmp_path: Path) -> None:
    row = "i_1,CN,a,4,8,0,0,0,0,16,32,1,1,-1,10,10,20"
    w = t25.read_trace(write(tmp_path, "t.csv", H25, [row]))
    pod = w[0].pod
    assert pod.qos is QOSClass.BURSTABLE
    assert pod.containers[0].requests == {"cpu": 4000, "memory": 16 * GIB}
    assert pod.containers[0].limits == {"cpu": 8000, "memory": 32 * GIB}


@pytest.mark.parametrize(
    ("row", "column", "problem"),
    [
        ("i,HN,a,x,12,1,1,25,25,1,1,1,1,8,,,", "cpu_request", "expected a number, got 'x'"),
        ("i,XX,a,12,12,1,1,25,25,1,1,1,1,8,,,", "role", "expected CN or HN"),
        ("i,HN,a,12,6,1,1,25,25,1,1,1,1,8,,,", "cpu_limit", "below the request"),
        ("i,HN,a,12,12,1,2,25,25,1,1,1,1,8,,,", "gpu_limit", "must equal gpu_request"),
        ("i,HN,a,12,12,0.5,0.5,25,25,1,1,1,1,8,,,", "gpu_request", "whole number"),
        ("i,HN,a,12,12,1,1,125,125,1,1,1,1,8,,,", "rdma_request", "0-100"),
        ("i,HN,a,12,12,1,1,25,25,-1,1,1,1,8,,,", "memory_request", "at least 0"),
        ("i,HN,a,12,12,1,1,25,25,1,1,1,1,8,50,,10", "deletion_time", "before creation_time"),
        ("i,HN,a,12,12,1,1,25,25,1,1,1,1,8,abc,,", "creation_time", "expected a number"),
        (",HN,a,12,12,1,1,25,25,1,1,1,1,8,,,", "instance_sn", "missing value"),
    ],
)
def test_2025_malformed_rows(tmp_path: Path, row: str, column: str, problem: str) -> None:
    p = write(tmp_path, "bad.csv", H25, [ROWS25[0], row])
    with pytest.raises(InputError) as e:
        t25.read_trace(p)
    msg = str(e.value)
    assert msg.startswith(f"{p}:3: {column}: "), msg
    assert problem in msg
    assert "\n" not in msg


def test_2025_wrong_field_count_and_header(tmp_path: Path) -> None:
    p = write(tmp_path, "bad.csv", H25, [ROWS25[0], "instance_1,HN,app_0,12"])
    with pytest.raises(InputError, match=r"bad\.csv:3: expected 17 fields like the header, got 4"):
        t25.read_trace(p)
    p = write(tmp_path, "hdr.csv", H25.replace("rdma_request", "rdma"), ROWS25)
    with pytest.raises(InputError, match=r"hdr\.csv:1: missing column 'rdma_request'"):
        t25.read_trace(p)
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(InputError, match="empty file"):
        t25.read_trace(empty)
    with pytest.raises(InputError, match="cannot read"):
        t25.read_trace(tmp_path / "missing.csv")


def test_2025_shape_cache_matches_rows_read_alone(tmp_path: Path) -> None:
    # rows of one shape share the first row's validated container: the same pods as reading
    # every row on its own (no cache), whatever the order and the names
    rows = [r.replace("instance_", f"instance_{k}") for k in range(3) for r in ROWS25]
    p = write(tmp_path, "t.csv", H25, rows)
    alone = [t25.row_to_arrival(r) for r in read_csv_rows(p, t25.COLUMNS)]
    cached = t25.read_trace(p)
    assert len(cached) == len(alone) == 12
    assert sorted(cached, key=lambda a: a.pod.name) == sorted(alone, key=lambda a: a.pod.name)
    assert len({id(a.pod.containers[0]) for a in cached}) == len(ROWS25)


def test_csv_row_repeated_column_keeps_the_last(tmp_path: Path) -> None:
    p = write(tmp_path, "t.csv", "a,b,a", ["1,2,3", "", " ,, "])
    (row,) = read_csv_rows(p, ("a", "b"))
    assert (row.line, row.text("a"), row.text("b"), row.has("c"), row.text("c")) == (2, "3", "2", False, "")


@given(st.text(max_size=30) | st.from_regex(r"[A-Za-z0-9_.\- ]{0,20}", fullmatch=True))
def test_kube_name_fast_path_is_the_per_character_rule(raw: str) -> None:
    text = raw.strip().lower()
    expected = "".join(ch if ch.isalnum() else "-" for ch in text).strip("-") or "pod"
    assert kube_name(raw) == expected


# -- 2023 -----------------------------------------------------------------------------------


def test_2023_mapping(tmp_path: Path) -> None:
    w = t23.read_trace(write(tmp_path, "p.csv", H23, ROWS23))
    by = {a.pod.name: a for a in w}
    ls = by["openb-pod-0000"]
    assert ls.pod.qos is QOSClass.GUARANTEED
    c = ls.pod.containers[0]
    assert c.requests == c.limits == {"cpu": 12000, "memory": 16384 * MIB, "nvidia.com/gpu": 1}
    assert guaranteed_cpus(ls.pod, c) == 12
    assert ls.time_s == 0 and ls.duration_s == 12537496
    shared = by["openb-pod-0001"].pod.containers[0]
    assert shared.requests["nvidia.com/gpu"] == 1  # 460 milli-GPU -> one whole GPU
    be = by["openb-pod-0002"]
    assert be.pod.qos is QOSClass.BURSTABLE
    assert be.pod.containers[0].requests == {"cpu": 3152, "memory": 5600 * MIB, "nvidia.com/gpu": 1}
    assert be.pod.containers[0].limits == {"nvidia.com/gpu": 1}
    big = by["openb-pod-0003"].pod.containers[0]
    assert big.requests["nvidia.com/gpu"] == 8
    g = by["openb-pod-0004"]
    assert g.pod.qos is QOSClass.GUARANTEED and g.duration_s is None
    assert [a.time_s for a in w] == sorted(a.time_s for a in w)


def test_2023_gpu_share_drop(tmp_path: Path) -> None:
    w = t23.read_trace(write(tmp_path, "p.csv", H23, ROWS23), gpu_share="drop")
    by = {a.pod.name: a.pod.containers[0].requests for a in w}
    assert "nvidia.com/gpu" not in by["openb-pod-0001"]
    assert by["openb-pod-0000"]["nvidia.com/gpu"] == 1  # a whole GPU stays
    with pytest.raises(InputError, match="gpu_share"):
        t23.read_trace(tmp_path / "p.csv", gpu_share="half")


def test_2023_without_time_columns(tmp_path: Path) -> None:
    rows = ["openb-pod-0000,12000,16384,1,1000", "openb-pod-0001,6000,12288,0,0"]
    w = t23.read_trace(
        write(tmp_path, "m.csv", "name,cpu_milli,memory_mib,num_gpu,gpu_milli", rows),
        interval_s=2.5,
    )
    assert [(a.time_s, a.duration_s) for a in w] == [(0.0, None), (2.5, None)]
    assert all(a.pod.qos is QOSClass.GUARANTEED for a in w)  # no qos column: LS


@pytest.mark.parametrize(
    ("row", "column", "problem"),
    [
        ("p,12.5x,1,1,1000,,LS,Running,0,1,0", "cpu_milli", "expected a number"),
        ("p,1000,1,1,1500,,LS,Running,0,1,0", "gpu_milli", "0-1000"),
        ("p,1000,1,1,1000,,Gold,Running,0,1,0", "qos", "expected LS, BE, Burstable or Guaranteed"),
        ("p,1000,1,1,1000,,LS,Running,,1,0", "creation_time", "missing value"),
        ("p,1000,1,-1,1000,,LS,Running,0,1,0", "num_gpu", "at least 0"),
        ("p,1000,1,1,1000,,LS,Running,5,1,5", "deletion_time", "before creation_time"),
    ],
)
def test_2023_malformed_rows(tmp_path: Path, row: str, column: str, problem: str) -> None:
    p = write(tmp_path, "bad.csv", H23, [ROWS23[0], ROWS23[1], row])
    with pytest.raises(InputError) as e:
        t23.read_trace(p)
    msg = str(e.value)
    assert msg.startswith(f"{p}:4: {column}: "), msg
    assert problem in msg and "\n" not in msg


# -- the real files -----------------------------------------------------------------------


def test_real_2025_trace_head() -> None:
    path = shared_path("traces", t25.TRACE_DIR, t25.FILE_NAME)
    w = t25.read_trace(path, limit=2000)
    assert len(w) == 2000
    assert all(a.pod.qos is QOSClass.GUARANTEED for a in w)
    gpu = [a for a in w if "nvidia.com/gpu" in a.pod.containers[0].requests]
    assert gpu and all(a.pod.containers[0].requests["rdma/hca"] >= 1 for a in gpu)
    assert [a.time_s for a in w] == sorted(a.time_s for a in w)


def test_real_2025_trace_full() -> None:
    path = shared_path("traces", t25.TRACE_DIR, t25.FILE_NAME)
    w = t25.read_trace(path)
    assert len(w) == 23871
    hn = sum(1 for a in w if "nvidia.com/gpu" in a.pod.containers[0].requests)
    assert hn == 7386
    assert len({a.pod.key for a in w}) == len(w)


@pytest.mark.parametrize("variant", t23.VARIANTS)
def test_real_2023_pod_lists(variant: str) -> None:
    path = shared_path("traces", t23.TRACE_DIR, f"openb_pod_list_{variant}.csv")
    w = t23.read_trace(path, limit=1500)
    assert len(w) == 1500
    assert {a.pod.qos for a in w} <= {QOSClass.GUARANTEED, QOSClass.BURSTABLE}
