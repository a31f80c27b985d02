"""``numalign.errors.one_line``: every error message is one line whatever the values quoted in
it. Printable text is returned as it is without running the control-character pattern (start-up
time); any other text gets exactly the pattern's escapes."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from numalign.errors import InputError, one_line

#: the characters escaped, written out here so the test does not read the module's pattern
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")

texts = st.text(st.characters(codec=None), max_size=40) | st.text(
    st.sampled_from("ab \n\r\t\x1b\x7f\x85\x9f\u2028\u2029\u00a0\u00ad\ufeff\U0001f600"), max_size=20)


@given(texts)
def test_one_line_is_the_pattern_substitution(text: str) -> None:
    expected = CONTROL.sub(lambda m: repr(m.group())[1:-1], text)
    assert one_line(text) == expected
    assert len(one_line(text).splitlines()) <= 1


def test_escapes_in_messages() -> None:
    assert one_line("plain text") == "plain text"
    assert InputError("bad\nvalue\x1b[31m\u2028", "pods[0].name").message == \
        "pods[0].name: bad\\nvalue\\x1b[31m\\u2028"
