"""PyYAML imported with its patterns compiled on first use (``numalign/inputs/pyyaml.py``):
the patterns are deferred, match exactly as compiled ones, and documents load the same."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml as plain_yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from numalign.inputs import pyyaml
from numalign.inputs.pyyaml import PatternOnFirstUse

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

#: the patterns PyYAML compiles at import: the resolver's, the reader's, the constructor's
YAML_PATTERNS = [p for resolvers in plain_yaml.resolver.Resolver.yaml_implicit_resolvers.values()
                 for _, p in resolvers] + [plain_yaml.reader.Reader.NON_PRINTABLE,
                                           plain_yaml.constructor.SafeConstructor.timestamp_regexp]
SOURCES = sorted({(p.pattern, p.flags) for p in YAML_PATTERNS}, key=repr)

#: text the patterns read: scalars of every implicit type, and non-printable characters
SCALARS = st.one_of(
    st.text(alphabet="0123456789-+._:eExXoObB ~yesnoYESNOtrueflsTRUEFLSnull<=!&*TtZz\t",
            max_size=24),
    st.text(max_size=12),
    st.sampled_from(["2001-12-14t21:59:43.10-05:00", "0x_1F", "1_000", "190:20:30", "-.inf",
                     ".NaN", "0b1010", "~", "<<", "=", "\x00", "\ufffe", "\U0001f600"]),
)


def _run(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return out.stdout


def test_patterns_are_deferred_until_used() -> None:
    """In a fresh interpreter: after the import no PyYAML pattern is compiled; loading a
    document compiles only what its scalars select; the reader's pattern stays uncompiled with
    libyaml; ``re.compile`` is ``re.compile`` again."""
    out = _run(
        "import re, json, sys\n"
        "compile_before = re.compile\n"
        "from numalign.inputs.pyyaml import yaml, PatternOnFirstUse\n"
        "r = yaml.resolver.Resolver.yaml_implicit_resolvers\n"
        "pats = {tag: p for v in r.values() for tag, p in v}\n"
        "before = {t: p.compiled for t, p in pats.items()}\n"
        "yaml.load('a: 12\\nb: true\\n', Loader=yaml.CSafeLoader)\n"
        "after = {t.rsplit(':', 1)[1]: p.compiled for t, p in pats.items()}\n"
        "print(json.dumps({'kinds': sorted({type(p).__name__ for p in pats.values()}),\n"
        "  'before': sorted(set(before.values())), 'after': after,\n"
        "  'reader': yaml.reader.Reader.NON_PRINTABLE.compiled,\n"
        "  'restored': re.compile is compile_before}))\n"
    )
    got = json.loads(out)
    assert got["kinds"] == ["PatternOnFirstUse"]
    assert got["before"] == [False]
    # 'a' selects no resolver; '12' the int, float and timestamp ones; 'true' the bool one
    assert got["after"]["int"] and got["after"]["bool"]
    assert not got["after"]["null"] and not got["after"]["merge"]
    assert got["reader"] is False and got["restored"] is True


def test_documents_load_the_same() -> None:
    """Every example document, loaded by libyaml and by the pure-Python parser through the
    deferred import, equals the plain import's load (the pure-Python parser reads the reader's
    pattern, so it is exercised too)."""
    paths = sorted(str(p) for p in EXAMPLES.glob("*.yaml"))
    assert paths
    code = (
        "import json, sys\n"
        "from numalign.inputs.pyyaml import yaml\n"
        "out = {}\n"
        "for p in sys.argv[1:]:\n"
        "    text = open(p, encoding='utf-8').read()\n"
        "    out[p] = [list(yaml.load_all(text, Loader=L)) for L in (yaml.CSafeLoader, yaml.SafeLoader)]\n"
        "print(json.dumps(out, default=str, sort_keys=True))\n"
    )
    got = json.loads(subprocess.run([sys.executable, "-c", code, *paths], capture_output=True,
                                    text=True, check=True).stdout)
    for p in paths:
        with open(p, encoding="utf-8") as fh:
            want = json.loads(json.dumps(list(plain_yaml.safe_load_all(fh)), default=str, sort_keys=True))
        assert got[p] == [want, want], p


def test_a_non_printable_character_is_refused_alike() -> None:
    code = (
        "from numalign.inputs.pyyaml import yaml\n"
        "try:\n"
        "    yaml.load('a: \\x07', Loader=yaml.SafeLoader)\n"
        "except yaml.YAMLError as e:\n"
        "    print(e.problem if hasattr(e, 'problem') else e)\n"
    )
    with pytest.raises(plain_yaml.YAMLError) as plain:
        plain_yaml.load("a: \x07", Loader=plain_yaml.SafeLoader)
    assert _run(code).strip() == str(getattr(plain.value, "problem", plain.value))


@pytest.mark.parametrize("source", SOURCES, ids=[repr(s[0][:24]) for s in SOURCES])
@settings(max_examples=60)
@given(text=SCALARS)
def test_a_deferred_pattern_matches_as_the_compiled_one(source: tuple[str, int], text: str) -> None:
    compiled = re.compile(*source)
    deferred = PatternOnFirstUse(*source)
    for method in ("match", "search", "fullmatch", "findall", "split"):
        want = getattr(compiled, method)(text)
        got = getattr(deferred, method)(text)
        if isinstance(want, re.Match):
            assert isinstance(got, re.Match) and got.span() == want.span()
            assert got.groups() == want.groups()
        else:
            assert got == want
    assert deferred.compiled and deferred.pattern == compiled.pattern
    assert deferred.flags == compiled.flags and deferred.groupindex == compiled.groupindex


def test_only_pyyaml_modules_get_a_deferred_pattern() -> None:
    """A ``re.compile`` from anywhere else while PyYAML is being imported compiles at once."""
    assert isinstance(pyyaml._compile_from_yaml("a+"), re.Pattern)
    namespace = {"__name__": "yaml.fake", "compile": pyyaml._compile_from_yaml}
    exec("p = compile('a+', 0)", namespace)  # a call whose caller is a PyYAML module
    deferred = namespace["p"]
    assert isinstance(deferred, PatternOnFirstUse) and not deferred.compiled
    assert "not compiled yet" in repr(deferred)
    assert deferred.sub("b", "caaat") == "cbt" and deferred.compiled
