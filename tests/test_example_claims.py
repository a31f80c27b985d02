"""What the examples and docs say numalign models is what it models (issue 23:
``examples/fig1.yaml`` called ``evictionHard`` "not modelled; ignored"; a KubeletConfiguration's
``maxPods`` was dropped by ``--kubelet-config`` although machine specs model it)."""

from __future__ import annotations

import re

import pytest

from conftest import REPO
from numalign.errors import InputError
from numalign.machine.allocatable import node_allocatable, node_capacity
from numalign.machine.kubelet_config import (
    MODELLED_FIELDS,
    kubelet_section,
    with_kubelet_configuration,
)
from numalign.machine.spec import read_machine_file

EXAMPLES = REPO / "examples"
NOT_MODELLED = re.compile(r"not model+ed|ignored|unsupported|not supported", re.I)


def test_no_example_comment_calls_a_modelled_field_ignored() -> None:
    claims = []
    for path in sorted(EXAMPLES.rglob("*.yaml")):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            code, _, comment = line.partition("#")
            key = code.strip().lstrip("- ").split(":", 1)[0].strip()
            if key in MODELLED_FIELDS and NOT_MODELLED.search(comment):
                claims.append(f"{path.relative_to(REPO)}:{n}: {line.strip()}")
    assert not claims


def test_fig1_eviction_hard_is_taken_off_allocatable_memory() -> None:
    fig1 = read_machine_file(str(EXAMPLES / "fig1.yaml"))
    reserved = (1 << 30) + (100 << 20)  # systemReserved 1Gi + evictionHard memory.available 100Mi
    assert node_allocatable(fig1)["memory"] == node_capacity(fig1)["memory"] - reserved


def test_docs_name_every_field_a_kubelet_configuration_carries() -> None:
    text = (REPO / "docs" / "kubernetes.md").read_text()
    listed = text.split("field names:", 1)[1].split("Other fields are ignored", 1)[0]
    for name in MODELLED_FIELDS:
        assert f"`{name}`" in listed or (name.startswith("topologyManager") and "`topologyManager*`" in listed) \
            or (name.startswith("cpuManagerPolicy") and "`cpuManagerPolicy[Options]`" in listed), name


def test_kubelet_config_carries_max_pods_and_eviction_hard() -> None:
    fig1 = read_machine_file(str(EXAMPLES / "fig1.yaml"))
    config = {"kind": "KubeletConfiguration", "maxPods": 8, "evictionHard": {"memory.available": "1Gi"}}
    machine = with_kubelet_configuration(fig1, kubelet_section(config), "config.yaml")
    assert machine.kubelet.max_pods == 8 and node_capacity(machine)["pods"] == 8
    assert node_allocatable(machine)["memory"] == node_capacity(machine)["memory"] - (1 << 30)
    with pytest.raises(InputError, match="maxPods: expected an integer, got str '8'"):
        kubelet_section({"maxPods": "8"})
