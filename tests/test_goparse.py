"""numalign.inputs.goparse: Go's strconv.ParseBool and strconv.Atoi, with Go's error text."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from numalign.engine.policies import parse_options
from numalign.errors import InputError
from numalign.inputs.goparse import GoSyntaxError, atoi, go_quote, parse_bool
from numalign.resources.cpu import parse_static_policy_options


@pytest.mark.parametrize("text", ["1", "t", "T", "TRUE", "true", "True"])
def test_true(text: str) -> None:
    assert parse_bool(text) is True


@pytest.mark.parametrize("text", ["0", "f", "F", "FALSE", "false", "False"])
def test_false(text: str) -> None:
    assert parse_bool(text) is False


@given(st.text(max_size=8))
def test_nothing_else_is_a_bool(text: str) -> None:
    accepted = {"1", "t", "T", "TRUE", "true", "True", "0", "f", "F", "FALSE", "false", "False"}
    if text in accepted:
        assert isinstance(parse_bool(text), bool)
    else:
        with pytest.raises(GoSyntaxError) as e:
            parse_bool(text)
        assert str(e.value) == f"strconv.ParseBool: parsing {go_quote(text)}: invalid syntax"
        assert "\n" not in str(e.value)


def test_go_quote() -> None:
    assert go_quote("yes") == '"yes"'
    assert go_quote("") == '""'
    assert go_quote('a"b\\') == '"a\\"b\\\\"'
    assert go_quote("x\ny\t") == '"x\\ny\\t"'
    assert go_quote("\x00\x7f") == '"\\x00\\x7f"'
    assert go_quote("\u00a0") == '"\\u00a0"'
    assert go_quote("é") == '"é"'


@pytest.mark.parametrize(
    ("text", "value"),
    [("8", 8), ("+12", 12), ("-3", -3), ("012", 12), ("9223372036854775807", (1 << 63) - 1)],
)
def test_atoi(text: str, value: int) -> None:
    assert atoi(text) == value


@pytest.mark.parametrize("text", ["", " 1", "1 ", "1_000", "0x10", "1.0", "+", "--1", "\uff11"])
def test_atoi_syntax(text: str) -> None:
    with pytest.raises(GoSyntaxError) as e:
        atoi(text)
    assert str(e.value) == f"strconv.Atoi: parsing {go_quote(text)}: invalid syntax"


@pytest.mark.parametrize("text", ["9223372036854775808", "-9223372036854775809", "1" * 40])
def test_atoi_range(text: str) -> None:
    with pytest.raises(GoSyntaxError) as e:
        atoi(text)
    assert str(e.value) == f'strconv.Atoi: parsing "{text}": value out of range'


def test_both_option_parsers_share_it() -> None:
    """Topology Manager and CPU Manager options reject the same strings with the same text."""
    with pytest.raises(InputError) as topo:
        parse_options({"prefer-closest-numa-nodes": "yes\n"})
    with pytest.raises(InputError) as cpu:
        parse_static_policy_options({"full-pcpus-only": "yes\n"})
    want = 'strconv.ParseBool: parsing "yes\\n": invalid syntax'
    assert topo.value.problem.endswith(want)
    assert cpu.value.problem.endswith(want)
    assert "\n" not in str(topo.value) and "\n" not in str(cpu.value)
