"""Workload sources: the registry behind the CLI's ``--workload`` spec string.

A **workload spec** names a source and its arguments::

    alibaba2025[:PATH][?limit=N&rdma_units=4]
    alibaba2023[:PATH|:VARIANT][?limit=N&gpu_share=whole|drop&interval=S]
    synthetic[:count=N,seed=S,load=X,duration=S,rate=R,guaranteed=W,burstable=W,...]
    dir:PATH[?interval=S]

A *path* source takes ``SOURCE[:PATH][?OPTIONS]``; an *options* source (``synthetic``) takes
``SOURCE[:OPTIONS]`` or ``SOURCE[?OPTIONS]``. Options are ``key=value`` pairs separated by
``&`` or ``,``. ``PATH`` defaults to the trace under ``<shared>/traces/``; for ``alibaba2023``
a bare variant name (``default``, ``multigpu50``, ``gpuspec33``) picks
``openb_pod_list_<v>.csv``. Errors are one line and name the part of the spec that is wrong.

Each source is one module with a ``from_spec(spec: WorkloadSpec) -> Workload`` loader that
checks its own options; it imports only :mod:`numalign.sim.workloads` (and
:mod:`numalign.sim.cluster` where it needs a cluster):

* :mod:`numalign.sim.trace_alibaba2025` - Alibaba GPU-disaggregated DLRM trace (NSDI'25);
* :mod:`numalign.sim.trace_alibaba2023` - Alibaba ``openb`` GPU pod lists (ATC'23, FGD);
* :mod:`numalign.sim.synthetic` - the seeded generator;
* :mod:`numalign.sim.manifests` - a directory of pod manifests.

Every *path* source also takes ``sample=F&seed=S``: after loading, each pod is kept with
probability ``F`` (0 < F <= 1) by a ``random.Random(S)`` (:func:`numalign.sim.workloads.sample_workload`;
``seed`` defaults to 1 and needs ``sample``): a trace has no randomness of its own, so this is
what makes seeds of a trace differ. ``limit=N`` applies first (the first N rows), then the sample.

To add a trace format: write ``trace_<name>.py`` with its reader and ``from_spec``, and add
one line to :data:`SOURCES`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from numalign.errors import InputError
from numalign.machine.model import Machine
from numalign.scheduler.gc_pause import collector_paused
from numalign.sim import manifests, synthetic, trace_alibaba2023, trace_alibaba2025
from numalign.sim.workloads import (
    Workload,
    WorkloadSpec,
    option_float,
    option_int,
    sample_workload,
    split_options,
)


@dataclass(frozen=True)
class Source:
    """A registered workload source."""

    load: Callable[[WorkloadSpec], Workload]
    #: ``SOURCE[:PATH][?OPTIONS]`` (True) or ``SOURCE[:OPTIONS]`` (False)
    takes_path: bool = True
    #: the option that caps the number of pods (``limit``: the first N rows; ``count``), or
    #: None when the source has none
    pod_limit: str | None = "limit"
    #: checks a spec's options without building the workload; None: a load capped at one pod
    #: by ``pod_limit`` (or the whole load when there is no ``pod_limit``)
    check: Callable[[WorkloadSpec], None] | None = None


#: source name -> loader, in the order the CLI lists them
SOURCES: dict[str, Source] = {
    "alibaba2025": Source(trace_alibaba2025.from_spec),
    "alibaba2023": Source(trace_alibaba2023.from_spec),
    "synthetic": Source(
        synthetic.from_spec, takes_path=False, pod_limit="count", check=synthetic.check_spec
    ),
    "dir": Source(manifests.from_spec, pod_limit=None),
}

#: options every path source takes on top of its own (applied after loading)
SAMPLING_OPTIONS = ("sample", "seed")


@dataclass(frozen=True)
class Sampling:
    """``sample=F&seed=S`` of a path source: each pod kept with probability ``fraction``."""

    fraction: float
    seed: int

    def apply(self, workload: Workload) -> Workload:
        return sample_workload(workload, self.fraction, self.seed)


def split_spec(spec: str) -> WorkloadSpec:
    """The source name, path and options of a spec string (no defaults, nothing loaded)."""
    if not isinstance(spec, str) or not spec.strip():
        raise InputError(f"empty workload spec (expected one of: {', '.join(SOURCES)})", "workload")
    spec = spec.strip()
    name = spec.partition(":")[0].split("?", 1)[0].strip()
    source = SOURCES.get(name)
    if source is None:
        raise InputError(
            f"unknown source {name!r} (expected one of: {', '.join(SOURCES)})", f"workload {spec!r}"
        )
    part = f"workload {name}"
    after = spec[len(name) :]
    path = query = ""
    if source.takes_path and after.startswith(":"):
        path, _, query = after[1:].partition("?")
    elif after.startswith(("?", ":")):
        query = after[1:]
    elif after:
        raise InputError(f"expected ':' or '?' after {name}", part)
    return WorkloadSpec(name, path.strip(), split_options(query, part))


def split_sampling(parsed: WorkloadSpec) -> tuple[WorkloadSpec, Sampling | None]:
    """The spec without its sampling options, and the sampling (None when not asked for).
    Options sources keep every option (``seed`` is theirs)."""
    if not SOURCES[parsed.source].takes_path:
        return parsed, None
    opts = dict(parsed.options)
    raw_fraction = opts.pop("sample", None)
    raw_seed = opts.pop("seed", None)
    part = parsed.part
    if raw_fraction is None:
        if raw_seed is not None:
            raise InputError(
                "only with sample=F (a trace has no randomness of its own)", f"{part}: seed"
            )
        return parsed, None
    fraction = option_float({"sample": raw_fraction}, "sample", part, strict=True)
    if fraction is None or fraction > 1:
        raise InputError(
            f"must be a fraction in (0, 1], got {raw_fraction!r}", f"{part}: sample"
        )
    seed = option_int({"seed": raw_seed}, "seed", part) if raw_seed is not None else None
    return replace(parsed, options=opts), Sampling(fraction, 1 if seed is None else seed)


def format_spec(parsed: WorkloadSpec) -> str:
    """A spec string for ``parsed``, options sorted by key (``split_spec`` reads it back to
    the same source, path and options): one spelling per workload."""
    items = [f"{k}={v}" for k, v in sorted(parsed.options.items())]
    if SOURCES[parsed.source].takes_path:
        out = parsed.source + (f":{parsed.path}" if parsed.path else "")
        return out + ("?" + "&".join(items) if items else "")
    return parsed.source + (":" + ",".join(items) if items else "")


def seeded_spec(spec: str, seed: int) -> str:
    """``spec`` with ``seed`` as ``numalign simulate --seed`` applies it: the synthetic
    generator's seed, or a sampled path source's (``sample=F``), unless the spec sets its
    own; other specs are returned unchanged (they have no randomness)."""
    parsed = split_spec(spec)
    if "seed" in parsed.options:
        return spec
    if not SOURCES[parsed.source].takes_path:
        return spec + ("," if ":" in spec or "?" in spec else ":") + f"seed={seed}"
    if "sample" in parsed.options:
        return spec + f"&seed={seed}"
    return spec


def has_randomness(spec: str) -> bool:
    """Whether a seed changes the workload ``spec`` names (an options source, or a path
    source with ``sample=F``)."""
    parsed = split_spec(spec)
    return not SOURCES[parsed.source].takes_path or "sample" in parsed.options


def load_spec(
    parsed: WorkloadSpec,
    shared_dir: str | os.PathLike[str] | None = None,
    *,
    cluster: Sequence[tuple[str, Machine]] | None = None,
    base_dir: str | os.PathLike[str] | None = None,
) -> Workload:
    """Build the workload of an already split spec (no sampling: see :func:`split_sampling`);
    relative paths are taken from ``base_dir`` (default: the current directory). The
    pods are built with the cyclic garbage collector paused (they hold no cycles)."""
    with collector_paused():
        return SOURCES[parsed.source].load(
            replace(parsed, shared_dir=shared_dir, cluster=cluster, base_dir=base_dir)
        )


def parse_workload_spec(
    spec: str,
    shared_dir: str | os.PathLike[str] | None = None,
    *,
    cluster: Sequence[tuple[str, Machine]] | None = None,
) -> Workload:
    """Build the workload a CLI spec string names (grammar in the module docstring).

    ``shared_dir`` is where ``traces/`` lives (the default trace paths); ``cluster`` is the
    cluster the synthetic generator scales its load to (default: the built-in default
    cluster). Raises :class:`InputError` with a one-line message naming the spec part.
    """
    base, sampling = split_sampling(split_spec(spec))
    workload = load_spec(base, shared_dir, cluster=cluster)
    return sampling.apply(workload) if sampling is not None else workload


def check_workload_spec(
    spec: str,
    shared_dir: str | os.PathLike[str] | None = None,
    *,
    cluster: Sequence[tuple[str, Machine]] | None = None,
    base_dir: str | os.PathLike[str] | None = None,
) -> None:
    """Raise the :class:`InputError` :func:`parse_workload_spec` would raise for ``spec``,
    without building the whole workload: the source's ``check``, else a load capped at one
    pod (the trace's first row: its path, header and options), else the whole load. A
    malformed row further down a trace is found only by the full load."""
    base, _ = split_sampling(split_spec(spec))
    source = SOURCES[base.source]
    full = replace(base, shared_dir=shared_dir, cluster=cluster, base_dir=base_dir)
    if source.check is not None:
        source.check(full)
        return
    opts = dict(full.options)
    if source.pod_limit is not None:
        option_int(opts, source.pod_limit, full.part, minimum=1)  # its own error first
        opts[source.pod_limit] = "1"
    source.load(replace(full, options=opts))


def with_pod_limit(spec: str, limit: int) -> str:
    """``spec`` with at most ``limit`` pods (its source's ``pod_limit`` option, the smaller of
    the spec's own and ``limit``), as :func:`format_spec` spells it."""
    parsed = split_spec(spec)
    key = SOURCES[parsed.source].pod_limit
    if key is None:
        raise InputError("takes no pod limit", parsed.part)
    opts = dict(parsed.options)
    own = option_int(opts, key, parsed.part, minimum=1)
    opts[key] = str(limit if own is None else min(own, limit))
    return format_spec(replace(parsed, options=opts))


__all__ = [
    "SAMPLING_OPTIONS",
    "SOURCES",
    "Sampling",
    "Source",
    "WorkloadSpec",
    "check_workload_spec",
    "format_spec",
    "has_randomness",
    "load_spec",
    "parse_workload_spec",
    "seeded_spec",
    "split_sampling",
    "split_spec",
    "with_pod_limit",
]
