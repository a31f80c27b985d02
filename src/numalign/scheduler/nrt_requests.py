"""A pod's requests as scheduler-plugins' NodeResourceTopologyMatch reads them (the ``nrt-snn``
filter and scores): in NRT units, per container, and as one key (:attr:`NrtPodRequests.key`) under
which answers that read nothing else of the pod are kept. Made once for the last pod asked
about: a walk asks about one pod, node after node."""

from __future__ import annotations

from numalign.pods import Pod


def nrt_units(req: dict[str, int]) -> dict[str, int]:
    # NRT publishes cpu in whole CPUs; round a millicore request up like Quantity.Value()
    return {r: (-(-v // 1000) if r == "cpu" else v) for r, v in req.items()}


class NrtPodRequests:
    """A pod's requests in NRT units, per init and app container and for the pod, made for the
    last pod asked about (a walk asks the filter about one pod, node after node)."""

    __slots__ = ("app", "effective", "init", "key", "pod")

    def __init__(self, pod: Pod) -> None:
        self.pod = pod
        #: everything of the pod the NRT filter and scores read: QoS class, and per container
        #: (in order) its name, kind and requests
        self.key = (pod.qos, tuple((c.name, c.kind, tuple(c.requests.items())) for c in pod.containers))
        self.init = [nrt_units(dict(c.requests)) for c in pod.init_containers]
        self.app = [(c.name, nrt_units(dict(c.requests))) for c in pod.app_containers]
        self.effective: dict[str, int] | None = None


#: the last :class:`NrtPodRequests` made (read once into a local: threads may replace it)
_LAST_POD: list[NrtPodRequests | None] = [None]


def nrt_pod_requests(pod: Pod) -> NrtPodRequests:
    last = _LAST_POD[0]
    if last is not None and last.pod is pod:
        return last
    got = _LAST_POD[0] = NrtPodRequests(pod)
    return got


__all__ = ["NrtPodRequests", "nrt_pod_requests", "nrt_units"]
