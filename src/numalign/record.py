"""Record: the base of the plain slotted classes on the ``admit`` path.

A class on the path of a plain ``numalign admit`` is not a dataclass: creating a dataclass
generates the source of its methods and compiles it when its module is imported, and
importing :mod:`dataclasses` loads :mod:`inspect` (and with it ``ast``, ``dis``, ``tokenize``);
together that was about a third of ``admit``'s start-up (``docs/architecture.md``, "Rules").
A record writes its ``__slots__`` and a typed ``__init__`` in the source, compiled once into
the ``.pyc``; this base gives the rest from the slots (fields in slot order, bases first), as
a dataclass would:

* ``__eq__``: the same class and equal compared fields (``uncompared=`` names the fields
  that take no part); ``__hash__`` of those fields when ``frozen=True``, none (unhashable)
  for a mutable record; ``eq=False`` keeps identity equality and hash;
* ``__repr__`` as ``Name(a=1, b=2)`` (``unshown=`` names the fields left out);
* a frozen record refuses ``setattr``/``delattr`` (:class:`FrozenRecordError`); its
  ``__init__`` sets fields with :data:`set_field`;
* ``pickle``, ``copy.copy`` and ``copy.deepcopy`` rebuild the fields without calling
  ``__init__`` (as they do a dataclass); a ``__dict__`` slot (a ``cached_property`` cache) is
  not carried;
* ``replace(**changes)``: a new record through ``__init__``, every other field as it is (as
  ``dataclasses.replace``: ``__init__`` takes every field by its name).

The base is marked ``typing.dataclass_transform``, so a type checker reads a record as it reads
a dataclass: a frozen record's fields are read-only (``mypy`` refuses an assignment) and the
class keywords (``frozen=``, ``eq=``) are its parameters.
"""

from __future__ import annotations

from operator import attrgetter

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up time)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, ClassVar, Self, dataclass_transform
else:
    def dataclass_transform(**_: object) -> Callable[[type], type]:
        """``typing.dataclass_transform`` only tells a type checker how to read the class."""
        return lambda cls: cls

#: sets a field of a frozen record in its ``__init__`` (``object.__setattr__``)
set_field = object.__setattr__

_NOT_FIELDS = ("__dict__", "__weakref__")


class FrozenRecordError(AttributeError):
    """An assignment to, or deletion of, a field of a frozen record."""


def _rebuild(cls: type[Record], values: tuple[Any, ...]) -> Record:
    """A record of ``cls`` with these field values, ``__init__`` not called (pickle, copy)."""
    obj = cls.__new__(cls)
    for name, value in zip(cls.__record_fields__, values, strict=True):
        set_field(obj, name, value)
    return obj


def _refuse_set(self: Record, name: str, value: object) -> None:
    raise FrozenRecordError(f"cannot assign to field {name!r} of a frozen {type(self).__qualname__}")


def _refuse_delete(self: Record, name: str) -> None:
    raise FrozenRecordError(f"cannot delete field {name!r} of a frozen {type(self).__qualname__}")


@dataclass_transform(eq_default=True)
class Record:
    """The base of a slotted record class: ``class P(Record, frozen=True): __slots__ = ...``."""

    __slots__ = ()
    #: every field, in slot order (the bases' first)
    __record_fields__: ClassVar[tuple[str, ...]] = ()
    #: the fields that ``__eq__`` and ``__hash__`` compare, and those ``__repr__`` shows
    __record_compared__: ClassVar[tuple[str, ...]] = ()
    __record_shown__: ClassVar[tuple[str, ...]] = ()
    __record_frozen__: ClassVar[bool] = False
    #: the compared fields of a record (a tuple, or the value itself when there is one)
    __record_key__: ClassVar[attrgetter[Any]] = attrgetter("__class__")
    __match_args__: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, *, frozen: bool = False, eq: bool = True, uncompared: tuple[str, ...] = (),
                          unshown: tuple[str, ...] = (), **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        slots = cls.__dict__.get("__slots__")
        if not isinstance(slots, tuple):
            raise TypeError(f"{cls.__qualname__}: a record declares its fields as a tuple of __slots__")
        if cls.__record_fields__ and cls.__record_frozen__ != frozen:  # the bases' fields and flag
            raise TypeError(f"{cls.__qualname__}: a record is frozen iff its record bases are")
        fields = (*cls.__record_fields__, *(s for s in slots if s not in _NOT_FIELDS))
        for name in (*uncompared, *unshown):
            if name not in fields:
                raise TypeError(f"{cls.__qualname__}: {name!r} is not a field")
        compared = tuple(f for f in fields if f not in uncompared)
        cls.__record_fields__ = fields
        cls.__record_compared__ = compared
        cls.__record_shown__ = tuple(f for f in fields if f not in unshown)
        cls.__record_frozen__ = frozen
        # no compared field: all records of the class are equal, as dataclasses with none are
        cls.__record_key__ = attrgetter(*compared) if compared else attrgetter("__class__")
        cls.__match_args__ = fields  # type: ignore[misc]
        if not eq:
            cls.__eq__ = object.__eq__  # type: ignore[method-assign]
            cls.__hash__ = object.__hash__  # type: ignore[method-assign]
        elif not frozen:
            cls.__hash__ = None  # type: ignore[assignment]  # mutable and compared: unhashable
        if frozen:
            cls.__setattr__ = _refuse_set  # type: ignore[method-assign,assignment]
            cls.__delattr__ = _refuse_delete  # type: ignore[method-assign,assignment]

    def __eq__(self, other: object) -> bool:
        if other.__class__ is self.__class__:
            key = self.__record_key__
            return bool(key(self) == key(other))
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.__record_key__(self))

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__record_shown__)
        return f"{type(self).__qualname__}({shown})"

    def __reduce__(self) -> tuple[Callable[[type[Record], tuple[Any, ...]], Record], tuple[Any, ...]]:
        cls = type(self)
        return _rebuild, (cls, tuple(getattr(self, name) for name in cls.__record_fields__))

    def replace(self, **changes: Any) -> Self:
        """A copy with ``changes``, made through ``__init__`` (``dataclasses.replace``)."""
        fields = self.__record_fields__
        for name in changes:
            if name not in fields:
                raise TypeError(f"{type(self).__qualname__} has no field {name!r}")
        return type(self)(**{name: changes[name] if name in changes else getattr(self, name)
                             for name in fields})
