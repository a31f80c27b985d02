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


if __name__ == "__main__":
    sys.exit(main())
