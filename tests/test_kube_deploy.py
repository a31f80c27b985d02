"""deploy/: every manifest parses and is checked field by field against the official
client's generated models (the Kubernetes OpenAPI types: unknown fields and wrong types are
errors); cross-references (service accounts, selectors, extender URL and verbs, CLI flags)
hold. ``kubectl apply --dry-run=client`` runs too, against a loopback fake of the API
server's discovery (client dry-run still needs it); skipped without kubectl.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
import yaml

from conftest import REPO
from numalign.cli import build_parser
from numalign.kube.openapi import openapi_document

DEPLOY = REPO / "deploy"
#: the upstream NodeResourceTopology CRD, apart from the default kustomization
CRD = DEPLOY / "crd" / "noderesourcetopology-crd.yaml"
#: sha256 of manifests/crd.yaml at k8stopologyawareschedwg/noderesourcetopology-api v0.1.3
UPSTREAM_CRD_SHA256 = "0084daac1688bec5cd5fdf5fca7e10744564c60231cfcd8b67d8d8b1dc247e15"
MANIFESTS = [*sorted(p for p in DEPLOY.glob("*.yaml") if p.name != "kustomization.yaml"), CRD]
MODELS = {
    ("v1", "ServiceAccount"): "V1ServiceAccount",
    ("v1", "ConfigMap"): "V1ConfigMap",
    ("v1", "Service"): "V1Service",
    ("apps/v1", "Deployment"): "V1Deployment",
    ("apps/v1", "DaemonSet"): "V1DaemonSet",
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): "V1ClusterRole",
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): "V1ClusterRoleBinding",
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): "V1RoleBinding",
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"): "V1CustomResourceDefinition",
}
EXTENDER_FIELDS = {"urlPrefix", "filterVerb", "preemptVerb", "prioritizeVerb", "bindVerb",
                   "weight", "enableHTTPS", "tlsConfig", "httpTimeout", "nodeCacheCapable",
                   "managedResources", "ignorable"}


def docs() -> list[tuple[Path, dict[str, Any]]]:
    out = []
    for p in MANIFESTS:
        for d in yaml.safe_load_all(p.read_text()):
            if d is not None:
                out.append((p, d))
    return out


def check(value: Any, type_name: str, path: str) -> None:
    """``value`` against a kubernetes client model type (strict: no unknown fields)."""
    from kubernetes.client import models

    if value is None:
        return
    if type_name.lower().startswith("list["):
        assert isinstance(value, list), f"{path}: expected a list"
        for i, v in enumerate(value):
            check(v, type_name[5:-1], f"{path}[{i}]")
        return
    if type_name.lower().startswith(("dict(", "dict[")):  # dict(str, X) or Dict[str, X]
        assert isinstance(value, dict), f"{path}: expected a mapping"
        inner = type_name[type_name.index(",") + 1:-1].strip()
        for k, v in value.items():
            check(v, inner, f"{path}.{k}")
        return
    basic: dict[str, type | tuple[type, ...]] = {
        "str": str, "int": int, "bool": bool, "float": (int, float)}
    if type_name in basic:
        assert isinstance(value, basic[type_name]), f"{path}: expected {type_name}, got {value!r}"
        return
    if type_name in ("object", "datetime", "date"):
        return
    cls = getattr(models, type_name)
    assert isinstance(value, dict), f"{path}: expected an object ({type_name})"
    known = {v: k for k, v in cls.attribute_map.items()}
    for key, v in value.items():
        assert key in known, f"{path}.{key}: unknown field of {type_name}"
        check(v, cls.openapi_types[known[key]], f"{path}.{key}")


def test_every_manifest_matches_the_api_types() -> None:
    pytest.importorskip("kubernetes")
    seen = set()
    for path, d in docs():
        key = (d.get("apiVersion"), d.get("kind"))
        assert key in MODELS, f"{path.name}: unexpected {key}"
        assert d["metadata"]["name"], path.name
        check(d, MODELS[key], f"{path.name}:{d['kind']}/{d['metadata']['name']}")
        seen.add(d["kind"])
    assert {"CustomResourceDefinition", "Deployment", "DaemonSet", "ClusterRole",
            "ClusterRoleBinding", "ServiceAccount", "ConfigMap"} <= seen


def test_crd_is_the_upstream_nrt_api() -> None:
    """The CRD is upstream's, byte for byte below numalign's comment lines: v1alpha1 and
    v1alpha2 served, v1alpha2 stored (what NFD and scheduler-plugins clusters have)."""
    text = CRD.read_text()
    body = text[text.index("apiVersion:"):]
    assert all(line.startswith("#") or not line for line in text[:text.index("apiVersion:")].splitlines())
    assert hashlib.sha256(body.encode()).hexdigest() == UPSTREAM_CRD_SHA256
    assert "7f99f9c2af03e0dd95ca81b650cd5f2427fbc8bd" in text
    crd = yaml.safe_load(text)
    spec = crd["spec"]
    assert crd["metadata"]["name"] == f"{spec['names']['plural']}.{spec['group']}"
    assert (spec["group"], spec["scope"], spec["names"]["kind"]) == (
        "topology.node.k8s.io", "Cluster", "NodeResourceTopology")
    versions = {v["name"]: (v["served"], v["storage"]) for v in spec["versions"]}
    assert versions == {"v1alpha1": (True, False), "v1alpha2": (True, True)}
    schema = next(v for v in spec["versions"] if v["name"] == "v1alpha2")["schema"]["openAPIV3Schema"]
    assert schema["required"] == ["zones"]
    zone = schema["properties"]["zones"]["items"]
    res = zone["properties"]["resources"]["items"]
    assert sorted(res["required"]) == ["allocatable", "available", "capacity", "name"]
    assert zone["properties"]["costs"]["items"]["properties"]["value"]["type"] == "integer"


def test_the_default_kustomization_installs_no_crd() -> None:
    """``kubectl apply -k deploy/`` must not replace a CRD NFD or scheduler-plugins installed:
    the CRD is only in ``deploy/crd`` (created with ``kubectl create -k``, which refuses an
    existing object)."""
    top = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    listed = [DEPLOY / r for r in top["resources"]]
    assert all(p.is_file() and p.parent == DEPLOY for p in listed)
    kinds = {d["kind"] for p in listed for d in yaml.safe_load_all(p.read_text()) if d}
    assert "CustomResourceDefinition" not in kinds
    crd_kustomization = yaml.safe_load((DEPLOY / "crd" / "kustomization.yaml").read_text())
    assert crd_kustomization["resources"] == [CRD.name]
    assert "kubectl create -k deploy/crd" in (DEPLOY / "kustomization.yaml").read_text()


def test_the_exporter_may_read_nodes_for_the_owner_reference() -> None:
    rules = [r for _, d in docs() if d["kind"] == "ClusterRole"
             and d["metadata"]["name"] == "numalign-exporter" for r in d["rules"]]
    assert any(r["apiGroups"] == [""] and "nodes" in r["resources"] and "get" in r["verbs"]
               for r in rules)


def test_the_kube_scheduler_image_is_a_maintained_release() -> None:
    images = [c["image"] for _, d in docs() if d["kind"] == "Deployment"
              for c in d["spec"]["template"]["spec"]["containers"]
              if c["image"].startswith("registry.k8s.io/kube-scheduler:")]
    assert images == ["registry.k8s.io/kube-scheduler:v1.36.4"]


def test_workloads_reference_what_exists() -> None:
    all_docs = [d for _, d in docs()]
    accounts = {(d["metadata"]["namespace"], d["metadata"]["name"])
                for d in all_docs if d["kind"] == "ServiceAccount"}
    roles = {d["metadata"]["name"] for d in all_docs if d["kind"] == "ClusterRole"}
    parser = build_parser()
    for d in all_docs:
        if d["kind"] in ("Deployment", "DaemonSet"):
            spec = d["spec"]
            assert spec["selector"]["matchLabels"].items() <= spec["template"]["metadata"]["labels"].items()
            pod = spec["template"]["spec"]
            assert (d["metadata"]["namespace"], pod["serviceAccountName"]) in accounts
            mounts = {v["name"] for v in pod.get("volumes", [])}
            for c in pod["containers"]:
                assert c["image"]
                for m in c.get("volumeMounts", []):
                    assert m["name"] in mounts
                if c["command"][0] == "numalign":  # the flags are numalign's own
                    parser.parse_args(c["command"][1:])
        if d["kind"] in ("ClusterRoleBinding", "RoleBinding"):
            for s in d["subjects"]:
                assert (s["namespace"], s["name"]) in accounts
            if not d["roleRef"]["name"].startswith(("system:", "extension-apiserver")):
                assert d["roleRef"]["name"] in roles
    rules = [r for d in all_docs if d["kind"] == "ClusterRole" for r in d["rules"]]
    assert any("noderesourcetopologies" in r["resources"] and "update" in r["verbs"] for r in rules)
    assert any("pods/binding" in r["resources"] for r in rules)


def scheduler_configs() -> list[dict[str, Any]]:
    out = [yaml.safe_load((DEPLOY / "config" / "kube-scheduler-config.yaml").read_text())]
    for _, d in docs():
        if d["kind"] == "ConfigMap":
            out.extend(yaml.safe_load(v) for v in d["data"].values())
    return out


def test_scheduler_configuration_extenders() -> None:
    served = {p.strip("/") for p in openapi_document()["paths"]}
    sidecar_ports = set()
    for _, d in docs():
        if d["kind"] == "Deployment":
            for c in d["spec"]["template"]["spec"]["containers"]:
                if c["command"][:3] == ["numalign", "extender", "serve"]:
                    args = build_parser().parse_args(c["command"][1:])
                    sidecar_ports.add(args.port)
                    assert args.host == "127.0.0.1"
    configs = scheduler_configs()
    assert len(configs) == 2
    for cfg in configs:
        assert cfg["apiVersion"] == "kubescheduler.config.k8s.io/v1"
        assert cfg["kind"] == "KubeSchedulerConfiguration"
        for ext in cfg["extenders"]:
            assert set(ext) <= EXTENDER_FIELDS
            url = urlparse(ext["urlPrefix"])
            assert url.scheme == ("https" if ext.get("enableHTTPS") else "http")
            assert url.port in sidecar_ports
            for verb in ("filterVerb", "prioritizeVerb", "bindVerb", "preemptVerb"):
                if ext.get(verb):
                    assert ext[verb] in served, verb
            if ext.get("prioritizeVerb"):
                assert isinstance(ext["weight"], int) and ext["weight"] > 0
            assert isinstance(ext["nodeCacheCapable"], bool)
            for m in ext.get("managedResources", []):
                assert set(m) <= {"name", "ignoredByScheduler"}


#: what the fake discovery serves: path -> (resource, kind, namespaced)
DISCOVERY = {
    "/api/v1": [("serviceaccounts", "ServiceAccount", True), ("configmaps", "ConfigMap", True),
                ("services", "Service", True),
                ("namespaces", "Namespace", False), ("pods", "Pod", True)],
    "/apis/apps/v1": [("deployments", "Deployment", True), ("daemonsets", "DaemonSet", True)],
    "/apis/rbac.authorization.k8s.io/v1": [
        ("clusterroles", "ClusterRole", False), ("clusterrolebindings", "ClusterRoleBinding", False),
        ("roles", "Role", True), ("rolebindings", "RoleBinding", True)],
    "/apis/apiextensions.k8s.io/v1": [
        ("customresourcedefinitions", "CustomResourceDefinition", False)],
}


class DiscoveryHandler(BaseHTTPRequestHandler):
    """Legacy discovery of the built-in groups kubectl needs; every object GET is a 404."""

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _reply(self, code: int, doc: Any) -> None:
        data = json.dumps(doc).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        path = self.path.partition("?")[0]
        if path == "/version":
            self._reply(200, {"major": "1", "minor": "36", "gitVersion": "v1.36.0"})
        elif path == "/api":
            self._reply(200, {"kind": "APIVersions", "versions": ["v1"],
                              "serverAddressByClientCIDRs": [
                                  {"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]})
        elif path == "/apis":
            groups = []
            for key in DISCOVERY:
                if key.startswith("/apis/"):
                    group, version = key.removeprefix("/apis/").split("/")
                    gv = {"groupVersion": f"{group}/{version}", "version": version}
                    groups.append({"name": group, "versions": [gv], "preferredVersion": gv})
            self._reply(200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
        elif path in DISCOVERY:
            group_version = path.removeprefix("/apis/").removeprefix("/api/")
            self._reply(200, {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version,
                              "resources": [
                                  {"name": n, "singularName": "", "namespaced": ns, "kind": k,
                                   "verbs": ["create", "get", "list", "patch", "update"]}
                                  for n, k, ns in DISCOVERY[path]]})
        else:
            self._reply(404, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                              "reason": "NotFound", "code": 404, "message": "not found"})


def test_kubectl_apply_dry_run_client(tmp_path: Path) -> None:
    """``kubectl apply --dry-run=client`` over deploy/. Client dry-run still asks the API
    server for discovery and for the current objects: a loopback fake answers with the
    built-in groups and 404s. ``--validate=false``: kubectl's schema validation downloads the
    server's OpenAPI, which the fake cannot provide (the model check above covers it)."""
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is not installed (Debian: apt-get install kubernetes-client)")
    server = ThreadingHTTPServer(("127.0.0.1", 0), DiscoveryHandler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                     daemon=True).start()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "fake",
        "clusters": [{"name": "fake", "cluster": {
            "server": f"http://127.0.0.1:{server.server_address[1]}"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "u"}}],
    }))
    try:
        r = subprocess.run(["kubectl", "--kubeconfig", str(kubeconfig), "apply",
                            "--dry-run=client", "--validate=false",
                            *(arg for p in MANIFESTS for arg in ("-f", str(p)))],
                           capture_output=True, text=True, timeout=120,
                           env={**os.environ, "KUBECACHEDIR": str(tmp_path / "cache"),
                                "HOME": str(tmp_path)})
    finally:
        server.shutdown()
        server.server_close()
    assert r.returncode == 0, r.stderr
    created = [line for line in r.stdout.splitlines() if line.endswith("created (dry run)")]
    assert len(created) == len(docs()), r.stdout


def test_the_checker_catches_mistakes() -> None:
    pytest.importorskip("kubernetes")
    with pytest.raises(AssertionError, match="unknown field"):
        check({"spec": {"replica": 1}}, "V1Deployment", "d")
    with pytest.raises(AssertionError, match="expected int"):
        check({"spec": {"replicas": "one"}}, "V1Deployment", "d")
    with pytest.raises(AssertionError, match="unknown field"):
        check({"spec": {"template": {"spec": {"containers": [{"name": "c", "imag": "x"}]}}}},
              "V1Deployment", "d")
