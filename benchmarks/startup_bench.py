"""Start-up time of the ``numalign`` command: one ``admit`` of one pod, and ``--help`` pages.

Every command runs in a fresh process, as a user runs it (the ``numalign`` console script
beside this interpreter, else ``python -m numalign``), with the package's bytecode compiled
first (``compileall``: a fresh checkout pays for compiling once, not per command). Each is run
:data:`RUNS` times, the commands interleaved round by round so that a change of load on a
shared machine hits them alike; printed: wall and CPU milliseconds (the child's user + system
time, ``RUSAGE_CHILDREN``), best and median, and the ratio of the CPU medians to the references
measured in the same run: ``python -c pass`` (the interpreter alone) and ``python -c "import
numalign"`` (CPU time: on a loaded machine a process's wall time is mostly waiting for a core).

Targets (issue 26): one ``admit`` < 120 ms wall and any ``--help`` < 60 ms wall on a quiet
machine. On a loaded one wall time stretches; the ratios to ``python -c pass`` carry over
(``python -c pass`` takes about 10-20 ms on a current x86 core).

The floor under ``admit``, measured in the same rounds: importing the libraries it loads
without numalign's own modules - ``argparse``; ``+ yaml`` (imported as numalign imports it,
through ``numalign.inputs.pyyaml``: besides PyYAML it loads only the root package's lazy
``__init__`` and the ``inputs`` package marker); ``+ json``; then every module outside numalign
that a plain ``admit`` loads (found by running it once, so the row follows the code) - and
importing numalign's modules that ``admit`` loads, without doing anything. Printed below the
table: ``admit``'s median CPU split into the interpreter, the other libraries, numalign's own
modules (class creation included) and the work itself, with the number of numalign's classes
on the path that are records (``numalign/record.py``: plain slotted classes, their methods in
the ``.pyc``) and that are dataclasses (each generates and compiles its methods when its module
is imported: the path has none, ``docs/architecture.md``). When valgrind is installed, the same
split in instructions (callgrind, one run each: a count that a loaded machine does not
inflate), with the instructions spent compiling source text at run time (generated methods).
"""

from __future__ import annotations

import compileall
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
RUNS = 10

HELP_COMMANDS = ("merge", "admit", "release", "state", "discover", "schema", "run", "ps",
                 "simulate", "sweep", "export", "extender serve", "demo")


def numalign_command() -> list[str]:
    script = Path(sys.executable).with_name("numalign")
    return [str(script)] if script.exists() else [sys.executable, "-m", "numalign"]


ADMIT_ARGS = ["admit", "-m", str(EXAMPLES / "fig1.yaml"), str(EXAMPLES / "fig1-pods.yaml"), "-o", "json"]

#: runs ``numalign ARGV`` (output discarded) and, at exit, prints on stderr what it loaded: the
#: modules outside numalign (top-level names that have a spec, so that ``import`` takes them),
#: numalign's modules, and how many of numalign's classes are records and dataclasses (found
#: without importing either module: a record has ``__record_fields__``, a dataclass
#: ``__dataclass_fields__``). Nothing is imported before the command runs (``atexit`` and
#: ``sys`` are built in).
PROBE = """
import atexit, sys
before = set(sys.modules)
def report():
    new = sorted(set(sys.modules) - before)
    import json
    own = [m for m in new if m.split(".")[0] == "numalign"]
    other = [m for m in new if m.split(".")[0] != "numalign" and "." not in m and not m.startswith("_")
             and getattr(sys.modules[m], "__spec__", None) is not None]
    classes = [v for m in own for v in vars(sys.modules[m]).values()
               if isinstance(v, type) and v.__module__ == m]
    count = lambda attr: sum(1 for c in classes if vars(c).get(attr))  # not the base Record
    print(json.dumps({"own": own, "other": other, "dataclasses": count("__dataclass_fields__"),
                      "records": count("__record_fields__")}), file=sys.stderr)
atexit.register(report)
from numalign.cli import main
main(sys.argv[1:])
"""


class Loaded(NamedTuple):
    """What a plain ``admit`` loads (:data:`PROBE`)."""

    own: list[str]  # numalign's modules
    other: list[str]  # the other top-level modules
    dataclasses: int  # numalign's dataclasses among them
    records: int  # numalign's record classes among them


def admit_imports(env: dict[str, str]) -> Loaded:
    proc = subprocess.run([sys.executable, "-c", PROBE, *ADMIT_ARGS], stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT, check=True)
    found = json.loads(proc.stderr.splitlines()[-1])
    return Loaded(list(found["own"]), list(found["other"]), int(found["dataclasses"]),
                  int(found["records"]))


#: PyYAML imported as numalign imports it (``numalign/inputs/pyyaml.py``: its patterns compiled
#: on first use), so that the floor rows price what ``admit`` loads
YAML = "import numalign.inputs.pyyaml"


def cases(state_dir: str, loaded: Loaded) -> list[tuple[str, list[str]]]:
    py, na = [sys.executable], numalign_command()
    admit = [*na, *ADMIT_ARGS]
    other, own = loaded.other, loaded.own
    out = [
        ("python -c pass", [*py, "-c", "pass"]),
        ('python -c "import numalign"', [*py, "-c", "import numalign"]),
        ("import argparse", [*py, "-c", "import argparse"]),
        ("import argparse, yaml", [*py, "-c", f"import argparse; {YAML}"]),
        ("+ json", [*py, "-c", f"import argparse, json; {YAML}"]),
        (f"admit's {len(other)} libraries", [*py, "-c", f"{YAML}; import " + ", ".join(other)]),
        (f"admit's {len(own)} numalign mods", [*py, "-c", "import " + ", ".join(own)]),
        ("admit, one pod", admit),
        ("admit, one pod, --state-dir", [*admit, "--state-dir", state_dir]),
        ("numalign --help", [*na, "--help"]),
    ]
    out += [(f"{c} --help", [*na, *c.split(), "--help"]) for c in HELP_COMMANDS]
    return out


def run_once(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall s, CPU s) of one run of ``argv``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=ROOT,
                          check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: exit {proc.returncode}: {proc.stderr.decode()[-500:]}")
    return wall, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


#: the floor rows and ``admit``, counted in instructions as well
FLOOR = ("python -c pass", "import argparse", "import argparse, yaml", "+ json")


def _as_file(argv: list[str], tmp: Path, k: int) -> list[str]:
    """``python -c CODE`` as ``python FILE``: ``-c`` itself runs through ``PyRun_StringFlags``."""
    if len(argv) == 3 and argv[1] == "-c":
        path = tmp / f"row{k}.py"
        path.write_text(argv[2] + "\n")
        return [argv[0], str(path)]
    return argv


def callgrind(argv: list[str], env: dict[str, str], toggle: str | None = None) -> int:
    """Instructions ``argv`` executes (valgrind's callgrind); with ``toggle``, only those inside
    that C function."""
    opts = ["--tool=callgrind", "--callgrind-out-file=/dev/null"]
    if toggle:
        opts.append(f"--toggle-collect={toggle}")
    proc = subprocess.run(["valgrind", *opts, *argv], stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT, check=True)
    for line in proc.stderr.splitlines():
        if "Collected :" in line:
            return int(line.rsplit(":", 1)[1])
    raise RuntimeError(f"no instruction count from valgrind: {proc.stderr[-500:]}")


def print_instructions(table: list[tuple[str, list[str]]], env: dict[str, str]) -> None:
    """The floor rows, admit's libraries and numalign modules, and ``admit`` in instructions
    (one run each: the count does not depend on the machine's load, unlike time), and how many
    of them compile source text at run time (``PyRun_StringFlags``: the methods dataclasses and
    namedtuples generate). Skipped without valgrind."""
    if shutil.which("valgrind") is None:
        print("  (valgrind not found: no instruction counts)")
        return
    rows = dict(table)
    names = [*FLOOR, table[5][0], table[6][0], "admit, one pod"]
    with tempfile.TemporaryDirectory(prefix="numalign-startup-") as tmp:
        argvs = {n: _as_file(rows[n], Path(tmp), k) for k, n in enumerate(names)}
        ins = {n: callgrind(argvs[n], env) / 1e6 for n in names}
        text = {n: callgrind(argvs[n], env, "PyRun_StringFlags") / 1e6 for n in names[-3:]}
    print("  instructions (valgrind callgrind, one run each), millions; compiled at run time:")
    for n in names:
        compiled = f"   {text[n]:7.1f}" if n in text else ""
        print(f"  {n:<30} {ins[n]:9.1f}{compiled}")
    libs, own, admit = names[-3:]
    print(f"  admit, {ins[admit]:.1f} M = the interpreter {ins[FLOOR[0]]:.1f} + argparse "
          f"{ins[FLOOR[1]] - ins[FLOOR[0]]:.1f} + yaml {ins[FLOOR[2]] - ins[FLOOR[1]]:.1f}"
          f" + json {ins[FLOOR[3]] - ins[FLOOR[2]]:.1f}"
          f" + its other libraries {ins[libs] - ins[FLOOR[3]]:.1f} + numalign's modules "
          f"{ins[own] - ins[libs]:.1f} (compiling generated methods: {text[own] - text[libs]:.1f})"
          f" + the work {ins[admit] - ins[own]:.1f}")


def main() -> None:
    compileall.compile_dir(ROOT / "src" / "numalign", quiet=1)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "src"), env.get("PYTHONPATH", "")) if p)
    state = tempfile.mkdtemp(prefix="numalign-startup-")
    loaded = admit_imports(env)
    try:
        table = cases(state, loaded)
        walls: dict[str, list[float]] = {name: [] for name, _ in table}
        cpus: dict[str, list[float]] = {name: [] for name, _ in table}
        for _name, argv in table:  # warm-up: the file cache, and the state directory's first write
            run_once(argv, env)
        for _ in range(RUNS):
            for name, argv in table:
                if name.endswith("--state-dir"):  # the same pod again: release it first
                    shutil.rmtree(state)
                    os.mkdir(state)
                wall, cpu = run_once(argv, env)
                walls[name].append(wall)
                cpus[name].append(cpu)
    finally:
        shutil.rmtree(state, ignore_errors=True)
    ref_pass = statistics.median(cpus["python -c pass"])
    ref_import = statistics.median(cpus['python -c "import numalign"'])
    print(f"start-up: ms per command, best / median of {RUNS} (interleaved); wall clock and CPU "
          "(user + system); ratios of the median CPU to the references of this run")
    print(f"  {'command':<30} {'wall best':>9} {'median':>7} {'CPU best':>9} {'median':>7} "
          f"{'x pass':>7} {'x import':>8}")
    for name, _ in table:
        w, c = walls[name], cpus[name]
        med = statistics.median(c)
        print(f"  {name:<30} {min(w) * 1e3:>9.1f} {statistics.median(w) * 1e3:>7.1f} {min(c) * 1e3:>9.1f} "
              f"{med * 1e3:>7.1f} {med / ref_pass:>7.2f} {med / ref_import:>8.2f}")
    mid = {name: statistics.median(cpus[name]) * 1e3 for name, _ in table}
    libs, own = table[5][0], table[6][0]
    print(f"  admit's median CPU, {mid['admit, one pod']:.1f} ms = the interpreter "
          f"{mid['python -c pass']:.1f} + argparse {mid['import argparse'] - mid['python -c pass']:.1f}"
          f" + yaml {mid['import argparse, yaml'] - mid['import argparse']:.1f}"
          f" + json {mid['+ json'] - mid['import argparse, yaml']:.1f}"
          f" + its other libraries {mid[libs] - mid['+ json']:.1f}"
          f" + numalign's modules {mid[own] - mid[libs]:.1f} ({loaded.records} records,"
          f" {loaded.dataclasses} dataclasses)"
          f" + the work {mid['admit, one pod'] - mid[own]:.1f}")
    helps = [n for n, _ in table if n.endswith("--help")]
    worst = max(helps, key=lambda n: statistics.median(cpus[n]))
    print(f"  slowest --help: {worst} ({statistics.median(cpus[worst]) * 1e3:.1f} ms median CPU, "
          f"{statistics.median(walls[worst]) * 1e3:.1f} ms median wall); targets on a quiet machine: "
          "admit < 120 ms, --help < 60 ms wall")
    print_instructions(table, env)


if __name__ == "__main__":
    main()
