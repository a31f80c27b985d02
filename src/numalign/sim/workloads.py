"""Simulator workloads, the base every workload source builds on.

A :class:`Workload` is a time-ordered sequence of :class:`Arrival` ``(time_s, pod,
duration_s)``: at ``time_s`` seconds from the start of the replay the pod is submitted; once
it runs it departs ``duration_s`` seconds later (``None``: it never departs in the replay).
Ties in time keep the source order.

Also here, for the source modules (which import only this module, and
:mod:`numalign.sim.cluster` where they need a cluster):

* :class:`WorkloadSpec` - what a source's loader gets from a parsed workload spec string
  (the grammar and the registry of sources are in :mod:`numalign.sim.sources`);
* option helpers (:func:`split_options`, :func:`option_int`, :func:`option_float`,
  :func:`check_options`) whose errors name the spec part and the key;
* CSV helpers for trace readers: rows are read with the stdlib :mod:`csv` module one at a
  time, and a malformed value raises :class:`InputError` ``<file>:<line>: <column>: <problem>``;
* the annotations a pod manifest may carry to set its arrival time and duration;
* :func:`sample_workload` - a seeded subsample of a workload (the ``sample=F&seed=S`` options
  every path source takes, applied by :mod:`numalign.sim.sources` after loading).
"""

from __future__ import annotations

import csv
import math
import os
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import TYPE_CHECKING, overload

from numalign.errors import InputError
from numalign.pods import Container, ContainerKind, Pod, QOSClass, default_uid, pod_qos

if TYPE_CHECKING:
    from numalign.machine.model import Machine

#: Annotation a pod manifest may carry to set its arrival time (seconds) in a replay.
ARRIVAL_ANNOTATION = "numalign.io/arrival-seconds"
#: Annotation a pod manifest may carry to set how long it runs (seconds) in a replay.
DURATION_ANNOTATION = "numalign.io/duration-seconds"


@dataclass(frozen=True)
class Arrival:
    """One pod submission: at ``time_s``, running for ``duration_s`` (None: forever)."""

    time_s: float
    pod: Pod
    duration_s: float | None = None

    @property
    def departure_s(self) -> float | None:
        """When the pod would leave if it started at its arrival time."""
        return None if self.duration_s is None else self.time_s + self.duration_s


@dataclass(frozen=True)
class Workload(Sequence[Arrival]):
    """A named, time-ordered sequence of arrivals (sorted on construction, stable)."""

    name: str
    arrivals: tuple[Arrival, ...] = ()
    #: human description of where it came from and how it was mapped (for reports)
    description: str = ""
    #: source parameters (path, limits, seed ...), JSON-friendly, for the report
    params: Mapping[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        ordered = tuple(sorted(self.arrivals, key=lambda a: a.time_s))  # stable
        object.__setattr__(self, "arrivals", ordered)

    @overload
    def __getitem__(self, index: int) -> Arrival: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Arrival]: ...
    def __getitem__(self, index: int | slice) -> Arrival | Sequence[Arrival]:
        return self.arrivals[index]

    def __len__(self) -> int:
        return len(self.arrivals)

    def __iter__(self) -> Iterator[Arrival]:
        return iter(self.arrivals)

    @property
    def pods(self) -> list[Pod]:
        return [a.pod for a in self.arrivals]

    @property
    def span_s(self) -> float:
        """Time from the first arrival to the last arrival or departure."""
        if not self.arrivals:
            return 0.0
        end = max((a.departure_s if a.departure_s is not None else a.time_s) for a in self.arrivals)
        return end - self.arrivals[0].time_s


def sample_workload(workload: Workload, fraction: float, seed: int) -> Workload:
    """Each arrival kept with probability ``fraction``, independently, in the workload's
    (time) order, by one ``random.Random(seed)``: the same workload, fraction and seed give
    the same sample on every run and platform; different seeds give different samples."""
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    rng = random.Random(seed)
    kept = tuple(a for a in workload.arrivals if rng.random() < fraction)
    note = f"each pod kept with probability {fraction:g} (seed {seed})"
    return Workload(
        name=workload.name,
        arrivals=kept,
        description=f"{workload.description}; {note}" if workload.description else note,
        params={**workload.params, "sample": fraction, "seed": seed},
    )


# --------------------------------------------------------------------------------------------
# CSV rows
# --------------------------------------------------------------------------------------------

_MISSING = frozenset({"", "nan", "NaN", "NAN", "null", "None"})


class CsvRow:
    """One data row of a trace file, with its position for error messages: the row's
    ``fields`` in header order and the file's ``index`` (column name -> position, one mapping
    shared by every row of a file, built once from the ``header``)."""

    __slots__ = ("fields", "header", "index", "line", "path")

    def __init__(
        self,
        path: str,
        line: int,
        fields: Sequence[str],
        header: tuple[str, ...],
        index: Mapping[str, int],
    ) -> None:
        self.path = path
        self.line = line
        self.fields = fields
        self.header = header
        self.index = index

    def error(self, column: str, problem: str) -> InputError:
        return InputError(problem, f"{self.path}:{self.line}: {column}")

    def has(self, column: str) -> bool:
        return column in self.index

    def raw(self, column: str) -> str:
        """The value as written (not stripped); "" for a column the file does not have."""
        i = self.index.get(column)
        return "" if i is None else self.fields[i]

    def text(self, column: str) -> str:
        return self.raw(column).strip()

    def is_missing(self, column: str) -> bool:
        return self.text(column) in _MISSING

    def decimal(self, column: str, *, minimum: int | None = 0) -> Fraction | int:
        """An exact, finite decimal number (an int when whole); missing values are errors."""
        raw = self.raw(column).strip()
        # fast paths: most trace values are plain non-negative decimals ("12", "120.0")
        if raw.isdigit():
            return int(raw)  # non-negative, so above every minimum used here
        whole, dot, frac = raw.partition(".")
        if dot and whole.isdigit() and frac.isdigit():
            frac = frac.rstrip("0")
            if not frac:
                return int(whole)
            return Fraction(int(whole + frac), 10 ** len(frac))
        if raw in _MISSING:
            raise self.error(column, "missing value")
        try:
            value = Fraction(Decimal(raw))
        except (InvalidOperation, ValueError):
            raise self.error(column, f"expected a number, got {raw!r}") from None
        if minimum is not None and value < minimum:
            raise self.error(column, f"must be at least {minimum}, got {raw!r}")
        return value

    def whole(self, column: str, *, minimum: int = 0) -> int:
        """A whole number (``8`` or ``8.0``)."""
        value = self.decimal(column, minimum=minimum)
        if isinstance(value, int):
            if value < minimum:
                raise self.error(column, f"must be at least {minimum}, got {self.text(column)!r}")
            return value
        if value.denominator != 1:
            raise self.error(column, f"expected a whole number, got {self.text(column)!r}")
        return int(value)

    def time(self, column: str) -> float | None:
        """Seconds from the trace start; None for a missing value (NaN in the trace)."""
        raw = self.raw(column).strip()
        if not raw:
            return None
        whole, dot, frac = raw.partition(".")
        if raw.isascii() and whole.isdigit() and (not dot or frac.isdigit()):
            # a plain decimal (most trace times): float() rounds its exact value to the
            # nearest double, as float() of the exact Fraction below does
            f = float(raw)
            if math.isfinite(f):
                return f
        if raw in _MISSING:
            return None
        value = self.decimal(column, minimum=None)
        f = float(value)
        if not math.isfinite(f) or f < 0:
            raise self.error(column, f"expected a time in seconds >= 0, got {self.text(column)!r}")
        return f


def read_csv_rows(
    path: str | os.PathLike[str],
    required: Sequence[str],
    *,
    limit: int | None = None,
) -> Iterator[CsvRow]:
    """Stream the data rows of a CSV file with a header line.

    The header must hold every ``required`` column (else an error naming the first missing
    one); every row must have as many fields as the header. Blank lines are skipped.
    ``limit`` stops after that many data rows.
    """
    name = os.fspath(path)
    try:
        fh = open(name, encoding="utf-8", newline="")  # noqa: SIM115 - closed by the with below
    except OSError as e:
        raise InputError(f"cannot read: {e.strerror or e}", name) from None
    with fh:
        reader = csv.reader(fh)
        try:
            first = next(reader, None)
            if first is None:
                raise InputError("empty file, expected a CSV header line", f"{name}:1")
            header = tuple(h.strip() for h in first)
            index = {c: i for i, c in enumerate(header)}  # a repeated column: the last one
            for col in required:
                if col not in header:
                    raise InputError(
                        f"missing column {col!r} in the header (found: {', '.join(header)})",
                        f"{name}:1",
                    )
            count = 0
            for fields in reader:
                if limit is not None and count >= limit:
                    return
                if not fields or (not fields[0].strip() and all(not f.strip() for f in fields)):
                    continue
                line = reader.line_num
                if len(fields) != len(header):
                    raise InputError(
                        f"expected {len(header)} fields like the header, got {len(fields)}",
                        f"{name}:{line}",
                    )
                count += 1
                yield CsvRow(name, line, fields, header, index)
        except csv.Error as e:
            raise InputError(f"malformed CSV: {e}", f"{name}:{reader.line_num}") from None
        except UnicodeDecodeError as e:
            raise InputError(f"not UTF-8 text: {e.reason}", name) from None


#: ASCII characters that are not letters or digits -> ``-``
_ASCII_NON_ALNUM = str.maketrans({c: "-" for c in map(chr, range(128)) if not c.isalnum()})


def kube_name(raw: str) -> str:
    """A trace identifier as a DNS-1123 pod name (``instance_7185`` -> ``instance-7185``):
    lower case, every character that is not a letter or digit replaced by ``-``."""
    text = raw.strip().lower()
    if text.isascii():
        dashed = text.replace("_", "-")  # the usual case: letters, digits, "_" and "-"
        if not dashed.replace("-", "").isalnum():
            dashed = text.translate(_ASCII_NON_ALNUM)
        out = dashed.strip("-")
    else:
        out = "".join(ch if ch.isalnum() else "-" for ch in text).strip("-")
    return out or "pod"


#: one app container ``main`` and the QoS class of a pod holding only it
PodShape = tuple[Container, QOSClass]

#: the container ``main`` and its QoS class, by the requests and limits (pods of one shape
#: share the container: it is immutable; bounded by :data:`_SHAPES_KEPT`)
_SHAPES: dict[tuple[tuple[str, int], ...], PodShape] = {}
_SHAPES_KEPT = 1 << 14


def single_container_shape(requests: Mapping[str, int], limits: Mapping[str, int]) -> PodShape:
    """The container ``main`` with these requests and limits and its pod's QoS class (by the
    kubelet's rules), cached by shape: readers keep it for rows of the same shape."""
    key = (*sorted(requests.items()), ("", -1), *sorted(limits.items()))
    shape = _SHAPES.get(key)
    if shape is None:
        container = Container("main", ContainerKind.APP, requests=dict(requests), limits=dict(limits))
        if len(_SHAPES) >= _SHAPES_KEPT:
            _SHAPES.clear()
        shape = _SHAPES[key] = (container, pod_qos([container]))
    return shape


def shaped_pod(namespace: str, name: str, shape: PodShape) -> Pod:
    """A pod of :func:`single_container_shape`'s shape (uid: :func:`default_uid`)."""
    container, qos = shape
    return Pod(
        namespace=namespace,
        name=name,
        uid=default_uid(namespace, name),
        qos=qos,
        containers=(container,),
    )


def single_container_pod(
    namespace: str, name: str, requests: Mapping[str, int], limits: Mapping[str, int]
) -> Pod:
    """A pod with one app container ``main`` (QoS by the kubelet's rules, cached by shape)."""
    return shaped_pod(namespace, name, single_container_shape(requests, limits))


# --------------------------------------------------------------------------------------------
# What a source's loader gets
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WorkloadSpec:
    """One parsed workload spec: the source name, its path (path sources) and options, and
    where defaults come from. A loader checks its options and builds the workload."""

    source: str
    #: the text after ``SOURCE:`` up to ``?`` (path sources; "" when none)
    path: str = ""
    options: Mapping[str, str] = field(default_factory=dict)
    #: where ``traces/`` lives (default trace paths); None when unknown
    shared_dir: str | os.PathLike[str] | None = None
    #: the cluster a generator scales to (None: its own default)
    cluster: Sequence[tuple[str, Machine]] | None = None
    #: where a relative ``path`` is taken from (None: the current directory)
    base_dir: str | os.PathLike[str] | None = None

    @property
    def part(self) -> str:
        """The prefix of this spec's error fields (``workload SOURCE``)."""
        return f"workload {self.source}"

    def check_options(self, known: Sequence[str]) -> None:
        check_options(self.options, known, self.part)

    def local(self, path: str) -> str:
        """``path`` as this process opens it: relative paths taken from ``base_dir``."""
        if self.base_dir is None or os.path.isabs(path):
            return path
        return os.path.join(os.fspath(self.base_dir), path)

    def trace_path(self, default: Callable[[str | os.PathLike[str]], str]) -> str:
        """The given path, else ``default(shared_dir)``; an error naming what to pass when
        neither is known."""
        if self.path:
            return self.local(self.path)
        if self.shared_dir is None:
            raise InputError(
                "no trace path given and no shared directory to find it in "
                f"(give {self.source}:PATH, or the directory holding traces/: "
                "--shared DIR or NUMALIGN_SHARED)",
                self.part,
            )
        return default(self.shared_dir)


# --------------------------------------------------------------------------------------------
# Options
# --------------------------------------------------------------------------------------------


def split_options(text: str, part: str) -> dict[str, str]:
    """``key=value`` pairs separated by ``&`` or ``,`` (each key once)."""
    out: dict[str, str] = {}
    for item in text.replace("&", ",").split(","):
        item = item.strip()
        if not item:
            continue
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise InputError(f"expected key=value, got {item!r}", part)
        if key in out:
            raise InputError(f"option {key!r} given twice", part)
        out[key] = value.strip()
    return out


def option_int(opts: Mapping[str, str], key: str, part: str, *, minimum: int = 0) -> int | None:
    if key not in opts:
        return None
    raw = opts[key]
    try:
        value = int(raw)
    except ValueError:
        raise InputError(f"expected a whole number, got {raw!r}", f"{part}: {key}") from None
    if value < minimum:
        raise InputError(f"must be at least {minimum}, got {raw!r}", f"{part}: {key}")
    return value


def option_float(
    opts: Mapping[str, str], key: str, part: str, *, minimum: float = 0.0, strict: bool = False
) -> float | None:
    if key not in opts:
        return None
    raw = opts[key]
    try:
        value = float(raw)
    except ValueError:
        raise InputError(f"expected a number, got {raw!r}", f"{part}: {key}") from None
    if not math.isfinite(value) or value < minimum or (strict and value == minimum):
        rel = ">" if strict else ">="
        raise InputError(
            f"must be a finite number {rel} {minimum:g}, got {raw!r}", f"{part}: {key}"
        )
    return value


def check_options(opts: Mapping[str, str], known: Sequence[str], part: str) -> None:
    for key in opts:
        if key not in known:
            raise InputError(
                f"unknown option {key!r} (known: {', '.join(known)})", f"{part}: {key}"
            )
