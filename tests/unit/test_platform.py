"""Firmware and platform rules on real outputs."""
from __future__ import annotations

from pathlib import Path

from bringup.facts.nvidia_q import parse_nvidia_smi_q
from bringup.facts.system import parse_cmdline, parse_cpuidle
from bringup.hardware.platform import checks
from harness.captures import parse_lspci_rebar, strip_comments

from .test_topology import h200_facts

from .fixture_hosts import FIX  # noqa: E402  (tests/fixtures/hosts, in this repository)


def by_name(cs):
    return {c.name: c for c in cs}


def test_h200_vm_large_bar_full_link_and_single_node():
    facts = h200_facts()
    facts["nvidia.query"] = parse_nvidia_smi_q((FIX / "h200-vm" / "nvidia-smi-q.txt").read_text())
    sys_txt = (FIX / "h200-vm" / "sys.txt").read_text().split("\n---\n")
    facts["system.cmdline"] = parse_cmdline(sys_txt[0])
    facts["system.cpuidle"] = parse_cpuidle(sys_txt[3])  # "ls: cannot access .../cpuidle/": no states
    cs = by_name(checks(facts))
    bar = next(c for n, c in cs.items() if n.endswith("BAR1 covers GPU memory"))
    assert bar.status == "PASS" and bar.seen.startswith("BAR1 262144 MiB")
    width = next(c for n, c in cs.items() if n.endswith("PCIe link width"))
    assert width.status in ("PASS", "FAIL") and width.seen.startswith("x")
    # The VM exposes no cpuidle states: what the host's CPUs do when idle is not visible, not a PASS.
    assert cs["C-states"].status == "WARN" and "no cpuidle states exposed" in cs["C-states"].seen
    assert cs["kernel command line"].status == "PASS"
    # Every device reports numa_node -1: alignment is unknown, planned as one node, and said so.
    assert cs["NUMA alignment"].status == "WARN"
    assert cs["NUMA alignment"].seen.startswith("numa_node -1 (unknown) on ")
    assert "nic 0000:00:03.0" in cs["NUMA alignment"].seen
    assert all(c.status in ("PASS", "WARN", "FAIL") for c in cs.values())


def test_public_gpus_persistence_ecc_mig_rules():
    for name in ("nvsmi-q-l40s.txt", "nvsmi-q-a10g.txt", "nvsmi-q-l4.txt", "nvsmi-q-l40s-drv595.txt"):
        q = parse_nvidia_smi_q(strip_comments((FIX / "public" / name).read_text()))
        cs = checks({"nvidia.query": q})
        assert cs, name
        for c in cs:
            assert (c.status == "PASS") == (c.fix == ""), (name, c)
            if c.name.endswith("persistence mode"):
                assert c.status == ("PASS" if q["gpus"][0]["persistence_mode"] is True else "WARN")
            if c.name.startswith("GPU "):
                # The GPU the line is about, spelled as nvidia-smi prints its bus id; the name starts with it.
                assert c.subject == f"GPU {q['gpus'][0]['bus_id']}" and c.name.startswith(c.subject + " "), c


def test_small_bar_and_narrow_link_are_flagged():
    g = {"bus_id": "00000000:01:00.0", "bar1_total_mib": 256, "fb_total_mib": 46068, "pcie_width_current": 8,
         "pcie_width_max": 16, "pcie_gen_current": 1, "pcie_gen_max": 4}
    cs = by_name(checks({"nvidia.query": {"gpus": [g]}}))
    assert cs["GPU 00000000:01:00.0 BAR1 covers GPU memory"].status == "WARN"
    assert cs["GPU 00000000:01:00.0 PCIe link width"].status == "FAIL"
    assert cs["GPU 00000000:01:00.0 PCIe generation"].status == "WARN"


def test_lspci_resizable_bar_and_link_state():
    dev = parse_lspci_rebar(strip_comments((FIX / "public" / "lspci-vvv-rtxa6000-rebar.txt").read_text()))
    first = dev[next(iter(dev))]
    assert first["bar1_current_mib"] == 256 and first["bar1_max_mib"] == 64 * 1024
    assert first["lnk_cap"] == (16.0, 16) and first["lnk_sta"] == (2.5, 16)


def test_deep_cstates_warn():
    idle = parse_cpuidle("driver=intel_idle\nstate 0 latency=0 residency=0 disable=0 name=POLL\n"
                         "state 1 latency=2 residency=2 disable=0 name=C1\n"
                         "state 2 latency=170 residency=600 disable=0 name=C6\n")
    (c,) = [c for c in checks({"system.cpuidle": idle}) if c.name == "C-states"]
    assert c.status == "WARN" and "C6 170us" in c.seen and "cpu_dma_latency" in c.fix


def test_nic_pcie_link_current_vs_max():
    from bringup.facts.pci import parse_pci_devices
    from bringup.hardware.platform import checks
    # The pci.devices fact's line format with the sysfs link fields a bare-metal NIC reports.
    lines = "\n".join([
        "0000:17:00.0 class=0x020000 vendor=0x15b3 device=0x101d numa=0 cpus=0-31 driver=mlx5_core irq=0 irqs=40,41 "
        "lsc=16.0 lsm=16.0 lwc=16 lwm=16",
        "0000:17:00.1 class=0x020000 vendor=0x15b3 device=0x101d numa=0 cpus=0-31 driver=mlx5_core irq=0 irqs=42 "
        "lsc=16.0 lsm=16.0 lwc=8 lwm=16",
        "0000:31:00.0 class=0x020000 vendor=0x8086 device=0x1593 numa=1 cpus=32-63 driver=ice irq=0 irqs=50 "
        "lsc=8.0 lsm=16.0 lwc=8 lwm=8",
        "0000:00:03.0 class=0x020000 vendor=0x1af4 device=0x1041 numa=-1 cpus=0-15 driver=virtio-pci irq=0 irqs=34 "
        "lsc= lsm= lwc= lwm=",
    ])
    devs = parse_pci_devices(lines)
    nic = next(d for d in devs if d["address"] == "0000:17:00.0")
    assert nic["link_width"] == 16 and nic["link_speed_max_gts"] == 16.0
    cs = {c.name: c for c in checks({"pci.devices": devs})}
    assert cs["NIC 0000:17:00.0 PCIe link"].status == "PASS"
    assert cs["NIC 0000:17:00.1 PCIe link"].status == "FAIL" and cs["NIC 0000:17:00.1 PCIe link"].seen.startswith("x8 of x16")
    assert cs["NIC 0000:31:00.0 PCIe link"].status == "WARN" and "8 of 16 GT/s" in cs["NIC 0000:31:00.0 PCIe link"].seen
    assert "NIC 0000:00:03.0 PCIe link" not in cs  # virtio: no link to judge
    # Each link line names its device: the pages gather a device's lines into one row.
    assert cs["NIC 0000:17:00.1 PCIe link"].subject == "NIC 0000:17:00.1"


def test_cstates_without_data_are_never_a_pass():
    # No system.cpuidle fact read at all (facts of another source, or not gathered).
    (c,) = [c for c in checks({}) if c.name == "C-states"]
    assert c.status == "WARN" and c.seen.startswith("not read")
    # The fact failed: its error is what was seen.
    (c,) = [c for c in checks({"system.cpuidle": None}, fact_errors={"system.cpuidle": "no output"})
            if c.name == "C-states"]
    assert c.status == "WARN" and "no output" in c.seen
    # Read, and the kernel shows none (the H200 VM's sys.txt: no cpuidle directory).
    (c,) = [c for c in checks({"system.cpuidle": None}) if c.name == "C-states"]
    assert c.status == "WARN" and c.fix
    # idle=poll says there are no C-states without any cpuidle data.
    cmdline = parse_cmdline("BOOT_IMAGE=/vmlinuz root=/dev/sda1 idle=poll")
    (c,) = [c for c in checks({"system.cpuidle": None, "system.cmdline": cmdline}) if c.name == "C-states"]
    assert c.status == "PASS" and "idle=poll" in c.seen


def test_a_kernel_command_line_of_binary_junk_is_not_checked_never_pass():
    # /proc/cmdline as binary junk that is valid UTF-8 (control characters, a bidi override): no "PASS 1 words".
    from bringup.facts import FACTS_BY_NAME
    from bringup.facts.gather import parse_raw

    junk = "\x01\x02\x7f\x10\u202e\x03\n"
    values, errors = parse_raw([FACTS_BY_NAME["system.cmdline"]], {"system.cmdline": {"rc": 0, "output": junk}})
    assert "not printable text" in errors["system.cmdline"] and "unreadable" in errors["system.cmdline"]
    (c,) = [c for c in checks(values, {}, errors) if c.name == "kernel command line"]
    assert (c.status, c.seen) == ("WARN", "not checked: system.cmdline unreadable")
    assert parse_cmdline("BOOT_IMAGE=/vmlinuz ro quiet\n")["args"] == ["BOOT_IMAGE=/vmlinuz", "ro", "quiet"]
