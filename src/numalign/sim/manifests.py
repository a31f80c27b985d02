"""A directory of pod manifests as a simulator workload.

Every ``*.yaml``, ``*.yml`` and ``*.json`` file directly in the directory is read with
:func:`numalign.pods.parse_pods` (one Pod, a List, or multi-document YAML per file), in
file-name order, pods in file order. A Volcano Job (``batch.volcano.sh/v1alpha1``) stands for
the pods Volcano creates for its tasks, each carrying its task's ``topologyPolicy``
(:mod:`numalign.modes.volcano.jobs`). Arrival times:

* a pod with the annotation ``numalign.io/arrival-seconds: "<seconds>"`` arrives then;
* the others are evenly spaced: the *i*-th pod without the annotation (counting from 0 over
  the whole directory) arrives at ``i x interval`` seconds (default 1 s).

A pod with ``numalign.io/duration-seconds: "<seconds>"`` departs that long after it starts;
without it, it never departs. Bad annotation values raise
:class:`~numalign.errors.InputError` naming the file, the pod and the annotation. Duplicate
pod keys (namespace/name) in one directory are errors: a replay tracks pods by key.
"""

from __future__ import annotations

import math
import os

from numalign.errors import InputError
from numalign.inputs.documents import read_yaml_documents
from numalign.modes.volcano.jobs import expand_documents
from numalign.pods import Pod, parse_pods
from numalign.sim.workloads import (
    ARRIVAL_ANNOTATION,
    DURATION_ANNOTATION,
    Arrival,
    Workload,
    WorkloadSpec,
    option_float,
)

EXTENSIONS = (".yaml", ".yml", ".json")


def _seconds(pod: Pod, key: str, where: str) -> float | None:
    raw = pod.annotations.get(key)
    if raw is None:
        return None
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise InputError(
            f"expected seconds >= 0, got {raw!r}",
            f"{where}: pod {pod.key}: metadata.annotations.{key}",
        )
    return value


def manifest_files(path: str | os.PathLike[str]) -> list[str]:
    """The manifest files of a directory, sorted by name (errors name the directory)."""
    name = os.fspath(path)
    if not os.path.isdir(name):
        raise InputError("not a directory" if os.path.exists(name) else "no such directory", name)
    try:
        entries = sorted(os.listdir(name))
    except OSError as e:
        raise InputError(f"cannot list: {e.strerror or e}", name) from None
    files = [
        os.path.join(name, e)
        for e in entries
        if e.lower().endswith(EXTENSIONS) and os.path.isfile(os.path.join(name, e))
    ]
    if not files:
        raise InputError(f"no manifest files ({', '.join(EXTENSIONS)})", name)
    return files


def from_spec(spec: WorkloadSpec) -> Workload:
    """``dir:PATH[?interval=S]``."""
    if not spec.path:
        raise InputError("missing directory (dir:PATH)", spec.part)
    spec.check_options(("interval",))
    interval = option_float(spec.options, "interval", spec.part)
    return read_manifest_dir(spec.local(spec.path), interval_s=1.0 if interval is None else interval)


def read_manifest_dir(path: str | os.PathLike[str], *, interval_s: float = 1.0) -> Workload:
    """Pods of every manifest file in ``path`` as a workload (rules in the module docstring)."""
    if not (interval_s >= 0 and math.isfinite(interval_s)):
        raise InputError(f"must be >= 0, got {interval_s}", "interval")
    arrivals: list[Arrival] = []
    seen: dict[str, str] = {}
    spaced = 0
    for file in manifest_files(path):
        for pod in parse_pods(expand_documents(read_yaml_documents(file)), file):
            if pod.key in seen:
                raise InputError(f"duplicate pod {pod.key} (also in {seen[pod.key]})", file)
            seen[pod.key] = file
            at = _seconds(pod, ARRIVAL_ANNOTATION, file)
            if at is None:
                at = spaced * interval_s
                spaced += 1
            arrivals.append(Arrival(at, pod, _seconds(pod, DURATION_ANNOTATION, file)))
    return Workload(
        name="dir",
        arrivals=tuple(arrivals),
        description=f"pod manifests from {os.fspath(path)}",
        params={"path": os.fspath(path), "interval_s": interval_s},
    )
