"""The pod of an ExtenderArgs, parsed once per engine-relevant shape.

kube-scheduler sends the whole v1.Pod with every ``/filter`` and ``/prioritize``; parsing it
(quantities as fractions, QoS, effective requests) costs more than deciding 100 cached nodes.
Pods of one workload differ in their names, uids and most annotations, not in what the
engine reads. :class:`PodCache` keys a parsed *template* by a cheap projection of the raw
pod on exactly the fields :func:`numalign.pods.parse_pods` reads for the engine (kind,
apiVersion, the annotations in :data:`ENGINE_ANNOTATIONS`, ``spec.topology``/
``topologyPolicy``/``resources``, each container's name, ``restartPolicy`` and
``resources``), and gives every request the template with its own namespace, name and uid.

A miss parses the *projected* document, not the raw one, so the answer never depends on what
the cache holds: a field outside the projection is never read, hit or miss. A raw pod whose
projection cannot be taken (wrong types) is parsed in full, which reports the error.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

from numalign.kube.extender.core import ENGINE_ANNOTATIONS, engine_pod
from numalign.kube.extender.wire import pod_of
from numalign.pods import Pod, default_uid

#: parsed pod templates kept (least recently used dropped)
MAX_TEMPLATES = 4096
_CONTAINER_KEYS = ("name", "restartPolicy", "resources")
_SPEC_KEYS = ("topologyPolicy", "topology", "resources")


def projection(raw: Mapping[str, Any]) -> dict[str, Any] | None:
    """The engine-relevant part of a raw v1.Pod (identity left out), or ``None`` when the
    document is not shaped so that one can be taken (then it is parsed in full)."""
    meta = raw.get("metadata")
    spec = raw.get("spec")
    if not isinstance(meta, dict) or not isinstance(spec, dict):
        return None
    ann = meta.get("annotations")
    if ann is not None and not isinstance(ann, dict):
        return None
    out_spec: dict[str, Any] = {k: spec[k] for k in _SPEC_KEYS if k in spec}
    for key in ("initContainers", "containers"):
        items = spec.get(key)
        if items is None:
            continue
        if not isinstance(items, list):
            return None
        kept: list[dict[str, Any]] = []
        for c in items:
            if not isinstance(c, dict):
                return None
            kept.append({k: c[k] for k in _CONTAINER_KEYS if k in c})
        out_spec[key] = kept
    out: dict[str, Any] = {"metadata": {
        "annotations": {k: ann[k] for k in ENGINE_ANNOTATIONS if k in ann} if ann else {}},
        "spec": out_spec}
    for k in ("kind", "apiVersion"):
        if k in raw:
            out[k] = raw[k]
    return out


def _identity(meta: Mapping[str, Any]) -> tuple[str, str, str] | None:
    """(namespace, name, uid) as the pod parser derives them, or ``None`` if one is not a
    string (the full parse then reports it)."""
    name, namespace, uid = meta.get("name"), meta.get("namespace"), meta.get("uid")
    if not isinstance(name, str) or not name:
        return None
    if namespace is not None and not isinstance(namespace, str):
        return None
    if uid is not None and not isinstance(uid, str):
        return None
    namespace = namespace or "default"
    return namespace, name, uid or default_uid(namespace, name)


class PodCache:
    """Raw v1.Pod -> (engine pod, shape id), parsing each distinct projection once.

    ``shape_id``: the core's shape numbering (:meth:`ExtenderCore.shape_id`)."""

    def __init__(self, shape_id: Callable[[Pod], int], size: int = MAX_TEMPLATES) -> None:
        self._shape_id = shape_id
        self._size = size
        self._lock = threading.Lock()
        self._templates: OrderedDict[str, tuple[Pod, int]] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._templates)

    def parse(self, args: Mapping[str, Any]) -> tuple[Pod, int]:
        """The pod of ExtenderArgs ``args`` (its ``Pod``), as :func:`engine_pod` returns it,
        and its shape id. Raises :class:`~numalign.kube.extender.wire.BadRequest` or
        :class:`~numalign.errors.InputError` as :func:`~numalign.kube.extender.wire.pod_of`."""
        raw = args.get("Pod")
        proj = projection(raw) if isinstance(raw, dict) else None
        ident = _identity(raw["metadata"]) if proj is not None and raw is not None else None
        if proj is None or ident is None:
            pod = engine_pod(pod_of(args))
            return pod, self._shape_id(pod)
        key = repr(proj)
        with self._lock:
            hit = self._templates.get(key)
            if hit is not None:
                self._templates.move_to_end(key)
                self.hits += 1
        if hit is None:
            proj["metadata"].update(name="template", namespace="template", uid="template")
            template = engine_pod(pod_of({"Pod": proj}))
            hit = (template, self._shape_id(template))
            with self._lock:
                self.misses += 1
                self._templates[key] = hit
                while len(self._templates) > self._size:
                    self._templates.popitem(last=False)
        namespace, name, uid = ident
        return hit[0].replace(namespace=namespace, name=name, uid=uid), hit[1]
