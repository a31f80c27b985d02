"""The ``numalign`` command. Thin: parse arguments, call the library, print.

Every domain error (:class:`numalign.errors.NumalignError`) becomes one line on stderr and
exit status 2; admission rejections are results, not errors.
"""

from __future__ import annotations

import argparse
import sys

from numalign.errors import InputError, NumalignError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up time)
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any, TextIO

    Handler = Callable[[argparse.Namespace], int]

#: the sub-commands, as ``numalign --help`` lists them
COMMANDS = ("merge", "admit", "release", "state", "discover", "schema", "run", "ps", "simulate",
            "sweep", "export", "extender", "demo")


def _cmd_merge(args: argparse.Namespace) -> int:
    import json

    from numalign.cli.merge_case import run_case
    from numalign.inputs.documents import loads_json, read_text

    text = read_text(args.file, "merge case")
    out: TextIO = sys.stdout
    if not args.jsonl:
        result = run_case(loads_json(text, args.file))
        out.write(json.dumps(result) + "\n")
        return 0
    failed = False
    for lineno, line in enumerate(text.split("\n"), 1):  # not splitlines: U+2028 is JSON text
        if not line.strip():
            continue
        try:
            result = run_case(loads_json(line, None))
        except NumalignError as e:
            failed = True
            result = {"error": f"line {lineno}: {e.message}"}
        out.write(json.dumps(result) + "\n")
    return 2 if failed else 0


def _emit(doc: Any, fmt: str) -> None:
    if fmt == "yaml":
        from numalign.inputs.pyyaml import yaml

        sys.stdout.write(yaml.safe_dump(doc, sort_keys=False))
    else:
        import json

        sys.stdout.write(json.dumps(doc, indent=2) + "\n")


#: the default of every ``-o`` of admit, state and discover: a table for a person at a terminal,
#: JSON for a pipe or a file (said in README and in each command's help)
OUTPUT_HELP = "output format (default: table on a terminal, json otherwise)"


def _output(args: argparse.Namespace) -> str:
    fmt: str | None = args.output
    if fmt is not None:
        return fmt
    return "table" if sys.stdout.isatty() else "json"


def _state_dir(args: argparse.Namespace) -> Any:
    if not args.state_dir:
        return None
    from pathlib import Path

    return Path(args.state_dir)


def _machine_source(args: argparse.Namespace) -> Any:
    """The machine of ``admit``: a spec, a captured/live sysfs or hwloc XML, then the kubelet
    configuration on top; ``None`` = the one stored in ``--state-dir``."""
    machine = None
    if args.machine:
        from numalign.machine.spec import read_machine_file

        machine = read_machine_file(args.machine)
    elif args.sysfs_root or args.hwloc_xml:
        from numalign.machine.render import discover

        found = discover(sysfs_root=args.sysfs_root, hwloc_xml=args.hwloc_xml)
        for w in found.warnings:
            print(f"numalign {args.command}: warning: {w}", file=sys.stderr)
        machine = found.machine
    if args.kubelet_config:
        from numalign.machine.kubelet_config import (
            read_kubelet_configuration,
            with_kubelet_configuration,
        )

        if machine is None:
            raise InputError("needs a machine: --machine, --sysfs-root or --hwloc-xml",
                             "--kubelet-config")
        section = read_kubelet_configuration(args.kubelet_config)
        machine = with_kubelet_configuration(machine, section, args.kubelet_config)
    if getattr(args, "kubelet_version", None):
        machine = _with_kubelet_version(machine, args.kubelet_version)
    return machine


def _with_kubelet_version(machine: Any, text: str) -> Any:
    """``machine`` whose kubelet is ``text`` (``--kubelet-version``: wins over the spec's)."""
    from dataclasses import replace

    from numalign.machine.kubelet_version import parse_kubelet_version

    version = parse_kubelet_version(text, "--kubelet-version")
    if machine is None:
        raise InputError("needs a machine: --machine, --sysfs-root or --hwloc-xml", "--kubelet-version")
    return replace(machine, kubelet=replace(machine.kubelet, kubelet_version=version))


def _read_pods(paths: Sequence[str]) -> list[Any]:
    from numalign.pods import parse_pods, read_pod_files

    pods: list[Any] = []
    for path in paths:
        if path != "-":
            pods.extend(read_pod_files([path], require_pods=True))
            continue
        from numalign.inputs.documents import load_yaml_all, read_text

        docs = load_yaml_all(read_text("-"), "stdin")  # bounded: size, depth, encoding
        found = parse_pods(docs, "stdin")
        if not found:
            raise InputError("no pod in the input (it is empty or has only empty documents)", "stdin")
        pods.extend(found)
    return pods


def _cmd_admit(args: argparse.Namespace) -> int:
    from numalign.node.render import results_doc, results_table
    from numalign.node.session import node_session

    machine = _machine_source(args)
    pods = _read_pods(args.pods)
    with node_session(_state_dir(args), machine, kubelet_state=args.kubelet_state) as node:
        results = [node.admit(pod, explain=args.explain) for pod in pods]
    fmt = _output(args)
    if fmt == "table":
        print(results_table(results))
    else:
        _emit(results_doc(results), fmt)
    return 0 if all(r.admitted for r in results) else 1


def _pod_key(name: str) -> str:
    return name if "/" in name else f"default/{name}"


def _cmd_release(args: argparse.Namespace) -> int:
    from numalign.node.session import node_session

    missing = []
    with node_session(_state_dir(args), None) as node:
        for key in map(_pod_key, args.pods):
            if node.release(key):
                print(f"released {key}")
            else:
                missing.append(key)
    for key in missing:
        print(f"numalign release: {key}: no such pod in {args.state_dir}", file=sys.stderr)
    return 1 if missing else 0


def _cmd_state(args: argparse.Namespace) -> int:
    from numalign.node.render import state_doc, state_table
    from numalign.node.session import node_session

    if args.reconcile:
        from numalign.machine.spec import read_machine_file

        machine = read_machine_file(args.machine) if args.machine else None
        with node_session(_state_dir(args), machine, reconcile=True) as node:
            for note in node.notes:
                print(f"numalign state: {note}", file=sys.stderr)
    elif args.machine:
        raise InputError("only with --reconcile", "--machine")
    with node_session(_state_dir(args), None, write=False) as node:
        fmt = _output(args)
        if fmt == "table":
            print(state_table(node))
        else:
            _emit(state_doc(node), fmt)
    return 0


def _cmd_discover(args: argparse.Namespace) -> int:
    from numalign.machine.render import discover, render_discovery

    found = discover(sysfs_root=args.sysfs_root, hwloc_xml=args.hwloc_xml,
                     hwloc_synthetic=args.hwloc_synthetic, nrt=args.nrt, numatopo=args.numatopo,
                     device_rules=args.device_rules)
    for w in found.warnings:
        print(f"numalign discover: warning: {w}", file=sys.stderr)
    if args.verbose:
        for note in found.notes:
            print(f"numalign discover: {note}", file=sys.stderr)
    sys.stdout.write(render_discovery(found, _output(args)))
    return 0


def _cmd_schema(args: argparse.Namespace) -> int:
    from numalign.cli.schemas import schema_text

    sys.stdout.write(schema_text(args.format))
    return 0


def _cmd_simulate(args: argparse.Namespace) -> int:
    from pathlib import Path

    from numalign.sim.cli_run import run_simulation

    return run_simulation(
        cluster=args.cluster, workload=args.workload, profiles=args.profiles.split(","),
        seed=args.seed, out=Path(args.out), recreate=args.recreate, quiet=args.quiet,
        shared=args.shared,
    )


def _cmd_sweep(args: argparse.Namespace) -> int:
    from numalign.sim.sweep.command import run_sweep

    return run_sweep(
        path=args.file, out=args.out, scheduler=args.scheduler, workers=args.workers,
        retries=args.retries, connect_timeout=args.connect_timeout, shared=args.shared,
        only=args.only, quiet=args.quiet, dry_run=args.dry_run,
    )


def _cmd_demo(args: argparse.Namespace) -> int:
    from numalign.cli.demo import walkthrough

    print(walkthrough())
    return 0


def version() -> str:
    """The installed distribution's version, else the package's own."""
    from importlib import metadata

    try:
        return metadata.version("numalign")
    except metadata.PackageNotFoundError:
        from numalign import __version__

        return __version__


class _VersionAction(argparse.Action):
    """``--version``: the version is looked up only when asked for (importlib.metadata is slow
    to import, and every other command would pay for it)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS,
                 default: str = argparse.SUPPRESS, help: str | None = None) -> None:
        super().__init__(option_strings=option_strings, dest=dest, default=default, nargs=0,
                         help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        sys.stdout.write(f"{parser.prog} {version()}\n")
        parser.exit()


def build_parser(command: str | None = None, *, documented: bool = True) -> argparse.ArgumentParser:
    """The ``numalign`` parser. With ``command`` (one of :data:`COMMANDS`), that command's
    sub-parser only: :func:`main` parses one command line, and building every command's
    parser (and importing the modules that define them) would be start-up time for nothing.
    ``documented``: the sub-commands' descriptions, examples and flag help
    (:mod:`numalign.cli.help`) are attached now; otherwise when a help page is first formatted."""
    from numalign.cli.argparser import StrictParser

    def wanted(*names: str) -> bool:
        return command is None or command in names

    parser = StrictParser(
        prog="numalign",
        description="Kubelet-exact NUMA alignment, for nodes, clusters and processes.",
        epilog="`numalign COMMAND --help` shows a command's options and examples.",
    )
    parser.add_argument("--version", action=_VersionAction,
                        help="print the version and exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    if wanted("merge"):
        p = sub.add_parser("merge", help="merge topology hints under a policy (JSON case in, JSON out)")
        p.add_argument("file", nargs="?", default="-", help="case file (default: stdin)")
        p.add_argument("--jsonl", action="store_true", help="one case per line in, one result per line out")
        p.set_defaults(handler=_cmd_merge)

    if wanted("admit"):
        p = sub.add_parser("admit", help="admit pods on a machine as the kubelet would (all-or-nothing)")
        p.add_argument("pods", nargs="+", metavar="POD.yaml",
                       help="pod manifests (YAML/JSON, multi-document or List); - reads stdin")
        machine = p.add_mutually_exclusive_group()
        machine.add_argument("--machine", "-m", metavar="SPEC",
                             help="machine spec (YAML/JSON); optional when --state-dir has one")
        machine.add_argument("--sysfs-root", metavar="DIR|TARBALL",
                             help="discover the machine from a captured /sys (or / for this one)")
        machine.add_argument("--hwloc-xml", metavar="FILE",
                             help="discover the machine from hwloc XML (lstopo --of xml)")
        p.add_argument("--kubelet-config", metavar="FILE",
                       help="KubeletConfiguration YAML (kubelet.config.k8s.io/v1beta1): its policies, "
                            "reservations and feature gates replace the machine's kubelet section")
        p.add_argument("--kubelet-version", metavar="VERSION",
                       help="the node's kubelet release, e.g. v1.33.4 (wins over the spec's "
                            "kubeletVersion; default: the newest release numalign models)")
        p.add_argument("--state-dir", metavar="DIR", help="keep admitted pods allocated here across invocations")
        p.add_argument("-o", "--output", choices=["json", "yaml", "table"], help=OUTPUT_HELP)
        p.add_argument("--explain", action="store_true",
                       help="add each provider's hints and the merged hint (a summary with -o table)")
        p.add_argument("--kubelet-state", metavar="DIR",
                       help="start from the kubelet's cpu_manager_state / memory_manager_state in DIR")
        p.set_defaults(handler=_cmd_admit)

    if wanted("release"):
        p = sub.add_parser("release", help="free the resources of admitted pods")
        p.add_argument("pods", nargs="+", metavar="[NAMESPACE/]NAME",
                       help="pods to release (namespace default when not given)")
        p.add_argument("--state-dir", metavar="DIR", required=True, help="the state directory of admit")
        p.set_defaults(handler=_cmd_release)

    if wanted("state"):
        p = sub.add_parser("state", help="show a node's allocations per NUMA node")
        p.add_argument("--state-dir", metavar="DIR", required=True, help="the state directory of admit")
        p.add_argument("--reconcile", action="store_true",
                       help="move the state onto the machine as it is now (--machine, default: the stored "
                            "spec): keep every pod whose CPUs, devices and memory still exist and fit, drop the rest")
        p.add_argument("--machine", "-m", metavar="SPEC",
                       help="with --reconcile: the machine spec to move the state onto")
        p.add_argument("-o", "--output", choices=["json", "yaml", "table"], help=OUTPUT_HELP)
        p.set_defaults(handler=_cmd_state)

    if wanted("discover"):
        p = sub.add_parser("discover", help="discover a machine (live sysfs, capture, hwloc XML, NRT)")
        src = p.add_mutually_exclusive_group()
        src.add_argument("--sysfs-root", metavar="DIR|TARBALL", help="captured root (default: live /)")
        src.add_argument("--hwloc-xml", metavar="FILE", help="hwloc XML topology (lstopo --of xml)")
        src.add_argument("--hwloc-synthetic", metavar="DESC", help='e.g. "pack:2 numa:2 core:8 pu:2" (needs lstopo)')
        src.add_argument("--nrt", metavar="FILE", help="NodeResourceTopology (topology.node.k8s.io/v1alpha2)")
        src.add_argument("--numatopo", metavar="FILE", help="Volcano Numatopology (nodeinfo.volcano.sh/v1alpha1)")
        p.add_argument("-o", "--output", choices=["yaml", "json", "table", "nrt"],
                       help="machine spec as yaml or json, a numactl -H style table, or an NRT object "
                            "(default: table on a terminal, json otherwise)")
        p.add_argument("--device-rules", metavar="FILE", help="YAML rules naming PCI devices as resources")
        p.add_argument("-v", "--verbose", action="store_true",
                       help="say on stderr what discovery found besides warnings (on the live host: "
                            "the kubelet version `kubelet --version` printed, or why none)")
        p.set_defaults(handler=_cmd_discover)

    if wanted("schema"):
        p = sub.add_parser("schema", help="print the JSON Schema of the machine spec or the merge case")
        p.add_argument("format", choices=["machine", "merge-case"], help="which input format")
        p.set_defaults(handler=_cmd_schema)

    if wanted("run", "ps"):
        from numalign.launcher.cli import add_commands as add_launcher_commands

        add_launcher_commands(sub)  # run, ps

    if wanted("simulate"):
        p = sub.add_parser("simulate", help="replay a workload on a modelled cluster under several schedulers")
        p.add_argument("--cluster", help="cluster template YAML, or builtin:default|small|alibaba2025 (default: builtin:default)")
        p.add_argument("--workload", help="synthetic[:count=N,...] | alibaba2025[:PATH][?limit=N] | alibaba2023[...] | dir:PATH (default: synthetic)")
        p.add_argument("--profiles", default="default,nrt-snn,volcano,numalign", help="comma-separated: default, nrt-snn, nrt-snn-least-numa, nrt-snn-most-allocated, "
                       "nrt-snn-balanced, volcano[:weight=N], koordinator, numalign")
        p.add_argument("--seed", type=int, default=1, help="seed of the synthetic generator")
        p.add_argument("--out", default="out/sim", help="directory for summary.json and report.html")
        p.add_argument("--recreate", action="store_true", help="a ReplicaSet recreates pods the node rejected")
        p.add_argument("--shared", help="directory holding traces/ (default: $NUMALIGN_SHARED, else ./shared or ../shared)")
        p.add_argument("--quiet", action="store_true", help="no progress output (a bar on a terminal, else one line per profile)")
        p.set_defaults(handler=_cmd_simulate)

    if wanted("sweep"):
        p = sub.add_parser("sweep", help="run a grid of simulations on Dask (one machine or a cluster), resumable")
        p.add_argument("file", metavar="SWEEP.yaml", help="the sweep file: axes, pod limit, report layout (docs/sweeps.md)")
        p.add_argument("--out", help="output directory: cells/, sweep.json, sweep.csv, report.html (default: out/sweep/NAME)")
        p.add_argument("--scheduler", metavar="ADDRESS",
                       help="an existing Dask scheduler, tcp://HOST:PORT (default: $DASK_SCHEDULER_ADDRESS, "
                            "else a LocalCluster on this machine)")
        p.add_argument("--workers", type=int, metavar="N", help="LocalCluster worker processes (default: one per core)")
        p.add_argument("--retries", type=int, default=1, metavar="N",
                       help="runs again a cell that raised, N times (default 1); a cell whose worker died is "
                            "rerun by Dask itself")
        p.add_argument("--connect-timeout", type=float, default=10.0, metavar="S",
                       help="seconds to reach the scheduler and see a worker (default 10)")
        p.add_argument("--only", action="append", default=[], metavar="AXIS=VALUE",
                       help="run only the cells with this value (repeatable; values of one axis are alternatives)")
        p.add_argument("--shared", help="directory holding traces/ (default: $NUMALIGN_SHARED, else ./shared or ../shared)")
        p.add_argument("--dry-run", action="store_true", help="list the cells (and which are done) without running any")
        p.add_argument("--quiet", action="store_true", help="no progress on stderr")
        p.set_defaults(handler=_cmd_sweep)

    if wanted("export", "extender"):
        from numalign.kube.cli import add_commands as add_kube_commands

        add_kube_commands(sub)  # export, extender

    if wanted("demo"):
        p = sub.add_parser("demo", help="walk through the Topology Manager blog's example")
        p.set_defaults(handler=_cmd_demo)

    if documented:
        from numalign.cli.help import document

        document(parser)
    else:
        _document_later(parser)
    return parser


def _document_later(parser: argparse.ArgumentParser, prefix: str = "") -> None:
    """Give every sub-command of ``parser`` its description, examples and flag help
    (:func:`numalign.cli.help.document_page`) when its help is first formatted: a command
    line that prints no help never loads them."""
    from numalign.cli.argparser import StrictParser, subparsers

    for name, sub in subparsers(parser).items():
        path = f"{prefix} {name}".strip()
        if isinstance(sub, StrictParser):
            sub.before_help = lambda p, path=path: _document_page(p, path)
        _document_later(sub, path)


def _document_page(parser: argparse.ArgumentParser, path: str) -> None:
    from numalign.cli.help import document_page

    document_page(parser, path)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # a command line naming a command needs that command's parser only
    parser = build_parser(argv[0] if argv and argv[0] in COMMANDS else None, documented=False)
    args = parser.parse_args(argv)
    handler: Handler = args.handler
    try:
        return handler(args)
    except NumalignError as e:
        print(f"numalign {args.command}: error: {e.message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # e.g. `numalign ... | head`
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())
