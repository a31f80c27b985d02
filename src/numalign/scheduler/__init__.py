"""Cluster scheduling on top of the node engine: snapshot, filters, scorers, profiles.

The ``numalign`` profile's filter *is* the node's admission (``Node.plan``), so a pod it
places is admitted by the node with the predicted affinity. The other profiles reproduce
what topology-blind or approximate schedulers do, for comparison in the simulator.

Names load on first use, so a scheduler family's plug-in (``numalign.modes.<family>``) can
import the framework's modules (filters, scorers) that the profile table imports it from.
"""

from typing import TYPE_CHECKING

from numalign.lazy_exports import lazy_getattr

_EXPORTS = {
    "Cluster": "numalign.scheduler.cluster",
    "ClusterNode": "numalign.scheduler.cluster",
    "PROFILES": "numalign.scheduler.profiles",
    "Profile": "numalign.scheduler.profiles",
    "get_profile": "numalign.scheduler.profiles",
    "Placement": "numalign.scheduler.scheduler",
    "Scheduler": "numalign.scheduler.scheduler",
}

__getattr__ = lazy_getattr(__name__, _EXPORTS)

__all__ = ["PROFILES", "Cluster", "ClusterNode", "Placement", "Profile", "Scheduler", "get_profile"]

if TYPE_CHECKING:
    from numalign.scheduler.cluster import Cluster, ClusterNode
    from numalign.scheduler.profiles import PROFILES, Profile, get_profile
    from numalign.scheduler.scheduler import Placement, Scheduler
