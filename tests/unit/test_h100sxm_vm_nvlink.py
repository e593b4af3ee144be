"""One H100 SXM of an NVSwitch board passed through to a VM, with its 18 NVLinks up: real captures
(``tests/fixtures/hosts/public/nvsmi-q-h100sxm-vm-fabric-drv590.txt`` and ``nvlink-s-h100sxm-vm-18links-drv590.txt``,
one host, sources in their ``# source:`` lines).

A lone GPU has no peer to hold its link count against: its ``nvidia-smi nvlink -s`` cut at the end of a line read as
"10 of 10 links up" and passed.  nvidia-smi prints every link of a part, an inactive one too (``bringup/data/
nvlink.yaml``'s ``links``): fewer lines are an output cut short, not checked, never a PASS.  The cut variants are
made here from the real output; the stored files are never edited.
"""
from __future__ import annotations

import pytest

from bringup.checklist.pages import collect
from bringup.facts import FACTS_BY_NAME
from bringup.facts.gather import parse_raw
from bringup.hardware.nvlink import link_count
from harness.captures import strip_comments

from .fixture_hosts import FIX

PUB = FIX / "public"
Q = strip_comments((PUB / "nvsmi-q-h100sxm-vm-fabric-drv590.txt").read_text())
NVLINK = strip_comments((PUB / "nvlink-s-h100sxm-vm-18links-drv590.txt").read_text()) + "\n"
SUBJECT = "GPU 00000000:00:09.0"


def health(nvlink: str) -> dict[str, list]:
    facts = [FACTS_BY_NAME["nvidia.query"], FACTS_BY_NAME["nvidia.nvlink"]]
    values, errors = parse_raw(facts, {"nvidia.query": {"rc": 0, "output": Q},
                                       "nvidia.nvlink": {"rc": 0, "output": nvlink}})
    out: dict[str, list] = {}
    for c in collect(values, {}, None, errors):
        if c.area == "health":
            out.setdefault(c.name, []).append(c)
    return out


def test_the_real_h100_sxm_vm_passes_every_health_line():
    lines = health(NVLINK)
    assert {n: [c.status for c in cs] for n, cs in lines.items()} == {
        "ECC errors": ["PASS"], "memory repair": ["PASS"], "clock event reasons": ["PASS"], "temperature": ["PASS"],
        "NVSwitch fabric": ["PASS"], "NVLink": ["PASS"]}
    assert all(c.subject == SUBJECT for cs in lines.values() for c in cs)
    assert lines["NVLink"][0].seen == "18 of 18 links up at 26.562 GB/s (the part's 26.562)"
    assert lines["NVSwitch fabric"][0].seen == "fabric state Completed, status Success"
    assert lines["temperature"][0].seen == "41 °C, 48 °C below the slowdown limit"


@pytest.mark.reliability(item=41, fault="a lone NVLink GPU's nvlink -s cut at a line's end (no peer to hold it "
                         "against)", variants=4, checks=("one clear line",))
@pytest.mark.parametrize("kept", [17, 10, 1, 0])
def test_a_lone_gpus_cut_link_list_is_unreadable_never_fewer_links_up(kept):
    cut = "".join(NVLINK.splitlines(keepends=True)[:1 + kept])  # the GPU line, then the first `kept` links
    (nv,) = health(cut)["NVLink"]
    if kept == 0:
        # The GPU line alone: what nvidia-smi prints for a part without NVLink (an L4), but this H100 is registered
        # with an NVSwitch fabric: named, never left out as a GPU without NVLink.
        assert nv.status == "WARN" and nv.seen.startswith("not checked: nvidia-smi nvlink -s printed no link line for "
                                                          "this NVIDIA H100 80GB HBM3, which has 18, on an NVSwitch "
                                                          "board"), nv
    else:
        assert nv.status == "WARN" and nv.seen.startswith(f"not checked: nvidia-smi nvlink -s printed {kept} link "
                                                          "line(s) of the 18 a NVIDIA H100 80GB HBM3 has"), nv


def test_a_lone_gpus_cut_link_list_is_unreadable_without_its_q_report_too():
    # nvidia-smi -q unread (its own timeout, cut): the part's count comes from the name nvlink -s prints.
    cut = "".join(NVLINK.splitlines(keepends=True)[:11])
    values, errors = parse_raw([FACTS_BY_NAME["nvidia.nvlink"]], {"nvidia.nvlink": {"rc": 0, "output": cut}})
    (nv,) = [c for c in collect(values, {}, None, errors) if c.name == "NVLink"]
    assert nv.status == "WARN" and "printed 10 link line(s) of the 18" in nv.seen, nv


def test_the_link_count_table():
    assert link_count("NVIDIA H100 80GB HBM3", "Hopper") == 18 and link_count("NVIDIA GB200", "blackwell") == 18
    assert link_count("NVIDIA A100-SXM4-80GB", "Ampere") == 12 and link_count("NVIDIA A40", "Ampere") == 4
    # Export parts with 8 links, and parts the table does not know: no count, never a false "cut short".
    assert link_count("NVIDIA H800", "Hopper") is None and link_count("NVIDIA A800-SXM4-80GB", "Ampere") is None
    assert link_count("Tesla V100-SXM2-16GB", "Volta") is None
    # By name alone (no nvidia-smi -q): the Hopper and Blackwell parts; H20 is not taken for an H200.
    assert link_count("NVIDIA H100 80GB HBM3", None) == 18 and link_count("NVIDIA H200", None) == 18
    assert link_count("NVIDIA H20", None) is None and link_count("NVIDIA L40S", None) is None
