"""The kubelet's device manager (``devicemanager``): topology hints and device allocation.

Behaviour follows ``pkg/kubelet/cm/devicemanager/topology_hints.go`` and ``manager.go``
(spec section 5):

* a container's device requests are its ``limits`` of device-plugin resources (resources the
  machine has devices of, or that are still allocated in the state); pod scope uses the
  pod-effective limits (init/sidecar max rule, spec section 7);
* a resource none of whose devices reports a NUMA node -> ``None`` (no preference);
* already allocated to the container (pod scope: to the pod) -> regenerated from those
  devices, or ``[]`` when the count differs;
* available = healthy - allocated (container scope: plus the devices of this pod's regular
  init containers, ``devicesToReuse``); fewer than requested -> ``[]``;
* ``generateDeviceTopologyHints``: a mask qualifies iff every reusable device that has a NUMA
  node touches it and (reusable devices with a NUMA node) + (available devices touching it)
  >= request; preferred iff its popcount equals the smallest mask touching at least
  ``request`` devices of the resource, healthy or not. Both conditions are monotone, so the
  hints are a :class:`~numalign.engine.hints.GeneratedHints` over the NUMA nodes the masks are
  made of: every NUMA node of the machine (kubelet <= 1.35), or with ``device_numa_only`` the
  NUMA nodes of the resource's registered devices, every node when they report none (1.36,
  kubernetes#138244 ``deviceNUMANodes``). ``minAffinitySize`` starts at the number of those
  nodes. The preferred hints are the same either way; 1.36 drops the non-preferred masks that
  hold a NUMA node without devices of the resource.

Allocation (``devicesToAllocate`` + ``filterByAffinity``) takes, per resource: the reusable
init-container devices first, then devices with a NUMA node in the hint, then devices whose
NUMA nodes are all outside the hint, then devices without NUMA information (the kubelet's own
order: ``aligned``, ``unaligned``, ``noAffinity``; no device plugin ``GetPreferredAllocation``
is modelled). The kubelet picks inside each class in Go set order (random); numalign is
deterministic: inside a class it prefers a device sharing a ``pcie_root`` with devices
already chosen for this container, else it starts the PCIe root that best fits the remaining
count (the smallest root that can hold it all, else the largest), ties broken by the natural
order of device ids (``gpu2`` before ``gpu10``; ids of equal natural order, ``gpu01`` and
``gpu1``, by their text). Class order is never traded for PCIe locality, so alignment to the
hint is kept whenever the kubelet would keep it.

The work is linear in the devices (and a logarithm): each machine has a
:class:`ResourceIndex` per resource, made once (natural rank, NUMA mask, PCIe root of every
device); hints count devices per distinct NUMA mask; the PCIe-aware pick keeps the roots in use
in a heap of their next devices and the roots not yet started in buckets by size
(``tests/test_devices_linear.py`` checks the decisions against the former quadratic code and
counts the work).

Extended resources no device plugin ever registered (the machine has no device of them, and
none is allocated in the state): the kubelet's device manager skips them
(``isDevicePluginResource``) and its predicate admission drops "missing extended resources", so
such a pod is admitted without devices. ``cannot allocate unregistered device <name>`` is only
for a resource the manager knows from its state whose devices are gone (a plugin that did not
come back after a restart); ``no healthy devices present`` for one whose devices are all
unhealthy.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Mapping
from heapq import heappop, heappush
from typing import Any

from numalign.engine.bitmask import mask_of
from numalign.engine.hints import Demand, GeneratedHints, ProviderHints, ResourceHints, TopologyHint
from numalign.engine.merge_budget import Budget
from numalign.engine.merge_search import Family, min_size
from numalign.errors import InputError, StateError, UnexpectedAdmissionError
from numalign.machine.model import Device, Machine
from numalign.pods import Container, ContainerKind, Pod
from numalign.record import Record
from numalign.resources.device_index import (
    EMPTY_INDEX,
    ResourceIndex,
    device_sort_key,
    machine_index,
    mask_items,
)
from numalign.resources.sharing import check_sharing

__all__ = [
    "DeviceManager",
    "DeviceState",
    "ResourceIndex",
    "device_sort_key",
    "generate_hints",
    "is_extended_resource",
    "machine_index",
    "mask_items",
    "pod_limits",
]


def is_extended_resource(name: str) -> bool:
    """Kubernetes ``IsExtendedResourceName``: a domain-prefixed name outside kubernetes.io."""
    if "/" not in name or name.startswith("requests."):
        return False
    domain = name.split("/", 1)[0]
    return not (domain == "kubernetes.io" or domain.endswith(".kubernetes.io"))


def pod_limits(pod: Pod) -> dict[str, int]:
    """Pod-effective limits (``resource.PodLimits`` without overhead): per resource
    max(max over regular init containers of (its limit + earlier sidecars), sum of app
    containers + sidecars)."""
    sidecars: dict[str, int] = {}
    init_max: dict[str, int] = {}
    for c in pod.init_containers:
        for r, q in c.limits.items():
            if c.kind is ContainerKind.SIDECAR:
                sidecars[r] = sidecars.get(r, 0) + q
            else:
                init_max[r] = max(init_max.get(r, 0), sidecars.get(r, 0) + q)
    out: dict[str, int] = {}
    for c in pod.app_containers:
        for r, q in c.limits.items():
            out[r] = out.get(r, 0) + q
    for r, q in sidecars.items():
        out[r] = out.get(r, 0) + q
    for r, q in init_max.items():
        out[r] = max(out.get(r, 0), q)
    return out


# --------------------------------------------------------------------------------------------
# State
# --------------------------------------------------------------------------------------------


class DeviceState(Record):
    """Which devices each container holds, and the devices each pod may reuse.

    ``allocated``: pod uid -> container -> resource -> device ids (natural order).
    ``reusable``: the kubelet's in-memory ``devicesToReuse`` (pod uid -> resource -> ids):
    devices of a pod's regular init containers that its later containers take first.
    """

    __slots__ = ("allocated", "reusable")
    allocated: dict[str, dict[str, dict[str, list[str]]]]
    reusable: dict[str, dict[str, set[str]]]

    def __init__(
        self,
        allocated: dict[str, dict[str, dict[str, list[str]]]] | None = None,
        reusable: dict[str, dict[str, set[str]]] | None = None,
    ) -> None:
        self.allocated = {} if allocated is None else allocated
        self.reusable = {} if reusable is None else reusable

    def copy(self) -> DeviceState:
        return DeviceState(
            {
                p: {c: {r: list(ids) for r, ids in rs.items()} for c, rs in cs.items()}
                for p, cs in self.allocated.items()
            },
            {p: {r: set(ids) for r, ids in rs.items()} for p, rs in self.reusable.items()},
        )

    def container_devices(self, pod_uid: str, container: str, resource: str) -> list[str]:
        return self.allocated.get(pod_uid, {}).get(container, {}).get(resource, [])

    def pod_devices(self, pod_uid: str, resource: str) -> set[str]:
        out: set[str] = set()
        for rs in self.allocated.get(pod_uid, {}).values():
            out.update(rs.get(resource, ()))
        return out

    def in_use(self, resource: str) -> set[str]:
        """kubelet ``allocatedDevices[resource]``."""
        out: set[str] = set()
        for cs in self.allocated.values():
            for rs in cs.values():
                out.update(rs.get(resource, ()))
        return out

    def resources(self) -> set[str]:
        return {r for cs in self.allocated.values() for rs in cs.values() for r in rs}

    # -- readers (the kubelet's podDevices): nobody outside resources/ reads the tables ----

    def pod_allocations(self, pod_uid: str) -> dict[str, dict[str, list[str]]]:
        """Container name -> resource -> device ids of one pod."""
        return {
            c: {r: list(ids) for r, ids in rs.items()}
            for c, rs in self.allocated.get(pod_uid, {}).items()
        }

    def pod_uids(self) -> frozenset[str]:
        return frozenset(self.allocated)

    def taken(self) -> frozenset[tuple[str, str]]:
        """Every ``(resource, device id)`` held by some container."""
        return frozenset(
            (r, d) for cs in self.allocated.values() for rs in cs.values()
            for r, ids in rs.items() for d in ids
        )

    # -- writers used for usage observed elsewhere (an NRT, podresources) ------------------

    def occupy(self, pod_uid: str, container: str, resource: str, ids: list[str]) -> None:
        """Record devices ``ids`` of ``resource`` as held by ``pod_uid``/``container``."""
        busy = (self.in_use(resource) - self.pod_devices(pod_uid, resource)) & set(ids)
        if busy:
            raise InputError(f"devices {sorted(busy)} are already allocated", resource)
        per = self.allocated.setdefault(pod_uid, {}).setdefault(container, {})
        per[resource] = sorted([*per.get(resource, []), *ids], key=device_sort_key)

    def to_dict(self) -> dict[str, Any]:
        """``{"allocated": {pod: {container: {resource: [ids]}}}}``.

        ``reusable`` is left out: like the kubelet's ``devicesToReuse`` it is admission
        scratch (dropped for every other pod when a pod is allocated), not checkpointed.
        """
        return {
            "allocated": {
                p: {
                    c: {r: sorted(ids, key=device_sort_key) for r, ids in sorted(rs.items())}
                    for c, rs in cs.items()
                }
                for p, cs in self.allocated.items()
            },
        }

    @staticmethod
    def from_dict(d: Mapping[str, Any]) -> DeviceState:
        if not isinstance(d, Mapping):
            raise InputError("device state must be an object")
        try:
            allocated = {
                str(p): {
                    str(c): {str(r): [str(i) for i in ids] for r, ids in rs.items()}
                    for c, rs in cs.items()
                }
                for p, cs in (d.get("allocated") or {}).items()
            }
        except (AttributeError, TypeError) as e:
            raise InputError(f"invalid device state: {e}") from None
        return DeviceState(allocated, {})


# --------------------------------------------------------------------------------------------
# Hints
# --------------------------------------------------------------------------------------------


def _min_affinity_size(nodes: list[int], items: tuple[tuple[int, int], ...], request: int) -> int:
    """Smallest popcount of a mask touching at least ``request`` of the devices (kubelet
    ``minAffinitySize``, initialised to the number of NUMA nodes). The same search as the
    merge's: ``items`` are (mask, device count), no mask is listed."""
    n = len(nodes)
    if request <= 0:
        return 1 if n else 0
    if sum(c for _, c in items) < request:
        return n
    demand = Demand((items,), (request,))
    gen = GeneratedHints(tuple(nodes), mask_of(nodes), demand.feasible, 1, demand=demand)
    found = min_size(Family(gen), Budget())
    return n if found is None else found


def _hints_of(
    nodes: Iterable[int],
    all_items: tuple[tuple[int, int], ...],
    available: tuple[tuple[int, int], ...],
    reuse_masks: list[int],
    request: int,
) -> ResourceHints:
    node_list = sorted(nodes)
    preferred = _min_affinity_size(node_list, all_items, request)
    # as data: one item per distinct NUMA mask of the available devices (worth their count),
    # the reusable devices' nodes touched
    demand = Demand((available,), (request - len(reuse_masks),), touch=tuple(reuse_masks))
    gen = GeneratedHints(
        nodes=tuple(node_list),
        universe=mask_of(node_list),
        feasible=demand.feasible,
        preferred_size=preferred,
        demand=demand,
    )
    if gen.is_empty():
        return []
    return gen


def generate_hints(
    nodes: Iterable[int],
    all_devices: Iterable[Device],
    available: Iterable[Device],
    reusable: Iterable[Device],
    request: int,
) -> ResourceHints:
    """kubelet ``generateDeviceTopologyHints`` as a rule (``[]`` when no mask qualifies)."""
    return _hints_of(
        nodes,
        mask_items(mask_of(d.numa) for d in all_devices),
        mask_items(mask_of(d.numa) for d in available),
        [mask_of(d.numa) for d in reusable if d.numa],
        request,
    )


# --------------------------------------------------------------------------------------------
# The manager
# --------------------------------------------------------------------------------------------


class _DeviceError(Exception):
    pass


class DeviceManager:
    """The kubelet device manager as a numalign provider (``name = "devices"``)."""

    name = "devices"

    def __init__(
        self,
        machine: Machine,
        state: DeviceState | None = None,
        device_numa_only: bool = False,
    ) -> None:
        self.machine = machine
        self.state = state if state is not None else DeviceState()
        self._index = machine_index(machine)
        #: hints over the NUMA nodes of the resource's devices (kubernetes#138244, 1.36)
        self.device_numa_only = device_numa_only

    def validate_state(self, kinds: Mapping[str, Mapping[str, str]] | None = None) -> None:
        """A loaded state must name devices the machine has, and no device may be held by two
        pods. Within a pod, several containers hold one device only as the kubelet's
        ``devicesToReuse`` hands it on: regular init containers, then at most one other
        container (its devices leave the reusable set). ``kinds``: pod uid -> container ->
        ``init``/``sidecar``/``app`` where the state knows it (a holder of unknown kind is not
        judged)."""
        owner: dict[tuple[str, str], str] = {}
        holders: dict[tuple[str, str], list[str]] = {}
        for uid, per_container in self.state.allocated.items():
            for cname, per_res in per_container.items():
                for res, ids in per_res.items():
                    for i in ids:
                        if i not in self._ix(res).by_id:
                            raise StateError(
                                f"pod {uid} container {cname}: device {res}/{i} is not on this machine"
                            )
                        other = owner.setdefault((res, i), uid)
                        if other != uid:
                            raise StateError(f"device {res}/{i} is held by pods {other} and {uid}")
                        holders.setdefault((res, i), []).append(cname)
        for (res, i), names in holders.items():
            if len(names) > 1:
                uid = owner[(res, i)]
                check_sharing(f"device {res}/{i}", uid, names, (kinds or {}).get(uid))

    # -- helpers -------------------------------------------------------------------------

    def _ix(self, resource: str) -> ResourceIndex:
        return self._index.get(resource, EMPTY_INDEX)

    def is_device_resource(self, resource: str) -> bool:
        """kubelet ``isDevicePluginResource``: registered, or still allocated."""
        return resource in self._index or resource in self.state.resources()

    def _has_topology(self, resource: str) -> bool:
        return self._ix(resource).topology

    def _healthy(self, resource: str) -> frozenset[str]:
        return self._ix(resource).healthy

    def _device(self, resource: str, device_id: str) -> Device:
        d = self._ix(resource).by_id.get(device_id)
        return d if d is not None else Device(resource, device_id)

    def _requests(self, limits: Mapping[str, int]) -> dict[str, int]:
        return {r: int(q) for r, q in limits.items() if self.is_device_resource(r)}

    def _generate(
        self, resource: str, available: Iterable[str], reusable: Iterable[str], request: int
    ) -> ResourceHints:
        ix = self._ix(resource)
        mask = ix.mask.get
        return _hints_of(
            self.hint_nodes(resource),
            ix.all_items,
            mask_items(map(mask, available)),
            [m for m in map(mask, reusable) if m],
            request,
        )

    def hint_nodes(self, resource: str) -> tuple[int, ...]:
        """The NUMA nodes this kubelet enumerates masks over for ``resource``'s hints: the
        machine's, or (``device_numa_only``) those of the resource's registered devices that the
        machine has, the machine's when there are none (kubelet ``deviceNUMANodes``)."""
        nodes = self.machine.node_ids
        if not self.device_numa_only:
            return nodes
        held = 0
        for m, _ in self._ix(resource).all_items:
            held |= m
        own = tuple(n for n in nodes if held >> n & 1)
        return own or nodes

    # -- hints ---------------------------------------------------------------------------

    def container_hints(self, pod: Pod, container: Container) -> ProviderHints:
        out: dict[str, ResourceHints] = {}
        for resource, requested in sorted(self._requests(container.limits).items()):
            if not self._has_topology(resource):
                out[resource] = None
                continue
            allocated = self.state.container_devices(pod.uid, container.name, resource)
            if allocated:
                if len(allocated) != requested:
                    out[resource] = []
                else:
                    out[resource] = self._generate(resource, allocated, (), requested)
                continue
            available = self._healthy(resource) - self.state.in_use(resource)
            reusable = self.state.reusable.get(pod.uid, {}).get(resource, set())
            if len(available | reusable) < requested:
                out[resource] = []
                continue
            out[resource] = self._generate(resource, available, reusable, requested)
        return out

    def pod_hints(self, pod: Pod) -> ProviderHints:
        out: dict[str, ResourceHints] = {}
        for resource, requested in sorted(self._requests(pod_limits(pod)).items()):
            if not self._has_topology(resource):
                out[resource] = None
                continue
            allocated = self.state.pod_devices(pod.uid, resource)
            if allocated:
                if len(allocated) != requested:
                    out[resource] = []
                else:
                    out[resource] = self._generate(resource, allocated, (), requested)
                continue
            available = self._healthy(resource) - self.state.in_use(resource)
            if len(available) < requested:
                out[resource] = []
                continue
            out[resource] = self._generate(resource, available, (), requested)
        return out

    # -- allocation ----------------------------------------------------------------------

    def allocate(self, pod: Pod, container: Container, hint: TopologyHint) -> None:
        """kubelet ``ManagerImpl.Allocate``; raises UnexpectedAdmissionError, state untouched."""
        work = self.state.copy()
        try:
            self._allocate_into(work, pod, container, hint)
        except _DeviceError as e:
            raise UnexpectedAdmissionError(str(e)) from None
        self.state.allocated = work.allocated
        self.state.reusable = work.reusable

    def _sorted(self, resource: str, ids: Iterable[str]) -> list[str]:
        """``ids`` in natural order (ids the machine lacks: by :func:`device_sort_key`, last)."""
        rank = self._ix(resource).rank
        known = [i for i in ids if i in rank]
        unknown = [i for i in ids if i not in rank] if not isinstance(ids, list) or len(known) != len(ids) else []
        known.sort(key=rank.__getitem__)
        if unknown:
            known += sorted(unknown, key=lambda i: (device_sort_key(i), i))
        return known

    def _allocate_into(
        self, st: DeviceState, pod: Pod, container: Container, hint: TopologyHint
    ) -> None:
        reuse = st.reusable.setdefault(pod.uid, {})
        for uid in list(st.reusable):
            if uid != pod.uid:
                del st.reusable[uid]
        for resource, needed in sorted(self._requests(container.limits).items()):
            chosen = self._devices_to_allocate(
                st, pod.uid, container.name, resource, needed, reuse.get(resource, set()), hint
            )
            if chosen:
                entry = st.allocated.setdefault(pod.uid, {}).setdefault(container.name, {})
                entry[resource] = self._sorted(resource, set(entry.get(resource, [])) | set(chosen))
        mine = st.allocated.get(pod.uid, {}).get(container.name, {})
        if container.kind is ContainerKind.INIT:
            for r, ids in mine.items():
                reuse.setdefault(r, set()).update(ids)
        else:
            for r, ids in mine.items():
                if r in reuse:
                    reuse[r].difference_update(ids)

    def _devices_to_allocate(
        self,
        st: DeviceState,
        pod_uid: str,
        container: str,
        resource: str,
        required: int,
        reusable: set[str],
        hint: TopologyHint,
    ) -> list[str]:
        needed = required
        previous = st.allocated.get(pod_uid, {}).get(container, {}).get(resource)
        if previous is not None:
            needed -= len(previous)
            if needed != 0:
                raise _DeviceError(
                    f'pod "{pod_uid}" container "{container}" changed request for resource '
                    f'"{resource}" from {len(previous)} to {required}'
                )
        if resource not in self._index:
            raise _DeviceError(f"cannot allocate unregistered device {resource}")
        healthy = self._healthy(resource)
        if not healthy:
            raise _DeviceError(
                f"no healthy devices present; cannot allocate unhealthy devices {resource}"
            )
        if previous is not None and not set(previous) <= healthy:
            raise _DeviceError(
                f"previously allocated devices are no longer healthy; cannot allocate unhealthy devices {resource}"
            )
        if needed == 0:
            return []
        chosen: list[str] = []
        # 1. devices of this pod's init containers (unhealthy ones are never handed out)
        for d in self._sorted(resource, reusable & healthy):
            if needed == 0:
                return chosen
            chosen.append(d)
            needed -= 1
        if needed == 0:
            return chosen
        available = healthy - st.in_use(resource) - set(chosen)
        if len(available) < needed:
            raise _DeviceError(
                f"requested number of devices unavailable for {resource}. "
                f"Requested: {needed}, Available: {len(available)}"
            )
        aligned, unaligned, no_affinity = self._filter_by_affinity(resource, available, hint)
        for group in (aligned, unaligned, no_affinity):
            needed = self._take(resource, group, needed, chosen)
            if needed == 0:
                return chosen
        raise _DeviceError(
            f"unexpectedly allocated less resources than required. Requested: {required}, "
            f"Got: {required - needed}"
        )

    def _filter_by_affinity(
        self, resource: str, available: set[str] | frozenset[str], hint: TopologyHint
    ) -> tuple[list[str], list[str], list[str]]:
        """kubelet ``filterByAffinity``: aligned (some NUMA node in the hint), unaligned (NUMA
        nodes, none in the hint), no affinity (no NUMA node); everything is "no affinity"
        when the resource has no topology or the hint has no affinity. Each in natural order."""
        ix = self._ix(resource)
        ids = ix.natural(available)
        if not ix.topology or hint.affinity is None:
            return [], [], ids
        affinity = hint.affinity
        mask = ix.mask
        aligned: list[str] = []
        unaligned: list[str] = []
        none: list[str] = []
        for i in ids:
            m = mask[i]
            if not m:
                none.append(i)
            elif m & affinity:
                aligned.append(i)
            else:
                unaligned.append(i)
        return aligned, unaligned, none

    def _take(self, resource: str, group: list[str], needed: int, chosen: list[str]) -> int:
        """Pick up to ``needed`` devices of one class (``group``, in natural order), PCIe-root
        aware (see module doc); appends them to ``chosen``, returns how many are still needed.

        The rule, pick by pick: the first device (natural order) whose PCIe root is already
        among the chosen devices' roots; if there is none, the first device of the root
        group that best fits the remaining count - the smallest group holding it all, else
        the largest, ties to the group whose first device comes first (a device without a
        root is a group of its own). Linear in the group (and a logarithm): the groups are
        made once; a root in use gives its devices in order through a heap of group heads;
        groups not yet started keep their full size, so they wait in buckets by size, each
        bucket in order of their first devices, and the fitting size is a bisection."""
        if needed <= 0 or not group:
            return needed
        ix = self._ix(resource)
        root_of = ix.root
        if not ix.rooted:  # every device a group of its own: in order
            take = group[:needed]
            chosen += take
            return needed - len(take)
        roots = {root_of.get(c) for c in chosen}
        roots.discard(None)
        members: dict[object, list[int]] = {}  # group key -> positions in ``group``, ascending
        for pos, i in enumerate(group):
            r = root_of.get(i)
            members.setdefault(r if r is not None else (None, pos), []).append(pos)
        active: list[tuple[int, int, object]] = []  # (position of head, index in its list, key)
        buckets: dict[int, list[object]] = {}  # size -> keys of unstarted groups, by first position
        for key, positions in members.items():
            if key in roots:
                heappush(active, (positions[0], 0, key))
            else:
                buckets.setdefault(len(positions), []).append(key)
        sizes = sorted(buckets)
        heads = dict.fromkeys(sizes, 0)  # size -> next unstarted group in its bucket
        while needed > 0:
            if active:
                pos, k, key = heappop(active)
            elif sizes:
                j = bisect_left(sizes, needed)
                size = sizes[j] if j < len(sizes) else sizes[-1]
                key = buckets[size][heads[size]]
                heads[size] += 1
                if heads[size] == len(buckets[size]):
                    sizes.remove(size)
                k = 0
                pos = members[key][0]
            else:
                break
            positions = members[key]
            if k + 1 < len(positions):  # its root is in use now: its next device is a head
                heappush(active, (positions[k + 1], k + 1, key))
            chosen.append(group[pos])
            needed -= 1
        return needed

    # -- release -------------------------------------------------------------------------

    def release_container(self, pod_uid: str, container_name: str) -> None:
        pod = self.state.allocated.get(pod_uid)
        if pod is None or container_name not in pod:
            return
        del pod[container_name]
        if not pod:
            del self.state.allocated[pod_uid]
        reuse = self.state.reusable.get(pod_uid)
        if reuse:
            for r in list(reuse):
                reuse[r] &= self.state.pod_devices(pod_uid, r)

    def release_pod(self, pod_uid: str) -> None:
        self.state.allocated.pop(pod_uid, None)
        self.state.reusable.pop(pod_uid, None)
