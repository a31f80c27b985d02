"""A KubeletConfiguration file (``kubelet.config.k8s.io/v1beta1``) as a machine spec's ``kubelet``
section.

The kubelet reads its configuration file as JSON (YAML converted to JSON) into typed Go fields,
so a value of the wrong type stops the kubelet. :func:`kubelet_section` does the same for the
fields numalign models, naming the field on error, and returns the mapping the machine spec
loader (:mod:`numalign.machine.spec`) parses as ``kubelet:``. Every other field of the
configuration (``address``, ``authentication``, ``cgroupDriver`` ...) is ignored: it does not
change NUMA alignment. :func:`with_kubelet_configuration` puts that section onto a machine.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from numalign.errors import InputError
from numalign.machine.model import Machine

__all__ = [
    "API_VERSION",
    "KIND",
    "MODELLED_FIELDS",
    "kubelet_section",
    "read_kubelet_configuration",
    "with_kubelet_configuration",
]

KIND = "KubeletConfiguration"
API_VERSION = "kubelet.config.k8s.io/v1beta1"


def _kind(value: object) -> str:
    return "null" if value is None else type(value).__name__


def _string(value: object, path: str) -> str:
    if not isinstance(value, str):
        raise InputError(f"expected a string, got {_kind(value)}", path)
    return value


def _string_map(value: object, path: str) -> dict[str, str]:
    """Go ``map[string]string``: a number or a boolean value is a type error (quote it)."""
    if not isinstance(value, Mapping):
        raise InputError(f"expected a mapping, got {_kind(value)}", path)
    out: dict[str, str] = {}
    for key, v in value.items():
        if not isinstance(key, str):
            raise InputError(f"field name {key!r} is not a string", path)
        if not isinstance(v, str):
            raise InputError(f"expected a string (quote it), got {_kind(v)} {v!r}", f"{path}.{key}")
        out[key] = v
    return out


def _bool_map(value: object, path: str) -> dict[str, bool]:
    if not isinstance(value, Mapping):
        raise InputError(f"expected a mapping, got {_kind(value)}", path)
    out: dict[str, bool] = {}
    for key, v in value.items():
        if not isinstance(key, str):
            raise InputError(f"field name {key!r} is not a string", path)
        if not isinstance(v, bool):
            raise InputError(f"expected true or false, got {v!r}", f"{path}.{key}")
        out[key] = v
    return out


def _integer(value: object, path: str) -> int:
    """A Go integer field (``maxPods`` is an int32): a JSON number without a fraction; its
    range is the machine spec's check."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"expected an integer, got {_kind(value)} {value!r}", path)
    return value


def _quantity(value: object, path: str) -> str | int | float:
    """A ``resource.Quantity``: a string or a JSON number."""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise InputError(f"expected a quantity, got {_kind(value)} {value!r}", path)
    return value


def _reserved_memory(value: object, path: str) -> list[dict[str, Any]]:
    if not isinstance(value, list):
        raise InputError(f"expected a list, got {_kind(value)}", path)
    out: list[dict[str, Any]] = []
    for i, item in enumerate(value):
        where = f"{path}[{i}]"
        if not isinstance(item, Mapping):
            raise InputError(f"expected a mapping, got {_kind(item)}", where)
        entry: dict[str, Any] = {}
        node = item.get("numaNode")
        if isinstance(node, bool) or not isinstance(node, int):
            raise InputError(f"expected an integer, got {_kind(node)}", f"{where}.numaNode")
        entry["numaNode"] = node
        limits = item.get("limits")
        if not isinstance(limits, Mapping):
            raise InputError(f"expected a mapping, got {_kind(limits)}", f"{where}.limits")
        entry["limits"] = {
            str(k): _quantity(v, f"{where}.limits.{k}") for k, v in limits.items()
        }
        out.append(entry)
    return out


#: KubeletConfiguration field -> the check that gives its value for the machine spec's section
MODELLED_FIELDS: dict[str, Callable[[object, str], Any]] = {
    "topologyManagerPolicy": _string,
    "topologyManagerScope": _string,
    "topologyManagerPolicyOptions": _string_map,
    "cpuManagerPolicy": _string,
    "cpuManagerPolicyOptions": _string_map,
    "reservedSystemCPUs": _string,
    "memoryManagerPolicy": _string,
    "reservedMemory": _reserved_memory,
    "kubeReserved": _string_map,
    "systemReserved": _string_map,
    "evictionHard": _string_map,
    "maxPods": _integer,
    "featureGates": _bool_map,
}


def kubelet_section(config: object, source: str = "kubelet config") -> dict[str, Any]:
    """The machine spec ``kubelet:`` mapping of a parsed KubeletConfiguration document.

    ``kind`` and ``apiVersion``, when present, must be ``KubeletConfiguration`` and
    ``kubelet.config.k8s.io/v1beta1``. Errors: ``<source>: <field>: <problem>``.
    """
    try:
        if not isinstance(config, Mapping):
            raise InputError(f"a {KIND} must be a mapping, got {_kind(config)}")
        kind = config.get("kind")
        if kind is not None and kind != KIND:
            raise InputError(f"expected {KIND}, got {kind!r}", "kind")
        api = config.get("apiVersion")
        if api is not None and api != API_VERSION:
            raise InputError(f"expected {API_VERSION}, got {api!r}", "apiVersion")
        section: dict[str, Any] = {}
        for name, check in MODELLED_FIELDS.items():
            value = config.get(name)
            if value is not None:  # null = unset, as in the kubelet's JSON decoding
                section[name] = check(value, name)
        return section
    except InputError as e:
        raise InputError(e.problem, f"{source}: {e.field}" if e.field else source) from None


def read_kubelet_configuration(path: str) -> dict[str, Any]:
    """:func:`kubelet_section` of a KubeletConfiguration YAML (or JSON) file."""
    from numalign.inputs.documents import read_yaml

    doc = read_yaml(path, "kubelet config")
    if doc is None:
        raise InputError("empty kubelet config", path)
    return kubelet_section(doc, path)


def with_kubelet_configuration(machine: Machine, section: Mapping[str, Any], source: str) -> Machine:
    """``machine`` with its kubelet section replaced by ``section`` (checked by the spec loader,
    so reserved CPUs and NUMA nodes must exist on this machine). A KubeletConfiguration has no
    version: the machine's ``kubeletVersion`` stays unless ``section`` gives one."""
    from numalign.machine.spec import dump_machine, load_machine

    doc = dump_machine(machine)
    kept = doc["kubelet"].get("kubeletVersion")
    doc["kubelet"] = dict(section)
    if kept is not None:
        doc["kubelet"].setdefault("kubeletVersion", kept)
    return load_machine(doc, source)
