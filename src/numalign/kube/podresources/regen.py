"""Regenerate ``api_pb2.py`` / ``api_pb2.pyi`` from ``api.proto`` (needs ``grpcio-tools``).

``python -m numalign.kube.podresources.regen`` (or ``--check``: exit 1 if the committed files
differ from what protoc produces now).

Why the generated modules are committed rather than built at install time: ``grpcio-tools``
(protoc) is a large native build dependency that a node agent does not need at run time, and
numalign's wheel is pure Python. Only the *messages* are generated; the three RPCs are wired by
hand in :mod:`numalign.kube.podresources.client` (method paths ``/v1.PodResourcesLister/*``),
so the code does not pin a grpcio version the way ``*_pb2_grpc.py`` would. The proto is
compiled as ``numalign/kube/podresources/api.proto`` so its descriptor never collides with
another package's ``api.proto`` in protobuf's global pool.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SRC = HERE.parents[2]  # .../src
PROTO = "numalign/kube/podresources/api.proto"
OUTPUTS = ("api_pb2.py", "api_pb2.pyi")


def generate(out_root: Path) -> None:
    import importlib

    protoc: Any = importlib.import_module("grpc_tools.protoc")
    rc = protoc.main(["protoc", f"-I{SRC}", f"--python_out={out_root}", f"--pyi_out={out_root}",
                      str(SRC / PROTO)])
    if rc != 0:
        raise SystemExit(f"protoc failed ({rc})")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if "--check" in args:
        with tempfile.TemporaryDirectory() as tmp:
            generate(Path(tmp))
            gen = Path(tmp) / "numalign" / "kube" / "podresources"
            stale = [n for n in OUTPUTS if (gen / n).read_bytes() != (HERE / n).read_bytes()]
        if stale:
            print(f"stale generated files: {', '.join(stale)}", file=sys.stderr)
            return 1
        return 0
    generate(SRC)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
