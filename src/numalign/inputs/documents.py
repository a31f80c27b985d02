"""Reading YAML/JSON documents with size caps and one-line errors (the one document reader).

Every YAML or JSON document numalign reads from a user (machine specs, pods, NRT objects,
cluster templates, device rules, merge cases, state files, kubelet checkpoints and configs)
goes through this module. Errors are :class:`~numalign.errors.InputError` naming the source:
``cannot read <what>: <reason>``, ``not UTF-8 text: ...``, ``invalid YAML: <problem> at line L,
column C``, ``malformed JSON: <problem> at line L column C``.

Caps (``docs/limits.md``), checked before the expensive step where possible:

* :data:`MAX_DOCUMENT_BYTES` - a file (or stdin) larger than this is refused before it is
  decoded;
* :data:`MAX_DEPTH` - collections nested deeper than this. YAML is checked on libyaml's event
  stream, which stops at the first level too deep (the C composer recurses without a limit and
  crashes the interpreter on deep input; the pure-Python one takes seconds before failing).
  libyaml's scanner has a nesting limit of its own in newer releases (1,000 levels in the one
  PyYAML 6.0.4 bundles) and reads up to 1,024 characters ahead, so it can refuse a deep document
  before the event stream reaches numalign's limit. When the C parser refuses a document, the
  same walk is repeated on the pure-Python parser, which has no limit of its own: the caps
  decide the message, whatever libyaml release is installed;
* :data:`MAX_NODES` - values in one file, counting every alias expansion (an "entity
  expansion" document of a few lines that stands for billions of values is refused while it
  is scanned); an alias inside the collection it names (a recursive document) is refused;
* :data:`MAX_INT_DIGITS` - an integer literal longer than this (Python refuses more than 4,300
  digits with a ValueError; YAML 1.1's base-60 integers are quadratic to convert).

The C loader (``yaml.CSafeLoader``) is used when PyYAML was built with libyaml.
"""

from __future__ import annotations

import contextlib
import json
import re
import sys
from typing import IO, Any

from numalign.errors import InputError
from numalign.inputs.pyyaml import yaml

#: the largest document (file or stdin) read, in bytes
MAX_DOCUMENT_BYTES = 16 * 1024 * 1024
#: the deepest nesting of lists/mappings accepted
MAX_DEPTH = 100
#: the most values (scalars and collections, aliases expanded) in one file
MAX_NODES = 1_000_000
#: the longest integer literal accepted, in characters (sign and prefix included)
MAX_INT_DIGITS = 100

_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_INT_LIKE = re.compile(r"[-+]?[0-9][0-9_:a-fA-FxXoObB]*")


class _BoundedLoader(_Loader):  # type: ignore[valid-type,misc]
    """The safe loader with integer literals bounded before ``int()`` sees them, and a key
    given twice in one mapping refused (YAML 1.2, 3.2.1.1: "the content of a mapping node
    is an unordered set of key/value node pairs, with the restriction that each of the keys
    is unique"; PyYAML keeps the last value without a word)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        if not isinstance(node, yaml.MappingNode):
            return yaml.SafeLoader.construct_mapping(self, node, deep)
        own = node.value  # the pairs written in this mapping; merge keys are taken out in place
        count = len(own)
        self.flatten_mapping(node)
        mapping: dict[Any, Any] = yaml.constructor.BaseConstructor.construct_mapping(self, node, deep)
        # without merge keys, fewer entries than pairs means a key came twice; with them (the
        # merged pairs may only add keys) the mapping's own keys are compared
        if len(mapping) < count or node.value is not own or len(own) != count:
            _refuse_duplicate_key(self, node, own, deep)
        return mapping


def _refuse_duplicate_key(loader: yaml.SafeLoader, node: yaml.MappingNode,
                          own: list[tuple[yaml.Node, yaml.Node]], deep: bool) -> None:
    seen: set[Any] = set()
    for key_node, _ in own:
        key = loader.construct_object(key_node, deep=deep)  # already built: the loader's memo
        if key in seen:
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping", node.start_mark,
                f"key {_cut(str(key))!r} given twice in one mapping", key_node.start_mark)
        seen.add(key)


def _construct_int(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> Any:
    value = loader.construct_scalar(node)
    if isinstance(value, str) and len(value) > MAX_INT_DIGITS:
        raise yaml.constructor.ConstructorError(
            None, None, f"integer longer than {MAX_INT_DIGITS} digits", node.start_mark
        )
    return yaml.SafeLoader.construct_yaml_int(loader, node)


_BoundedLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)


def yaml_problem(e: Exception) -> str:
    """A one-line description of a PyYAML error, with its line and column."""
    problem = getattr(e, "problem", None) or (str(e).splitlines() or ["syntax error"])[0]
    mark = getattr(e, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return " ".join(f"{problem}{where}".split())


_TOO_BIG = f"larger than {MAX_DOCUMENT_BYTES // (1024 * 1024)} MiB"


def _read_bytes(path: str, what: str) -> bytes:
    label = f"cannot read {what}" if what else "cannot read"
    try:
        if path == "-":
            buffer = getattr(sys.stdin, "buffer", None)
            if buffer is None:  # a text stream in place of stdin (tests, embedding)
                text = sys.stdin.read(MAX_DOCUMENT_BYTES + 1)
                return text.encode("utf-8", "surrogateescape")
            return _read_capped(buffer, path)
        with open(path, "rb") as fh:
            return _read_capped(fh, path)
    except OSError as e:
        raise InputError(f"{label}: {e.strerror or e}", path) from None


def _read_capped(fh: IO[bytes], source: str) -> bytes:
    data = fh.read(MAX_DOCUMENT_BYTES + 1)
    if len(data) > MAX_DOCUMENT_BYTES:
        raise InputError(f"{_TOO_BIG}: refused", source)
    return data


def decode_text(data: bytes, source: str | None) -> str:
    """``data`` as UTF-8 text (a BOM is dropped); otherwise a one-line error."""
    if len(data) > MAX_DOCUMENT_BYTES:
        raise InputError(f"{_TOO_BIG}: refused", source)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise InputError(f"not UTF-8 text: {e.reason} at byte {e.start}", source) from None


def read_text(path: str, what: str = "") -> str:
    """The UTF-8 text of ``path`` (``-`` = stdin), at most :data:`MAX_DOCUMENT_BYTES`."""
    return decode_text(_read_bytes(path, what), path)


# --------------------------------------------------------------------------- YAML


def _check_yaml_events(text: str, source: str | None, max_items: int | None = None,
                       why: str = "") -> None:
    """Walk the parser's event stream; refuse depth, size and recursive aliases early (and,
    with ``max_items``, a list or mapping of more items than that, as soon as it has them).

    A syntax error from the C parser is re-checked on the pure-Python parser first, so a
    library limit that fires before numalign's (libyaml's own nesting limit, reached through its
    look-ahead) never hides numalign's message; the C parser's error is raised otherwise.
    """
    try:
        _walk_yaml_events(text, source, _Loader, max_items, why)
    except yaml.YAMLError:
        if _Loader is yaml.SafeLoader:
            raise
        with contextlib.suppress(yaml.YAMLError):  # the C parser's message stands
            _walk_yaml_events(text, source, yaml.SafeLoader, max_items, why)
        raise


def _walk_yaml_events(text: str, source: str | None, loader: type[yaml.SafeLoader],
                      max_items: int | None = None, why: str = "") -> None:
    depth = 0
    nodes = 0
    sizes: dict[str, int] = {}
    open_anchors: list[tuple[str | None, int]] = []
    opened: set[str] = set()
    # per open collection: [events below it so far, events allowed (a mapping: key + value)]
    counts: list[list[int]] = []
    for ev in yaml.parse(text, Loader=loader):
        if max_items is not None and counts and isinstance(
                ev, (yaml.CollectionStartEvent, yaml.ScalarEvent, yaml.AliasEvent)):
            top = counts[-1]
            top[0] += 1
            if top[0] > top[1]:
                line = f" at line {ev.start_mark.line + 1}" if ev.start_mark else ""
                kind = "mapping" if top[1] > max_items else "list"
                raise InputError(f"a {kind} of more than {max_items} items{line}{why}", source)
        if max_items is not None and isinstance(ev, yaml.CollectionStartEvent):
            counts.append([0, max_items * (2 if isinstance(ev, yaml.MappingStartEvent) else 1)])
        elif max_items is not None and isinstance(ev, yaml.CollectionEndEvent):
            counts.pop()
        if isinstance(ev, yaml.CollectionStartEvent):
            depth += 1
            nodes += 1
            if depth > MAX_DEPTH:
                where = f" at line {ev.start_mark.line + 1}" if ev.start_mark else ""
                raise InputError(f"nested deeper than {MAX_DEPTH} levels{where}", source)
            open_anchors.append((ev.anchor, nodes))
            if ev.anchor is not None:
                opened.add(ev.anchor)
        elif isinstance(ev, yaml.CollectionEndEvent):
            depth -= 1
            anchor, start = open_anchors.pop()
            if anchor is not None:
                sizes[anchor] = nodes - start + 1
                opened.discard(anchor)
        elif isinstance(ev, yaml.ScalarEvent):
            nodes += 1
            if ev.anchor is not None:
                sizes[ev.anchor] = 1
        elif isinstance(ev, yaml.AliasEvent):
            if ev.anchor in opened:
                raise InputError(f"recursive alias *{_cut(ev.anchor or '')}", source)
            nodes += sizes.get(ev.anchor or "", 1)
        if nodes > MAX_NODES:
            raise InputError(f"more than {MAX_NODES} values (aliases expanded)", source)


def _cut(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def load_yaml_all(text: str, source: str | None, *, invalid: str = "invalid YAML",
                  max_items: int | None = None, why: str = "") -> list[Any]:
    """Every document of a YAML (or JSON) text, within the caps (``max_items``: also no list
    or mapping of more items, refused while parsing, before any object is built; ``why``
    ends that error)."""
    if len(text) > MAX_DOCUMENT_BYTES:
        raise InputError(f"{_TOO_BIG}: refused", source)
    try:
        _check_yaml_events(text, source, max_items, why)
        return list(yaml.load_all(text, Loader=_BoundedLoader))
    except yaml.YAMLError as e:
        raise InputError(f"{invalid}: {yaml_problem(e)}", source) from None
    except RecursionError:  # defensive: the event check bounds the depth first
        raise InputError(f"nested deeper than {MAX_DEPTH} levels", source) from None


def read_yaml(path: str, what: str = "", *, invalid: str = "invalid YAML") -> Any:
    """The single YAML (or JSON) document in ``path``; ``None`` if it is empty.

    ``invalid`` starts the message of a syntax error (discovery says "malformed YAML").
    """
    docs = load_yaml_all(read_text(path, what), path, invalid=invalid)
    if len(docs) > 1:
        raise InputError(
            f"{invalid}: expected a single document in the stream, found {len(docs)}", path
        )
    return docs[0] if docs else None


def read_yaml_documents(path: str, what: str = "", *, invalid: str = "invalid YAML",
                        max_items: int | None = None, why: str = "") -> list[Any]:
    """Every document of a multi-document YAML file, in order (empty ones included)."""
    return load_yaml_all(read_text(path, what), path, invalid=invalid, max_items=max_items,
                         why=why)


# --------------------------------------------------------------------------- JSON


_COLLECTIONS = (dict, list)
_PLAIN_SCALARS = frozenset({str, float, bool, type(None)})


def check_tree(doc: Any, source: str | None) -> None:
    """Refuse a decoded document beyond the depth, size and integer caps (iterative walk)."""
    max_bits = int(MAX_INT_DIGITS * 3.33)
    if type(doc) is int and doc.bit_length() > max_bits:
        raise InputError(f"integer longer than {MAX_INT_DIGITS} digits", source)
    if not isinstance(doc, _COLLECTIONS):
        return
    stack: list[tuple[dict[Any, Any] | list[Any], int]] = [(doc, 1)]
    nodes = 1
    while stack:
        value, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise InputError(f"nested deeper than {MAX_DEPTH} levels", source)
        children = value.values() if isinstance(value, dict) else value
        nodes += len(children)
        if nodes > MAX_NODES:
            raise InputError(f"more than {MAX_NODES} values", source)
        if _PLAIN_SCALARS.issuperset(map(type, children)):
            continue  # only strings, floats, booleans, nulls below (checked at C speed)
        for child in children:
            if isinstance(child, _COLLECTIONS):  # a tuple: no union object per value
                stack.append((child, depth + 1))
            elif type(child) is int and child.bit_length() > max_bits:
                raise InputError(f"integer longer than {MAX_INT_DIGITS} digits", source)


class _NotJson(Exception):
    """A value JSON (RFC 8259) does not have, which Python's decoder would accept."""


def _no_constant(name: str) -> Any:
    raise _NotJson(f"{name} is not a JSON value")


def _finite_float(literal: str) -> float:
    value = float(literal)
    if value in (_INF, -_INF):
        raise _NotJson(f"number {literal[:24]} is out of range")
    return value


_INF = float("inf")
#: a ``\uD800``-``\uDFFF`` escape: the document may hold a lone surrogate (not Unicode text)
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def loads_json(text: str | bytes, source: str | None) -> Any:
    """Decode one JSON document within the caps (``source`` names it in errors).

    Strict JSON, as Go's ``encoding/json`` (the kubelet, kube-scheduler) writes it: Python's
    ``Infinity``, ``-Infinity`` and ``NaN`` are refused, so is a number beyond a double
    (``1e400``), and a string escape of half a surrogate pair (``"\\ud800"``: not Unicode
    text, which nothing downstream could print or encode)."""
    if isinstance(text, bytes):
        text = decode_text(text, source)
    if len(text) > MAX_DOCUMENT_BYTES:
        raise InputError(f"{_TOO_BIG}: refused", source)
    try:
        doc = json.loads(text, parse_constant=_no_constant, parse_float=_finite_float)
        if _SURROGATE_ESCAPE.search(text):
            json.dumps(doc, ensure_ascii=False).encode()
    except _NotJson as e:
        raise InputError(f"malformed JSON: {e}", source) from None
    except UnicodeEncodeError:
        raise InputError("malformed JSON: a \\uD800-\\uDFFF escape without its pair "
                         "(a lone surrogate is not Unicode text)", source) from None
    except json.JSONDecodeError as e:
        raise InputError(f"malformed JSON: {e.msg} at line {e.lineno} column {e.colno}", source) from None
    except RecursionError:
        raise InputError(f"nested deeper than {MAX_DEPTH} levels", source) from None
    except ValueError:  # an integer literal beyond Python's 4,300-digit conversion limit
        raise InputError(f"integer longer than {MAX_INT_DIGITS} digits", source) from None
    check_tree(doc, source)
    return doc


def read_json(path: str, what: str = "") -> Any:
    """The JSON document in ``path`` (``-`` = stdin), within the caps."""
    return loads_json(read_text(path, what), path)
