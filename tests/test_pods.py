"""Quantities, pod manifests, QoS classes, effective requests and guaranteed CPUs."""

from __future__ import annotations

import copy
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from numalign.errors import InputError
from numalign.inputs.quantity import cpu_millis, parse_quantity, quantity_int
from numalign.pods import (
    Container,
    ContainerKind,
    Pod,
    QOSClass,
    compute_qos,
    default_uid,
    effective_pod_limits,
    effective_pod_requests,
    guaranteed_cpus,
    parse_pods,
    pod_guaranteed_cpus,
    pod_qos,
    read_pod_files,
)

GI = 1 << 30
MI = 1 << 20

# --------------------------------------------------------------------------------------------
# quantities
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1500m", Fraction(3, 2)),
        ("2Gi", 2 * GI),
        ("1e3", 1000),
        ("1E3", 1000),
        ("100M", 100_000_000),
        ("0.5", Fraction(1, 2)),
        (".5", Fraction(1, 2)),
        ("1.", 1),  # Kubernetes accepts a trailing dot
        ("2", 2),
        ("+2", 2),
        ("-2k", -2000),
        ("250n", Fraction(250, 10**9)),
        ("3u", Fraction(3, 10**6)),
        ("1k", 1000),
        ("1G", 10**9),
        ("1T", 10**12),
        ("1P", 10**15),
        ("1E", 10**18),  # a bare E is exa, not an exponent
        ("1Ki", 1024),
        ("1Mi", MI),
        ("1Ti", 1 << 40),
        ("1Pi", 1 << 50),
        ("1Ei", 1 << 60),
        ("1.5Gi", 3 * (GI // 2)),
        ("5e-3", Fraction(5, 1000)),
        ("12E+1", 120),
        ("0", 0),
        ("000100m", Fraction(1, 10)),
        (1, 1),
        (0.1, Fraction(1, 10)),  # the decimal the YAML author wrote, not the binary float
        (2.5, Fraction(5, 2)),
    ],
)
def test_quantity(text: object, value: Fraction | int) -> None:
    q = parse_quantity(text, "f")
    assert q == value
    assert isinstance(q, Fraction)


@pytest.mark.parametrize(
    "text",
    ["2Gx", "1.2.3", "Gi", "", " 1", "1 ", "1K", "1e", "e3", "1gi", "1Ki3", "--1", "1m1", "0x10"],
)
def test_bad_quantity(text: str) -> None:
    with pytest.raises(InputError) as exc:
        parse_quantity(text, "spec.containers[1].resources.limits.cpu")
    assert str(exc.value) == f'spec.containers[1].resources.limits.cpu: invalid quantity "{text}"'


@pytest.mark.parametrize("value", [None, True, [1], {"a": 1}, float("nan"), float("inf")])
def test_bad_quantity_type(value: object) -> None:
    with pytest.raises(InputError) as exc:
        parse_quantity(value, "x.y")
    assert exc.value.field == "x.y"


@pytest.mark.parametrize(
    ("text", "millis"),
    [("1500m", 1500), ("2", 2000), ("0.0001", 1), ("1.0001", 1001), ("100n", 1), ("0", 0)],
)
def test_cpu_millis_rounds_up(text: str, millis: int) -> None:
    assert cpu_millis(parse_quantity(text, "f")) == millis


@pytest.mark.parametrize(
    ("text", "value"),
    [("2Gi", 2 * GI), ("1.5", 2), ("100m", 1), ("1e3", 1000), ("-1.5", -2), ("0", 0)],
)
def test_quantity_int_rounds_away_from_zero(text: str, value: int) -> None:
    assert quantity_int(parse_quantity(text, "f")) == value


_SUFFIXES = ["", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]
_FACTORS = [
    Fraction(1),
    Fraction(1, 10**9),
    Fraction(1, 10**6),
    Fraction(1, 10**3),
    Fraction(10**3),
    Fraction(10**6),
    Fraction(10**9),
    Fraction(10**12),
    Fraction(10**15),
    Fraction(10**18),
    Fraction(2**10),
    Fraction(2**20),
    Fraction(2**30),
    Fraction(2**40),
    Fraction(2**50),
    Fraction(2**60),
]


@given(
    st.sampled_from(["", "+", "-"]),
    st.integers(min_value=0, max_value=10**12),
    st.one_of(st.none(), st.integers(min_value=0, max_value=999999)),
    st.one_of(
        st.integers(min_value=0, max_value=len(_SUFFIXES) - 1),
        st.tuples(st.sampled_from("eE"), st.integers(min_value=-20, max_value=20)),
    ),
)
def test_generated_quantities(
    sign: str, whole: int, frac: int | None, suffix: int | tuple[str, int]
) -> None:
    mantissa = str(whole) if frac is None else f"{whole}.{frac:06d}"
    if isinstance(suffix, int):
        text = f"{sign}{mantissa}{_SUFFIXES[suffix]}"
        factor = _FACTORS[suffix]
    else:
        letter, exp = suffix
        text = f"{sign}{mantissa}{letter}{exp}"
        factor = Fraction(10) ** exp
    expected = Fraction(Decimal(mantissa)) * factor
    if sign == "-":
        expected = -expected
    assert parse_quantity(text, "f") == expected


# --------------------------------------------------------------------------------------------
# manifests
# --------------------------------------------------------------------------------------------


def res(cpu: str | None = None, memory: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if cpu is not None:
        out["cpu"] = cpu
    if memory is not None:
        out["memory"] = memory
    return out


def ctr(
    name: str,
    requests: dict[str, Any] | None = None,
    limits: dict[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "image": "busybox"}
    resources: dict[str, Any] = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    if resources:
        c["resources"] = resources
    c.update(extra)
    return c


def manifest(
    containers: list[dict[str, Any]],
    init: list[dict[str, Any]] | None = None,
    name: str = "p",
    **spec: Any,
) -> dict[str, Any]:
    s: dict[str, Any] = {"containers": containers, **spec}
    if init is not None:
        s["initContainers"] = init
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": s}


def one(doc: dict[str, Any]) -> Pod:
    pods = parse_pods(doc, "pod.yaml")
    assert len(pods) == 1
    return pods[0]


def test_parse_guaranteed_pod() -> None:
    pod = one(
        manifest(
            [ctr("a", limits={**res("2", "1Gi"), "nvidia.com/gpu": 1})],
            init=[
                ctr("setup", limits=res("1", "100Mi")),
                ctr("proxy", limits=res("1", "100Mi"), restartPolicy="Always"),
            ],
            topologyPolicy="single-numa-node",
        )
    )
    assert pod.namespace == "default"
    assert pod.name == "p"
    assert pod.key == "default/p"
    assert pod.uid == default_uid("default", "p")
    assert pod.qos is QOSClass.GUARANTEED
    assert pod.topology_policy == "single-numa-node"
    assert [(c.name, c.kind) for c in pod.containers] == [
        ("setup", ContainerKind.INIT),
        ("proxy", ContainerKind.SIDECAR),
        ("a", ContainerKind.APP),
    ]
    a = pod.containers[2]
    # requests defaulted from limits, engine units: millicores, bytes, counts
    assert a.requests == {"cpu": 2000, "memory": GI, "nvidia.com/gpu": 1}
    assert a.limits == a.requests


def test_metadata() -> None:
    doc = manifest([ctr("a")])
    doc["metadata"] = {
        "name": "web",
        "namespace": "prod",
        "uid": "1234-abcd",
        "annotations": {"volcano.sh/numa-topology-policy": "single-numa-node"},
    }
    pod = one(doc)
    assert pod.key == "prod/web"
    assert pod.uid == "1234-abcd"
    assert pod.annotations == {"volcano.sh/numa-topology-policy": "single-numa-node"}
    assert pod.topology_policy is None


def test_default_uid_is_deterministic_and_distinct() -> None:
    a = one(manifest([ctr("a")], name="x")).uid
    assert a == one(manifest([ctr("a")], name="x")).uid
    assert a != one(manifest([ctr("a")], name="y")).uid
    assert default_uid("ns1", "x") != default_uid("ns2", "x")
    assert len(a) == 36  # a UUID string


def test_request_defaults_to_limit_for_every_resource() -> None:
    pod = one(
        manifest(
            [
                ctr(
                    "a",
                    requests={"cpu": "500m"},
                    limits={
                        "cpu": "1",
                        "memory": "1Gi",
                        "hugepages-2Mi": "100Mi",
                        "example.com/foo": 2,
                        "ephemeral-storage": "1G",
                    },
                )
            ]
        )
    )
    c = pod.containers[0]
    assert c.requests == {
        "cpu": 500,  # explicit request kept
        "memory": GI,
        "hugepages-2Mi": 100 * MI,
        "example.com/foo": 2,
        "ephemeral-storage": 10**9,
    }
    assert pod.qos is QOSClass.BURSTABLE


def test_list_and_multi_document(tmp_path: Path) -> None:
    lst = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [manifest([ctr("a")], name="p1"), manifest([ctr("a")], name="p2")],
    }
    assert [p.name for p in parse_pods(lst, "l.yaml")] == ["p1", "p2"]
    f1 = tmp_path / "multi.yaml"
    f1.write_text(
        yaml.safe_dump_all([manifest([ctr("a")], name="m1"), None, manifest([ctr("a")], name="m2")])
    )
    f2 = tmp_path / "list.json"
    f2.write_text(yaml.safe_dump(lst))
    pods = read_pod_files([str(f1), str(f2)])
    assert [p.name for p in pods] == ["m1", "m2", "p1", "p2"]


def test_empty_file_gives_no_pods(tmp_path: Path) -> None:
    f = tmp_path / "empty.yaml"
    f.write_text("# nothing\n")
    assert read_pod_files([str(f)]) == []


def test_missing_api_version_is_accepted() -> None:
    doc = manifest([ctr("a")])
    del doc["apiVersion"]
    assert one(doc).name == "p"


def _error(doc: object, source: str = "pod.yaml") -> str:
    with pytest.raises(InputError) as exc:
        parse_pods(doc, source)
    msg = str(exc.value)
    assert "\n" not in msg
    return msg


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (
            lambda d: d["spec"]["containers"].append(ctr("b", limits={"cpu": "2Gx"})),
            'pod.yaml: spec.containers[1].resources.limits.cpu: invalid quantity "2Gx"',
        ),
        (
            lambda d: d["metadata"].pop("name"),
            "pod.yaml: metadata.name: missing required field",
        ),
        (
            lambda d: d["metadata"].update(name=""),
            "pod.yaml: metadata.name: must not be empty",
        ),
        (
            lambda d: d.update(kind="Deployment"),
            "pod.yaml: kind: unsupported kind 'Deployment', expected Pod or List",
        ),
        (
            lambda d: d.pop("kind"),
            "pod.yaml: kind: missing required field (expected Pod or List)",
        ),
        (
            lambda d: d.update(apiVersion="apps/v1"),
            "pod.yaml: apiVersion: unsupported apiVersion 'apps/v1', expected \"v1\"",
        ),
        (
            lambda d: d["spec"].update(containers=[]),
            "pod.yaml: spec.containers: a pod needs at least one container",
        ),
        (
            lambda d: d["spec"].pop("containers"),
            "pod.yaml: spec.containers: a pod needs at least one container",
        ),
        (
            lambda d: d["spec"].update(containers={"name": "a"}),
            "pod.yaml: spec.containers: expected a list, got dict",
        ),
        (
            lambda d: d["spec"]["containers"].append(ctr("a")),
            "pod.yaml: spec.containers[1].name: duplicate container name 'a'",
        ),
        (
            lambda d: d["spec"].update(initContainers=[ctr("a")]),
            "pod.yaml: spec.containers[0].name: duplicate container name 'a'",
        ),
        (
            lambda d: d["spec"]["containers"].append({"image": "x"}),
            "pod.yaml: spec.containers[1].name: missing required field",
        ),
        (
            lambda d: d["spec"].update(initContainers=[ctr("i", restartPolicy="OnFailure")]),
            "pod.yaml: spec.initContainers[0].restartPolicy: unsupported value 'OnFailure': "
            'init containers allow only "Always"',
        ),
        (
            lambda d: d["spec"]["containers"].append(ctr("b", requests={"memory": "-1Gi"})),
            'pod.yaml: spec.containers[1].resources.requests.memory: must be non-negative, got "-1Gi"',
        ),
        (
            lambda d: d["spec"]["containers"].append(
                ctr("b", requests={"cpu": "2"}, limits={"cpu": "1"})
            ),
            "pod.yaml: spec.containers[1].resources.requests.cpu: must be less than or equal to the limit",
        ),
        (
            lambda d: d["spec"]["containers"].append(ctr("b", requests={"nvidia.com/gpu": 1})),
            "pod.yaml: spec.containers[1].resources.requests.nvidia.com/gpu: limit must be set for "
            "a resource that cannot be overcommitted",
        ),
        (
            lambda d: d["spec"]["containers"].append(
                ctr("b", requests={"hugepages-1Gi": "1Gi"}, limits={"hugepages-1Gi": "2Gi"})
            ),
            "pod.yaml: spec.containers[1].resources.requests.hugepages-1Gi: must be equal to the "
            "limit (cannot be overcommitted)",
        ),
        (
            lambda d: d["spec"]["containers"].append(ctr("b", limits={"nvidia.com/gpu": "500m"})),
            'pod.yaml: spec.containers[1].resources.limits.nvidia.com/gpu: must be a whole number, got "500m"',
        ),
        (
            lambda d: d["spec"]["containers"].append(
                {"name": "b", "resources": {"limits": ["cpu"]}}
            ),
            "pod.yaml: spec.containers[1].resources.limits: expected a mapping, got list",
        ),
        (
            lambda d: d["spec"].update(resources={"limits": {"cpu": "1"}}),
            "pod.yaml: spec.resources: pod-level resources are not supported",
        ),
        (
            lambda d: d["spec"].update(topologyPolicy=3),
            "pod.yaml: spec.topologyPolicy: expected a string, got int",
        ),
        (
            lambda d: d["metadata"].update(annotations={"a": 1}),
            "pod.yaml: metadata.annotations.a: expected a string, got int",
        ),
        (
            lambda d: d.update(metadata="p"),
            "pod.yaml: metadata: expected a mapping, got str",
        ),
    ],
)
def test_manifest_errors(mutate: Any, message: str) -> None:
    doc = manifest([ctr("a", limits=res("1", "1Gi"))])
    mutate(doc)
    assert _error(doc) == message


def test_error_in_list_item_and_document_names_them() -> None:
    bad = manifest([ctr("a", limits={"memory": "lots"})], name="bad")
    lst = {"apiVersion": "v1", "kind": "List", "items": [manifest([ctr("a")]), bad]}
    assert _error(lst) == (
        'pod.yaml: items[1].spec.containers[0].resources.limits.memory: invalid quantity "lots"'
    )
    assert _error([manifest([ctr("a")]), bad], "multi.yaml") == (
        'multi.yaml[1]: spec.containers[0].resources.limits.memory: invalid quantity "lots"'
    )
    assert _error("just text") == "pod.yaml: document: expected a mapping, got str"


def test_read_errors(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(InputError) as exc:
        read_pod_files([str(missing)])
    assert str(exc.value).startswith(f"{missing}: cannot read")
    broken = tmp_path / "broken.yaml"
    broken.write_text("kind: Pod\nmetadata: {name: [x\n")
    with pytest.raises(InputError) as exc:
        read_pod_files([str(broken)])
    msg = str(exc.value)
    assert msg.startswith(f"{broken}: invalid YAML:")
    assert "line" in msg
    assert "\n" not in msg
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(manifest([ctr("a", limits={"cpu": "2Gx"})])))
    with pytest.raises(InputError) as exc:
        read_pod_files([str(bad)])
    assert (
        str(exc.value) == f'{bad}: spec.containers[0].resources.limits.cpu: invalid quantity "2Gx"'
    )


# --------------------------------------------------------------------------------------------
# QoS (Kubernetes "Pod Quality of Service Classes" and GetPodQOS)
# --------------------------------------------------------------------------------------------

G = QOSClass.GUARANTEED
B = QOSClass.BURSTABLE
BE = QOSClass.BEST_EFFORT


@pytest.mark.parametrize(
    ("containers", "init", "qos"),
    [
        # no requests or limits anywhere
        ([ctr("a")], None, BE),
        ([ctr("a"), ctr("b")], [ctr("i")], BE),
        # only non-QoS resources: still BestEffort (only cpu and memory count)
        ([ctr("a", limits={"nvidia.com/gpu": 1, "ephemeral-storage": "1Gi"})], None, BE),
        # zero quantities do not count
        ([ctr("a", requests={"cpu": "0", "memory": "0"})], None, BE),
        # limits only: requests default to them -> Guaranteed
        ([ctr("a", limits=res("1", "1Gi"))], None, G),
        ([ctr("a", requests=res("1", "1Gi"), limits=res("1", "1Gi"))], None, G),
        ([ctr("a", requests=res("1000m", "1024Mi"), limits=res("1", "1Gi"))], None, G),
        # extended resources beside do not change it
        ([ctr("a", limits={**res("2", "1Gi"), "nvidia.com/gpu": 1})], None, G),
        # every container needs both limits
        ([ctr("a", limits=res("1", "1Gi")), ctr("b", limits=res("1"))], None, B),
        ([ctr("a", limits=res("1", "1Gi")), ctr("b")], None, B),
        ([ctr("a", limits=res(memory="1Gi"))], None, B),
        # request below limit
        ([ctr("a", requests=res("500m", "1Gi"), limits=res("1", "1Gi"))], None, B),
        ([ctr("a", requests=res("1", "512Mi"), limits=res("1", "1Gi"))], None, B),
        # requests only
        ([ctr("a", requests=res("1", "1Gi"))], None, B),
        ([ctr("a", requests=res(memory="1Mi"))], None, B),
        # init containers count too
        ([ctr("a", limits=res("1", "1Gi"))], [ctr("i", limits=res("1", "1Gi"))], G),
        ([ctr("a", limits=res("1", "1Gi"))], [ctr("i")], B),
        ([ctr("a", limits=res("1", "1Gi"))], [ctr("i", requests=res("100m"))], B),
        ([ctr("a")], [ctr("i", requests=res("100m"))], B),
        (
            [ctr("a", limits=res("1", "1Gi"))],
            [ctr("s", limits=res("1", "1Gi"), restartPolicy="Always")],
            G,
        ),
        # a zero limit is no limit
        ([ctr("a", requests=res("0", "1Gi"), limits=res("0", "1Gi"))], None, B),
    ],
)
def test_qos(
    containers: list[dict[str, Any]], init: list[dict[str, Any]] | None, qos: QOSClass
) -> None:
    assert one(manifest(containers, init)).qos is qos


def test_qos_compares_pod_sums_like_the_kubelet() -> None:
    # GetPodQOS sums requests and limits over the pod before comparing them: two containers
    # whose mismatches cancel out still make a Guaranteed pod (an upstream quirk we keep).
    requests_a = {"cpu": Fraction(1), "memory": Fraction(GI)}
    limits_a = {"cpu": Fraction(2), "memory": Fraction(GI)}
    requests_b = {"cpu": Fraction(2), "memory": Fraction(GI)}
    limits_b = {"cpu": Fraction(1), "memory": Fraction(GI)}
    assert compute_qos([(requests_a, limits_a), (requests_b, limits_b)]) is G


def test_qos_uses_exact_quantities() -> None:
    # 0.0001 cpu rounds up to 1m in engine units, but GetPodQOS compares exact quantities
    doc = manifest([ctr("a", requests=res("0.0001", "1Gi"), limits=res("1m", "1Gi"))])
    assert one(doc).qos is B


def test_pod_qos_on_containers() -> None:
    c = Container("a", ContainerKind.APP, {"cpu": 1000, "memory": GI}, {"cpu": 1000, "memory": GI})
    assert pod_qos([c]) is G
    assert pod_qos([Container("a", ContainerKind.APP)]) is BE


# --------------------------------------------------------------------------------------------
# effective requests (KEP-753) and guaranteed CPUs (spec 3.1, 3.2)
# --------------------------------------------------------------------------------------------


def mkpod(*containers: Container, qos: QOSClass = G) -> Pod:
    return Pod("default", "p", "uid", qos, containers)


def c(name: str, kind: ContainerKind, cpu: int = 0, mem: int = 0, **other: int) -> Container:
    r: dict[str, int] = {}
    if cpu:
        r["cpu"] = cpu
    if mem:
        r["memory"] = mem
    r.update(other)
    return Container(name, kind, dict(r), dict(r))


INIT = ContainerKind.INIT
SIDE = ContainerKind.SIDECAR
APP = ContainerKind.APP


@pytest.mark.parametrize(
    ("containers", "expected"),
    [
        # app containers only: the sum
        ([c("a", APP, 1000, 100), c("b", APP, 2000, 200)], {"cpu": 3000, "memory": 300}),
        # a big regular init container dominates
        ([c("i", INIT, 4000, 50), c("a", APP, 1000, 100)], {"cpu": 4000, "memory": 100}),
        # init containers run one after another: max, not sum
        (
            [c("i1", INIT, 3000), c("i2", INIT, 2000), c("a", APP, 1000)],
            {"cpu": 3000},
        ),
        # a sidecar keeps running beside the app containers: added
        ([c("s", SIDE, 1000), c("a", APP, 2000)], {"cpu": 3000}),
        # sidecar started before a regular init container: runs beside it
        ([c("s", SIDE, 1000), c("i", INIT, 3000), c("a", APP, 1000)], {"cpu": 4000}),
        # sidecar started after the regular init container: not beside it
        ([c("i", INIT, 3000), c("s", SIDE, 1000), c("a", APP, 1000)], {"cpu": 3000}),
        # KEP-753 example shape: sidecars accumulate
        (
            [
                c("s1", SIDE, 1000),
                c("i1", INIT, 2000),
                c("s2", SIDE, 1000),
                c("i2", INIT, 2000),
                c("a", APP, 500),
            ],
            {"cpu": 4000},
        ),
        (
            [c("s1", SIDE, 1000), c("s2", SIDE, 1000), c("a", APP, 3000), c("b", APP, 1000)],
            {"cpu": 6000},
        ),
        # per resource independently
        (
            [c("i", INIT, 4000, 10, **{"nvidia.com/gpu": 1}), c("a", APP, 1000, 100)],
            {"cpu": 4000, "memory": 100, "nvidia.com/gpu": 1},
        ),
    ],
)
def test_effective_pod_requests(containers: list[Container], expected: dict[str, int]) -> None:
    pod = mkpod(*containers)
    assert effective_pod_requests(pod) == expected
    assert effective_pod_limits(pod) == expected  # these containers have limits == requests


def test_effective_requests_from_manifest() -> None:
    pod = one(
        manifest(
            [ctr("app", limits=res("2", "1Gi"))],
            init=[
                ctr("sidecar", limits=res("1", "256Mi"), restartPolicy="Always"),
                ctr("migrate", limits=res("4", "2Gi")),
            ],
        )
    )
    assert effective_pod_requests(pod) == {"cpu": 5000, "memory": 2 * GI + 256 * MI}
    assert pod_guaranteed_cpus(pod) == 5


def test_limits_differ_from_requests() -> None:
    a = Container("a", APP, {"cpu": 500}, {"cpu": 1000})
    pod = mkpod(a, qos=B)
    assert effective_pod_requests(pod) == {"cpu": 500}
    assert effective_pod_limits(pod) == {"cpu": 1000}


@pytest.mark.parametrize(
    ("cpu", "qos", "n"),
    [
        (2000, G, 2),
        (1000, G, 1),
        (1500, G, 0),  # not a whole number of CPUs: shared pool
        (0, G, 0),
        (2000, B, 0),  # not Guaranteed
        (2000, BE, 0),
        (64000, G, 64),
    ],
)
def test_guaranteed_cpus(cpu: int, qos: QOSClass, n: int) -> None:
    ctr_ = c("a", APP, cpu, 100)
    assert guaranteed_cpus(mkpod(ctr_, qos=qos), ctr_) == n


def test_guaranteed_cpus_from_quantities() -> None:
    for text, n in (("2", 2), ("2000m", 2), ("1500m", 0), ("0.9999999", 1), ("1.0001", 0)):
        pod = one(manifest([ctr("a", limits=res(text, "1Gi"))]))
        assert guaranteed_cpus(pod, pod.containers[0]) == n, text


@pytest.mark.parametrize(
    ("containers", "n"),
    [
        ([c("a", APP, 2000), c("b", APP, 3000)], 5),
        ([c("a", APP, 2000), c("b", APP, 1500)], 2),  # the fractional container adds nothing
        ([c("i", INIT, 6000), c("a", APP, 2000)], 6),
        ([c("s", SIDE, 1000), c("i", INIT, 4000), c("a", APP, 2000)], 5),
        ([c("i", INIT, 4000), c("s", SIDE, 1000), c("a", APP, 2000)], 4),
        ([c("s", SIDE, 2000), c("a", APP, 2000), c("b", APP, 2000)], 6),
        ([c("a", APP, 0, 100)], 0),
    ],
)
def test_pod_guaranteed_cpus(containers: list[Container], n: int) -> None:
    assert pod_guaranteed_cpus(mkpod(*containers)) == n
    assert pod_guaranteed_cpus(mkpod(*containers, qos=B)) == 0


# --------------------------------------------------------------------------------------------
# robustness: malformed manifests give a one-line InputError, never another exception
# --------------------------------------------------------------------------------------------

_LEAF = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 10**20),
    st.floats(),
    st.text(max_size=6),
    st.sampled_from(["1Gi", "-1", "2Gx", "Always", "v1", "Pod", "List", "nvidia.com/gpu"]),
)
_KEYS = st.one_of(
    st.text(max_size=6),
    st.integers(0, 3),
    st.sampled_from(["name", "cpu", "memory", "limits", "requests", "kind", "items", "spec"]),
)
_TREE = st.recursive(
    _LEAF,
    lambda ch: st.one_of(st.lists(ch, max_size=3), st.dictionaries(_KEYS, ch, max_size=4)),
    max_leaves=12,
)

_GOOD_LIST: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "List",
    "items": [
        {
            "kind": "Pod",
            "metadata": {"name": "a", "annotations": {"x": "y"}},
            "spec": {
                "topologyPolicy": "restricted",
                "initContainers": [
                    {
                        "name": "i",
                        "restartPolicy": "Always",
                        "resources": {"limits": {"cpu": "1", "memory": "1Gi"}},
                    }
                ],
                "containers": [
                    {
                        "name": "c",
                        "resources": {
                            "requests": {"cpu": "1"},
                            "limits": {"cpu": "2", "memory": "1Gi", "x.com/y": 1},
                        },
                    }
                ],
            },
        }
    ],
}


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_malformed_manifests_raise_input_error_only(data: st.DataObject) -> None:
    doc: Any = copy.deepcopy(_GOOD_LIST)
    paths: list[list[Any]] = []

    def walk(x: Any, p: list[Any]) -> None:
        paths.append(p)
        if isinstance(x, dict):
            for k, v in x.items():
                walk(v, [*p, k])
        elif isinstance(x, list):
            for i, v in enumerate(x):
                walk(v, [*p, i])

    walk(doc, [])
    path = data.draw(st.sampled_from(paths[1:]))
    target = doc
    for k in path[:-1]:
        target = target[k]
    target[path[-1]] = data.draw(_TREE)
    try:
        parse_pods(doc, "f.yaml")
    except InputError as e:
        assert "\n" not in str(e)
        assert str(e).startswith("f.yaml")
