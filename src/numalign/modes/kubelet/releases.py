"""The kubelet releases numalign models, as data: one :class:`KubeletRelease` per minor release.

Each row says what a decision depends on in that release: which Topology Manager and CPU
manager policy options it knows and at which maturity (with the feature gates' defaults and
locks), how the merge marks a hint preferred, how the device manager generates its hints, and
the admission chain. ``node/rules.py`` resolves a node's row once (:func:`release_of`) and
checks the node's kubelet configuration against it as the kubelet checks it at start-up
(:func:`check_startup`); admission, the scheduler, the extender and the launcher ask the
resolved rules and never compare releases. Every cell's upstream source is in
``docs/kubelet-releases.md``, whose table states these rows
(``tests/test_kubelet_releases.py`` compares the two).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import TYPE_CHECKING

from numalign.engine.policies import (
    ALPHA_GATE as TM_ALPHA_GATE,
)
from numalign.engine.policies import (
    BETA_GATE as TM_BETA_GATE,
)
from numalign.engine.policies import (
    MAX_ALLOWABLE,
    PREFER_CLOSEST,
    OptionLevels,
    PolicyOptions,
    parse_options,
)
from numalign.errors import InputError
from numalign.machine.model import KubeletConfig
from numalign.record import Record, set_field
from numalign.resources import cpu
from numalign.resources.cpu_state import POLICY_STATIC

if TYPE_CHECKING:
    from numalign.machine.kubelet_version import KubeletVersion

#: the feature gate that lets any Topology Manager policy option through
#: (``cmd/kubelet/app/server.go``)
TM_OPTIONS_GATE = "TopologyManagerPolicyOptions"
#: the CPU manager's, likewise
CPU_OPTIONS_GATE = "CPUManagerPolicyOptions"
MEMORY_MANAGER_GATE = "MemoryManager"


class DeviceHints(StrEnum):
    """How ``generateDeviceTopologyHints`` chooses the NUMA nodes it enumerates masks over."""

    #: every NUMA node of the machine (``m.numaNodes``): 2^N - 1 masks per resource request
    ALL_NUMA_NODES = "all-numa-nodes"
    #: the NUMA nodes of the resource's registered devices, all NUMA nodes when they report
    #: none (``deviceNUMANodes``, kubernetes#138244)
    DEVICE_NUMA_NODES = "device-numa-nodes"


class Gate(Record, frozen=True):
    """A feature gate in one release: its default, and whether it is locked to it."""

    __slots__ = ("default", "locked")
    default: bool
    locked: bool

    def __init__(self, default: bool, locked: bool = False) -> None:
        set_field(self, "default", default)
        set_field(self, "locked", locked)


class KubeletRelease(Record, frozen=True):
    """One kubelet minor release (see the module docstring)."""

    __slots__ = (
        "minor",
        "tm_options",
        "cpu_options",
        "gates",
        "device_hints",
        "merge",
        "admission_chain",
        "memory_hints",
    )
    minor: int
    tm_options: OptionLevels
    cpu_options: OptionLevels
    gates: Mapping[str, Gate]
    device_hints: DeviceHints
    #: the merge: a merged hint is preferred only if every picked hint is preferred and all
    #: their affinities are equal; non-preferred candidates ranked by
    #: ``bestNonPreferredAffinityCount`` (kubernetes#108052, 1.24; HintMerger #112914, 1.26)
    merge: str
    #: the kubelet's admit handlers numalign models, in the order ``canAdmitPod`` runs them
    admission_chain: tuple[str, ...]
    #: the memory manager's ``calculateHints`` enumerates every NUMA node of its machine state
    #: (``policy_static.go``, unchanged by kubernetes#138244)
    memory_hints: str

    def __init__(
        self,
        minor: int,
        tm_options: OptionLevels,
        cpu_options: OptionLevels,
        gates: Mapping[str, Gate],
        device_hints: DeviceHints,
        merge: str = "equal-affinity",
        admission_chain: tuple[str, ...] = ("topology-manager", "predicates"),
        memory_hints: str = "all-numa-nodes",
    ) -> None:
        set_field(self, "minor", minor)
        set_field(self, "tm_options", tm_options)
        set_field(self, "cpu_options", cpu_options)
        set_field(self, "gates", gates)
        set_field(self, "device_hints", device_hints)
        set_field(self, "merge", merge)
        set_field(self, "admission_chain", admission_chain)
        set_field(self, "memory_hints", memory_hints)

    @property
    def name(self) -> str:
        return f"v1.{self.minor}"

    def gate_defaults(self) -> dict[str, bool]:
        return {name: g.default for name, g in self.gates.items()}


def _levels(
    table: Mapping[str, Mapping[int, str]], minor: int, manager: str, alpha: str, beta: str,
    lower_case: bool = False,
) -> OptionLevels:
    at = {name: by_minor.get(minor) for name, by_minor in table.items()}

    def pick(level: str) -> frozenset[str]:
        return frozenset(n for n, lv in at.items() if lv == level)

    return OptionLevels(pick("alpha"), pick("beta"), pick("stable"), manager, alpha, beta,
                        lower_case)


def _span(first: int, last: int, level: str) -> dict[int, str]:
    return {m: level for m in range(first, last + 1)}


OLDEST, NEWEST = 28, 36

#: Topology Manager policy option maturity by minor release (absent = unknown to it)
TM_OPTIONS: Mapping[str, Mapping[int, str]] = {
    PREFER_CLOSEST: {**_span(28, 31, "beta"), **_span(32, NEWEST, "stable")},
    MAX_ALLOWABLE: {**_span(31, 34, "beta"), **_span(35, NEWEST, "stable")},
}
#: CPU manager static policy option maturity by minor release
CPU_OPTIONS: Mapping[str, Mapping[int, str]] = {
    cpu.FULL_PCPUS_ONLY: {**_span(28, 32, "beta"), **_span(33, NEWEST, "stable")},
    cpu.DISTRIBUTE_CPUS_ACROSS_NUMA: {**_span(28, 32, "alpha"), **_span(33, NEWEST, "beta")},
    cpu.ALIGN_BY_SOCKET: _span(28, NEWEST, "alpha"),
    cpu.DISTRIBUTE_CPUS_ACROSS_CORES: _span(31, NEWEST, "alpha"),
    cpu.STRICT_CPU_RESERVATION: {32: "alpha", **_span(33, 34, "beta"), **_span(35, NEWEST, "stable")},
    cpu.PREFER_ALIGN_CPUS_BY_UNCORECACHE: {**_span(32, 33, "alpha"), **_span(34, 35, "beta"),
                                          NEWEST: "stable"},
}


def _gates(minor: int) -> dict[str, Gate]:
    return {
        TM_OPTIONS_GATE: Gate(True),  # beta (on) 1.28-1.31, GA 1.32, not locked
        TM_BETA_GATE: Gate(True),
        TM_ALPHA_GATE: Gate(False),
        CPU_OPTIONS_GATE: Gate(True, locked=minor >= 33),  # GA and locked in 1.33
        cpu.BETA_GATE: Gate(True),
        cpu.ALPHA_GATE: Gate(False),
        MEMORY_MANAGER_GATE: Gate(True, locked=minor >= 32),  # GA and locked in 1.32
    }


def _release(minor: int) -> KubeletRelease:
    return KubeletRelease(
        minor=minor,
        tm_options=_levels(TM_OPTIONS, minor, "Topology Manager Policy", TM_ALPHA_GATE,
                           TM_BETA_GATE, lower_case=minor >= 32),
        cpu_options=_levels(CPU_OPTIONS, minor, "CPU Manager Policy", cpu.ALPHA_GATE,
                            cpu.BETA_GATE),
        gates=_gates(minor),
        device_hints=DeviceHints.DEVICE_NUMA_NODES if minor >= 36 else DeviceHints.ALL_NUMA_NODES,
    )


#: every modelled release, oldest first
RELEASES: Mapping[int, KubeletRelease] = {m: _release(m) for m in range(OLDEST, NEWEST + 1)}


class ResolvedRelease(Record, frozen=True):
    """The release a node decides by, and how numalign knows it."""

    __slots__ = ("release", "version", "how", "notes")
    release: KubeletRelease
    #: the version as given (None: none was)
    version: KubeletVersion | None
    #: why this release: given, or the newest modelled (missing or newer version)
    how: str
    notes: tuple[str, ...]

    def __init__(
        self,
        release: KubeletRelease,
        version: KubeletVersion | None = None,
        how: str = "",
        notes: tuple[str, ...] = (),
    ) -> None:
        set_field(self, "release", release)
        set_field(self, "version", version)
        set_field(self, "how", how)
        set_field(self, "notes", notes)


def release_of(version: KubeletVersion | None) -> ResolvedRelease:
    """The modelled release of a kubelet ``version``: its minor's row; the newest row when the
    version is unknown or newer than every row (said in ``how``); an older one is an error."""
    newest = RELEASES[NEWEST]
    if version is None:
        return ResolvedRelease(newest, None, f"no kubelet version given: decided as {newest.name}, "
                               "the newest release numalign models")
    row = RELEASES.get(version.minor)
    if row is not None:
        return ResolvedRelease(row, version, f"kubelet {version} (release {row.name})")
    if version.minor > NEWEST:
        return ResolvedRelease(newest, version, f"kubelet {version} is newer than the newest "
                               f"release numalign models: decided as {newest.name}")
    raise InputError(
        f"{version} is older than the oldest kubelet release numalign models "
        f"(v1.{OLDEST}; modelled: v1.{OLDEST} to v1.{NEWEST})", version.source)


def _go_map(options: Mapping[str, str]) -> str:
    return "map[" + " ".join(f"{k}:{options[k]}" for k in sorted(options)) + "]"


def check_startup(kc: KubeletConfig, release: KubeletRelease) -> PolicyOptions:
    """The kubelet's start-up checks of ``kc`` in ``release`` that numalign models: locked
    feature gates, the options gates of ``cmd/kubelet/app/server.go``, then each manager's
    ``CheckPolicyOptionAvailable`` and value parsing. Returns the Topology Manager options;
    a refusal raises :class:`InputError` with the kubelet's words and the field."""
    for name, value in sorted(kc.feature_gates.items()):
        gate = release.gates.get(name)
        if gate is not None and gate.locked and value is not gate.default:
            raise InputError(
                f"cannot set feature gate {name} to {str(value).lower()}, feature is locked to "
                f"{str(gate.default).lower()} (kubelet {release.name})",
                f"kubelet.featureGates.{name}")
    gates = {**release.gate_defaults(), **kc.feature_gates}
    tm = dict(kc.topology_manager_policy_options)
    if tm and not gates[TM_OPTIONS_GATE]:
        # cmd/kubelet/app/server.go @4a0608cb names this one gate (docs/kubelet-releases.md)
        raise InputError(
            f"topology manager policy options {_go_map(tm)} require feature gates "
            f'"{TM_OPTIONS_GATE}" enabled (kubelet {release.name} refuses to start)',
            "kubelet.topologyManagerPolicyOptions")
    try:
        options = parse_options(tm, "kubelet.topologyManagerPolicyOptions", gates,
                                release.tm_options)
        cpu_opts = dict(kc.cpu_manager_policy_options)
        if kc.cpu_manager_policy == POLICY_STATIC and cpu_opts:
            if not gates[CPU_OPTIONS_GATE]:
                raise InputError(
                    f"CPU Manager policy options {_go_map(cpu_opts)} require feature gates "
                    f'"CPUManager", "{CPU_OPTIONS_GATE}" enabled',
                    "kubelet.cpuManagerPolicyOptions")
            cpu.parse_static_policy_options(cpu_opts, gates, release.cpu_options)
    except InputError as e:
        raise InputError(f"{e.problem} (kubelet {release.name} refuses to start)", e.field) from None
    return options


__all__ = [
    "NEWEST",
    "OLDEST",
    "RELEASES",
    "DeviceHints",
    "Gate",
    "KubeletRelease",
    "ResolvedRelease",
    "check_startup",
    "release_of",
]
