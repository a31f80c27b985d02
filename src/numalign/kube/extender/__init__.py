"""The kube-scheduler extender: ``POST /filter``, ``/prioritize``, ``/bind`` on numalign's engine.

One module per job:

* :mod:`~numalign.kube.extender.core` - :class:`ExtenderCore`: node engines, assumptions,
  filter / prioritize / bind, without HTTP (the scheduler profile decides and scores);
* :mod:`~numalign.kube.extender.sources` - where nodes come from: :class:`DirSource` (a
  directory of NodeResourceTopology YAML/JSON, :mod:`~numalign.kube.extender.dirsource`,
  followed by change events, :mod:`~numalign.kube.extender.dirwatch`), :class:`ApiSource`
  (list + watch), :func:`run_source`;
* :mod:`~numalign.kube.extender.wire` - the ``k8s.io/kube-scheduler/extender/v1`` JSON:
  request parsing and result documents;
* :mod:`~numalign.kube.extender.server` - the HTTP service (:class:`ExtenderServer`) and
  :func:`serve_in_thread`;
* :mod:`~numalign.kube.extender.serving` - ``extender serve``: flags, worker processes,
  listeners, TLS, the source's thread, SIGTERM (:func:`serve`).
"""

from numalign.kube.extender.core import MAX_EXTENDER_PRIORITY, UNKNOWN_NODE, ExtenderCore
from numalign.kube.extender.server import (
    DEFAULT_MAX_BODY,
    DEFAULT_MAX_CONNECTIONS,
    ExtenderHandler,
    ExtenderServer,
    serve_in_thread,
)
from numalign.kube.extender.serving import api_binder, serve, tls_context
from numalign.kube.extender.sources import ApiSource, DirSource, run_source
from numalign.kube.extender.wire import BadRequest

__all__ = [
    "DEFAULT_MAX_BODY",
    "DEFAULT_MAX_CONNECTIONS",
    "MAX_EXTENDER_PRIORITY",
    "UNKNOWN_NODE",
    "ApiSource",
    "BadRequest",
    "DirSource",
    "ExtenderCore",
    "ExtenderHandler",
    "ExtenderServer",
    "api_binder",
    "run_source",
    "serve",
    "serve_in_thread",
    "tls_context",
]
