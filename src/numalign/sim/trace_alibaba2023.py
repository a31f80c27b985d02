"""Alibaba ``openb`` GPU pod lists (ATC'23, "Beware of Fragmentation") as simulator workloads.

Source: ``alibaba/clusterdata`` ``cluster-trace-gpu-v2023/csv/openb_pod_list_*.csv`` (cite
Weng et al., ATC'23). Read in place, never copied.

Columns: ``name,cpu_milli,memory_mib,num_gpu,gpu_milli`` are required;
``gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time`` are used when present
(the ``default`` and ``gpuspec*`` lists have them; the resampled lists such as
``multigpu50`` have only the five required columns).

How a row becomes a pod (namespace ``alibaba2023``, name from ``name``, one app container
``main``):

* ``cpu_milli`` -> ``cpu`` millicores (often fractional CPUs: ``3152`` = 3.152 CPUs).
* ``memory_mib`` -> ``memory`` bytes (x 2^20).
* GPUs: ``num_gpu`` whole GPUs -> ``nvidia.com/gpu: num_gpu``. A GPU-sharing pod
  (``num_gpu == 1`` and ``gpu_milli < 1000``: a fraction of one GPU) cannot be expressed with
  the device plugin's whole devices; ``gpu_share`` decides: ``whole`` (default) gives it one
  whole GPU (what a cluster without GPU sharing does; this overstates GPU demand), ``drop``
  keeps its CPU and memory and drops the GPU part. ``gpu_milli`` must be 0-1000.
* QoS (Alibaba's classes -> Kubernetes):

  - ``LS`` (latency-sensitive) and ``Guaranteed`` -> **Guaranteed**: limits = requests for
    cpu, memory and GPUs. With a whole number of CPUs (``cpu_milli`` a multiple of 1000)
    the static CPU manager gives exclusive, NUMA-aligned CPUs; fractional CPUs stay in the
    shared pool (memory and GPUs are still aligned).
  - ``Burstable`` and ``BE`` (best effort) -> **Burstable**: cpu and memory requests only,
    no limits (GPUs keep limit = request). Kubernetes BestEffort pods request nothing and
    would vanish from the scheduler's accounting; Alibaba/Koordinator BE pods do reserve
    (batch) capacity, which the requests keep.
  - a missing ``qos`` column is treated as ``LS``; any other value is an error.
* ``gpu_spec`` (GPU model constraints) and ``pod_phase`` (the outcome in Alibaba's cluster)
  are not modelled: every row is replayed.
* Times: arrival = ``creation_time``, duration = ``deletion_time - creation_time`` (a missing
  deletion time: never departs). ``scheduled_time`` is Alibaba's outcome, only validated.
  Files without time columns: pod *i* (file order) arrives at ``i x interval`` seconds
  (default 1 s) and never departs.

``limit=N`` keeps the first N data rows (streaming stops there). Malformed values raise
:class:`~numalign.errors.InputError` ``<file>:<line>: <column>: <problem>``.
"""

from __future__ import annotations

import os

from numalign.errors import InputError
from numalign.sim.workloads import (
    Arrival,
    CsvRow,
    Workload,
    WorkloadSpec,
    kube_name,
    option_float,
    option_int,
    read_csv_rows,
    single_container_pod,
)

TRACE_DIR = "alibaba-cluster-trace-gpu-v2023"
NAMESPACE = "alibaba2023"
GPU = "nvidia.com/gpu"
REQUIRED = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
VARIANTS = ("default", "gpuspec33", "multigpu50")
GPU_SHARE_MODES = ("whole", "drop")
DEFAULT_GPU_SHARE = "whole"
DEFAULT_INTERVAL_S = 1.0
MIB = 1 << 20

_GUARANTEED = frozenset({"LS", "Guaranteed"})
_BURSTABLE = frozenset({"Burstable", "BE"})


def default_path(shared_dir: str | os.PathLike[str]) -> str:
    return variant_path(shared_dir, "default")


def variant_path(shared_dir: str | os.PathLike[str], variant: str) -> str:
    """``openb_pod_list_<variant>.csv`` in the shared traces directory."""
    if not variant.replace("_", "").isalnum():
        raise InputError(f"invalid variant name {variant!r}", "workload alibaba2023")
    return os.path.join(os.fspath(shared_dir), "traces", TRACE_DIR, f"openb_pod_list_{variant}.csv")


def row_to_arrival(
    row: CsvRow,
    index: int,
    *,
    gpu_share: str = DEFAULT_GPU_SHARE,
    interval_s: float = DEFAULT_INTERVAL_S,
) -> Arrival:
    """One pod-list row as an :class:`Arrival` (mapping in the module docstring)."""
    raw_name = row.text("name")
    if not raw_name:
        raise row.error("name", "missing value")
    cpu = row.whole("cpu_milli")
    memory = _bytes(row)
    num_gpu = row.whole("num_gpu")
    gpu_milli = row.whole("gpu_milli")
    if gpu_milli > 1000:
        raise row.error("gpu_milli", f"must be 0-1000 (thousandths of one GPU), got {gpu_milli}")
    gpus = num_gpu
    if num_gpu == 1 and 0 < gpu_milli < 1000 and gpu_share == "drop":
        gpus = 0
    qos_raw = row.text("qos") if row.has("qos") else "LS"
    if qos_raw in _GUARANTEED:
        guaranteed = True
    elif qos_raw in _BURSTABLE:
        guaranteed = False
    else:
        raise row.error("qos", f"expected LS, BE, Burstable or Guaranteed, got {qos_raw!r}")

    if row.has("creation_time"):
        created = row.time("creation_time")
        if created is None:
            raise row.error("creation_time", "missing value")
        start = created
        duration: float | None = None
        if row.has("deletion_time"):
            deleted = row.time("deletion_time")
            if deleted is not None:
                if deleted < start:
                    raise row.error("deletion_time", "is before creation_time")
                duration = deleted - start
        if row.has("scheduled_time"):
            scheduled = row.time("scheduled_time")
            if scheduled is not None and scheduled < start:
                raise row.error("scheduled_time", "is before creation_time")
    else:
        start, duration = index * interval_s, None

    requests: dict[str, int] = {}
    limits: dict[str, int] = {}
    if cpu:
        requests["cpu"] = cpu
    if memory:
        requests["memory"] = memory
    if guaranteed:
        limits.update(requests)
    if gpus:
        requests[GPU] = limits[GPU] = gpus
    pod = single_container_pod(NAMESPACE, kube_name(raw_name), requests, limits)
    return Arrival(start, pod, duration)


def _bytes(row: CsvRow) -> int:
    value = row.decimal("memory_mib") * MIB
    return int(value) + (1 if value.denominator != 1 else 0)


def from_spec(spec: WorkloadSpec) -> Workload:
    """``alibaba2023[:PATH|:VARIANT][?limit=N&gpu_share=whole|drop&interval=S]``: a bare
    variant name picks ``openb_pod_list_<variant>.csv`` in the shared traces directory."""
    part = spec.part
    spec.check_options(("limit", "gpu_share", "interval"))
    if spec.path and os.sep not in spec.path and not spec.path.endswith(".csv"):
        if spec.shared_dir is None:
            raise InputError(
                f"variant {spec.path!r} needs the shared directory holding traces/ "
                "(--shared DIR or NUMALIGN_SHARED), or give a .csv path",
                part,
            )
        path = variant_path(spec.shared_dir, spec.path)
    else:
        path = spec.trace_path(default_path)
    share = spec.options.get("gpu_share", DEFAULT_GPU_SHARE)
    if share not in GPU_SHARE_MODES:
        raise InputError(
            f"expected one of {', '.join(GPU_SHARE_MODES)}, got {share!r}", f"{part}: gpu_share"
        )
    interval = option_float(spec.options, "interval", part)
    return read_trace(
        path,
        limit=option_int(spec.options, "limit", part, minimum=1),
        gpu_share=share,
        interval_s=DEFAULT_INTERVAL_S if interval is None else interval,
    )


def read_trace(
    path: str | os.PathLike[str],
    *,
    limit: int | None = None,
    gpu_share: str = DEFAULT_GPU_SHARE,
    interval_s: float = DEFAULT_INTERVAL_S,
) -> Workload:
    """Read an ``openb_pod_list_*.csv`` file (streaming, stdlib csv) into a workload."""
    if gpu_share not in GPU_SHARE_MODES:
        raise InputError(
            f"expected one of {', '.join(GPU_SHARE_MODES)}, got {gpu_share!r}", "gpu_share"
        )
    arrivals = [
        row_to_arrival(r, i, gpu_share=gpu_share, interval_s=interval_s)
        for i, r in enumerate(read_csv_rows(path, REQUIRED, limit=limit))
    ]
    return Workload(
        name="alibaba2023",
        arrivals=tuple(arrivals),
        description=(
            "Alibaba openb GPU pod list (ATC'23): LS/Guaranteed -> Guaranteed, BE/Burstable -> "
            f"Burstable, fractional GPUs -> {'one whole GPU' if gpu_share == 'whole' else 'dropped'}"
        ),
        params={
            "path": os.fspath(path),
            "limit": limit,
            "gpu_share": gpu_share,
            "interval_s": interval_s,
        },
    )
