"""The ``numalign`` command. Thin: parse arguments, call the library, print.

Every domain error (:class:`numalign.errors.NumalignError`) becomes one line on stderr and
exit status 2; admission rejections are results, not errors.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from numalign.errors import InputError, NumalignError

Handler = Callable[[argparse.Namespace], int]


def _read_text(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        raise InputError(e.strerror or str(e), path) from None


def _load_json(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"malformed JSON: {e.msg} at line {e.lineno} column {e.colno}", where) from None


def _cmd_merge(args: argparse.Namespace) -> int:
    from numalign.merge_case import run_case

    text = _read_text(args.file)
    out: TextIO = sys.stdout
    if not args.jsonl:
        result = run_case(_load_json(text, args.file))
        out.write(json.dumps(result) + "\n")
        return 0
    failed = False
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            result = run_case(_load_json(line, f"line {lineno}"))
        except NumalignError as e:
            failed = True
            result = {"error": f"line {lineno}: {e.message}"}
        out.write(json.dumps(result) + "\n")
    return 2 if failed else 0


def _emit(doc: Any, fmt: str) -> None:
    if fmt == "yaml":
        import yaml

        sys.stdout.write(yaml.safe_dump(doc, sort_keys=False))
    else:
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")


def _state_dir(args: argparse.Namespace) -> Any:
    from pathlib import Path

    return Path(args.state_dir) if args.state_dir else None


def _cmd_admit(args: argparse.Namespace) -> int:
    from numalign.machine.spec import read_machine_file
    from numalign.node.render import results_doc, results_table
    from numalign.node.session import node_session
    from numalign.pods import read_pod_files

    machine = read_machine_file(args.machine) if args.machine else None
    pods = read_pod_files(args.pods)
    with node_session(_state_dir(args), machine, kubelet_state=args.kubelet_state) as node:
        results = [node.admit(pod, explain=args.explain) for pod in pods]
    if args.output == "table":
        print(results_table(results))
    else:
        _emit(results_doc(results), args.output)
    return 0 if all(r.admitted for r in results) else 1


def _cmd_release(args: argparse.Namespace) -> int:
    from numalign.node.session import node_session

    missing = []
    with node_session(_state_dir(args), None) as node:
        for key in args.pods:
            if not node.release(key):
                missing.append(key)
    if missing:
        raise InputError(f"no such pod in {args.state_dir}: {', '.join(missing)}")
    return 0


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
        if args.output == "table":
            print(state_table(node))
        else:
            _emit(state_doc(node), args.output)
    return 0


def _cmd_discover(args: argparse.Namespace) -> int:
    from numalign.machine.render import discover, render_discovery

    found = discover(sysfs_root=args.sysfs_root, hwloc_xml=args.hwloc_xml,
                     hwloc_synthetic=args.hwloc_synthetic, nrt=args.nrt, numatopo=args.numatopo,
                     device_rules=args.device_rules)
    for w in found.warnings:
        print(f"numalign discover: warning: {w}", file=sys.stderr)
    sys.stdout.write(render_discovery(found, args.output))
    return 0


def _cmd_simulate(args: argparse.Namespace) -> int:
    from pathlib import Path

    from numalign.sim.cli_run import run_simulation

    return run_simulation(
        cluster=args.cluster, workload=args.workload, profiles=args.profiles.split(","),
        seed=args.seed, out=Path(args.out), recreate=args.recreate, quiet=args.quiet,
        shared=args.shared,
    )


def _cmd_demo(args: argparse.Namespace) -> int:
    from numalign.demo import walkthrough

    print(walkthrough())
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="numalign", description="Kubelet-exact NUMA alignment, for nodes, clusters and processes."
    )
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("merge", help="merge topology hints under a policy (JSON case in, JSON out)")
    p.add_argument("file", nargs="?", default="-", help="case file (default: stdin)")
    p.add_argument("--jsonl", action="store_true", help="one case per line in, one result per line out")
    p.set_defaults(handler=_cmd_merge)

    p = sub.add_parser("admit", help="admit pods on a machine as the kubelet would (all-or-nothing)")
    p.add_argument("pods", nargs="+", metavar="POD.yaml", help="pod manifests (YAML/JSON, multi-document or List)")
    p.add_argument("--machine", "-m", help="machine spec (YAML/JSON); optional when --state-dir has one")
    p.add_argument("--state-dir", help="keep admitted pods allocated here across invocations")
    p.add_argument("-o", "--output", choices=["json", "yaml", "table"], default="json")
    p.add_argument("--explain", action="store_true", help="add each provider's hints and the merged hint")
    p.add_argument("--kubelet-state", metavar="DIR",
                   help="start from the kubelet's cpu_manager_state / memory_manager_state in DIR")
    p.set_defaults(handler=_cmd_admit)

    p = sub.add_parser("release", help="free the resources of admitted pods")
    p.add_argument("pods", nargs="+", metavar="NAMESPACE/NAME")
    p.add_argument("--state-dir", required=True)
    p.set_defaults(handler=_cmd_release)

    p = sub.add_parser("state", help="show a node's allocations per NUMA node")
    p.add_argument("--state-dir", required=True)
    p.add_argument("--reconcile", action="store_true",
                   help="move the state onto the machine as it is now (--machine, default: the stored "
                        "spec): keep every pod whose CPUs, devices and memory still exist and fit, drop the rest")
    p.add_argument("--machine", "-m", help="with --reconcile: the machine spec to move the state onto")
    p.add_argument("-o", "--output", choices=["json", "yaml", "table"], default="table")
    p.set_defaults(handler=_cmd_state)

    p = sub.add_parser("discover", help="discover a machine (live sysfs, capture, hwloc XML, NRT)")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--sysfs-root", metavar="DIR|TARBALL", help="captured root (default: live /)")
    src.add_argument("--hwloc-xml", metavar="FILE", help="hwloc XML topology (lstopo --of xml)")
    src.add_argument("--hwloc-synthetic", metavar="DESC", help='e.g. "pack:2 numa:2 core:8 pu:2" (needs lstopo)')
    src.add_argument("--nrt", metavar="FILE", help="NodeResourceTopology (topology.node.k8s.io/v1alpha2)")
    src.add_argument("--numatopo", metavar="FILE", help="Volcano Numatopology (nodeinfo.volcano.sh/v1alpha1)")
    p.add_argument("-o", "--output", choices=["yaml", "json", "table", "nrt"], default="yaml")
    p.add_argument("--device-rules", metavar="FILE", help="YAML rules naming PCI devices as resources")
    p.set_defaults(handler=_cmd_discover)

    from numalign.launcher.cli import add_commands as add_launcher_commands

    add_launcher_commands(sub)  # run, ps

    p = sub.add_parser("simulate", help="replay a workload on a modelled cluster under several schedulers")
    p.add_argument("--cluster", help="cluster template YAML, or builtin:default|small|alibaba2025 (default: builtin:default)")
    p.add_argument("--workload", help="synthetic[:count=N,...] | alibaba2025[:PATH][?limit=N] | alibaba2023[...] | dir:PATH (default: synthetic)")
    p.add_argument("--profiles", default="default,nrt-snn,volcano,numalign", help="comma-separated: default, nrt-snn, nrt-snn-least-numa, nrt-snn-most-allocated, "
                   "nrt-snn-balanced, volcano[:weight=N], koordinator, numalign")
    p.add_argument("--seed", type=int, default=1, help="seed of the synthetic generator")
    p.add_argument("--out", default="out/sim", help="directory for summary.json and report.html")
    p.add_argument("--recreate", action="store_true", help="a ReplicaSet recreates pods the node rejected")
    p.add_argument("--shared", help="directory holding traces/ (default: $NUMALIGN_SHARED, else ./shared or ../shared)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(handler=_cmd_simulate)

    from numalign.kube.cli import add_commands as add_kube_commands

    add_kube_commands(sub)  # export, extender

    p = sub.add_parser("demo", help="walk through the Topology Manager blog's example")
    p.set_defaults(handler=_cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
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
