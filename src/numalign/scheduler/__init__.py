"""Cluster scheduling on top of the node engine: snapshot, filters, scorers, profiles.

The ``numalign`` profile's filter *is* the node's admission (``Node.plan``), so a pod it
places is admitted by the node with the predicted affinity. The other profiles reproduce
what topology-blind or approximate schedulers do, for comparison in the simulator.
"""

from numalign.scheduler.cluster import Cluster, ClusterNode
from numalign.scheduler.profiles import PROFILES, Profile, get_profile
from numalign.scheduler.scheduler import Placement, Scheduler

__all__ = ["PROFILES", "Cluster", "ClusterNode", "Placement", "Profile", "Scheduler", "get_profile"]
