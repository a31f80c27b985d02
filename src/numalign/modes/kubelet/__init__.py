"""The kubelet as an engine mode: the Topology Manager with the kubelet's own CPU, memory and
device managers (:mod:`numalign.resources`), the node's policy, or each pod's own on a
``dynamic`` node (KEP-693)."""
