"""The kubelet's predicate admission: does the pod fit the node at all?

The kubelet admits a pod in two steps; numalign's :class:`~numalign.node.admission.Node`
runs both, in the kubelet's order (``node/rules.py`` ``ADMISSION_CHAIN``). This module is the
second, after the Topology Manager's resource allocation handler: the ``predicateAdmitHandler``
(``pkg/kubelet/lifecycle/predicate.go``), whose resource part is the scheduler's
``NodeResourcesFit`` ``fitsRequest`` (``pkg/scheduler/framework/plugins/noderesources/fit.go``)
over the node's allocatable (:func:`numalign.machine.allocatable.node_allocatable`) and the
requests of the pods already admitted:

* the pod count first: one more pod than ``maxPods`` -> ``OutOfpods``;
* a pod requesting nothing (all zero) fits once the count fits;
* then cpu, memory, ephemeral-storage, then every other resource with a non-zero request
  (hugepages, devices), in name order (the kubelet walks a Go map: only *which* reason is
  reported first can differ when several are short);
* extended resources the node does not have at all are dropped from the request first
  (``removeMissingExtendedResources``: cluster-level resources); hugepages are native, so a
  size the node lacks is short;
* ephemeral-storage is not checked: numalign models no disks (document it, do not guess).

A pod's request is its effective request (``resourcehelper.PodRequests``: init containers
as a running maximum, sidecars added, pod overhead not modelled) - the one
:func:`numalign.pods.effective_pod_requests` computes.

The first failure becomes the rejection: reason ``OutOfcpu``, ``OutOfmemory``, ``OutOfpods``
or ``OutOf<resource>``, message ``Node didn't have enough resource: cpu, requested: 1000,
used: 127000, capacity: 128000`` (units: millicores, bytes, counts).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from numalign.inputs.quantity import CPU, MEMORY
from numalign.machine.allocatable import PODS, node_allocatable
from numalign.machine.model import Machine
from numalign.record import Record, set_field

EPHEMERAL_STORAGE = "ephemeral-storage"
_FIRST = (CPU, MEMORY)


class Insufficient(Record, frozen=True):
    """One resource the node is short of (kubelet ``InsufficientResourceError``)."""

    __slots__ = ("resource", "requested", "used", "capacity")
    resource: str
    requested: int
    used: int
    capacity: int

    def __init__(self, resource: str, requested: int, used: int, capacity: int) -> None:
        set_field(self, "resource", resource)
        set_field(self, "requested", requested)
        set_field(self, "used", used)
        set_field(self, "capacity", capacity)

    @property
    def reason(self) -> str:
        return f"OutOf{self.resource}"

    @property
    def message(self) -> str:
        return (
            f"Node didn't have enough resource: {self.resource}, requested: {self.requested}, "
            f"used: {self.used}, capacity: {self.capacity}"
        )


def is_extended_resource(name: str) -> bool:
    """Outside the kubernetes.io namespace and not ``requests.*`` (kubelet
    ``IsExtendedResourceName``)."""
    if "/" not in name or name.startswith("requests."):
        return False
    prefix = name.split("/", 1)[0]
    return not (prefix == "kubernetes.io" or prefix.endswith(".kubernetes.io"))


def _order(names: Iterable[str]) -> list[str]:
    rest = sorted(n for n in names if n not in _FIRST and n != EPHEMERAL_STORAGE)
    return [n for n in _FIRST if n in names] + rest


def fits(
    allocatable: Mapping[str, int],
    request: Mapping[str, int],
    used: Mapping[str, int],
    pods: int,
) -> list[Insufficient]:
    """Every shortage of a pod asking ``request`` on a node with ``allocatable`` where
    ``pods`` pods requesting ``used`` together are admitted; [] = it fits."""
    out: list[Insufficient] = []
    allowed = allocatable.get(PODS, 0)
    if pods + 1 > allowed:
        out.append(Insufficient(PODS, 1, pods, allowed))
    wanted = {
        r: v for r, v in request.items()
        if v > 0 and r != EPHEMERAL_STORAGE and not (is_extended_resource(r) and r not in allocatable)
    }
    for name in _order(wanted):
        have, taken = allocatable.get(name, 0), used.get(name, 0)
        if have < wanted[name] + taken:
            out.append(Insufficient(name, wanted[name], taken, have))
    return out


def node_fit(
    machine: Machine | Mapping[str, int],
    request: Mapping[str, int],
    admitted: Iterable[Mapping[str, int]],
) -> list[Insufficient]:
    """:func:`fits` on ``machine``'s allocatable (or an allocatable computed before) with the
    requests of the ``admitted`` pods."""
    allocatable = machine if isinstance(machine, Mapping) else node_allocatable(machine)
    used: dict[str, int] = {}
    count = 0
    for r in admitted:
        count += 1
        for name, v in r.items():
            used[name] = used.get(name, 0) + v
    return fits(allocatable, request, used, count)
