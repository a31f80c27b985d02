"""Load a real node's allocations from the kubelet's own checkpoints.

``<root>/cpu_manager_state`` and ``<root>/memory_manager_state`` (v2 JSON, as written by the
kubelet under ``/var/lib/kubelet``). The kubelet protects them with a checksum over a go-spew
dump of Go structs, which numalign does not reproduce: the checksum field is read but not
verified (``spec/kubelet.md`` section 3.8). The loaded state is validated the way the
kubelet validates it at start (CPU sets must partition the machine; memory machine state must
match the machine's capacity), so a checkpoint from another machine is refused.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from numalign.errors import InputError, StateError
from numalign.inputs.documents import read_json
from numalign.machine.model import Machine
from numalign.node.state import ContainerRecord, NodeState, PodRecord
from numalign.resources.cpu import CpuManager, CpuState
from numalign.resources.memory import MemoryState

CPU_FILE = "cpu_manager_state"
MEMORY_FILE = "memory_manager_state"


def _read(path: Path) -> dict[str, Any] | None:
    if not path.exists():
        return None
    doc = read_json(str(path))
    if not isinstance(doc, dict):
        raise InputError("a kubelet checkpoint must be a JSON object", str(path))
    doc.pop("checksum", None)
    return doc


def import_kubelet_state(machine: Machine, root: Path) -> NodeState:
    """A node state holding the allocations recorded in the kubelet's checkpoints."""
    if not root.is_dir():
        raise InputError("not a directory", str(root))
    state = NodeState.empty(machine)
    cpu_doc = _read(root / CPU_FILE)
    mem_doc = _read(root / MEMORY_FILE)
    if cpu_doc is None and mem_doc is None:
        raise InputError(f"neither {CPU_FILE} nor {MEMORY_FILE} found", str(root))
    uids: set[str] = set()
    if cpu_doc is not None:
        try:
            cpu = CpuState.from_dict(cpu_doc)
        except InputError as e:
            raise e.within(f"{root / CPU_FILE}") from None
        if cpu.policy_name != state.cpu.policy_name:
            raise StateError(
                f"{root / CPU_FILE}: policy {cpu.policy_name!r} differs from the machine's "
                f"cpuManagerPolicy ({state.cpu.policy_name!r})"
            )
        manager = CpuManager(machine, cpu)
        try:
            manager.validate_state()
        except StateError as e:
            raise StateError(f"{root / CPU_FILE}: {e.message}") from None
        state.cpu = cpu
        uids.update(cpu.pod_uids())
    if mem_doc is not None:
        try:
            mem = MemoryState.from_dict(mem_doc)
        except InputError as e:
            raise e.within(f"{root / MEMORY_FILE}") from None
        if mem.numa_ids() and mem.numa_ids() != state.memory.numa_ids():
            raise StateError(
                f"{root / MEMORY_FILE}: NUMA nodes {list(mem.numa_ids())} do not match "
                f"the machine's {list(state.memory.numa_ids())}"
            )
        state.memory = mem
        uids.update(mem.pod_uids())
    for uid in sorted(uids):
        containers = set(state.cpu.pod_cpus(uid)) | set(state.memory.pod_blocks(uid))
        kc = machine.kubelet
        # the checkpoints know pod uids only
        state.pods[uid] = PodRecord(uid, uid, kc.topology_manager_policy, kc.topology_manager_scope,
                                    tuple(ContainerRecord(c) for c in sorted(containers)))
    return state
