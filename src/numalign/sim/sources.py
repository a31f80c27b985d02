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

To add a trace format: write ``trace_<name>.py`` with its reader and ``from_spec``, and add
one line to :data:`SOURCES`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from numalign.errors import InputError
from numalign.machine.model import Machine
from numalign.sim import manifests, synthetic, trace_alibaba2023, trace_alibaba2025
from numalign.sim.workloads import Workload, WorkloadSpec, split_options


@dataclass(frozen=True)
class Source:
    """A registered workload source."""

    load: Callable[[WorkloadSpec], Workload]
    #: ``SOURCE[:PATH][?OPTIONS]`` (True) or ``SOURCE[:OPTIONS]`` (False)
    takes_path: bool = True


#: source name -> loader, in the order the CLI lists them
SOURCES: dict[str, Source] = {
    "alibaba2025": Source(trace_alibaba2025.from_spec),
    "alibaba2023": Source(trace_alibaba2023.from_spec),
    "synthetic": Source(synthetic.from_spec, takes_path=False),
    "dir": Source(manifests.from_spec),
}


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
    parsed = split_spec(spec)
    return SOURCES[parsed.source].load(replace(parsed, shared_dir=shared_dir, cluster=cluster))


__all__ = ["SOURCES", "Source", "WorkloadSpec", "parse_workload_spec", "split_spec"]
