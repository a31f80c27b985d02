"""Kubernetes adapters: the NodeResourceTopology exporter, the kube-scheduler extender
service and its metrics. ``kubernetes`` (the official client) is needed only for the API
paths (``numalign export --apply``, ``numalign extender serve --kubeconfig``)."""

from numalign.kube.exporter import Exporter, ExportSources, apply_nrt, export_command
from numalign.kube.extender import ExtenderCore, ExtenderServer, serve
from numalign.kube.topology import build_nrt, engine_from_nrt, pods_fingerprint

__all__ = [
    "ExportSources",
    "Exporter",
    "ExtenderCore",
    "ExtenderServer",
    "apply_nrt",
    "build_nrt",
    "engine_from_nrt",
    "export_command",
    "pods_fingerprint",
    "serve",
]
