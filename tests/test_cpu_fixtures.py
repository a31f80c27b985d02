"""CPU topologies of the kubelet's cpumanager unit tests, built as numalign Machines.

Transcribed from ``pkg/kubelet/cm/cpumanager/policy_test.go`` (``topoSingleSocketHT``,
``topoDualSocketHT``, ``topoTripleSocketHT``, ``topoDualSocketNoHT``,
``topoDualSocketMultiNumaPerSocketHT``, ``fakeTopoMultiSocketDualSocketPerNumaHT``,
``topoDualSocketMultiNumaPerSocketHTLarge``, ``topoQuadSocketFourWayHT``, the
``topoUncore*`` family) and ``topology_hints_test.go`` (``returnMachineInfo``). The upstream
fixtures without an ``UncoreCacheID`` leave it at Go's zero value: every CPU in uncore
cache 0, reproduced here with ``uncore_cache=0``.

Also holds small helpers shared by the ``test_cpu_*`` modules (pods, cpulists).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from numalign.inputs.cpulist import parse_cpulist
from numalign.machine.model import Cpu, KubeletConfig, Machine, NumaNode
from numalign.pods import Container, ContainerKind, Pod, QOSClass
from numalign.resources.cpu_assignment import CpuTopology

Layout = Callable[[int], tuple[int, int, int, int]]  # cpu -> (core, socket, numa, uncore)

ALPHA_ON = {"CPUManagerPolicyAlphaOptions": True}


def machine_of(
    name: str,
    cpus: Iterable[tuple[int, int, int, int, int]],
    kubelet: KubeletConfig | None = None,
) -> Machine:
    """A Machine from (cpu, core, socket, numa, uncore) rows."""
    rows = sorted(cpus)
    numas = sorted({r[3] for r in rows})
    return Machine(
        name=name,
        numa_nodes=tuple(NumaNode(id=n, memory=1 << 30) for n in numas),
        cpus=tuple(Cpu(id=c, core=k, socket=s, numa=n, uncore_cache=u) for c, k, s, n, u in rows),
        kubelet=kubelet or KubeletConfig(),
    )


def regular(name: str, n: int, layout: Layout) -> Machine:
    return machine_of(name, [(c, *layout(c)) for c in range(n)])


def with_kubelet(machine: Machine, **kw: object) -> Machine:
    cfg: dict[str, object] = {
        "cpu_manager_policy": "static",
        "system_reserved": {"cpu": 1000},
        "feature_gates": ALPHA_ON,
    }
    cfg.update(kw)
    return Machine(
        name=machine.name,
        numa_nodes=machine.numa_nodes,
        cpus=machine.cpus,
        kubelet=KubeletConfig(**cfg),  # type: ignore[arg-type]
    )


# --- policy_test.go fixtures ---------------------------------------------------------------

SINGLE_SOCKET_HT = regular("topoSingleSocketHT", 8, lambda c: (c % 4, 0, 0, 0))
DUAL_SOCKET_HT = regular("topoDualSocketHT", 12, lambda c: (c % 6, c % 2, c % 2, 0))
TRIPLE_SOCKET_HT = machine_of(
    "topoTripleSocketHT",
    [(c, c // 2, 1, 0, 0) for c in range(6)]
    + [(c, c // 2, 0, 0, 0) for c in range(6, 12)]
    + [(c, c // 2, 2, 0, 0) for c in range(12, 18)],
)
DUAL_SOCKET_NO_HT = regular("topoDualSocketNoHT", 8, lambda c: (c, c // 4, c // 4, 0))
# dual Xeon Gold 6230: NUMA node k = 10k..10k+9 and 40+10k..40+10k+9, two NUMA per socket
DUAL_SOCKET_MULTI_NUMA_HT = regular(
    "topoDualSocketMultiNumaPerSocketHT",
    80,
    lambda c: (c % 40, (c % 40) // 20, (c % 40) // 10, 0),
)
# the same with NUMA cells and sockets flipped: two sockets per NUMA node
FAKE_MULTI_SOCKET_DUAL_SOCKET_PER_NUMA_HT = regular(
    "fakeTopoMultiSocketDualSocketPerNumaHT",
    80,
    lambda c: (c % 40, (c % 40) // 10, (c % 40) // 20, 0),
)
# dual AMD EPYC 7742, NPS=4: NUMA k = 16k..16k+15 and 128+16k..
DUAL_SOCKET_MULTI_NUMA_HT_LARGE = regular(
    "topoDualSocketMultiNumaPerSocketHTLarge",
    256,
    lambda c: (c % 128, (c % 128) // 64, (c % 128) // 16, 0),
)

# topoQuadSocketFourWayHT (KNL SNC4): socket = NUMA node; core id -> its 4 threads
_QUAD: Mapping[int, Mapping[int, tuple[int, ...]]] = {
    0: {
        0: (0, 169, 109, 229), 1: (50, 170, 110, 230), 64: (1, 25, 13, 38),
        65: (2, 26, 14, 39), 72: (9, 33, 21, 46), 73: (10, 34, 22, 47),
        8: (57, 177, 117, 237), 9: (58, 178, 118, 238), 24: (71, 191, 131, 251),
        25: (72, 192, 132, 252), 32: (79, 199, 139, 259), 33: (80, 200, 140, 260),
        40: (87, 207, 147, 267), 41: (88, 208, 148, 268), 48: (95, 215, 155, 275),
        49: (96, 216, 156, 276), 56: (103, 223, 163, 283), 57: (104, 224, 164, 284),
    },
    1: {
        66: (3, 27, 15, 40), 67: (4, 28, 16, 41), 74: (11, 35, 23, 48),
        75: (12, 36, 24, 49), 2: (51, 171, 111, 231), 3: (52, 172, 112, 232),
        10: (59, 179, 119, 239), 11: (60, 180, 120, 240), 18: (65, 185, 125, 245),
        19: (66, 186, 126, 246), 26: (73, 193, 133, 253), 27: (74, 194, 134, 254),
        34: (81, 201, 141, 261), 35: (82, 202, 142, 262), 42: (89, 209, 149, 269),
        43: (90, 210, 150, 270), 50: (97, 217, 157, 277), 51: (98, 218, 158, 278),
    },
    2: {
        68: (5, 29, 17, 42), 69: (6, 30, 18, 43), 4: (53, 173, 113, 233),
        5: (54, 174, 114, 234), 12: (61, 181, 121, 241), 13: (62, 182, 122, 242),
        20: (67, 187, 127, 247), 21: (68, 188, 128, 248), 28: (75, 195, 135, 255),
        29: (76, 196, 136, 256), 36: (83, 203, 143, 263), 37: (84, 204, 144, 264),
        44: (91, 211, 151, 271), 45: (92, 212, 152, 272), 52: (99, 219, 159, 279),
        53: (100, 220, 160, 280), 60: (105, 225, 165, 285), 61: (106, 226, 166, 286),
    },
    3: {
        70: (7, 31, 19, 44), 71: (8, 32, 20, 45), 63: (37, 168, 108, 228),
        62: (107, 227, 167, 287), 6: (55, 175, 115, 235), 7: (56, 176, 116, 236),
        14: (63, 183, 123, 243), 15: (64, 184, 124, 244), 22: (69, 189, 129, 249),
        23: (70, 190, 130, 250), 30: (77, 197, 137, 257), 31: (78, 198, 138, 258),
        38: (85, 205, 145, 265), 39: (86, 206, 146, 266), 46: (93, 213, 153, 273),
        47: (94, 214, 154, 274), 54: (101, 221, 161, 281), 55: (102, 222, 162, 282),
    },
}  # fmt: skip
QUAD_SOCKET_FOUR_WAY_HT = machine_of(
    "topoQuadSocketFourWayHT",
    [
        (cpu, core, socket, socket, 0)
        for socket, cores in _QUAD.items()
        for core, threads in cores.items()
        for cpu in threads
    ],
)


def quad_socket_cpus(socket: int) -> frozenset[int]:
    return frozenset(c for threads in _QUAD[socket].values() for c in threads)


# AMD EPYC 7452 (Rome), 4 cores per LLC, single socket, SMT off, NPS=1
UNCORE_SINGLE_SOCKET_NO_SMT = regular(
    "topoUncoreSingleSocketNoSMT", 32, lambda c: (c, 0, 0, c // 4)
)
UNCORE_DUAL_SOCKET_NO_SMT = regular(
    "topoUncoreDualSocketNoSMT", 16, lambda c: (c, c // 8, c // 8, c // 4)
)
UNCORE_SINGLE_SOCKET_MULTI_NUMA = regular(
    "topoUncoreSingleSocketMultiNuma", 16, lambda c: (c, 0, c // 8, c // 4)
)
UNCORE_SINGLE_SOCKET_SMT = regular(
    "topoUncoreSingleSocketSMT", 16, lambda c: (c % 8, 0, 0, (c % 8) // 4)
)

# topology_hints_test.go returnMachineInfo: NUMA 0 = cores (0,6) (1,7) (2,8), NUMA 1 = the rest
HINTS_MACHINE = regular("returnMachineInfo", 12, lambda c: (c % 6, (c % 6) // 3, (c % 6) // 3, 0))


def topo(machine: Machine) -> CpuTopology:
    return CpuTopology.from_machine(machine)


def cs(text: str) -> frozenset[int]:
    """A cpuset from cpulist text (``mustParseCPUSet``)."""
    return parse_cpulist(text)


# --- pods ----------------------------------------------------------------------------------


def container(
    name: str, request: int, limit: int | None = None, kind: ContainerKind = ContainerKind.APP
) -> Container:
    """A container requesting ``request`` millicores of CPU (and 1Gi memory)."""
    lim = request if limit is None else limit
    return Container(
        name=name,
        kind=kind,
        requests={"cpu": request, "memory": 1 << 30},
        limits={"cpu": lim, "memory": 1 << 30},
    )


def make_pod(uid: str, *containers: Container, qos: QOSClass | None = None) -> Pod:
    if qos is None:
        guaranteed = all(c.requests == c.limits for c in containers)
        qos = QOSClass.GUARANTEED if guaranteed else QOSClass.BURSTABLE
    return Pod(namespace="default", name=uid, uid=uid, qos=qos, containers=tuple(containers))


def test_fixture_sanity() -> None:
    quad = topo(QUAD_SOCKET_FOUR_WAY_HT)
    assert quad.all_cpus == frozenset(range(288))
    assert quad.num_cores == 72 and quad.cpus_per_core == 4 and quad.num_sockets == 4
    assert all(len(quad_socket_cpus(s)) == 72 for s in range(4))
    multi = topo(DUAL_SOCKET_MULTI_NUMA_HT)
    assert multi.cpus_in_numa[1] == cs("10-19,50-59")
    assert multi.cpus_in_socket[1] == cs("20-39,60-79")
    large = topo(DUAL_SOCKET_MULTI_NUMA_HT_LARGE)
    assert large.cpus_in_numa[7] == cs("112-127,240-255")
    assert topo(FAKE_MULTI_SOCKET_DUAL_SOCKET_PER_NUMA_HT).num_sockets == 4
