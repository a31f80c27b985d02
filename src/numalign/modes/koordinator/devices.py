"""Koordinator's DeviceShare hints (``koordinator`` mode): GPUs, RDMA NICs and other devices.

Read from koordinator-sh/koordinator (main history, HEAD ``a7a1b76b``; written anew here):
``pkg/scheduler/plugins/deviceshare/topology_hint.go`` (``GetPodTopologyHints`` /
``generateTopologyHints``) and its test ``topology_hint_test.go`` ``TestPlugin_GetPodTopologyHints``.
What it does differently from the kubelet's device manager (:mod:`numalign.resources.devices`):

* **joint**: for every NUMA mask (``IterateBitMasks``) the allocator tries *all* the pod's device
  types inside the mask; a mask where that succeeds is a hint of every device type, so the GPU
  and the RDMA hint lists are the same masks (the kubelet hints each resource on its own);
* **preferred = fewest NUMA nodes feasible now**: ``minAffinitySize`` is the smallest mask whose
  trial allocation succeeded, shared by all device types (the kubelet sizes it from every device
  of the resource, free or not);
* **the node must hold the devices at all**: when the trial on all NUMA nodes fails the plugin
  answers an error status (numalign: every device type "cannot satisfy");
* **scores**: a hint whose GPU allocation equals the allocation on all NUMA nodes gets
  ``Score`` 500 (``defaultNUMAScore``, "bigger than 100 to make that device numa preference take
  precedence over cpu"), every other hint 0; the topology manager sums scores to break ties
  between equally narrow masks (:func:`numalign.modes.score_tie_break`). A pod without GPUs has
  500 on every hint (both allocations are empty).

numalign's forms: a device's NUMA nodes are its ``numa`` (Koordinator's Device CRD has one
``nodeID``); counts, not Koordinator's shared percentages (``gpu-core``, ``rdma`` units); the
trial allocation is the device manager's (aligned devices first, PCIe-root aware) - Koordinator's
allocator scores devices its own way, so which mask's GPUs equal the whole-node pick follows
numalign's allocator. Joint ``SamePCIe`` allocation (``scheduling.koordinator.sh/device-joint-allocate``)
is the profile's filter's (:func:`numalign.modes.koordinator.scheduling.joint_allocate`), not this provider's.
"""

from __future__ import annotations

from numalign.engine.bitmask import mask_of
from numalign.engine.hints import Demand, GeneratedHints, ProviderHints, ResourceHints, TopologyHint
from numalign.engine.merge_budget import Budget
from numalign.engine.merge_search import Family, min_size
from numalign.machine.model import Machine
from numalign.pods import Pod
from numalign.resources.devices import (
    DeviceManager,
    DeviceState,
    _DeviceError,
    mask_items,
    pod_limits,
)

#: ``defaultNUMAScore``: the Score of a hint whose GPUs are the whole-node choice
DEFAULT_NUMA_SCORE = 500


def is_gpu(resource: str) -> bool:
    """Koordinator's GPU device type under numalign's resource names (``nvidia.com/gpu``,
    ``koordinator.sh/gpu``, ...): what ``hashAllocateResult`` compares."""
    return resource.rsplit("/", 1)[-1].startswith("gpu")


class KoordinatorDeviceManager(DeviceManager):
    """The device manager's bookkeeping and allocation with DeviceShare's hints and scores."""

    def __init__(self, machine: Machine, state: DeviceState | None = None) -> None:
        super().__init__(machine, state)
        self._hinted: tuple[Pod, int] | None = None
        self._scores: dict[int, int] = {}
        self._whole: tuple[Pod, frozenset[tuple[str, str]] | None] | None = None

    def pod_hints(self, pod: Pod) -> ProviderHints:
        self._hinted, self._scores, self._whole = None, {}, None
        kubelet = super().pod_hints(pod)
        if not kubelet:
            return kubelet
        wanted = {r: n for r, n in self._requests(pod_limits(pod)).items() if kubelet.get(r) is not None}
        if not wanted or any(self.state.pod_devices(pod.uid, r) for r in wanted):
            return kubelet  # no topology, or already holding devices: the kubelet's answer
        out: dict[str, ResourceHints] = dict(kubelet)
        if any(isinstance(kubelet[r], list) and not kubelet[r] for r in wanted):
            return {**out, **{r: [] for r in wanted}}  # the node cannot hold them at all
        dims = []
        need = []
        for r in sorted(wanted):
            free = self._healthy(r) - self.state.in_use(r)
            # the free devices with a NUMA node, one item per distinct NUMA mask
            dims.append(mask_items(map(self._ix(r).mask.get, free)))
            need.append(wanted[r])
        demand = Demand(tuple(dims), tuple(need))
        nodes = self.machine.node_ids
        gen = GeneratedHints(nodes, mask_of(nodes), demand.feasible, 0, demand=demand)
        if gen.is_empty():
            return {**out, **{r: [] for r in wanted}}
        size = min_size(Family(gen), Budget())
        assert size is not None
        joint = GeneratedHints(nodes, mask_of(nodes), demand.feasible, size, demand=demand)
        for r in wanted:
            out[r] = joint
        self._hinted = (pod, len(wanted))
        return out

    # -- scores
    def _gpus_in(self, pod: Pod, affinity: int | None) -> frozenset[tuple[str, str]] | None:
        work = self.state.copy()
        try:
            for c in pod.containers:
                self._allocate_into(work, pod, c, TopologyHint(affinity, True))
        except _DeviceError:
            return None
        held = work.allocated.get(pod.uid, {})
        return frozenset((r, i) for per in held.values() for r, ids in per.items() if is_gpu(r) for i in ids)

    def mask_score(self, pod: Pod, mask: int) -> int:
        """``DEFAULT_NUMA_SCORE`` when the GPUs allocated inside ``mask`` are those allocated
        on all NUMA nodes, else 0 (one hint's ``Score``)."""
        if self._whole is None or self._whole[0] is not pod:
            self._whole = (pod, self._gpus_in(pod, mask_of(self.machine.node_ids)))
        whole = self._whole[1]
        here = self._gpus_in(pod, mask)
        return DEFAULT_NUMA_SCORE if whole is not None and here == whole else 0

    def hint_score(self, mask: int) -> int:
        """The summed ``Score`` this provider's hints give ``mask`` (one per device type)."""
        if self._hinted is None:
            return 0
        pod, lists = self._hinted
        if mask not in self._scores:
            self._scores[mask] = self.mask_score(pod, mask) * lists
        return self._scores[mask]


__all__ = ["DEFAULT_NUMA_SCORE", "KoordinatorDeviceManager", "is_gpu"]
