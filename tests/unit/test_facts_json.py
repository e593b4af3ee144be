"""Every parser's value on every matching fixture survives a JSON round trip unchanged
(no tuples, sets or int dict keys), and parsers never raise on any fixture."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from bringup.facts.base import UntrustedOutput

from bringup.facts import ALL_FACTS
from bringup.facts.cpu import parse_lscpu_parse
from bringup.facts.irq import parse_interrupts, parse_irq_affinity
from bringup.facts.nvidia_csv import parse_query_gpu_csv
from bringup.facts.nvidia_list import parse_nvidia_smi_list
from bringup.facts.nvidia_q import parse_nvidia_smi_q
from bringup.facts.nvidia_topo import parse_topo_matrix
from bringup.facts.os_ import parse_os_release, parse_uname
from bringup.facts.pci import parse_pci_devices
from bringup.facts.system import parse_cmdline, parse_docker_daemon_json, parse_sysctl
from harness.captures import parse_docker_info_text, parse_lscpu_json, parse_lscpu_plain, parse_numactl_hardware

REPO = Path(__file__).resolve().parents[2]
from .fixture_hosts import FIX  # noqa: E402  (tests/fixtures/hosts, in this repository)

CASES = [
    (parse_os_release, "h200-vm/os.txt"),
    (parse_uname, "h200-vm/os.txt"),
    (parse_lscpu_parse, "h200-vm/lscpu.txt"),
    (parse_lscpu_plain, "h200-vm/lscpu.txt"),
    (parse_lscpu_parse, "public/lscpu-p-2s-2numa-dell-r710.txt"),
    (parse_lscpu_plain, "public/lscpu-2s-xeon8562y-l40s.txt"),
    (parse_numactl_hardware, "public/numactl-H-2node-c5n18xlarge.txt"),
    (parse_numactl_hardware, "public/numactl-H-sparse-nodes-0-8-252-255.txt"),
    (lambda text: parse_pci_devices(text.split("\n---\n")[0]), "h200-vm/pci.txt"),  # its first section: the listing
    (parse_interrupts, "h200-vm/interrupts.txt"),
    (parse_interrupts, "h200-vm/sys.txt"),
    (parse_interrupts, "public/proc-interrupts-ice-e810-16cpu.txt"),
    (parse_interrupts, "public/proc-interrupts-mlx5-12cpu.txt"),
    (parse_interrupts, "public/proc-interrupts-nvme-16cpu.txt"),
    (parse_irq_affinity, "h200-vm/irq_affinity.txt"),
    (parse_query_gpu_csv, "h200-vm/nvidia-smi-query.csv"),
    (parse_query_gpu_csv, "public/nvsmi-query-gpu-csv-2xl40s-sr665v3.txt"),
    (parse_query_gpu_csv, "public/nvsmi-query-gpu-csv-l40s-drv595.txt"),
    (parse_nvidia_smi_q, "h200-vm/nvidia-smi-q.txt"),
    (parse_nvidia_smi_q, "h200-vm/nvidia-smi-perf.txt"),
    (parse_nvidia_smi_q, "public/nvsmi-q-a10g.txt"),
    (parse_nvidia_smi_q, "public/nvsmi-q-l4.txt"),
    (parse_nvidia_smi_q, "public/nvsmi-q-l40s.txt"),
    (parse_nvidia_smi_q, "public/nvsmi-q-l40s-drv595.txt"),
    (parse_nvidia_smi_list, "public/nvsmi-L-a100sxm80-7mig-drv535.txt"),
    (parse_nvidia_smi_list, "public/nvsmi-L-4xa100sxm80-1mig4.txt"),
    (parse_topo_matrix, "h200-vm/nvidia-smi-topo.txt"),
    (parse_topo_matrix, "public/topo-2xa100pcie-2nic-2numa.txt"),
    (parse_topo_matrix, "public/topo-2xl40s-2nic-xeon8562y.txt"),
    (parse_topo_matrix, "public/topo-4xl40s-2nic-2numa.txt"),
    (parse_sysctl, "h200-vm/sysctl.txt"),
    (parse_cmdline, "h200-vm/sys.txt"),
    (parse_docker_info_text, "public/docker-info-nvidia-runtime-nct1.17.6.txt"),
    (parse_docker_daemon_json, "public/docker-daemon-json-nvidia-ctk.txt"),
]


@pytest.mark.parametrize("parser,rel", CASES, ids=[f"{p.__name__}:{r}" for p, r in CASES])
def test_fixture_value_is_json_stable(parser, rel):
    text = (FIX / rel).read_text()
    if parser is parse_docker_daemon_json:
        text = "\n".join(l for l in text.splitlines() if not l.startswith("#"))
    value = parser(text)
    assert value, f"{parser.__name__} found nothing in {rel}"
    assert json.loads(json.dumps(value)) == value


#: Facts that refuse a line not in their command's form (the command's stderr is discarded).
STRICT_LINES = {"net.infiniband", "pci.devices", "irq.affinity"}
ALL_FILES = sorted(p for p in FIX.rglob("*") if p.is_file() and p.suffix in (".txt", ".csv", ".xml"))


@pytest.mark.parametrize("fact", ALL_FACTS, ids=lambda f: f.name)
def test_no_parser_raises_on_any_fixture(fact):
    assert ALL_FILES
    for path in ALL_FILES:
        try:
            value = fact.process(path.read_text())
        except UntrustedOutput as e:
            # A capture published cut ("excerpt" in its name: an author's "[...]") may be refused as cut:
            # that is the named outcome, never a crash.  So is another command's output given to a fact whose
            # command prints its own line form alone (net.infiniband's "ibport" lines).
            # system.cmdline refuses text that is not printable (a capture with ESC colour codes is no /proc/cmdline).
            assert "excerpt" in path.name or (fact.name in STRICT_LINES and "not in the command's form" in str(e)) \
                or (fact.name == "system.cmdline" and "not printable text" in str(e)), (fact.name, path.name, str(e))
            continue
        assert json.loads(json.dumps(value)) == value, (fact.name, path.name)
