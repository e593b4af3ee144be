"""The passive health lines (bringup/hardware/health.py) and their facts' parsers, on real captured outputs.

Where no public capture shows a fault, the fault is made in the test from a real capture, and the test says
what it changed; the stored fixtures are never edited.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from bringup.facts.base import UntrustedOutput
from bringup.facts.kernel import parse_kernel_xid, KernelXid
from bringup.facts.net import parse_infiniband_ports
from bringup.facts.nvidia_nvlink import parse_nvlink_status
from bringup.facts.nvidia_q import parse_nvidia_smi_q
from bringup.hardware.health import health_checks, infiniband_checks, nvlink_checks, xid_checks, xid_table

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"
H200 = FIX / "h200-vm" / "nvidia-smi-q.txt"
H100X8 = FIX / "public" / "nvsmi-q-8xh100sxm-drv565.txt"
A10G = FIX / "public" / "nvsmi-q-a10g.txt"


def _q(path: Path, *edits: tuple[str, str]) -> dict:
    """``nvidia-smi -q`` of a capture, with ``(pattern, replacement)`` edits applied to the first GPU's text."""
    text = path.read_text()
    for pattern, repl in edits:
        text, n = re.subn(pattern, repl, text, count=1, flags=re.M)
        assert n == 1, pattern
    return parse_nvidia_smi_q(text)


def _lines(facts: dict, vars: dict | None = None, name: str | None = None):
    return [c for c in health_checks(facts, vars or {}) if name is None or c.name == name]


def _by(checks, name):
    return [c for c in checks if c.name == name]


# ---------------------------------------------------------------------------------------------------------
# nvidia-smi -q health


def test_a_healthy_h200_passes_every_gpu_line():
    checks = _lines({"nvidia.query": parse_nvidia_smi_q(H200.read_text())})
    assert {c.name for c in checks} == {"ECC errors", "memory repair", "clock event reasons", "temperature"}
    assert all(c.status == "PASS" and c.subject == "GPU 00000000:00:06.0" for c in checks), checks
    temp = _by(checks, "temperature")[0]
    # H200, driver 580: GPU T.Limit Temp 51 C, slowdown at T.Limit -2 C: 53 degrees left.
    assert temp.seen == "36 °C, 53 °C below the slowdown limit"


def test_every_real_q_capture_reads_every_health_value():
    # The strict counters and flags (a value that is no reading is named, never 0 or No) read every real capture's
    # words: 0, N/A, Yes/No, Active/Not Active.
    captures, read = [H200, *sorted((FIX / "public").glob("nvsmi-q-*.txt"))], 0
    for path in captures:
        text = "".join(l for l in path.read_text().splitlines(keepends=True) if not l.startswith("#"))
        try:
            gpus = parse_nvidia_smi_q(text).get("gpus") or []
        except UntrustedOutput:
            continue  # an excerpt, cut where its source cut it
        for g in gpus:
            read += 1
            assert g["health"]["unreadable"] == {}, (path.name, g["health"]["unreadable"])
    assert read >= 40


@pytest.mark.parametrize("key, value", [("GPU Current Temp", "-99"), ("GPU Current Temp", "151"),
                                        ("GPU T.Limit Temp", "200"), ("Memory Current Temp", "-41")])
def test_a_temperature_no_gpu_can_have_is_not_checked_never_pass(key, value):
    # The H200's capture with one temperature past what a running GPU can read (-40..150 °C; margins -150..150).
    q = _q(H200, (rf"({re.escape(key)}\s+:) -?\d+ C", rf"\1 {value} C"))
    [line] = _lines({"nvidia.query": q}, name="temperature")
    assert line.status == "WARN" and line.seen.startswith(f"not checked: nvidia.query unreadable: {key} "), line.seen


def test_older_drivers_absolute_slowdown_temperature():
    # The A10G capture (driver 5xx) prints "GPU Slowdown Temp : 95 C" and the current 27 C.
    g = parse_nvidia_smi_q(A10G.read_text())["gpus"][0]
    assert g["health"]["temperature"]["slowdown_margin_c"] == 68
    # Changed: the current temperature to 90 C, 5 degrees from slowdown: WARN; at 96 C: FAIL.
    for temp, status in (("90", "WARN"), ("96", "FAIL")):
        q = _q(A10G, (r"(GPU Current Temp\s+:) \d+ C", rf"\1 {temp} C"))
        assert _lines({"nvidia.query": q}, name="temperature")[0].status == status


def test_an_uncorrectable_error_since_boot_fails_the_gpu():
    # Changed in the 8x H100 capture: GPU 18:00.0's volatile DRAM Uncorrectable 0 -> 2.
    q = _q(H100X8, (r"(Volatile\n(?:.*\n){4}\s+DRAM Uncorrectable\s+:) 0", r"\1 2"))
    ecc = _lines({"nvidia.query": q}, name="ECC errors")
    bad = [c for c in ecc if c.status != "PASS"]
    assert [c.subject for c in bad] == ["GPU 00000000:18:00.0"] and bad[0].status == "FAIL"
    assert "since boot 2 uncorrectable (DRAM 2)" in bad[0].seen and "limit 0" in bad[0].seen
    assert len(ecc) == 8


def test_lifetime_errors_alone_warn_and_correctable_pass():
    # The A10G capture itself: aggregate DRAM Correctable 1, nothing uncorrectable: PASS, counted.
    g = parse_nvidia_smi_q(A10G.read_text())["gpus"][0]
    assert g["health"]["ecc_aggregate"]["dram_correctable"] == 1
    assert _lines({"nvidia.query": {"gpus": [g]}}, name="ECC errors")[0].status == "PASS"
    # Changed: the aggregate DRAM Uncorrectable 0 -> 1 (a used board), volatile still 0.
    q = _q(A10G, (r"(Aggregate\n(?:.*\n){4}\s+DRAM Uncorrectable\s+:) 0", r"\1 1"))
    line = _lines({"nvidia.query": q}, name="ECC errors")[0]
    assert line.status == "WARN" and "lifetime 1 uncorrectable" in line.seen


def test_older_single_and_double_bit_layout_is_counted():
    # Drivers before 525 print Single Bit / Double Bit blocks with a Total (layout of NVIDIA's nvidia-smi
    # documentation); built from the H200 capture's section with its counters replaced by that layout.
    text = H200.read_text()
    old = re.search(r"    ECC Errors\n(?:        .*\n)+", text).group(0)
    new = ("    ECC Errors\n        Volatile\n            Single Bit\n                Device Memory : 3\n"
           "                Total : 3\n            Double Bit\n                Device Memory : 1\n"
           "                Total : 1\n        Aggregate\n            Single Bit\n                Total : 9\n"
           "            Double Bit\n                Total : 1\n")
    g = parse_nvidia_smi_q(text.replace(old, new))["gpus"][0]["health"]
    assert g["ecc_volatile"] == {"correctable": 3, "uncorrectable": 1}
    assert g["ecc_aggregate"] == {"correctable": 9, "uncorrectable": 1}


@pytest.mark.parametrize("edit,status,words", [
    ((r"(Remapped Rows\n(?:.*\n){4}\s+Pending\s+:) No", r"\1 Yes"), "FAIL", "pending a GPU reset"),
    ((r"(Remapping Failure Occurred\s+:) No", r"\1 Yes"), "FAIL", "a row remapping failed"),
    ((r"(Unrepairable Memory\s+:) No", r"\1 Yes"), "FAIL", "unrepairable memory"),
    ((r"(Channel Repair Pending\s+:) No", r"\1 Yes"), "FAIL", "channel repair is pending"),
    ((r"(Remapped Rows\n\s+Correctable Error\s+:) 0", r"\1 4"), "PASS", "4 correctable"),
])
def test_memory_repairs(edit, status, words):
    # Changed in the H200 capture: one Remapped Rows or repair flag, as named.
    line = _lines({"nvidia.query": _q(H200, edit)}, name="memory repair")[0]
    assert line.status == status and words in line.seen, line


def test_retired_pages_on_parts_before_ampere():
    # Changed in the H200 capture: its "N/A" retired pages given counts as a V100/T4 prints them.
    q = _q(H200, (r"(Retired Pages\n\s+Single Bit ECC\s+:) N/A", r"\1 2"),
           (r"(Double Bit ECC\s+:) N/A", r"\1 1"), (r"(Pending Page Blacklist\s+:) N/A", r"\1 No"))
    line = _lines({"nvidia.query": q}, name="memory repair")[0]
    assert line.status == "WARN" and "3 page(s) retired" in line.seen
    q = _q(H200, (r"(Retired Pages\n\s+Single Bit ECC\s+:) N/A", r"\1 58"), (r"(Double Bit ECC\s+:) N/A", r"\1 2"))
    line = _lines({"nvidia.query": q}, name="memory repair")[0]
    assert line.status == "FAIL" and "replace" in line.fix


@pytest.mark.parametrize("reason,status", [
    ("HW Thermal Slowdown", "FAIL"), ("HW Power Brake Slowdown", "FAIL"), ("SW Thermal Slowdown", "FAIL"),
    ("HW Slowdown", "FAIL"), ("SW Power Cap", "PASS"), ("Applications Clocks Setting", "PASS"),
])
def test_clock_event_reasons_active_now(reason, status):
    # Changed in the 8x H100 capture: one reason of GPU 18:00.0 from Not Active to Active.  (SW Power Cap there: the
    # GPU idles at 71.97 W of its default 700 W limit, so the cap holds nothing: issue 41, see the A40 capture.)
    q = _q(H100X8, (rf"(^\s+{re.escape(reason)}\s+:) Not Active", r"\1 Active"))
    lines = _lines({"nvidia.query": q}, name="clock event reasons")
    assert lines[0].status == status and lines[0].subject == "GPU 00000000:18:00.0"
    assert all(c.status == "PASS" for c in lines[1:])


def test_throttle_counters_since_the_driver_loaded_warn():
    # Changed in the H200 capture: HW Thermal Slowdown counter 0 us -> 2500000 us.
    q = _q(H200, (r"(Clocks Event Reasons Counters\n(?:.*\n){3}\s+HW Thermal Slowdown\s+:) 0 us", r"\1 2500000 us"))
    line = _lines({"nvidia.query": q}, name="clock event reasons")[0]
    assert line.status == "WARN" and "HW thermal slowdown 2.5 s" in line.seen


def test_throttle_reasons_of_older_drivers():
    # Drivers before 535 call the section "Clocks Throttle Reasons" (same reasons): renamed in the test.
    q = _q(H200, (r"^    Clocks Event Reasons$", "    Clocks Throttle Reasons"),
           (r"(^\s+HW Power Brake Slowdown\s+:) Not Active", r"\1 Active"))
    assert _lines({"nvidia.query": q}, name="clock event reasons")[0].status == "FAIL"


def test_fabric_of_an_nvswitch_board():
    q = parse_nvidia_smi_q(H100X8.read_text())
    fabric = _lines({"nvidia.query": q}, name="NVSwitch fabric")
    assert len(fabric) == 8 and all(c.status == "PASS" for c in fabric)
    # Changed: GPU 18:00.0's fabric State Completed -> In Progress (nvidia-fabricmanager not running).
    q = _q(H100X8, (r"(Fabric\n\s+State\s+:) Completed", r"\1 In Progress"))
    bad = [c for c in _lines({"nvidia.query": q}, name="NVSwitch fabric") if c.status != "PASS"]
    assert len(bad) == 1 and bad[0].status == "FAIL" and "nvidia-fabricmanager" in bad[0].fix
    # A part without a fabric (the H200 VM: State N/A) gets no fabric line.
    assert not _lines({"nvidia.query": parse_nvidia_smi_q(H200.read_text())}, name="NVSwitch fabric")


# ---------------------------------------------------------------------------------------------------------
# NVLink

A100_NVLINK = "".join(
    f"GPU {i}: NVIDIA A100-SXM4-80GB (UUID: GPU-{i})\n" + "".join(f"\t Link {l}: 25 GB/s\n" for l in range(12))
    for i in range(2))


def _nvlink_facts(text: str, arch: str = "Ampere", fabric: str | None = "Completed") -> dict:
    gpus = [{"bus_id": f"00000000:{i:02X}:00.0", "uuid": f"GPU-{i}", "product_architecture": arch,
             "fabric_state": fabric} for i in range(2)]
    return {"nvidia.query": {"gpus": gpus}, "nvidia.nvlink": parse_nvlink_status(text)}


def test_nvlink_all_links_up_at_the_parts_speed():
    lines = nvlink_checks(_nvlink_facts(A100_NVLINK))
    assert [c.status for c in lines] == ["PASS", "PASS"]
    assert lines[0].seen == "12 of 12 links up at 25 GB/s (the part's 25)"


def test_nvlink_a_link_down_or_slow():
    down = A100_NVLINK.replace("GPU 1: NVIDIA A100-SXM4-80GB (UUID: GPU-1)\n\t Link 0: 25 GB/s",
                               "GPU 1: NVIDIA A100-SXM4-80GB (UUID: GPU-1)\n\t Link 0: <inactive>")
    lines = nvlink_checks(_nvlink_facts(down))
    assert [c.status for c in lines] == ["PASS", "FAIL"] and "down: 0" in lines[1].seen
    slow = A100_NVLINK.replace("\t Link 11: 25 GB/s\n", "\t Link 11: 12.5 GB/s\n", 1)
    lines = nvlink_checks(_nvlink_facts(slow))
    assert lines[0].status == "WARN" and "link 11 12.5" in lines[0].seen


def test_nvlink_inactive_everywhere():
    text = A100_NVLINK.replace("25 GB/s", "<inactive>")
    assert {c.status for c in nvlink_checks(_nvlink_facts(text))} == {"FAIL"}  # an NVSwitch board
    assert {c.status for c in nvlink_checks(_nvlink_facts(text, fabric=None))} == {"WARN"}  # PCIe cards


def test_nvlink_a_cut_line_is_named():
    from bringup.facts.base import UntrustedOutput

    with pytest.raises(UntrustedOutput, match="link 3"):
        parse_nvlink_status(A100_NVLINK.replace("\t Link 3: 25 GB/s\n", "\t Link 3: 25 G\n", 1))


# ---------------------------------------------------------------------------------------------------------
# Xid events

def _xid_output(*lines: str, source: str = "dmesg", rc: int = 0, first: str = "[    0.000000] Linux version") -> str:
    return (f"source {source}\nfirst {first}\n" + "".join(f"xid {l}\n" for l in lines)
            + f"count {len(lines)}\nexit {rc}\n")


# Real Xid lines: NVIDIA/open-gpu-kernel-modules issue 1151 (Xid 79), stas00/ml-engineering
# compute/accelerator/nvidia/debug.md (Xid 63), kohsuke's gist 84ce815d0a8ad85ecaf6 (Xid 32, 69, old layout).
XID79 = "[ 1234.5] NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the bus."
XID63 = "[ 99.1] NVRM: Xid (PCI:0000:10:1c): 63, pid=1896, Row Remapper: New row marked for remapping, reset gpu to activate."
XID69 = "[ 266.469093] NVRM: Xid (PCI:0000:01:00): 69, Illegal Class Error: ChID 0007, Class 00000000, Offset 00001220, Data 3054a400"


def _gpu_at(bus: str) -> dict:
    return {"gpus": [{"bus_id": f"00000000:{bus}.0", "pci_address": f"0000:{bus.lower()}.0"}]}


def test_xid_hardware_fails_the_gpu_it_names():
    facts = {"nvidia.query": _gpu_at("2B:00"), "kernel.xid": parse_kernel_xid(_xid_output(XID79, XID79))}
    [line] = xid_checks(facts)
    assert line.status == "FAIL" and line.subject == "GPU 00000000:2B:00.0"
    assert "Xid 79 ×2: GPU has fallen off the bus [hardware]" in line.seen


def test_xid_application_kind_warns_and_old_layout_parses():
    old = "[ 20.1] NVRM: Xid (0000:01:00): 13, Graphics Exception: ESR 0x404600=0x80000002"  # no "PCI:"
    log = parse_kernel_xid(_xid_output(XID69, old))
    assert [e["xid"] for e in log["events"]] == [69, 13] and log["events"][1]["pci"] == "0000:01:00"
    [line] = xid_checks({"nvidia.query": _gpu_at("01:00"), "kernel.xid": log})
    assert line.status == "WARN" and "[application]" in line.seen


def test_xid_memory_event_fails_and_unknown_warns():
    log = parse_kernel_xid(_xid_output(XID63))
    assert xid_checks({"nvidia.query": _gpu_at("10:1c"), "kernel.xid": log})[0].status == "FAIL"
    log = parse_kernel_xid(_xid_output("[ 5.0] NVRM: Xid (PCI:0000:10:1c): 999, something new"))
    line = xid_checks({"nvidia.query": _gpu_at("10:1c"), "kernel.xid": log})[0]
    assert line.status == "WARN" and "not in bringup's table" in line.seen


def test_a_clean_log_passes_and_an_unreadable_one_is_said():
    assert xid_checks({"nvidia.query": _gpu_at("01:00"), "kernel.xid": parse_kernel_xid(_xid_output())})[0].status == "PASS"
    refused = ("source dmesg\nerror dmesg: read kernel buffer failed: Operation not permitted\ncount 0\nexit 1\n"
               "source journal\ncount 0\nexit 0\n")
    log = parse_kernel_xid(refused)
    assert log["readable"] is False and "Operation not permitted" in log["error"]
    [line] = xid_checks({"nvidia.query": _gpu_at("01:00"), "kernel.xid": log})
    assert line.status == "WARN" and "not read" in line.seen and "no kernel message at all" in line.seen


@pytest.mark.parametrize("cut", [
    "[ 1234.5] NVRM: Xid (PCI:0000:2b:00): 7",  # Xid 79's line cut after its first digit, then the count and exit 0
    "[ 1234.5] NVRM: Xid (PCI:0000:2b:00): 79 GPU has fallen off the bus.",  # no comma: not the driver's form
    "[ 1234.5] NVRM: Xid (PCI:0000:2b:00): \uff17\uff19, GPU has fallen off the bus.",  # fullwidth digits
    "[ 1234.5] NVRM: Xid (PCI:0000:2b:00): \u0667\u0669, GPU has fallen off the bus.",  # Arabic-Indic digits
])
def test_an_xid_line_not_in_nvidias_form_is_unreadable_never_another_xid(cut):
    from bringup.facts.base import UntrustedOutput

    with pytest.raises(UntrustedOutput, match="not in the driver's form"):
        parse_kernel_xid(_xid_output(cut))
    # The real lines, with their comma, still read.
    assert [e["xid"] for e in parse_kernel_xid(_xid_output(XID79, XID63, XID69))["events"]] == [79, 63, 69]


def test_a_cut_kernel_log_is_named_and_non_utf8_kept():
    from bringup.facts.base import UntrustedOutput

    cut = _xid_output(XID79).rsplit("count", 1)[0]
    with pytest.raises(UntrustedOutput, match="cut short"):
        parse_kernel_xid(cut)
    # A line with a byte that is not UTF-8 (decoded with surrogateescape, as the transport does).
    raw = _xid_output(XID79).encode().replace(b"fallen", b"fall\xffen").decode("utf-8", "surrogateescape")
    log = parse_kernel_xid(raw)
    assert log["damaged"] == 1 and log["events"][0]["xid"] == 79
    line = xid_checks({"nvidia.query": _gpu_at("2B:00"), "kernel.xid": log})[0]
    assert "1 line(s) not valid UTF-8" in line.seen


def test_no_gpu_no_xid_line():
    assert xid_checks({"kernel.xid": parse_kernel_xid(_xid_output(XID79)), "pci.devices": []}) == []


def test_the_xid_command_runs_here(tmp_path):
    """The fact's own command on this machine: dmesg read (its first line where the log starts), or refused with
    its own words and the journal tried after it; either way the output's framing is whole."""
    import subprocess

    out = subprocess.run(["sh", "-c", KernelXid.command], capture_output=True, text=True, timeout=60).stdout
    assert out.startswith("source dmesg\n") and "\ncount " in out and "\nexit " in out, out[:300]
    dmesg = subprocess.run(["sh", "-c", "dmesg >/dev/null"], capture_output=True, text=True, timeout=60)
    log = parse_kernel_xid(out)
    if dmesg.returncode == 0:
        assert log["readable"] and log["source"] == "dmesg" and log["first"], log
    else:
        assert not log["readable"] and dmesg.stderr.strip().split(": ")[-1] in log["error"], (log, dmesg.stderr)


def test_an_xid_of_a_mig_instance_and_of_a_gpu_gone_from_nvidia_smi():
    # The driver names a MIG instance after the GPU (open-gpu-kernel-modules: "PCI:%04x:%02x:%02x GPU-I:%02u").
    mig = "[ 12.0] NVRM: Xid (PCI:0000:01:00 GPU-I:05): 94, pid=7, Contained ECC error."
    log = parse_kernel_xid(_xid_output(mig))
    assert log["events"][0]["xid"] == 94 and log["events"][0]["mig_instance"] == 5
    # Xid 79 on a GPU nvidia-smi no longer lists: named from the PCI bus, spelled as nvidia-smi spells GPUs.
    facts = {"nvidia.query": {"gpus": []}, "kernel.xid": parse_kernel_xid(_xid_output(XID79)),
             "pci.devices": [{"address": "0000:2b:00.0", "kind": "gpu"}]}
    [line] = xid_checks(facts)
    assert line.subject == "GPU 00000000:2B:00.0" and line.status == "FAIL"


def test_every_xid_of_the_table_has_words():
    table = xid_table()
    assert {79, 48, 63, 64, 74, 94, 95, 13, 31, 43} <= set(table)
    assert all(v["kind"] in ("application", "hardware", "memory", "fabric", "driver") and v["means"]
               for v in table.values())


# ---------------------------------------------------------------------------------------------------------
# InfiniBand / RoCE

def _ib(*ports: tuple[str, int, str, str, str, str]) -> list[dict]:
    text = "".join(f"ibport {d} {p} state {s}\nibport {d} {p} phys_state {ph}\nibport {d} {p} rate {r}\n"
                   f"ibport {d} {p} link_layer {ll}\n" for d, p, s, ph, r, ll in ports)
    return parse_infiniband_ports(text)


UP400 = ("mlx5_0", 1, "4: ACTIVE", "5: LinkUp", "400 Gb/sec (4X NDR)", "InfiniBand")


def test_ib_ports_at_rate_pass_and_below_fail():
    half = ("mlx5_1", 1, "4: ACTIVE", "5: LinkUp", "200 Gb/sec (2X NDR)", "InfiniBand")
    lines = infiniband_checks({"net.infiniband": _ib(UP400, half)}, {})
    assert [(c.subject, c.status) for c in lines] == [("mlx5_0 port 1", "PASS"), ("mlx5_1 port 1", "FAIL")]
    assert lines[1].value == 200 and lines[1].limit == 400 and lines[1].unit == "Gb/s"
    # The inventory's rate wins over the fastest port's.
    lines = infiniband_checks({"net.infiniband": _ib(UP400)}, {"infiniband_rate_gbps": 800})
    assert lines[0].status == "FAIL" and "infiniband_rate_gbps" in lines[0].seen


def test_ib_port_down_and_ignored():
    down = ("mlx5_2", 1, "1: DOWN", "3: Disabled", "10 Gb/sec (4X SDR)", "InfiniBand")
    init = ("mlx5_3", 1, "2: INIT", "5: LinkUp", "400 Gb/sec (4X NDR)", "InfiniBand")
    lines = infiniband_checks({"net.infiniband": _ib(UP400, down, init)}, {})
    assert [c.status for c in lines] == ["PASS", "FAIL", "FAIL"]
    assert "cable it" in lines[1].fix and "subnet manager" in lines[2].fix
    lines = infiniband_checks({"net.infiniband": _ib(UP400, down)}, {"infiniband_ignore": ["mlx5_2/1"]})
    assert [c.name for c in lines] == ["RDMA ports ignored", "InfiniBand port"]


def test_ib_garbled_value_is_named_not_read_as_up():
    cut = ("mlx5_0", 1, "4: ACT", "5: LinkUp", "400 Gb/sec (4X NDR)", "InfiniBand")
    [port] = _ib(cut)
    assert port["state"] is None and "state" in port["refused"]
    [line] = infiniband_checks({"net.infiniband": [port]}, {})
    assert line.status == "FAIL" and line.subject == "mlx5_0 port 1"


@pytest.mark.reliability(item=34, fault="an ACTIVE, LinkUp RDMA port at rate 0 Gb/sec", variants=2,
                         checks=("one clear line",))
def test_an_active_port_at_rate_zero_fails_never_passes():
    zero = ("mlx5_0", 1, "4: ACTIVE", "5: LinkUp", "0 Gb/sec", "InfiniBand")
    [line] = infiniband_checks({"net.infiniband": _ib(zero)}, {})
    assert line.status == "FAIL" and "0 Gb/s" in line.seen, line
    # Beside a port at its rate, too (the fastest of the host is not 0 there).
    lines = infiniband_checks({"net.infiniband": _ib(UP400, ("mlx5_1",) + zero[1:])}, {})
    assert [c.status for c in lines] == ["PASS", "FAIL"]


@pytest.mark.reliability(item=34, fault="an RDMA port's state printed twice (1: DOWN, then 4: ACTIVE)", variants=2,
                         checks=("one clear line",))
@pytest.mark.parametrize("extra", ["ibport mlx5_0 1 state 4: ACTIVE\n", "ibport mlx5_0 1 rate 400 Gb/sec (4X NDR)\n"])
def test_a_port_file_printed_twice_is_damaged_never_last_wins(extra):
    down = ("mlx5_0", 1, "1: DOWN", "5: LinkUp", "400 Gb/sec (4X NDR)", "InfiniBand")
    text = "".join(f"ibport mlx5_0 1 {f} {v}\n" for f, v in zip(("state", "phys_state", "rate", "link_layer"),
                                                                 down[2:]))
    [port] = parse_infiniband_ports(text + extra)
    assert port["refused"] == f"damaged: {extra.split()[3]} printed more than once", port
    [line] = infiniband_checks({"net.infiniband": [port]}, {})
    assert line.status == "FAIL" and "printed more than once" in line.seen


@pytest.mark.reliability(item=34, fault="net.infiniband cut or garbled: no ibport line, a line cut before its file, "
                         "a port not a number", variants=5, checks=("one clear line",))
@pytest.mark.parametrize("text", ["garbage line\n", "ibpo\n", "ibport mlx5_0 1\n", "ibport mlx5_0 1 state\n",
                                  "ibport mlx5_0 x1 state 1: DOWN\n"])
def test_ib_output_with_a_line_not_in_the_commands_form_is_unreadable(text):
    from bringup.facts.base import UntrustedOutput

    with pytest.raises(UntrustedOutput, match=r"^net.infiniband: a line not in the command's form"):
        parse_infiniband_ports(text)


@pytest.mark.parametrize("layer", ["Infini", "Eth", ""])
def test_an_ib_link_layer_cut_is_refused(layer):
    [port] = _ib(("mlx5_0", 1, "4: ACTIVE", "5: LinkUp", "400 Gb/sec (4X NDR)", layer))
    assert port["link_layer"] is None and port["refused"] == "unreadable or garbled: link_layer", port
    [line] = infiniband_checks({"net.infiniband": [port]}, {})
    assert line.status == "FAIL"


def test_roce_ports_are_named_so():
    roce = ("mlx5_4", 1, "4: ACTIVE", "5: LinkUp", "100 Gb/sec (4X EDR)", "Ethernet")
    assert infiniband_checks({"net.infiniband": _ib(roce)}, {})[0].name == "RoCE port"


def test_health_vars_are_checked_in_one_line(tmp_path):
    from bringup.errors import InputError
    from bringup.hardware.health import check_vars
    from bringup.inventory.hosts import load_inventory

    (tmp_path / "hosts").write_text("all:\n  hosts:\n    g1:\n      infiniband_ignore: mlx5_0\n")
    with pytest.raises(InputError, match=r"^host g1: infiniband_ignore"):
        check_vars(load_inventory(tmp_path / "hosts").select(host="g1"))


# ---------------------------------------------------------------------------------------------------------
# The checklist written whole when a health fact is damaged (offline, from the real H200's raw bundle)

REPO = Path(__file__).resolve().parents[2]


def _checklist_from(tmp_path: Path, raw_extra: dict) -> tuple:
    import json
    import subprocess
    import sys

    import yaml

    doc = json.loads((FIX / "h200-vm" / "facts-raw.json").read_text())
    doc["raw"].update(raw_extra)
    (tmp_path / "bundle.json").write_text(json.dumps(doc))
    (tmp_path / "hosts").write_text(yaml.safe_dump({"all": {"hosts": {"h200-vm": {
        "ansible_host": "127.0.0.1", "ansible_port": 9, "gpu_profile": "auto"}}}}))
    r = subprocess.run([sys.executable, "-m", "invoke", "--search-root", str(REPO), "checklist", "--host", "h200-vm",
                        "--facts", str(tmp_path / "bundle.json"), "--out", "pages"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=180)
    md = tmp_path / "pages" / "h200-vm.md"
    return r, md.read_text() if md.exists() else ""


@pytest.mark.reliability(item=31, fault="a health fact's output damaged: NVLink list cut mid-line, kernel log cut "
                                        "before its count, an InfiniBand state cut, not UTF-8",
                         variants=1, checks=("one clear line", "report written"))
def test_damaged_health_outputs_are_each_one_line_and_the_page_is_written(tmp_path):
    nvlink = "GPU 0: NVIDIA H200 (UUID: GPU-x)\n\t Link 0: 26.562 GB/s\n\t Link 1: 26.5"
    xid = _xid_output(XID79).rsplit("count", 1)[0]
    ib = "ibport mlx5_0 1 state 4: ACT\nibport mlx5_0 1 phys_state 5: LinkUp\n" \
         "ibport mlx5_0 1 rate 400 Gb/sec (4X NDR)\nibport mlx5_0 1 link_layer Infini\udcffBand\n"
    r, md = _checklist_from(tmp_path, {"nvidia.nvlink": {"rc": 0, "output": nvlink},
                                       "kernel.xid": {"rc": 0, "output": xid},
                                       "net.infiniband": {"rc": 0, "output": ib}})
    assert "Traceback" not in r.stderr and r.returncode == 2, r.stdout + r.stderr  # FAIL lines: exit 2
    rows = [l for l in md.splitlines() if l.startswith("| FAIL")]
    assert any("fact nvidia.nvlink" in l and "link 1" in l for l in rows), md
    assert any("fact kernel.xid" in l and "cut short" in l for l in rows), md
    assert any("InfiniBand port" in l and "state" in l and "link_layer" in l for l in rows), md
    # The rest of the checklist is there: the GPU's health lines and the driver line.
    assert "| PASS | health | GPU 00000000:00:06.0 ECC errors |" in md and "580.159.04" in md


@pytest.mark.reliability(item=31, fault="the kernel log cannot be read (dmesg refused, no journal of the kernel)",
                         checks=("one clear line", "report written"))
def test_an_unreadable_kernel_log_is_one_line_on_the_page(tmp_path):
    refused = ("source dmesg\nfirst dmesg: read kernel buffer failed: Operation not permitted\n"
               "error dmesg: read kernel buffer failed: Operation not permitted\ncount 0\nexit 1\n")
    r, md = _checklist_from(tmp_path, {"kernel.xid": {"rc": 0, "output": refused}})
    assert "Traceback" not in r.stderr, r.stderr
    rows = [l for l in md.splitlines() if "Xid events" in l]
    assert len(rows) == 1 and rows[0].startswith("| WARN") and "Operation not permitted" in rows[0], md


# ---------------------------------------------------------------------------------------------------------
# On public captures of broken and healthy hardware (tests/fixtures/hosts/public, sources in INDEX.tsv)

PUB = FIX / "public"


def _text(name: str) -> str:
    """A public capture without its ``#`` source lines."""
    return "\n".join(l for l in (PUB / name).read_text().splitlines() if not l.startswith("#")) + "\n"


def test_capture_8xh100_hw_slowdown_and_power_brake_fail_every_gpu():
    q = parse_nvidia_smi_q(_text("nvsmi-q-8xh100sxm-hwslowdown-drv535.txt"))
    lines = _lines({"nvidia.query": q}, name="clock event reasons")
    assert len(lines) == 8 and {c.status for c in lines} == {"FAIL"}
    assert lines[0].seen.startswith("active now: HW slowdown, HW power brake")
    assert all(c.status == "PASS" for c in _lines({"nvidia.query": q}, name="NVSwitch fabric"))


def test_capture_8xh100_one_gpu_in_sw_thermal_slowdown():
    q = parse_nvidia_smi_q(_text("nvsmi-q-8xh100sxm-swthermal-drv535.txt"))
    bad = [c for c in _lines({"nvidia.query": q}, name="clock event reasons") if c.status != "PASS"]
    assert [(c.subject, c.status) for c in bad] == [("GPU 00000000:75:00.0", "FAIL")]
    assert "HW power brake, SW thermal slowdown" in bad[0].seen


def test_capture_a10_remap_pending_fails_and_asks_for_a_reset():
    q = parse_nvidia_smi_q(_text("nvsmi-q-a10-remap-pending-drv535.txt"))
    [line] = _lines({"nvidia.query": q}, name="memory repair")
    assert line.status == "FAIL" and line.subject == "GPU 00000000:07:00.0"
    assert "4 uncorrectable" in line.seen and "pending a GPU reset" in line.seen and "reset" in line.fix


@pytest.mark.reliability(item=40, fault="nvidia-smi -q Remapped Rows with N/A beside its figures (Uncorrectable Error, "
                         "Pending or Remapping Failure Occurred N/A; the A10 capture whose remap is pending) read as 0 "
                         "rows or nothing pending: PASS; a block all N/A read as '0 uncorrectable'", variants=4,
                         checks=("one clear line",))
@pytest.mark.parametrize("key", ["Uncorrectable Error", "Pending", "Remapping Failure Occurred", "all"])
def test_remapped_rows_with_na_beside_figures_are_not_checked_never_pass(key):
    text = _text("nvsmi-q-a10-remap-pending-drv535.txt")
    block = re.search(r"^    Remapped Rows\n((?:        [^\n]*\n)+)", text, flags=re.M)
    keys = ["Correctable Error", "Uncorrectable Error", "Pending", "Remapping Failure Occurred"] if key == "all" \
        else [key]
    damaged = block.group(1)
    for k in keys:
        damaged = re.sub(rf"^(        {k} +: ).*$", r"\g<1>N/A", damaged, count=1, flags=re.M)
    q = parse_nvidia_smi_q(text[:block.start(1)] + damaged + text[block.end(1):])
    found = _lines({"nvidia.query": q}, name="memory repair")
    if key == "all":  # no remapped rows reported (and the Retired Pages all N/A too): not checked, never "0 rows"
        [line] = found
        assert line.status == "WARN" and line.seen == ("not checked: nvidia-smi -q prints every Remapped Rows and "
                                                       "Retired Pages value N/A, though it counts ECC errors"), line
        return
    [line] = found
    assert line.status == "WARN" and line.seen.startswith("not checked: nvidia.query unreadable: Remapped Rows "
                                                          f"{key} 'N/A'"), line


@pytest.mark.reliability(item=40, fault="nvidia-smi -q Remapped Rows and Retired Pages all N/A on a GPU that counts "
                         "ECC errors with MIG off: no memory repair line at all, silently dropped (with MIG on, or in "
                         "a vGPU guest, NVML answers none: no line)", variants=3, checks=("one clear line",))
def test_no_repair_reported_beside_ecc_counts_is_said_not_dropped():
    # The real H100 and H200 with MIG on: Remapped Rows : N/A, every Retired Pages value N/A, ECC counting.  NVML's
    # nvmlDeviceGetRemappedRows: "On MIG-enabled GPUs with active instances, querying the number of remapped rows is
    # not supported": what the driver always prints there, no line (a WARN on every healthy MIG host was noise).
    for name in ("nvsmi-q-h100-mig4-drv590.txt", "nvsmi-q-h200-mig5-drv590.txt"):
        q = parse_nvidia_smi_q(_text(name))
        assert _lines({"nvidia.query": q}, name="memory repair") == [], name
        # Not damage: the capture's values all read (test_every_real_q_capture_reads_every_health_value).
        assert q["gpus"][0]["health"]["unreadable"] == {}
    # The same with MIG off: not checked, named, never dropped.
    off_mig = re.sub(r"^(        Current +: )Enabled$", r"\g<1>Disabled", _text("nvsmi-q-h100-mig4-drv590.txt"),
                     count=1, flags=re.M)
    assert off_mig != _text("nvsmi-q-h100-mig4-drv590.txt")
    [line] = _lines({"nvidia.query": parse_nvidia_smi_q(off_mig)}, name="memory repair")
    assert line.status == "WARN" and line.seen.startswith("not checked: nvidia-smi -q prints every Remapped Rows "
                                                          "and Retired Pages value N/A, though it counts"), line
    # ECC off (no counters: every value N/A): no repair line, the ECC line says ECC is off.
    off = re.sub(r"^(            (?:SRAM|DRAM) [^:]*: )0$", r"\g<1>N/A", _text("nvsmi-q-h100-mig4-drv590.txt"),
                 flags=re.M)
    assert _lines({"nvidia.query": parse_nvidia_smi_q(off)}, name="memory repair") == []


@pytest.mark.reliability(item=40, fault="nvidia-smi -q GPU Current Temp 0 C (a broken sensor or a bad read on a "
                         "powered GPU): PASS '0 °C, 56 °C below the slowdown limit'", variants=1,
                         checks=("one clear line",))
def test_a_gpu_at_zero_degrees_is_not_checked_never_pass():
    q = _q(H200, (r"(GPU Current Temp\s+:) \d+ C", r"\1 0 C"))
    [line] = _lines({"nvidia.query": q}, name="temperature")
    assert line.status == "WARN" and line.seen == "not checked: nvidia.query unreadable: GPU Current Temp '0 C'", line
    # 1 °C is a reading (cold, but a sensor that reads); the memory's 0 °C judges nothing and is left as read.
    assert _lines({"nvidia.query": _q(H200, (r"(GPU Current Temp\s+:) \d+ C", r"\1 1 C"))},
                  name="temperature")[0].status == "PASS"
    q = _q(H200, (r"(Memory Current Temp\s+:) \d+ C", r"\1 0 C"))
    assert _lines({"nvidia.query": q}, name="temperature")[0].status == "PASS"


def _spliced(section_file: str, what: str) -> dict:
    """The 8x H100 capture with GPU 18:00.0's ``what`` section replaced by the one a public excerpt shows
    (indented as nvidia-smi prints it): the excerpt alone is no whole report."""
    body = [l for l in _text(section_file).splitlines() if l.strip() and l.strip() != "--"]
    pad = 4 - (len(body[0]) - len(body[0].lstrip()))
    body = [" " * pad + l if pad > 0 else l for l in body]
    text = H100X8.read_text()
    old = re.search(rf"^    {what}\n(?:        .*\n)+", text, flags=re.M).group(0)
    return parse_nvidia_smi_q(text.replace(old, "\n".join(body) + "\n", 1))


@pytest.mark.parametrize("capture,words", [
    ("nvsmi-q-fabric-inprogress-drv580.txt", "fabric state In Progress, status None"),
    ("nvsmi-q-fabric-insufficient-resources.txt", "status Insufficient Resources"),
    ("nvsmi-q-grep-fabric-health-unhealthy.txt", "health Unhealthy"),
])
def test_capture_fabric_states_that_fail(capture, words):
    lines = _lines({"nvidia.query": _spliced(capture, "Fabric")}, name="NVSwitch fabric")
    bad = [c for c in lines if c.status != "PASS"]
    assert [c.subject for c in bad] == ["GPU 00000000:18:00.0"] and bad[0].status == "FAIL"
    assert words in bad[0].seen, bad[0].seen


def test_capture_sram_uncorrectable_fails():
    q = _spliced("nvsmi-q-ecc-sram-uncorr-excerpt.txt", "ECC Errors")
    line = [c for c in _lines({"nvidia.query": q}, name="ECC errors") if c.status != "PASS"][0]
    assert line.status == "FAIL" and "since boot 1 uncorrectable (SRAM 1)" in line.seen
    assert "lifetime 5 uncorrectable" in line.seen


def test_capture_nvlink_8xa100_all_up_and_h100_pcie_bridges():
    a100 = parse_nvlink_status(_text("nvlink-s-8xa100sxm.txt"))
    gpus = [{"bus_id": f"00000000:{i:02X}:00.0", "uuid": g["uuid"], "product_architecture": "Ampere",
             "fabric_state": "Completed"} for i, g in enumerate(a100)]
    lines = nvlink_checks({"nvidia.query": {"gpus": gpus}, "nvidia.nvlink": a100})
    assert len(lines) == 8 and {c.status for c in lines} == {"PASS"}
    assert lines[0].seen == "12 of 12 links up at 25 GB/s (the part's 25)"
    # 2x H100 PCIe joined by bridges: 12 of 18 links each (6 no bridge connects), no fabric: both pass.
    h100 = parse_nvlink_status(_text("nvlink-s-2xh100pcie-bridge-inactive.txt"))
    gpus = [{"bus_id": f"00000000:{i:02X}:00.0", "uuid": g["uuid"], "product_architecture": "Hopper",
             "fabric_state": None} for i, g in enumerate(h100)]
    lines = nvlink_checks({"nvidia.query": {"gpus": gpus}, "nvidia.nvlink": h100})
    assert [c.status for c in lines] == ["PASS", "PASS"] and lines[0].seen.startswith("12 of 18 links up at 26.562")


def test_capture_gb200_excerpt_cut_is_not_read_as_good():
    # The published GB200 excerpt: GPU 0 whole (18 links at 53.125 GB/s, NVLink 5), GPU 1 cut after 2 links.
    # A cut output is unreadable (named), not a verdict on GPU 1's hardware.
    from bringup.facts.base import UntrustedOutput

    with pytest.raises(UntrustedOutput, match="GPU 1, the last, has 2 link line"):
        parse_nvlink_status(_text("nvlink-s-gb200-excerpt.txt"))
    # GPU 0 alone (the excerpt before GPU 1's line): read, at NVLink 5's speed.
    text = _text("nvlink-s-gb200-excerpt.txt")
    gb = parse_nvlink_status(text[:text.index("GPU 1:")])
    gpus = [{"bus_id": "00000000:00:00.0", "uuid": gb[0]["uuid"], "product_architecture": "Blackwell",
             "fabric_state": "Completed"}]
    lines = nvlink_checks({"nvidia.query": {"gpus": gpus}, "nvidia.nvlink": gb})
    assert [c.status for c in lines] == ["PASS"]
    assert lines[0].seen == "18 of 18 links up at 53.125 GB/s (the part's 53.125)"


@pytest.mark.parametrize("speed", ["9" * 400, "1" + "0" * 39, "401", "1e39"])
def test_an_absurd_nvlink_speed_is_unreadable_never_pass(speed):
    from bringup.facts.base import UntrustedOutput

    with pytest.raises(UntrustedOutput, match="link 3"):
        parse_nvlink_status(A100_NVLINK.replace("\t Link 3: 25 GB/s\n", f"\t Link 3: {speed} GB/s\n", 1))


def _a100_8(text: str) -> dict:
    gpus = [{"bus_id": f"00000000:{i:02X}:00.0", "uuid": g["uuid"], "product_architecture": "Ampere",
             "fabric_state": "Completed"} for i, g in enumerate(parse_nvlink_status(_text("nvlink-s-8xa100sxm.txt")))]
    return {"nvidia.query": {"gpus": gpus}, "nvidia.nvlink": parse_nvlink_status(text)}


@pytest.mark.parametrize("cut", ["after the GPU 7 line", "in the GPU 7 line", "in a link line of GPU 7",
                                 "after a link line of GPU 7"])
def test_capture_nvlink_cut_at_gpu_7_is_unreadable_not_seven_passes(cut):
    from bringup.facts.base import UntrustedOutput

    text = _text("nvlink-s-8xa100sxm.txt")
    at = text.index("GPU 7:")
    head_end = text.index("\n", at) + 1
    cuts = {"after the GPU 7 line": text[:head_end], "in the GPU 7 line": text[:at + 20],
            "in a link line of GPU 7": text[:head_end + 15],
            "after a link line of GPU 7": text[:text.index("\n", head_end) + 1]}
    with pytest.raises(UntrustedOutput, match="unreadable|cut short"):
        parse_nvlink_status(cuts[cut])


L4_HEAD = "GPU 2: NVIDIA L4 (UUID: GPU-4a1f0c2e-7d1b-4e7a-9a55-0c3e5b6d7f80)\n"


def _mixed(text: str) -> dict:
    links = parse_nvlink_status(text)
    parts = {"NVIDIA H100 PCIe": "Hopper", "NVIDIA L4": "Ada Lovelace"}
    gpus = [{"bus_id": f"00000000:{0x18 + g['index']:02X}:00.0", "uuid": g["uuid"], "product_name": g["name"],
             "product_architecture": parts[g["name"]], "fabric_state": None} for g in links]
    return {"nvidia.query": {"gpus": sorted(gpus, key=lambda g: g["bus_id"])}, "nvidia.nvlink": links}


@pytest.mark.parametrize("where", ["last", "first"])
def test_a_mixed_hosts_gpu_without_nvlink_is_named_never_the_output_unreadable(where):
    # The real 2x H100 PCIe bridged capture with an L4 (no NVLink) beside them: nvlink -s prints its "GPU 2:" line
    # and no link line.  Listed last, it read as an output cut after its header: the whole fact unreadable.
    text = _text("nvlink-s-2xh100pcie-bridge-inactive.txt")
    text = text + L4_HEAD if where == "last" else L4_HEAD + text
    facts = _mixed(text)
    assert [(g["index"], len(g["links"])) for g in facts["nvidia.nvlink"]] == (
        [(0, 18), (1, 18), (2, 0)] if where == "last" else [(2, 0), (0, 18), (1, 18)])
    lines = nvlink_checks(facts)
    assert [(c.subject, c.status) for c in lines] == [("GPU 00000000:18:00.0", "PASS"), ("GPU 00000000:19:00.0", "PASS"),
                                                      ("GPU 00000000:1A:00.0", "PASS")], lines
    assert lines[2].seen == ("no NVLink: nvidia-smi nvlink -s lists this NVIDIA L4 with no link, as it prints a part "
                             "without NVLink (the GPUs with links are NVIDIA H100 PCIe)")


def test_a_mixed_host_cut_in_a_line_stays_unreadable():
    from bringup.facts.base import UntrustedOutput

    text = _text("nvlink-s-2xh100pcie-bridge-inactive.txt") + L4_HEAD
    with pytest.raises(UntrustedOutput, match="GPU 2: .* is not a whole GPU line"):
        parse_nvlink_status(text[:-30])  # the L4's line cut in its UUID
    with pytest.raises(UntrustedOutput, match="link 17"):
        parse_nvlink_status(text.replace("Link 17: <inactive>\n" + L4_HEAD, "Link 17: <inac"))
    # GPU 1 (an H100 like GPU 0) cut after 3 of its 18 links: a cut, named against its own part.
    cut = text[:text.index("Link 3:", text.index("GPU 1:"))]
    with pytest.raises(UntrustedOutput, match=r"GPU 1, the last, has 3 link line\(s\), GPU 0 \(the same part\) 18"):
        parse_nvlink_status(cut)


def test_a_gpu_the_query_lists_that_nvlink_output_lacks_is_named():
    # The 8x A100 capture without GPU 7's block (its header and links), nvidia-smi -q listing 8 GPUs.
    text = _text("nvlink-s-8xa100sxm.txt")
    facts = _a100_8(text[:text.index("GPU 7:")])
    lines = nvlink_checks(facts)
    assert len(lines) == 8
    assert [(c.subject, c.status, c.seen) for c in lines if c.status != "PASS"] == [
        ("GPU 00000000:07:00.0", "WARN", "not checked: nvidia-smi nvlink -s did not list it, though its peers have "
                                         "links (unreadable)")]


def _through_awk(text: str) -> str:
    """A kernel log capture through kernel.xid's own awk, as the fact's command reads dmesg."""
    import subprocess

    from bringup.facts.kernel import XID_AWK  # the command's own program, not a copy

    r = subprocess.run(["awk", XID_AWK], input=text + "exit 0\n", capture_output=True, text=True, timeout=30)
    return "source dmesg\n" + r.stdout


@pytest.mark.parametrize("capture,bus,xids,status", [
    ("dmesg-xid-48-63-94.txt", "19:00", {48, 63, 94}, "FAIL"),
    ("dmesg-xid-119-gsp-timeout.txt", "9b:00", {119}, "FAIL"),
    ("dmesg-xid-79-sxid-20034.txt", "91:00", {79}, "FAIL"),
    ("dmesg-T-xid-43-31-94.txt", "00:05", {43}, "WARN"),
])
def test_capture_xid_logs(capture, bus, xids, status):
    log = parse_kernel_xid(_through_awk(_text(capture)))
    assert log["readable"] and {e["xid"] for e in log["events"] if e["pci"].endswith(bus)} == xids
    lines = xid_checks({"nvidia.query": _gpu_at(bus.upper()), "kernel.xid": log})
    mine = [c for c in lines if c.subject == f"GPU 00000000:{bus.upper()}.0"]
    assert len(mine) == 1 and mine[0].status == status, lines


def _ibstat_as_sysfs(text: str) -> str:
    """``ibstat`` printed per port what sysfs holds (CA type, State, Physical state, Rate, Link layer); written back in
    the sysfs form the fact's command prints (``4: ACTIVE``, ``5: LinkUp``, ``400 Gb/sec``), said here."""
    states = {"Active": "4: ACTIVE", "Down": "1: DOWN", "Initializing": "2: INIT", "Armed": "3: ARMED"}
    phys = {"LinkUp": "5: LinkUp", "Disabled": "3: Disabled", "Polling": "2: Polling", "Sleep": "1: Sleep"}
    out, dev, port = [], None, None
    for l in text.splitlines():
        m = re.match(r"CA '(\S+)'", l)
        if m:
            dev = m.group(1)
        m = re.match(r"\s+CA type: (\S+)", l)
        if m and dev:
            out.append(f"ibport {dev} 1 hca_type {m.group(1)}")  # the captures' CAs have one port each
        m = re.match(r"\s+Port (\d+):", l)
        if m:
            port = m.group(1)
        m = re.match(r"\s+(State|Physical state|Rate|Link layer): (.*)$", l)
        if m and dev and port:
            key, val = m.groups()
            file, val = {"State": ("state", states.get(val, val)), "Physical state": ("phys_state", phys.get(val, val)),
                         "Rate": ("rate", f"{val} Gb/sec"), "Link layer": ("link_layer", val)}[key]
            out.append(f"ibport {dev} {port} {file} {val}")
    return "\n".join(out) + "\n"


def test_capture_ibstat_h100_host_ports_down():
    ports = parse_infiniband_ports(_ibstat_as_sysfs(_text("ibstat-h100host-12hca-3eth-down.txt")))
    assert len(ports) == 12 and not any(p.get("refused") for p in ports)
    lines = infiniband_checks({"net.infiniband": ports}, {})
    bad = sorted(c.subject for c in lines if c.status == "FAIL")
    assert bad == ["mlx5_2 port 1", "mlx5_7 port 1", "mlx5_8 port 1"], [(c.subject, c.status, c.seen) for c in lines]
    ib = [c for c in lines if c.name == "InfiniBand port"]
    assert len(ib) == 8 and all(c.status == "PASS" and c.value == 400 for c in ib)
    # An operator who expects NDR 400 on RoCE too: the 100 Gb/s Ethernet port is held against it.
    lines = infiniband_checks({"net.infiniband": ports}, {"infiniband_rate_gbps": 400})
    assert any(c.subject == "mlx5_1 port 1" and c.status == "FAIL" and c.limit == 400 for c in lines)


@pytest.mark.parametrize("hca", ["MT4\udcff129", "MT4129 \x1b[2J", "", "MT4129\x07", "M" * 65])
def test_a_slow_port_with_a_garbled_or_missing_hca_type_is_not_checked_never_pass(hca):
    # The H100 host's capture with mlx5_0 (ConnectX-7, NDR 400) trained at 200 and its hca_type garbled or blank:
    # in a group of its own it passed; its rate is now not checked, named.
    text = _ibstat_as_sysfs(_text("ibstat-h100host-12hca-3eth-down.txt"))
    text = text.replace("ibport mlx5_0 1 hca_type MT4129\n", f"ibport mlx5_0 1 hca_type {hca}\n", 1)
    text = text.replace("ibport mlx5_0 1 rate 400 Gb/sec\n", "ibport mlx5_0 1 rate 200 Gb/sec\n", 1)
    lines = infiniband_checks({"net.infiniband": parse_infiniband_ports(text)}, {})
    [k] = [c for c in lines if c.subject == "mlx5_0 port 1"]
    assert k.status == "WARN" and k.seen.startswith("not checked: ACTIVE, LinkUp, 200 Gb/sec; "), k.seen
    assert "the rate it should run is unknown (unreadable)" in k.seen
    # With the rate pinned, the model does not matter: held against it, FAIL.
    pinned = infiniband_checks({"net.infiniband": parse_infiniband_ports(text)}, {"infiniband_rate_gbps": 400})
    assert [c.status for c in pinned if c.subject == "mlx5_0 port 1"] == ["FAIL"]


def _roce_ports(dev: str, hca, rates) -> str:
    """RoCE ports of one driver as net.infiniband's command prints them: ``<dev><i>`` port 1, ACTIVE, LinkUp."""
    out = []
    for i, rate in enumerate(rates):
        d = f"{dev}{i}"
        out += [f"ibport {d} 1 state 4: ACTIVE", f"ibport {d} 1 phys_state 5: LinkUp",
                f"ibport {d} 1 rate {rate} Gb/sec (4X HDR)", f"ibport {d} 1 link_layer Ethernet",
                f"ibport {d} 1 hca_type {hca(d) if callable(hca) else hca}"]
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("dev,hca", [
    ("mlx5_", "MT4129"),                                               # mlx5: "MT%d" of the PCI device id
    ("mlx4_", "MT4099"),                                               # mlx4: the same form
    ("bnxt_re", "Broadcom NetXtreme-C/E RoCE Driver HCA"),            # bnxt_re: its node_desc
    ("bnxt_re", lambda d: f"gpu-node-01 {d}"),                         # ... as rdma-ndd sets it: "%h %d"
    ("ionic_", lambda d: f"gpu-node-01.example.com {d}"),              # ionic: its node_desc, the same
    ("hfi1_", "Intel Omni-Path Host Fabric Interface Adapter 100 Series"),  # hfi1: its board name
    ("qedr", "FastLinQ QL8070 RoCE"),                                  # qedr: "FastLinQ QL%x RoCE|iWARP"
    ("bnxt_re", lambda d: f"gpu01 (rack 4/u12) {d}"),                  # a node_desc an operator wrote
    ("i40iw", "I40IW"),
])
def test_real_hca_types_are_adapter_models_and_their_ports_are_checked(dev, hca):
    # bnxt_re and ionic print the node description as hca_type (spaces, '/'): it was refused, so every healthy port
    # was WARN "not checked ... is not an adapter model" unless infiniband_rate_gbps was pinned.
    ports = parse_infiniband_ports(_roce_ports(dev, hca, [400, 400, 200]))
    assert all(p["hca_type"] and "hca_type_unreadable" not in p and "refused" not in p for p in ports), ports
    lines = infiniband_checks({"net.infiniband": ports}, {})
    assert [(c.subject, c.status) for c in lines] == [(f"{dev}0 port 1", "PASS"), (f"{dev}1 port 1", "PASS"),
                                                      (f"{dev}2 port 1", "FAIL")], lines
    assert lines[2].limit == 400 and lines[2].seen.startswith("ACTIVE, LinkUp, 200 Gb/sec (4X HDR); expected 400 Gb/s")


def test_the_bnxt_re_reproducer_reads_its_model():
    [port] = parse_infiniband_ports("ibport bnxt_re0 1 hca_type Broadcom NetXtreme-C/E RoCE Driver HCA\n"
                                    "ibport bnxt_re0 1 state 4: ACTIVE\nibport bnxt_re0 1 phys_state 5: LinkUp\n"
                                    "ibport bnxt_re0 1 rate 100 Gb/sec (4X EDR)\nibport bnxt_re0 1 link_layer Ethernet\n")
    assert port["hca_type"] == "Broadcom NetXtreme-C/E RoCE Driver HCA" and "hca_type_unreadable" not in port
    [line] = infiniband_checks({"net.infiniband": [port]}, {})
    assert line.status == "PASS" and line.seen == "ACTIVE, LinkUp, 100 Gb/sec (4X EDR)"


def test_capture_a100_remap_excerpt_is_refused_as_cut():
    # Published with the author's "[...]" cuts: a GPU section without its "Processes" is no whole report.
    from bringup.facts.base import UntrustedOutput

    with pytest.raises(UntrustedOutput, match="10:1C.0 ends before 'Processes'"):
        parse_nvidia_smi_q(_text("nvsmi-q-a100sxm80-remap-pending-excerpt.txt"))


@pytest.mark.parametrize("capture,subject,words", [
    ("ibstat-cx7-ib-down-polling-excerpt.txt", "mlx5_10 port 1", "cable it"),       # no cable, or a dead one
    ("ibstat-cx6-ib-down-linkup-vf.txt", "mlx5_7 port 1", "subnet manager"),         # link up, port not
])
def test_capture_ibstat_ports_down(capture, subject, words):
    [port] = parse_infiniband_ports(_ibstat_as_sysfs(_text(capture)))
    [line] = infiniband_checks({"net.infiniband": [port]}, {})
    assert line.subject == subject and line.status == "FAIL" and words in line.fix and "DOWN" in line.seen


def test_capture_ibstat_roce_host_two_down():
    ports = parse_infiniband_ports(_ibstat_as_sysfs(_text("ibstat-h100host-12hca-roce-2down.txt")))
    lines = infiniband_checks({"net.infiniband": ports}, {})
    assert sorted(c.subject for c in lines if c.status == "FAIL") == ["mlx5_11 port 1", "mlx5_5 port 1"]
    assert {c.name for c in lines} == {"RoCE port"}


def test_a_wrapped_ring_buffer_is_not_a_clean_boot():
    # dmesg's first line 51234 s after boot: the journal of this boot is read too, and wins when it has the boot.
    wrapped = _xid_output(first="[51234.000001] eth0: link up")
    journal = "source journal\nfirst Dec 04 00:00:01 h kernel: Linux version\ncount 1\nxid " + XID79 + "\nexit 0\n"
    both = parse_kernel_xid(wrapped + journal.replace("count 1\nxid " + XID79 + "\n", "xid " + XID79 + "\ncount 1\n"))
    assert both["source"] == "journal" and both["whole_boot"] and both["events"][0]["xid"] == 79
    # No journal (or none that could be read): dmesg's part of the boot, said, never a clean PASS.
    alone = parse_kernel_xid(wrapped)
    assert alone["readable"] and alone["whole_boot"] is False
    [line] = xid_checks({"nvidia.query": _gpu_at("2B:00"), "kernel.xid": alone})
    assert line.status == "WARN" and "51234 s after boot" in line.seen and "earlier Xids are not known" in line.seen


def test_nvlink_rates_come_from_one_table_by_product_then_architecture():
    from bringup.acceptance.limits import nvlink_gbs
    from bringup.hardware.nvlink import rate

    assert rate("NVIDIA H100 80GB HBM3", "Hopper") == (26.562, 25.0)
    assert rate("NVIDIA GB200", "blackwell") == (53.125, 50.0)
    assert rate("NVIDIA A40", "Ampere") == (14.062, 14.0625) and rate("NVIDIA L40S", "Ada Lovelace") is None
    assert nvlink_gbs("NVIDIA A40", "Ampere", 4) == 56.25 and nvlink_gbs("NVIDIA A100-SXM4-80GB", "Ampere", 12) == 300
    # A bridged pair of A40s at their 14.062 GB/s is healthy, not "slower than 25".
    text = "".join(f"GPU {i}: NVIDIA A40 (UUID: GPU-{i})\n" + "".join(f"\t Link {l}: 14.062 GB/s\n" for l in range(4))
                   for i in range(2))
    gpus = [{"bus_id": f"00000000:{i:02X}:00.0", "uuid": f"GPU-{i}", "product_name": "NVIDIA A40",
             "product_architecture": "Ampere", "fabric_state": None} for i in range(2)]
    lines = nvlink_checks({"nvidia.query": {"gpus": gpus}, "nvidia.nvlink": parse_nvlink_status(text)})
    assert [c.status for c in lines] == ["PASS", "PASS"], lines


def test_the_infiniband_command_reads_a_sysfs_tree(tmp_path):
    """net.infiniband's own command on a sysfs tree laid out as the kernel's (its root moved under tmp_path): each
    port's four files and its adapter's model, a file missing printed empty, so the parser refuses that port."""
    import subprocess

    from bringup.facts.net import NetInfiniband

    for dev, rate in (("mlx5_0", "400 Gb/sec (4X NDR)\n"), ("mlx5_1", None)):
        port = tmp_path / "class" / "infiniband" / dev / "ports" / "1"
        port.mkdir(parents=True)
        (port.parent.parent / "hca_type").write_text("MT4129\n")
        for f, v in (("state", "4: ACTIVE\n"), ("phys_state", "5: LinkUp\n"), ("link_layer", "InfiniBand\n"),
                     ("rate", rate)):
            if v is not None:
                (port / f).write_text(v)
    (tmp_path / "class" / "infiniband" / "mlx5_1" / "ports" / "2").mkdir()  # no state file: not a port
    cmd = NetInfiniband.command.replace("/sys/", f"{tmp_path}/")
    out = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, timeout=30).stdout
    ports = parse_infiniband_ports(out)
    assert [(p["device"], p["port"]) for p in ports] == [("mlx5_0", 1), ("mlx5_1", 1)]
    assert ports[0]["rate"] == "400 Gb/sec (4X NDR)" and ports[0]["hca_type"] == "MT4129" and "refused" not in ports[0]
    assert ports[1]["rate"] is None and ports[1]["refused"] == "unreadable or garbled: rate"


# ---------------------------------------------------------------------------------------------------------
# Issue 41: what an Xid means (a cleanup after an NVLink fault, a Nonfatal NVLink Xid, a GPU off the bus)


def test_capture_xid45_after_nvlink_faults_is_the_nvlink_fault():
    # open-gpu-kernel-modules#1150: Xid 45 on four GPUs, each "caused by previous Xid 149" or "145".
    log = parse_kernel_xid(_through_awk(_text("journal-xid-45-caused-by-149-145.txt")))
    assert [(e["xid"], e["caused_by"]) for e in log["events"][:2]] == [(45, 149), (45, 145)]
    facts = {"nvidia.query": {"gpus": [_gpu_at(b)["gpus"][0] for b in ("DC:00", "ED:00", "BA:00", "97:00")]},
             "kernel.xid": log}
    lines = {c.subject: c for c in xid_checks(facts)}
    dc = lines["GPU 00000000:DC:00.0"]
    assert dc.status == "FAIL" and "Xid 45 ×2 caused by previous Xid 149" in dc.seen, dc.seen
    assert "NVLink NETIR error [fabric]" in dc.seen and "[application]" not in dc.seen
    assert "fabric fault" in dc.fix
    assert "NVLink RLW error [fabric]" in lines["GPU 00000000:ED:00.0"].seen
    assert {c.status for c in lines.values()} == {"FAIL"}
    # A plain Xid 45 (no cause named) is still a program's cleanup: WARN.
    plain = "[ 9.0] NVRM: Xid (PCI:0000:dc:00): 45, pid=1818990, name=python3, Ch 00000001"
    [c] = xid_checks({"nvidia.query": _gpu_at("DC:00"), "kernel.xid": parse_kernel_xid(_xid_output(plain))})
    assert c.status == "WARN" and "[application]" in c.seen


def test_capture_nonfatal_nvlink_xid_warns_with_its_own_advice():
    # leptonai/gpud#1160/#1174: Xid 144 and 145 marked Nonfatal, Xid 149 marked Fatal.
    log = parse_kernel_xid(_through_awk(_text("kmsg-xid-144-149-145-nvlink-fatal-nonfatal.txt")))
    assert [(e["xid"], e["severity"]) for e in log["events"]] == [
        (144, "Nonfatal"), (149, "Fatal"), (149, "Fatal"), (145, "Nonfatal")]
    gpus = {"gpus": [_gpu_at(b)["gpus"][0] for b in ("01:00", "00:00")]
            + [{"bus_id": "00000018:01:00.0", "pci_address": "0018:01:00.0"}]}
    lines = {c.subject: c for c in xid_checks({"nvidia.query": gpus, "kernel.xid": log})}
    nonfatal = lines["GPU 00000000:01:00.0"]
    assert nonfatal.status == "WARN" and "marked Nonfatal" in nonfatal.seen
    assert "no drain" in nonfatal.fix and "replace the board" not in nonfatal.fix
    assert lines["GPU 00000018:01:00.0"].status == "WARN"
    fatal = lines["GPU 00000000:00:00.0"]
    assert fatal.status == "FAIL" and "Xid 149 ×2 Fatal: NVLink NETIR error" in fatal.seen
    assert "replace the board" in fatal.fix


@pytest.mark.reliability(item=41, fault="a GPU fallen off the bus with no Xid in the kernel log (real dmesg), and "
                                        "that log cut before its count", checks=("one clear line",))
@pytest.mark.parametrize("capture,bus", [
    ("dmesg-fallen-off-bus-no-xid-570.txt", "B3:00"),
    ("dmesg-gpu-at-fallen-off-bus-bumblebee.txt", "01:00"),
])
def test_capture_fallen_off_the_bus_without_xid_fails(capture, bus):
    log = parse_kernel_xid(_through_awk(_text(capture)))
    assert log["readable"] and log["count"] == 0 and log["off_bus"], log
    assert log["off_bus"][0]["pci"] == f"0000:{bus.lower()}"
    # The GPU is gone from nvidia-smi: named from the PCI bus.
    facts = {"nvidia.query": {"gpus": []}, "kernel.xid": log,
             "pci.devices": [{"address": f"0000:{bus.lower()}.0", "kind": "gpu"}]}
    [c] = xid_checks(facts)
    assert c.status == "FAIL" and c.subject == f"GPU 00000000:{bus}.0"
    assert "fallen off the bus (no Xid)" in c.seen and "dropped off PCIe" in c.fix
    # Another driver's words (a USB device "fallen off the bus", no NVRM) are no GPU's: the log stays clean.
    other = "[    0.000000] Linux version 6.8.0\n[ 12.0] usb 1-1: device has fallen off the bus\n"
    assert xid_checks({"nvidia.query": _gpu_at("01:00"), "kernel.xid": parse_kernel_xid(_through_awk(other))})[
        0].status == "PASS"
    # Damaged: the same log cut before its count is refused, never read as a clean boot.
    from bringup.facts.base import UntrustedOutput

    with pytest.raises(UntrustedOutput):
        parse_kernel_xid(_through_awk(_text(capture)).rsplit("count", 1)[0])


# ---------------------------------------------------------------------------------------------------------
# Issue 41: NVLink, a GPU with every link down among peers that are up; an empty output where topology shows NVLink


def test_capture_b200_all_links_inactive_notice_is_parsed_and_fails():
    # leptonai/gpud#1085: a B200's GPU 2 printed NVML's notice in place of its links.
    [g] = parse_nvlink_status(_text("nvlink-s-b200-all-inactive-excerpt.txt"))
    assert g["index"] == 2 and g["links"] == [] and g["all_inactive"] is True
    gpus = [{"bus_id": "00000000:1B:00.0", "uuid": "GPU-xxx", "product_architecture": "Blackwell",
             "fabric_state": "Completed"}]
    [c] = nvlink_checks({"nvidia.query": {"gpus": gpus}, "nvidia.nvlink": [g]})
    assert c.status == "FAIL" and "all links are inActive" in c.seen


def test_capture_one_gpu_all_inactive_among_peers_up_fails_alone():
    # The 8x A100 capture (every link 25 GB/s) with GPU 2's link lines replaced by the B200 capture's NVML notice.
    text = _text("nvlink-s-8xa100sxm.txt")
    notice = _text("nvlink-s-b200-all-inactive-excerpt.txt").splitlines()[1]
    text = re.sub(r"(GPU 2: .*\n)(?:\s+Link .*\n)+", lambda m: m.group(1) + notice + "\n", text, count=1)
    links = parse_nvlink_status(text)
    assert links[2]["all_inactive"] and not links[2]["links"]
    for fabric in ("Completed", None):  # an NVSwitch board, and bridged PCIe cards alike
        gpus = [{"bus_id": f"00000000:{i:02X}:00.0", "uuid": g["uuid"], "product_architecture": "Ampere",
                 "fabric_state": fabric} for i, g in enumerate(links)]
        lines = nvlink_checks({"nvidia.query": {"gpus": gpus}, "nvidia.nvlink": links})
        assert len(lines) == 8, lines  # GPU 2 is not left out
        bad = [c for c in lines if c.status != "PASS"]
        assert [(c.subject, c.status) for c in bad] == [("GPU 00000000:02:00.0", "FAIL")]
        assert "its peers have 12 up" in bad[0].seen
    # The same with GPU 2's 12 links printed "<inactive>" (the other spelling): FAIL all the same, no "PCIe" WARN.
    text = _text("nvlink-s-8xa100sxm.txt")
    block = re.search(r"GPU 2: .*\n(?:\s+Link .*\n)+", text).group(0)
    text = text.replace(block, re.sub(r"\d+(\.\d+)? GB/s", "<inactive>", block))
    links = parse_nvlink_status(text)
    gpus = [{"bus_id": f"00000000:{i:02X}:00.0", "uuid": g["uuid"], "product_architecture": "Ampere",
             "fabric_state": None} for i, g in enumerate(links)]
    bad = [c for c in nvlink_checks({"nvidia.query": {"gpus": gpus}, "nvidia.nvlink": links}) if c.status != "PASS"]
    assert [(c.subject, c.status) for c in bad] == [("GPU 00000000:02:00.0", "FAIL")]


def test_capture_v100_two_links_inactive_parsed():
    # Azure/azhpc-diagnostics#73: GPU 3 of a V100 host with links 3 and 5 "<inactive>" (UUID masked "...").
    [g] = parse_nvlink_status(_text("nvlink-s-v100sxm2-2inactive-excerpt.txt"))
    assert [l["link"] for l in g["links"] if not l["active"]] == [3, 5] and g["links"][0]["gbps"] == 25.781
    assert "all_inactive" not in g


@pytest.mark.reliability(item=41, fault="an empty nvidia-smi nvlink -s on a host whose topo -m shows NVLink",
                         checks=("one clear line",))
def test_empty_nvlink_output_on_a_host_whose_topology_shows_nvlink_is_unreadable():
    from bringup.facts.nvidia_topo import parse_topo_matrix

    topo = parse_topo_matrix(_text("topo-dgxa100-8gpu-12mlx5-8numa.txt"))
    q = parse_nvidia_smi_q(H100X8.read_text())
    [c] = nvlink_checks({"nvidia.query": q, "nvidia.nvlink": parse_nvlink_status(""), "nvidia.topo": topo})
    assert c.status == "WARN" and c.seen.startswith("not checked: nvidia.nvlink unreadable")
    assert "GPU0-GPU1 NV12" in c.seen
    # Hosts whose topology shows no NVLink: empty is what nvlink -s prints there, no line (the H200 VM, 2x L40S).
    for host in (FIX / "h200-vm" / "nvidia-smi-topo.txt", PUB / "topo-2xl40s-2nic-xeon8562y.txt"):
        topo = parse_topo_matrix("\n".join(l for l in host.read_text().splitlines() if not l.startswith("#")))
        assert nvlink_checks({"nvidia.query": q, "nvidia.nvlink": [], "nvidia.topo": topo}) == []


# ---------------------------------------------------------------------------------------------------------
# Issue 41: SW Power Cap on an idle GPU already at its default limit


def test_capture_idle_a40_with_sw_power_cap_is_not_told_to_raise_its_limit():
    # thamada/nvidia-smi's 10x A40 capture: GPUs 4F:00.0 and 56:00.0 flag SW Power Cap while idle in P8 at 29.70 W
    # and 24.94 W of a 300 W limit that is the board's default and maximum.
    q = parse_nvidia_smi_q(_text("nvsmi-q-10xa40-idle-swpowercap-drv550.txt"))
    g = q["gpus"][0]
    assert (g["power_draw_w"], g["power_limit_w"], g["default_power_limit_w"], g["max_power_limit_w"]) == (
        29.7, 300, 300, 300)
    assert g["health"]["clock_reasons"]["sw_power_cap"] is True
    lines = _lines({"nvidia.query": q}, name="clock event reasons")
    assert len(lines) == 10 and {c.status for c in lines} == {"PASS"}, [c.seen for c in lines if c.status != "PASS"]
    capped = [c for c in lines if "SW power cap" in c.seen]
    assert [c.subject for c in capped] == ["GPU 00000000:4F:00.0", "GPU 00000000:56:00.0"]
    assert "29.7 W drawn of a 300 W limit, the board's default" in capped[0].seen and "raise" not in capped[0].fix
    # Changed: GPU 4F:00.0's limit lowered to 150 W (what nvidia-smi -pl 150 shows): now it is told to raise it.
    low = _q(PUB / "nvsmi-q-10xa40-idle-swpowercap-drv550.txt",
             (r"(Current Power Limit\s+:) 300.00 W", r"\1 150.00 W"))
    c = _lines({"nvidia.query": low}, name="clock event reasons")[0]
    assert c.status == "WARN" and "below the board's default 300 W" in c.seen and "nvidia-smi -pl 300" in c.fix
    # Changed: GPU 4F:00.0 drawing 299.5 W (at its limit under load): power bound, the limit already the maximum.
    busy = _q(PUB / "nvsmi-q-10xa40-idle-swpowercap-drv550.txt", (r"(Power Draw\s+:) 29.70 W", r"\1 299.50 W"))
    c = _lines({"nvidia.query": busy}, name="clock event reasons")[0]
    assert c.status == "WARN" and "already the board's maximum" in c.fix and "raise it" not in c.fix
    # Damaged: the draw unreadable (N/A): no verdict from it, the old advice to compare with the default.
    bad = _q(PUB / "nvsmi-q-10xa40-idle-swpowercap-drv550.txt", (r"(Power Draw\s+:) 29.70 W", r"\1 N/A"))
    c = _lines({"nvidia.query": bad}, name="clock event reasons")[0]
    assert c.status == "WARN" and "compare it with the board's default" in c.fix and "power budget" not in c.fix


def test_capture_a100_board_with_every_link_inactive_and_no_fabric_state_fails():
    # The 8x A100-SXM capture with every GPU's 12 links printed "<inactive>" (the spelling of the V100 capture):
    # A100-SXM's nvidia-smi -q prints Fabric State N/A (nvsmi-q-4xa100sxm80-drv555.txt), so only the NVSwitches on
    # the PCI bus (vendor 0x10de, class 0x0680, as on a DGX A100) tell a board whose fabric is down from PCIe cards
    # without bridges.
    text = re.sub(r"\d+(\.\d+)? GB/s", "<inactive>", _text("nvlink-s-8xa100sxm.txt"))
    links = parse_nvlink_status(text)
    assert len(links) == 8 and not [l for n in links for l in n["links"] if l["active"]]
    gpus = [{"bus_id": f"00000000:{i:02X}:00.0", "uuid": g["uuid"], "product_architecture": "Ampere",
             "fabric_state": None} for i, g in enumerate(links)]
    cards = nvlink_checks({"nvidia.query": {"gpus": gpus}, "nvidia.nvlink": links})
    assert {c.status for c in cards} == {"WARN"} and "talk over PCIe" in cards[0].seen  # no sign of a board
    switches = [{"address": f"0000:{0xc4 + i:02x}:00.0", "class": "0x068000", "vendor": "0x10de", "device": "0x1af1"}
                for i in range(6)]
    board = nvlink_checks({"nvidia.query": {"gpus": gpus}, "nvidia.nvlink": links, "pci.devices": switches})
    assert len(board) == 8 and {c.status for c in board} == {"FAIL"}, board
    assert "6 NVSwitch(es) on the PCI bus" in board[0].seen and "PCIe" not in board[0].seen.split("(")[0]
    assert "nvidia-fabricmanager" in board[0].fix


_NVLINK_TWO = ("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-aaaa)\n"
               + "".join(f"\t Link {i}: 26.562 GB/s\n" for i in range(18))
               + "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-bbbb)\n"
               + "".join(f"\t Link {i}: 26.562 GB/s\n" for i in range(18)))


@pytest.mark.reliability(item=40, fault="nvidia-smi nvlink -s printing one link twice (link 3 missing), or one GPU "
                         "twice (its index or UUID): every link read as up", variants=3, checks=("one clear line",))
@pytest.mark.parametrize("damaged, said", [
    (_NVLINK_TWO.replace("Link 3: 26.562", "Link 2: 26.562", 1), "GPU 0 link 2 is printed twice"),
    (_NVLINK_TWO.replace("GPU-bbbb", "GPU-aaaa"), "two GPUs with uuid 'GPU-aaaa'"),
    (_NVLINK_TWO.replace("GPU 1:", "GPU 0:"), "two GPUs with index '0'"),
], ids=["link", "uuid", "index"])
def test_a_link_or_gpu_printed_twice_by_nvlink_s_is_unreadable(damaged, said):
    assert len(parse_nvlink_status(_NVLINK_TWO)) == 2
    with pytest.raises(UntrustedOutput, match=re.escape(said)):
        parse_nvlink_status(damaged)


@pytest.mark.reliability(item=40, fault="net.infiniband listing thousands of ports (within the 16 MiB read): each "
                         "port's "
                         "expected rate was worked out over every port, quadratic (8,000 ports: 78 s)", variants=1,
                         checks=("no hang",))
def test_many_rdma_ports_are_judged_in_linear_time(monkeypatch):
    """Counted, not timed: the adapter models read grow with the ports, not with their square."""
    import bringup.hardware.health as health

    n = 400
    ports = parse_infiniband_ports("".join(
        f"ibport mlx5_{i} 1 {f} {v}\n" for i in range(n) for f, v in (
            ("hca_type", "MT4129"), ("state", "4: ACTIVE"), ("phys_state", "5: LinkUp"),
            ("rate", "400 Gb/sec (4X NDR)" if i else "200 Gb/sec (4X HDR)"), ("link_layer", "InfiniBand"))))
    calls = []
    real = health._model
    monkeypatch.setattr(health, "_model", lambda p: calls.append(1) or real(p))
    lines = infiniband_checks({"net.infiniband": ports}, {"infiniband_ignore": ["mlx5_7"]})
    assert len(calls) < 10 * n, len(calls)  # before: 2 per port pair, 320,000 here
    slow = [k for k in lines if k.status != "PASS"]
    assert [k.subject for k in slow] == ["mlx5_0 port 1"], slow  # the one port below its kind's fastest
    assert any(k.name == "RDMA ports ignored" and "mlx5_7/1" in k.seen for k in lines)


@pytest.mark.reliability(item=40, fault="nvlink -s listing thousands of GPUs (within the 16 MiB read): the GPUs "
                         "without "
                         "links were found by comparing every pair (20,000 GPUs: 6 s; 170,000: minutes)", variants=1,
                         checks=("no hang",))
def test_many_nvlink_gpus_are_judged_without_comparing_every_pair():
    compared = []

    class Counted(dict):
        def __eq__(self, other):
            compared.append(1)
            return dict.__eq__(self, other)

        __hash__ = None

    n = 300
    # Every GPU with its 18 link lines (an H100 prints all its links: fewer are an output cut short).
    links18 = "".join(f"\t Link {j}: 26.562 GB/s\n" for j in range(18))
    text = "".join(f"GPU {i}: NVIDIA H100 80GB HBM3 (UUID: GPU-{i:08x})\n{links18}" for i in range(n))
    links = [Counted(g) for g in parse_nvlink_status(text)]
    lines = nvlink_checks({"nvidia.nvlink": links, "nvidia.query": {"gpus": []}})
    assert len(lines) == n and all(k.status == "PASS" for k in lines)
    assert len(compared) < n, len(compared)  # before: every GPU against every GPU with links, 45,000 here
