"""The extender's pod cache: a raw v1.Pod parsed once per engine-relevant projection. Hit or
miss, the pod it gives equals the full parse (``engine_pod(pod_of(...))``), and its shape id is
the core's for that pod; invalid pods fail as the full parse does; unique names, uids and
annotations do not grow the cache."""

from __future__ import annotations

import io
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from numalign.errors import InputError
from numalign.kube.extender import ExtenderCore
from numalign.kube.extender.core import engine_pod
from numalign.kube.extender.podcache import PodCache
from numalign.kube.extender.wire import BadRequest, pod_of

QUANTITIES = {"cpu": ["1", "2", "500m", "1500m"], "memory": ["1Gi", "512Mi", "2Gi"],
              "nvidia.com/gpu": ["1", "2"]}

resources = st.fixed_dictionaries({}, optional={
    name: st.sampled_from(values) for name, values in QUANTITIES.items()})


@st.composite
def containers(draw: Any, init: bool = False) -> dict[str, Any]:
    limits = draw(resources)
    c: dict[str, Any] = {"name": draw(st.sampled_from(["a", "b", "c"])) + ("-init" if init else ""),
                         "image": draw(st.sampled_from(["x:1", "y:2"])),
                         "env": [{"name": "N", "value": draw(st.text(max_size=5))}]}
    if draw(st.booleans()):
        c["resources"] = {"limits": limits}
        if draw(st.booleans()) and "cpu" in limits:
            c["resources"]["requests"] = {"cpu": "500m"}
    if init and draw(st.booleans()):
        c["restartPolicy"] = "Always"
    return c


@st.composite
def raw_pods(draw: Any) -> dict[str, Any]:
    apps = draw(st.lists(containers(), min_size=1, max_size=3, unique_by=lambda c: c["name"]))
    inits = draw(st.lists(containers(init=True), max_size=1))
    ann = draw(st.dictionaries(st.sampled_from(["x/y", "app", "volcano.sh/numa-topology-policy"]),
                               st.sampled_from(["best-effort", "single-numa-node", "v"]),
                               max_size=3))
    spec: dict[str, Any] = {"containers": apps}
    if inits:
        spec["initContainers"] = inits
    if draw(st.booleans()):
        spec["topologyPolicy"] = draw(st.sampled_from(["restricted", "single-numa-node"]))
    meta: dict[str, Any] = {"name": draw(st.sampled_from(["p", "q", "r"])),
                            "annotations": ann, "labels": {"k": draw(st.text(max_size=4))}}
    if draw(st.booleans()):
        meta["namespace"] = draw(st.sampled_from(["ns", "default"]))
    if draw(st.booleans()):
        meta["uid"] = draw(st.uuids()).hex
    return {"metadata": meta, "spec": spec}


def reference(raw: Any) -> Any:
    try:
        return engine_pod(pod_of({"Pod": raw}))
    except (InputError, BadRequest) as e:
        return type(e)


@settings(max_examples=150, deadline=None)
@given(st.lists(raw_pods(), min_size=1, max_size=6))
def test_hit_or_miss_equals_the_full_parse(pods: list[dict[str, Any]]) -> None:
    core = ExtenderCore(log=io.StringIO())
    cache = PodCache(core.shape_id)
    for raw in pods + pods:  # the second round hits
        want = reference(raw)
        if isinstance(want, type):
            with pytest.raises(want):
                cache.parse({"Pod": raw})
            continue
        got, shape = cache.parse({"Pod": raw})
        assert got == want
        assert shape == core.shape_id(want)


def test_invalid_pods_fail_as_the_full_parse() -> None:
    cache = PodCache(ExtenderCore(log=io.StringIO()).shape_id)
    good = {"metadata": {"name": "p"}, "spec": {"containers": [
        {"name": "c", "resources": {"limits": {"cpu": "1"}}}]}}
    cache.parse({"Pod": good})
    for bad in ({"metadata": {"name": "p"}, "spec": {"containers": [
                    {"name": "c", "resources": {"limits": {"cpu": "lots"}}}]}},
                {"metadata": {"name": 3}, "spec": good["spec"]},
                {"metadata": {"name": "p", "uid": 7}, "spec": good["spec"]},
                {"metadata": {"name": "p"}, "spec": {"containers": []}},
                {"kind": "Deployment", **good},
                "not a pod"):
        with pytest.raises((InputError, BadRequest)) as want:
            pod_of({"Pod": bad})
        with pytest.raises(type(want.value)) as got:
            cache.parse({"Pod": bad})
        assert str(got.value) == str(want.value)


def test_unique_names_and_annotations_share_one_template() -> None:
    cache = PodCache(ExtenderCore(log=io.StringIO()).shape_id)
    shapes = set()
    for i in range(500):
        raw = {"metadata": {"name": f"p{i}", "uid": f"u{i}", "annotations": {f"k{i}": "v" * i}},
               "spec": {"containers": [{"name": "c", "image": f"img:{i}",
                                        "resources": {"limits": {"cpu": "2", "memory": "1Gi"}}}]}}
        pod, shape = cache.parse({"Pod": raw})
        assert (pod.name, pod.uid, dict(pod.annotations)) == (f"p{i}", f"u{i}", {})
        shapes.add(shape)
    assert len(cache) == 1 and cache.misses == 1 and cache.hits == 499 and len(shapes) == 1
