"""Parsers of pci.*, net.* and irq.* facts, on recorded real outputs."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from bringup.facts.base import UntrustedOutput
from bringup.facts.irq import parse_interrupt_desc, parse_interrupts, parse_irq_affinity
from bringup.facts.net import parse_net_interfaces
from bringup.facts.pci import normalize_pci_address, parse_pci_devices, pci_kind

REPO = Path(__file__).resolve().parents[2]
from .fixture_hosts import FIX  # noqa: E402  (tests/fixtures/hosts, in this repository)
H200 = FIX / "h200-vm"
PUB = FIX / "public"


def first_section(path: Path) -> str:
    return path.read_text().split("\n---\n")[0]


# ---------------------------------------------------------------- pci.devices

def test_pci_h200_fixture():
    devs = parse_pci_devices(first_section(H200 / "pci.txt"))
    assert [d["address"] for d in devs] == [f"0000:00:0{i}.0" for i in range(7)]
    gpu = next(d for d in devs if d["address"] == "0000:00:06.0")
    assert gpu["kind"] == "gpu"
    assert gpu["class"] == "0x030200" and gpu["vendor"] == "0x10de" and gpu["device"] == "0x2335"
    assert gpu["numa_node"] == -1
    assert gpu["local_cpus"] == list(range(16))
    # The fixture predates the driver=/irq=/irqs= fields: they are optional.
    assert gpu["driver"] is None and gpu["irqs"] == []
    assert all(d["numa_node"] == -1 for d in devs)
    kinds = {d["address"]: d["kind"] for d in devs}
    assert kinds["0000:00:03.0"] == "nic"  # virtio-net, class 0x020000
    assert kinds["0000:00:00.0"] == "other"  # host bridge
    assert [d["kind"] for d in devs].count("gpu") == 1


def test_pci_extra_fields():
    out = (
        # the fact's own line for the GPU on the live H200 VM (legacy irq 41 unused: MSI-X)
        "0000:00:06.0 class=0x030200 vendor=0x10de device=0x2335 numa=-1 cpus=0-15 "
        "driver=nvidia irq=41 irqs=42,43,44,45,46,47,48,49\n"
        "0000:65:00.0 class=0x020000 vendor=0x8086 device=0x159b numa=1 cpus=32-63 driver=ice irq=0 irqs=\n"
        "0000:c1:00.0 class=0x010802 vendor=0x144d device=0xa80a numa= cpus=0-63 driver=nvme irq=45 irqs=\n"
        "0000:00:1f.3 class=0x040300 vendor=0x8086 device=0xa348 numa=0 cpus=0-7 driver= irq=11 irqs=\n"
        "10000:e0:06.0 class=0x060400 vendor=0x8086 device=0x464d numa=0 cpus=0-7 driver=pcieport irq=0 irqs=120\n"
    )
    devs = {d["address"]: d for d in parse_pci_devices(out)}
    gpu = devs["0000:00:06.0"]
    assert gpu["driver"] == "nvidia" and gpu["irq"] == 41
    assert gpu["msi_irqs"] == list(range(42, 50)) and gpu["irqs"] == list(range(42, 50))
    nic = devs["0000:65:00.0"]
    assert nic["kind"] == "nic" and nic["numa_node"] == 1 and nic["local_cpus"] == list(range(32, 64))
    assert nic["irq"] is None and nic["irqs"] == []
    nvme = devs["0000:c1:00.0"]
    assert nvme["kind"] == "nvme" and nvme["numa_node"] == -1  # no numa_node file: unknown
    assert nvme["irqs"] == [45]  # legacy INTx only when a driver is bound and no MSI
    assert devs["0000:00:1f.3"]["irqs"] == []  # no driver bound
    assert devs["10000:e0:06.0"]["irqs"] == [120]  # VMD domain wider than 4 digits


def test_pci_kind_and_address():
    assert pci_kind("0x10de", "0x030000") == "gpu"
    assert pci_kind("0x10de", "0x040300") == "other"  # the GPU's HDMI audio function
    # Every network function is a NIC (issue 21): an InfiniBand HCA (0x0207) has IRQs and a node
    # whether or not it has a netdev; so does a fabric (0x0208) or "other network" (0x0280) one.
    assert pci_kind("0x15b3", "0x020700") == "nic"
    assert pci_kind("0x8086", "0x020800") == "nic" and pci_kind("0x15b3", "0x028000") == "nic"
    assert pci_kind("0x15b3", "0x010802") == "nvme" and pci_kind("0x8086", "0x060400") == "other"
    assert pci_kind("0x15b3", "0x020000") == "nic"
    assert normalize_pci_address("00000000:00:06.0") == "0000:00:06.0"
    assert normalize_pci_address("00000000:A1:00.0") == "0000:a1:00.0"
    assert normalize_pci_address("4A:00.0") == "0000:4a:00.0"
    assert normalize_pci_address("bogus") is None


# ---------------------------------------------------------------- irq.interrupts

def test_interrupts_h200():
    it = parse_interrupts((H200 / "interrupts.txt").read_text())
    assert it["cpus"] == list(range(16)) and it["header"] is True
    assert sorted(int(k) for k in it["irqs"]) == [24, 25, 26] + list(range(28, 41)) + list(range(42, 50))
    ttys = it["irqs"]["26"]
    assert ttys["chip"] == "IO-APIC" and ttys["hwirq"] == 4 and ttys["flow"] == "edge"
    assert ttys["names"] == ["ttyS0"] and ttys["counts"][13] == 9 and ttys["total"] == 9
    r31 = it["irqs"]["31"]
    assert r31["chip"] == "PCI-MSIX-0000:00:01.0" and r31["pci_address"] == "0000:00:01.0"
    assert r31["name"] == "virtio0-req.0" and r31["counts"][15] == 2141
    gpu_irqs = [int(k) for k, v in it["irqs"].items() if v["pci_address"] == "0000:00:06.0"]
    assert gpu_irqs == list(range(42, 50))
    assert all(it["irqs"][str(i)]["name"] == "nvidia" for i in gpu_irqs)
    assert it["irqs"]["44"]["counts"][0] == 14
    # named rows kept apart
    assert it["other"]["LOC"]["counts"][14] == 1909
    assert it["other"]["LOC"]["description"] == "Local timer interrupts"
    assert it["other"]["ERR"] == {"counts": None, "total": 0, "description": ""}
    assert "NMI" in it["other"] and "NMI" not in it["irqs"]


def test_interrupts_squeezed_equals_padded():
    text = (H200 / "interrupts.txt").read_text()
    squeezed = re.sub(" +", " ", text)  # what the fact's `tr -s ' '` prints
    assert parse_interrupts(squeezed) == parse_interrupts(text)


def test_interrupts_second_capture_in_sys_txt():
    sec = (H200 / "sys.txt").read_text().split("\n---\n")[1]
    it = parse_interrupts(sec)
    assert it["irqs"]["31"]["counts"][15] == 1053
    assert it["other"]["LOC"]["counts"][0] == 692


def test_interrupts_ice_old_ir_pci_msi():
    it = parse_interrupts((PUB / "proc-interrupts-ice-e810-16cpu.txt").read_text())
    assert it["header"] is False and it["cpus"] == list(range(16))
    assert sorted(int(k) for k in it["irqs"]) == [66, 77, 78, 79, 80]
    r66 = it["irqs"]["66"]
    assert r66["chip"] == "IR-PCI-MSI" and r66["hwirq"] == 52953105 and r66["flow"] == "edge"
    assert r66["name"] == "ice-0000:65:00.0:ctrl-TxRx-0" and r66["pci_address"] == "0000:65:00.0"
    assert it["irqs"]["77"]["pci_address"] == "0000:65:00.1"
    assert it["irqs"]["78"]["name"] == "ice-lan1-TxRx-0" and it["irqs"]["78"]["counts"][0] == 1670
    assert it["irqs"]["79"]["counts"][1] == 609 and it["irqs"]["80"]["counts"][2] == 827


def test_interrupts_mlx5_msix_bdf_chip():
    it = parse_interrupts((PUB / "proc-interrupts-mlx5-12cpu.txt").read_text())  # prompt lines ignored
    assert it["cpus"] == list(range(12))
    assert len(it["irqs"]) == 15
    r98 = it["irqs"]["98"]
    assert r98["chip"] == "IR-PCI-MSIX-0000:01:00.0" and r98["hwirq"] == 0
    assert r98["name"] == "mlx5_async0@pci:0000:01:00.0" and r98["counts"][10] == 23274
    port1 = sorted(int(k) for k, v in it["irqs"].items() if v["pci_address"] == "0000:01:00.1")
    assert port1 == [101, 102]
    assert it["irqs"]["117"]["hwirq"] == 10 and it["irqs"]["117"]["counts"][11] == 651437
    assert it["irqs"]["114"]["total"] == 10 + 1024467


def test_interrupts_nvme_old_pci_msi_edge():
    it = parse_interrupts((PUB / "proc-interrupts-nvme-16cpu.txt").read_text())
    assert sorted(it["irqs"]) == ["130", "131"]
    q0 = it["irqs"]["130"]
    assert q0["chip"] == "PCI-MSI" and q0["hwirq"] is None and q0["flow"] == "edge"
    assert q0["name"] == "nvme0q0" and q0["counts"][0] == 17908 and len(q0["counts"]) == 16


def test_interrupt_desc_variants():
    d = parse_interrupt_desc("GICv3  27 Level     arch_timer")
    assert (d["chip"], d["hwirq"], d["trigger"], d["name"]) == ("GICv3", 27, "level", "arch_timer")
    d = parse_interrupt_desc("IO-APIC  16-fasteoi   ehci_hcd:usb1, uhci_hcd:usb3")
    assert d["flow"] == "fasteoi" and d["names"] == ["ehci_hcd:usb1", "uhci_hcd:usb3"]
    d = parse_interrupt_desc("PCI-MSI 2621440-edge      PCIe PME, aerdrv")
    assert d["names"] == ["PCIe PME", "aerdrv"]
    d = parse_interrupt_desc("xen-percpu-virq      timer0")
    assert d["chip"] == "xen-percpu-virq" and d["hwirq"] is None and d["name"] == "timer0"
    d = parse_interrupt_desc("IO-APIC-fasteoi   acpi")
    assert (d["chip"], d["flow"], d["name"]) == ("IO-APIC", "fasteoi", "acpi")


def test_interrupts_offline_cpu_columns():
    text = "      CPU0  CPU2\n 10:  5  7  IO-APIC 10-edge foo\nLOC: 1 2 Local timer interrupts\n"
    it = parse_interrupts(text)
    assert it["cpus"] == [0, 2] and it["irqs"]["10"]["counts"] == [5, 7]


def test_interrupts_empty():
    assert parse_interrupts("") == {}


# ---------------------------------------------------------------- irq.affinity

def test_irq_affinity_h200():
    aff = parse_irq_affinity((H200 / "irq_affinity.txt").read_text())
    assert len(aff) == 24
    assert aff["24"] == {"irq": 24, "affinity": list(range(16)), "effective": [0]}
    assert aff["26"]["effective"] == [13]
    assert aff["44"]["effective"] == [0]
    assert aff["49"]["effective"] == [5]
    assert list(aff) == sorted(aff, key=int)


def test_irq_affinity_without_effective():
    aff = parse_irq_affinity("0 0-3\n9 1,3\n")
    assert aff == {
        "0": {"irq": 0, "affinity": [0, 1, 2, 3], "effective": None},
        "9": {"irq": 9, "affinity": [1, 3], "effective": None},
    }


@pytest.mark.reliability(item=40, fault="irq.affinity: a line not in the command's form was skipped, an IRQ printed "
                         "twice read as its last line, and an IRQ or CPU of '²', '٣' or 5,000 digits was Python's "
                         "ValueError ('use sys.set_int_max_str_digits()') or read as CPU 3", variants=6,
                         checks=("one clear line",))
@pytest.mark.parametrize("damaged, said", [
    ("0 0-3\nbad line\n", "a line not in the command's form"),
    ("0 0-3\n0 1\n", "IRQ 0 is printed twice"),
    ("\u00b2 0-3\n", "a line not in the command's form"),
    ("9" * 5000 + " 0-3\n", "a line not in the command's form"),
    ("0 0-\u00b2\n", "is garbled"),
    ("0 0-\u0663\n", "is garbled"),
], ids=["bad line", "twice", "superscript irq", "5000 digits", "superscript cpu", "arabic-indic cpu"])
def test_a_damaged_irq_affinity_is_named_never_skipped_or_pythons_error(damaged, said):
    with pytest.raises(UntrustedOutput, match=re.escape(said)):
        parse_irq_affinity(damaged)


# ---------------------------------------------------------------- net.interfaces

def test_net_interfaces_parser():
    out = (
        "iface lan1 pci=0000:65:00.1 bus=pci driver=ice pcidriver=ice numa=1 cpus=32-63 speed=100000 "
        "mtu=9000 operstate=up mac=b4:96:91:00:00:01 type=1 rxq=2 txq=2 irqs=77,78,79\n"
        "iface lan10 pci=0000:66:00.0 bus=pci driver=ice pcidriver=ice numa=1 cpus=32-63 speed= "
        "mtu=1500 operstate=down mac=b4:96:91:00:00:02 type=1 rxq=1 txq=1 irqs=\n"
    )
    # irq rows as the fact's awk prints them, taken from the ice fixture
    ice = parse_interrupts((PUB / "proc-interrupts-ice-e810-16cpu.txt").read_text())
    for k, v in ice["irqs"].items():
        out += f"irq {k} {v['chip']} {v['hwirq']}-{v['flow']} {v['name']}\n"
    nics = {n["name"]: n for n in parse_net_interfaces(out)}
    lan1 = nics["lan1"]
    assert lan1["pci_address"] == "0000:65:00.1" and lan1["numa_node"] == 1
    assert lan1["speed_mbps"] == 100000 and lan1["mtu"] == 9000 and lan1["operstate"] == "up"
    # msi 77,78,79 + /proc/interrupts rows naming "lan1" (80) or its PCI address (77)
    assert lan1["irqs"] == [77, 78, 79, 80]
    assert lan1["irq_names"]["80"] == "ice-lan1-TxRx-2"
    lan10 = nics["lan10"]
    assert lan10["speed_mbps"] is None  # link down: speed read fails
    assert lan10["irqs"] == []  # "lan1" rows must not match "lan10"


@pytest.mark.reliability(item=40, fault="host output: an Arabic-Indic digit read as a number (an IRQ count, an NVLink "
                                        "link, a MIG instance id) or 5,000 digits named by Python's own advice to call "
                                        "sys.set_int_max_str_digits(), in the parsers the first ASCII-digits fix left",
                         variants=4, checks=("one clear line", "data shown as data"))
def test_digits_a_tool_never_prints_are_never_read_as_numbers():
    from bringup.facts.gather import _unread
    from bringup.facts.nvidia_nvlink import parse_nvlink_status
    from bringup.facts.nvidia_values import _count

    real = (FIX / "h200-vm" / "interrupts.txt").read_text()
    row = next(line for line in real.splitlines() if re.match(r"^\s*[0-9]+:\s+[0-9]", line))
    first = row.split()[1]
    for bad in ("\u0663", "\u00b2"):
        with pytest.raises(UntrustedOutput) as e:
            parse_interrupts(real.replace(row, row.replace(first, bad, 1)))
        assert "count(s) for the header's" in str(e.value), str(e.value)
    with pytest.raises(ValueError) as e:  # the whole count read, past Python's limit: said in the fact's words
        parse_interrupts(real.replace(row, row.replace(first, "9" * 5000, 1)))
    assert _unread(e.value).startswith("a number of thousands of digits in the command's output"), _unread(e.value)
    with pytest.raises(UntrustedOutput) as e:  # read as link 3 before; then dropped from the count: named now
        parse_nvlink_status("GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-1)\n\t Link 0: 25 GB/s\n\t Link \u0663: 25 GB/s\n")
    assert "a link line whose link number is not one" in str(e.value), str(e.value)
    assert _count("\u0663") is None and _count("3") == 3
