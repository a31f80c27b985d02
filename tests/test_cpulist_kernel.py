"""numalign.inputs.cpulist: the kernel's list grammar (bitmap_parselist), hex masks, the id cap."""

from __future__ import annotations

import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from numalign.errors import InputError
from numalign.inputs.cpulist import (
    MAX_ID,
    format_cpulist,
    format_cpumask,
    parse_cpulist,
    parse_cpumask,
    parse_kernel_cpulist,
)
from numalign.machine.hwloc import parse_hwloc_bitmap

# --------------------------------------------------------------------------------------------
# kernel lists
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "ids"),
    [
        # a-b:used/group: in each group of `group` ids from a, the first `used`
        ("0-7:2/4", {0, 1, 4, 5}),
        ("0-9:3/5", {0, 1, 2, 5, 6, 7}),
        ("1-10:1/3", {1, 4, 7, 10}),
        ("0-4:2/4", {0, 1, 4}),  # the last group is cut at b
        ("0-7:0/4", set()),  # used 0 is allowed and sets nothing
        ("0-7:4/4", set(range(8))),
        ("2-3:1/1", {2, 3}),
        ("0-3,8-15:1/2", {0, 1, 2, 3, 8, 10, 12, 14}),
        # plain forms
        ("0-3,8,10-11", {0, 1, 2, 3, 8, 10, 11}),
        ("5", {5}),
        ("7-7", {7}),
        ("0000-0003", {0, 1, 2, 3}),
        # separators: any run of commas and whitespace, newlines included; a NUL ends the text
        ("", set()),
        ("\n", set()),
        ("0-1\n", {0, 1}),
        ("1,,2", {1, 2}),
        (" 1 2 ", {1, 2}),
        ("1\n2", {1, 2}),
        ("\t0-3,\n", {0, 1, 2, 3}),
        ("2,4\x00junk", {2, 4}),
        ("0-4,2-6", set(range(7))),
    ],
)
def test_kernel_list(text: str, ids: set[int]) -> None:
    assert parse_kernel_cpulist(text) == frozenset(ids)


@pytest.mark.parametrize(
    "text",
    [
        "3-1",  # descending: an error, never the empty set
        "0-7:2",  # a stride needs used/group
        "0-7:2/",
        "3:1/2",  # a pattern needs a range
        "0-7:5/4",  # used > group
        "0-7:1/0",  # group 0
        "-1",
        "1-",
        "1 -2",
        "a",
        "0x1",
        "1.5",
        "+1",
        "1-2-3",
        "\uff11",
        "N",  # needs last=
        "all",
    ],
)
def test_kernel_list_errors(text: str) -> None:
    with pytest.raises(InputError) as e:
        parse_kernel_cpulist(text, "sys/devices/system/node/node0/cpulist")
    assert e.value.field == "sys/devices/system/node/node0/cpulist"
    assert e.value.problem.startswith("invalid cpulist")
    assert "\n" not in str(e.value)


def test_kernel_list_last_id() -> None:
    assert parse_kernel_cpulist("N", last=7) == {7}
    assert parse_kernel_cpulist("4-N", last=7) == {4, 5, 6, 7}
    assert parse_kernel_cpulist("all", last=3) == {0, 1, 2, 3}
    assert parse_kernel_cpulist("all:1/2", last=7) == {0, 2, 4, 6}
    with pytest.raises(InputError, match="exceeds the maximum 7"):
        parse_kernel_cpulist("0-8", last=7)


@given(
    st.integers(min_value=0, max_value=300),
    st.integers(min_value=0, max_value=300),
    st.integers(min_value=1, max_value=20),
    st.data(),
)
def test_stride_matches_the_kernel_model(a: int, span: int, group: int, data: st.DataObject) -> None:
    """bitmap_set_region: for start in a, a+group, ... <= b, set min(b - start + 1, used) bits."""
    used = data.draw(st.integers(min_value=0, max_value=group))
    b = a + span
    expected = {i for i in range(a, b + 1) if (i - a) % group < used}
    assert parse_kernel_cpulist(f"{a}-{b}:{used}/{group}") == expected


def test_kubelet_grammar_stays_strict() -> None:
    """What the kubelet's cpuset.Parse rejects stays rejected where kubelet input is read."""
    for text in ("0-7:2/4", "1,,2", "1 2", "3-1"):
        with pytest.raises(InputError):
            parse_cpulist(text, "kubelet.reservedSystemCPUs")
    assert parse_cpulist("+1,+3-+4") == {1, 3, 4}  # strconv.Atoi takes a plus sign


# --------------------------------------------------------------------------------------------
# the id cap
# --------------------------------------------------------------------------------------------


CAPPED = ["99999999999", "0-99999999999", "65536", "0-65536", "7-99999999999999999999999"]


@pytest.mark.parametrize(
    ("text", "parse"),
    [(t, parse_cpulist) for t in CAPPED]
    + [(t, parse_kernel_cpulist) for t in [*CAPPED, "0-99999999999:1/2"]],
)
def test_cap(text: str, parse: object) -> None:
    """Never a multi-GB set: an id above MAX_ID is an error naming the field, at once."""
    start = time.process_time()  # CPU time: the test machine is shared
    with pytest.raises(InputError) as e:
        parse(text, "kubelet.reservedSystemCPUs")  # type: ignore[operator]
    assert time.process_time() - start < 1.0
    assert e.value.field == "kubelet.reservedSystemCPUs"
    n = int(text.split(":")[0].split("-")[-1])
    assert f"id {n} exceeds the maximum {MAX_ID}" in e.value.problem


def test_cap_boundaries() -> None:
    assert MAX_ID == 65535
    assert parse_kernel_cpulist("65535") == {65535}
    assert parse_cpulist(f"{MAX_ID - 1}-{MAX_ID}") == {MAX_ID - 1, MAX_ID}
    assert len(parse_kernel_cpulist(f"0-{MAX_ID}")) == MAX_ID + 1
    with pytest.raises(InputError, match="exceeds the maximum"):
        parse_cpulist(10**12, "f")  # the YAML integer form too
    with pytest.raises(InputError, match="exceeds the maximum"):
        parse_cpumask("1" + ",00000000" * 2048, "f")  # bit 65536
    assert parse_cpumask("80000000," + ",".join(["00000000"] * 2047)) == {MAX_ID}


# --------------------------------------------------------------------------------------------
# hex masks
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "ids"),
    [
        ("00000000,00000101", {0, 8}),
        ("ff,00000000", set(range(32, 40))),
        ("ff,ffffffff\n", set(range(40))),
        ("f", {0, 1, 2, 3}),
        ("0", set()),
        ("", set()),
        ("FF", set(range(8))),
        ("1 0", {32}),  # whitespace separates words too (bitmap_parse)
        ("ff,,1", {0} | set(range(32, 40))),  # runs of separators are one separator
        ("00000001\x00junk", {0}),
        ("3\nff", {0, 1}),  # the text ends at the first newline
    ],
)
def test_mask(text: str, ids: set[int]) -> None:
    assert parse_cpumask(text) == frozenset(ids)


@pytest.mark.parametrize("text", ["0x1", "123456789", "g", "1,-2", "f.f"])
def test_mask_errors(text: str) -> None:
    with pytest.raises(InputError) as e:
        parse_cpumask(text, "cpu0/topology/thread_siblings")
    assert e.value.field == "cpu0/topology/thread_siblings"
    assert e.value.problem.startswith("invalid cpumask")


@pytest.mark.parametrize(
    ("ids", "nbits", "text"),
    [
        ({0}, 40, "00,00000001"),  # what a 40-CPU machine's cpumap shows
        (range(40), 40, "ff,ffffffff"),
        (range(4), 4, "f"),
        ({0, 8}, 64, "00000000,00000101"),
        ({32}, 33, "1,00000000"),
        ((), None, "0"),
        ({5}, None, "20"),
        ({0}, 6, "01"),
    ],
)
def test_format_mask(ids: set[int], nbits: int | None, text: str) -> None:
    assert format_cpumask(ids, nbits) == text


def test_format_mask_too_narrow() -> None:
    with pytest.raises(ValueError):
        format_cpumask({40}, 40)


def test_hwloc_bitmaps_share_the_mask_parser() -> None:
    # hwloc writes 0x-prefixed words and an empty word for a zero word
    assert parse_hwloc_bitmap("0x000000ff,,,,,,0x000000ff") == set(range(8)) | set(
        range(192, 200)
    )
    assert parse_hwloc_bitmap("0xf...f,0x00000001") == {0}
    with pytest.raises(InputError):
        parse_hwloc_bitmap("0xzz")


# --------------------------------------------------------------------------------------------
# invariants
# --------------------------------------------------------------------------------------------

IDS = st.frozensets(st.integers(min_value=0, max_value=MAX_ID), max_size=60) | st.frozensets(
    st.integers(min_value=0, max_value=200), max_size=120
)


@given(IDS)
def test_list_round_trip(ids: frozenset[int]) -> None:
    text = format_cpulist(ids)
    assert parse_kernel_cpulist(text) == ids
    assert parse_cpulist(text) == ids  # the canonical form is in both grammars


@given(IDS, st.integers(min_value=0, max_value=64))
def test_mask_and_list_agree(ids: frozenset[int], extra: int) -> None:
    nbits = (max(ids) + 1 if ids else 1) + extra
    mask = format_cpumask(ids, nbits)
    assert parse_cpumask(mask) == ids
    assert parse_cpumask(mask) == parse_kernel_cpulist(format_cpulist(ids))
    words = mask.split(",")
    assert all(len(w) == 8 for w in words[1:])
    assert len(words[0]) == ((nbits - 1) % 32) // 4 + 1
    assert int("".join(words), 16) == sum(1 << i for i in ids)


@given(IDS, st.data())
def test_kernel_spellings(ids: frozenset[int], data: st.DataObject) -> None:
    """Unordered, overlapping spellings with any kernel separators parse to the same set."""
    items = data.draw(st.permutations([str(i) for i in sorted(ids)]))
    seps = data.draw(st.lists(st.sampled_from([",", " ", "\n", ",,", " , ", "\t"]), min_size=len(items)))
    text = "".join(item + sep for item, sep in zip(items, seps, strict=False))
    assert parse_kernel_cpulist(text) == ids
