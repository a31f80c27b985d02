"""The record classes of the ``admit`` path (``numalign/record.py``): each behaves as the
dataclass it replaced - equality and hash over the compared fields, ``Name(a=1)`` repr,
frozen ones refusing assignment, pickle and copies, ``replace`` - and keeps that dataclass's
options (frozen, eq, the fields left out of comparison and repr), written out below."""

from __future__ import annotations

import ast
import copy
import importlib
import inspect
import pickle
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numalign.pods.model import default_uid
from numalign.record import FrozenRecordError, Record, _rebuild, set_field

#: module -> its record classes (the dataclasses a plain admit loaded before; frozen unless
#: named in MUTABLE)
MODULES = {
    "numalign.engine.hints": ("TopologyHint", "Demand", "GeneratedHints"),
    "numalign.engine.merge_search": ("Groups",),
    "numalign.engine.merge": ("FitOrder",),
    "numalign.engine.policies": ("OptionLevels", "PolicyOptions", "MergeResult", "TopologyPolicy"),
    "numalign.engine.scopes": ("Decision",),
    "numalign.machine.model": ("NumaNode", "Cpu", "Device", "ReservedMemory", "KubeletConfig",
                               "Machine"),
    "numalign.pods.model": ("Container", "Pod"),
    "numalign.resources.cpu_assignment": ("CpuInfo",),
    "numalign.resources.cpu_state": ("CpuState",),
    "numalign.resources.cpu": ("StaticPolicyOptions",),
    "numalign.modes.kubelet.releases": ("Gate", "KubeletRelease", "ResolvedRelease"),
    "numalign.modes.rules": ("ModeRules",),
    "numalign.resources.device_index": ("ResourceIndex",),
    "numalign.resources.devices": ("DeviceState",),
    "numalign.resources.memory_state": ("Block", "MemoryTable", "NodeMemoryState", "MemoryState"),
    "numalign.modes.family": ("NodePolicy", "Family"),
    "numalign.node.state": ("ContainerRecord", "PodRecord", "NodeState"),
    "numalign.node.holdings": ("ContainerUsage", "PodUsage"),
    "numalign.node.predicates": ("Insufficient",),
    "numalign.node.rules": ("NodeRules",),
    "numalign.node.admission": ("ContainerResult", "PodResult"),
    "numalign.machine.kubelet_version": ("KubeletVersion",),  # when the spec gives a version
}
MUTABLE = {"Decision", "CpuState", "DeviceState", "MemoryTable", "NodeMemoryState", "MemoryState",
           "NodeState"}
NO_EQ = {"GeneratedHints", "ResourceIndex"}  # identity equality and hash (eq=False)
UNCOMPARED = {"MergeResult": {"explain"}, "KubeletVersion": {"source"}}  # compare=False
UNSHOWN = {"MergeResult": {"explain"}}  # repr=False
#: classes whose __init__ checks its arguments (not only stores them)
CHECKED_INIT = {"TopologyPolicy"}
#: classes with a __dict__ beside their slots (cached_property)
WITH_DICT = {"Machine", "Pod"}
#: classes that weak references point at (the plan cache's and the NUMA zones' keys)
WITH_WEAKREF = {"NodeState"}

CLASSES: list[type[Record]] = [getattr(importlib.import_module(m), n)
                               for m, names in MODULES.items() for n in names]
IDS = [c.__name__ for c in CLASSES]

#: field values whose repr reads back with ast.literal_eval, hashable, never None
VALUES = st.one_of(st.integers(), st.text(max_size=4), st.booleans(),
                   st.tuples(st.integers(), st.text(max_size=2)))


def _fields(cls: type[Record]) -> tuple[str, ...]:
    return cls.__record_fields__


def make(cls: type[Record], values: list[Any]) -> Record:
    """A record of ``cls`` with these field values (``__init__`` not called: it may check)."""
    return _rebuild(cls, tuple(values))


def records(cls: type[Record]) -> st.SearchStrategy[Record]:
    return st.lists(VALUES, min_size=len(_fields(cls)), max_size=len(_fields(cls))).map(
        lambda vs: make(cls, vs))


def test_the_admit_path_has_43_records() -> None:
    assert len(CLASSES) == 43 and all(issubclass(c, Record) for c in CLASSES)


@pytest.mark.parametrize("cls", CLASSES, ids=IDS)
def test_fields_are_the_annotations_and_the_init_parameters(cls: type[Record]) -> None:
    """Slot order = annotation order (the field order of the dataclass it was), and
    ``__init__`` takes every field by name (what ``replace`` needs), nothing else."""
    annotations = tuple(inspect.get_annotations(cls))
    assert _fields(cls) == annotations
    params = list(inspect.signature(cls.__init__).parameters)[1:]
    assert params == list(annotations)
    assert ("__dict__" in cls.__slots__) == (cls.__name__ in WITH_DICT)
    assert ("__weakref__" in cls.__slots__) == (cls.__name__ in WITH_WEAKREF)


@pytest.mark.parametrize("cls", CLASSES, ids=IDS)
def test_options_are_the_dataclass_options(cls: type[Record]) -> None:
    name = cls.__name__
    assert cls.__record_frozen__ == (name not in MUTABLE)
    assert set(cls.__record_compared__) == set(_fields(cls)) - UNCOMPARED.get(name, set())
    assert set(cls.__record_shown__) == set(_fields(cls)) - UNSHOWN.get(name, set())
    if name in NO_EQ:
        assert cls.__eq__ is object.__eq__ and cls.__hash__ is object.__hash__
    elif name in MUTABLE:
        assert cls.__hash__ is None


@pytest.mark.parametrize("cls", CLASSES, ids=IDS)
@settings(max_examples=25)
@given(data=st.data())
def test_eq_and_hash_are_the_compared_fields(cls: type[Record], data: st.DataObject) -> None:
    a = data.draw(records(cls))
    values = [getattr(a, f) for f in _fields(cls)]
    changed = data.draw(st.lists(st.sampled_from(range(len(values))), max_size=2)) if values else []
    for i in changed:
        values[i] = data.draw(VALUES)
    b = make(cls, values)
    key = [f for f in _fields(cls) if f not in UNCOMPARED.get(cls.__name__, set())]
    same = [getattr(a, f) for f in key] == [getattr(b, f) for f in key]
    if cls.__name__ in NO_EQ:
        assert (a == b) is (a is b) and hash(a) == object.__hash__(a)
        return
    assert (a == b) is same and (a != b) is not same
    assert a == make(cls, [getattr(a, f) for f in _fields(cls)])
    assert a != object() and (a == object()) is False
    if cls.__record_frozen__:
        if same:
            assert hash(a) == hash(b)
    else:
        with pytest.raises(TypeError):
            hash(a)


@pytest.mark.parametrize("cls", CLASSES, ids=IDS)
@settings(max_examples=25)
@given(data=st.data())
def test_repr_round_trips_the_shown_fields(cls: type[Record], data: st.DataObject) -> None:
    r = data.draw(records(cls))
    call = ast.parse(repr(r), mode="eval").body
    assert isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
    assert call.func.id == cls.__qualname__ and not call.args
    shown = {k.arg: ast.literal_eval(k.value) for k in call.keywords}
    hidden = UNSHOWN.get(cls.__name__, set())
    assert [k.arg for k in call.keywords] == [f for f in _fields(cls) if f not in hidden]
    assert shown == {f: getattr(r, f) for f in _fields(cls) if f not in hidden}


@pytest.mark.parametrize("cls", CLASSES, ids=IDS)
@settings(max_examples=25)
@given(data=st.data())
def test_pickle_and_copies_round_trip(cls: type[Record], data: st.DataObject) -> None:
    r = data.draw(records(cls))
    values = [getattr(r, f) for f in _fields(cls)]
    for other in (pickle.loads(pickle.dumps(r)), copy.deepcopy(r), copy.copy(r)):
        assert type(other) is cls and other is not r
        assert [getattr(other, f) for f in _fields(cls)] == values
        if cls.__name__ not in NO_EQ:
            assert other == r


@pytest.mark.parametrize("cls", [c for c in CLASSES if c.__record_frozen__],
                         ids=[c.__name__ for c in CLASSES if c.__record_frozen__])
@settings(max_examples=25)
@given(data=st.data())
def test_frozen_records_refuse_assignment(cls: type[Record], data: st.DataObject) -> None:
    r = data.draw(records(cls))
    before = [getattr(r, f) for f in _fields(cls)]
    for f in _fields(cls):
        with pytest.raises(FrozenRecordError):
            setattr(r, f, data.draw(VALUES))
        with pytest.raises(AttributeError):  # FrozenRecordError is one, as FrozenInstanceError
            delattr(r, f)
    with pytest.raises(AttributeError):
        r.not_a_field = 1  # type: ignore[attr-defined]
    assert [getattr(r, f) for f in _fields(cls)] == before


@pytest.mark.parametrize("cls", [c for c in CLASSES if not c.__record_frozen__],
                         ids=[c.__name__ for c in CLASSES if not c.__record_frozen__])
@settings(max_examples=25)
@given(data=st.data())
def test_mutable_records_take_assignment(cls: type[Record], data: st.DataObject) -> None:
    r = data.draw(records(cls))
    f = data.draw(st.sampled_from(_fields(cls)))
    v = data.draw(VALUES)
    setattr(r, f, v)
    assert getattr(r, f) == v


@pytest.mark.parametrize("cls", [c for c in CLASSES if c.__name__ not in CHECKED_INIT],
                         ids=[c.__name__ for c in CLASSES if c.__name__ not in CHECKED_INIT])
@settings(max_examples=25)
@given(data=st.data())
def test_replace_changes_only_the_named_fields(cls: type[Record], data: st.DataObject) -> None:
    r = data.draw(records(cls))
    names = data.draw(st.sets(st.sampled_from(_fields(cls)), max_size=3))
    changes = {n: data.draw(VALUES) for n in names}
    new = r.replace(**changes)
    assert type(new) is cls and new is not r
    for f in _fields(cls):
        assert getattr(new, f) == changes.get(f, getattr(r, f))
    with pytest.raises(TypeError, match="no field 'nope'"):
        r.replace(nope=1)


def test_replace_runs_init_checks() -> None:
    """As ``dataclasses.replace``: the new record goes through ``__init__`` (its checks)."""
    from numalign.engine.policies import Policy, TopologyPolicy
    from numalign.errors import InputError

    p = TopologyPolicy(Policy.RESTRICTED, (0, 1))
    assert p.replace(nodes=(0, 1, 2)).nodes == (0, 1, 2)
    with pytest.raises(InputError, match="duplicate NUMA node id"):
        p.replace(nodes=(0, 0))


def test_a_record_with_a_dict_keeps_its_caches_out_of_fields() -> None:
    """``Machine``'s cached properties live in its ``__dict__``: not compared, not pickled,
    computed again on a copy."""
    from numalign.machine.model import Cpu, Machine, NumaNode

    m = Machine("m", (NumaNode(0, 1 << 30), NumaNode(1, 1 << 30)), (Cpu(0, 0, 0, 0), Cpu(1, 1, 0, 1)))
    assert m.cpus_by_numa == {0: frozenset({0}), 1: frozenset({1})}
    assert "cpus_by_numa" in m.__dict__
    again = pickle.loads(pickle.dumps(m))
    assert again == m and "cpus_by_numa" not in again.__dict__
    assert again.cpus_by_numa == m.cpus_by_numa
    assert m.replace(name="n") != m and m.replace(name="n").replace(name="m") == m


def test_defaults_and_factories() -> None:
    """A default factory gives each record its own object, as ``field(default_factory=...)``."""
    from numalign.resources.cpu_state import CpuState

    a, b = CpuState(), CpuState()
    assert a == b and a.default_set is not b.default_set and a.assignments is not b.assignments


def test_the_base_refuses_bad_declarations() -> None:
    with pytest.raises(TypeError, match="tuple of __slots__"):
        class NoTuple(Record):
            __slots__ = ["a"]  # type: ignore[assignment]

    with pytest.raises(TypeError, match="'b' is not a field"):
        class Unknown(Record, uncompared=("b",)):
            __slots__ = ("a",)

    class Base(Record, frozen=True):
        __slots__ = ("a",)

        def __init__(self, a: int) -> None:
            set_field(self, "a", a)

    with pytest.raises(TypeError, match="frozen iff"):
        class Thawed(Base):
            __slots__ = ("b",)

    class Child(Base, frozen=True):
        __slots__ = ("b",)

        def __init__(self, a: int, b: int) -> None:
            super().__init__(a)
            set_field(self, "b", b)

    c = Child(1, 2)
    assert repr(c) == "test_the_base_refuses_bad_declarations.<locals>.Child(a=1, b=2)"
    assert c == Child(1, 2) and c != Child(1, 3) and c != Base(1) and hash(c) == hash((1, 2))
    match c:
        case Child(a, b):
            assert (a, b) == (1, 2)


@given(st.text(max_size=20), st.text(max_size=20))
def test_default_uid_is_uuid5(namespace: str, name: str) -> None:
    """``default_uid`` (CPython's SHA-1 without hashlib's OpenSSL) is ``uuid.uuid5``."""
    try:
        data = f"numalign:pod:{namespace}/{name}"
        data.encode()
    except UnicodeEncodeError:  # a lone surrogate: uuid5 cannot encode it either
        return
    assert default_uid(namespace, name) == str(uuid.uuid5(uuid.NAMESPACE_URL, data))
