"""Alibaba GPU-disaggregated DLRM serving trace (NSDI'25) as a simulator workload.

Source: ``alibaba/clusterdata`` ``cluster-trace-gpu-v2025/disaggregated_DLRM_trace.csv``
(23,871 inference instances; cite Yang et al., "GPU-Disaggregated Serving for Deep Learning
Recommendation Models at Scale", NSDI'25). The trace is read in place and never copied.

Columns used (everything else is checked for presence only)::

    instance_sn,role,app_name,cpu_request,cpu_limit,gpu_request,gpu_limit,rdma_request,
    rdma_limit,memory_request,memory_limit,disk_request,disk_limit,max_instance_per_node,
    creation_time,scheduled_time,deletion_time

How a row becomes a pod (namespace ``alibaba2025``, name ``instance_sn`` made DNS-1123:
``instance_7185`` -> ``instance-7185``, one app container ``main``):

* ``cpu_request`` / ``cpu_limit`` (vCPUs) -> ``cpu`` request / limit in millicores (exact
  decimals: ``0.5`` -> 500m).
* ``memory_request`` / ``memory_limit`` (GiB, may be fractional: ``937.5``) -> ``memory``
  bytes (x 2^30, rounded up to a byte).
* ``gpu_request`` -> ``nvidia.com/gpu`` (whole GPUs; request must equal limit, as for every
  extended resource).
* ``rdma_request`` (percent of one RDMA NIC's bandwidth, 1-100) -> ``rdma/hca`` devices. A
  NIC is modelled as ``rdma_units`` SR-IOV virtual functions (default 4, i.e. 25 % each), so
  a row asks for ``ceil(rdma_request x rdma_units / 100)`` devices: 1 %, 10 %, 25 % -> 1;
  50 % -> 2; 51 %, 75 % -> 3; 100 % -> 4. Cluster templates for this trace give every NIC
  ``rdma_units`` ``rdma/hca`` devices on the NIC's NUMA node. ``0`` -> no NIC.
* QoS: every instance in the trace is latency-sensitive with request == limit and whole
  vCPUs, so every pod is **Guaranteed with integer CPUs**: the static CPU manager gives it
  exclusive CPUs, and Topology Manager aligns CPUs, memory (memory manager ``Static``),
  GPUs and NICs on the NUMA node(s) of its hint. A row with request < limit would become
  Burstable; limit < request is an error.
* ``disk_*`` (ephemeral storage) is not NUMA-relevant and node disk sizes are unknown: not
  mapped. ``max_instance_per_node`` (per-app anti-affinity density) and ``app_name`` are not
  modelled by the scheduler: not mapped. ``role`` (CN/HN) is validated (CN or HN) only:
  CN rows ask for no GPU anyway.
* Times: arrival = ``creation_time``; an instance that existed before the trace started
  (empty/NaN ``creation_time``) arrives at time 0, in file order. Duration =
  ``deletion_time - creation_time``; an instance still alive at the end (NaN
  ``deletion_time``) never departs. ``scheduled_time`` is Alibaba's own scheduling outcome,
  not an input: it is only checked to be a valid time. The file is not sorted by creation
  time; the workload is (stable).

``limit=N`` keeps the first N data rows of the file (streaming stops there), then sorts.
Malformed values raise :class:`~numalign.errors.InputError`
``<file>:<line>: <column>: <problem>``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from fractions import Fraction
from functools import lru_cache
from operator import itemgetter

from numalign.sim.workloads import (
    Arrival,
    CsvRow,
    PodShape,
    Workload,
    WorkloadSpec,
    kube_name,
    option_int,
    read_csv_rows,
    shaped_pod,
    single_container_shape,
)

FILE_NAME = "disaggregated_DLRM_trace.csv"
TRACE_DIR = "alibaba-cluster-trace-gpu-v2025"
NAMESPACE = "alibaba2025"
GPU = "nvidia.com/gpu"
RDMA = "rdma/hca"
#: ``rdma/hca`` devices (SR-IOV VFs) per RDMA NIC: 4 -> a device is 25 % of a NIC
DEFAULT_RDMA_UNITS = 4

COLUMNS = (
    "instance_sn",
    "role",
    "app_name",
    "cpu_request",
    "cpu_limit",
    "gpu_request",
    "gpu_limit",
    "rdma_request",
    "rdma_limit",
    "memory_request",
    "memory_limit",
    "disk_request",
    "disk_limit",
    "max_instance_per_node",
    "creation_time",
    "scheduled_time",
    "deletion_time",
)
ROLES = ("CN", "HN")
GIB = 1 << 30
#: the columns a row's requests and limits are read from (and the checks of the others that
#: are validated only): rows with the same raw values there share one reading
RESOURCE_COLUMNS = (
    "role", "cpu_request", "cpu_limit", "gpu_request", "gpu_limit", "rdma_request", "rdma_limit",
    "memory_request", "memory_limit", "disk_request", "disk_limit", "max_instance_per_node",
)


def default_path(shared_dir: str | os.PathLike[str]) -> str:
    """Where the trace sits in the shared reference directory."""
    return os.path.join(os.fspath(shared_dir), "traces", TRACE_DIR, FILE_NAME)


def rdma_devices(percent: Fraction | int, units: int) -> int:
    """``rdma/hca`` devices for a share of one NIC in percent (0 -> 0, else at least 1)."""
    if percent <= 0:
        return 0
    return max(1, math.ceil(percent * units / 100))


def _pair(row: CsvRow, req_col: str, lim_col: str, scale: int) -> tuple[int, int]:
    req = row.decimal(req_col)
    lim = row.decimal(lim_col)
    if lim < req:
        raise row.error(
            lim_col, f"limit {row.text(lim_col)} is below the request {row.text(req_col)}"
        )
    return math.ceil(req * scale), math.ceil(lim * scale)


Resources = tuple[dict[str, int], dict[str, int]]


@lru_cache(maxsize=8)
def _resource_key(header: tuple[str, ...]) -> Callable[[Sequence[str]], tuple[str, ...]]:
    """The raw values of :data:`RESOURCE_COLUMNS` of a row of a file with this header."""
    index = {c: i for i, c in enumerate(header)}
    return itemgetter(*(index[c] for c in RESOURCE_COLUMNS))


def row_to_arrival(row: CsvRow, rdma_units: int = DEFAULT_RDMA_UNITS,
                   seen: dict[tuple[str, ...], PodShape] | None = None) -> Arrival:
    """One trace row as an :class:`Arrival` (mapping in the module docstring). ``seen``: the
    pod shapes (container and QoS) of the rows read before, by their raw values in
    :data:`RESOURCE_COLUMNS` (a trace repeats a few hundred shapes; a row of a known shape
    was validated as the first one of it)."""
    sn = row.text("instance_sn")
    if not sn:
        raise row.error("instance_sn", "missing value")
    key = _resource_key(row.header)(row.fields)
    shape = None if seen is None else seen.get(key)
    if shape is None:
        shape = single_container_shape(*_resources(row, rdma_units))
        if seen is not None:
            seen[key] = shape

    created = row.time("creation_time")
    scheduled = row.time("scheduled_time")
    deleted = row.time("deletion_time")
    start = 0.0 if created is None else created
    if scheduled is not None and scheduled < start:
        raise row.error("scheduled_time", "is before creation_time")
    duration: float | None = None
    if deleted is not None:
        if deleted < start:
            raise row.error("deletion_time", "is before creation_time")
        duration = deleted - start
    return Arrival(start, shaped_pod(NAMESPACE, kube_name(sn), shape), duration)


def _resources(row: CsvRow, rdma_units: int) -> Resources:
    """A row's requests and limits, its resource columns validated."""
    role = row.text("role")
    if role not in ROLES:
        raise row.error("role", f"expected CN or HN, got {role!r}")
    cpu_req, cpu_lim = _pair(row, "cpu_request", "cpu_limit", 1000)
    mem_req, mem_lim = _pair(row, "memory_request", "memory_limit", GIB)
    gpu = row.whole("gpu_request")
    if row.whole("gpu_limit") != gpu:
        raise row.error("gpu_limit", "must equal gpu_request (GPUs cannot be overcommitted)")
    rdma_pct = row.decimal("rdma_request")
    if rdma_pct > 100:
        raise row.error(
            "rdma_request", f"a share of one NIC must be 0-100 %, got {row.text('rdma_request')}"
        )
    if row.decimal("rdma_limit") != rdma_pct:
        raise row.error("rdma_limit", "must equal rdma_request (NICs cannot be overcommitted)")
    for col in ("disk_request", "disk_limit"):
        if not row.is_missing(col):
            row.decimal(col)
    row.decimal("max_instance_per_node", minimum=-1)

    requests: dict[str, int] = {}
    limits: dict[str, int] = {}
    if cpu_req or cpu_lim:
        requests["cpu"], limits["cpu"] = cpu_req, cpu_lim
    if mem_req or mem_lim:
        requests["memory"], limits["memory"] = mem_req, mem_lim
    if gpu:
        requests[GPU] = limits[GPU] = gpu
    nics = rdma_devices(rdma_pct, rdma_units)
    if nics:
        requests[RDMA] = limits[RDMA] = nics
    return requests, limits


def from_spec(spec: WorkloadSpec) -> Workload:
    """``alibaba2025[:PATH][?limit=N&rdma_units=U]`` (PATH defaults to the shared trace)."""
    spec.check_options(("limit", "rdma_units"))
    path = spec.trace_path(default_path)
    units = option_int(spec.options, "rdma_units", spec.part, minimum=1)
    return read_trace(
        path,
        limit=option_int(spec.options, "limit", spec.part, minimum=1),
        rdma_units=DEFAULT_RDMA_UNITS if units is None else units,
    )


def read_trace(
    path: str | os.PathLike[str],
    *,
    limit: int | None = None,
    rdma_units: int = DEFAULT_RDMA_UNITS,
) -> Workload:
    """Read the trace (streaming, stdlib csv) into a time-ordered :class:`Workload`."""
    if rdma_units < 1:
        raise ValueError("rdma_units must be >= 1")
    seen: dict[tuple[str, ...], PodShape] = {}
    arrivals = [row_to_arrival(r, rdma_units, seen) for r in read_csv_rows(path, COLUMNS, limit=limit)]
    return Workload(
        name="alibaba2025",
        arrivals=tuple(arrivals),
        description=(
            "Alibaba GPU-disaggregated DLRM serving trace (NSDI'25): Guaranteed pods with "
            f"whole vCPUs, memory, nvidia.com/gpu and rdma/hca (1 device = 1/{rdma_units} NIC)"
        ),
        params={"path": os.fspath(path), "limit": limit, "rdma_units": rdma_units},
    )
