"""Cluster templates: which machines the simulated cluster has, and how many of each.

A template is a YAML (or JSON) document::

    nodes:
      - machine: machines/gpu-8x.yaml   # a machine spec file, relative to the template
        count: 20                      # default 1
        namePrefix: gpu                # default: the machine's name
      - machine:                       # or an inline machine spec (full or compact form)
          name: cpu-4numa
          shape: {sockets: 2, numaPerSocket: 2, coresPerNuma: 24, threadsPerCore: 2}
        count: 10
        kubelet:                       # optional: overrides keys of the machine's kubelet
          topologyManagerPolicy: restricted
          topologyManagerScope: pod
        kubeletVersion: v1.30.2        # optional: this group's kubelet release (= kubelet.kubeletVersion)
        labels:                        # optional: node labels, over the machine spec's own
          numalign.io/engine-mode: koordinator
          node.koordinator.sh/numa-topology-policy: SingleNUMANode
          node.koordinator.sh/cpu-bind-policy: SpreadByPCPUs
        annotations:                   # optional: node annotations, over the machine spec's own
          kubelet.koordinator.sh/cpu-manager-policy: '{"policy": "static", "options": {"full-pcpus-only": "true"}}'

Machine specs are read with :func:`numalign.machine.spec.load_machine` (see that module for
the forms). ``kubelet`` in a node entry is merged key by key over the machine spec's own
``kubelet`` section, so one machine file can serve several kubelet configurations;
``kubeletVersion`` gives the group's kubelet release (``docs/kubelet-releases.md``), so half a
cluster on v1.30 and half on the newest release simulates an upgrade. Node
names are ``<namePrefix>-<i>``, ``i`` zero-padded to the width of ``count - 1``; names must be
unique across entries.

:func:`load_cluster` / :func:`read_cluster_file` return a list of ``(node name, Machine)``
pairs, the input of :class:`numalign.scheduler.cluster.Cluster`. :func:`builtin_cluster`
names the built-in templates (:data:`BUILTIN_CLUSTERS`). Errors are one line and name the
field: ``cluster.yaml: nodes[1].count: must be a positive integer, got 0``.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from numalign.errors import InputError
from numalign.inputs.documents import read_yaml
from numalign.inputs.quantity import hugepage_resource_name
from numalign.machine.model import Machine
from numalign.machine.spec import load_machine

NodeList = list[tuple[str, Machine]]

_TOP_KEYS = ("nodes", "name", "description")
_ENTRY_KEYS = ("machine", "count", "namePrefix", "kubelet", "kubeletVersion", "labels",
               "annotations")
_MAX_NODES = 100_000


def _merge_kubelet(doc: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(doc)
    base = out.get("kubelet")
    merged = dict(base) if isinstance(base, Mapping) else {}
    merged.update(overrides)
    out["kubelet"] = merged
    return out


def load_cluster(
    data: object, source: str = "cluster", base_dir: str | os.PathLike[str] | None = None
) -> NodeList:
    """Expand a parsed cluster template into ``(node name, Machine)`` pairs.

    ``source`` names the template in error messages; relative machine paths are resolved
    against ``base_dir`` (default: the current directory).
    """

    def err(problem: str, field: str | None = None) -> InputError:
        return InputError(problem, f"{source}: {field}" if field else source)

    if not isinstance(data, Mapping):
        raise err(f"expected a mapping with a 'nodes' list, got {type(data).__name__}")
    for key in data:
        if key not in _TOP_KEYS:
            raise err(f"unknown field (known: {', '.join(_TOP_KEYS)})", str(key))
    entries = data.get("nodes")
    if entries is None:
        raise err("missing required field", "nodes")
    if not isinstance(entries, Sequence) or isinstance(entries, str | bytes):
        raise err(f"expected a list, got {type(entries).__name__}", "nodes")
    if not entries:
        raise err("must list at least one node entry", "nodes")
    base = os.fspath(base_dir) if base_dir is not None else os.getcwd()
    out: NodeList = []
    seen: dict[str, str] = {}
    for i, entry in enumerate(entries):
        at = f"nodes[{i}]"
        if not isinstance(entry, Mapping):
            raise err(f"expected a mapping, got {type(entry).__name__}", at)
        for key in entry:
            if key not in _ENTRY_KEYS:
                raise err(f"unknown field (known: {', '.join(_ENTRY_KEYS)})", f"{at}.{key}")
        count = entry.get("count", 1)
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise err(f"must be a positive integer, got {count!r}", f"{at}.count")
        if count > _MAX_NODES:
            raise err(f"at most {_MAX_NODES} nodes per entry, got {count}", f"{at}.count")
        prefix = entry.get("namePrefix")
        if prefix is not None and (not isinstance(prefix, str) or not prefix.strip()):
            raise err(f"expected a non-empty string, got {prefix!r}", f"{at}.namePrefix")
        raw = entry.get("machine")
        if raw is None:
            raise err(
                "missing required field (a machine spec file or an inline spec)", f"{at}.machine"
            )
        if isinstance(raw, str):
            path = raw if os.path.isabs(raw) else os.path.join(base, raw)
            doc = read_yaml(path, "machine spec")
            if doc is None:
                raise err(f"empty machine spec {raw!r}", f"{at}.machine")
            msource = f"{source}: {at}.machine ({raw})"
            default_name = os.path.splitext(os.path.basename(raw))[0]
        elif isinstance(raw, Mapping):
            doc = raw
            msource = f"{source}: {at}.machine"
            default_name = prefix or f"node{i}"
        else:
            raise err(
                f"expected a file path or a machine spec mapping, got {type(raw).__name__}",
                f"{at}.machine",
            )
        if not isinstance(doc, Mapping):
            raise err(
                f"a machine spec must be a mapping, got {type(doc).__name__}", f"{at}.machine"
            )
        doc = dict(doc)
        doc.setdefault("name", default_name)
        kubelet = entry.get("kubelet")
        if kubelet is not None:
            if not isinstance(kubelet, Mapping):
                raise err(f"expected a mapping, got {type(kubelet).__name__}", f"{at}.kubelet")
            doc = _merge_kubelet(doc, kubelet)
        version = entry.get("kubeletVersion")
        if version is not None:
            if not isinstance(version, str):
                raise err(f"expected a version such as v1.33.4, got {version!r}",
                          f"{at}.kubeletVersion")
            doc = _merge_kubelet(doc, {"kubeletVersion": version})
        for meta in ("labels", "annotations"):
            extra = entry.get(meta)
            if extra is not None:
                if not isinstance(extra, Mapping):
                    raise err(f"expected a mapping, got {type(extra).__name__}", f"{at}.{meta}")
                base = doc.get(meta)
                doc[meta] = {**(base if isinstance(base, Mapping) else {}), **extra}
        machine = load_machine(doc, msource)
        name_prefix = prefix or machine.name
        width = len(str(count - 1))
        for k in range(count):
            name = f"{name_prefix}-{k:0{width}d}"
            if name in seen:
                raise err(f"node name {name!r} also produced by {seen[name]}", f"{at}.namePrefix")
            seen[name] = at
            out.append((name, machine))
    return out


def read_cluster_file(path: str | os.PathLike[str]) -> NodeList:
    """Read a cluster template file; machine paths are relative to the template's directory."""
    name = os.fspath(path)
    data = read_yaml(name, "cluster template")
    if data is None:
        raise InputError("empty cluster template", name)
    return load_cluster(data, name, os.path.dirname(os.path.abspath(name)))


# --------------------------------------------------------------------------------------------
# Built-in templates
# --------------------------------------------------------------------------------------------


def _gpu_server(rdma_units: int = 4) -> dict[str, Any]:
    """Dual-socket, 2 NUMA nodes: 64 CPUs (32 cores x 2 threads) per node, 512 GiB, 4 GPUs
    and 2 RDMA NICs per NUMA node; each NIC is ``rdma_units`` ``rdma/hca`` VFs."""
    return {
        "name": "gpu-2numa",
        "shape": {
            "sockets": 2,
            "numaPerSocket": 1,
            "coresPerNuma": 32,
            "threadsPerCore": 2,
            "memoryPerNuma": "512Gi",
            "hugepages1GiPerNuma": "32Gi",
            "distances": {"local": 10, "remote": 21},
            "devicesPerNuma": {"nvidia.com/gpu": 4, "rdma/hca": 2 * rdma_units},
        },
        "kubelet": _kubelet("single-numa-node", "container", reserved="0,64"),
    }


def _cpu_server(rdma_units: int = 4) -> dict[str, Any]:
    """Dual-socket with sub-NUMA clustering, 4 NUMA nodes: 48 CPUs (24 cores x 2 threads)
    and 256 GiB per NUMA node (192 CPUs, 1 TiB), one RDMA NIC per NUMA node."""
    return {
        "name": "cpu-4numa",
        "shape": {
            "sockets": 2,
            "numaPerSocket": 2,
            "coresPerNuma": 24,
            "threadsPerCore": 2,
            "memoryPerNuma": "256Gi",
            "hugepages1GiPerNuma": "16Gi",
            "distances": {"local": 10, "sameSocket": 12, "remote": 32},
            "devicesPerNuma": {"rdma/hca": rdma_units},
        },
        "kubelet": _kubelet("restricted", "container", reserved="0,96"),
    }


def _cpu_server_2numa(rdma_units: int = 4) -> dict[str, Any]:
    """Dual-socket, one NUMA node per socket: 96 CPUs (48 cores x 2 threads) and 512 GiB per
    NUMA node (192 CPUs, 1 TiB), two RDMA NICs per NUMA node - sized for the 2025 trace's
    64- and 96-vCPU CN instances."""
    return {
        "name": "cpu-2numa",
        "shape": {
            "sockets": 2,
            "numaPerSocket": 1,
            "coresPerNuma": 48,
            "threadsPerCore": 2,
            "memoryPerNuma": "512Gi",
            "distances": {"local": 10, "remote": 21},
            "devicesPerNuma": {"rdma/hca": 2 * rdma_units},
        },
        "kubelet": _kubelet("single-numa-node", "container", reserved="0,96"),
    }


def _kubelet(policy: str, scope: str, reserved: str) -> dict[str, Any]:
    # reservedMemory must add up to systemReserved + kubeReserved + evictionHard (100Mi)
    return {
        "topologyManagerPolicy": policy,
        "topologyManagerScope": scope,
        "cpuManagerPolicy": "static",
        "reservedSystemCPUs": reserved,
        "systemReserved": {"memory": "2Gi"},
        "memoryManagerPolicy": "Static",
        "reservedMemory": [{"numaNode": 0, "limits": {"memory": "2148Mi"}}],
    }


def _policies(policy: str, scope: str) -> dict[str, str]:
    return {"topologyManagerPolicy": policy, "topologyManagerScope": scope}


def _default_template(scale: int = 1) -> dict[str, Any]:
    """20 GPU + 20 CPU nodes (x ``scale``), kubelet policies mixed."""
    n = 5 * scale
    gpu, cpu = _gpu_server(), _cpu_server()
    return {
        "name": "default",
        "description": (
            "GPU nodes: 2 NUMA nodes, 128 CPUs, 1 TiB, 8 GPUs and 4 RDMA NICs (x4 VFs); "
            "CPU nodes: 4 NUMA nodes, 192 CPUs, 1 TiB, 4 RDMA NICs; static CPU and memory "
            "managers; policies single-numa-node / restricted, scopes container / pod"
        ),
        "nodes": [
            {
                "machine": gpu,
                "count": 2 * n,
                "namePrefix": "gpu-snn-c",
                "kubelet": _policies("single-numa-node", "container"),
            },
            {
                "machine": gpu,
                "count": n,
                "namePrefix": "gpu-snn-p",
                "kubelet": _policies("single-numa-node", "pod"),
            },
            {
                "machine": gpu,
                "count": n,
                "namePrefix": "gpu-rst-p",
                "kubelet": _policies("restricted", "pod"),
            },
            {
                "machine": cpu,
                "count": n,
                "namePrefix": "cpu-snn-c",
                "kubelet": _policies("single-numa-node", "container"),
            },
            {
                "machine": cpu,
                "count": n,
                "namePrefix": "cpu-snn-p",
                "kubelet": _policies("single-numa-node", "pod"),
            },
            {
                "machine": cpu,
                "count": 2 * n,
                "namePrefix": "cpu-rst-c",
                "kubelet": _policies("restricted", "container"),
            },
        ],
    }


def _small_template() -> dict[str, Any]:
    """4 nodes: a quick template for tests and examples."""
    return {
        "name": "small",
        "nodes": [
            {"machine": _gpu_server(), "count": 2, "namePrefix": "gpu"},
            {
                "machine": _cpu_server(),
                "count": 2,
                "namePrefix": "cpu",
                "kubelet": _policies("single-numa-node", "pod"),
            },
        ],
    }


def _alibaba2025_template() -> dict[str, Any]:
    """1,000 nodes for the 2025 DLRM trace: 400 GPU (HN) nodes, 600 CPU (CN) nodes with two
    96-CPU NUMA nodes each.

    The trace's peak live demand is about 3,400 GPUs and 390,000 vCPUs, so the CPU side is
    overcommitted by design (pods wait: ``pending``)."""
    gpu, cpu = _gpu_server(), _cpu_server_2numa()
    return {
        "name": "alibaba2025",
        "description": (
            "1,000 nodes: 400 GPU nodes (2 NUMA, 8 GPUs, 4 NICs) + 600 CPU nodes "
            "(2 NUMA x 96 CPUs, 1 TiB, 4 NICs)"
        ),
        "nodes": [
            {
                "machine": gpu,
                "count": 200,
                "namePrefix": "hn-snn",
                "kubelet": _policies("single-numa-node", "container"),
            },
            {
                "machine": gpu,
                "count": 200,
                "namePrefix": "hn-rst",
                "kubelet": _policies("restricted", "pod"),
            },
            {
                "machine": cpu,
                "count": 300,
                "namePrefix": "cn-snn",
                "kubelet": _policies("single-numa-node", "container"),
            },
            {
                "machine": cpu,
                "count": 300,
                "namePrefix": "cn-rst",
                "kubelet": _policies("restricted", "container"),
            },
        ],
    }


_BUILTINS: dict[str, Callable[[], dict[str, Any]]] = {
    "default": _default_template,
    "small": _small_template,
    "alibaba2025": _alibaba2025_template,
}
#: Names accepted by :func:`builtin_cluster`.
BUILTIN_CLUSTERS: tuple[str, ...] = tuple(_BUILTINS)


def builtin_template(name: str) -> dict[str, Any]:
    """The template document of a built-in cluster (to print or edit)."""
    try:
        return copy.deepcopy(_BUILTINS[name]())
    except KeyError:
        raise InputError(
            f"unknown built-in cluster {name!r} (known: {', '.join(BUILTIN_CLUSTERS)})", "cluster"
        ) from None


def builtin_cluster(name: str = "default") -> NodeList:
    """A built-in cluster: ``default`` (40 nodes), ``small`` (4), ``alibaba2025`` (1,000)."""
    return load_cluster(builtin_template(name), f"builtin:{name}")


def cluster_template(
    spec: str | None, base_dir: str | os.PathLike[str] | None = None
) -> tuple[dict[str, Any], str, str]:
    """The template document a CLI value names (``None``/``default``/``builtin:NAME`` or a
    template path, relative to ``base_dir``, default the current directory), with its name
    for messages and the directory its machine paths are relative to."""
    if spec is None:
        spec = "builtin:default"
    if spec.startswith("builtin:"):
        name = spec.split(":", 1)[1]
        return builtin_template(name), f"builtin:{name}", os.getcwd()
    base = os.fspath(base_dir) if base_dir is not None else os.getcwd()
    path = spec if os.path.isabs(spec) else os.path.join(base, spec)
    if spec in _BUILTINS and not os.path.exists(path):
        return builtin_template(spec), f"builtin:{spec}", os.getcwd()
    data = read_yaml(path, "cluster template")
    if data is None:
        raise InputError("empty cluster template", spec)
    if not isinstance(data, Mapping):
        raise InputError(f"expected a mapping with a 'nodes' list, got {type(data).__name__}", spec)
    return dict(data), spec, os.path.dirname(os.path.abspath(path))


def template_variant(
    doc: Mapping[str, Any], *, scale: int = 1, kubelet: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """A template with every node group's ``count`` multiplied by ``scale`` and ``kubelet``
    merged over every node group's own ``kubelet`` section (so it wins over the machine
    spec's too): one template, many cluster sizes and Topology Manager settings. The
    document is checked by :func:`load_cluster` afterwards, as any template."""
    out = dict(doc)
    entries = doc.get("nodes")
    if isinstance(entries, Sequence) and not isinstance(entries, str | bytes):
        groups = []
        for entry in entries:
            if isinstance(entry, Mapping):
                entry = dict(entry)
                count = entry.get("count", 1)
                if scale != 1 and isinstance(count, int) and not isinstance(count, bool):
                    entry["count"] = count * scale
                if kubelet:
                    own = entry.get("kubelet")
                    entry["kubelet"] = {**(own if isinstance(own, Mapping) else {}), **kubelet}
            groups.append(entry)
        out["nodes"] = groups
    return out


def resolve_cluster(spec: str | None) -> NodeList:
    """A cluster from a CLI value: ``None``/``default``/``builtin:NAME`` or a template path."""
    doc, source, base = cluster_template(spec)
    return load_cluster(doc, source, base)


def cluster_capacity(nodes: Sequence[tuple[str, Machine]]) -> dict[str, int]:
    """Total capacity per resource (cpu millicores of online CPUs, memory bytes, devices)."""
    out: dict[str, int] = {}
    for _, m in nodes:
        out["cpu"] = out.get("cpu", 0) + 1000 * len(m.online_cpus)
        out["memory"] = out.get("memory", 0) + sum(n.memory for n in m.numa_nodes)
        for n in m.numa_nodes:
            for size, total in n.hugepages.items():
                key = hugepage_resource_name(size)
                out[key] = out.get(key, 0) + total
        for d in m.devices:
            if d.healthy:
                out[d.resource] = out.get(d.resource, 0) + 1
    return out
