"""numalign.inputs.goparse: Go's strconv.ParseBool and strconv.Atoi, with Go's error text."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from numalign.engine.policies import parse_options
from numalign.errors import InputError
from numalign.inputs.goparse import GoSyntaxError, atoi, go_quote, parse_bool, parse_float32
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


def _float32_by_integers(exact: Fraction) -> float:
    """The float32 nearest ``exact`` (ties to even), by integer arithmetic alone: an oracle
    independent of the parser's double-then-float32 rounding. Infinity past the range."""
    if exact == 0:
        return 0.0
    sign, x = (-1.0, -exact) if exact < 0 else (1.0, exact)
    e = x.numerator.bit_length() - x.denominator.bit_length()  # 2**e <= x < 2**(e+2)
    while Fraction(2) ** e > x:
        e -= 1
    while Fraction(2) ** (e + 1) <= x:
        e += 1
    step = Fraction(2) ** (max(e, -126) - 23)  # the float32 spacing at x (subnormals: 2**-149)
    q, r = divmod(x / step, 1)
    q = int(q) + (1 if r > Fraction(1, 2) or (r == Fraction(1, 2) and int(q) % 2) else 0)
    value = q * step
    if value >= Fraction(2) ** 128:
        return sign * float("inf")
    return sign * float(value)


def _midpoint_text(mantissa: int, exponent: int, nudge: int) -> str:
    """The exact decimal text of the midpoint between two float32 neighbours (mantissa and
    mantissa + 1, times 2**exponent), or of that midpoint moved by one unit two digits past
    its last digit (``nudge``): a value whose nearest double may be the midpoint itself."""
    exact = Fraction(2 * mantissa + 1) * Fraction(2) ** (exponent - 1)
    k = max(0, exact.denominator.bit_length() - 1)  # exact = scaled / 10**k
    scaled = exact.numerator * 5**k * 100 + nudge
    digits = str(scaled).rjust(k + 3, "0")
    return f"{digits[:-(k + 2)]}.{digits[-(k + 2):]}"


DECIMALS = st.one_of(
    st.decimals(allow_nan=False, allow_infinity=False, places=None).map(str),
    st.builds(_midpoint_text, st.integers(1 << 23, (1 << 24) - 1), st.integers(-20, 20),
              st.sampled_from([-1, 0, 1])),
)


@given(text=DECIMALS)
def test_parse_float32_rounds_once_to_the_nearest_float32(text: str) -> None:
    if len(text) > 64:
        return  # numalign's cap (tested below)
    exact = Fraction(text)
    want = _float32_by_integers(exact)
    if want in (float("inf"), float("-inf")):
        with pytest.raises(GoSyntaxError, match="value out of range"):
            parse_float32(text)
    else:
        assert parse_float32(text) == want


@pytest.mark.parametrize(("text", "value"), [
    ("16777217", 16777216.0),  # a midpoint: ties to the even neighbour
    ("16777219", 16777220.0),
    ("16777217.000000001", 16777218.0),  # just past a midpoint the double rounds onto
    ("0.1", 0.10000000149011612), ("1e-50", 0.0), ("-0", -0.0), ("+.5e+2", 50.0), ("1.", 1.0),
    ("3.4028235e38", 3.4028234663852886e38),  # the largest float32
    ("Inf", float("inf")), ("-infinity", float("-inf")),
])
def test_parse_float32_values(text: str, value: float) -> None:
    got = parse_float32(text)
    assert got == value and str(got) == str(value)  # the sign of zero too


@pytest.mark.parametrize(("text", "message"), [
    ("3.4028236e38", "value out of range"), ("1e999999999", "value out of range"),
    ("0x1p-2", "hexadecimal"), ("1_0", "invalid syntax"), (" 1", "invalid syntax"),
    (".", "invalid syntax"), ("1/2", "invalid syntax"), ("9" * 65, "longer than 64 characters"),
])
def test_parse_float32_refuses(text: str, message: str) -> None:
    with pytest.raises(GoSyntaxError, match=message):
        parse_float32(text)


def test_parse_float32_nan() -> None:
    assert parse_float32("NaN") != parse_float32("nan")  # NaN, in Go's spellings
