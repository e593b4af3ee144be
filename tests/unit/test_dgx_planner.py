"""The planner on DGX-class servers (issue 21): InfiniBand HCAs, numa=off, a cut lscpu -p, one bad
local_cpulist, and the wording of "every NIC is SYS to every GPU".

The host is the real DGX A100-class capture of tests/fixtures/hosts/public (one host:
``lscpu-2s-8numa-epyc7742-8xa100sxm.txt`` and ``topo-8xa100sxm-10nic-8numa.txt``: 2x EPYC 7742 in
NPS4, 8 NUMA nodes, 8 A100-SXM, 10 mlx5 RDMA devices).  What was not published is derived here, in
the facts' own line formats, and said so where it is built:

- ``lscpu -p`` rows from the plain lscpu of that host: CPU c is core c % 128 (2 threads per core:
  c and c + 128), socket (c % 128) // 64 (inferred from the CPU numbering: nodes 0-3 hold CPUs 0-63
  and 128-191), NUMA node from lscpu's own "NUMA nodeN CPU(s)" lists, L3 id (c % 128) // 4 (one
  16 MiB L3 per 4-core CCX: 32 x 16 MiB = the 512 MiB lscpu prints); the sysfs ``node N cpulist``
  lines are those same lists.
- ``pci.devices`` lines: GPUs on the NUMA node nvidia-smi's NUMA Affinity gives them; NIC0-NIC7
  (mlx5_0..mlx5_7, PXB to one GPU pair each) as InfiniBand HCAs without IPoIB (class 0x020700, an
  RDMA device and no netdev), each on its GPU pair's node; NIC8/NIC9 (mlx5_8/9, SYS to every GPU)
  as a dual-port Ethernet card on node 6.  PCI addresses, node 6 and the MSI-X IRQ numbers are made
  up; a real DGX lists more IRQs per HCA.
- ``numa=off``: the same host booted with it.  The kernel then shows one node 0 with every CPU
  (lscpu's Node column 0, one sysfs node), every device's numa_node is -1 and its local_cpulist is
  every CPU, and nvidia-smi prints CPU Affinity "all CPUs" and NUMA Affinity 0 for every GPU, as
  the real H200 VM capture (h200-vm/: numa_node -1, one node) shows it does.  The kernel command
  line is the H200 VM's real one with ``numa=off`` added before its ``--`` (the words after it are init's).

Each test goes through the facts' parsers and, where it can, through ``invoke topology --facts`` and
``invoke checklist --facts`` with a facts file written the way ``invoke facts`` writes it (gathered by
:func:`bringup.facts.gather.gather` from the derived outputs).
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from bringup.facts.cpu import CpuTopology, parse_lscpu_parse
from bringup.facts.gather import gather
from bringup.facts.net import parse_net_interfaces
from bringup.facts.nvidia import NvidiaTopo
from bringup.facts.nvidia_topo import parse_topo_matrix
from bringup.facts.pci import PciDevices, parse_pci_devices
from bringup.facts.system import SystemCmdline, parse_cmdline
from bringup.hardware.platform import checks
from bringup.project import content_root
from bringup.engine.roles import FactView, HostContext, load_roles
from bringup.engine.templates import Templates
from bringup.hardware.topology import plan_topology
from harness.captures import parse_lscpu_plain, strip_comments

from .fixture_hosts import FIX
from .test_fact_trust import _ShTransport

REPO = Path(__file__).resolve().parents[2]
PUB = FIX / "public"
LSCPU = "lscpu-2s-8numa-epyc7742-8xa100sxm.txt"
TOPO = "topo-8xa100sxm-10nic-8numa.txt"


def pub(name: str) -> str:
    return strip_comments((PUB / name).read_text())


def numa_lists() -> dict[int, list[int]]:
    """The host's NUMA nodes as its plain lscpu prints them."""
    return {int(k): v for k, v in parse_lscpu_plain(pub(LSCPU))["numa_nodes"].items()}


NODES = numa_lists()
GPU_NODES = [3, 3, 1, 1, 7, 7, 5, 5]  # topo -m's NUMA Affinity of GPU0..GPU7
SOCKET_OF_NODE = {n: 0 if n < 4 else 1 for n in range(8)}


def lscpu_p(numa_off: bool = False, drop: set[int] = frozenset()) -> str:
    """What the cpu.topology fact prints on this host (derived, see the module docstring); with
    ``numa_off`` every CPU on node 0; rows of ``drop`` left out (a cut output)."""
    node_of = {c: n for n, cs in NODES.items() for c in cs}
    rows = ["# CPU,Core,Socket,Node,L1d:L1i:L2:L3"]
    for c in range(256):
        if c in drop:
            continue
        core = c % 128
        rows.append(f"{c},{core},{core // 64},{0 if numa_off else node_of[c]},{core}:{core}:{core}:{core // 4}")
    rows.append("---")
    rows += ["node 0 0-255"] if numa_off else [f"node {n} " + ",".join(map(str, cs)) for n, cs in NODES.items()]
    return "\n".join(rows) + "\n"


GPUS = ["0000:07:00.0", "0000:0f:00.0", "0000:47:00.0", "0000:4e:00.0",
        "0000:87:00.0", "0000:90:00.0", "0000:b7:00.0", "0000:bd:00.0"]
HCAS = ["0000:0c:00.0", "0000:12:00.0", "0000:4b:00.0", "0000:54:00.0",
        "0000:8d:00.0", "0000:94:00.0", "0000:ba:00.0", "0000:cc:00.0"]
ETH = ["0000:e1:00.0", "0000:e1:00.1"]


def hca_irqs(k: int) -> list[int]:
    return list(range(200 + 10 * k, 204 + 10 * k))  # made up: 4 MSI-X vectors per HCA


def cpus(node: int) -> str:
    return ",".join(map(str, NODES[node]))


def pci_lines(numa_off: bool = False, bad: dict[str, str] | None = None, slow_link: str = "") -> str:
    """The pci.devices fact's lines for this host (derived, see the module docstring); ``bad`` maps an
    address to the local_cpulist it prints instead; ``slow_link`` runs at x8 of x16."""
    bad = bad or {}

    def where(node: int, addr: str) -> str:
        if addr in bad:
            return f"numa={-1 if numa_off else node} cpus={bad[addr]}"
        return "numa=-1 cpus=0-255" if numa_off else f"numa={node} cpus={cpus(node)}"

    def link(addr: str) -> str:
        return f"lsc=16.0 lsm=16.0 lwc={8 if addr == slow_link else 16} lwm=16"

    out = []
    for i, addr in enumerate(GPUS):
        out.append(f"{addr} class=0x030200 vendor=0x10de device=0x20b0 {where(GPU_NODES[i], addr)} driver=nvidia "
                   f"irq=0 irqs= rdma= net= {link(addr)}")
    for k, addr in enumerate(HCAS):
        irqs = ",".join(map(str, hca_irqs(k)))
        out.append(f"{addr} class=0x020700 vendor=0x15b3 device=0x101b {where(GPU_NODES[k], addr)} "
                   f"driver=mlx5_core irq=0 irqs={irqs} rdma=mlx5_{k} net= {link(addr)}")
    for j, addr in enumerate(ETH):
        out.append(f"{addr} class=0x020000 vendor=0x15b3 device=0x101d {where(6, addr)} driver=mlx5_core irq=0 "
                   f"irqs={300 + 2 * j},{301 + 2 * j} rdma=mlx5_{8 + j} net=enp225s0f{j} {link(addr)}")
    return "\n".join(out) + "\nend=pci\n"  # the command's last line: an output without it was cut short


def topo_numa_off() -> str:
    """The real topo -m as nvidia-smi prints it on this host booted with numa=off (derived, see the
    module docstring): every GPU's CPU Affinity 0-255 and NUMA Affinity 0."""
    return re.sub(r"\t[\d,\-]+\t\d+$", "\t0-255\t0", pub(TOPO), flags=re.M)


def dgx_facts(numa_off: bool = False, **pci) -> dict:
    return {"cpu.topology": parse_lscpu_parse(lscpu_p(numa_off)),
            "pci.devices": parse_pci_devices(pci_lines(numa_off, **pci)),
            "nvidia.topo": parse_topo_matrix(topo_numa_off() if numa_off else pub(TOPO))}


# ---------------------------------------------------------------- the facts file, as invoke facts writes it

def gathered(tmp_path: Path, outputs: dict[type, str]) -> tuple[dict, dict]:
    """``gather`` over facts whose command is ``cat`` of the given output: (values, errors)."""
    facts = []
    for i, (base, text) in enumerate(outputs.items()):
        path = tmp_path / f"out{i}.txt"
        path.write_text(text)
        facts.append(type(base.__name__, (base,), {"command": f"cat {path}", "requires_command": None}))
    return gather(_ShTransport(), facts)


def project(tmp_path: Path, outputs: dict[type, str], profile: str = "l40s") -> Path:
    """A project with one host ``dgx`` and ``dgx.json`` as ``invoke facts --host dgx`` writes it."""
    values, errors = gathered(tmp_path, outputs)
    doc = {"host": "dgx", "facts": values}
    if errors:
        doc["errors"] = errors
    (tmp_path / "dgx.json").write_text(json.dumps(doc, indent=2, sort_keys=True))
    (tmp_path / "hosts").write_text(yaml.safe_dump({"all": {"hosts": {"dgx": {
        "ansible_host": "127.0.0.1", "ansible_port": 9, "gpu_profile": profile}}}}))
    return tmp_path


def invoke(*args, cwd):
    return subprocess.run([sys.executable, "-m", "invoke", "--search-root", str(REPO), *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def topology_json(cwd: Path) -> dict:
    r = invoke("topology", "--host", "dgx", "--facts", "dgx.json", "--json", cwd=cwd)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout)["plan"]


def checklist_rows(cwd: Path) -> tuple[int, dict[str, tuple[str, str, str]]]:
    """``invoke checklist --facts``: (exit code, {check: (status, seen, fix)}) from the Markdown page."""
    r = invoke("checklist", "--host", "dgx", "--facts", "dgx.json", "--out", "pages", cwd=cwd)
    assert "Traceback" not in r.stderr, r.stderr
    rows = {}
    for line in (cwd / "pages" / "dgx.md").read_text().splitlines():
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        if len(cells) == 5 and cells[0] in ("PASS", "WARN", "FAIL"):
            rows[cells[2]] = (cells[0], cells[3], cells[4])
    return r.returncode, rows


def alignment(facts: dict, profile: str = "l40s"):
    (c,) = [c for c in checks(facts, {"gpu_profile": profile}) if c.name == "NUMA alignment"]
    return c


# ---------------------------------------------------------------- the real capture reads as it should

def test_the_dgx_captures_parse():
    topo = parse_topo_matrix(pub(TOPO))
    assert [g["numa_node"] for g in topo["gpus"]] == GPU_NODES
    assert [n["device"] for n in topo["nics"]] == [f"mlx5_{k}" for k in range(10)]
    old = parse_topo_matrix(pub("topo-dgxa100-8gpu-12mlx5-8numa.txt"))  # older layout: NICs named in the header
    assert [g["numa_node"] for g in old["gpus"]] == GPU_NODES
    assert [n["device"] for n in old["nics"]] == [f"mlx5_{k}" for k in range(12)]
    assert old["matrix"]["mlx5_11"]["mlx5_10"] == "PIX" and old["matrix"]["GPU6"]["mlx5_8"] == "PXB"
    cpu = parse_lscpu_parse(lscpu_p())
    assert cpu["cpu_count"] == 256 and cpu["socket_count"] == 2 and cpu["threads_per_core"] == 2
    assert cpu["numa_nodes"]["3"] == list(range(48, 64)) + list(range(176, 192))
    assert len(cpu["l3_groups"]) == 32


# ---------------------------------------------------------------- InfiniBand HCAs without IPoIB

def test_infiniband_hcas_without_a_netdev_are_nics_with_their_node_and_irqs():
    plan = plan_topology(dgx_facts())
    assert [g.node for g in plan.gpus] == GPU_NODES
    devs = {d.name: d for d in plan.devices}
    # Named by their RDMA device (what nvidia-smi topo -m shows), on their own NUMA node, every MSI-X IRQ.
    for k in range(8):
        d = devs[f"mlx5_{k}"]
        assert (d.kind, d.pci_address, d.numa_node, d.node, d.irqs) == ("nic", HCAS[k], GPU_NODES[k], GPU_NODES[k],
                                                                         hca_irqs(k))
    assert devs["enp225s0f0"].node == 6  # an Ethernet function with a netdev keeps its netdev's name
    irq_cpus = {n.node: n.irq_cpus for n in plan.nodes}
    pins = {p.irq: p for p in plan.irqs}
    for k in range(8):
        for irq in hca_irqs(k):
            assert pins[irq].cpus[0] in irq_cpus[GPU_NODES[k]] and pins[irq].device == f"mlx5_{k}"
    assert not [w for w in plan.warnings if w.kind == "irqs"], plan.warnings  # "no IRQs known" is gone
    # Each GPU pair has its HCAs on its own node: nothing crosses NUMA nodes.
    assert not [w for w in plan.warnings if w.kind in ("interconnect", "numa_distance")], plan.warnings
    assert alignment(dgx_facts()).status == "PASS"


def test_infiniband_hcas_through_invoke_topology_and_checklist(tmp_path):
    cwd = project(tmp_path, {CpuTopology: lscpu_p(), PciDevices: pci_lines(slow_link=HCAS[5]), NvidiaTopo: pub(TOPO)})
    plan = topology_json(cwd)
    devs = {d["name"]: d for d in plan["devices"]}
    assert devs["mlx5_0"]["irqs"] == hca_irqs(0) and devs["mlx5_0"]["node"] == 3 and devs["mlx5_0"]["kind"] == "nic"
    pinned = {p["irq"] for p in plan["irqs"]}
    assert all(set(hca_irqs(k)) <= pinned for k in range(8))
    assert not [w for w in plan["warnings"] if w["kind"] == "irqs"]
    _, rows = checklist_rows(cwd)
    # The HCA's PCIe link is a NIC line like any other: x8 of x16 fails.
    assert rows[f"NIC {HCAS[5]} PCIe link"][:2] == ("FAIL", "x8 of x16, 16 of 16 GT/s")
    assert rows[f"NIC {HCAS[0]} PCIe link"][0] == "PASS"
    assert rows["NUMA alignment"][0] == "PASS" and rows["NUMA alignment"][1].startswith("8 GPU(s), 10 I/O device(s)")


def test_irq_affinity_role_pins_the_hca_irqs():
    role = load_roles(content_root())[1]["irq_affinity"]
    facts = {**dgx_facts(), "system.container": None, "os.release": {"id": "ubuntu"}}
    host = HostContext("dgx", dict(role.defaults), FactView(facts, role.facts, role.name),
                       Templates(content_root() / "templates").render)
    res = role.module.resources(host)
    pinned = {r.irq: r.cpus for r in res if getattr(r, "kind", "") == "irq"}
    assert set(hca_irqs(3)) <= set(pinned) and all(pinned[i][0] in NODES[1] for i in hca_irqs(3))
    conf = next(r for r in res if getattr(r, "path", "") == "/etc/bringup/irq-affinity.conf")
    text = conf.content.decode() if isinstance(conf.content, bytes) else conf.content
    assert re.search(rf"^{hca_irqs(0)[0]} - \d+ mlx5_0$", text, re.M), text


# ---------------------------------------------------------------- numa=off

def test_numa_off_is_planned_per_physical_package():
    facts = dgx_facts(numa_off=True)
    assert list(facts["cpu.topology"]["numa_nodes"]) == ["0"]  # what the kernel shows
    plan = plan_topology(facts)
    assert [(n.node, n.cpus) for n in plan.nodes] == [(0, list(range(64)) + list(range(128, 192))),
                                                      (1, list(range(64, 128)) + list(range(192, 256)))]
    # The GPUs' sockets are unknown: spread over both sockets instead of all on the first one.
    assert [g.node for g in plan.gpus] == [0, 1, 0, 1, 0, 1, 0, 1]
    socket = {c: (c % 128) // 64 for c in range(256)}
    for g in plan.gpus:
        assert {socket[c] for c in g.cpus} == {g.node}, g
    assert {socket[c] for c in plan.triton_cpus} == {0, 1}
    assert plan.unit == "socket"
    # Every HCA's IRQs may go to either socket's housekeeping CPUs, never to a Triton CPU.
    assert {tuple(p.cpus) for p in plan.irqs} == {(0, 1, 64, 65)}
    (w,) = [w for w in plan.warnings if w.kind == "numa_off"]
    assert "one NUMA node (node 0: CPUs 0-255) on 2 sockets" in w.text and "numa=off" in w.text
    assert "socket 0: 0-63,128-191; socket 1: 64-127,192-255" in w.text


def test_numa_off_fails_the_checklist_on_a_gpu_profile(tmp_path):
    cmdline = (FIX / "h200-vm" / "sys.txt").read_text().split("\n---\n")[0].replace(" -- ", " numa=off -- ", 1)
    assert "numa=off" in parse_cmdline(cmdline)["args"]
    cwd = project(tmp_path, {CpuTopology: lscpu_p(numa_off=True), PciDevices: pci_lines(numa_off=True),
                             NvidiaTopo: topo_numa_off(), SystemCmdline: cmdline})
    rc, rows = checklist_rows(cwd)
    assert rc == 2
    status, seen, fix = rows["kernel command line"]
    assert status == "FAIL" and seen.startswith("numa=off (one NUMA node") and "GRUB_CMDLINE_LINUX" in fix
    assert "remove numa=off" in fix and "reboot" in fix
    status, seen, fix = rows["NUMA alignment"]
    assert status == "WARN" and "planned per physical package" in seen and "numa=off" in fix
    plan = topology_json(cwd)
    assert plan["unit"] == "socket" and [g["node"] for g in plan["gpus"]] == [0, 1, 0, 1, 0, 1, 0, 1]
    r = invoke("topology", "--host", "dgx", "--facts", "dgx.json", cwd=cwd)
    assert r.returncode == 0 and "planned per physical package" in r.stdout and "socket" in r.stdout, r.stdout


def test_numa_off_warns_on_a_cpu_profile_and_a_clean_cmdline_passes():
    facts = dgx_facts(numa_off=True)
    facts["system.cmdline"] = parse_cmdline("BOOT_IMAGE=/vmlinuz ro quiet numa=off\n")
    (c,) = [c for c in checks(facts, {"gpu_profile": "cpu"}) if c.name == "kernel command line"]
    assert c.status == "WARN"
    (c,) = [c for c in checks(facts, {"gpu_profile": "l40s"}) if c.name == "kernel command line"]
    assert c.status == "FAIL"
    facts["system.cmdline"] = parse_cmdline("BOOT_IMAGE=/vmlinuz ro quiet\n")
    (c,) = [c for c in checks(facts, {"gpu_profile": "l40s"}) if c.name == "kernel command line"]
    assert c.status == "PASS"


def test_one_node_on_one_socket_is_not_planned_per_package():
    # The real H200 VM: one node, one socket: nothing to split, no numa_off warning.
    from .fixture_hosts import h200_facts

    plan = plan_topology(h200_facts())
    assert plan.unit == "numa" and [n.node for n in plan.nodes] == [0]
    assert not [w for w in plan.warnings if w.kind == "numa_off"]


# ---------------------------------------------------------------- a cut lscpu -p

R710 = "lscpu-p-2s-2numa-dell-r710.txt"


def r710_fact_output(keep_rows: int | None = None) -> str:
    """What the cpu.topology fact prints on the Dell R710 of the real lscpu-p-2s-2numa-dell-r710.txt:
    its lscpu -p section (cut after ``keep_rows`` CPU rows: the last rows lost), then the sysfs
    ``node N cpulist`` lines built from the same file's "NUMA nodeN CPU(s)" lines."""
    text = pub(R710)
    summary = parse_lscpu_plain(text)
    rows = [l for l in text.split("\n\n", 1)[1].splitlines()]
    cpu_rows = [i for i, l in enumerate(rows) if re.match(r"^\d+,", l)]
    if keep_rows is not None:
        rows = rows[:cpu_rows[keep_rows]]
    nodes = [f"node {n} " + ",".join(map(str, cs)) for n, cs in summary["numa_nodes"].items()]
    return "\n".join(rows + ["---"] + nodes) + "\n"


def test_whole_lscpu_p_matches_the_node_lists():
    topo = parse_lscpu_parse(r710_fact_output())
    assert topo["cpu_count"] == 16 and topo["numa_nodes"]["1"] == list(range(1, 16, 2))


def test_cut_lscpu_p_is_a_fact_error_the_checklist_shows(tmp_path):
    cwd = project(tmp_path, {CpuTopology: r710_fact_output(keep_rows=12)}, profile="cpu")
    errors = json.loads((cwd / "dgx.json").read_text())["errors"]
    assert errors["cpu.topology"] == ("lscpu -p lists 12 online CPU(s), the kernel's NUMA nodes 16: CPU(s) 12-15 "
                                      "of the NUMA nodes have no row (output cut short?)")
    _, rows = checklist_rows(cwd)
    assert rows["fact cpu.topology"][:2] == ("FAIL", errors["cpu.topology"])
    r = invoke("topology", "--host", "dgx", "--facts", "dgx.json", cwd=cwd)
    assert r.returncode == 1 and "Traceback" not in r.stderr and "cpu.topology" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "(output cut short?)" in r.stderr, r.stderr  # the fact's own error, not only "no CPU topology"


def test_a_row_in_no_node_is_refused_too():
    text = r710_fact_output().replace("node 1 1,3,5,7,9,11,13,15", "node 1 1,3,5,7,9,11,13")
    with pytest.raises(ValueError, match=r"row\(s\) for CPU\(s\) 15 are in no NUMA node"):
        parse_lscpu_parse(text)


# ---------------------------------------------------------------- one bad local_cpulist

def test_a_bad_local_cpulist_refuses_that_device_alone(tmp_path):
    # GPU3's local_cpulist printed as "31-16" (backwards: no list the kernel prints).
    cwd = project(tmp_path, {CpuTopology: lscpu_p(), PciDevices: pci_lines(bad={GPUS[3]: "31-16"}),
                             NvidiaTopo: pub(TOPO)})
    doc = json.loads((cwd / "dgx.json").read_text())
    assert "pci.devices" not in doc.get("errors", {})
    assert len(doc["facts"]["pci.devices"]) == 18
    plan = topology_json(cwd)
    # GPU3 keeps its node through nvidia-smi topo -m; the others from sysfs; every HCA's IRQs pinned.
    assert [g["node"] for g in plan["gpus"]] == GPU_NODES
    (w,) = [w for w in plan["warnings"] if w["kind"] == "refused"]
    assert w["subject"] == "GPU3" and GPUS[3] in w["text"] and "31-16" in w["text"]
    pinned = {p["irq"] for p in plan["irqs"]}
    assert all(set(hca_irqs(k)) <= pinned for k in range(8))
    _, rows = checklist_rows(cwd)
    status, seen, _ = rows["devices read"]
    assert status == "WARN" and seen.startswith(f"1 refused: {GPUS[3]} (local_cpulist:") and "31-16" in seen
    assert rows["GPU count"][0] == "PASS" and rows["GPU count"][1].startswith("8 on the PCI bus")
    assert "fact pci.devices" not in rows


def test_a_refused_nic_is_left_out_alone():
    facts = dgx_facts(bad={HCAS[3]: "31-16"})
    plan = plan_topology(facts)
    assert "mlx5_3" not in {d.name for d in plan.devices} and len(plan.devices) == 9
    assert not set(hca_irqs(3)) & {p.irq for p in plan.irqs}
    (w,) = [w for w in plan.warnings if w.kind == "refused"]
    assert w.subject == f"nic {HCAS[3]}" and "not pinned" in w.text
    assert alignment(facts).status == "PASS"  # the others stand
    assert [c.status for c in checks(facts, {}) if c.name == "devices read"] == ["WARN"]


def test_a_refused_interface_is_left_out_alone():
    out = ("iface ib0 pci=0000:0c:00.0 numa=3 cpus=63-48 irqs=200\n"
           "iface enp225s0f0 pci=0000:e1:00.0 numa=6 cpus=96-111,224-239 irqs=300\n")
    ifaces = {i["name"]: i for i in parse_net_interfaces(out)}
    assert "63-48" in ifaces["ib0"]["refused"] and ifaces["ib0"]["irqs"] == [] and ifaces["ib0"]["numa_node"] == -1
    assert ifaces["enp225s0f0"]["numa_node"] == 6 and "refused" not in ifaces["enp225s0f0"]
    facts = {**dgx_facts(), "net.interfaces": list(ifaces.values())}
    plan = plan_topology(facts)
    assert {d.name: d.node for d in plan.devices}["mlx5_0"] == 3  # from pci.devices, not the refused interface
    assert [w.subject for w in plan.warnings if w.kind == "refused"] == ["interface ib0"]


# ---------------------------------------------------------------- every NIC SYS to every GPU, one socket

def gpu0_3_and_nic8_9() -> str:
    """The real topo -m cut to GPU0-GPU3 (NUMA nodes 3 and 1, both socket 0) and NIC8/NIC9 (SYS to
    every GPU): the rows and columns of GPU4-7 and NIC0-7 removed, the legend kept."""
    keep = ["GPU0", "GPU1", "GPU2", "GPU3", "NIC8", "NIC9"]
    lines = pub(TOPO).splitlines()
    head = lines[0].split("\t")
    cols = [i for i, h in enumerate(head) if h in keep or h in ("CPU Affinity", "NUMA Affinity")]
    out = ["\t" + "\t".join(head[i] for i in cols)]
    for line in lines[1:]:
        cells = line.split("\t")
        if re.fullmatch(r"(GPU|NIC)\d+", cells[0]):
            if cells[0] in keep:
                out.append("\t".join([cells[0]] + [cells[i] for i in cols if i < len(cells)]))
            continue
        out.append(line)
    return "\n".join(out) + "\n"


def sys_facts(nic_node: int | None) -> dict:
    facts = {"cpu.topology": parse_lscpu_parse(lscpu_p()), "nvidia.topo": parse_topo_matrix(gpu0_3_and_nic8_9())}
    if nic_node is not None:
        lines = [l for l in pci_lines().splitlines() if l.split()[0] in GPUS[:4] + ETH]
        facts["pci.devices"] = parse_pci_devices("\n".join(l.replace("numa=6 cpus=" + cpus(6), f"numa={nic_node} cpus="
                                                                    + cpus(nic_node)) for l in lines))
    return facts


def sys_warning(facts: dict):
    t = facts["nvidia.topo"]
    assert [n["device"] for n in t["nics"]] == ["mlx5_8", "mlx5_9"]
    assert all(rel == "SYS" for g in ("GPU0", "GPU1", "GPU2", "GPU3") for n, rel in t["matrix"][g].items()
               if n.startswith("NIC"))
    (w,) = [w for w in plan_topology(facts).warnings if w.subject == "NICs"]
    return w


def test_sys_nics_on_the_gpus_socket_cross_numa_nodes_not_sockets():
    w = sys_warning(sys_facts(nic_node=2))  # node 2: socket 0, like the GPUs' nodes 1 and 3
    assert w.kind == "numa_distance"
    assert "the GPUs span NUMA nodes 1, 3 of socket 0, every NIC on socket 0 too" in w.text
    assert "cross NUMA nodes inside socket 0" in w.text and "socket interconnect" not in w.text
    c = alignment(sys_facts(nic_node=2))
    assert c.status == "WARN" and "socket interconnect" not in c.seen and c.fix.endswith("one NUMA node")


def test_sys_nics_on_the_other_socket_cross_the_socket_interconnect():
    w = sys_warning(sys_facts(nic_node=6))
    assert w.kind == "interconnect" and "the NICs on socket(s) 1 (mlx5_8 on socket 1, mlx5_9 on socket 1)" in w.text
    assert "cross the socket interconnect" in w.text


def test_sys_nics_of_unknown_socket_are_said_unknown():
    w = sys_warning(sys_facts(nic_node=None))
    assert "the GPUs span NUMA nodes 1, 3 of socket 0; the socket of mlx5_8, mlx5_9 is unknown" in w.text
    assert "cross the socket interconnect" not in w.text


def test_sys_wording_through_invoke_topology(tmp_path):
    lines = "\n".join(l for l in pci_lines().replace("numa=6 cpus=" + cpus(6), "numa=2 cpus=" + cpus(2)).splitlines()
                      if l.split()[0] in GPUS[:4] + ETH + ["end=pci"]) + "\n"
    cwd = project(tmp_path, {CpuTopology: lscpu_p(), PciDevices: lines, NvidiaTopo: gpu0_3_and_nic8_9()})
    plan = topology_json(cwd)
    (w,) = [w for w in plan["warnings"] if w["subject"] == "NICs"]
    assert w["kind"] == "numa_distance" and "inside socket 0" in w["text"] and "socket interconnect" not in w["text"]
