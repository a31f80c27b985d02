"""Volcano Jobs (``batch.volcano.sh/v1alpha1`` ``Job``) as the pods Volcano creates for them.

Read from volcano-sh/volcano: ``pkg/controllers/job/job_controller_util.go`` (``createJobPod``)
names a task's pods ``<job>-<task>-<index>`` for ``index`` in ``0 .. replicas-1``, takes
metadata and spec from ``tasks[].template`` and, when the task sets ``topologyPolicy``, writes
it to the pod annotation ``volcano.sh/numa-topology-policy`` - which the ``numa-aware``
plugin reads (and :mod:`numalign.pods.annotations` with it). The namespace is the Job's.

:func:`expand_documents` turns every Job document (also inside a ``List``) into Pod documents
and leaves the others alone, so :func:`numalign.pods.parse_pods` reads the result.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from numalign.engine.policies import parse_policy
from numalign.errors import InputError
from numalign.pods.annotations import VOLCANO_ANNOTATION

JOB_API = "batch.volcano.sh/v1alpha1"


def _mapping(value: object, field: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InputError(f"expected an object, got {type(value).__name__}", field)
    return value


def _job_pods(job: Mapping[str, Any]) -> list[dict[str, Any]]:
    meta = _mapping(job.get("metadata"), "metadata")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise InputError("missing required field", "metadata.name")
    namespace = meta.get("namespace") or "default"
    spec = _mapping(job.get("spec"), "spec")
    tasks = spec.get("tasks")
    if not isinstance(tasks, Sequence) or isinstance(tasks, str) or not tasks:
        raise InputError("a Job needs at least one task", "spec.tasks")
    out: list[dict[str, Any]] = []
    for t, task in enumerate(tasks):
        field = f"spec.tasks[{t}]"
        task = _mapping(task, field)
        tname = task.get("name") or f"task{t}"  # Volcano defaults unnamed tasks (webhook)
        replicas = task.get("replicas", 1)
        if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
            raise InputError("must be a non-negative integer", f"{field}.replicas")
        policy = task.get("topologyPolicy")
        if policy is not None:
            parse_policy(policy, f"{field}.topologyPolicy")
        template = _mapping(task.get("template"), f"{field}.template")
        tmeta = dict(_mapping(template.get("metadata"), f"{field}.template.metadata"))
        for i in range(replicas):
            annotations = dict(_mapping(tmeta.get("annotations"), f"{field}.template.metadata.annotations"))
            if policy is not None:
                annotations[VOLCANO_ANNOTATION] = str(policy)
            pod_meta = {**tmeta, "name": f"{name}-{tname}-{i}", "namespace": namespace, "annotations": annotations}
            pod_meta.pop("uid", None)
            out.append({"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": template.get("spec")})
    return out


def expand_documents(documents: Sequence[object]) -> list[object]:
    """Documents with every Volcano Job replaced by its pods (errors name the document)."""
    out: list[object] = []
    for n, doc in enumerate(documents):
        if isinstance(doc, Mapping) and doc.get("apiVersion") == JOB_API:
            if doc.get("kind") != "Job":
                raise InputError(f"unsupported kind {doc.get('kind')!r} for {JOB_API}, expected Job", f"[{n}].kind")
            try:
                out.extend(_job_pods(doc))
            except InputError as e:
                raise e.within(f"[{n}]") from None
        elif isinstance(doc, Mapping) and doc.get("kind") == "List" and isinstance(doc.get("items"), list):
            out.append({**doc, "items": expand_documents(doc["items"])})
        else:
            out.append(doc)
    return out


__all__ = ["JOB_API", "expand_documents"]
