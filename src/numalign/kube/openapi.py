"""The extender's OpenAPI 3.0 description (served at ``/openapi.json``)."""

from __future__ import annotations

from typing import Any

_ERROR = {"type": "object", "properties": {"Error": {"type": "string"}}, "required": ["Error"]}
_OBJ = {"type": "object", "additionalProperties": True}
_STR_MAP = {"type": "object", "additionalProperties": {"type": "string"}}

SCHEMAS: dict[str, Any] = {
    "ExtenderArgs": {
        "type": "object",
        "description": "k8s.io/kube-scheduler/extender/v1 ExtenderArgs (Go field names).",
        "properties": {
            "Pod": {**_OBJ, "description": "a v1.Pod"},
            "Nodes": {
                "type": "object", "nullable": True,
                "description": "a v1.NodeList (nodeCacheCapable: false)",
                "properties": {"items": {"type": "array", "items": _OBJ}},
            },
            "NodeNames": {
                "type": "array", "nullable": True, "items": {"type": "string"},
                "description": "node names (nodeCacheCapable: true)",
            },
        },
        "required": ["Pod"],
    },
    "ExtenderFilterResult": {
        "type": "object",
        "properties": {
            "Nodes": {**_OBJ, "nullable": True},
            "NodeNames": {"type": "array", "nullable": True, "items": {"type": "string"}},
            "FailedNodes": _STR_MAP,
            "FailedAndUnresolvableNodes": _STR_MAP,
            "Error": {"type": "string"},
        },
    },
    "HostPriorityList": {
        "type": "array",
        "items": {
            "type": "object",
            "properties": {
                "Host": {"type": "string"},
                "Score": {"type": "integer", "minimum": 0, "maximum": 10},
            },
            "required": ["Host", "Score"],
        },
    },
    "ExtenderBindingArgs": {
        "type": "object",
        "properties": {k: {"type": "string"} for k in ("PodName", "PodNamespace", "PodUID", "Node")},
        "required": ["PodName", "PodNamespace", "PodUID", "Node"],
    },
    "ExtenderBindingResult": _ERROR,
    "Error": _ERROR,
}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _post(summary: str, req: str, resp: str) -> dict[str, Any]:
    err = {"content": {"application/json": {"schema": _ref("Error")}}}
    return {
        "post": {
            "summary": summary,
            "requestBody": {"required": True, "content": {"application/json": {"schema": _ref(req)}}},
            "responses": {
                "200": {"description": "result", "content": {"application/json": {"schema": _ref(resp)}}},
                "400": {"description": "malformed request", **err},
                "404": {"description": "unknown node (bind) or verb", **err},
                "411": {"description": "Content-Length required", **err},
                "408": {"description": "the body did not arrive within the deadline", **err},
                "413": {"description": "body too large", **err},
                "503": {"description": "every worker slot busy; retry (Retry-After: 1)", **err},
            },
        }
    }


def _get(summary: str, ctype: str = "text/plain") -> dict[str, Any]:
    return {"get": {"summary": summary, "responses": {"200": {
        "description": "ok (answered even when every worker slot is busy)",
        "content": {ctype: {"schema": {"type": "string"}}}}}}}


def openapi_document() -> dict[str, Any]:
    return {
        "openapi": "3.0.3",
        "info": {
            "title": "numalign kube-scheduler extender",
            "version": "1",
            "description": "NUMA-exact filter and NUMA score for kube-scheduler "
            "(k8s.io/kube-scheduler/extender/v1 wire format). Verbs may be prefixed "
            "(urlPrefix/filter).",
        },
        "paths": {
            "/filter": _post("nodes that admit the pod", "ExtenderArgs", "ExtenderFilterResult"),
            "/prioritize": _post("NUMA score 0..10 per node", "ExtenderArgs", "HostPriorityList"),
            "/bind": _post("assume and bind the pod", "ExtenderBindingArgs", "ExtenderBindingResult"),
            "/metrics": _get("Prometheus metrics"),
            "/healthz": _get("liveness"),
            "/readyz": _get("readiness: nodes loaded"),
        },
        "components": {"schemas": SCHEMAS},
    }
