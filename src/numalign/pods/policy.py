"""A pod's own topology policy (KEP-693 ``dynamic`` nodes; Volcano and Koordinator pods).

Sources, first found wins:

1. ``spec.topologyPolicy`` - the per-pod field KEP-693 sketches (``none``, ``best-effort``,
   ``restricted``, ``single-numa-node``, ``pod-level-single-numa-node``);
2. annotation ``volcano.sh/numa-topology-policy`` - kubelet policy names;
3. annotation ``scheduling.koordinator.sh/numa-topology-spec`` - JSON
   ``{"numaTopologyPolicy": "SingleNUMANode", "singleNUMANodeExclusive": "Required"}``.
"""

from __future__ import annotations

from numalign.engine.policies import Policy, Scope, parse_policy
from numalign.errors import InputError
from numalign.inputs.documents import loads_json
from numalign.pods import Pod

VOLCANO_ANNOTATION = "volcano.sh/numa-topology-policy"
KOORDINATOR_ANNOTATION = "scheduling.koordinator.sh/numa-topology-spec"


def pod_policy(pod: Pod) -> tuple[Policy, Scope | None] | None:
    """The policy the pod asks for, or ``None`` if it asks for none."""
    if pod.topology_policy is not None:
        return parse_policy(pod.topology_policy, f"{pod.key}: spec.topologyPolicy")
    ann = pod.annotations
    if VOLCANO_ANNOTATION in ann:
        return parse_policy(ann[VOLCANO_ANNOTATION], f"{pod.key}: metadata.annotations[{VOLCANO_ANNOTATION}]")
    if KOORDINATOR_ANNOTATION in ann:
        field = f"{pod.key}: metadata.annotations[{KOORDINATOR_ANNOTATION}]"
        spec = loads_json(ann[KOORDINATOR_ANNOTATION], field)
        if not isinstance(spec, dict):
            raise InputError("must be a JSON object", field)
        value = spec.get("numaTopologyPolicy", "")
        return parse_policy(value, f"{field}.numaTopologyPolicy")
    return None
