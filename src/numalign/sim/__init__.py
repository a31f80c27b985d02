"""The simulator: workloads (traces, generator, manifests), cluster templates, metrics, report.

Public API of this package (the runner and the scheduler profiles live in their own modules):

* workloads: :class:`Arrival`, :class:`Workload`, :func:`parse_workload_spec` and the
  registry of sources :data:`SOURCES`, :func:`read_alibaba2025`, :func:`read_alibaba2023`,
  :class:`SyntheticParams`, :func:`generate_synthetic`, :func:`read_manifest_dir`;
* clusters: :func:`load_cluster`, :func:`read_cluster_file`, :func:`builtin_cluster`,
  :func:`resolve_cluster`, :data:`BUILTIN_CLUSTERS`;
* metrics and report: :class:`MetricsRecorder`, :class:`ContainerPlacement`,
  :class:`NumaHeatmap`, :func:`write_report`, :func:`format_summary_table`.

See ``docs/simulator.md``.
"""

from numalign.sim.cluster import (
    BUILTIN_CLUSTERS,
    builtin_cluster,
    cluster_capacity,
    load_cluster,
    read_cluster_file,
    resolve_cluster,
)
from numalign.sim.manifests import read_manifest_dir
from numalign.sim.metrics import ContainerPlacement, MetricsRecorder, ProfileSeries
from numalign.sim.report import NumaHeatmap, format_summary_table, write_report
from numalign.sim.sources import SOURCES, parse_workload_spec
from numalign.sim.synthetic import SyntheticParams
from numalign.sim.synthetic import generate as generate_synthetic
from numalign.sim.trace_alibaba2023 import read_trace as read_alibaba2023
from numalign.sim.trace_alibaba2025 import read_trace as read_alibaba2025
from numalign.sim.workloads import Arrival, Workload

__all__ = [
    "BUILTIN_CLUSTERS",
    "SOURCES",
    "Arrival",
    "ContainerPlacement",
    "MetricsRecorder",
    "NumaHeatmap",
    "ProfileSeries",
    "SyntheticParams",
    "Workload",
    "builtin_cluster",
    "cluster_capacity",
    "format_summary_table",
    "generate_synthetic",
    "load_cluster",
    "parse_workload_spec",
    "read_alibaba2023",
    "read_alibaba2025",
    "read_cluster_file",
    "read_manifest_dir",
    "resolve_cluster",
    "write_report",
]
