"""The fixture hosts: real outputs in tests/fixtures/hosts/ (sources in its README.md and
public/INDEX.tsv), and their facts through the real parsers."""
from __future__ import annotations

from pathlib import Path

from bringup.facts.cpu import parse_lscpu_parse
from bringup.facts.nvidia_csv import parse_query_gpu_csv
from bringup.facts.nvidia_q import parse_nvidia_smi_q
from bringup.facts.pci import parse_pci_devices
from harness.captures import parse_lscpu_plain, topology_from_lscpu_summary

REPO = Path(__file__).resolve().parents[2]
#: Real command outputs, copied into the repository so that a clone runs its own tests.
FIX = REPO / "tests" / "fixtures" / "hosts"


def h200_facts() -> dict:
    """The real H200 VM: one socket, 16 vCPUs, one H200, every numa_node -1."""
    d = FIX / "h200-vm"
    return {
        "cpu.topology": parse_lscpu_parse((d / "lscpu.txt").read_text()),
        # pci.txt holds other commands' outputs after its first "---": the PCI listing is the first section.
        "pci.devices": parse_pci_devices((d / "pci.txt").read_text().split("\n---\n")[0]),
        "nvidia.smi": parse_query_gpu_csv((d / "nvidia-smi-query.csv").read_text()),
        "nvidia.query": parse_nvidia_smi_q((d / "nvidia-smi-q.txt").read_text()),
    }


def l40s_pair_facts() -> dict:
    """A public dual-socket Xeon 8562Y host with 2× L40S (lscpu and query-gpu CSV)."""
    d = FIX / "public"
    smi = parse_query_gpu_csv((d / "nvsmi-query-gpu-csv-2xl40s-sr665v3.txt").read_text())
    # No PCI listing was published for this host: pci.devices is left out.
    summary = parse_lscpu_plain((d / "lscpu-2s-xeon8562y-l40s.txt").read_text())
    return {"cpu.topology": topology_from_lscpu_summary(summary),
            "nvidia.smi": smi,
            "nvidia.query": parse_nvidia_smi_q((d / "nvsmi-q-l40s.txt").read_text())}
