"""A vGPU guest (``nvidia-smi -q``'s Virtualization Mode ``VGPU``) and its licence, on a real capture.

``tests/fixtures/hosts/public/nvsmi-q-rtxa6000-24q-vgpu-unlicensed-drv535.txt`` (source in its ``# source:`` line) is
an RTXA6000-24Q vGPU whose License Status is ``Unlicensed``: its author's CUDA call failed with "operation not
supported".  The checklist passed every line of it (no line read the licence at all).  NVIDIA's vGPU for Compute
licensing page: an unlicensed VM starts at full capability and, after a 20-minute grace period, runs compute at an
idle level until it holds a licence; licensed, the status carries its expiry.  The other statuses are made here from
the real report, each saying what it changed; the stored file is never edited.
"""
from __future__ import annotations

import pytest

from bringup.checklist.pages import collect
from bringup.facts import FACTS_BY_NAME
from bringup.facts.gather import parse_raw
from harness.captures import strip_comments

from .fixture_hosts import FIX

VGPU = FIX / "public" / "nvsmi-q-rtxa6000-24q-vgpu-unlicensed-drv535.txt"
A10G = FIX / "public" / "nvsmi-q-a10g.txt"  # a pass-through VM: no licence is asked of it
STATUS = "        License Status                    : Unlicensed\n"


def lines(output: str, name: str | None = None):
    """The checklist's lines from ``output`` read as the ``nvidia.query`` fact is (the gathering's own reading)."""
    values, errors = parse_raw([FACTS_BY_NAME["nvidia.query"]], {"nvidia.query": {"rc": 0, "output": output}})
    return [c for c in collect(values, {}, None, errors) if name is None or c.name == name]


def test_the_real_unlicensed_vgpu_fails_its_license_line():
    q = strip_comments(VGPU.read_text())
    (lic,) = lines(q, "vGPU license")
    assert lic.status == "FAIL" and lic.subject == "GPU 00000000:00:10.0", lic
    assert lic.seen.startswith("License Status Unlicensed: compute restricted") and "nvidia-gridd" in lic.fix
    # The rest the guest shows reads as it is: DRAM ECC counts, no temperature or clock reasons (all N/A).
    assert [c.status for c in lines(q, "ECC errors")] == ["PASS"]
    assert not lines(q, "temperature") and not lines(q, "clock event reasons")


@pytest.mark.reliability(item=41, fault="a vGPU guest's licence: unlicensed, in grace, licensed, garbled, cut, "
                         "not UTF-8", variants=9, checks=("one clear line",))
@pytest.mark.parametrize(("status", "want", "words"), [
    ("Unlicensed (Unrestricted)", "WARN", "in its grace period"),
    ("Unlicensed (Restricted)", "FAIL", "compute restricted"),
    # NVIDIA's documented licensed form, its expiry in brackets.
    ("Licensed (Expiry: 2025-6-18 16:49:9 GMT)", "PASS", "License Status Licensed (Expiry: 2025-6-18 16:49:9 GMT)"),
    ("Licenced maybe", "WARN", "not checked: License Status Licenced maybe is no status"),
    ("Licensed (Expiry: 2025-6-18) and more", "WARN", "not checked"),  # text after the bracket
    ("Licensed (Expiry: \x1b]0;pwn\x07)", "WARN", "not checked"),  # no expiry the driver prints
    ("Licensed (Expiry: N/A)", "PASS", "License Status Licensed (Expiry: N/A)"),
    ("N/A", "WARN", "shows no License Status"),
    (None, "WARN", "shows no License Status"),  # the line cut away
])
def test_every_other_status_is_said_never_a_silent_pass(status, want, words):
    q = strip_comments(VGPU.read_text())
    assert STATUS in q
    changed = q.replace(STATUS, "" if status is None else STATUS.replace("Unlicensed", status))
    (lic,) = lines(changed, "vGPU license")
    assert lic.status == want and words in lic.seen, (status, lic)


def test_a_status_not_utf8_makes_the_report_unreadable_never_a_pass():
    q = strip_comments(VGPU.read_text()).replace(STATUS, STATUS.replace("Unlicensed", "Licensed \udcff"))
    assert not lines(q, "vGPU license")
    (group,) = lines(q, "GPU health (ECC, memory repair, clocks, temperature, fabric)")
    assert group.status == "WARN" and group.seen.startswith("not checked: nvidia.query unreadable")


def test_a_pass_through_gpu_has_no_license_line():
    assert not lines(strip_comments(A10G.read_text()), "vGPU license")


@pytest.mark.parametrize(("status", "want"), [("Unlicensed", "WARN"), ("Unlicensed (Restricted)", "WARN"),
                                              ("Licensed (Expiry: 2025-6-18 16:49:9 GMT)", "PASS")])
def test_a_pass_through_gpu_whose_guest_driver_asks_a_licence_is_never_failed_as_a_vgpu(status, want):
    # A pass-through GPU with NVIDIA vGPU software's guest driver prints the licence too (cloud vWS VMs): its
    # features are restricted unlicensed, its compute is not said to be: a WARN naming its mode, never the FAIL.
    q = strip_comments(VGPU.read_text()).replace(STATUS, STATUS.replace("Unlicensed", status))
    q = q.replace("Virtualization Mode               : VGPU", "Virtualization Mode               : Pass-Through")
    assert "Pass-Through" in q
    (lic,) = lines(q, "vGPU license")
    assert lic.status == want, lic
    if want == "WARN":
        assert "Pass-Through virtualization mode" in lic.seen and "compute restricted" not in lic.seen, lic


def test_a_vgpus_small_bar1_is_not_sent_to_the_firmware_setup():
    # The 24Q vGPU's BAR1 is 256 MiB of 24576 MiB: its vGPU type's, which no setting of the guest's firmware changes.
    (bar1,) = lines(strip_comments(VGPU.read_text()), "GPU 00000000:00:10.0 BAR1 covers GPU memory")
    assert bar1.status == "WARN" and bar1.seen == "BAR1 256 MiB < memory 24576 MiB (a vGPU: its vGPU type's BAR1)"
    assert "Above 4G" not in bar1.fix and "vGPU type on the hypervisor" in bar1.fix
