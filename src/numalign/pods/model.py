"""Pods as the engine sees them: containers with integer requests and limits, QoS class.

Parsing of Kubernetes manifests (``v1`` Pod, List, multi-document YAML) and the QoS /
effective-request rules live here too (see ``spec/kubelet.md`` section 7); quantity syntax is
:mod:`numalign.inputs.quantity`'s.

Units inside the engine: ``cpu`` in millicores; ``memory``, ``hugepages-<size>`` and
``ephemeral-storage`` in bytes; extended resources (``nvidia.com/gpu``) as counts.

Manifest parsing (:func:`parse_pods`, :func:`read_pod_files`) accepts a single ``v1`` Pod, a
``kind: List`` (or ``PodList``) with ``items``, and multi-document YAML; empty documents are
skipped (a *file* without any pod is an error when the caller asks for pods, as ``admit``
does). ``apiVersion`` may be omitted; if present it must be ``v1``. What it keeps:

* ``metadata.name`` (required), ``metadata.namespace`` (default ``default``),
  ``metadata.uid`` (default: :func:`default_uid`, ``uuid5(NAMESPACE_URL,
  "numalign:pod:<namespace>/<name>")``, so the same manifest always gets the same uid),
  ``metadata.annotations``;
* ``spec.initContainers`` (``restartPolicy: Always`` makes a sidecar) and ``spec.containers``
  with ``resources.requests`` / ``resources.limits``; a missing request defaults to the limit
  (API defaulting), for every resource;
* the per-pod topology policy of KEP-693: ``spec.topology.policy`` (the KEP's field) or
  ``spec.topologyPolicy`` (numalign's earlier spelling; both given must agree). Only nodes
  whose ``topologyManagerPolicy`` is numalign's ``dynamic`` read it; other nodes apply their
  own policy, as a kubelet does.

**Annotations of other schedulers** (``volcano.sh/numa-topology-policy``,
``scheduling.koordinator.sh/numa-topology-spec``) likewise count only on ``dynamic`` nodes
(:mod:`numalign.pods.annotations`); on a node with a kubelet policy they change nothing, because the
kubelet ignores them.

**Strict fields**, like ``kubectl --validate=strict``: at every level numalign parses (the
document, ``metadata``, ``spec``, each container, ``resources``) a field the v1 API does not
have is an error naming its path and the nearest known name
(``spec.containers[0].resource: unknown field (did you mean "resources"?)``); fields the API
has but numalign does not read (``image``, ``tolerations``, ``status``...) are accepted and
ignored. ``parse_pods(..., strict=False)`` skips this for objects an API server already
validated (the scheduler extender's pods).

It applies the API server's validation that matters for alignment: quantities are
non-negative, requests do not exceed limits, hugepages and extended resources (not
overcommittable) need a limit equal to the request, extended resources are whole numbers,
container names are unique. Pod-level resources (``spec.resources``) are not modelled and
are rejected. The QoS class is computed as the kubelet's ``GetPodQOS`` does, on the exact
quantities.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from enum import StrEnum
from fractions import Fraction
from functools import cached_property
from typing import TYPE_CHECKING

from numalign.errors import InputError, escape_newlines
from numalign.inputs.documents import read_yaml_documents
from numalign.inputs.quantity import cpu_millis, is_hugepages_resource, parse_quantity, quantity_int
from numalign.record import Record, set_field

if TYPE_CHECKING:
    from numalign.pods.annotations import OwnPolicy, PodNumaSpec, ResourceSpec


class QOSClass(StrEnum):
    GUARANTEED = "Guaranteed"
    BURSTABLE = "Burstable"
    BEST_EFFORT = "BestEffort"


class ContainerKind(StrEnum):
    INIT = "init"  # a regular init container: runs to completion before the next
    SIDECAR = "sidecar"  # a restartable init container (restartPolicy: Always)
    APP = "app"


class Container(Record, frozen=True):
    """One container (app, init or sidecar) with its effective requests and limits."""

    __slots__ = ("name", "kind", "requests", "limits")
    name: str
    kind: ContainerKind
    requests: Mapping[str, int]
    limits: Mapping[str, int]

    def __init__(
        self,
        name: str,
        kind: ContainerKind,
        requests: Mapping[str, int] | None = None,
        limits: Mapping[str, int] | None = None,
    ) -> None:
        set_field(self, "name", name)
        set_field(self, "kind", kind)
        set_field(self, "requests", {} if requests is None else requests)
        set_field(self, "limits", {} if limits is None else limits)

    @property
    def is_init(self) -> bool:
        return self.kind is not ContainerKind.APP


class Pod(Record, frozen=True):
    """A pod as the engine sees it: identity, QoS class, containers and topology fields."""

    __slots__ = (
        "namespace",
        "name",
        "uid",
        "qos",
        "containers",
        "annotations",
        "topology_policy",
        "__dict__",
    )
    namespace: str
    name: str
    uid: str
    qos: QOSClass
    #: init containers (regular and sidecar) in spec order, then app containers in spec order
    containers: tuple[Container, ...]
    annotations: Mapping[str, str]
    #: KEP-693 per-pod policy (``spec.topology.policy`` or ``spec.topologyPolicy``), if any
    topology_policy: str | None

    def __init__(
        self,
        namespace: str,
        name: str,
        uid: str,
        qos: QOSClass,
        containers: tuple[Container, ...],
        annotations: Mapping[str, str] | None = None,
        topology_policy: str | None = None,
    ) -> None:
        set_field(self, "namespace", namespace)
        set_field(self, "name", name)
        set_field(self, "uid", uid)
        set_field(self, "qos", qos)
        set_field(self, "containers", containers)
        set_field(self, "annotations", {} if annotations is None else annotations)
        set_field(self, "topology_policy", topology_policy)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @cached_property
    def shape(self) -> tuple[object, ...]:
        """What a node's decision depends on: everything but names and uid (a cache key;
        computed once per pod object)."""
        return (
            self.qos,
            self.topology_policy,
            tuple(sorted(self.annotations.items())),
            tuple(
                (c.kind, tuple(sorted(c.requests.items())), tuple(sorted(c.limits.items())))
                for c in self.containers
            ),
        )

    # -- the pod's own topology requests, decoded once when first asked (pods.annotations,
    # loaded then: a kubelet node never asks)

    @cached_property
    def own_policy(self) -> OwnPolicy:
        """The policy the pod asks for (KEP-693 field, Volcano or Koordinator annotation), or
        None: what a ``dynamic`` node applies."""
        from numalign.pods.annotations import own_policy

        return own_policy(self.topology_policy, self.annotations, self.key)

    @cached_property
    def koordinator_numa_spec(self) -> PodNumaSpec:
        """Koordinator's ``numa-topology-spec`` (policy, single-NUMA exclusivity)."""
        from numalign.pods.annotations import numa_spec

        return numa_spec(self.annotations, self.key)

    @cached_property
    def koordinator_resource_spec(self) -> ResourceSpec:
        """Koordinator's ``resource-spec`` (CPU bind and exclusive policies)."""
        from numalign.pods.annotations import parse_resource_spec

        return parse_resource_spec(self.annotations, f"{self.key}: metadata.annotations")

    @cached_property
    def init_containers(self) -> tuple[Container, ...]:
        return tuple(c for c in self.containers if c.is_init)

    @cached_property
    def app_containers(self) -> tuple[Container, ...]:
        return tuple(c for c in self.containers if not c.is_init)

    @cached_property
    def _effective_requests(self) -> dict[str, int]:
        return _effective(self, lambda c: c.requests)

    @cached_property
    def _effective_limits(self) -> dict[str, int]:
        return _effective(self, lambda c: c.limits)


# --------------------------------------------------------------------------------------------
# QoS, effective requests, guaranteed CPUs
# --------------------------------------------------------------------------------------------

_QOS_RESOURCES = ("cpu", "memory")


def compute_qos(
    containers: Iterable[tuple[Mapping[str, int | Fraction], Mapping[str, int | Fraction]]],
) -> QOSClass:
    """The kubelet's ``GetPodQOS`` over (requests, limits) of every container (init + app).

    Requests must already carry the API defaulting (missing request = limit). Only ``cpu`` and
    ``memory`` count and only positive values. Requests and limits are summed over the pod;
    the pod is Guaranteed when every container has positive cpu and memory limits and the
    summed requests equal the summed limits for each resource; BestEffort when no container
    has any positive cpu/memory request or limit; Burstable otherwise.
    """
    req_sum: dict[str, Fraction] = {}
    lim_sum: dict[str, Fraction] = {}
    guaranteed = True
    for requests, limits in containers:
        for name in _QOS_RESOURCES:
            r = requests.get(name)
            if r is not None and r > 0:
                req_sum[name] = req_sum.get(name, Fraction(0)) + r
            lim = limits.get(name)
            if lim is not None and lim > 0:
                lim_sum[name] = lim_sum.get(name, Fraction(0)) + lim
            else:
                guaranteed = False
    if not req_sum and not lim_sum:
        return QOSClass.BEST_EFFORT
    if (
        guaranteed
        and all(lim_sum.get(k) == v for k, v in req_sum.items())
        and len(req_sum) == len(lim_sum)
    ):
        return QOSClass.GUARANTEED
    return QOSClass.BURSTABLE


def pod_qos(containers: Iterable[Container]) -> QOSClass:
    """:func:`compute_qos` over :class:`Container` objects (engine units)."""
    return compute_qos((c.requests, c.limits) for c in containers)


def _effective(pod: Pod, value: Callable[[Container], Mapping[str, int]]) -> dict[str, int]:
    names: set[str] = set()
    for c in pod.containers:
        names.update(value(c))
    out: dict[str, int] = {}
    for name in sorted(names):
        sidecar_sum = 0
        init_max = 0
        for c in pod.init_containers:
            n = value(c).get(name, 0)
            if c.kind is ContainerKind.SIDECAR:
                sidecar_sum += n
            else:
                init_max = max(init_max, sidecar_sum + n)
        app_sum = sum(value(c).get(name, 0) for c in pod.app_containers)
        out[name] = max(init_max, app_sum + sidecar_sum)
    return out


def effective_pod_requests(pod: Pod) -> dict[str, int]:
    """Per-resource effective pod request with sidecars (KEP-753), pod overhead excluded.

    Walking init containers in order: a sidecar adds its request to ``sidecarSum``; a regular
    init container needs ``sidecarSum + request`` while it runs (``initMax`` keeps the
    largest). The pod needs ``max(initMax, sum(app requests) + sidecarSum)``.
    """
    return dict(pod._effective_requests)  # computed once per pod; a copy the caller may change


def effective_pod_limits(pod: Pod) -> dict[str, int]:
    """Like :func:`effective_pod_requests` over limits (the device manager's pod-scope input)."""
    return dict(pod._effective_limits)


def guaranteed_cpus(pod: Pod, container: Container) -> int:
    """Exclusive CPUs the static CPU manager gives ``container`` (kubelet ``guaranteedCPUs``).

    Non-zero only in a Guaranteed pod whose container requests a whole number of CPUs
    (``2`` or ``2000m``, not ``1500m``).
    """
    if pod.qos is not QOSClass.GUARANTEED:
        return 0
    millis = container.requests.get("cpu", 0)
    if millis <= 0 or millis % 1000:
        return 0
    return millis // 1000


def pod_guaranteed_cpus(pod: Pod) -> int:
    """Exclusive CPUs of the whole pod (kubelet ``podGuaranteedCPUs``, pod scope).

    Same init / sidecar accumulation as :func:`effective_pod_requests`, over
    :func:`guaranteed_cpus` of each container.
    """
    sidecar_sum = 0
    init_max = 0
    for c in pod.init_containers:
        n = guaranteed_cpus(pod, c)
        if c.kind is ContainerKind.SIDECAR:
            sidecar_sum += n
        else:
            init_max = max(init_max, sidecar_sum + n)
    app_sum = sum(guaranteed_cpus(pod, c) for c in pod.app_containers)
    return max(init_max, app_sum + sidecar_sum)


# --------------------------------------------------------------------------------------------
# Manifests
# --------------------------------------------------------------------------------------------

#: the v1 API's fields at the levels numalign parses (k8s.io/api/core/v1 types.go, 1.35)
_DOCUMENT_FIELDS = frozenset({"apiVersion", "kind", "metadata", "spec", "status"})
_LIST_FIELDS = frozenset({"apiVersion", "kind", "metadata", "items"})
_METADATA_FIELDS = frozenset({
    "name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation",
    "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels",
    "annotations", "ownerReferences", "finalizers", "managedFields",
})
_SPEC_FIELDS = frozenset({
    "volumes", "initContainers", "containers", "ephemeralContainers", "restartPolicy",
    "terminationGracePeriodSeconds", "activeDeadlineSeconds", "dnsPolicy", "nodeSelector",
    "serviceAccountName", "serviceAccount", "automountServiceAccountToken", "nodeName",
    "hostNetwork", "hostPID", "hostIPC", "shareProcessNamespace", "securityContext",
    "imagePullSecrets", "hostname", "subdomain", "affinity", "schedulerName", "tolerations",
    "hostAliases", "priorityClassName", "priority", "dnsConfig", "readinessGates",
    "runtimeClassName", "enableServiceLinks", "preemptionPolicy", "overhead",
    "topologySpreadConstraints", "setHostnameAsFQDN", "os", "hostUsers", "schedulingGates",
    "resourceClaims", "resources", "hostnameOverride", "workloadRef",
    # KEP-693's per-pod policy (its field and numalign's earlier spelling)
    "topology", "topologyPolicy",
})
_CONTAINER_FIELDS = frozenset({
    "name", "image", "command", "args", "workingDir", "ports", "envFrom", "env", "resources",
    "resizePolicy", "restartPolicy", "restartPolicyRules", "volumeMounts", "volumeDevices",
    "livenessProbe", "readinessProbe", "startupProbe", "lifecycle", "terminationMessagePath",
    "terminationMessagePolicy", "imagePullPolicy", "securityContext", "stdin", "stdinOnce", "tty",
})
_RESOURCES_FIELDS = frozenset({"limits", "requests", "claims"})
_TOPOLOGY_FIELDS = frozenset({"policy"})


def _known(doc: Mapping[str, object], allowed: frozenset[str], path: str, strict: bool) -> None:
    """kubectl --validate=strict: a field the API does not have at ``path`` is an error."""
    if not strict:
        return
    for key in doc:
        if key not in allowed:
            import difflib  # an error's suggestion only

            near = difflib.get_close_matches(key, sorted(allowed), n=1)
            hint = f' (did you mean "{near[0]}"?)' if near else ""
            where = f"{path}.{key}" if path else key
            raise InputError(f"unknown field{hint}", where)


_POD_KINDS = ("Pod",)
_LIST_KINDS = ("List", "PodList")


#: ``uuid.NAMESPACE_URL`` (RFC 4122, appendix C) as bytes
_NAMESPACE_URL = bytes.fromhex("6ba7b8119dad11d180b400c04fd430c8")


def default_uid(namespace: str, name: str) -> str:
    """The uid of a pod manifest without ``metadata.uid``: deterministic in namespace/name,
    ``uuid.uuid5(uuid.NAMESPACE_URL, "numalign:pod:<namespace>/<name>")`` (RFC 4122 version 5:
    SHA-1 of the namespace and the name, version and variant bits set), computed here because
    the :mod:`uuid` module costs every ``numalign`` command start-up time (it imports
    :mod:`platform`)."""
    try:  # CPython's own SHA-1: hashlib would load OpenSSL first (4 ms of every admit)
        from _sha1 import sha1  # type: ignore[import-not-found]  # no stub: private to CPython
    except ImportError:  # an interpreter without it
        from hashlib import sha1
    raw = bytearray(sha1(_NAMESPACE_URL + f"numalign:pod:{namespace}/{name}".encode()).digest()[:16])
    raw[6] = raw[6] & 0x0F | 0x50  # version 5
    raw[8] = raw[8] & 0x3F | 0x80  # variant RFC 4122
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def _is_native(resource: str) -> bool:
    """Resources in the kubernetes.io namespace (unprefixed names included)."""
    if "/" not in resource:
        return True
    prefix = resource.split("/", 1)[0]
    return prefix == "kubernetes.io" or prefix.endswith(".kubernetes.io")


def _overcommit_allowed(resource: str) -> bool:
    return _is_native(resource) and not is_hugepages_resource(resource)


def _engine_units(resource: str, q: Fraction) -> int:
    return cpu_millis(q) if resource == "cpu" else quantity_int(q)


def _mapping(value: object, field: str) -> Mapping[str, object]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InputError(f"expected a mapping, got {type(value).__name__}", field)
    for k in value:
        if not isinstance(k, str):
            raise InputError(f"key {k!r} is not a string", field)
    return value


def _string(value: object, field: str, *, required: bool = True) -> str | None:
    if value is None:
        if required:
            raise InputError("missing required field", field)
        return None
    if not isinstance(value, str):
        raise InputError(f"expected a string, got {type(value).__name__}", field)
    if required and not value:
        raise InputError("must not be empty", field)
    return value


def _resource_list(value: object, field: str) -> dict[str, Fraction]:
    out: dict[str, Fraction] = {}
    for name, raw in _mapping(value, field).items():
        f = f"{field}.{name}"
        if not name:
            raise InputError("empty resource name", field)
        q = parse_quantity(raw, f)
        if q < 0:
            raise InputError(f'must be non-negative, got "{raw}"', f)
        if not _is_native(name) and q.denominator != 1:
            raise InputError(f'must be a whole number, got "{raw}"', f)
        out[name] = q
    return out


def _parse_container(
    raw: object, field: str, kind: ContainerKind, strict: bool = True
) -> tuple[Container, dict[str, Fraction], dict[str, Fraction]]:
    doc = _mapping(raw, field)
    _known(doc, _CONTAINER_FIELDS, field, strict)
    name = _string(doc.get("name"), f"{field}.name")
    assert name is not None
    if kind is not ContainerKind.APP:
        policy = doc.get("restartPolicy")
        if policy == "Always":
            kind = ContainerKind.SIDECAR
        elif policy is not None:
            raise InputError(
                f'unsupported value {policy!r}: init containers allow only "Always"',
                f"{field}.restartPolicy",
            )
    res = _mapping(doc.get("resources"), f"{field}.resources")
    _known(res, _RESOURCES_FIELDS, f"{field}.resources", strict)
    requests = _resource_list(res.get("requests"), f"{field}.resources.requests")
    limits = _resource_list(res.get("limits"), f"{field}.resources.limits")
    for rname, lim in limits.items():
        requests.setdefault(rname, lim)  # API defaulting: request defaults to the limit
    for rname, req in requests.items():
        f = f"{field}.resources.requests.{rname}"
        lim_q = limits.get(rname)
        if not _overcommit_allowed(rname):
            if lim_q is None:
                raise InputError("limit must be set for a resource that cannot be overcommitted", f)
            if lim_q != req:
                raise InputError("must be equal to the limit (cannot be overcommitted)", f)
        elif lim_q is not None and req > lim_q:
            raise InputError("must be less than or equal to the limit", f)
    container = Container(
        name=name,
        kind=kind,
        requests={k: _engine_units(k, v) for k, v in requests.items()},
        limits={k: _engine_units(k, v) for k, v in limits.items()},
    )
    return container, requests, limits


def _topology_policy(spec: Mapping[str, object], strict: bool) -> str | None:
    """KEP-693's ``spec.topology.policy`` or numalign's ``spec.topologyPolicy``."""
    old = _string(spec.get("topologyPolicy"), "spec.topologyPolicy", required=False)
    topo = _mapping(spec.get("topology"), "spec.topology")
    _known(topo, _TOPOLOGY_FIELDS, "spec.topology", strict)
    new = _string(topo.get("policy"), "spec.topology.policy", required=False)
    if old is not None and new is not None and old != new:
        raise InputError(
            f"{new!r} differs from spec.topologyPolicy {old!r} (give one)", "spec.topology.policy"
        )
    return new if new is not None else old


def _parse_pod(doc: Mapping[str, object], strict: bool = True) -> Pod:
    _known(doc, _DOCUMENT_FIELDS, "", strict)
    meta = _mapping(doc.get("metadata"), "metadata")
    _known(meta, _METADATA_FIELDS, "metadata", strict)
    name = _string(meta.get("name"), "metadata.name")
    namespace = _string(meta.get("namespace"), "metadata.namespace", required=False) or "default"
    assert name is not None
    uid = _string(meta.get("uid"), "metadata.uid", required=False) or default_uid(namespace, name)
    annotations: dict[str, str] = {}
    for k, v in _mapping(meta.get("annotations"), "metadata.annotations").items():
        annotations[k] = _string(v, f"metadata.annotations.{k}", required=False) or ""

    spec = _mapping(doc.get("spec"), "spec")
    _known(spec, _SPEC_FIELDS, "spec", strict)
    if spec.get("resources") is not None:
        raise InputError("pod-level resources are not supported", "spec.resources")
    topology_policy = _topology_policy(spec, strict)

    parsed: list[tuple[Container, dict[str, Fraction], dict[str, Fraction]]] = []
    seen: set[str] = set()
    for key, kind in (("initContainers", ContainerKind.INIT), ("containers", ContainerKind.APP)):
        items = spec.get(key)
        if items is None:
            items = []
        if not isinstance(items, Sequence) or isinstance(items, str):
            raise InputError(f"expected a list, got {type(items).__name__}", f"spec.{key}")
        if key == "containers" and not items:
            raise InputError("a pod needs at least one container", "spec.containers")
        for i, raw in enumerate(items):
            entry = _parse_container(raw, f"spec.{key}[{i}]", kind, strict)
            if entry[0].name in seen:
                raise InputError(
                    f"duplicate container name {entry[0].name!r}", f"spec.{key}[{i}].name"
                )
            seen.add(entry[0].name)
            parsed.append(entry)
    qos = compute_qos((req, lim) for _, req, lim in parsed)
    return Pod(
        namespace=namespace,
        name=name,
        uid=uid,
        qos=qos,
        containers=tuple(c for c, _, _ in parsed),
        annotations=annotations,
        topology_policy=topology_policy,
    )


def _parse_document(doc: object, out: list[Pod], strict: bool = True) -> None:
    """Parse one document (a Pod or a List) into ``out``; errors carry field paths."""
    body = _mapping(doc, "document")
    kind = body.get("kind")
    api = body.get("apiVersion")
    if api is not None and api != "v1":
        raise InputError(f'unsupported apiVersion {api!r}, expected "v1"', "apiVersion")
    if kind in _LIST_KINDS:
        _known(body, _LIST_FIELDS, "", strict)
        items = body.get("items")
        if items is None:
            items = []
        if not isinstance(items, Sequence) or isinstance(items, str):
            raise InputError(f"expected a list, got {type(items).__name__}", "items")
        for i, item in enumerate(items):
            try:
                _parse_document(item, out, strict)
            except InputError as e:
                raise e.within(f"items[{i}]") from None
        return
    if kind not in _POD_KINDS:
        if kind is None:
            raise InputError("missing required field (expected Pod or List)", "kind")
        raise InputError(f"unsupported kind {kind!r}, expected Pod or List", "kind")
    out.append(_parse_pod(body, strict))


def parse_pods(documents: object, source: str = "pods", *, strict: bool = True) -> list[Pod]:
    """Pods from parsed manifest documents.

    ``documents`` is one document (a mapping: a Pod or a List) or a sequence of documents
    (the result of ``yaml.safe_load_all``); ``None`` documents are skipped. Errors are one
    line: ``<source>: <field path>: <problem>``, with ``<source>[<n>]`` naming the document
    (counted from 0) when there are several.
    """
    docs: list[object]
    if isinstance(documents, Sequence) and not isinstance(documents, str | bytes):
        docs = list(documents)
    else:
        docs = [documents]
    several = len(docs) > 1
    out: list[Pod] = []
    for n, doc in enumerate(docs):
        if doc is None:
            continue
        where = f"{source}[{n}]" if several else source
        try:
            _parse_document(doc, out, strict)
        except InputError as e:
            field = f"{where}: {e.field}" if e.field else where
            raise InputError(escape_newlines(e.problem), escape_newlines(field)) from None
    return out


def read_pod_files(paths: Iterable[str], *, require_pods: bool = False) -> list[Pod]:
    """Pods from YAML/JSON manifest files (multi-document YAML allowed), in file order.

    Read errors and YAML syntax errors become one-line :class:`InputError`s naming the file.
    With ``require_pods`` a file without any pod (empty, comments only, an empty List) is
    an error naming it. Duplicate pod keys are not checked here (a replay may submit the
    same pod twice).
    """
    pods: list[Pod] = []
    for path in paths:
        found = parse_pods(read_yaml_documents(path), path)
        if require_pods and not found:
            raise InputError("no pod in this file (it is empty or has only empty documents)",
                             escape_newlines(path))
        pods.extend(found)
    return pods
