"""Parsers of nvidia.* facts, on recorded real outputs."""
from __future__ import annotations

from pathlib import Path

from bringup.facts.nvidia import NvidiaSmi
from bringup.facts.nvidia_csv import parse_query_gpu_csv
from bringup.facts.nvidia_q import parse_nvidia_smi_q, parse_nvidia_smi_q_tree
from bringup.facts.nvidia_topo import parse_topo_matrix
from harness.captures import parse_lscpu_plain

REPO = Path(__file__).resolve().parents[2]
from .fixture_hosts import FIX  # noqa: E402  (tests/fixtures/hosts, in this repository)
H200 = FIX / "h200-vm"
PUB = FIX / "public"


# ---------------------------------------------------------------- --query-gpu CSV

def test_query_csv_h200_is_the_facts_own_command():
    text = (H200 / "nvidia-smi-query.csv").read_text()
    header = text.splitlines()[0]
    # The fact's --query-gpu list is exactly the fixture's columns.
    fields = NvidiaSmi.command.split("--query-gpu=")[1].split()[0].split(",")
    assert [h.split(" [")[0] for h in header.split(", ")] == fields
    (gpu,) = parse_query_gpu_csv(text)
    assert gpu == {
        "index": 0,
        "name": "NVIDIA H200",
        "uuid": "GPU-467d123f-773b-3524-f9fc-810065421e23",
        "pci_bus_id": "00000000:00:06.0",
        "pci_address": "0000:00:06.0",
        "driver_version": "580.159.04",
        "memory_total_mib": 143771,
        "persistence_mode": True,
        "power_limit_w": 700.0,
        "clocks_max_sm_mhz": 1980,
        "compute_cap": "9.0",
    }


def test_query_csv_two_l40s_other_columns_after_prompt_lines():
    gpus = parse_query_gpu_csv((PUB / "nvsmi-query-gpu-csv-2xl40s-sr665v3.txt").read_text())
    assert [g["pci_address"] for g in gpus] == ["0000:01:00.0", "0000:91:00.0"]
    assert all(g["name"] == "NVIDIA L40S" for g in gpus)
    assert all(g["memory_total_mib"] == 46068 and g["driver_version"] == "595.71.05" for g in gpus)
    assert gpus[0]["pci_device_id"] == "0x26B910DE"
    assert "index" not in gpus[0]


def test_query_csv_l40s_wide_202_columns():
    (gpu,) = parse_query_gpu_csv((PUB / "nvsmi-query-gpu-csv-l40s-drv595.txt").read_text())
    assert gpu["driver_version"] == "595.80"
    assert gpu["serial"] == "0000000000000"  # masked serial stays a string
    assert gpu["pci_domain"] == "0x0000"
    assert gpu["pcie_link_gen_max"] == 4 and gpu["pcie_link_width_current"] == 16
    assert gpu["pcie_link_gen_hostmax"] is None  # [N/A]
    assert gpu["memory_total_mib"] == 46068 and gpu["memory_reserved_mib"] == 609
    assert gpu["power_limit_w"] == 350.0 and gpu["clocks_max_sm_mhz"] == 2520
    assert gpu["utilization_gpu_pct"] == 100
    assert gpu["persistence_mode"] is False and gpu["ecc_mode_current"] is True
    assert gpu["mig_mode_current"] is None
    assert gpu["display_mode"] is None  # "[Requested functionality has been deprecated]"
    assert gpu["compute_cap"] == "8.9" and gpu["pstate"] == "P0"
    assert gpu["clocks_event_reasons_counters_sw_power_cap_us"] == 200740215


def test_query_csv_errors_give_empty():
    assert parse_query_gpu_csv("No devices were found\n") == []
    assert parse_query_gpu_csv(
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n") == []
    assert parse_query_gpu_csv('Field "compute_cap" is not a valid field to query.\n') == []
    assert parse_query_gpu_csv("") == []


# ---------------------------------------------------------------- nvidia-smi -q

def test_smi_q_h200():
    q = parse_nvidia_smi_q((H200 / "nvidia-smi-q.txt").read_text())
    assert q["driver_version"] == "580.159.04"
    assert q["cuda_version"] == "13.0"
    assert q["attached_gpus"] == 1
    (g,) = q["gpus"]
    assert g["bus_id"] == "00000000:00:06.0" and g["pci_address"] == "0000:00:06.0"
    assert g["product_name"] == "NVIDIA H200"
    assert g["persistence_mode"] is True
    assert g["mig_mode_current"] is False
    assert g["ecc_mode_current"] is True
    assert g["bar1_total_mib"] == 262144
    assert g["fb_total_mib"] == 143771
    assert (g["pcie_gen_current"], g["pcie_gen_max"]) == (5, 5)
    assert (g["pcie_width_current"], g["pcie_width_max"]) == (16, 16)
    assert g["pcie_gen_host_max"] is None
    assert g["performance_state"] == "P0"
    assert g["virtualization_mode"] == "Pass-Through"
    assert g["power_limit_w"] == 700.0
    assert g["max_clocks_sm_mhz"] == 1980


def test_smi_q_perf_section_only():
    q = parse_nvidia_smi_q((H200 / "nvidia-smi-perf.txt").read_text())
    (g,) = q["gpus"]
    assert g["performance_state"] == "P0" and g["power_limit_w"] == 700.0
    assert g["product_name"] is None  # not in a -d PERFORMANCE report


def test_smi_q_a10g_x8_link_and_blank_line():
    q = parse_nvidia_smi_q((PUB / "nvsmi-q-a10g.txt").read_text())
    assert (q["driver_version"], q["cuda_version"]) == ("535.247.01", "12.2")
    (g,) = q["gpus"]
    assert g["product_name"] == "NVIDIA A10G" and g["pci_address"] == "0000:00:1e.0"
    assert g["persistence_mode"] is False
    assert g["mig_mode_current"] is None  # N/A: no MIG on A10G
    assert (g["pcie_width_current"], g["pcie_width_max"]) == (8, 16)
    assert g["bar1_total_mib"] == 32768 and g["fb_total_mib"] == 23028
    tree = parse_nvidia_smi_q_tree((PUB / "nvsmi-q-a10g.txt").read_text())
    # the blank line after "Tx Throughput" does not end the PCI section
    assert tree["GPU 00000000:00:1E.0"]["PCI"]["Rx Throughput"] == "0 KB/s"


def test_smi_q_l4_idle_link_downgraded():
    (g,) = parse_nvidia_smi_q((PUB / "nvsmi-q-l4.txt").read_text())["gpus"]
    assert g["product_name"] == "NVIDIA L4"
    assert (g["pcie_gen_current"], g["pcie_gen_max"], g["pcie_gen_host_max"]) == (1, 4, 4)
    assert g["performance_state"] == "P8"
    assert g["bar1_total_mib"] == 32768


def test_smi_q_l40s_both_layouts():
    old = parse_nvidia_smi_q((PUB / "nvsmi-q-l40s.txt").read_text())
    new = parse_nvidia_smi_q((PUB / "nvsmi-q-l40s-drv595.txt").read_text())
    assert old["driver_version"] == "550.127.05" and new["driver_version"] == "595.80"
    assert new["cuda_version"] == "13.2"
    (go,), (gn,) = old["gpus"], new["gpus"]
    assert go["pci_address"] == "0000:a1:00.0" and gn["pci_address"] == "0000:01:00.0"
    for g in (go, gn):
        assert g["product_name"] == "NVIDIA L40S"
        assert g["bar1_total_mib"] == 65536 and g["fb_total_mib"] == 46068
        assert g["ecc_mode_current"] is True and g["mig_mode_current"] is None
    assert gn["uuid"] == "GPU-00000000-0000-0000-0000-000000000000"  # masked
    assert gn["addressing_mode"] == "HMM"


def test_smi_q_tree_repeated_keys_become_lists():
    text = (
        "GPU 00000000:01:00.0\n"
        "    Processes\n"
        "        Process ID                        : 11\n"
        "        Process ID                        : 22\n"
        "        Process ID                        : 33\n"
    )
    tree = parse_nvidia_smi_q_tree(text)
    assert tree["GPU 00000000:01:00.0"]["Processes"]["Process ID"] == ["11", "22", "33"]


def test_smi_q_errors_are_kept_in_its_words():
    # The driver's own error is kept (it was dropped: a lost GPU then read as no driver, "install a driver").
    assert parse_nvidia_smi_q("No devices were found\n") == {
        "smi_error": "nvidia-smi: No devices were found", "unreachable_gpus": [], "gpus": []}
    assert parse_nvidia_smi_q("Unable to determine the device handle for gpu 0000:00:06.0: GPU is lost.  Reboot "
                              "the system to recover this GPU\n") == {
        "smi_error": "nvidia-smi cannot reach GPU 0000:00:06.0: GPU is lost.  Reboot the system to recover this GPU",
        "unreachable_gpus": [{"pci_address": "0000:00:06.0", "bus_id": "0000:00:06.0",
                              "error": "GPU is lost.  Reboot the system to recover this GPU"}], "gpus": []}
    assert parse_nvidia_smi_q("") == {}


# ---------------------------------------------------------------- topo -m

def test_topo_h200_single_gpu_with_gpu_numa_id_and_ansi():
    t = parse_topo_matrix((H200 / "nvidia-smi-topo.txt").read_text())
    assert t["columns"] == ["GPU0"] and t["has_gpu_numa_id"] is True
    (g,) = t["gpus"]
    assert g["cpu_affinity"] == "0-15" and g["cpus"] == list(range(16))
    assert g["numa_affinity"] == [0] and g["numa_node"] == 0
    assert g["gpu_numa_id"] is None  # N/A
    assert g["cpu_affinity_truncated"] is None  # nothing to check against
    assert t["nics"] == []


def test_topo_h200_checked_against_sysfs_nodes():
    text = (H200 / "nvidia-smi-topo.txt").read_text() + "---\nnode 0 0-15\n"
    (g,) = parse_topo_matrix(text)["gpus"]
    assert g["cpu_affinity_truncated"] is False and g["cpus"] == list(range(16))


def test_topo_a100_old_layout_without_gpu_numa_id():
    t = parse_topo_matrix((PUB / "topo-2xa100pcie-2nic-2numa.txt").read_text())
    assert t["has_gpu_numa_id"] is False
    assert t["columns"] == ["GPU0", "GPU1", "mlx5_0", "mlx5_1"]
    g0, g1 = t["gpus"]
    assert (g0["cpus"], g0["numa_node"]) == (list(range(64)), 0)
    assert (g1["cpus"], g1["numa_node"]) == (list(range(64, 128)), 1)
    assert g0["gpu_numa_id"] is None
    assert t["matrix"]["GPU0"]["mlx5_0"] == "NODE" and t["matrix"]["GPU0"]["mlx5_1"] == "SYS"
    assert t["matrix"]["GPU1"]["GPU0"] == "SYS"
    assert [n["device"] for n in t["nics"]] == ["mlx5_0", "mlx5_1"]


def test_topo_l40s_truncated_cpu_affinity():
    text = (PUB / "topo-2xl40s-2nic-xeon8562y.txt").read_text()
    t = parse_topo_matrix(text)
    assert [g["cpu_affinity"] for g in t["gpus"]] == ["0,2,4,6,8,10"] * 2
    assert t["gpus"][0]["cpu_affinity_truncated"] is None  # no NUMA lists to compare with
    # Same host's lscpu: node0 = 64 even CPUs, so "0,2,4,6,8,10" is a cut-off list.
    lscpu = parse_lscpu_plain((PUB / "lscpu-2s-xeon8562y-l40s.txt").read_text())
    t = parse_topo_matrix(text, numa_cpus=lscpu["numa_nodes"])
    for g in t["gpus"]:
        assert g["cpu_affinity_truncated"] is True
        assert g["cpus"] is None  # never invent the missing CPUs
        assert g["cpus_shown"] == [0, 2, 4, 6, 8, 10]
        assert g["numa_node"] == 0
    assert t["nics"] == [{"name": "NIC0", "device": "mlx5_0"}, {"name": "NIC1", "device": "mlx5_1"}]
    # GPUs on NUMA 0, both NICs across the socket interconnect
    assert t["matrix"]["GPU0"]["NIC0"] == "SYS" and t["matrix"]["NIC0"]["NIC1"] == "PIX"


def test_topo_4xl40s_space_aligned():
    t = parse_topo_matrix((PUB / "topo-4xl40s-2nic-2numa.txt").read_text())
    assert t["columns"] == ["GPU0", "GPU1", "GPU2", "GPU3", "NIC0", "NIC1"]
    assert t["has_gpu_numa_id"] is True
    by = {g["name"]: g for g in t["gpus"]}
    assert by["GPU0"]["cpus"] == list(range(0, 96)) + list(range(192, 288))
    assert by["GPU3"]["cpu_affinity"] == "96-191,288-383" and by["GPU3"]["numa_node"] == 1
    assert t["matrix"]["GPU2"]["NIC0"] == "NODE" and t["matrix"]["GPU0"]["NIC0"] == "SYS"
    assert t["matrix"]["GPU1"]["GPU1"] == "X"
    nodes = {"0": list(range(0, 96)) + list(range(192, 288)), "1": list(range(96, 192)) + list(range(288, 384))}
    t = parse_topo_matrix((PUB / "topo-4xl40s-2nic-2numa.txt").read_text(), numa_cpus=nodes)
    assert all(g["cpu_affinity_truncated"] is False for g in t["gpus"])


def test_topo_errors_give_empty():
    assert parse_topo_matrix("NVIDIA-SMI has failed because it couldn't communicate\n") == {}
    assert parse_topo_matrix("") == {}
