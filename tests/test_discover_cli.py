"""`numalign discover`: live system, every source and output, quirky sysfs trees built here,
device naming rules, and malformed inputs (one-line error, exit status 2)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from numalign.cli import main
from numalign.errors import InputError
from numalign.inputs.cpulist import parse_cpumask
from numalign.inputs.cpulist import parse_kernel_cpulist as parse_cpulist
from numalign.machine.devices_naming import PciDevice, load_rules, parse_rules
from numalign.machine.sysfs import load_sysfs, read_sysfs

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
LINUX = SHARED / "topologies" / "hwloc" / "linux"
XML = SHARED / "topologies" / "hwloc" / "xml"
needs_shared = pytest.mark.skipif(
    not LINUX.is_dir(), reason=f"{LINUX} not found: ../shared is not beside this checkout"
)
live_sysfs = pytest.mark.skipif(
    not Path("/sys/devices/system/cpu").is_dir(), reason="no Linux sysfs on this host"
)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(["discover", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


# ------------------------------------------------------------------ live


@live_sysfs
def test_live_matches_lscpu_and_sysfs(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(capsys, "-o", "json")
    assert rc == 0
    doc = json.loads(out)
    online = {c["id"]: c for c in doc["cpus"] if c.get("online", True)}
    sys_online = parse_cpulist(Path("/sys/devices/system/cpu/online").read_text())
    assert set(online) == set(sys_online)
    node_dir = Path("/sys/devices/system/node")
    if (node_dir / "online").exists():
        assert {n["id"] for n in doc["numaNodes"]} == set(
            parse_cpulist((node_dir / "online").read_text())
        )
    lscpu = shutil.which("lscpu")
    if lscpu is None:
        pytest.skip("lscpu not installed; compared with sysfs only")
    text = subprocess.run([lscpu, "-p=CPU,NODE"], capture_output=True, text=True, check=True).stdout
    rows = [line.split(",") for line in text.splitlines() if line and not line.startswith("#")]
    assert {int(cpu) for cpu, _ in rows} == set(online)
    for cpu, node in rows:
        if node:
            assert online[int(cpu)]["numa"] == int(node)
    assert len(os.sched_getaffinity(0)) <= len(online)


@live_sysfs
def test_live_table_and_nrt(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(capsys, "-o", "table")
    assert (rc == 0 and "node 0 cpus:" in out) or "cpus:" in out
    assert "node distances" in out
    rc, out, _ = run(capsys, "-o", "nrt")
    obj = yaml.safe_load(out)
    assert rc == 0 and obj["kind"] == "NodeResourceTopology"
    assert all(z["name"].startswith("node-") for z in obj["zones"])


# ------------------------------------------------------------------ captures through the CLI


@needs_shared
def test_capture_outputs(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    tar = str(LINUX / "32intel64-2p8co2t+8ve.tar.bz2")
    rc, out, _ = run(capsys, "--sysfs-root", tar, "-o", "yaml")
    assert rc == 0
    doc = yaml.safe_load(out)
    assert len(doc["numaNodes"]) == 2 and len(doc["cpus"]) == 32
    assert sum(1 for d in doc["devices"] if d["resource"] == "nec.com/ve") == 8
    rc, out, _ = run(capsys, "--sysfs-root", tar, "-o", "table")
    assert "node 0 devices: nec.com/ve x8, rdma/hca x2" in out
    assert "   0:  10  21" in out
    rc, out, _ = run(capsys, "--sysfs-root", tar, "-o", "nrt")
    nrt_file = tmp_path / "nrt.yaml"
    nrt_file.write_text(out)
    rc, out, _ = run(capsys, "--nrt", str(nrt_file), "-o", "json")
    back = json.loads(out)
    assert rc == 0 and len(back["cpus"]) == 32
    # the machine spec from discover is loadable by the spec reader
    from numalign.machine.spec import load_machine

    assert len(load_machine(doc).node_ids) == 2


@needs_shared
def test_warnings_go_to_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = run(
        capsys, "--sysfs-root", str(LINUX / "offline-cpu0-node0.tar.bz2"), "-o", "json"
    )
    assert rc == 0
    json.loads(out)  # stdout is only the document
    assert "warning: NUMA node 0 is offline" in err


@needs_shared
def test_hwloc_xml_source(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run(capsys, "--hwloc-xml", str(XML / "nvidiaDGX2.xml"), "-o", "table")
    assert rc == 0
    assert "node 0 devices: nvidia.com/gpu x8" in out
    assert "node 1 devices: nvidia.com/gpu x8" in out


# ------------------------------------------------------------------ malformed inputs


def _one_line_error(rc: int, out: str, err: str, text: str) -> None:
    assert rc == 2, (out, err)
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("numalign discover: error: "), err
    assert text in lines[0]


def test_truncated_xml(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    f = tmp_path / "t.xml"
    f.write_text('<?xml version="1.0"?>\n<topology version="2.0">\n  <object type="Machine"')
    _one_line_error(*run(capsys, "--hwloc-xml", str(f)), "malformed XML")


def test_not_a_sysfs_root(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "etc").mkdir()
    _one_line_error(*run(capsys, "--sysfs-root", str(tmp_path)), "not a sysfs root")
    _one_line_error(
        *run(capsys, "--sysfs-root", str(tmp_path / "missing")), "no such file or directory"
    )
    junk = tmp_path / "junk.tar.gz"
    junk.write_bytes(b"not a tarball")
    _one_line_error(*run(capsys, "--sysfs-root", str(junk)), "cannot read capture")


def test_bad_nrt_quantity(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    f = tmp_path / "nrt.yaml"
    f.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "topology.node.k8s.io/v1alpha2",
                "kind": "NodeResourceTopology",
                "metadata": {"name": "n"},
                "zones": [
                    {
                        "name": "node-0",
                        "type": "Node",
                        "resources": [
                            {"name": "cpu", "capacity": "4", "allocatable": "4", "available": "4"},
                            {
                                "name": "memory",
                                "capacity": "64Gibibytes",
                                "allocatable": "1",
                                "available": "1",
                            },
                        ],
                    }
                ],
            }
        )
    )
    _one_line_error(*run(capsys, "--nrt", str(f)), "invalid quantity")
    f.write_text("zones: [\n")
    _one_line_error(*run(capsys, "--nrt", str(f)), "malformed YAML")


def test_bad_device_rules(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    f = tmp_path / "rules.yaml"
    f.write_text("rules:\n  - {resource: x/y, kind: gpu}\n")
    _one_line_error(*run(capsys, "--device-rules", str(f)), "rules[0].kind")


def test_one_source_only(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["discover", "--nrt", "a", "--hwloc-xml", "b"])
    capsys.readouterr()


# ------------------------------------------------------------------ quirky trees built here


def _write(root: Path, rel: str, text: str | bytes) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        p.write_bytes(text)
    else:
        p.write_text(text)


def _cpu(root: Path, cpu: int, core: int, pkg: int, siblings: str, online: bool = True) -> None:
    base = f"sys/devices/system/cpu/cpu{cpu}"
    _write(root, f"{base}/topology/core_id", f"{core}\n")
    _write(root, f"{base}/topology/physical_package_id", f"{pkg}\n")
    _write(root, f"{base}/topology/thread_siblings_list", f"{siblings}\n")
    _write(root, f"{base}/online", "1\n" if online else "0\n")
    _write(root, f"{base}/cache/index3/level", "3\n")
    _write(root, f"{base}/cache/index3/shared_cpu_list", "0-3\n" if pkg == 0 else "4-7\n")


def _pci(root: Path, path: str, cls: str, vendor: str, numa: int, **extra: str) -> Path:
    dev = root / "sys/devices" / path
    dev.mkdir(parents=True, exist_ok=True)
    (dev / "class").write_text(cls + "\n")
    (dev / "vendor").write_text(vendor + "\n")
    (dev / "device").write_text("0x1234\n")
    (dev / "numa_node").write_text(f"{numa}\n")
    for k, v in extra.items():
        (dev / k).write_text(v + "\n")
    link = root / "sys/bus/pci/devices" / dev.name
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(os.path.relpath(dev, link.parent))
    return dev


def quirky_tree(root: Path) -> Path:
    """2 sockets x 2 cores x 2 threads; nodes 0 and 3 (3 is the second socket), node 5 is
    memory-only, node 3's cpulist padded with NULs, node 5 without meminfo, CPU 7 offline;
    a GPU, an SR-IOV PF with two VFs, and an RDMA NIC."""
    for cpu in range(8):
        pkg = cpu // 4
        core = (cpu % 4) // 2
        first = cpu - cpu % 2
        _cpu(root, cpu, core, pkg, f"{first}-{first + 1}", online=cpu != 7)
    _write(root, "sys/devices/system/cpu/online", "0-6\n")
    node = "sys/devices/system/node"
    _write(root, f"{node}/online", "0,3,5\n")
    _write(root, f"{node}/possible", "0-7\n")
    _write(root, f"{node}/node0/cpulist", "0-3\n")
    _write(root, f"{node}/node3/cpulist", b"4-7\n\x00\x00\x00\x00")
    _write(root, f"{node}/node5/cpulist", "\n")
    for n, kb in ((0, 4 << 20), (3, 4 << 20)):
        _write(
            root,
            f"{node}/node{n}/meminfo",
            f"Node {n} MemTotal:  {kb} kB\nNode {n} MemFree: 1 kB\n",
        )
        _write(root, f"{node}/node{n}/hugepages/hugepages-1048576kB/nr_hugepages", "2\n")
    _write(root, f"{node}/node0/distance", "10 21 31\n")
    _write(root, f"{node}/node3/distance", "21 10 31\n")
    _write(root, f"{node}/node5/distance", "31 31 10\n")
    _pci(root, "pci0000:00/0000:00:01.0/0000:01:00.0", "0x030200", "0x10de", 0)
    pf = _pci(
        root, "pci0000:80/0000:80:02.0/0000:81:00.0", "0x020000", "0x8086", 3, sriov_numvfs="2"
    )
    (pf / "net" / "ens1f0").mkdir(parents=True)
    for k in range(2):
        vf = _pci(root, f"pci0000:80/0000:80:02.0/0000:81:00.{k + 1}", "0x020000", "0x8086", 3)
        (vf / "physfn").symlink_to("../0000:81:00.0")
        (pf / f"virtfn{k}").symlink_to(f"../0000:81:00.{k + 1}")
    ib = _pci(root, "pci0000:80/0000:80:03.0/0000:82:00.0", "0x020700", "0x15b3", 3)
    (ib / "infiniband" / "mlx5_0").mkdir(parents=True)
    _pci(root, "pci0000:00/0000:00:1f.0", "0x060100", "0x8086", -1)  # ISA bridge: skipped
    return root


def test_quirky_tree(tmp_path: Path) -> None:
    d = read_sysfs(quirky_tree(tmp_path))
    m = d.machine
    w = "\n".join(d.warnings)
    assert m.node_ids == (0, 3, 5)
    assert m.cpus_by_numa == {0: frozenset({0, 1, 2, 3}), 3: frozenset({4, 5, 6}), 5: frozenset()}
    assert not m.cpu_by_id[7].online
    assert [c.core for c in m.cpus] == [0, 0, 2, 2, 4, 4, 6, 6]
    assert m.cpus_per_core == 2 and m.cpu_by_id[5].uncore_cache == 4
    assert m.node_by_id[3].distances == {0: 21, 3: 10, 5: 31}
    assert m.node_by_id[0].hugepages == {1 << 30: 2 << 30}
    assert m.node_by_id[5].memory == 0
    for text in (
        "not 0..2: 0,3,5",
        "NUL",
        "node 5: no MemTotal",
        "5 have no CPUs",
        "CPUs 7 are offline",
    ):
        assert text in w, w
    by_res = {dev.resource: dev for dev in m.devices}
    assert by_res["nvidia.com/gpu"].numa == (0,)
    assert by_res["nvidia.com/gpu"].pcie_root == "0000:00:01.0"
    vfs = m.devices_of("sriov/ens1f0")
    assert [v.id for v in vfs] == ["0000:81:00.1", "0000:81:00.2"] and vfs[0].numa == (3,)
    assert m.devices_of("rdma/hca")[0].numa == (3,)
    pf = next(p for p in d.pci if p.bus_id == "0000:81:00.0")
    assert pf.sriov_numvfs == 2 and pf.virtfns == ("0000:81:00.1", "0000:81:00.2")
    assert not any(p.is_bridge for p in d.pci)


def test_buggy_firmware_overlap(tmp_path: Path) -> None:
    root = quirky_tree(tmp_path)
    _write(root, "sys/devices/system/node/node3/cpulist", "3-7\n")  # CPU 3 on two nodes
    d = read_sysfs(root)
    assert "listed on several NUMA nodes" in "\n".join(d.warnings)
    assert d.machine.cpu_by_id[3].numa == 0


def test_no_node_directory(tmp_path: Path) -> None:
    root = quirky_tree(tmp_path)
    shutil.rmtree(root / "sys/devices/system/node")
    _write(root, "proc/meminfo", "MemTotal:  1024 kB\n")
    d = read_sysfs(root)
    assert d.machine.node_ids == (0,) and d.machine.node_by_id[0].memory == 1 << 20
    assert "no NUMA information" in d.warnings[0]


def test_device_rules_file(tmp_path: Path) -> None:
    root = quirky_tree(tmp_path / "tree")
    rules = tmp_path / "rules.yaml"
    rules.write_text(
        "defaults: false\n"
        "rules:\n"
        "  - {resource: null, vendor: '0x10de'}\n"
        "  - {resource: 'intel.com/{pf}_vf', kind: vf}\n"
        "  - {resource: 'nic/{vendor}', class: '02'}\n"
    )
    m = load_sysfs(root, load_rules(rules)).machine
    assert m.device_resources == ("intel.com/ens1f0_vf", "nic/intel", "nic/mellanox")
    assert len(m.devices_of("intel.com/ens1f0_vf")) == 2


def test_default_rules() -> None:
    rules = parse_rules(None)

    def name(**kw: object) -> str | None:
        base: dict[str, object] = {"bus_id": "0000:01:00.0", "vendor": 0, "device": 0}
        base.update(kw)
        return rules.resource_of(PciDevice(**base))  # type: ignore[arg-type]

    assert name(vendor=0x10DE, class_code=0x0302) == "nvidia.com/gpu"
    assert name(vendor=0x10DE, class_code=0x0300) == "nvidia.com/gpu"
    assert name(vendor=0x1002, class_code=0x0380) == "amd.com/gpu"
    assert name(vendor=0x1002, device=0x515E, class_code=0x0300) is None  # BMC VGA
    assert name(vendor=0x1BCF, class_code=0x0B40) == "nec.com/ve"
    assert name(vendor=0x1E52, class_code=0x1200) == "accelerator/habana"
    assert name(vendor=0x8086, class_code=0x0200, rdma=("irdma0",)) == "rdma/hca"
    assert name(vendor=0x8086, class_code=0x0200, physfn="0000:81:00.0") == "sriov/0000_81_00.0"
    assert name(vendor=0x8086, class_code=0x0200) is None
    with pytest.raises(InputError, match=r"rules\[0\]\.vendor"):
        parse_rules({"rules": [{"resource": "a/b", "vendor": "zz"}]})


def test_list_formats() -> None:
    assert parse_cpulist("0-3,8,10-11") == {0, 1, 2, 3, 8, 10, 11}
    # the kernel's stride syntax is a-b:used/group (issue 11: "0-7:2" was read as a step)
    assert parse_cpulist("0-7:2/4") == {0, 1, 4, 5}
    with pytest.raises(InputError):
        parse_cpulist("0-7:2")
    assert parse_cpumask("00000000,00000101") == {0, 8}
    assert parse_cpumask("ff,00000000") == set(range(32, 40))
    with pytest.raises(InputError):
        parse_cpulist("3-1")


@needs_shared
def test_64_numa_capture_discover_then_admit(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """discover -o yaml on the 64-node capture, add a kubelet config, `numalign admit` a pod."""
    rc, out, _ = run(capsys, "--sysfs-root", str(LINUX / "256ia64-64n2s2c.tar.bz2"), "-o", "yaml")
    assert rc == 0
    doc = yaml.safe_load(out)
    assert len(doc["numaNodes"]) == 64
    doc["kubelet"] = {
        "topologyManagerPolicy": "single-numa-node",
        "topologyManagerPolicyOptions": {"max-allowable-numa-nodes": "64"},
        "cpuManagerPolicy": "static",
        "reservedSystemCPUs": "0",
    }
    machine = tmp_path / "m.yaml"
    machine.write_text(yaml.safe_dump(doc))
    pod = tmp_path / "pod.yaml"
    pod.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "g4", "namespace": "default"},
                "spec": {
                    "containers": [
                        {
                            "name": "c",
                            "resources": {
                                "limits": {"cpu": "4", "memory": "1Gi"},
                                "requests": {"cpu": "4", "memory": "1Gi"},
                            },
                        }
                    ]
                },
            }
        )
    )
    try:
        rc = main(["admit", str(pod), "--machine", str(machine), "-o", "json"])
    except SystemExit as e:  # the node side's CLI is not there yet
        pytest.skip(f"numalign admit unavailable: {e}")
    out, err = capsys.readouterr()
    assert rc == 0, (out, err)
    (result,) = json.loads(out)["pods"]
    assert result["admitted"] is True and len(parse_cpulist(result["containers"][0]["cpus"])) == 4
