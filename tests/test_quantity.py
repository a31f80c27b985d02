"""numalign.inputs.quantity: Kubernetes quantities, byte formatting, hugepage resource names."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from numalign.errors import InputError
from numalign.inputs.quantity import (
    cpu_millis,
    format_amount,
    format_bytes,
    format_bytes_human,
    format_cpu_millis,
    hugepage_resource_name,
    hugepage_size,
    is_bytes_resource,
    is_hugepages_resource,
    is_memory_resource,
    parse_quantity,
    quantity_int,
)

KI, MI, GI = 1 << 10, 1 << 20, 1 << 30

# --------------------------------------------------------------------------------------------
# hugepage resource names: "hugepages-" + resource.NewQuantity(size, BinarySI).String()
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("size", "name"),
    [
        (2 * MI, "hugepages-2Mi"),  # x86 default
        (GI, "hugepages-1Gi"),
        (64 * KI, "hugepages-64Ki"),  # arm64 with 4K granule: contiguous PTE pages
        (32 * MI, "hugepages-32Mi"),  # arm64 contiguous PMD
        (512 * MI, "hugepages-512Mi"),  # arm64 with 64K granule
        (16 * GI, "hugepages-16Gi"),  # ppc64 / arm64 64K granule PUD
        (16 * MI, "hugepages-16Mi"),  # ppc64 hash MMU
        (1 << 60, "hugepages-1Ei"),
        # not a whole power-of-1024 multiple: the largest power that divides it exactly
        (1536 * KI, "hugepages-1536Ki"),
        (3 * MI, "hugepages-3Mi"),
        (1536, "hugepages-1536"),
        # below 1Ki BinarySI.String() switches to DecimalSI
        (512, "hugepages-512"),
        (1000, "hugepages-1k"),
        (1, "hugepages-1"),
    ],
)
def test_hugepage_resource_name(size: int, name: str) -> None:
    assert hugepage_resource_name(size) == name
    assert hugepage_size(name) == size


@pytest.mark.parametrize("size", [0, -2 * MI, True, 2.0, "2Mi"])
def test_hugepage_resource_name_rejects(size: object) -> None:
    with pytest.raises(InputError):
        hugepage_resource_name(size)  # type: ignore[arg-type]


@given(st.integers(min_value=1, max_value=1 << 64))
def test_hugepage_name_round_trip(size: int) -> None:
    name = hugepage_resource_name(size)
    assert is_hugepages_resource(name) and is_memory_resource(name)
    assert hugepage_size(name) == size


@pytest.mark.parametrize(
    "name", ["memory", "hugepages-", "hugepages-0", "hugepages-2Xi", "hugepages-1.5", "hugepages--2Mi"]
)
def test_hugepage_size_rejects(name: str) -> None:
    with pytest.raises(InputError) as e:
        hugepage_size(name, "zones[0].resources[2].name")
    assert e.value.field == "zones[0].resources[2].name"
    assert "\n" not in str(e.value)


def test_resource_predicates() -> None:
    assert is_memory_resource("memory")
    assert is_memory_resource("hugepages-1Gi")
    assert not is_memory_resource("cpu")
    assert not is_memory_resource("nvidia.com/gpu")
    assert not is_memory_resource("example.com/hugepages-2Mi")
    assert is_hugepages_resource("hugepages-2Mi") and not is_hugepages_resource("memory")
    assert is_bytes_resource("ephemeral-storage") and not is_memory_resource("ephemeral-storage")
    assert not is_bytes_resource("cpu") and not is_bytes_resource("pods")


# --------------------------------------------------------------------------------------------
# formatting
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (0, "0"),
        (1, "1"),
        (999, "999"),
        (1000, "1k"),  # Go: NewQuantity(1000, BinarySI).String() == "1k"
        (1023, "1023"),
        (1024, "1Ki"),
        (2000, "2000"),
        (64 * GI, "64Gi"),
        (1536 * MI, "1536Mi"),
        (GI + 1, str(GI + 1)),
        (1 << 60, "1Ei"),
        (1 << 70, "1024Ei"),  # no suffix above Ei: the cap
        (-2048, "-2Ki"),
        (-1000, "-1k"),
    ],
)
def test_format_bytes(n: int, text: str) -> None:
    assert format_bytes(n) == text


@given(st.integers(min_value=-(1 << 80), max_value=1 << 80))
def test_format_bytes_round_trip(n: int) -> None:
    text = format_bytes(n)
    assert parse_quantity(text) == n
    # canonical: no larger binary suffix would still be exact
    for suffix in ("Ki", "Mi", "Gi", "Ti", "Pi"):
        if text.endswith(suffix):
            assert int(text.removesuffix(suffix)) % 1024 != 0


def test_format_bytes_rejects_non_integers() -> None:
    with pytest.raises(TypeError):
        format_bytes(1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        format_bytes(True)


@pytest.mark.parametrize(
    ("resource", "amount", "text"),
    [
        ("cpu", 4, "4"),  # whole CPUs, as NRT zones count them
        ("memory", 64 * GI, "64Gi"),
        ("hugepages-2Mi", 4 * MI, "4Mi"),
        ("hugepages-1Gi", 0, "0"),
        ("ephemeral-storage", 10 * GI, "10Gi"),
        ("nvidia.com/gpu", 2048, "2048"),  # counts never get a binary suffix
        ("pods", 1024, "1024"),
    ],
)
def test_format_amount(resource: str, amount: int, text: str) -> None:
    assert format_amount(resource, amount) == text
    assert quantity_int(parse_quantity(text)) == amount


@pytest.mark.parametrize(("millis", "text"), [(0, "0"), (2000, "2"), (1500, "1500m"), (1, "1m")])
def test_format_cpu_millis(millis: int, text: str) -> None:
    assert format_cpu_millis(millis) == text


@given(st.integers(min_value=0, max_value=10**9))
def test_cpu_millis_round_trip(millis: int) -> None:
    assert cpu_millis(parse_quantity(format_cpu_millis(millis))) == millis


@pytest.mark.parametrize(
    ("n", "text"),
    [(0, "0 B"), (1023, "1023 B"), (1024, "1 KiB"), (1536 * MI, "1.5 GiB"), (64 * GI, "64 GiB")],
)
def test_format_bytes_human(n: int, text: str) -> None:
    assert format_bytes_human(n) == text


# --------------------------------------------------------------------------------------------
# parsing (the behaviour pods.py had; test_pods.py covers the syntax table)
# --------------------------------------------------------------------------------------------


def test_parse_quantity_exact() -> None:
    assert parse_quantity("1500m") == Fraction(3, 2)
    assert parse_quantity("2Gi") == 2 * GI
    assert parse_quantity("1e3") == 1000
    assert parse_quantity("1E") == 10**18  # a bare E is exa


@pytest.mark.parametrize("text", ["1e101", "1e-101", "1e999999"])
def test_parse_quantity_caps_the_exponent(text: str) -> None:
    with pytest.raises(InputError) as e:
        parse_quantity(text, "spec.memory")
    assert e.value.field == "spec.memory"
    assert "exponent out of range" in e.value.problem or "invalid quantity" in e.value.problem


@pytest.mark.parametrize("value", ["", "Gi", "2Gx", "1.2.3", " 1", None, True, [], float("nan")])
def test_parse_quantity_errors_name_the_field(value: object) -> None:
    with pytest.raises(InputError) as e:
        parse_quantity(value, "zones[0].resources[1].capacity")
    assert e.value.field == "zones[0].resources[1].capacity"
    assert "\n" not in str(e.value)


# --------------------------------------------------------------------------------------------
# every place that names hugepages agrees (sim/cluster once wrote hugepages-0Mi for 64Ki pages)
# --------------------------------------------------------------------------------------------


def test_64ki_pages_are_named_alike_everywhere() -> None:
    from numalign.machine.nrt import machine_to_nrt, nrt_to_machine
    from numalign.machine.spec import dump_machine, load_machine
    from numalign.sim.cluster import cluster_capacity

    m = load_machine(
        {
            "numaNodes": [{"id": 0, "memory": "4Gi", "hugepages": {"64Ki": "1Mi", "32Mi": "64Mi"}}],
            "cpus": [{"id": 0, "core": 0, "socket": 0, "numa": 0}],
        }
    )
    assert m.numa_nodes[0].hugepages == {64 * KI: MI, 32 * MI: 64 * MI}
    capacity = cluster_capacity([("n0", m)])
    assert capacity["hugepages-64Ki"] == MI and capacity["hugepages-32Mi"] == 64 * MI
    assert not any(r.startswith("hugepages-0") for r in capacity)
    zone = machine_to_nrt(m)["zones"][0]
    names = {r["name"]: r["capacity"] for r in zone["resources"]}
    assert names["hugepages-64Ki"] == "1Mi" and names["hugepages-32Mi"] == "64Mi"
    assert nrt_to_machine(machine_to_nrt(m)).numa_nodes[0].hugepages == m.numa_nodes[0].hugepages
    assert dump_machine(m)["numaNodes"][0]["hugepages"] == {"64Ki": "1Mi", "32Mi": "64Mi"}
