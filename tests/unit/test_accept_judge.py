"""Issue 31 part 2: the acceptance probe's JSON judged against the limits (bringup.acceptance.judge).

The facts are REAL captured outputs through the project's own parsers: the H200 VM's raw bundle
(tests/fixtures/hosts/h200-vm/facts-raw.json: PCIe Gen5 x16, Hopper) and, for GPU pairs, the public
``nvidia-smi -q`` of 4x A100-SXM4-80GB (Gen4 x16, Ampere) with the public ``topo -m`` of an 8x A100-SXM board
(NV12 between every pair).  The probe documents are the probe's own format (bringup/acceptance/probe.py),
written here with the figures each case needs; the H200's are the issue's measured ones (55.4 / 55.2 GB/s,
2,089 GB/s copied).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from bringup.acceptance.judge import judge
from bringup.acceptance.limits import pcie_gbs, thresholds
from bringup.errors import InputError
from bringup.facts import FACTS_BY_NAME
from bringup.facts.gather import parse_raw
from bringup.facts.nvidia_q import parse_nvidia_smi_q
from bringup.facts.nvidia_topo import parse_topo_matrix

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "hosts"
H200_BUS = "00000000:00:06.0"


def public(name: str) -> str:
    return "".join(l for l in (FIX / "public" / name).read_text().splitlines(keepends=True) if not l.startswith("#"))


@pytest.fixture(scope="module")
def h200_facts() -> dict:
    raw = json.loads((FIX / "h200-vm" / "facts-raw.json").read_text())["raw"]
    names = ("nvidia.query", "nvidia.smi", "nvidia.topo")
    values, errors = parse_raw([FACTS_BY_NAME[n] for n in names], {n: raw[n] for n in names})
    assert not errors
    return values


@pytest.fixture(scope="module")
def a100_facts() -> dict:
    q = parse_nvidia_smi_q(public("nvsmi-q-4xa100sxm80-drv555.txt"))
    smi = [{"index": i, "name": g["product_name"], "pci_bus_id": g["bus_id"], "memory_total_mib": g["fb_total_mib"]}
           for i, g in enumerate(q["gpus"])]
    return {"nvidia.query": q, "nvidia.smi": smi,
            "nvidia.topo": parse_topo_matrix(public("topo-8xa100sxm-10nic-8numa.txt"))}


def h200_doc(h2d=55.4, d2h=55.2, d2d=2089.0, reasons="0x0000000000000000", temp="52", load=True, **extra) -> dict:
    bus = None
    gpu = {"index": 0, "name": "NVIDIA H200", "bus_id": H200_BUS, "h2d_gbs": h2d, "d2h_gbs": d2h,
           "d2d_gbs": d2d}
    doc = {"probe": 1, "repeats": 5, "error": None, "gpus": [gpu], "pairs": [], "load": None}
    if load:
        doc["load"] = {"seconds": 10.0, "field": "clocks_event_reasons.active", "errors": {}, "samples": [
            {"t": float(t), "gpus": [{"index": "0", "bus_id": H200_BUS, "reasons": reasons,
                                       "temperature_c": temp, "sm_mhz": "1980"}]} for t in range(1, 4)]}
    doc.update(extra)
    return doc


def by(lines, name, subject=None):
    found = [k for k in lines if k.name == name and (subject is None or k.subject == subject)]
    assert len(found) == 1, [(k.name, k.subject) for k in lines]
    return found[0]


def test_the_h200s_bus_id_in_the_captured_facts(h200_facts):
    q = h200_facts["nvidia.query"]["gpus"][0]
    assert (q["bus_id"], q["pcie_gen_max"], q["pcie_width_max"]) == (H200_BUS, 5, 16)


def test_a_good_h200_passes_every_line(h200_facts):
    lines = judge(h200_doc(), h200_facts, {})
    assert [k.status for k in lines] == ["PASS"] * 4, [(k.name, k.status, k.seen) for k in lines]
    h2d = by(lines, "host-to-device bandwidth")
    assert (h2d.subject, h2d.value, h2d.limit, h2d.unit, h2d.area) == (f"GPU {H200_BUS}", 55.4, 63.0, "GB/s",
                                                                        "acceptance")
    mem = by(lines, "device memory bandwidth")
    assert (mem.value, mem.limit) == (4178.0, 4800.0)
    assert "read+write" in mem.seen and "h200 datasheet" in mem.seen
    assert by(lines, "clocks under load").value == 52.0


def test_a_gpu_at_gen3_speed_in_a_gen5_slot_fails(h200_facts):
    # Gen3 x16 moves about 13 GB/s with pinned memory: 21 % of the Gen5 x16 link's 63 GB/s.
    lines = judge(h200_doc(h2d=13.1, d2h=13.0), h200_facts, {})
    h2d = by(lines, "host-to-device bandwidth")
    assert h2d.status == "FAIL" and "21% of PCIe Gen5 x16's 63.0 GB/s" in h2d.seen
    assert "reseat" in h2d.fix
    assert by(lines, "device-to-host bandwidth").status == "FAIL"


def test_a_link_a_little_slow_warns(h200_facts):
    assert by(judge(h200_doc(h2d=44.0), h200_facts, {}), "host-to-device bandwidth").status == "WARN"


def test_device_memory_low_warns_then_fails(h200_facts):
    # 2x copied against 4,800 GB/s: 1,500 copied = 62 % (WARN), 1,000 = 42 % (FAIL).
    assert by(judge(h200_doc(d2d=1500.0), h200_facts, {}), "device memory bandwidth").status == "WARN"
    low = by(judge(h200_doc(d2d=1000.0), h200_facts, {}), "device memory bandwidth")
    assert low.status == "FAIL" and "ECC" in low.fix


def test_a_gpu_no_profile_knows_gets_a_warn_with_its_figure(h200_facts):
    doc = h200_doc()
    doc["gpus"][0]["name"] = "NVIDIA RTX PRO 6000"
    facts = {**h200_facts, "nvidia.smi": [{"name": "NVIDIA RTX PRO 6000", "pci_bus_id": H200_BUS}]}
    mem = by(judge(doc, facts, {}), "device memory bandwidth")
    assert mem.status == "WARN" and mem.limit is None and "add memory_bandwidth" in mem.seen


def test_the_inventory_can_raise_a_threshold(h200_facts):
    strict = {"accept_thresholds": {"pcie_warn": 0.95, "pcie_fail": 0.9}}
    assert by(judge(h200_doc(), h200_facts, strict), "host-to-device bandwidth").status == "FAIL"


def test_throttling_under_load_fails(h200_facts):
    # 0x48: HW slowdown (0x8) and HW thermal slowdown (0x40).
    clk = by(judge(h200_doc(reasons="0x0000000000000048", temp="91"), h200_facts, {}), "clocks under load")
    assert clk.status == "FAIL" and "HW slowdown, HW thermal slowdown" in clk.seen and clk.value == 91.0


def test_power_cap_and_idle_under_load_are_not_a_fault(h200_facts):
    clk = by(judge(h200_doc(reasons="0x0000000000000005"), h200_facts, {}), "clocks under load")
    assert clk.status == "PASS" and "SW power cap" in clk.seen


def test_reasons_nvidia_smi_cannot_show_warn(h200_facts):
    assert by(judge(h200_doc(reasons="[N/A]"), h200_facts, {}), "clocks under load").status == "WARN"


def test_no_nvidia_smi_during_the_load_warns_per_gpu(h200_facts):
    doc = h200_doc()
    doc["load"]["samples"] = [{"t": 1.0, "error": "nvidia-smi not found"}]
    clk = by(judge(doc, h200_facts, {}), "clocks under load")
    assert clk.status == "WARN" and "nvidia-smi not found" in clk.seen


@pytest.mark.parametrize("error, fix", [
    ("libcuda.so.1 not found: install the NVIDIA driver", "provision --roles nvidia_driver"),
    ("cuInit: CUDA_ERROR_NO_DEVICE (100)", "lspci -k"),
    ("the CUDA driver sees no GPU (cuDeviceGetCount: 0)", "lspci -k"),
    ("H2D copy on GPU 0 (00000000:00:06.0) did not return within 20 s (watchdog): the GPU hangs or is lost", "Xid"),
])
def test_each_named_probe_error_is_one_fail_line(h200_facts, error, fix):
    lines = judge({"probe": 1, "error": error, "gpus": [], "pairs": [], "load": None}, h200_facts, {})
    assert len(lines) == 1
    assert (lines[0].status, lines[0].name, lines[0].seen) == ("FAIL", "acceptance probe", error)
    assert fix in lines[0].fix


def test_a_gpu_lost_mid_test_fails_that_gpu(h200_facts):
    doc = h200_doc(load=False)
    doc["gpus"][0] = {"index": 0, "name": "NVIDIA H200", "bus_id": H200_BUS,
                      "error": "cuMemcpyDtoD_v2: CUDA_ERROR_LAUNCH_FAILED (719)"}
    lines = judge(doc, h200_facts, {})
    assert [(k.status, k.name, k.subject) for k in lines] == [("FAIL", "copies", f"GPU {H200_BUS}")]
    assert "CUDA_ERROR_LAUNCH_FAILED" in lines[0].seen


def test_a_copy_that_fails_under_load_fails(h200_facts):
    doc = h200_doc()
    doc["load"]["errors"] = {"0": "cuCtxSynchronize: CUDA_ERROR_ECC_UNCORRECTABLE (214)"}
    assert by(judge(doc, h200_facts, {}), "copies under load").status == "FAIL"


def a100_doc(gbs: float, peer: bool = True) -> dict:
    gpus = [{"index": i, "name": "NVIDIA A100-SXM4-80GB", "bus_id": b, "h2d_gbs": 25.0, "d2h_gbs": 26.0,
             "d2d_gbs": 820.0} for i, b in enumerate(("00000000:68:00.0", "00000000:9E:00.0"))]
    return {"probe": 1, "repeats": 5, "error": None, "gpus": gpus, "load": None,
            "pairs": [{"src": 0, "dst": 1, "src_bus_id": gpus[0]["bus_id"], "dst_bus_id": gpus[1]["bus_id"],
                       "peer_access": peer, "gbs": gbs}]}


def test_the_a100_facts_hold_what_the_pair_test_needs(a100_facts):
    g = a100_facts["nvidia.query"]["gpus"][:2]
    assert [x["bus_id"] for x in g] == ["00000000:68:00.0", "00000000:9E:00.0"]
    assert a100_facts["nvidia.topo"]["matrix"]["GPU0"]["GPU1"] == "NV12"


def test_nvlink_pairs_against_their_links(a100_facts):
    # NV12 on Ampere: 12 x 25 GB/s per direction = 300 GB/s; A100-SXM4-80GB's sheet 2,039 GB/s.
    lines = judge(a100_doc(270.0), a100_facts, {})
    p2p = by(lines, "P2P to GPU 00000000:9E:00.0")
    assert (p2p.status, p2p.limit, p2p.subject) == ("PASS", 300.0, "GPU 00000000:68:00.0")
    assert by(lines, "device memory bandwidth", "GPU 00000000:68:00.0").limit == 2039.0
    assert by(lines, "host-to-device bandwidth", "GPU 00000000:68:00.0").limit == 31.5  # Gen4 x16
    low = by(judge(a100_doc(120.0), a100_facts, {}), "P2P to GPU 00000000:9E:00.0")
    assert low.status == "FAIL" and "nvlink -s" in low.fix
    refused = by(judge(a100_doc(20.0, peer=False), a100_facts, {}), "P2P to GPU 00000000:9E:00.0")
    assert refused.status == "FAIL" and "refuses peer access" in refused.seen


def test_a_pair_the_probe_lists_twice_is_not_checked_never_judged_twice(a100_facts):
    # One pair listed twice (250 and 5 GB/s): a PASS and a FAIL line of one pair before; which figure is its own is
    # not known (a second reader of fca919e, which did this for a GPU listed twice).
    doc = a100_doc(270.0)
    doc["pairs"].append(dict(doc["pairs"][0], gbs=5.0))
    lines = [k for k in judge(doc, a100_facts, {}) if k.name == "P2P to GPU 00000000:9E:00.0"]
    assert [(k.status, k.seen[:62]) for k in lines] == [
        ("WARN", "not checked: the probe's answer lists this pair 2 times (damag")], lines


def test_pairs_are_found_in_the_topology_by_bus_id_not_by_cudas_count(a100_facts):
    # CUDA counted the second GPU first: the pair's NVLink expectation still comes from nvidia-smi's GPU0/GPU1.
    doc = a100_doc(270.0)
    doc["pairs"][0].update(src=1, dst=0)
    p2p = by(judge(doc, a100_facts, {}), "P2P to GPU 00000000:9E:00.0")
    assert (p2p.status, p2p.limit) == ("PASS", 300.0)
    facts = {**a100_facts, "nvidia.smi": [dict(g, index=7 - i) for i, g in enumerate(a100_facts["nvidia.smi"])]}
    facts["nvidia.topo"] = {"matrix": {"GPU7": {"GPU6": "PHB"}, "GPU6": {"GPU7": "PHB"}}}
    assert by(judge(a100_doc(20.0), facts, {}), "P2P to GPU 00000000:9E:00.0").limit == 31.5  # PCIe there


def test_pcie_pairs_against_the_slower_link(a100_facts):
    facts = {**a100_facts, "nvidia.topo": {}}  # no NVLink between them
    p2p = by(judge(a100_doc(20.0), facts, {}), "P2P to GPU 00000000:9E:00.0")
    assert (p2p.status, p2p.limit) == ("PASS", 31.5)
    assert by(judge(a100_doc(5.0), facts, {}), "P2P to GPU 00000000:9E:00.0").status == "FAIL"


def test_pcie_rates_per_generation():
    assert [pcie_gbs(g, 16) for g in (3, 4, 5, 6)] == [15.76, 31.504, 63.008, 121.008]
    assert pcie_gbs(None, 16) is None and pcie_gbs(5, None) is None and pcie_gbs(7, 16) is None


@pytest.mark.parametrize("value, said", [
    ({"pcie_warn": 1.5}, "accept_thresholds.pcie_warn 1.5: must be a fraction"),
    ({"memory_fail": 0}, "accept_thresholds.memory_fail 0.0: must be a fraction"),
    ({"pcie_warn": 0.5}, "pcie_fail 0.6 is above pcie_warn 0.5"),
    ({"pcie_wran": 0.5}, "unknown key 'pcie_wran'; did you mean 'pcie_warn'?"),
    ({"nvlink_warn": "high"}, "accept_thresholds.nvlink_warn 'high': must be a fraction"),
    (["pcie_warn"], "accept_thresholds ['pcie_warn']: must be a mapping"),
])
def test_bad_thresholds_are_one_line(value, said):
    with pytest.raises(InputError) as e:
        thresholds({"accept_thresholds": value})
    assert said in str(e.value) and "\n" not in str(e.value)


def test_thresholds_default_and_override():
    assert thresholds({}).pcie_warn == 0.75
    t = thresholds({"accept_thresholds": {"memory_warn": 1, "memory_fail": 0.6}})
    assert (t.memory_warn, t.memory_fail, t.pcie_fail) == (1.0, 0.6, 0.6)


@pytest.mark.parametrize("fixture, gbs", [
    ("nvsmi-q-2xh100nvl-drv550.txt", 3900.0), ("nvsmi-q-8xh100sxm-drv565.txt", 3350.0),
    ("nvsmi-q-4xa100sxm80-drv555.txt", 2039.0), ("nvsmi-q-l4.txt", 300.0), ("nvsmi-q-a10g.txt", 600.0),
    ("nvsmi-q-l40s.txt", 864.0),
])
def test_each_captured_class_finds_its_datasheet_figure(fixture, gbs):
    from bringup.hardware.gpu_profiles import memory_bandwidth, shipped

    q = parse_nvidia_smi_q(public(fixture))
    for g in q["gpus"]:
        found = memory_bandwidth(shipped(), {"name": g["product_name"], "memory_total_mib": g["fb_total_mib"]})
        assert found is not None and found[0] == gbs and "datasheet" in found[1], (g["product_name"], found)


def two_gpu_facts(h200_facts) -> dict:
    """The H200 VM's facts with a second GPU nvidia-smi lists (its bus id 00000000:00:07.0)."""
    smi = list(h200_facts["nvidia.smi"])
    return {**h200_facts, "nvidia.smi": smi + [dict(smi[0], index=1, pci_bus_id="00000000:00:07.0")]}


def test_a_gpu_nvidia_smi_lists_that_the_probe_did_not_measure_fails_by_name(h200_facts):
    # CUDA_VISIBLE_DEVICES=0, or a GPU CUDA cannot open: the probe's JSON covers GPU 0 alone.
    lines = judge(h200_doc(), two_gpu_facts(h200_facts), {})
    k = by(lines, "GPUs measured")
    assert (k.status, k.seen) == ("FAIL", "probe measured 1 of 2 GPUs (missing: GPU 1 00000000:00:07.0); their "
                                          "copies and pairs are not measured")
    assert "CUDA_VISIBLE_DEVICES" in k.fix
    assert not any(x.name == "GPUs measured" for x in judge(h200_doc(), h200_facts, {}))


def test_a_probe_document_without_its_load_is_not_checked_never_a_silent_pass(h200_facts):
    doc = h200_doc()
    del doc["load"]
    k = by(judge(doc, h200_facts, {}), "clocks under load")
    assert (k.status, k.seen, k.subject) == ("WARN", "not checked: the probe's document holds no load readings "
                                                     "(unreadable)", f"GPU {H200_BUS}")


def test_a_gpu_entry_without_its_index_is_named_not_dropped(h200_facts):
    doc = h200_doc()
    del doc["gpus"][0]["index"]
    k = by(judge(doc, h200_facts, {}), "clocks under load")
    assert (k.status, k.seen, k.subject) == ("WARN", "not checked: the probe's entry for this GPU has no index "
                                                     "(None): unreadable", f"GPU {H200_BUS}")
