"""Help texts of the ``numalign`` command: a description and examples for every sub-command,
and help for the flags that the sub-commands' own modules leave without one.

Data only. :func:`document` attaches it to a built parser. Every example runs from the root of
a fresh clone: the files it reads are under ``examples/`` (real machines in
``examples/captures/``), ``/tmp/numalign-demo`` is a scratch directory the examples share, and
an example that reads what another one wrote names it in ``after``. An example that cannot run
there says what it needs (a live cluster), as a comment on its line. ``tests/test_cli_examples.py``
runs them all from a copy of the repository's tracked files.
"""

from __future__ import annotations

import argparse

from numalign.cli.argparser import RawDescriptionFormatter, subparsers


class Example:
    """One example command line of a help page (a plain class: ``--help`` loads this module,
    and a dataclass would load the dataclass machinery with it)."""

    __slots__ = ("after", "line", "needs", "serves", "status")

    def __init__(self, line: str, status: int = 0, needs: str = "", serves: bool = False,
                 after: tuple[str, ...] = ()) -> None:
        self.line = line
        #: its exit status: 1 when it shows a rejection or a pod that is not there
        self.status = status
        #: what it needs that a fresh clone does not have (shown as a comment after it; the
        #: example test skips it, giving this as the reason)
        self.needs = needs
        #: it serves until stopped: the example test waits until it is ready, then stops it
        self.serves = serves
        #: the examples (lines of these pages) whose output it reads: run before it
        self.after = after

    def __repr__(self) -> str:
        return f"Example({self.line!r})"

    def rendered(self) -> str:
        if self.needs:
            return f"{self.line}   # needs {self.needs}"
        if self.serves:
            return f"{self.line}   # serves until Ctrl-C"
        return self.line


#: examples other examples read the output of
ADMIT_TO_STATE = ("numalign admit -m examples/dual-socket-ht.yaml --state-dir /tmp/numalign-demo/node"
                  " - < examples/pods/dual-socket-list.yaml")
EXPORT_NODE = ("numalign export -m examples/dual-socket-ht.yaml --state-dir /tmp/numalign-demo/node"
               " --out /tmp/numalign-demo/nrt")
EXPORT_GPU_BOX = "numalign export -m examples/gpu-8x-rdma.yaml --out /tmp/numalign-demo/nrt"
SERVE_NRT_DIR = Example("numalign extender serve --nrt-dir /tmp/numalign-demo/nrt --port 8888",
                        serves=True, after=(EXPORT_NODE, EXPORT_GPU_BOX))

#: sub-command path ("extender serve") -> (description, examples)
COMMANDS: dict[str, tuple[str, tuple[Example, ...]]] = {
    "merge": (
        "Merge topology hints the way the kubelet's Topology Manager does, for any policy and\n"
        "policy options, without a machine: a JSON merge case in, a JSON result out\n"
        '({"affinity": [ids] | null, "preferred": bool, "admit": bool}). The case format is\n'
        "documented in docs/merge-case.md (`numalign schema merge-case` prints its JSON Schema).",
        (
            Example("numalign merge examples/merge-case.json"),
            Example("numalign merge - < examples/merge-case.json"),
            Example("numalign merge --jsonl examples/merge-cases.jsonl"),
        ),
    ),
    "admit": (
        "Admit pods on a machine as the kubelet would: the Topology Manager's policy and scope,\n"
        "the CPU, memory and device managers; all-or-nothing per pod. Admitted pods get CPUs,\n"
        "memory per NUMA node and device ids; rejected ones the kubelet's reason\n"
        "(TopologyAffinityError, SMTAlignmentError ...). Exit 0 if every pod is admitted, 1 if\n"
        "one is rejected, 2 on bad input.\n\n"
        "The machine comes from a spec (--machine), a captured or live /sys (--sysfs-root) or\n"
        "hwloc XML (--hwloc-xml); --kubelet-config replaces its kubelet settings with a\n"
        "KubeletConfiguration file. With --state-dir, admitted pods stay allocated across runs.",
        (
            Example("numalign admit -m examples/fig1.yaml examples/fig1-pods.yaml"),
            Example("numalign admit -m examples/gpu-8x-rdma.yaml -o table --explain"
                    " examples/pods/gpu-too-wide.yaml", status=1),
            Example("numalign admit --sysfs-root examples/captures/32intel64-2p8co2t+8ve.tar.bz2"
                    " --kubelet-config examples/kubelet/config.yaml -o table examples/pods/mixed-qos.yaml",
                    status=1),
            Example(ADMIT_TO_STATE),
        ),
    ),
    "release": (
        "Free the CPUs, memory and devices of pods admitted with --state-dir. A pod is\n"
        "NAMESPACE/NAME, or NAME in namespace default. Prints one line per released pod; exit 1\n"
        "if a pod is not in the state (the others are still released).",
        (
            Example("numalign release --state-dir /tmp/numalign-demo/node db-0", after=(ADMIT_TO_STATE,)),
            Example("numalign release --state-dir /tmp/numalign-demo/node default/db-1 default/db-9",
                    status=1, after=(ADMIT_TO_STATE,)),
        ),
    ),
    "state": (
        "Show a node state directory: per NUMA node what is available of what is allocatable,\n"
        "and per pod its NUMA nodes, CPUs, memory and devices. --reconcile moves a state onto\n"
        "a machine that changed (pods that no longer fit are dropped).",
        (
            Example("numalign state --state-dir /tmp/numalign-demo/node", after=(ADMIT_TO_STATE,)),
            Example("numalign state --state-dir /tmp/numalign-demo/node -o json", after=(ADMIT_TO_STATE,)),
        ),
    ),
    "discover": (
        "Discover a machine and print it as a machine spec (edit it, then give it to admit,\n"
        "run or simulate), as a numactl -H style table, or as a NodeResourceTopology object.\n"
        "Sources: the live /sys (default), a captured /sys (directory or tarball), hwloc XML,\n"
        "an hwloc synthetic description, an NRT or a Volcano Numatopology object.\n"
        "A discovered spec has the kubelet defaults (policy none); add your kubelet settings\n"
        "with `numalign admit --kubelet-config` instead of editing it. On the live host the\n"
        "kubelet's version is asked of its binary (`kubelet --version`, 2 s at most; none\n"
        "when it is absent or gives no version; --verbose says which).",
        (
            Example("numalign discover -o table"),
            Example("numalign discover --sysfs-root examples/captures/16amd64-8n2c.tar.bz2 -o table"),
            Example("numalign discover --hwloc-xml examples/captures/nvidiaDGX2.xml -o yaml"),
            Example("numalign discover --hwloc-xml examples/captures/nvidiaDGX2.xml -o nrt"),
        ),
    ),
    "schema": (
        "Print the JSON Schema of a numalign input format, for editors and CI checks\n"
        "(the references are docs/machine-spec.md and docs/merge-case.md).",
        (
            Example("numalign schema machine"),
            Example("numalign schema merge-case"),
        ),
    ),
    "run": (
        "Run a command on an aligned allocation without Kubernetes: exclusive CPUs, memory and\n"
        "GPUs/devices from one NUMA node (or as the policy allows), the process pinned to them.\n"
        "Concurrent runs never share exclusive CPUs or devices. Exit status: the command's;\n"
        "1 if the request is rejected; 2 on bad input.",
        (
            Example("numalign run -m examples/gpu-8x-rdma.yaml --cpus 8 --gpus 2 --dry-run"),
            Example("numalign run --state-dir /tmp/numalign-demo/runs --reserved-cpus 0 --cpus 1 -- nproc"),
        ),
    ),
    "ps": (
        "List the live allocations of `numalign run` (process, age, NUMA nodes, CPUs, memory,\n"
        "devices, command).",
        (
            Example("numalign ps --state-dir /tmp/numalign-demo/runs"),
            Example("numalign ps --state-dir /tmp/numalign-demo/runs -o json"),
        ),
    ),
    "simulate": (
        "Replay a workload on a modelled cluster under several scheduling profiles (default\n"
        "kube-scheduler, NRT single-numa-node, Volcano, numalign) with the node's admission in\n"
        "the loop; prints a summary table and writes summary.json and report.html. See\n"
        "docs/simulator.md.",
        (
            Example("numalign simulate --cluster builtin:small --workload synthetic:count=40"
                    " --profiles default,numalign --out /tmp/numalign-demo/sim --quiet"),
            Example("numalign simulate --workload dir:examples/pods --cluster builtin:small"
                    " --out /tmp/numalign-demo/sim-dir --quiet"),
        ),
    ),
    "sweep": (
        "Run a grid of simulations: every combination of the sweep file's axes (cluster\n"
        "templates and sizes, Topology Manager policy and scope, scheduler profiles, workloads,\n"
        "seeds) is one cell, a `numalign simulate` run of one profile. Cells run on Dask: a\n"
        "LocalCluster with one worker process per core, or an existing cluster (--scheduler).\n"
        "Finished cells are stored as they finish; running the command again skips them.\n"
        "Writes sweep.json, sweep.csv and report.html. Exit 0: every cell done; 1: some cells\n"
        "failed (listed); 2: bad input; 130: interrupted. See docs/sweeps.md.",
        (
            Example("numalign sweep examples/sweeps/small.yaml --dry-run"),
            Example("numalign sweep examples/sweeps/small.yaml --only seed=1 --only profile=numalign"
                    " --only policy=restricted --workers 1 --out /tmp/numalign-demo/sweep --quiet"),
        ),
    ),
    "export": (
        "Build this node's NodeResourceTopology object (topology.node.k8s.io/v1alpha2) from\n"
        "the machine, the kubelet configuration and the allocations, and print it, write it to\n"
        "a directory (--out, one file per node: what `extender serve --nrt-dir` reads) or apply\n"
        "it through the API (--apply), once or every --interval seconds. See docs/kubernetes.md.",
        (
            Example("numalign export -m examples/fig1.yaml --node-name worker-1"),
            Example("numalign export -m examples/gpu-8x-rdma.yaml -o json"),
            Example(EXPORT_NODE, after=(ADMIT_TO_STATE,)),
            Example(EXPORT_GPU_BOX),
        ),
    ),
    "extender": (
        "The kube-scheduler extender service (filter, prioritize, bind over HTTP); see\n"
        "`numalign extender serve --help` and docs/kubernetes.md.",
        (
            SERVE_NRT_DIR,
            Example("numalign extender serve --kubeconfig ~/.kube/config", needs="a live cluster"),
        ),
    ),
    "extender serve": (
        "Serve /filter, /prioritize and /bind for kube-scheduler, with /metrics, /healthz and\n"
        "/readyz, over NodeResourceTopology objects from a directory (see `numalign export\n"
        "--out`) or the API server.",
        (
            SERVE_NRT_DIR,
            Example("numalign extender serve --in-cluster --tls-cert tls.crt --tls-key tls.key",
                    needs="a live cluster (run in a pod, with a TLS certificate)"),
        ),
    ),
    "demo": (
        "Walk through the Topology Manager blog post's example (figure 1) step by step:\n"
        "the providers' hints, the merge, the allocation.",
        (Example("numalign demo"),),
    ),
}

#: (sub-command path, option string) -> help, for flags defined without one
FLAG_HELP: dict[tuple[str, str], str] = {
    ("ps", "--output"): "table (default) or json",
    ("export", "--output"): "object format (default yaml)",
    ("extender serve", "--port"): "listen port (default 8888)",
    ("extender serve", "--tls-cert"): "serve HTTPS with this certificate (PEM)",
    ("extender serve", "--tls-key"): "the certificate's private key (PEM)",
    ("extender serve", "--max-body"): "largest request body accepted (default 8 MiB)",
}


def epilog(examples: tuple[Example, ...]) -> str:
    return "examples:\n" + "\n".join(f"  {e.rendered()}" for e in examples)


def document(parser: argparse.ArgumentParser, prefix: str = "") -> None:
    """Give every sub-command of ``parser`` its description, examples and flag help."""
    for name, sub in subparsers(parser).items():
        path = f"{prefix} {name}".strip()
        document_page(sub, path)
        document(sub, path)


def document_page(parser: argparse.ArgumentParser, path: str) -> None:
    """Give the sub-command ``path`` (its ``parser``) its description, examples and flag help."""
    description, examples = COMMANDS[path]
    parser.description = description
    parser.epilog = epilog(examples)
    parser.formatter_class = RawDescriptionFormatter
    for action in parser._actions:
        if action.help is None:
            for option in action.option_strings:
                if (path, option) in FLAG_HELP:
                    action.help = FLAG_HELP[(path, option)]
