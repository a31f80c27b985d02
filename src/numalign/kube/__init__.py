"""Kubernetes adapters: the NodeResourceTopology exporter, the kube-scheduler extender
service and its metrics. ``kubernetes`` (the official client) is needed only for the API
paths (``numalign export --apply``, ``numalign extender serve --kubeconfig``)."""

from __future__ import annotations

from numalign.lazy_exports import lazy_getattr

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (``numalign --help``)

#: public name -> defining module; loaded on first use so that registering the CLI's
#: subcommands (which imports this package's ``cli``) stays cheap
_EXPORTS: dict[str, str] = {
    "ExportSources": "numalign.kube.exporter",
    "Exporter": "numalign.kube.exporter",
    "ExtenderCore": "numalign.kube.extender",
    "ExtenderServer": "numalign.kube.extender",
    "apply_nrt": "numalign.kube.exporter",
    "build_nrt": "numalign.kube.topology",
    "engine_from_nrt": "numalign.kube.topology",
    "export_command": "numalign.kube.exporter",
    "pods_fingerprint": "numalign.kube.topology",
    "serve": "numalign.kube.extender",
}


__getattr__ = lazy_getattr(__name__, _EXPORTS)


if TYPE_CHECKING:
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
