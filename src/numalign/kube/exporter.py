"""``numalign export``: this node's NodeResourceTopology, printed or applied through the API.

Sources, read afresh on every export:

* the machine: ``--machine`` spec, or sysfs (``--sysfs-root`` capture, default live ``/``);
* the kubelet configuration: ``--kubelet-config`` (a KubeletConfiguration YAML) replaces the
  machine's ``kubelet`` section, parsed by the machine spec loader (same field names);
* allocations: the kubelet's pod-resources gRPC API (``--podresources-socket``: ``List`` and
  ``GetAllocatableResources``, devices included; the pod set it lists is the fingerprint's),
  falling back to the kubelet's ``cpu_manager_state``/``memory_manager_state`` (``--kubelet-state
  DIR``) when the socket cannot be read; or numalign's own state directory (``--state-dir``);
  none = an idle node.

A source that cannot be read makes :meth:`Exporter.collect` raise; :func:`run_loop` then keeps
the last good object (never publishes an empty or partial one), logs why on stderr and retries
at the next interval; a single export (no ``--interval``) fails with one error line instead. With ``--interval`` the loop also re-exports as soon as the mtime of a
state file (or the kubelet config) changes (polled every ``--poll`` seconds).
"""

from __future__ import annotations

import importlib
import os
import re
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from numalign.errors import InputError, NumalignError, one_line
from numalign.inputs.documents import read_yaml
from numalign.inputs.pyyaml import yaml
from numalign.kube.topology import build_nrt
from numalign.machine.model import Machine
from numalign.machine.spec import dump_machine, load_machine, read_machine_file
from numalign.node.admission import Node
from numalign.node.kubelet_import import CPU_FILE, MEMORY_FILE, import_kubelet_state
from numalign.node.store import STATE_FILE

GROUP = "topology.node.k8s.io"
VERSION = "v1alpha2"
PLURAL = "noderesourcetopologies"
#: the synthetic occupant of the usage the kubelet's podresources API reports
PODRESOURCES_UID = "numalign.io/podresources"

if TYPE_CHECKING:
    from numalign.kube.metrics import ExporterMetrics


def read_kubelet_config(path: str) -> dict[str, Any]:
    """A KubeletConfiguration YAML file as a mapping (the fields the spec loader knows are
    checked when applied to a machine; the rest is ignored)."""
    doc = read_yaml(path, "kubelet configuration")
    if not isinstance(doc, dict):
        raise InputError("a KubeletConfiguration must be a mapping", path)
    kind = doc.get("kind")
    if kind is not None and kind != "KubeletConfiguration":
        raise InputError(f"expected kind KubeletConfiguration, got {kind!r}", path)
    return doc


def with_kubelet_config(machine: Machine, config: dict[str, Any], source: str) -> Machine:
    """``machine`` with its kubelet section replaced by a KubeletConfiguration."""
    doc = dump_machine(machine)
    doc["kubelet"] = {k: v for k, v in config.items() if k not in ("kind", "apiVersion")}
    return load_machine(doc, source)


@dataclass
class ExportSources:
    machine: str | None = None
    sysfs_root: str | None = None
    kubelet_config: str | None = None
    kubelet_state: str | None = None
    state_dir: str | None = None
    node_name: str | None = None
    device_rules: str | None = None
    podresources_socket: str | None = None
    #: "nrt" (NodeResourceTopology) or "numatopo" (Volcano's Numatopology)
    kind: str = "nrt"

    def watched(self) -> list[Path]:
        """Files whose change triggers an export."""
        out: list[Path] = []
        if self.kubelet_state:
            out += [Path(self.kubelet_state) / CPU_FILE, Path(self.kubelet_state) / MEMORY_FILE]
        if self.state_dir:
            out.append(Path(self.state_dir) / STATE_FILE)
        if self.kubelet_config:
            out.append(Path(self.kubelet_config))
        if self.machine:
            out.append(Path(self.machine))
        return out


@dataclass
class Exporter:
    sources: ExportSources
    last_good: dict[str, Any] | None = None
    last_error: str | None = None
    #: why the last collect fell back from podresources to the checkpoints (None: it did not)
    fallback: str | None = None
    _machine_cache: Machine | None = field(default=None, repr=False)

    def _machine(self) -> Machine:
        s = self.sources
        if s.machine:
            m = read_machine_file(s.machine)
        else:
            if self._machine_cache is None:  # hardware does not change while we run
                from numalign.machine.devices_naming import load_rules
                from numalign.machine.sysfs import load_sysfs

                rules = load_rules(s.device_rules)
                self._machine_cache = load_sysfs(s.sysfs_root or "/", rules).machine
            m = self._machine_cache
        if s.kubelet_config:
            m = with_kubelet_config(m, read_kubelet_config(s.kubelet_config), s.kubelet_config)
        return m

    def collect(self) -> dict[str, Any]:
        """Build the NRT from every source; raises :class:`NumalignError` if one fails."""
        s = self.sources
        machine = self._machine()
        name = s.node_name or os.environ.get("NODE_NAME") or machine.name
        self.fallback = None
        if s.podresources_socket:
            try:
                return self._from_podresources(machine, s.podresources_socket, name)
            except InputError as e:
                if not s.kubelet_state:
                    raise
                self.fallback = f"podresources unavailable ({e.message}); read the checkpoints"
        if s.kubelet_state:
            node = Node(machine, import_kubelet_state(machine, Path(s.kubelet_state)))
        elif s.state_dir:
            from numalign.node.session import node_session

            with node_session(Path(s.state_dir), machine, write=False) as n:
                node = n
        else:
            node = Node(machine)
        if s.kind == "numatopo":
            from numalign.node.numatopo import build_numatopo

            return build_numatopo(node, name)
        return build_nrt(node, name=name)

    def _from_podresources(self, machine: Machine, socket: str, name: str) -> dict[str, Any]:
        from numalign.kube.podresources.client import read_podresources
        from numalign.kube.podresources.observe import machine_with_allocatable, observed_usage
        from numalign.node.usage import apply_observed

        snap = read_podresources(socket)
        node = Node(machine_with_allocatable(machine, snap.allocatable))
        node.state = apply_observed(node, observed_usage(node, snap), PODRESOURCES_UID)
        return build_nrt(node, pod_keys=[p.key for p in snap.pods], name=name, node_level=False)

    def refresh(self, log: TextIO | None = None, *, once: bool = False) -> dict[str, Any] | None:
        """Collect; on failure keep and return the last good object (None if there is none).

        ``once``: a single export, which will not retry: the failure is reported as an error.
        """
        log = log if log is not None else sys.stderr
        try:
            obj = self.collect()
        except (NumalignError, OSError, ValueError) as e:
            msg = one_line(e.message if isinstance(e, NumalignError) else str(e))
            self.last_error = msg
            if once:
                print(f"numalign export: error: cannot read a source: {msg}", file=log)
                return None
            keep = "keeping the last good object" if self.last_good else "nothing published yet"
            print(f"numalign export: cannot read a source ({msg}); {keep}; retrying", file=log)
            return None
        self.last_good = obj
        self.last_error = None
        if self.fallback:
            print(f"numalign export: {self.fallback}", file=log)
        return obj


# ------------------------------------------------------------------------------ API


def k8s(module: str) -> Any:
    """``kubernetes.<module>`` of the official client (an optional dependency), untyped."""
    try:
        return importlib.import_module(f"kubernetes.{module}")
    except ImportError:  # pragma: no cover - optional dependency
        raise InputError("the kubernetes client is not installed (pip install 'numalign[kube]')") from None


def api_client(kubeconfig: str | None) -> Any:
    """A kubernetes ApiClient: from ``kubeconfig``, else in-cluster, else ~/.kube/config."""
    client, config = k8s("client"), k8s("config")
    if kubeconfig:
        return config.new_client_from_config(config_file=kubeconfig)
    try:
        config.load_incluster_config()
        return client.ApiClient()
    except config.ConfigException:
        return config.new_client_from_config()


def node_owner(api: Any, name: str, log: TextIO | None = None,
               warned: set[str] | None = None) -> dict[str, Any] | None:
    """The ownerReference that ties an NRT to its Node (``apiVersion: v1, kind: Node``, the
    node's name and uid, read through the API), so the garbage collector deletes the NRT with
    the node; ``None`` when the Node cannot be read - then a one-line warning says the object
    goes without it (once per distinct reason when ``warned`` is given)."""
    api_exception = k8s("client.rest").ApiException
    try:
        node = k8s("client").CoreV1Api(api).read_node(name)
        uid = node.metadata.uid if node is not None and node.metadata is not None else None
    except api_exception as e:
        why = f"{e.status} {e.reason}".strip()
        uid = None
    else:
        why = "the Node has no uid"
    if uid:
        return {"apiVersion": "v1", "kind": "Node", "name": name, "uid": str(uid)}
    if warned is None or why not in warned:
        if warned is not None:
            warned.add(why)
        print(one_line(f"numalign export: warning: cannot read node/{name} ({why}): the "
                       "NodeResourceTopology is published without an ownerReference to its "
                       "Node and outlives the node if it is deleted (the exporter needs `get` "
                       "on nodes)"), file=log if log is not None else sys.stderr)
    return None


def apply_nrt(api: Any, obj: dict[str, Any], *, log: TextIO | None = None,
              warned: set[str] | None = None) -> str:
    """Create or update the (cluster-scoped) NRT object, owned by its Node where the Node can
    be read (:func:`node_owner`); returns "created" or "updated"."""
    api_exception = k8s("client.rest").ApiException
    custom = k8s("client").CustomObjectsApi(api)
    name = obj["metadata"]["name"]
    owner = node_owner(api, name, log, warned)
    obj = dict(obj)
    obj["metadata"] = dict(obj["metadata"])
    if owner is not None:
        obj["metadata"]["ownerReferences"] = [owner]
    else:
        obj["metadata"].pop("ownerReferences", None)
    try:
        current: Any = custom.get_cluster_custom_object(GROUP, VERSION, PLURAL, name)
    except api_exception as e:
        if e.status != 404:
            raise
        custom.create_cluster_custom_object(GROUP, VERSION, PLURAL, obj)
        return "created"
    body = dict(obj)
    body["metadata"] = dict(obj["metadata"])
    rv = (current.get("metadata") or {}).get("resourceVersion")
    if rv:
        body["metadata"]["resourceVersion"] = rv
    custom.replace_cluster_custom_object(GROUP, VERSION, PLURAL, name, body)
    return "updated"


def _mtimes(paths: list[Path]) -> tuple[float | None, ...]:
    out: list[float | None] = []
    for p in paths:
        try:
            out.append(p.stat().st_mtime_ns)
        except OSError:
            out.append(None)
    return tuple(out)


def run_loop(
    exporter: Exporter,
    publish: Callable[[dict[str, Any]], None],
    *,
    interval: float | None,
    poll: float = 1.0,
    stop: threading.Event | None = None,
    log: TextIO | None = None,
    metrics: ExporterMetrics | None = None,
) -> int:
    """Export once (``interval`` None) or until ``stop``: every ``interval`` seconds and when a
    watched file's mtime changes. Returns 0, or 1 when the single export failed.

    Each round is recorded in ``metrics`` (default: the ones ``--metrics-port`` serves, if
    any): its duration, the object published and the time, or the stage that failed."""
    if interval is not None and not interval > 0:
        raise InputError("must be a positive number of seconds", "--interval")
    if not poll > 0:
        raise InputError("must be a positive number of seconds", "--poll")
    stop = stop or threading.Event()
    log = log if log is not None else sys.stderr
    watched = exporter.sources.watched()
    if metrics is None:
        from numalign.kube.metrics import active_exporter_metrics

        metrics = active_exporter_metrics()
    while True:
        seen = _mtimes(watched)
        t0 = time.perf_counter()
        obj = exporter.refresh(log, once=interval is None)
        failed = "collect" if obj is None else ""
        if obj is not None:
            try:
                publish(obj)
            except NumalignError as e:
                if interval is None:  # a single export: the one-line error, exit 2
                    raise
                print(one_line(f"numalign export: publish failed: {e.message}"), file=log)
                failed = "publish"
            except Exception as e:  # API errors: keep running, retry next round
                print(one_line(f"numalign export: publish failed: {type(e).__name__}: {e}"), file=log)
                failed = "publish"
        if metrics is not None:
            metrics.duration.observe(time.perf_counter() - t0)
            if failed:
                metrics.errors.labels(failed).inc()
            else:
                metrics.published.inc()
                metrics.last_success.set(time.time())
        if failed and interval is None:
            return 1
        if interval is None:
            return 0
        deadline = time.monotonic() + interval
        while not stop.is_set() and time.monotonic() < deadline:
            if _mtimes(watched) != seen:
                break
            stop.wait(min(poll, max(0.0, deadline - time.monotonic())))
        if stop.is_set():
            return 0


#: libyaml's emitter when PyYAML has it (about 5 times faster than the pure-Python one: an
#: exporter rewriting its file every few seconds, many on one machine in tests and benchmarks)
_Dumper: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def dump_yaml(obj: Any) -> str:
    """``obj`` as YAML, keys in their order: for the exporter's objects the same text as
    ``yaml.safe_dump(obj, sort_keys=False)`` (tests/test_kube_exporter.py holds it)."""
    return yaml.dump(obj, Dumper=_Dumper, sort_keys=False)


#: a Kubernetes object name (DNS-1123 subdomain), which the NRT's is: the node's
_OBJECT_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def write_object(out_dir: Path, obj: dict[str, Any], output: str) -> Path:
    """Write ``obj`` to ``out_dir/NAME.yaml`` (``.json`` for ``output`` json), replacing the
    file atomically (a reader such as ``extender serve --nrt-dir`` never sees half of it).
    The name must be a Kubernetes object name, so it is a plain file name."""
    name = str(obj["metadata"]["name"])
    if len(name) > 253 or not _OBJECT_NAME.fullmatch(name):
        raise InputError(f"{name!r} is not a Kubernetes object name (lowercase letters, digits, "
                         "'-' and '.'; at most 253 characters): give --node-name", "metadata.name")
    suffix = "json" if output == "json" else "yaml"
    if output == "json":
        import json

        text = json.dumps(obj, indent=2) + "\n"
    else:
        text = dump_yaml(obj)
    path = out_dir / f"{name}.{suffix}"
    tmp = out_dir / f".{name}.{suffix}.tmp"
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return path


def check_out_dir(out_dir: Path) -> None:
    """``--out``: a directory this process can write in (created if missing); InputError if
    not, before anything is exported."""
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        if not os.access(out_dir, os.W_OK | os.X_OK):
            raise PermissionError(13, "permission denied")
    except OSError as e:
        raise InputError(f"cannot write there: {e.strerror or e}", "--out") from None


def export_command(
    sources: ExportSources,
    *,
    apply: bool,
    kubeconfig: str | None,
    interval: float | None,
    output: str,
    poll: float = 1.0,
    out: TextIO | None = None,
    out_dir: Path | None = None,
) -> int:
    stream = out if out is not None else sys.stdout
    exporter = Exporter(sources)
    if out_dir is not None:
        check_out_dir(out_dir)

        def publish(obj: dict[str, Any]) -> None:
            try:
                path = write_object(out_dir, obj, output)
            except OSError as e:
                raise InputError(f"cannot write there: {e.strerror or e}", "--out") from None
            print(f"numalign export: wrote {path}", file=sys.stderr)
    elif apply:
        api = api_client(kubeconfig)
        warned: set[str] = set()

        def publish(obj: dict[str, Any]) -> None:
            what = apply_nrt(api, obj, warned=warned)
            print(f"numalign export: {what} noderesourcetopology/{obj['metadata']['name']}",
                  file=sys.stderr)
    else:
        def publish(obj: dict[str, Any]) -> None:
            if output == "json":
                import json

                stream.write(json.dumps(obj, indent=2) + "\n")
            else:
                stream.write(("---\n" if interval else "") + dump_yaml(obj))
            stream.flush()

    return run_loop(exporter, publish, interval=interval, poll=poll)
