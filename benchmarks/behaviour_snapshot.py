"""Behaviour snapshot: numalign's observable behaviour, to prove a refactoring changed none.

It drives numalign only through its command line (``python -m numalign ...`` with
``PYTHONPATH`` set to a source tree) and over HTTP (``numalign extender serve``); it never
imports numalign, so it runs unchanged on any package layout. The inputs (``examples/``,
``tests/data/``, the generated merge cases) always come from the checkout holding this script,
so both sides of a comparison are fed the same bytes; only the code under test differs.

    python benchmarks/behaviour_snapshot.py diff 1c0ca8d        # base ref vs this working tree
    python benchmarks/behaviour_snapshot.py snapshot --src src --out /tmp/snap-a [--full]
    python benchmarks/behaviour_snapshot.py compare /tmp/snap-a /tmp/snap-b

``diff BASE_REF`` makes a temporary ``git worktree`` of BASE_REF, snapshots its ``src/`` and
this working tree's ``src/``, compares them and removes the worktree (the two snapshots are
kept, and their paths printed, when they differ). ``compare`` prints one line per differing or
missing file and exits 1, or prints how many files matched and exits 0.

One JSON file per check: the command, its exit code, stdout and stderr (JSON output re-printed
with sorted keys; temporary paths, ports and run ids masked; clock-measured figures removed).
The checks:

* ``merge``: ``examples/merge-cases.jsonl``, ``examples/merge-case.json`` (file and stdin), the
  kubelet's policy tables (``tests/data/kubelet_policy_cases.json`` without ``id``, ``source``,
  ``expect``) and 3,000 random cases (seeded ``random``: every policy, options, distances,
  engine modes, 1-4 providers, 2-8 NUMA nodes and a few wider, empty and "no preference"
  hint lists, about 8% invalid);
* ``admit -o json --explain`` of every example machine with every example pod file, each in a
  fresh state directory, with and without ``--kubelet-config examples/kubelet/config.yaml``;
  table, YAML and stdin forms; bad input; a sequence per machine on one state directory
  (admit each pod file, again without ``-m`` and with another machine, ``state``, ``release``
  twice, ``state``, ``state --reconcile``); the README's ``--sysfs-root``/``--hwloc-xml``
  examples when the shared captures are there; ``run --dry-run``;
* ``demo``; ``--help`` of every command; ``--version``; ``schema``; ``export`` (yaml, json,
  numatopo) and ``discover --nrt/--numatopo`` of the exports;
* ``simulate`` of ``builtin:small`` and ``builtin:default`` under all eight profiles
  (``summary.json`` without the clock-measured fields ``throughput_pods_per_s`` (now ``scheduled_pods_per_cpu_s``),
  ``scheduler_cpu_s`` and ``latency_ms``; the table's ``CPU s``/``p50 ms``/``p99 ms`` columns
  masked; report.html only listed). builtin:default runs as two invocations, ``koordinator``
  and the other seven, so that they go in parallel (a profile's run does not depend on the
  others). ``--full`` adds the Alibaba 2025 replay under all eight profiles;
* the extender under every profile (``default`` is refused: its error is recorded): NRTs
  exported from the example machines, idle and loaded (the admit sequence's state), in a
  directory; for each example pod in turn (then a few annotated for the koordinator and
  volcano profiles) ``/filter`` in both node-list forms, ``/prioritize`` and ``/bind`` to the
  best-scored node; health, OpenAPI and error answers; then SIGTERM (SIGKILL after 10 s).

Not covered: ``/metrics`` and report.html (process and rendering figures), ``ps`` and a
real ``run`` (they depend on this host's live processes), ``export --apply`` and the API
sources (they need an API server).

A snapshot costs about 170 CPU-seconds, two thirds of it the builtin:default simulation; the
checks run in parallel (``--jobs``, default: the CPU count, at most 4). ``--full`` adds about
4 minutes (8 on a loaded machine). ``diff`` takes two snapshots.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import difflib
import hashlib
import http.client
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from functools import cache, partial
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]

ALL_PROFILES = ("default", "nrt-snn", "nrt-snn-least-numa", "nrt-snn-most-allocated",
                "nrt-snn-balanced", "volcano", "koordinator", "numalign")
#: extender profiles: the server's default (numalign, run without --profile) first
EXTENDER_PROFILES = ("numalign", "koordinator", "volcano", "nrt-snn", "nrt-snn-least-numa",
                     "nrt-snn-most-allocated", "nrt-snn-balanced", "default")
RANDOM_SEED = 20261127
RANDOM_CASES = 3000
RANDOM_CHUNK = 500

#: summary.json fields measured by a clock (sim/metrics.py: wall and thread time); removed.
#: Everything counted (pods, cycles, NUMA nodes, utilisation over simulated time) stays.
SUMMARY_TIMING_KEYS = frozenset({"throughput_pods_per_s", "scheduled_pods_per_cpu_s", "scheduler_cpu_s", "latency_ms"})
SUMMARY_TIMING_PATTERN = re.compile(r"(wall|throughput|latency|elapsed|cpu_s$|_seconds$)")
#: columns of the simulate table measured by a clock; masked
TABLE_TIMING_COLUMNS = re.compile(r"^(CPU s|p\d+ ms|.*\bms|wall.*|.*throughput.*|.*pods/s)$")

PROCESS_TIMEOUT = 900.0


# ---------------------------------------------------------------------------- running


@dataclass(frozen=True)
class Proc:
    args: list[str]
    code: int | str
    stdout: str
    stderr: str


@dataclass
class Ctx:
    """One snapshot: the source tree under test, the inputs, a scratch directory."""

    src: Path
    inputs: Path
    tmp: Path
    shared: Path | None
    full: bool
    python: str = sys.executable
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _locks: dict[str, threading.Lock] = field(default_factory=dict)
    _memo: dict[str, Any] = field(default_factory=dict)

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("NUMALIGN", "PYTHON", "KUBE")) and k not in (
                   "NODE_NAME", "COLUMNS", "LINES", "XDG_RUNTIME_DIR")}
        env.update(PYTHONPATH=str(self.src), PYTHONSAFEPATH="1", PYTHONUTF8="1",
                   PYTHONIOENCODING="utf-8", COLUMNS="100", LC_ALL="C.UTF-8", TZ="UTC",
                   MPLBACKEND="Agg", XDG_RUNTIME_DIR=str(self.tmp / "xdg-runtime"))
        return env

    def argv(self, args: Sequence[str]) -> list[str]:
        return [self.python, "-m", "numalign", *args]

    def run(self, args: Sequence[str], *, stdin: str | None = None,
            timeout: float = PROCESS_TIMEOUT) -> Proc:
        try:
            p = subprocess.run(self.argv(args), input=stdin, capture_output=True, text=True,
                               cwd=self.inputs, env=self.env(), timeout=timeout,
                               stdin=None if stdin is not None else subprocess.DEVNULL)
        except subprocess.TimeoutExpired as e:
            out = e.stdout.decode() if isinstance(e.stdout, bytes) else e.stdout or ""
            err = e.stderr.decode() if isinstance(e.stderr, bytes) else e.stderr or ""
            return Proc(list(args), f"timeout after {timeout:.0f} s", out, err)
        return Proc(list(args), p.returncode, p.stdout, p.stderr)

    def scratch(self, name: str) -> Path:
        d = self.tmp / name
        d.mkdir(parents=True, exist_ok=False)
        return d

    def once(self, key: str, make: Callable[[], Any]) -> Any:
        """``make()`` computed once per snapshot (work shared by several checks)."""
        with self._lock:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            if key not in self._memo:
                self._memo[key] = make()
            return self._memo[key]

    def mask(self, text: str) -> str:
        """Temporary, source and input paths replaced by placeholders, run ids masked."""
        pairs: list[tuple[str, str]] = []
        for path, token in ((self.tmp, "<TMP>"), (self.src, "<SRC>"), (self.inputs, "<REPO>"),
                            (self.shared, "<SHARED>")):
            if path is not None:
                pairs += [(str(path), token), (os.path.realpath(path), token)]
        pairs.append((self.python, "<PYTHON>"))
        for old, new in sorted(set(pairs), key=lambda p: -len(p[0])):
            text = text.replace(old, new)
        return re.sub(r"\brun-\d+-\d+\b", "run-<ID>", text)


def rel(ctx: Ctx, path: Path) -> str:
    """An input path as given on the command line (relative to the checkout when inside)."""
    try:
        return str(path.relative_to(ctx.inputs))
    except ValueError:
        return str(path)


def render(ctx: Ctx, text: str, fmt: str) -> Any:
    """Tool output for the snapshot: JSON parsed (re-printed with sorted keys), else lines."""
    text = ctx.mask(text)
    if fmt == "json" and text.strip():
        try:
            return json.loads(text)
        except ValueError:
            pass
    if fmt == "jsonl":
        out: list[Any] = []
        for line in text.splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                out.append(line)
        return out
    return text.splitlines()


def record(ctx: Ctx, p: Proc, fmt: str = "text", stdin: str | None = None) -> dict[str, Any]:
    cmd = "numalign " + " ".join(ctx.mask(a) for a in p.args)
    if stdin is not None:
        cmd += f" < {stdin}"
    return {"command": cmd, "exit": p.code, "stdout": render(ctx, p.stdout, fmt),
            "stderr": ctx.mask(p.stderr).splitlines()}


def slug(*parts: str) -> str:
    return "--".join(re.sub(r"[^A-Za-z0-9._+-]+", "-", p).strip("-") for p in parts if p)


Checks = list[tuple[str, Any]]


# ---------------------------------------------------------------------------- inputs


def load_yaml_docs(path: Path) -> list[Any]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


def example_machines(ctx: Ctx) -> list[Path]:
    """examples/*.yaml that are machine specs (no ``kind``), sorted."""
    out = []
    for p in sorted((ctx.inputs / "examples").glob("*.yaml")):
        docs = load_yaml_docs(p)
        if docs and isinstance(docs[0], dict) and "kind" not in docs[0]:
            out.append(p)
    return out


def example_pod_files(ctx: Ctx) -> list[Path]:
    """examples/*.yaml that are pod manifests (Pod or List), then examples/pods/*.yaml."""
    out = []
    for p in sorted((ctx.inputs / "examples").glob("*.yaml")):
        docs = load_yaml_docs(p)
        if docs and isinstance(docs[0], dict) and docs[0].get("kind") in ("Pod", "List"):
            out.append(p)
    return out + sorted((ctx.inputs / "examples" / "pods").glob("*.y*ml"))


def pods_of(path: Path) -> list[dict[str, Any]]:
    pods: list[dict[str, Any]] = []
    for doc in load_yaml_docs(path):
        if doc.get("kind") == "List":
            pods += [i for i in doc.get("items") or [] if i.get("kind") == "Pod"]
        elif doc.get("kind") == "Pod":
            pods.append(doc)
    return pods


# ---------------------------------------------------------------------------- merge


POLICIES = ("none", "best-effort", "restricted", "single-numa-node")
RESOURCES = ("cpu", "memory", "hugepages-1Gi", "nvidia.com/gpu", "rdma/hca", "example.com/nic")


def _subset(rng: random.Random, ids: list[int]) -> list[int]:
    k = min(len(ids), rng.choice((1, 1, 1, 2, 2, 3, len(ids))))
    return sorted(rng.sample(ids, k))


def _hints(rng: random.Random, ids: list[int]) -> list[dict[str, Any]]:
    if rng.random() < 0.5 and len(ids) <= 6:
        # a manager's answer: every mask whose capacity covers the need, narrowest preferred
        cap = {i: rng.randint(0, 4) for i in ids}
        need = rng.randint(1, 8)
        masks = []
        for m in range(1, 1 << len(ids)):
            nodes = [ids[b] for b in range(len(ids)) if m >> b & 1]
            if sum(cap[i] for i in nodes) >= need:
                masks.append(nodes)
        if not masks:
            return []
        narrow = min(len(m) for m in masks)
        return [{"affinity": m, "preferred": len(m) == narrow} for m in masks]
    out = []
    for _ in range(rng.randint(1, 6)):
        aff = None if rng.random() < 0.06 else _subset(rng, ids)
        hint: dict[str, Any] = {"preferred": rng.random() < 0.5}
        if aff is not None or rng.random() < 0.5:
            hint["affinity"] = aff
        out.append(hint)
    return out


def _provider(rng: random.Random, ids: list[int]) -> dict[str, Any] | None:
    r = rng.random()
    if r < 0.05:
        return None
    if r < 0.10:
        return {}
    out: dict[str, Any] = {}
    for name in rng.sample(RESOURCES, rng.choice((1, 1, 1, 2))):
        v = rng.random()
        out[name] = None if v < 0.08 else [] if v < 0.16 else _hints(rng, ids)
    return out


def _distances(rng: random.Random, ids: list[int]) -> dict[str, dict[str, int]]:
    d: dict[str, dict[str, int]] = {str(i): {} for i in ids}
    for a in ids:
        d[str(a)][str(a)] = 10
        for b in ids:
            if a < b:
                far = rng.choice((11, 12, 16, 20, 21, 32))
                d[str(a)][str(b)] = far
                d[str(b)][str(a)] = far if rng.random() < 0.9 else far + 1
    if rng.random() < 0.08:
        row = d[str(rng.choice(ids))]
        del row[rng.choice(sorted(row))]
    return d


def random_case(rng: random.Random) -> dict[str, Any]:
    n = rng.randint(9, 12) if rng.random() < 0.04 else rng.choice((2, 2, 2, 3, 4, 4, 4, 5, 6, 7, 8, 8))
    r = rng.random()
    ids = list(range(n)) if r < 0.7 else sorted(rng.sample(range(64), n)) if r < 0.9 else \
        rng.sample(range(n), n)
    case: dict[str, Any] = {"policy": rng.choice(POLICIES), "numa_nodes": ids}
    opts: dict[str, Any] = {}
    if rng.random() < 0.35:
        opts["prefer-closest-numa-nodes"] = rng.choice(("true", "true", "false", "1", "0", True, False))
    if n > 8 or rng.random() < 0.12:
        opts["max-allowable-numa-nodes"] = rng.choice(("8", "9", "12", "16", 16, "64"))
    if opts or rng.random() < 0.1:
        case["options"] = opts
    if "prefer-closest-numa-nodes" in opts or rng.random() < 0.25:
        case["distances"] = _distances(rng, ids)
    if rng.random() < 0.45:
        case["mode"] = rng.choice(("kubelet", "koordinator", "volcano"))
    case["providers"] = [_provider(rng, ids) for _ in range(rng.randint(1, 4))]
    return case


def corrupt(rng: random.Random, case: dict[str, Any]) -> dict[str, Any] | str:
    """One invalid variant of ``case`` (the error output is behaviour too)."""
    case = copy.deepcopy(case)
    hints = [h for p in case["providers"] if p for v in p.values() if v for h in v]
    kind = rng.randrange(15)
    if kind == 0:
        case["scope"] = rng.choice(("pod", "container"))
    elif kind == 1:
        case["policy"] = rng.choice(("Restricted", "", 3, "dynamic", None))
    elif kind == 2:
        case["numa_nodes"] = rng.choice(([], [0, 0], [-1], [1024], "0-1", [0.5]))
    elif kind == 3:
        case["providers"] = rng.choice(({}, "x", [[{"affinity": [0], "preferred": True}]], 1))
    elif kind == 4 and hints:
        rng.choice(hints)["affinity"] = [max(case["numa_nodes"]) + 1]
    elif kind == 5 and hints:
        rng.choice(hints).pop("preferred", None)
    elif kind == 6 and hints:
        rng.choice(hints)["score"] = 1
    elif kind == 7 and hints:
        rng.choice(hints)["preferred"] = "true"
    elif kind == 8:
        case["options"] = rng.choice(({"unknown-option": "true"},
                                      {"prefer-closest-numa-nodes": "maybe"},
                                      {"max-allowable-numa-nodes": "4"},
                                      {"max-allowable-numa-nodes": "x"}, "true", []))
    elif kind == 9:
        case["mode"] = rng.choice(("Volcano", "none", 1, ""))
    elif kind == 10:
        return rng.choice(("{", "[]", "null", "42", '"case"', "{}", "{'policy': 'none'}"))
    elif kind == 11:
        del case["numa_nodes"]
    elif kind == 12:
        case["distances"] = rng.choice(({"0": {"0": -1}}, {"x": {}}, [], {"0": 10}))
        case["options"] = {"prefer-closest-numa-nodes": "true"}
    elif kind == 13:
        case["providers"] = [{"cpu": rng.choice(("x", {}, [1], [{"affinity": "0", "preferred": True}]))}]
    else:
        case["policy"] = rng.choice(POLICIES)
        case["numa_nodes"] = list(range(rng.randint(9, 70)))
        case.pop("distances", None)
    return case


@cache
def random_cases(seed: int = RANDOM_SEED, count: int = RANDOM_CASES) -> list[str]:
    rng = random.Random(seed)
    lines = []
    for _ in range(count):
        case: dict[str, Any] | str = random_case(rng)
        if rng.random() < 0.08:
            case = corrupt(rng, case)  # type: ignore[arg-type]
        lines.append(case if isinstance(case, str) else json.dumps(case))
    return lines


def merge_jsonl(ctx: Ctx, name: str, lines: list[str], label: str) -> Checks:
    d = ctx.scratch(slug("merge", name))
    path = d / f"{name}.jsonl"
    text = "".join(line + "\n" for line in lines)
    path.write_text(text)
    rec = record(ctx, ctx.run(["merge", "--jsonl", str(path)]), "jsonl")
    rec["input"] = {"what": label, "cases": len(lines),
                    "sha256": hashlib.sha256(text.encode()).hexdigest()}
    return [(slug("merge", "jsonl", name), rec)]


def check_merge_examples(ctx: Ctx) -> Checks:
    out: Checks = []
    jsonl = ctx.inputs / "examples" / "merge-cases.jsonl"
    one = ctx.inputs / "examples" / "merge-case.json"
    if jsonl.exists():
        out.append((slug("merge", "jsonl", "examples-merge-cases.jsonl"),
                    record(ctx, ctx.run(["merge", "--jsonl", rel(ctx, jsonl)]), "jsonl")))
    if one.exists():
        out.append((slug("merge", "examples-merge-case.json"),
                    record(ctx, ctx.run(["merge", rel(ctx, one)]), "json")))
        out.append((slug("merge", "stdin", "examples-merge-case.json"),
                    record(ctx, ctx.run(["merge", "-"], stdin=one.read_text()), "json",
                           stdin=rel(ctx, one))))
        compact = json.dumps(json.loads(one.read_text()))
        out += merge_jsonl(ctx, "examples-merge-case.json-as-jsonl", [compact],
                           "examples/merge-case.json on one line")
    out.append((slug("merge", "stdin", "not-json"),
                record(ctx, ctx.run(["merge"], stdin="{not json\n"), "json", stdin="'{not json'")))
    out.append((slug("merge", "missing-file"),
                record(ctx, ctx.run(["merge", "examples/no-such-case.json"]), "json")))
    return out


def check_merge_kubelet_tables(ctx: Ctx) -> Checks:
    path = ctx.inputs / "tests" / "data" / "kubelet_policy_cases.json"
    if not path.exists():
        return []
    table = json.loads(path.read_text())
    # the table's cases are merge cases with ``id``, ``source`` and ``expect`` added
    lines = [json.dumps({k: v for k, v in c.items() if k not in ("id", "source", "expect")})
             for c in table]
    checks = merge_jsonl(ctx, "kubelet-policy-cases", lines,
                         "tests/data/kubelet_policy_cases.json without id, source, expect")
    rec = checks[0][1]
    rec["ids"] = [c.get("id") for c in table]
    return checks


def check_merge_random(ctx: Ctx, part: int) -> Checks:
    lines = random_cases()[part * RANDOM_CHUNK:(part + 1) * RANDOM_CHUNK]
    return merge_jsonl(ctx, f"random-seed{RANDOM_SEED}-part{part:02d}", lines,
                       f"random cases {part * RANDOM_CHUNK}-{part * RANDOM_CHUNK + len(lines) - 1} "
                       f"of {RANDOM_CASES}, seed {RANDOM_SEED}")


# ---------------------------------------------------------------------------- admit


def check_admit(ctx: Ctx, machine: Path, pods: Path, kubelet_config: bool) -> Checks:
    d = ctx.scratch(slug("admit", machine.stem, pods.stem, "kc" if kubelet_config else ""))
    args = ["admit", "-m", rel(ctx, machine)]
    if kubelet_config:
        args += ["--kubelet-config", "examples/kubelet/config.yaml"]
    args += ["--state-dir", str(d / "state"), "-o", "json", "--explain", rel(ctx, pods)]
    name = slug("admit", machine.stem, "kubelet-config" if kubelet_config else "", pods.stem)
    return [(name, record(ctx, ctx.run(args), "json"))]


def check_admit_formats(ctx: Ctx) -> Checks:
    out: Checks = []
    cases = [("fig1.yaml", "fig1-pods.yaml"), ("gpu-8x-rdma.yaml", "pods/gpu-too-wide.yaml"),
             ("dual-socket-ht.yaml", "pods/mixed-qos.yaml")]
    for m, p in cases:
        if not (ctx.inputs / "examples" / m).exists() or not (ctx.inputs / "examples" / p).exists():
            continue
        for fmt in ("table", "yaml"):
            d = ctx.scratch(slug("admit-format", m, p, fmt))
            args = ["admit", "-m", f"examples/{m}", "--state-dir", str(d / "state"), "-o", fmt,
                    "--explain", f"examples/{p}"]
            out.append((slug("admit", Path(m).stem, Path(p).stem, "o", fmt),
                        record(ctx, ctx.run(args), "text")))
    # stdin, as in admit --help
    lst = ctx.inputs / "examples" / "pods" / "dual-socket-list.yaml"
    if lst.exists():
        d = ctx.scratch("admit-stdin")
        args = ["admit", "-m", "examples/dual-socket-ht.yaml", "--state-dir", str(d / "node"),
                "-o", "json", "-"]
        out.append((slug("admit", "dual-socket-ht", "stdin", "dual-socket-list"),
                    record(ctx, ctx.run(args, stdin=lst.read_text()), "json",
                           stdin=rel(ctx, lst))))
    # bad input: exit 2 and one line
    d = ctx.scratch("admit-bad")
    bad = d / "bad-pod.yaml"
    bad.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec:\n  containers:\n"
                   "    - name: c\n      resource: {limits: {cpu: '1'}}\n")
    for args, name in (
        (["admit", "-m", "examples/fig1.yaml", "-o", "json", str(bad)], "unknown-field"),
        (["admit", "-m", "examples/fig1.yaml", "-o", "json", "examples/no-such-pod.yaml"],
         "missing-pod-file"),
        (["admit", "-m", "examples/no-such-machine.yaml", "-o", "json", "examples/fig1-pods.yaml"],
         "missing-machine"),
    ):
        out.append((slug("admit", "error", name), record(ctx, ctx.run(args), "json")))
    return out


def check_admit_shared(ctx: Ctx) -> Checks:
    """The README's discovery examples, when the shared captures are there."""
    if ctx.shared is None:
        return []
    out: Checks = []
    tar = ctx.shared / "topologies" / "hwloc" / "linux" / "32intel64-2p8co2t+8ve.tar.bz2"
    pods = ctx.inputs / "examples" / "pods" / "mixed-qos.yaml"
    if tar.exists() and pods.exists():
        args = ["admit", "--sysfs-root", str(tar), "--kubelet-config",
                "examples/kubelet/config.yaml", "-o", "json", "--explain", rel(ctx, pods)]
        out.append((slug("admit", "sysfs", tar.name, "kubelet-config", pods.stem),
                    record(ctx, ctx.run(args), "json")))
        out.append((slug("discover", "sysfs", tar.name, "json"),
                    record(ctx, ctx.run(["discover", "--sysfs-root", str(tar), "-o", "json"]),
                           "json")))
    xml = ctx.shared / "topologies" / "hwloc" / "xml" / "16amd64-4distances.xml"
    if xml.exists() and pods.exists():
        args = ["admit", "--hwloc-xml", str(xml), "--kubelet-config",
                "examples/kubelet/config.yaml", "-o", "json", rel(ctx, pods)]
        out.append((slug("admit", "hwloc-xml", xml.name, "kubelet-config", pods.stem),
                    record(ctx, ctx.run(args), "json")))
    return out


def _first_pod(state: Any) -> str | None:
    if isinstance(state, dict) and isinstance(state.get("pods"), list):
        names = sorted(p["name"] for p in state["pods"] if isinstance(p, dict) and "name" in p)
        return names[0] if names else None
    return None


def admit_all(ctx: Ctx, machine: Path, state_dir: Path) -> list[dict[str, Any]]:
    """Every example pod file admitted in turn on one state directory."""
    steps = []
    for pods in example_pod_files(ctx):
        args = ["admit", "-m", rel(ctx, machine), "--state-dir", str(state_dir), "-o", "json",
                "--explain", rel(ctx, pods)]
        steps.append(record(ctx, ctx.run(args), "json"))
    return steps


def sequence(ctx: Ctx, machine: Path, state_dir: Path) -> list[dict[str, Any]]:
    """:func:`admit_all`; the first pod file again without ``-m`` (the state directory has
    the machine) and with another machine's spec; state, release of one pod (twice: the
    second time it is unknown), state again, reconcile onto the stored and the given
    machine."""
    steps = admit_all(ctx, machine, state_dir)
    pod_files = example_pod_files(ctx)
    others = [m for m in example_machines(ctx) if m != machine]
    if pod_files:
        first = rel(ctx, pod_files[0])
        steps.append(record(ctx, ctx.run(["admit", "--state-dir", str(state_dir), "-o", "json",
                                          first]), "json"))
        if others:
            steps.append(record(ctx, ctx.run(["admit", "-m", rel(ctx, others[0]), "--state-dir",
                                              str(state_dir), "-o", "json", first]), "json"))
    state = record(ctx, ctx.run(["state", "--state-dir", str(state_dir), "-o", "json"]), "json")
    steps.append(state)
    victim = _first_pod(state["stdout"]) or "default/not-admitted"
    steps.append(record(ctx, ctx.run(["release", "--state-dir", str(state_dir), victim])))
    steps.append(record(ctx, ctx.run(["release", "--state-dir", str(state_dir), victim])))
    for args in (["-o", "json"], ["-o", "table"], ["--reconcile", "-o", "json"],
                 ["--reconcile", "-m", rel(ctx, machine), "-o", "json"]):
        steps.append(record(ctx, ctx.run(["state", "--state-dir", str(state_dir), *args]),
                            "json" if "json" in args else "text"))
    return steps


def sequence_once(ctx: Ctx, machine: Path) -> tuple[Path, list[dict[str, Any]]]:
    """The state directory after :func:`sequence` and its steps (run once: the extender
    serves that state too)."""
    def make() -> tuple[Path, list[dict[str, Any]]]:
        state = ctx.scratch(slug("sequence", machine.stem)) / "state"
        return state, sequence(ctx, machine, state)

    result: tuple[Path, list[dict[str, Any]]] = ctx.once(f"sequence {machine}", make)
    return result


def check_sequence(ctx: Ctx, machine: Path) -> Checks:
    return [(slug("admit-sequence", machine.stem), {"steps": sequence_once(ctx, machine)[1]})]


def check_run_dry(ctx: Ctx) -> Checks:
    out: Checks = []
    for m, req in (("gpu-8x-rdma.yaml", ["--cpus", "8", "--gpus", "2"]),
                   ("gpu-8x-rdma.yaml", ["--cpus", "4", "--memory", "1Gi", "--device", "rdma/hca=1"]),
                   ("dual-socket-ht.yaml", ["--cpus", "6", "--memory", "4Gi"]),
                   ("fig1.yaml", ["--cpus", "2", "--device", "gpu-vendor.com/gpu=1"]),
                   ("fig1.yaml", ["--cpus", "5"])):
        if not (ctx.inputs / "examples" / m).exists():
            continue
        d = ctx.scratch(slug("run", m, *req))
        args = ["run", "-m", f"examples/{m}", "--state-dir", str(d / "runs"), *req,
                "--dry-run", "-o", "json", "--", "true"]
        out.append((slug("run", "dry-run", Path(m).stem, *req), record(ctx, ctx.run(args), "json")))
    return out


# ---------------------------------------------------------------------------- small commands


def check_help(ctx: Ctx) -> Checks:
    top = ctx.run(["--help"])
    out: Checks = [("help", record(ctx, top))]
    out.append(("version", record(ctx, ctx.run(["--version"]))))
    commands = re.findall(r"^    (\w[\w-]*)\s{2,}", top.stdout, flags=re.M)
    for c in commands:
        out.append((slug("help", c), record(ctx, ctx.run([c, "--help"]))))
    out.append((slug("help", "extender", "serve"), record(ctx, ctx.run(["extender", "serve", "--help"]))))
    out.append((slug("error", "no-command"), record(ctx, ctx.run([]))))
    out.append((slug("error", "unknown-command"), record(ctx, ctx.run(["frobnicate"]))))
    return out


def check_schema(ctx: Ctx) -> Checks:
    return [(slug("schema", s), record(ctx, ctx.run(["schema", s]), "json"))
            for s in ("machine", "merge-case")]


def check_demo(ctx: Ctx) -> Checks:
    return [("demo", record(ctx, ctx.run(["demo"])))]


def check_export(ctx: Ctx, machine: Path) -> Checks:
    out: Checks = []
    d = ctx.scratch(slug("export", machine.stem))
    for fmt in ("yaml", "json", "numatopo"):
        p = ctx.run(["export", "-m", rel(ctx, machine), "--node-name", machine.stem, "-o", fmt])
        out.append((slug("export", machine.stem, fmt), record(ctx, p, "json" if fmt == "json" else "text")))
        if p.code == 0:
            f = d / f"{machine.stem}.{fmt}"
            f.write_text(p.stdout)
            source = "--numatopo" if fmt == "numatopo" else "--nrt"
            out.append((slug("discover", source.lstrip("-"), machine.stem, fmt),
                        record(ctx, ctx.run(["discover", source, str(f), "-o", "json"]), "json")))
    return out


# ---------------------------------------------------------------------------- simulate


def strip_timings(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: strip_timings(v) for k, v in obj.items()
                if k not in SUMMARY_TIMING_KEYS and not SUMMARY_TIMING_PATTERN.search(str(k))}
    if isinstance(obj, list):
        return [strip_timings(v) for v in obj]
    return obj


def mask_table(lines: list[str]) -> list[str]:
    """The simulate table with its clock-measured columns masked (and re-spaced, since a
    masked figure's width must not move the other columns)."""
    out: list[str] = []
    header: list[str] | None = None
    for line in lines:
        if header is None and line.startswith("profile") and "scheduled" in line:
            header = re.split(r"\s{2,}", line.strip())
            out.append(" | ".join(header))
            continue
        if header is not None:
            if not line.strip() or line.startswith("columns:"):
                header = None
            elif set(line.strip()) <= {"-", " "}:
                out.append("---")
                continue
            else:
                cells = line.split()
                if len(cells) == len(header):
                    out.append(" | ".join("<time>" if TABLE_TIMING_COLUMNS.match(h) else c
                                          for h, c in zip(header, cells, strict=True)))
                    continue
        # a line reporting how long something took: its figures are clock readings
        out.append(re.sub(r"\d+(\.\d+)?\s?(s|ms|min|pods/s)\b", "<time>", line)
                   if re.search(r"\b(took|elapsed|in \d+(\.\d+)?\s?(s|ms|min))\b", line)
                   else line)
    return out


def check_simulate(ctx: Ctx, cluster: str, extra: Sequence[str] = (),
                   profiles: Sequence[str] = ALL_PROFILES) -> Checks:
    extra = list(extra)  # the name leaves out --shared DIR (where the traces are)
    named = [a for i, a in enumerate(extra) if "--shared" not in extra[max(0, i - 1):i + 1]]
    name = slug("simulate", cluster, *named,
                "" if profiles == ALL_PROFILES else "profiles-" + ",".join(profiles))
    out_dir = ctx.scratch(name) / "out"
    args = ["simulate", "--cluster", cluster, *extra, "--profiles", ",".join(profiles),
            "--quiet", "--out", str(out_dir)]
    p = ctx.run(args, timeout=1800)
    rec = record(ctx, p, "text")
    rec["stdout"] = mask_table(rec["stdout"])
    rec["files"] = sorted(f.name for f in out_dir.iterdir()) if out_dir.is_dir() else []
    summary = out_dir / "summary.json"
    rec["summary.json"] = strip_timings(json.loads(ctx.mask(summary.read_text()))) \
        if summary.exists() else None
    return [(name, rec)]


# ---------------------------------------------------------------------------- extender


def v1_pod(doc: dict[str, Any]) -> dict[str, Any]:
    """A pod manifest as kube-scheduler sends it: no TypeMeta, requests defaulted from limits
    by the API server, quantities as strings, uid and status set."""
    meta = copy.deepcopy(doc.get("metadata") or {})
    ns = meta.get("namespace") or "default"
    name = meta["name"]
    meta.update(namespace=ns, uid=f"uid-{ns}-{name}", resourceVersion="1",
                creationTimestamp="2026-01-01T00:00:00Z")
    spec = copy.deepcopy(doc.get("spec") or {})
    for c in (spec.get("initContainers") or []) + (spec.get("containers") or []):
        res = c.get("resources") or {}
        limits = {k: str(v) for k, v in (res.get("limits") or {}).items()}
        requests = {k: str(v) for k, v in (res.get("requests") or {}).items()}
        for k, v in limits.items():
            requests.setdefault(k, v)
        c["resources"] = {**({"limits": limits} if limits else {}),
                          **({"requests": requests} if requests else {})}
        c.setdefault("terminationMessagePolicy", "File")
        c.setdefault("imagePullPolicy", "IfNotPresent")
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("schedulerName", "numalign-scheduler")
    spec.setdefault("dnsPolicy", "ClusterFirst")
    return {"metadata": meta, "spec": spec, "status": {"phase": "Pending"}}


def _guaranteed(name: str, cpu: str, memory: str, annotations: dict[str, str]) -> dict[str, Any]:
    return {"kind": "Pod", "metadata": {"name": name, "annotations": annotations},
            "spec": {"containers": [{"name": "c", "image": "registry.example.com/app:1",
                                     "resources": {"limits": {"cpu": cpu, "memory": memory}}}]}}


#: after the example pods: the pod policy annotations the koordinator and volcano profiles
#: read (the examples carry none), and a Burstable pod
EXTRA_EXTENDER_PODS = [
    _guaranteed("koord-snn", "4", "8Gi", {
        "scheduling.koordinator.sh/numa-topology-spec": '{"numaTopologyPolicy":"SingleNUMANode"}',
        "scheduling.koordinator.sh/resource-spec": '{"preferredCPUBindPolicy":"SpreadByPCPUs"}'}),
    _guaranteed("koord-restricted", "40", "64Gi", {
        "scheduling.koordinator.sh/numa-topology-spec": '{"numaTopologyPolicy":"Restricted"}'}),
    _guaranteed("volcano-snn", "4", "8Gi", {"volcano.sh/numa-topology-policy": "single-numa-node"}),
    _guaranteed("volcano-best-effort", "40", "64Gi",
                {"volcano.sh/numa-topology-policy": "best-effort"}),
    {"kind": "Pod", "metadata": {"name": "burstable", "namespace": "batch"},
     "spec": {"containers": [{"name": "c", "image": "busybox", "resources": {
         "requests": {"cpu": "500m", "memory": "256Mi"}, "limits": {"cpu": "2"}}}]}},
]


def kube_node(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "uid": f"node-{name}",
                         "labels": {"kubernetes.io/hostname": name}},
            "status": {"allocatable": {"cpu": "126", "memory": "1000Gi"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def extender_setup(ctx: Ctx) -> dict[str, Any]:
    """NRT objects of every example machine, idle and loaded (the state directory at the end
    of its admit sequence), in one directory."""
    nrt = ctx.scratch("extender-nrt") / "nrt"
    nrt.mkdir()
    steps: list[dict[str, Any]] = []
    names: list[str] = []
    loaded: Checks = []
    for m in example_machines(ctx):
        for node, state in ((m.stem, None), (f"{m.stem}-loaded", sequence_once(ctx, m)[0])):
            args = ["export", "-m", rel(ctx, m), "--node-name", node, "-o", "yaml"]
            if state is not None:
                args += ["--state-dir", str(state)]
            p = ctx.run(args)
            steps.append({"command": record(ctx, p)["command"], "exit": p.code,
                          "stderr": ctx.mask(p.stderr).splitlines()})
            if state is not None:
                loaded.append((slug("export", node, "yaml"), record(ctx, p)))
            if p.code == 0:
                (nrt / f"{node}.yaml").write_text(p.stdout)
                names.append(node)
    pods = [v1_pod(doc) for f in example_pod_files(ctx) for doc in pods_of(f)]
    pods += [v1_pod(doc) for doc in EXTRA_EXTENDER_PODS]
    return {"dir": nrt, "nodes": [*names, "no-such-node"], "pods": pods, "setup": steps,
            "exports": loaded}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def http_call(port: int, method: str, path: str, body: Any = None) -> dict[str, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        data = None if body is None else body if isinstance(body, bytes) else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"} if data is not None else {}
        conn.request(method, path, body=data, headers=headers)
        r = conn.getresponse()
        raw = r.read().decode("utf-8", "replace")
        try:
            parsed: Any = json.loads(raw)
        except ValueError:
            parsed = raw.splitlines()
        return {"request": f"{method} {path}", "status": r.status, "body": parsed}
    finally:
        conn.close()


def _stop(proc: subprocess.Popen[str]) -> str:
    """SIGTERM, then SIGKILL after 10 s; then whatever the server left in its process group
    (it was started in a session of its own) is killed too."""
    how = "exited"
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        how = "SIGTERM"
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
            how = "SIGTERM, then killed after 10 s"
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    return how


def serve_extender(ctx: Ctx, profile: str, setup: dict[str, Any],
                   talk: Callable[[int], list[dict[str, Any]]]) -> dict[str, Any]:
    log_dir = ctx.scratch(slug("extender", profile))
    for attempt in range(5):
        port = free_port()
        args = ["extender", "serve", "--nrt-dir", str(setup["dir"]), "--port", str(port),
                "--assume-ttl", "600"]
        if profile != "numalign":
            args += ["--profile", profile]
        out_path, err_path = log_dir / f"stdout-{attempt}", log_dir / f"stderr-{attempt}"
        with out_path.open("w") as out_f, err_path.open("w") as err_f:
            proc = subprocess.Popen(ctx.argv(args), stdin=subprocess.DEVNULL, stdout=out_f,
                                    stderr=err_f, text=True, cwd=ctx.inputs, env=ctx.env(),
                                    start_new_session=True)
            try:
                calls, ready = _wait_ready(proc, port)
                if ready:
                    calls += talk(port)
            finally:
                how = _stop(proc)
        stderr = err_path.read_text()
        if not ready and "cannot listen" in stderr and attempt < 4:
            continue  # the free port was taken in between: another one
        shown = ["<PORT>" if i and args[i - 1] == "--port" else ctx.mask(a)
                 for i, a in enumerate(args)]

        def unport(text: str, port: int = port) -> str:
            return ctx.mask(text).replace(f":{port}", ":<PORT>")

        return {"command": "numalign " + " ".join(shown), "ready": ready,
                "exit": proc.returncode, "stopped": how,
                "calls": json.loads(unport(json.dumps(calls))),
                "stdout": unport(out_path.read_text()).splitlines(),
                "stderr": unport(stderr).splitlines()}
    raise AssertionError("unreachable")


def _wait_ready(proc: subprocess.Popen[str], port: int, seconds: float = 120.0,
                ) -> tuple[list[dict[str, Any]], bool]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return [], False
        with contextlib.suppress(OSError):
            r = http_call(port, "GET", "/readyz")
            if r["status"] == 200:
                return [r], True
        time.sleep(0.05)
    return [{"request": "GET /readyz", "status": f"not ready after {seconds:.0f} s"}], False


def extender_talk(setup: dict[str, Any]) -> Callable[[int], list[dict[str, Any]]]:
    def talk(port: int) -> list[dict[str, Any]]:
        names: list[str] = setup["nodes"]
        calls = [http_call(port, "GET", p) for p in ("/healthz", "/openapi.json")]
        for pod in setup["pods"]:
            by_names = {"Pod": pod, "Nodes": None, "NodeNames": names}
            by_list = {"Pod": pod, "NodeNames": None,
                       "Nodes": {"metadata": {"resourceVersion": "7"},
                                 "items": [kube_node(n) for n in names]}}
            f = http_call(port, "POST", "/filter", by_names)
            calls += [f, http_call(port, "POST", "/filter", by_list)]
            pr = http_call(port, "POST", "/prioritize", by_names)
            calls.append(pr)
            passed = f["body"].get("NodeNames") if isinstance(f["body"], dict) else None
            scores = {h.get("Host"): h.get("Score", 0) for h in pr["body"]
                      if isinstance(h, dict)} if isinstance(pr["body"], list) else {}
            if passed:
                best = sorted(passed, key=lambda n: (-int(scores.get(n, 0) or 0), n))[0]
                meta = pod["metadata"]
                calls.append(http_call(port, "POST", "/bind", {
                    "PodName": meta["name"], "PodNamespace": meta["namespace"],
                    "PodUID": meta["uid"], "Node": best}))
        pod0 = setup["pods"][0] if setup["pods"] else {}
        calls += [
            http_call(port, "POST", "/filter", {"Pod": "x", "NodeNames": []}),
            http_call(port, "POST", "/filter", b"{not json"),
            http_call(port, "POST", "/prioritize", {"Pod": pod0, "NodeNames": "fig1"}),
            http_call(port, "POST", "/bind", {"PodName": "p", "PodNamespace": "default",
                                              "PodUID": "u", "Node": "no-such-node"}),
            http_call(port, "GET", "/filter"),
            http_call(port, "GET", "/no-such-path"),
            http_call(port, "POST", "/numa/filter", {"Pod": pod0, "Nodes": None,
                                                     "NodeNames": names[:2]}),
        ]
        return calls

    return talk


def check_extender(ctx: Ctx, profile: str) -> Checks:
    setup = ctx.once("extender", lambda: extender_setup(ctx))
    rec = serve_extender(ctx, profile, setup, extender_talk(setup))
    rec["setup"] = setup["setup"]
    rec["nodes"] = setup["nodes"]
    out: Checks = [(slug("extender", profile), rec)]
    if profile == EXTENDER_PROFILES[0]:
        out += setup["exports"]
    return out


# ---------------------------------------------------------------------------- snapshot


@dataclass(frozen=True)
class Task:
    name: str
    cost: float  # rough seconds, to start the long ones first
    run: Callable[[Ctx], Checks]


def tasks(ctx: Ctx) -> list[Task]:
    # builtin:default in two runs that can go in parallel: koordinator alone takes about as
    # long as the other seven. Each profile's simulation is independent of the others (the
    # same summary as in one run with all eight); builtin:small covers the multi-profile run.
    rest = tuple(p for p in ALL_PROFILES if p != "koordinator")
    t = [Task("simulate builtin:default koordinator", 60,
              partial(check_simulate, cluster="builtin:default", profiles=("koordinator",))),
         Task("simulate builtin:default others", 70,
              partial(check_simulate, cluster="builtin:default", profiles=rest)),
         Task("simulate builtin:small", 12, partial(check_simulate, cluster="builtin:small"))]
    if ctx.full:
        shared = ["--shared", str(ctx.shared)] if ctx.shared is not None else []
        t.append(Task("simulate builtin:alibaba2025", 300, partial(
            check_simulate, cluster="builtin:alibaba2025",
            extra=["--workload", "alibaba2025", *shared])))
    for prof in EXTENDER_PROFILES:
        t.append(Task(f"extender {prof}", 6 if prof != "default" else 1,
                      partial(check_extender, profile=prof)))
    t += [Task("merge examples", 2, check_merge_examples),
          Task("merge kubelet tables", 1, check_merge_kubelet_tables)]
    for part in range((RANDOM_CASES + RANDOM_CHUNK - 1) // RANDOM_CHUNK):
        t.append(Task(f"merge random {part}", 3, partial(check_merge_random, part=part)))
    machines, pod_files = example_machines(ctx), example_pod_files(ctx)
    for m in machines:
        t.append(Task(f"admit sequence {m.stem}", 6, partial(check_sequence, machine=m)))
        t.append(Task(f"export {m.stem}", 2, partial(check_export, machine=m)))
        for p in pod_files:
            for kc in (False, True):
                t.append(Task(f"admit {m.stem} {p.stem}" + (" kubelet-config" if kc else ""), 1,
                              partial(check_admit, machine=m, pods=p, kubelet_config=kc)))
    t += [Task("admit formats", 5, check_admit_formats),
          Task("admit shared", 3, check_admit_shared),
          Task("run --dry-run", 2, check_run_dry),
          Task("help", 4, check_help),
          Task("schema", 1, check_schema),
          Task("demo", 1, check_demo)]
    return sorted(t, key=lambda x: -x.cost)


def write_check(out: Path, name: str, rec: Any) -> None:
    text = json.dumps(rec, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    (out / f"{name}.json").write_text(text)


def snapshot(src: Path, out: Path, *, full: bool, shared: Path | None, jobs: int,
             inputs: Path = REPO) -> int:
    src = src.resolve()
    if not (src / "numalign").is_dir():
        print(f"behaviour_snapshot: {src} has no numalign package", file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    if any(out.iterdir()):
        print(f"behaviour_snapshot: {out} is not empty", file=sys.stderr)
        return 2
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="numalign-snapshot-") as tmp:
        ctx = Ctx(src=src, inputs=inputs.resolve(), tmp=Path(tmp).resolve(),
                  shared=shared.resolve() if shared is not None else None, full=full)
        (ctx.tmp / "xdg-runtime").mkdir()
        seen: dict[str, str] = {}
        failed = 0
        with ThreadPoolExecutor(max(1, jobs)) as pool:
            futures = {pool.submit(_timed, task, ctx): task for task in tasks(ctx)}
            for fut in as_completed(futures):
                task = futures[fut]
                try:
                    checks, seconds = fut.result()
                except Exception as e:  # a broken check is reported, the others still run
                    failed += 1
                    checks, seconds = [(slug("snapshot-error", task.name),
                                        {"error": f"{type(e).__name__}: {ctx.mask(str(e))}"})], 0.0
                    print(f"behaviour_snapshot: {task.name}: {type(e).__name__}: {e}",
                          file=sys.stderr)
                for name, rec in checks:
                    if name in seen:
                        raise AssertionError(f"two checks named {name}: {seen[name]}, {task.name}")
                    seen[name] = task.name
                    write_check(out, name, rec)
                print(f"  {seconds:6.1f} s  {task.name} ({len(checks)} files)", file=sys.stderr)
    print(f"behaviour_snapshot: {len(seen)} files in {out} ({time.monotonic() - t0:.0f} s)"
          + (f", {failed} checks failed to run" if failed else ""), file=sys.stderr)
    return 1 if failed else 0


def _timed(task: Task, ctx: Ctx) -> tuple[Checks, float]:
    t0 = time.monotonic()
    checks = task.run(ctx)
    return checks, time.monotonic() - t0


# ---------------------------------------------------------------------------- compare, diff


def compare(a: Path, b: Path, show: int = 0) -> int:
    names_a = {p.name for p in a.iterdir() if p.is_file()} if a.is_dir() else set()
    names_b = {p.name for p in b.iterdir() if p.is_file()} if b.is_dir() else set()
    matched = differ = 0
    for name in sorted(names_a | names_b):
        if name not in names_a or name not in names_b:
            print(f"missing in {a if name not in names_a else b}: {name}")
            differ += 1
            continue
        da, db = (a / name).read_bytes(), (b / name).read_bytes()
        if da == db:
            matched += 1
            continue
        differ += 1
        print(f"differs: {name}")
        if show:
            lines = list(difflib.unified_diff(da.decode().splitlines(), db.decode().splitlines(),
                                              str(a / name), str(b / name), lineterm="", n=2))
            for line in lines[:show]:
                print(f"    {line}")
    if differ:
        print(f"{differ} files differ or are missing, {matched} identical")
        return 1
    print(f"{matched} files identical")
    return 0


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(REPO), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def diff(base_ref: str, *, full: bool, shared: Path | None, jobs: int, show: int,
         keep: bool) -> int:
    base_sha = git("rev-parse", "--verify", f"{base_ref}^{{commit}}")
    work = Path(tempfile.mkdtemp(prefix="numalign-snapdiff-"))
    tree = work / "base-tree"
    rc = 2
    try:
        git("worktree", "add", "--detach", str(tree), base_sha)
        t0 = time.monotonic()
        print(f"behaviour_snapshot: base {base_ref} ({base_sha[:12]}) from {tree / 'src'}",
              file=sys.stderr)
        rc_a = snapshot(tree / "src", work / "base", full=full, shared=shared, jobs=jobs)
        print(f"behaviour_snapshot: working tree {REPO / 'src'}", file=sys.stderr)
        rc_b = snapshot(REPO / "src", work / "head", full=full, shared=shared, jobs=jobs)
        rc = compare(work / "base", work / "head", show)
        if rc == 0 and (rc_a or rc_b):
            rc = 1
        print(f"behaviour_snapshot: diff took {time.monotonic() - t0:.0f} s", file=sys.stderr)
    finally:
        with contextlib.suppress(subprocess.CalledProcessError):
            git("worktree", "remove", "--force", str(tree))
        with contextlib.suppress(subprocess.CalledProcessError):
            git("worktree", "prune")
        if rc == 0 and not keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            shutil.rmtree(tree, ignore_errors=True)
            print(f"behaviour_snapshot: snapshots kept in {work / 'base'} and {work / 'head'}",
                  file=sys.stderr)
    return rc


def default_shared() -> Path | None:
    env = os.environ.get("NUMALIGN_SHARED")
    for cand in ([Path(env)] if env else []) + [REPO / "shared", REPO.parent / "shared"]:
        if cand.is_dir():
            return cand
    return None


def main(argv: Iterable[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    sub = ap.add_subparsers(dest="cmd", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--full", action="store_true", help="add the Alibaba 2025 replay (~4 min)")
    common.add_argument("--shared", type=Path, default=None,
                        help="directory holding traces/ and topologies/ (default: "
                             "$NUMALIGN_SHARED, else ./shared or ../shared)")
    common.add_argument("--jobs", type=int, default=min(4, os.cpu_count() or 2),
                        help="checks run at once (default: the CPU count, at most 4)")
    s = sub.add_parser("snapshot", parents=[common], help="snapshot one source tree")
    s.add_argument("--src", type=Path, required=True, help="source tree (PYTHONPATH), e.g. src")
    s.add_argument("--out", type=Path, required=True, help="empty or new output directory")
    c = sub.add_parser("compare", help="compare two snapshot directories byte for byte")
    c.add_argument("a", type=Path)
    c.add_argument("b", type=Path)
    c.add_argument("--show", type=int, default=0, metavar="N",
                   help="print the first N lines of a unified diff per differing file")
    d = sub.add_parser("diff", parents=[common],
                       help="snapshot BASE_REF (temporary git worktree) and this working tree, compare")
    d.add_argument("base_ref")
    d.add_argument("--show", type=int, default=20, metavar="N",
                   help="unified diff lines per differing file (default 20)")
    d.add_argument("--keep", action="store_true", help="keep the snapshots even when identical")
    a = ap.parse_args(list(argv) if argv is not None else None)
    if a.cmd == "compare":
        return compare(a.a, a.b, a.show)
    shared = a.shared if a.shared is not None else default_shared()
    if a.cmd == "snapshot":
        return snapshot(a.src, a.out, full=a.full, shared=shared, jobs=a.jobs)
    return diff(a.base_ref, full=a.full, shared=shared, jobs=a.jobs, show=a.show, keep=a.keep)


if __name__ == "__main__":
    sys.exit(main())
