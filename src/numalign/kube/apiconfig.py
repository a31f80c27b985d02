"""Which API server to talk to: a kubeconfig file or the pod's service account, checked up
front so that a missing or malformed configuration is one line and exit 2, never a traceback
and never a silent fall back to another cluster's ``~/.kube/config``."""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any

from numalign.errors import InputError

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")


def _k8s(module: str) -> Any:
    try:
        return importlib.import_module(f"kubernetes.{module}")
    except ImportError:  # pragma: no cover - optional dependency
        raise InputError("the kubernetes client is not installed (pip install 'numalign[kube]')") from None


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0][:300] if text else type(e).__name__


def from_kubeconfig(path: str, flag: str = "--kubeconfig") -> Any:
    """An ApiClient from the kubeconfig file ``path``."""
    p = Path(path)
    if not p.is_file():
        raise InputError("no such file" if not p.exists() else "not a file", f"{flag} {path}")
    config = _k8s("config")
    try:
        return config.new_client_from_config(config_file=str(p))
    except Exception as e:  # ConfigException, YAML errors, missing keys: all one line
        raise InputError(f"cannot use this kubeconfig: {_first_line(e)}", f"{flag} {path}") from None


def in_cluster(flag: str = "--in-cluster") -> Any:
    """An ApiClient from the pod's service account; an error outside a pod."""
    if not os.environ.get("KUBERNETES_SERVICE_HOST"):
        raise InputError("not running in a Kubernetes pod (KUBERNETES_SERVICE_HOST is not set)",
                         flag)
    config, client = _k8s("config"), _k8s("client")
    try:
        config.load_incluster_config()
    except Exception as e:
        raise InputError(f"cannot use the pod's service account: {_first_line(e)}", flag) from None
    return client.ApiClient()


def default_client(kubeconfig: str | None, flag: str) -> Any:
    """``--kubeconfig FILE``, else in-cluster when in a pod, else ``$KUBECONFIG`` or
    ``~/.kube/config`` when present; else an :class:`InputError` naming the choices."""
    if kubeconfig:
        return from_kubeconfig(kubeconfig)
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        return in_cluster(flag)
    env = os.environ.get("KUBECONFIG", "").split(os.pathsep)[0]
    home = Path(env) if env else Path.home() / ".kube" / "config"
    if home.is_file():
        return from_kubeconfig(str(home), "$KUBECONFIG" if env else "~/.kube/config")
    raise InputError("no API server configured: give --kubeconfig FILE, run in a pod, or set "
                     "up $KUBECONFIG / ~/.kube/config", flag)
