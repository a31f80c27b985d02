"""``numalign export`` and ``numalign extender serve``: argument parsing and thin handlers."""

from __future__ import annotations

import argparse

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (``numalign --help``)
if TYPE_CHECKING:
    from typing import Any


def _cmd_export(args: argparse.Namespace) -> int:
    from pathlib import Path

    from numalign.errors import InputError
    from numalign.kube.exporter import ExportSources, export_command

    if args.kubelet_state and args.state_dir:
        raise InputError("give one of --kubelet-state and --state-dir")
    if args.interval is not None and not args.interval > 0:  # `not >`: NaN too
        raise InputError("must be positive", "--interval")
    if not args.poll > 0:
        raise InputError("must be positive (0 would busy-wait)", "--poll")
    if args.apply and args.out:
        raise InputError("give one of --apply and --out", "--out")
    if args.apply:  # the API configuration, checked before anything is read or exported
        from numalign.kube.apiconfig import default_client

        default_client(args.kubeconfig, "--apply")
    if args.metrics_port is not None:  # /metrics for the DaemonSet's probes and scrapes
        from numalign.kube.metrics import serve_exporter_metrics

        serve_exporter_metrics(args.metrics_host, args.metrics_port)
    sources = ExportSources(
        machine=args.machine, sysfs_root=args.sysfs_root, kubelet_config=args.kubelet_config,
        kubelet_state=args.kubelet_state, state_dir=args.state_dir, node_name=args.node_name,
        device_rules=args.device_rules, podresources_socket=args.podresources_socket,
        kind="numatopo" if args.output == "numatopo" else "nrt",
    )
    if args.output == "numatopo" and args.apply:
        raise InputError("--apply publishes NodeResourceTopology only; print the Numatopology instead", "--apply")
    return export_command(sources, apply=args.apply, kubeconfig=args.kubeconfig,
                          interval=args.interval, output="yaml" if args.output == "numatopo" else args.output,
                          poll=args.poll, out_dir=Path(args.out) if args.out else None)


def _cmd_extender_serve(args: argparse.Namespace) -> int:
    from numalign.kube.extender import serve

    return serve(host=args.host, port=args.port, nrt_dir=args.nrt_dir, kubeconfig=args.kubeconfig,
                 in_cluster=args.in_cluster, tls_cert=args.tls_cert, tls_key=args.tls_key,
                 max_body=args.max_body, timeout=args.timeout, resync=args.resync,
                 assume_ttl=args.assume_ttl, health_host=args.health_host,
                 health_port=args.health_port, max_connections=args.max_connections,
                 profile=args.profile, request_budget=args.request_budget)


def add_commands(sub: Any) -> None:
    """Add ``export`` and ``extender`` to the ``numalign`` sub-command parser."""
    p = sub.add_parser("export", help="publish this node's NodeResourceTopology (print, or --apply)")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--machine", "-m", help="machine spec instead of discovery")
    src.add_argument("--sysfs-root", metavar="DIR|TARBALL", help="captured root (default: live /)")
    p.add_argument("--device-rules", metavar="FILE",
                   help="YAML rules naming PCI devices as resources (with discovery)")
    p.add_argument("--kubelet-config", metavar="FILE",
                   help="KubeletConfiguration YAML, e.g. /var/lib/kubelet/config.yaml")
    p.add_argument("--kubelet-state", metavar="DIR",
                   help="the kubelet's cpu_manager_state / memory_manager_state directory")
    p.add_argument("--state-dir", metavar="DIR", help="numalign's own node state directory")
    p.add_argument("--podresources-socket", metavar="SOCKET",
                   help="the kubelet's pod-resources socket, e.g. "
                        "/var/lib/kubelet/pod-resources/kubelet.sock (--kubelet-state: fallback)")
    p.add_argument("--node-name", help="object name (default: $NODE_NAME, else the machine name)")
    p.add_argument("--apply", action="store_true", help="create/update the object through the API")
    p.add_argument("--out", metavar="DIR",
                   help="write the object to DIR/NAME.yaml (.json with -o json), replaced atomically, "
                        "instead of printing it: a directory for `extender serve --nrt-dir`")
    p.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster, else ~/.kube/config)")
    p.add_argument("--interval", type=float, metavar="SECONDS",
                   help="keep exporting every SECONDS and when a state file changes")
    p.add_argument("--poll", type=float, default=1.0, metavar="SECONDS",
                   help="how often state-file mtimes are checked (default 1)")
    p.add_argument("-o", "--output", choices=["yaml", "json", "numatopo"], default="yaml",
                   help="yaml/json: the NodeResourceTopology; numatopo: Volcano's Numatopology (YAML)")
    p.add_argument("--metrics-port", type=int, metavar="PORT",
                   help="serve /metrics (process metrics) on this port while exporting")
    p.add_argument("--metrics-host", default="0.0.0.0", metavar="ADDR",
                   help="listen address of --metrics-port (default: all)")
    p.set_defaults(handler=_cmd_export)

    p = sub.add_parser("extender", help="kube-scheduler extender service")
    esub = p.add_subparsers(dest="extender_command", required=True, metavar="COMMAND")
    s = esub.add_parser("serve", help="serve /filter, /prioritize, /bind, /metrics, /healthz, /readyz")
    s.add_argument("--host", default="127.0.0.1", help="listen address (default: loopback)")
    s.add_argument("--port", type=int, default=8888)
    nodes = s.add_mutually_exclusive_group()
    nodes.add_argument("--nrt-dir", metavar="DIR", help="directory of NodeResourceTopology YAML/JSON")
    nodes.add_argument("--kubeconfig", help="list+watch NodeResourceTopology objects via this kubeconfig")
    nodes.add_argument("--in-cluster", action="store_true", help="list+watch with the pod's service account")
    s.add_argument("--tls-cert", metavar="FILE")
    s.add_argument("--tls-key", metavar="FILE")
    s.add_argument("--max-body", type=int, default=8 * 1024 * 1024, metavar="BYTES")
    s.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS", help="socket timeout")
    s.add_argument("--resync", type=float, default=1.0, metavar="SECONDS",
                   help="API: shortest time between re-lists; --nrt-dir: the poll period "
                        "where the directory cannot be watched for changes")
    s.add_argument("--assume-ttl", type=float, default=120.0, metavar="SECONDS",
                   help="drop an assumed pod after this long if the NRT has not shown it")
    s.add_argument("--request-budget", type=float, default=3.0, metavar="SECONDS",
                   help="answer each /filter and /prioritize within this (default 3; inside "
                        "kube-scheduler's extender httpTimeout, 5 s by default): decisions "
                        "not made by then fail the node for this request")
    s.add_argument("--max-connections", type=int, default=256, metavar="N",
                   help="connections served at once (the others: /healthz answered, else 503)")
    s.add_argument("--health-port", type=int, metavar="PORT",
                   help="also serve GET /healthz, /readyz, /metrics (only) on this port, e.g. "
                        "for the kubelet's probes and Prometheus while --host stays loopback")
    s.add_argument("--health-host", default="0.0.0.0", metavar="ADDR",
                   help="listen address of --health-port (default: all)")
    s.add_argument("--profile", default="numalign", metavar="NAME",
                   help="the scheduler profile deciding and scoring (default numalign; also "
                        "koordinator, volcano[:weight=N], nrt-snn, nrt-snn-least-numa, "
                        "nrt-snn-most-allocated, nrt-snn-balanced; not default: it has no filter)")
    s.set_defaults(handler=_cmd_extender_serve)
