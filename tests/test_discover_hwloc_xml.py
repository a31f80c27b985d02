"""Discovery from the hwloc XML topologies of ../shared/topologies/hwloc/xml (and x86/).

Each file is read by numalign and compared with what the XML says when read directly here
(NUMANode ``os_index``/``local_memory``, PU ids and the NUMA node whose cpuset holds them, the
``NUMALatency`` ``distances2`` matrix), with the extra ``.console`` rendering where upstream has
one, and with the device facts of INDEX.md (GPUs, NICs and their NUMA nodes).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import pytest

from numalign.errors import InputError
from numalign.machine.hwloc import (
    hwloc_synthetic,
    load_hwloc_xml,
    lstopo_available,
    parse_hwloc_bitmap,
    parse_hwloc_xml,
)
from numalign.machine.sysfs import Discovery
from test_discover_captures import check_against_console

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
HWLOC = SHARED / "topologies" / "hwloc"
XML_FILES = sorted((HWLOC / "xml").glob("*.xml")) if (HWLOC / "xml").is_dir() else []
needs_shared = pytest.mark.skipif(
    not HWLOC.is_dir(), reason=f"{HWLOC} not found: ../shared is not beside this checkout"
)

_cache: dict[str, Discovery] = {}


def load(name: str) -> Discovery:
    if name not in _cache:
        path = HWLOC / "xml" / name
        if not path.exists():
            path = HWLOC / "x86" / name
        _cache[name] = load_hwloc_xml(path)
    return _cache[name]


def direct(
    path: Path,
) -> tuple[dict[int, int], dict[int, frozenset[int]], set[int], dict[int, dict[int, int]] | None]:
    """(memory per node, cpuset per node, PU ids, latency matrix) straight from the XML."""
    root = ET.parse(path).getroot()
    memory: dict[int, int] = {}
    cpusets: dict[int, frozenset[int]] = {}
    pus: set[int] = set()
    for o in root.iter("object"):
        if o.get("type") == "NUMANode":
            i = int(o.get("os_index", "0"))
            memory[i] = int(o.get("local_memory", "0"))
            cpusets[i] = parse_hwloc_bitmap(o.get("cpuset", ""))
        elif o.get("type") == "PU":
            pus.add(int(o.get("os_index", "-1")))
    latency = None
    for d in root.iter("distances2"):
        if d.get("type") == "NUMANode" and d.get("name") == "NUMALatency":
            assert d.get("indexing") == "os"
            idx = [int(x) for e in d.findall("indexes") for x in (e.text or "").split()]
            vals = [int(x) for e in d.findall("u64values") for x in (e.text or "").split()]
            n = len(idx)
            latency = {
                a: {b: vals[r * n + c] for c, b in enumerate(idx)} for r, a in enumerate(idx)
            }
    return memory, cpusets, pus, latency


@needs_shared
def test_every_xml_file_is_covered() -> None:
    assert len(XML_FILES) == 8


@needs_shared
@pytest.mark.parametrize("path", XML_FILES, ids=[p.name for p in XML_FILES])
def test_xml_matches_its_content(path: Path) -> None:
    d = load(path.name)
    m = d.machine
    memory, cpusets, pus, latency = direct(path)
    assert m.node_ids == tuple(sorted(memory))
    for n in m.numa_nodes:
        assert n.memory == memory[n.id]
    assert {c.id for c in m.cpus} == pus
    for c in m.cpus:
        assert c.id in cpusets[c.numa], f"CPU {c.id} not in node {c.numa}'s cpuset"
    for i, cpus in m.cpus_by_numa.items():
        assert cpus <= cpusets[i]
    if latency is None:
        assert not any(n.distances for n in m.numa_nodes)
    else:
        assert {n.id: dict(n.distances) for n in m.numa_nodes} == latency
    console = path.with_suffix(".console")
    if console.exists():
        check_against_console(m, d, console.read_text(), hides=False)


@needs_shared
def test_dgx2_gpus_eight_per_node() -> None:
    gpus = load("nvidiaDGX2.xml").machine.devices_of("nvidia.com/gpu")
    assert len(gpus) == 16
    assert Counter(g.numa for g in gpus) == {(0,): 8, (1,): 8}
    # two GPUs per PCIe switch below 4 root ports per socket
    assert len({g.pcie_root for g in gpus}) == 4


@needs_shared
def test_gpu_boxes() -> None:
    gpus = load("power8gpudistances.xml").machine.devices_of("nvidia.com/gpu")
    assert Counter(g.numa for g in gpus) == {(0,): 2, (1,): 2}
    m = load("power8gpudistances.xml").machine
    assert m.node_by_id[0].distances == {0: 10, 1: 40}
    gpus = load("24em64t-2n6c2t-pci.xml").machine.devices_of("nvidia.com/gpu")
    assert Counter(g.numa for g in gpus) == {(0,): 1, (1,): 2}
    # the onboard ATI ES1000 management VGA is not a GPU resource
    assert not load("24em64t-2n6c2t-pci.xml").machine.devices_of("amd.com/gpu")
    assert load("24em64t-2n6c2t-pci.xml").machine.devices_of("rdma/hca")[0].numa == (0,)


@needs_shared
def test_nics() -> None:
    eth = [p for p in load("16intel64-manyVFs.xml").pci if p.class_code == 0x0200]
    assert Counter(p.numa for p in eth) == {(0,): 11, (1,): 7}
    eth = [p for p in load("96em64t-4n4d3ca2co-pci.xml").pci if p.class_code == 0x0200]
    assert Counter(p.numa for p in eth) == {(0,): 2, (1,): 2, (2,): 2, (3,): 2}


@needs_shared
def test_big_and_heterogeneous() -> None:
    m = load("192em64t-24n8c2t.xml").machine
    assert m.node_ids == tuple(range(24)) and len(m.cpus) == 384 and m.cpus_per_core == 2
    assert sorted({v for n in m.numa_nodes for v in n.distances.values()}) == [10, 50, 65, 79]
    m = load("64intel64-heteromem.xml").machine
    assert sorted(i for i, c in m.cpus_by_numa.items() if not c) == [4, 5, 6, 7]  # HBM
    assert sum(len(c) for c in m.cpus_by_numa.values()) == 64
    # several distances2 blocks: the NUMA latency one is used
    m = load("16amd64-4distances.xml").machine
    assert m.node_by_id[1].distances[1] == 10 and m.has_distances
    m = load("AMD-19h-Zen4-2xEpyc-9654.xml").machine
    assert len(m.cpus) == 384 and len({c.core for c in m.cpus}) == 192
    assert len({c.uncore_cache for c in m.cpus}) == 24


def test_v1_document() -> None:
    doc = """<?xml version="1.0"?>
<topology>
  <object type="Machine" os_index="0" cpuset="0x0000000f">
    <object type="NUMANode" os_index="0" cpuset="0x00000003" local_memory="1073741824">
      <page_type size="4096" count="0"/>
      <page_type size="2097152" count="4"/>
      <object type="Socket" os_index="0" cpuset="0x00000003">
        <object type="Cache" depth="3" cpuset="0x00000003" cache_size="1">
          <object type="Core" os_index="0" cpuset="0x00000003">
            <object type="PU" os_index="0" cpuset="0x00000001"/>
            <object type="PU" os_index="1" cpuset="0x00000002"/>
          </object>
        </object>
      </object>
      <object type="Bridge" bridge_type="0-1">
        <object type="PCIDev" pci_busid="0000:01:00.0" pci_type="0302 [10de:1db8] [10de:0000] a1">
          <object type="OSDev" name="cuda0" osdev_type="5"/>
        </object>
      </object>
    </object>
    <object type="NUMANode" os_index="1" cpuset="0x0000000c" local_memory="2147483648">
      <object type="Socket" os_index="1" cpuset="0x0000000c">
        <object type="Core" os_index="0" cpuset="0x00000004"><object type="PU" os_index="2"/></object>
        <object type="Core" os_index="1" cpuset="0x00000008"><object type="PU" os_index="3"/></object>
      </object>
    </object>
  </object>
  <distances nbobjs="2" relative_depth="1" latency_base="10.000000">
    <latency value="1.000000"/><latency value="2.100000"/>
    <latency value="2.100000"/><latency value="1.000000"/>
  </distances>
</topology>"""
    d = parse_hwloc_xml(doc, "v1.xml")
    m = d.machine
    assert m.node_ids == (0, 1)
    assert m.cpus_by_numa == {0: frozenset({0, 1}), 1: frozenset({2, 3})}
    assert (
        m.cpu_by_id[1].core == 0 and m.cpu_by_id[3].core == 3 and m.cpu_by_id[0].uncore_cache == 0
    )
    assert m.node_by_id[0].hugepages == {2097152: 4 * 2097152}
    assert m.node_by_id[1].distances == {0: 21, 1: 10}
    (gpu,) = m.devices_of("nvidia.com/gpu")
    assert gpu.numa == (0,) and gpu.bus_id == "0000:01:00.0"
    assert d.pci[0].osdevs == ("cuda0",)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('<?xml version="1.0"?><topology version="2.0"><object type="Machine"', "malformed XML"),
        ("<html/>", "not an hwloc topology"),
        ('<topology version="2.0"></topology>', "no top-level <object>"),
        (
            '<!DOCTYPE t [<!ENTITY a "aaaa">]><topology>&a;</topology>',
            "entity declarations are not accepted",
        ),
        (
            '<topology version="2.0"><object type="Machine"><object type="PU"/></object></topology>',
            "PU without os_index",
        ),
    ],
)
def test_malformed_xml(text: str, message: str) -> None:
    with pytest.raises(InputError) as e:
        parse_hwloc_xml(text, "bad.xml")
    assert message in e.value.message and e.value.message.startswith("bad.xml: ")
    assert "\n" not in e.value.message


@needs_shared
def test_truncated_real_file(tmp_path: Path) -> None:
    text = (HWLOC / "xml" / "nvidiaDGX2.xml").read_text()
    bad = tmp_path / "cut.xml"
    bad.write_text(text[: len(text) // 2])
    with pytest.raises(InputError, match="malformed XML"):
        load_hwloc_xml(bad)


def test_bitmaps() -> None:
    assert parse_hwloc_bitmap("0x00000003") == {0, 1}
    assert parse_hwloc_bitmap("0x000000ff,0xffffffff") == set(range(40))
    assert parse_hwloc_bitmap("0xf...f,0x00000001") == {0}
    assert parse_hwloc_bitmap("") == frozenset()


def test_synthetic_needs_lstopo() -> None:
    if not lstopo_available():
        with pytest.raises(InputError, match="lstopo is not installed"):
            hwloc_synthetic("pack:2 numa:2 core:2 pu:2")
        pytest.skip("Debian's hwloc (lstopo) is not installed: synthetic topologies unavailable")
    m = hwloc_synthetic("pack:2 numa:2 core:2 pu:2").machine
    assert len(m.node_ids) == 4 and len(m.cpus) == 16 and m.cpus_per_core == 2
