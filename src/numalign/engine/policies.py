"""Topology Manager policies and policy options, with the kubelet's names and messages.

* :func:`parse_policy` accepts every spelling users have in their objects and returns the
  kubelet policy plus the scope the spelling implies (``pod-level-single-numa-node`` and
  NRT's ``...PodLevel`` imply pod scope).
* :func:`parse_options` validates ``topologyManagerPolicyOptions`` as the kubelet does.
* :class:`TopologyPolicy` is a policy bound to a machine's NUMA nodes; its :meth:`merge`
  turns provider hints into the best hint and the admit decision.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from enum import StrEnum

from numalign.engine.bitmask import mask_of
from numalign.engine.hints import (
    GeneratedHints,
    HintList,
    ProviderHints,
    TopologyHint,
    flatten,
)
from numalign.engine.merge import NARROWEST, FitOrder, merge_lists, merge_lists_legacy
from numalign.errors import InputError
from numalign.inputs import goparse
from numalign.record import Record, set_field


class Policy(StrEnum):
    NONE = "none"
    BEST_EFFORT = "best-effort"
    RESTRICTED = "restricted"
    SINGLE_NUMA_NODE = "single-numa-node"


class Scope(StrEnum):
    CONTAINER = "container"
    POD = "pod"


#: Every accepted spelling -> (policy, implied scope or None).
_SPELLINGS: dict[str, tuple[Policy, Scope | None]] = {
    # kubelet (--topology-manager-policy) and Volcano (volcano.sh/numa-topology-policy)
    "none": (Policy.NONE, None),
    "best-effort": (Policy.BEST_EFFORT, None),
    "restricted": (Policy.RESTRICTED, None),
    "single-numa-node": (Policy.SINGLE_NUMA_NODE, None),
    # KEP-693 per-pod policy
    "pod-level-single-numa-node": (Policy.SINGLE_NUMA_NODE, Scope.POD),
    # Koordinator (node.koordinator.sh/numa-topology-policy, numaTopologyPolicy) and NRT
    "": (Policy.NONE, None),
    "None": (Policy.NONE, None),
    "BestEffort": (Policy.BEST_EFFORT, None),
    "Restricted": (Policy.RESTRICTED, None),
    "SingleNUMANode": (Policy.SINGLE_NUMA_NODE, None),
    # NodeResourceTopology v1alpha1/v1alpha2 TopologyPolicies enum
    "BestEffortContainerLevel": (Policy.BEST_EFFORT, Scope.CONTAINER),
    "BestEffortPodLevel": (Policy.BEST_EFFORT, Scope.POD),
    "RestrictedContainerLevel": (Policy.RESTRICTED, Scope.CONTAINER),
    "RestrictedPodLevel": (Policy.RESTRICTED, Scope.POD),
    "SingleNUMANodeContainerLevel": (Policy.SINGLE_NUMA_NODE, Scope.CONTAINER),
    "SingleNUMANodePodLevel": (Policy.SINGLE_NUMA_NODE, Scope.POD),
}


def parse_policy(name: object, field: str = "policy") -> tuple[Policy, Scope | None]:
    """Resolve any accepted policy spelling; unknown names get the kubelet's message."""
    if not isinstance(name, str):
        raise InputError(f"must be a string, got {type(name).__name__}", field)
    try:
        return _SPELLINGS[name]
    except KeyError:
        raise InputError(f'unknown policy: "{name}"', field) from None


#: the names ``topologyManagerPolicy`` accepts in a KubeletConfiguration (kubelet
#: ``pkg/kubelet/apis/config/validation``); numalign adds ``dynamic`` (KEP-693), an explicit
#: extension. ``""`` is an unset field: the kubelet defaults it to ``none``.
KUBELET_POLICIES = ("none", "best-effort", "restricted", "single-numa-node")
DYNAMIC = "dynamic"


def check_kubelet_policy(name: str, field: str = "kubelet.topologyManagerPolicy") -> str:
    """A KubeletConfiguration's policy name, exactly as the kubelet accepts it (or ``dynamic``,
    numalign's KEP-693 extension); the other spellings (NRT's ``SingleNUMANodePodLevel``,
    Koordinator's ``Restricted``) are refused with the kubelet's message."""
    if name == "":
        return "none"
    if name in KUBELET_POLICIES or name == DYNAMIC:
        return name
    allowed = " ".join(f'"{p}"' for p in KUBELET_POLICIES)
    raise InputError(
        f'unknown policy: "{name}" (invalid configuration: topologyManagerPolicy '
        f"(--topology-manager-policy) must be one of: [{allowed}]; numalign adds "
        f'"{DYNAMIC}", KEP-693)',
        field,
    )


def check_kubelet_scope(name: str, field: str = "kubelet.topologyManagerScope") -> str:
    """A KubeletConfiguration's scope name, as the kubelet accepts it (``""`` = ``container``)."""
    if name == "":
        return "container"
    if name in (Scope.CONTAINER, Scope.POD):
        return name
    raise InputError(
        f'unknown scope: "{name}" (invalid configuration: topologyManagerScope '
        '(--topology-manager-scope) must be one of: "container", or "pod")',
        field,
    )


def parse_scope(name: object, field: str = "scope") -> Scope:
    if not isinstance(name, str) or name not in (Scope.CONTAINER, Scope.POD):
        raise InputError(f'unknown scope: "{name}"', field)
    return Scope(name)


PREFER_CLOSEST = "prefer-closest-numa-nodes"
MAX_ALLOWABLE = "max-allowable-numa-nodes"
DEFAULT_MAX_NUMA_NODES = 8

#: option maturity (kubelet ``policy_options.go``, newest upstream: both options GA). Alpha
#: options need the feature gate :data:`ALPHA_GATE` (default off), beta ones
#: :data:`BETA_GATE` (default on), stable ones nothing. Older kubelets had other sets: a
#: kubelet release passes its own :class:`OptionLevels` (``modes/kubelet/releases.py``); a
#: test patches these module sets the way upstream's ``TestPolicyOptionsAvailable`` does.
ALPHA_OPTIONS: set[str] = set()
BETA_OPTIONS: set[str] = set()
STABLE_OPTIONS: set[str] = {PREFER_CLOSEST, MAX_ALLOWABLE}
ALPHA_GATE = "TopologyManagerPolicyAlphaOptions"
BETA_GATE = "TopologyManagerPolicyBetaOptions"
#: feature gate defaults (kubelet ``pkg/features``)
GATE_DEFAULTS: Mapping[str, bool] = {ALPHA_GATE: False, BETA_GATE: True}


class OptionLevels(Record, frozen=True):
    """Which options one kubelet release knows, by maturity, and how it words a gate error.

    ``manager`` is the manager's name as its messages spell it (``Topology Manager Policy``,
    ``CPU Manager Policy``); ``lower_case`` is the lower-case wording of the gate errors
    (``topology manager policy beta-level options not enabled``, kubelet 1.32 and later).
    """

    __slots__ = ("alpha", "beta", "stable", "manager", "alpha_gate", "beta_gate", "lower_case")
    alpha: frozenset[str]
    beta: frozenset[str]
    stable: frozenset[str]
    manager: str
    alpha_gate: str
    beta_gate: str
    lower_case: bool

    def __init__(
        self,
        alpha: frozenset[str],
        beta: frozenset[str],
        stable: frozenset[str],
        manager: str = "Topology Manager Policy",
        alpha_gate: str = ALPHA_GATE,
        beta_gate: str = BETA_GATE,
        lower_case: bool = False,
    ) -> None:
        set_field(self, "alpha", alpha)
        set_field(self, "beta", beta)
        set_field(self, "stable", stable)
        set_field(self, "manager", manager)
        set_field(self, "alpha_gate", alpha_gate)
        set_field(self, "beta_gate", beta_gate)
        set_field(self, "lower_case", lower_case)

    @property
    def known(self) -> frozenset[str]:
        return self.alpha | self.beta | self.stable

    def check(self, name: str, gates: Mapping[str, bool]) -> None:
        """kubelet ``CheckPolicyOptionAvailable`` with ``gates`` (every gate given)."""
        if name not in self.known:
            raise InputError(f'unknown {self.manager} option: "{name}"')
        for level, options, gate in (("Alpha", self.alpha, self.alpha_gate),
                                     ("Beta", self.beta, self.beta_gate)):
            if name in options and not gates.get(gate, False):
                words = f"{self.manager} {level}-level Options not enabled"
                if self.lower_case:
                    words = words.lower()
                raise InputError(f'{words}, but option "{name}" provided (featureGates {gate}: '
                                 f"{'false' if gate in gates else 'off by default'})")


def newest_levels() -> OptionLevels:
    """The newest release's Topology Manager option sets (read when called, so a test that
    patches the module sets sees its own)."""
    return OptionLevels(frozenset(ALPHA_OPTIONS), frozenset(BETA_OPTIONS), frozenset(STABLE_OPTIONS))


def check_option_available(
    name: str, gates: Mapping[str, bool] | None = None, levels: OptionLevels | None = None
) -> None:
    """kubelet ``CheckPolicyOptionAvailable``: the option exists and its gate is on."""
    (levels or newest_levels()).check(name, {**GATE_DEFAULTS, **(gates or {})})

class PolicyOptions(Record, frozen=True):
    """Parsed ``topologyManagerPolicyOptions``."""

    __slots__ = ("prefer_closest", "max_allowable_numa_nodes")
    prefer_closest: bool
    max_allowable_numa_nodes: int

    def __init__(
        self,
        prefer_closest: bool = False,
        max_allowable_numa_nodes: int = DEFAULT_MAX_NUMA_NODES,
    ) -> None:
        set_field(self, "prefer_closest", prefer_closest)
        set_field(self, "max_allowable_numa_nodes", max_allowable_numa_nodes)


def parse_bool(value: object, name: str) -> bool:
    """Go ``strconv.ParseBool`` with the kubelet's error text."""
    try:
        return goparse.parse_bool(str(value))
    except goparse.GoSyntaxError as e:
        raise InputError(f'bad value for option "{name}": {e}') from None


def parse_options(
    raw: Mapping[str, object] | None,
    field: str = "options",
    gates: Mapping[str, bool] | None = None,
    levels: OptionLevels | None = None,
) -> PolicyOptions:
    """Validate policy options as the kubelet's ``NewPolicyOptions`` does (names, feature
    ``gates``, values); ``levels``: the kubelet release's option sets (default the newest)."""
    if raw is None:
        return PolicyOptions()
    if not isinstance(raw, Mapping):
        raise InputError("must be an object of option name to string value", field)
    prefer = False
    max_nodes = DEFAULT_MAX_NUMA_NODES
    for name, value in raw.items():
        try:
            check_option_available(name, gates, levels)
            if name == PREFER_CLOSEST:
                prefer = parse_bool(value, name)
            elif name == MAX_ALLOWABLE:
                max_nodes = _parse_max_nodes(value)
            else:
                raise InputError(f'unknown Topology Manager Policy option: "{name}"')
        except InputError as e:
            raise InputError(e.problem, f"{field}.{name}") from None
    return PolicyOptions(prefer_closest=prefer, max_allowable_numa_nodes=max_nodes)


def _parse_max_nodes(value: object) -> int:
    """Go ``strconv.Atoi`` on a 64-bit platform: ASCII digits with an optional sign."""
    text = value if isinstance(value, str) else str(value) if isinstance(value, int) else repr(value)
    try:
        n = goparse.atoi(text)  # a YAML bool is repr'd to "True": invalid syntax, as in Go
    except goparse.GoSyntaxError as e:
        raise InputError(
            f'unable to convert policy option to integer "{MAX_ALLOWABLE}": {e}'
        ) from None
    if n < DEFAULT_MAX_NUMA_NODES:
        raise InputError(
            f'the minimum value of "{MAX_ALLOWABLE}" should not be less than '
            f"{DEFAULT_MAX_NUMA_NODES} (got {n})"
        )
    return n


class MergeResult(Record, frozen=True, uncompared=("explain",), unshown=("explain",)):
    """The policy's answer: the best hint and whether the pod is admitted.

    An engine mode may add its own words for the decision (Koordinator's policies return
    reasons with a hint they refuse): ``explain`` builds them when ``reasons`` is first read,
    so a caller that never reports them never pays for them. The kubelet's merge has none."""

    __slots__ = ("hint", "admit", "explain")
    hint: TopologyHint
    admit: bool
    explain: Callable[[], tuple[str, ...]] | None

    def __init__(
        self,
        hint: TopologyHint,
        admit: bool,
        explain: Callable[[], tuple[str, ...]] | None = None,
    ) -> None:
        set_field(self, "hint", hint)
        set_field(self, "admit", admit)
        set_field(self, "explain", explain)

    @property
    def reasons(self) -> tuple[str, ...]:
        return () if self.explain is None else self.explain()


class TopologyPolicy(Record, frozen=True):
    """A policy bound to a machine: NUMA node ids, options and (for prefer-closest) distances.

    Construction applies the kubelet's manager checks: more NUMA nodes than
    ``max-allowable-numa-nodes`` is refused with the kubelet's message, and
    ``prefer-closest-numa-nodes`` needs a distance for every ordered pair of nodes.
    """

    __slots__ = ("policy", "nodes", "options", "distances", "legacy_merge")
    policy: Policy
    nodes: tuple[int, ...]
    options: PolicyOptions
    distances: Mapping[int, Mapping[int, int]] | None
    #: Volcano's variant: the pre-1.21 merge rule (preferred = all picked hints preferred;
    #: narrowest wins; no equal-mask rule, no bestNonPreferredAffinityCount ranking)
    legacy_merge: bool

    def __init__(
        self,
        policy: Policy,
        nodes: tuple[int, ...],
        options: PolicyOptions | None = None,
        distances: Mapping[int, Mapping[int, int]] | None = None,
        legacy_merge: bool = False,
    ) -> None:
        set_field(self, "policy", policy)
        set_field(self, "nodes", nodes)
        set_field(self, "options", PolicyOptions() if options is None else options)
        set_field(self, "distances", distances)
        set_field(self, "legacy_merge", legacy_merge)
        self.__post_init__()

    def __post_init__(self) -> None:
        if len(set(self.nodes)) != len(self.nodes):
            raise InputError("duplicate NUMA node id", "numa_nodes")
        if not self.nodes:
            raise InputError("a machine needs at least one NUMA node", "numa_nodes")
        mask_of(self.nodes)  # range check
        if self.policy is Policy.NONE:
            return
        if len(self.nodes) > self.options.max_allowable_numa_nodes:
            raise InputError(
                f"unsupported on machines with more than "
                f"{self.options.max_allowable_numa_nodes} NUMA Nodes "
                f"(this machine has {len(self.nodes)}; raise {MAX_ALLOWABLE})"
            )
        if self.options.prefer_closest:
            if self.distances is None:
                raise InputError(
                    "cannot discover NUMA topology: error getting NUMA distances from "
                    f"cadvisor ({PREFER_CLOSEST} needs a distance for every pair of nodes)",
                    "distances",
                )
            for i in self.nodes:
                row = self.distances.get(i)
                if row is None:
                    raise InputError(f"missing row for node {i}", "distances")
                for j in self.nodes:
                    if j not in row:
                        raise InputError(f"missing entry for node {j}", f"distances.{i}")

    @property
    def default_mask(self) -> int:
        return mask_of(self.nodes)

    @property
    def fit(self) -> FitOrder:
        if self.options.prefer_closest and self.policy is not Policy.SINGLE_NUMA_NODE:
            return FitOrder(self.distances)
        return NARROWEST

    def merge(self, providers: Sequence[ProviderHints]) -> MergeResult:
        """Merge provider hints (one entry per provider, kubelet provider order)."""
        if self.policy is Policy.NONE:
            return MergeResult(TopologyHint(None, False), True)
        lists = flatten(providers)
        default = self.default_mask
        if self.legacy_merge:
            if self.policy is Policy.SINGLE_NUMA_NODE:
                lists = [_single_numa_only(h) for h in lists]
            best = merge_lists_legacy(lists, default)
            if self.policy is Policy.SINGLE_NUMA_NODE and best.affinity == default:
                best = TopologyHint(None, best.preferred)
            return MergeResult(best, self.policy is Policy.BEST_EFFORT or best.preferred)
        if self.policy is Policy.SINGLE_NUMA_NODE:
            best = merge_lists([_single_numa_only(h) for h in lists], default, self.fit)
            if best.affinity == default:
                best = TopologyHint(None, best.preferred)
            return MergeResult(best, best.preferred)
        best = merge_lists(lists, default, self.fit)
        if self.policy is Policy.BEST_EFFORT:
            return MergeResult(best, True)
        return MergeResult(best, best.preferred)


def _single_numa_only(hints: HintList) -> list[TopologyHint]:
    """single-numa-node keeps preferred hints that are None or one NUMA node."""
    if isinstance(hints, GeneratedHints):
        out = [
            g
            for g in (hints.hint(1 << i) for i in hints.nodes)
            if g.preferred and hints.contains(g.affinity or 0)
        ]
        return out
    return [
        h
        for h in hints
        if h.preferred and (h.affinity is None or h.affinity.bit_count() == 1)
    ]
