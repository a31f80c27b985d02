"""The seeded synthetic workload generator.

Deterministic: one :class:`random.Random` seeded with ``seed`` drives every choice, so the
same parameters and cluster give the same workload (pods, names, times) on every run.

Pod kinds (namespace ``synthetic``, names ``<kind>-<i>``), drawn with the ``weights``:

* ``guaranteed`` - one container, Guaranteed, a whole number of CPUs (2-32, exclusive and
  NUMA-aligned under the static CPU manager), memory 2-6 GiB per CPU and, with probability
  ``hugepages`` when the cluster has 1 GiB pages, 1-8 GiB of ``hugepages-1Gi``.
* ``burstable`` - one or two containers with cpu/memory requests (250m-4 CPUs, 0.5-8 GiB)
  and either no limits or limits at twice the requests: Burstable, shared CPU pool.
* ``besteffort`` - one container without requests or limits.
* ``gpu`` - Guaranteed, 1, 2 or 4 ``nvidia.com/gpu``, 4-8 CPUs and 32-64 GiB per GPU, and
  one ``rdma/hca`` device per GPU when the cluster has RDMA devices (GPU + NIC pods).
  Left out when the cluster has no GPUs.
* ``sidecar`` - Guaranteed with a regular init container (``setup``, 1-4 CPUs), a sidecar
  (``proxy``, restartable init container, 1 CPU, 1 GiB) and an app container (2-24 CPUs):
  the KEP-753 effective-request rules and pod vs container scope differ on these.

Scaling to the cluster (so that the default demo has contention and nodes fill up): for
each of cpu, memory and GPUs, ``fill`` = cluster capacity / mean request per pod is the
number of concurrently running pods that would exhaust it; the bottleneck is the smallest.
Arrivals are a Poisson process whose rate makes the offered load on the bottleneck
``load`` (default 1.3: 130 % of capacity, by Little's law ``rate x mean duration = load x
fill``), unless ``rate`` (pods/s) is given. Durations are exponential with mean ``duration``
seconds (at least 1 s). ``count`` defaults to 3 x fill (clamped to 200-4000): long enough to
reach the steady state.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from numalign.errors import InputError
from numalign.machine.model import Machine
from numalign.pods import (
    Container,
    ContainerKind,
    Pod,
    default_uid,
    effective_pod_requests,
    pod_qos,
)
from numalign.sim.cluster import builtin_cluster, cluster_capacity
from numalign.sim.workloads import Arrival, Workload, WorkloadSpec, option_float, option_int

NAMESPACE = "synthetic"
GPU = "nvidia.com/gpu"
RDMA = "rdma/hca"
HUGEPAGES_1G = "hugepages-1Gi"
GIB = 1 << 30
MIB = 1 << 20

KINDS = ("guaranteed", "burstable", "besteffort", "gpu", "sidecar")
DEFAULT_WEIGHTS: Mapping[str, float] = {
    "guaranteed": 0.4,
    "burstable": 0.15,
    "besteffort": 0.05,
    "gpu": 0.2,
    "sidecar": 0.2,
}
#: ``key=value`` options of the ``synthetic:`` workload spec
SYNTHETIC_OPTIONS = ("count", "seed", "load", "duration", "rate", "hugepages", *KINDS)
_PILOT = 400


@dataclass(frozen=True)
class SyntheticParams:
    count: int | None = None  # None: 3 x fill, clamped to 200-4000
    seed: int = 1
    load: float = 1.3  # offered load on the bottleneck resource (1.0 = exactly full)
    mean_duration_s: float = 600.0
    arrival_rate: float | None = None  # pods/s; None: from load
    weights: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_WEIGHTS))
    hugepages: float = 0.3  # probability that a guaranteed pod asks for 1 GiB pages

    def __post_init__(self) -> None:
        if self.count is not None and self.count < 0:
            raise InputError(f"must be >= 0, got {self.count}", "count")
        if not (self.load > 0 and math.isfinite(self.load)):
            raise InputError(f"must be > 0, got {self.load}", "load")
        if not (self.mean_duration_s > 0 and math.isfinite(self.mean_duration_s)):
            raise InputError(f"must be > 0, got {self.mean_duration_s}", "duration")
        if self.arrival_rate is not None and not (
            self.arrival_rate > 0 and math.isfinite(self.arrival_rate)
        ):
            raise InputError(f"must be > 0, got {self.arrival_rate}", "rate")
        if not 0 <= self.hugepages <= 1:
            raise InputError(f"must be a probability 0-1, got {self.hugepages}", "hugepages")
        for k, w in self.weights.items():
            if k not in KINDS:
                raise InputError(f"unknown pod kind (known: {', '.join(KINDS)})", k)
            if not (w >= 0 and math.isfinite(w)):
                raise InputError(f"weight must be >= 0, got {w}", k)
        if not any(w > 0 for w in self.weights.values()):
            raise InputError("at least one pod kind needs a positive weight", "weights")


def from_spec(spec: WorkloadSpec) -> Workload:
    """``synthetic[:count=N,seed=S,...]``: options as in :data:`SYNTHETIC_OPTIONS`, scaled to
    the spec's cluster (default: the built-in ``default`` cluster)."""
    spec.check_options(SYNTHETIC_OPTIONS)
    params = params_from_options(spec.options, spec.part)
    return generate(params, builtin_cluster("default") if spec.cluster is None else spec.cluster)


def check_spec(spec: WorkloadSpec) -> None:
    """The errors :func:`from_spec` would raise for the spec's options, without generating."""
    spec.check_options(SYNTHETIC_OPTIONS)
    params_from_options(spec.options, spec.part)


def params_from_options(opts: Mapping[str, str], part: str = "synthetic") -> SyntheticParams:
    """Parameters from ``key=value`` options of a workload spec (errors name the key)."""
    weights = dict(DEFAULT_WEIGHTS)
    for kind in KINDS:
        w = option_float(opts, kind, part)
        if w is not None:
            weights[kind] = w
    count = option_int(opts, "count", part, minimum=1)
    seed = option_int(opts, "seed", part)
    load = option_float(opts, "load", part, strict=True)
    duration = option_float(opts, "duration", part, strict=True)
    rate = option_float(opts, "rate", part, strict=True)
    hp = option_float(opts, "hugepages", part)
    if hp is not None and hp > 1:
        raise InputError(
            f"must be a probability 0-1, got {opts['hugepages']!r}", f"{part}: hugepages"
        )
    try:
        return SyntheticParams(
            count=count,
            seed=1 if seed is None else seed,
            load=1.3 if load is None else load,
            mean_duration_s=600.0 if duration is None else duration,
            arrival_rate=rate,
            weights=weights,
            hugepages=0.3 if hp is None else hp,
        )
    except InputError as e:
        raise InputError(e.problem, f"{part}: {e.field}") from None


@dataclass(frozen=True)
class _Features:
    gpus: bool
    rdma: bool
    hugepages: bool


def _features(capacity: Mapping[str, int]) -> _Features:
    return _Features(
        gpus=capacity.get(GPU, 0) > 0,
        rdma=capacity.get(RDMA, 0) > 0,
        hugepages=capacity.get(HUGEPAGES_1G, 0) > 0,
    )


def _res(cpu_millis: int = 0, memory: int = 0, **extra: int) -> dict[str, int]:
    out: dict[str, int] = {}
    if cpu_millis:
        out["cpu"] = cpu_millis
    if memory:
        out["memory"] = memory
    for k, v in extra.items():
        if v:
            out[k] = v
    return out


def _guaranteed(name: str, kind: ContainerKind, res: dict[str, int]) -> Container:
    return Container(name, kind, requests=dict(res), limits=dict(res))


def _make_pod(
    rng: random.Random, kind: str, index: int, feat: _Features, p: SyntheticParams
) -> Pod:
    containers: list[Container]
    if kind == "guaranteed":
        cpus = rng.choice((2, 4, 8, 8, 12, 16, 16, 24, 32))
        res = _res(cpus * 1000, cpus * rng.choice((2, 4, 6)) * GIB)
        if feat.hugepages and rng.random() < p.hugepages:
            res[HUGEPAGES_1G] = rng.choice((1, 2, 4, 8)) * GIB
        containers = [_guaranteed("app", ContainerKind.APP, res)]
    elif kind == "burstable":
        containers = []
        for c in range(rng.choice((1, 1, 2))):
            req = _res(
                rng.choice((250, 500, 1000, 2000, 4000)),
                rng.choice((512 * MIB, GIB, 2 * GIB, 4 * GIB, 8 * GIB)),
            )
            lim = {k: 2 * v for k, v in req.items()} if rng.random() < 0.5 else {}
            containers.append(Container(f"app{c}", ContainerKind.APP, requests=req, limits=lim))
    elif kind == "besteffort":
        containers = [Container("app", ContainerKind.APP)]
    elif kind == "gpu":
        gpus = rng.choices((1, 2, 4), weights=(0.4, 0.35, 0.25))[0]
        res = _res(
            gpus * rng.choice((4, 6, 8)) * 1000,
            gpus * rng.choice((32, 64)) * GIB,
            **{GPU: gpus, RDMA: gpus if feat.rdma else 0},
        )
        containers = [_guaranteed("trainer", ContainerKind.APP, res)]
    else:  # sidecar
        app_cpus = rng.choice((2, 4, 8, 16, 24))
        containers = [
            _guaranteed("setup", ContainerKind.INIT, _res(rng.choice((1, 2, 4)) * 1000, 2 * GIB)),
            _guaranteed("proxy", ContainerKind.SIDECAR, _res(1000, GIB)),
            _guaranteed("app", ContainerKind.APP, _res(app_cpus * 1000, app_cpus * 4 * GIB)),
        ]
    name = f"{kind}-{index:05d}"
    return Pod(
        namespace=NAMESPACE,
        name=name,
        uid=default_uid(NAMESPACE, name),
        qos=pod_qos(containers),
        containers=tuple(containers),
    )


def _draw_pods(rng: random.Random, n: int, feat: _Features, p: SyntheticParams) -> list[Pod]:
    kinds = [k for k in KINDS if p.weights.get(k, 0) > 0 and (k != "gpu" or feat.gpus)]
    if not kinds:
        raise InputError(
            "no pod kind left to generate (only gpu, and the cluster has no GPUs)", "weights"
        )
    weights = [p.weights[k] for k in kinds]
    return [_make_pod(rng, rng.choices(kinds, weights=weights)[0], i, feat, p) for i in range(n)]


def _fill(pods: Sequence[Pod], capacity: Mapping[str, int]) -> tuple[float, str]:
    """Concurrent pods that exhaust the bottleneck resource, and its name."""
    best = (math.inf, "cpu")
    if not pods:
        return best
    for r in ("cpu", "memory", GPU):
        cap = capacity.get(r, 0)
        if cap <= 0:
            continue
        mean = sum(effective_pod_requests(pod).get(r, 0) for pod in pods) / len(pods)
        if mean > 0:
            best = min(best, (cap / mean, r))
    return best


def generate(params: SyntheticParams, cluster: Sequence[tuple[str, Machine]]) -> Workload:
    """A synthetic workload scaled to ``cluster`` (see the module docstring)."""
    capacity = cluster_capacity(cluster)
    feat = _features(capacity)
    count = params.count
    if count is None:
        pilot = _draw_pods(random.Random(f"pilot:{params.seed}"), _PILOT, feat, params)
        fill, _ = _fill(pilot, capacity)
        count = 200 if math.isinf(fill) else min(4000, max(200, round(3 * fill)))
    rng = random.Random(params.seed)
    pods = _draw_pods(rng, count, feat, params)
    fill, bottleneck = _fill(pods, capacity)
    if params.arrival_rate is not None:
        rate = params.arrival_rate
    elif math.isinf(fill):
        rate = 1.0
    else:
        rate = params.load * fill / params.mean_duration_s
    t = 0.0
    arrivals: list[Arrival] = []
    for pod in pods:
        t += rng.expovariate(rate)
        duration = max(1.0, rng.expovariate(1.0 / params.mean_duration_s))
        arrivals.append(Arrival(round(t, 3), pod, round(duration, 3)))
    return Workload(
        name="synthetic",
        arrivals=tuple(arrivals),
        description=(
            f"synthetic (seed {params.seed}): {count} pods, Poisson arrivals at {rate:.3g} pods/s, "
            f"mean duration {params.mean_duration_s:g} s, offered load on {bottleneck} "
            f"{params.load:g}x capacity"
        ),
        params={
            "seed": params.seed,
            "count": count,
            "load": params.load,
            "mean_duration_s": params.mean_duration_s,
            "arrival_rate": rate,
            "bottleneck": bottleneck,
            "weights": dict(params.weights),
            "hugepages": params.hugepages,
        },
    )
