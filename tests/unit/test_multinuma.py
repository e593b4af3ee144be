"""The planner and the platform rules on multi-NUMA servers (issue 9).

Hosts are the real fixture outputs of tests/fixtures/hosts/public through the real parsers.  Where
a case needs more than was published, the edit is made here and said: PCI listings are written
in the pci.devices fact's own line format with the GPU addresses and local CPU lists that the
fixture's ``# what:`` line gives; NIC/NVMe addresses there are made up (marked so).
"""
from __future__ import annotations

import re

from bringup.facts.cpu import parse_lscpu_parse
from bringup.facts.nvidia_topo import parse_topo_matrix
from bringup.facts.pci import parse_pci_devices
from bringup.hardware.platform import checks
from bringup.hardware.topology import PlanWarning, plan_topology
from harness.captures import strip_comments, topology_from_numa

from .fixture_hosts import FIX

PUB = FIX / "public"


def pub(name: str) -> str:
    return strip_comments((PUB / name).read_text())


def texts(plan) -> list[str]:
    return [str(w) for w in plan.warnings]


def alignment(facts: dict):
    (c,) = [c for c in checks(facts) if c.name == "NUMA alignment"]
    return c


def a100_host(topo_text: str | None = None, pci: str = "") -> dict:
    """The 2×A100 PCIe Della node (topo-2xa100pcie-2nic-2numa.txt): NUMA nodes from the GPUs'
    CPU affinity (0-63, 64-127), optionally with a pci.devices listing."""
    t = parse_topo_matrix(topo_text if topo_text is not None else pub("topo-2xa100pcie-2nic-2numa.txt"))
    nodes = {str(g["numa_node"]): g["cpus"] for g in t["gpus"]}
    facts = {"cpu.topology": topology_from_numa(nodes), "nvidia.topo": t}
    if pci:
        facts["pci.devices"] = parse_pci_devices(pci)
    return facts


# GPU addresses and local CPU lists from the fixture's '# what:' line; the NICs' and the NVMe's
# addresses and IRQ numbers are made up.  GPU1's sysfs numa_node is -1 (its node comes from
# nvidia-smi topo -m), the NVMe sits behind a switch that hides its node (numa -1, local CPUs of
# both nodes), the BMC-side NIC reports -1 but its local_cpulist is node 1's.
A100_PCI = """\
0000:21:00.0 class=0x030200 vendor=0x10de device=0x20f1 numa=0 cpus=0-63 driver=nvidia
0000:81:00.0 class=0x030200 vendor=0x10de device=0x20f1 numa=-1 cpus= driver=nvidia
0000:25:00.0 class=0x020000 vendor=0x15b3 device=0x101b numa=0 cpus=0-63 driver=mlx5_core irqs=100,101,102
0000:e1:00.0 class=0x020000 vendor=0x15b3 device=0x101b numa=1 cpus=64-127 driver=mlx5_core irqs=200,201,202
0000:c1:00.0 class=0x020000 vendor=0x14e4 device=0x165f numa=-1 cpus=64-127 driver=tg3 irqs=400
0000:01:00.0 class=0x010802 vendor=0x144d device=0xa824 numa=-1 cpus=0-127 driver=nvme irqs=300,301
"""


def test_one_unknown_device_does_not_collapse_the_plan():
    plan = plan_topology(a100_host(pci=A100_PCI))
    assert plan.numa_known is True
    assert [n.node for n in plan.nodes] == [0, 1]
    # GPUs keep their nodes (GPU1 through nvidia-smi topo -m's NUMA Affinity).
    assert [(g.name, g.node, g.cpus) for g in plan.gpus] == [("GPU0", 0, [2, 3, 4, 5]), ("GPU1", 1, [66, 67, 68, 69])]
    devs = {d.pci_address: d.node for d in plan.devices}
    assert devs == {"0000:25:00.0": 0, "0000:e1:00.0": 1, "0000:c1:00.0": 1, "0000:01:00.0": -1}
    pins = {p.irq: p.cpus for p in plan.irqs}
    # Known NICs' IRQs stay on their own node's housekeeping CPUs.
    assert [pins[i] for i in (100, 101, 102)] == [[0], [1], [0]]
    # Node 1: the BMC NIC (placed by its local CPUs) first by name, then the mlx5.
    assert [pins[i] for i in (400, 200, 201, 202)] == [[64], [65], [64], [65]]
    # The NVMe whose node nothing tells: its IRQs may go to any node's housekeeping CPUs.
    assert pins[300] == pins[301] == [0, 1, 64, 65]
    # A warning about each unknown device, and only about it: resolved ones as inferred.
    assert [w.subject for w in plan.warnings if w.kind == "numa_unknown"] == ["nvme 0000:01:00.0"]
    assert sorted(w.subject for w in plan.warnings if w.kind == "numa_inferred") == ["GPU1", "nic 0000:c1:00.0"]
    assert not any("whole host" in t for t in texts(plan))


def test_checklist_names_only_the_unresolved_device():
    c = alignment(a100_host(pci=A100_PCI))
    assert c.status == "WARN"
    assert "nvme 0000:01:00.0" in c.seen and "GPU1" not in c.seen and "0000:c1:00.0" not in c.seen


def all_sys_a100() -> str:
    """topo-2xa100pcie-2nic-2numa.txt with each GPU↔NIC NODE cell of the matrix made SYS
    (GPU0↔mlx5_0, GPU1↔mlx5_1, both directions): every NIC is SYS to every GPU."""
    out = []
    for line in pub("topo-2xa100pcie-2nic-2numa.txt").splitlines():
        if re.match(r"^(GPU\d|mlx5_\d)\t", line):
            line = line.replace("\tNODE", "\tSYS")
        out.append(line)
    return "\n".join(out)


def test_every_nic_sys_to_every_gpu_across_sockets_warns():
    facts = a100_host(all_sys_a100())
    assert all(rel == "SYS" for r in ("GPU0", "GPU1") for k, rel in facts["nvidia.topo"]["matrix"][r].items()
               if k.startswith("mlx5"))
    plan = plan_topology(facts)
    assert [g.node for g in plan.gpus] == [0, 1] and plan.numa_known
    sysw = [w for w in plan.warnings if w.kind == "interconnect"]
    assert len(sysw) == 1 and "every NIC (mlx5_0, mlx5_1) is SYS to every GPU" in sysw[0].text
    assert alignment(facts).status == "WARN"
    # The real file (one NIC per socket, NODE to its GPU) stays quiet.
    assert not [w for w in plan_topology(a100_host()).warnings if w.kind == "interconnect"]


def r710(one_socket: bool) -> str:
    """lscpu-p-2s-2numa-dell-r710.txt; with ``one_socket`` its Socket column is set to 0 on every
    row: one socket with two NUMA nodes (as EPYC NPS2 or Intel SNC2 report it)."""
    out = []
    for line in pub("lscpu-p-2s-2numa-dell-r710.txt").splitlines():
        if one_socket and re.match(r"^\d+,", line):
            f = line.split(",")
            f[2] = "0"
            line = ",".join(f)
        out.append(line)
    return "\n".join(out)


# A GPU on node 0 (even CPUs) and a NIC on node 1; addresses made up.
R710_PCI = """\
0000:03:00.0 class=0x030200 vendor=0x10de device=0x26b9 numa=0 cpus=0,2,4,6,8,10,12,14 driver=nvidia
0000:04:00.0 class=0x020000 vendor=0x15b3 device=0x1017 numa=1 cpus=1,3,5,7,9,11,13,15 driver=mlx5_core irqs=90
"""


def test_two_nodes_of_one_socket_do_not_cross_the_socket_interconnect():
    facts = {"cpu.topology": parse_lscpu_parse(r710(one_socket=True)), "pci.devices": parse_pci_devices(R710_PCI)}
    assert facts["cpu.topology"]["sockets"] == {"0": list(range(16))}
    plan = plan_topology(facts)
    assert not any("socket interconnect" in t for t in texts(plan))
    (w,) = [w for w in plan.warnings if w.kind == "numa_distance"]
    assert "NUMA node 0" in w.text and "node 1" in w.text and "same socket 0" in w.text
    c = alignment(facts)
    assert c.status == "WARN" and "socket interconnect" not in c.seen and "same socket" in c.seen


def test_two_sockets_still_cross_the_socket_interconnect():
    facts = {"cpu.topology": parse_lscpu_parse(r710(one_socket=False)), "pci.devices": parse_pci_devices(R710_PCI)}
    plan = plan_topology(facts)
    (w,) = [w for w in plan.warnings if w.kind == "interconnect"]
    assert "socket interconnect" in w.text and "socket 0" in w.text and "socket 1" in w.text
    assert "socket interconnect" in alignment(facts).seen


def test_warnings_are_values():
    plan = plan_topology(a100_host(pci=A100_PCI))
    for w in plan.warnings:
        assert isinstance(w, PlanWarning) and w.kind and w.text and str(w) == w.text
    d = plan.to_dict()
    assert all(set(x) == {"kind", "subject", "text"} for x in d["warnings"])
