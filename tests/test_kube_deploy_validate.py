"""Issue 12, ``deploy/``: every manifest and the ``kubectl kustomize deploy`` output validate
strictly (kubernetes-validate, the API's own schemas); the probes reach a port the container
serves on the pod IP; the second scheduler may hold its own lease; the extender is asked about
every pod; the metrics Services select real pods and ports; the Dockerfile is slim, non-root
and installs ``numalign[kube]`` (no container engine here: it is checked, not built)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import REPO
from numalign.cli import build_parser

DEPLOY = REPO / "deploy"
K8S_VERSION = "1.36.0"  # the minor of the kube-scheduler image deploy/ pins


def manifest_docs() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for p in sorted(DEPLOY.glob("*.yaml")):
        if p.name == "kustomization.yaml":
            continue
        out.extend(d for d in yaml.safe_load_all(p.read_text()) if d is not None)
    return out


def kustomize_docs() -> list[dict[str, Any]]:
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is not installed (Debian: apt-get install kubernetes-client)")
    r = subprocess.run(["kubectl", "kustomize", str(DEPLOY)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    return [d for d in yaml.safe_load_all(r.stdout) if d is not None]


def validate(doc: dict[str, Any]) -> None:
    kv = pytest.importorskip("kubernetes_validate")
    kv.validate(doc, K8S_VERSION, strict=True)


def test_manifests_validate_strictly() -> None:
    docs = manifest_docs()
    assert len(docs) >= 15
    for d in docs:
        validate(d)


def test_kustomize_output_validates_and_has_every_manifest() -> None:
    built = kustomize_docs()
    for d in built:
        validate(d)
    key = lambda d: (d["kind"], d["metadata"]["name"])  # noqa: E731
    assert sorted(map(key, built)) == sorted(map(key, manifest_docs()))
    assert all(d["metadata"]["labels"]["app.kubernetes.io/part-of"] == "numalign" for d in built)


def test_the_crd_kustomization_validates_and_holds_only_the_crd() -> None:
    """``deploy/crd`` (``kubectl create -k deploy/crd``) builds the upstream CRD alone, valid
    for the API server; ``deploy/`` builds no CRD."""
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is not installed (Debian: apt-get install kubernetes-client)")
    r = subprocess.run(["kubectl", "kustomize", str(DEPLOY / "crd")], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    (crd,) = [d for d in yaml.safe_load_all(r.stdout) if d is not None]
    assert (crd["kind"], crd["metadata"]["name"]) == (
        "CustomResourceDefinition", "noderesourcetopologies.topology.node.k8s.io")
    validate(crd)
    assert all(d["kind"] != "CustomResourceDefinition" for d in kustomize_docs())


def test_the_validator_is_strict() -> None:
    kv = pytest.importorskip("kubernetes_validate")
    bad = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
           "spec": {"ports": [{"port": 1, "targetPrt": "x"}]}}
    with pytest.raises(kv.ValidationError):
        kv.validate(bad, K8S_VERSION, strict=True)


def workloads() -> list[dict[str, Any]]:
    return [d for d in manifest_docs() if d["kind"] in ("Deployment", "DaemonSet")]


def served_ports(container: dict[str, Any]) -> set[int]:
    """Ports the numalign command listens on off loopback (health/metrics)."""
    cmd = container.get("command") or []
    if not cmd or cmd[0] != "numalign":
        return set()
    args = build_parser().parse_args(cmd[1:])
    out = set()
    for port_attr, host_attr in (("health_port", "health_host"), ("metrics_port", "metrics_host")):
        port = getattr(args, port_attr, None)
        if port is not None and getattr(args, host_attr) not in ("127.0.0.1", "localhost", "::1"):
            out.add(port)
    return out


def test_probes_reach_a_port_served_on_the_pod_ip() -> None:
    seen = 0
    for w in workloads():
        pod = w["spec"]["template"]["spec"]
        for c in pod["containers"]:
            named = {p["name"]: p["containerPort"] for p in c.get("ports", [])}
            for kind in ("livenessProbe", "readinessProbe", "startupProbe"):
                probe = c.get(kind)
                if probe is None or "httpGet" not in probe:
                    continue
                get = probe["httpGet"]
                # the kubelet probes from outside the pod: loopback is unreachable
                assert "host" not in get or pod.get("hostNetwork"), (c["name"], kind)
                port = named.get(get["port"], get["port"])
                if (c.get("command") or [""])[0] == "numalign":
                    seen += 1
                    assert port in served_ports(c), (c["name"], kind, port)
    assert seen >= 4
    exporter = next(w for w in workloads() if w["kind"] == "DaemonSet")
    assert "livenessProbe" in exporter["spec"]["template"]["spec"]["containers"][0]


def scheduler_config() -> dict[str, Any]:
    cm = next(d for d in manifest_docs() if d["kind"] == "ConfigMap")
    cfg: dict[str, Any] = yaml.safe_load(cm["data"]["scheduler-config.yaml"])
    return cfg


def test_the_scheduler_may_hold_its_own_lease() -> None:
    le = scheduler_config()["leaderElection"]
    lease, ns = le["resourceName"], le["resourceNamespace"]
    docs = manifest_docs()
    roles = {d["metadata"]["name"]: d for d in docs if d["kind"] in ("ClusterRole", "Role")}
    granted: set[str] = set()
    for b in docs:
        if b["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        if b["kind"] == "RoleBinding" and b["metadata"]["namespace"] != ns:
            continue
        if not any(s["name"] == "numalign-scheduler" for s in b["subjects"]):
            continue
        role = roles.get(b["roleRef"]["name"])
        for rule in (role or {}).get("rules", []):
            if ("coordination.k8s.io" in rule["apiGroups"] and "leases" in rule["resources"]
                    and lease in rule.get("resourceNames", [lease])):
                granted.update(rule["verbs"])
    assert {"get", "update"} <= granted
    assert lease != "kube-scheduler"  # the only lease system:kube-scheduler grants


def test_the_extender_is_asked_about_every_pod() -> None:
    configs = [scheduler_config(),
               yaml.safe_load((DEPLOY / "config" / "kube-scheduler-config.yaml").read_text())]
    for cfg in configs:
        for ext in cfg["extenders"]:
            assert not ext.get("managedResources"), ext  # empty = every pod


def test_metrics_services_select_real_pods_and_ports() -> None:
    services = [d for d in manifest_docs() if d["kind"] == "Service"]
    assert len(services) == 2
    for svc in services:
        sel = svc["spec"]["selector"]
        targets = [w for w in workloads()
                   if sel.items() <= w["spec"]["template"]["metadata"]["labels"].items()]
        assert len(targets) == 1, svc["metadata"]["name"]
        ports = {p["name"] for c in targets[0]["spec"]["template"]["spec"]["containers"]
                 for p in c.get("ports", [])}
        for p in svc["spec"]["ports"]:
            assert p["targetPort"] in ports


def test_images_name_what_the_dockerfile_builds() -> None:
    kust = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    names = {i["name"] for i in kust["images"]}
    for w in workloads():
        for c in w["spec"]["template"]["spec"]["containers"]:
            if (c.get("command") or [""])[0] == "numalign":
                assert c["image"].split(":")[0] in names
    dockerfile = (REPO / "Dockerfile").read_text()
    assert "python:3.11-slim" in dockerfile
    assert "[kube]" in dockerfile
    user = [line.split()[1] for line in dockerfile.splitlines() if line.startswith("USER ")]
    assert user and user[-1].split(":")[0] not in ("0", "root")


def test_dockerfile_builds_where_an_engine_exists(tmp_path: Path) -> None:
    docker = shutil.which("docker")
    if docker is None or subprocess.run([docker, "info"], capture_output=True,
                                        timeout=30).returncode != 0:
        pytest.skip("no container engine here")
    r = subprocess.run([docker, "build", "-t", "numalign:test", str(REPO)], capture_output=True,
                       text=True, timeout=1800)
    assert r.returncode == 0, r.stderr[-2000:]
    r = subprocess.run([docker, "run", "--rm", "numalign:test", "id", "-u"], capture_output=True,
                       text=True, timeout=120)
    assert r.stdout.strip() == "65532"
