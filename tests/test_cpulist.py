"""Linux cpulist syntax: parse and format."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from numalign.errors import InputError
from numalign.inputs.cpulist import format_cpulist, parse_cpulist


@pytest.mark.parametrize(
    ("text", "ids"),
    [
        ("0-3,8,10-11", {0, 1, 2, 3, 8, 10, 11}),
        ("0", {0}),
        ("7-7", {7}),
        ("", set()),
        ("   ", set()),
        ("0-1\n", {0, 1}),  # sysfs files end in a newline
        ("2,4\x00", {2, 4}),  # some end in a NUL
        (" 0-1 , 5 ", {0, 1, 5}),
        ("3,1,2", {1, 2, 3}),
        ("0-4,2-6", set(range(7))),  # overlaps merge
        ("1,1", {1}),
        ("126-127", {126, 127}),
    ],
)
def test_parse(text: str, ids: set[int]) -> None:
    assert parse_cpulist(text) == frozenset(ids)


def test_yaml_integer_is_one_cpu() -> None:
    # `reservedSystemCPUs: 0` in YAML is the integer 0
    assert parse_cpulist(0) == frozenset({0})


@pytest.mark.parametrize(
    "text",
    [
        "a",
        "1,,2",
        "3-1",
        "-1",
        "1-",
        "-",
        "1-2-3",
        "0x1",
        "1.5",
        ",",
        "1,",
        "\uff11",
        "1 2",
        "0-3:2/4",
    ],
)
def test_bad_syntax(text: str) -> None:
    with pytest.raises(InputError) as exc:
        parse_cpulist(text, "kubelet.reservedSystemCPUs")
    msg = str(exc.value)
    assert msg.startswith("kubelet.reservedSystemCPUs: invalid cpulist")
    assert "\n" not in msg


@pytest.mark.parametrize("value", [None, 1.5, True, ["0"], -1])
def test_bad_type(value: object) -> None:
    with pytest.raises(InputError) as exc:
        parse_cpulist(value, "f")
    assert exc.value.field == "f"


@pytest.mark.parametrize(
    ("ids", "text"),
    [
        ([0, 1, 2, 3, 8], "0-3,8"),
        ([], ""),
        ([5], "5"),
        ([0, 1], "0-1"),  # two consecutive ids are a range, like Linux and the kubelet
        ([11, 10, 0, 3, 2, 1, 8], "0-3,8,10-11"),
        ({4, 6, 8}, "4,6,8"),
        (range(64), "0-63"),
    ],
)
def test_format(ids: list[int], text: str) -> None:
    assert format_cpulist(ids) == text


@given(st.frozensets(st.integers(min_value=0, max_value=300), max_size=80))
def test_round_trip(ids: frozenset[int]) -> None:
    text = format_cpulist(ids)
    assert parse_cpulist(text) == ids
    # the canonical form is a fixed point
    assert format_cpulist(parse_cpulist(text)) == text


@given(st.frozensets(st.integers(min_value=0, max_value=64), max_size=20), st.data())
def test_any_valid_spelling_parses(ids: frozenset[int], data: st.DataObject) -> None:
    """Unordered, overlapping, padded spellings of a set all parse to that set."""
    items = [str(i) for i in sorted(ids)]
    items = data.draw(st.permutations(items))
    pad = data.draw(st.sampled_from(["", " ", "\n", "\x00", " \n"]))
    assert parse_cpulist(",".join(items) + pad) == ids
