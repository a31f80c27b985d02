"""The machine model and its sources (spec files, sysfs, hwloc XML, NodeResourceTopology)."""

from numalign.machine.model import Cpu, Device, KubeletConfig, Machine, NumaNode, ReservedMemory

__all__ = ["Cpu", "Device", "KubeletConfig", "Machine", "NumaNode", "ReservedMemory"]
