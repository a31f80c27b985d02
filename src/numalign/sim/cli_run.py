"""``numalign simulate``: resolve cluster and workload, replay, print the table, write the report.

:func:`simulation_summary` is the run itself, from a loaded cluster and workload to the
``summary.json`` document; ``numalign sweep`` calls it for every cell, so a cell gives the
numbers ``numalign simulate`` gives for the same parameters.

The shared reference data (``traces/``) is found without assuming a source checkout:
``--shared DIR``, else ``$NUMALIGN_SHARED``, else ``./shared`` or ``../shared`` from the current
directory (the first that holds ``traces/``). Only trace workloads without an explicit path
need it; when it is needed and not found, the error names what to pass.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from numalign.errors import InputError
from numalign.machine.model import Machine
from numalign.sim.cluster import resolve_cluster
from numalign.sim.report import (
    NO_PLOTS,
    check_writable_dir,
    cluster_overview,
    format_summary_legend,
    format_summary_table,
    plotting_available,
    write_report,
)
from numalign.sim.runner import Progress, SimResult, check_profiles, simulate
from numalign.sim.sources import parse_workload_spec, seeded_spec
from numalign.sim.workloads import Workload

SHARED_ENV = "NUMALIGN_SHARED"


def find_shared(
    explicit: str | None = None,
    *,
    environ: Mapping[str, str] = os.environ,
    cwd: Path | None = None,
) -> Path | None:
    """The shared data directory: ``explicit`` (``--shared``), else ``$NUMALIGN_SHARED``, else
    ``./shared`` or ``../shared`` (relative to ``cwd``) when it holds ``traces/``; None if
    none applies. A directory given explicitly or in the environment must exist."""
    for given, where in ((explicit, "--shared"), (environ.get(SHARED_ENV), SHARED_ENV)):
        if given:
            path = Path(given)
            if not path.is_dir():
                raise InputError(f"no such directory: {given}", where)
            return path
    here = cwd if cwd is not None else Path.cwd()
    for candidate in (here / "shared", here.parent / "shared"):
        if (candidate / "traces").is_dir():
            return candidate
    return None


class ReplayProgress:
    """The replay's progress on ``stream`` (stderr): on a terminal, a bar redrawn in place;
    anywhere else (a log file, a pipe) one plain line per profile when it is done, so a log
    never gets ``\\r`` lines; nothing when ``quiet``."""

    def __init__(self, stream: TextIO, quiet: bool) -> None:
        self.stream = stream
        self.style = "off" if quiet else ("bar" if stream.isatty() else "lines")
        self.start = time.perf_counter()

    def __call__(self, profile: str, done: int, total: int) -> None:
        if self.style == "off":
            return
        elapsed = time.perf_counter() - self.start
        if self.style == "lines":
            if done >= total:
                self.stream.write(f"  {profile}: {total} pods replayed in {elapsed:.1f} s\n")
                self.stream.flush()
                self.start = time.perf_counter()
            return
        width = 30
        filled = int(width * done / max(1, total))
        rate = done / max(1e-9, elapsed)
        self.stream.write(
            f"\r  {profile:<9} [{'#' * filled}{'.' * (width - filled)}] {done}/{total} pods "
            f"({rate:,.0f}/s)  "
        )
        if done >= total:
            self.stream.write("\n")
            self.start = time.perf_counter()
        self.stream.flush()


def _check_out(out: Path) -> None:
    """``--out`` must be a directory we can write in (created if missing), checked before the
    simulation runs rather than after."""
    try:
        check_writable_dir(out)
    except OSError as e:
        raise InputError(f"cannot write the report in {out}: {e.strerror or e}", "--out") from None


def simulation_summary(
    nodes: Sequence[tuple[str, Machine]],
    workload: Workload,
    profiles: Sequence[str],
    *,
    spec: str,
    cluster_label: str,
    recreate: bool = False,
    progress: Progress | None = None,
) -> tuple[dict[str, Any], SimResult]:
    """Replay ``workload`` (built from the workload spec ``spec``) on ``nodes`` under each
    profile; the ``summary.json`` document (``cluster_label`` names the cluster in it) and the
    run's result (series and heat maps for the report)."""
    result = simulate(nodes, workload, profiles, recreate=recreate, progress=progress)
    summary = result.recorder.summary(
        cluster=cluster_overview(nodes, cluster_label),
        workload={"spec": spec, "name": workload.name, "pods": len(workload),
                  "description": workload.description},
    )
    return summary, result


def run_simulation(
    *,
    cluster: str | None,
    workload: str | None,
    profiles: list[str],
    seed: int,
    out: Path,
    recreate: bool,
    quiet: bool,
    shared: str | None = None,
) -> int:
    names = check_profiles(profiles)  # one-line errors before any work
    _check_out(out)
    nodes = resolve_cluster(cluster)
    spec = seeded_spec(workload or "synthetic", seed)
    wl = parse_workload_spec(spec, find_shared(shared), cluster=nodes)
    if not quiet:
        print(f"cluster: {len(nodes)} nodes; workload: {wl.description or wl.name} ({len(wl)} pods)",
              file=sys.stderr)
    summary, result = simulation_summary(nodes, wl, names, spec=spec,
                                         cluster_label=cluster or "builtin:default",
                                         recreate=recreate,
                                         progress=ReplayProgress(sys.stderr, quiet))
    try:
        summary_path, report_path = write_report(out, summary, result.recorder.series(),
                                                 result.heatmaps)
    except OSError as e:  # changed under us since _check_out
        raise InputError(f"cannot write the report in {out}: {e.strerror or e}", "--out") from None
    print(format_summary_table(summary))
    print(format_summary_legend(summary))
    print(f"\nwrote {summary_path}\nreport: {report_path}")
    if not plotting_available():
        print(f"numalign simulate: {NO_PLOTS}", file=sys.stderr)
    return 0
