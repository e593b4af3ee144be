"""Facts that cannot be trusted: parsers read by header, refuse cut or malformed outputs.

Every input here is a real fixture output (tests/fixtures/hosts/) with one small edit made
in the test: which file, and what was changed, is said at each input.  A refused output
raises :class:`UntrustedOutput` from the fact's parser; :func:`gather` turns that into a fact
error (one line) and the fact's default, and the checklist shows it (bringup.hardware.platform).
"""
from __future__ import annotations

import re
import subprocess

import pytest

from bringup.facts import FACTS_BY_NAME
from bringup.facts.base import UntrustedOutput, parse_cpulist
from bringup.facts.cpu import parse_lscpu_parse
from bringup.facts.gather import gather
from bringup.facts.nvidia import NvidiaQuery, NvidiaTopo
from bringup.facts.nvidia_q import parse_nvidia_smi_q
from bringup.facts.nvidia_topo import parse_topo_matrix
from bringup.facts.pci import parse_pci_devices
from bringup.hardware.platform import checks
from harness.captures import strip_comments

from .fixture_hosts import FIX

PUB = FIX / "public"


def pub(name: str) -> str:
    return strip_comments((PUB / name).read_text())


def gpu_attrs(topo: dict) -> list[tuple]:
    return [(g["name"], g["cpus"], g["numa_affinity"], g["gpu_numa_id"]) for g in topo["gpus"]]


# ---------------------------------------------------------------- topo -m: by header

L40S4 = "topo-4xl40s-2nic-2numa.txt"  # space-aligned copy (tabs became spaces), 4 GPUs, 2 NICs
A100 = "topo-2xa100pcie-2nic-2numa.txt"  # tab-separated as nvidia-smi prints it, no GPU NUMA ID


def with_spaced_column(text: str) -> str:
    """topo-4xl40s-2nic-2numa.txt with an unknown column "PCIe Slot" (values 7) inserted between
    "NUMA Affinity" and "GPU NUMA ID", aligned like the others (16 characters)."""
    out = []
    for line in text.splitlines():
        if line.startswith("        GPU0"):
            line = line.replace("NUMA Affinity   GPU NUMA ID", "NUMA Affinity   PCIe Slot       GPU NUMA ID")
        elif re.match(r"GPU\d", line):
            line = line[:88] + "7               " + line[88:]
        out.append(line)
    return "\n".join(out)


def with_tabbed_column(text: str) -> str:
    """topo-2xa100pcie-2nic-2numa.txt with an unknown tab-separated column "PCIe Slot" (values 7, 8)
    inserted between "CPU Affinity" and "NUMA Affinity"."""
    return (text.replace("CPU Affinity\tNUMA Affinity", "CPU Affinity\tPCIe Slot\tNUMA Affinity")
            .replace("\t0-63\t0", "\t0-63\t7\t0").replace("\t64-127\t1", "\t64-127\t8\t1"))


def tabbed(text: str) -> str:
    """topo-4xl40s-2nic-2numa.txt back to nvidia-smi's tab-separated form: runs of 2+ spaces in the
    table become one tab, the header starts with a tab, and the GPU rows get nvidia-smi's empty
    field before GPU NUMA ID ("0\\t\\tN/A", as in h200-vm/nvidia-smi-topo.txt)."""
    out = []
    for line in text.splitlines():
        if line.startswith("        GPU0"):
            line = "\t" + re.sub(r" {2,}", "\t", line.strip())
        elif re.match(r"GPU\d", line):
            line = re.sub(r" {2,}", "\t", line.rstrip())
            line = re.sub(r"\t(\d+)\tN/A$", r"\t\1\t\tN/A", line)
        elif re.match(r"NIC\d", line):
            line = re.sub(r" {2,}", "\t", line.rstrip())
        out.append(line)
    return "\n".join(out)


def test_topo_unknown_column_space_aligned_shifts_nothing():
    real = parse_topo_matrix(pub(L40S4))
    edited = parse_topo_matrix(with_spaced_column(pub(L40S4)))
    assert gpu_attrs(edited) == gpu_attrs(real)
    assert edited["matrix"] == real["matrix"] and edited["columns"] == real["columns"]
    assert edited["gpus"][2]["numa_node"] == 1


def test_topo_unknown_column_tab_separated_shifts_nothing():
    real = parse_topo_matrix(pub(A100))
    edited = parse_topo_matrix(with_tabbed_column(pub(A100)))
    assert gpu_attrs(edited) == gpu_attrs(real)
    assert [g["cpus"][0] for g in edited["gpus"]] == [0, 64]
    assert edited["matrix"] == real["matrix"]
    assert [n["device"] for n in edited["nics"]] == ["mlx5_0", "mlx5_1"]


def test_topo_tab_separated_with_nvidia_smi_empty_field_and_unknown_column():
    real = parse_topo_matrix(pub(L40S4))
    assert gpu_attrs(parse_topo_matrix(tabbed(pub(L40S4)))) == gpu_attrs(real)
    assert gpu_attrs(parse_topo_matrix(tabbed(with_spaced_column(pub(L40S4))))) == gpu_attrs(real)


# ---------------------------------------------------------------- cut outputs

def cut_topo_without_nic_rows() -> str:
    """topo-2xa100pcie-2nic-2numa.txt cut after the GPU1 row: the header still names mlx5_0 and
    mlx5_1, their rows (and the legend) are gone."""
    lines = pub(A100).splitlines()
    end = next(i for i, l in enumerate(lines) if l.startswith("GPU1")) + 1
    return "\n".join(lines[:end]) + "\n"


def test_topo_cut_before_the_nic_rows_is_refused():
    with pytest.raises(UntrustedOutput, match=r"mlx5_0, mlx5_1.*no row"):
        parse_topo_matrix(cut_topo_without_nic_rows())


def test_topo_row_cut_short_is_refused():
    # topo-4xl40s-2nic-2numa.txt with the GPU3 row cut after its GPU2 cell.
    text = "\n".join(l[:24] if l.startswith("GPU3") else l for l in pub(L40S4).splitlines())
    with pytest.raises(UntrustedOutput, match="GPU3"):
        parse_topo_matrix(text)


def test_reversed_cpu_range_is_an_error_not_an_empty_list():
    with pytest.raises(ValueError, match="5-3"):
        parse_cpulist("5-3")
    assert parse_cpulist("3-5") == [3, 4, 5]
    # The pci.devices fact refuses that device alone (issue 21), not the whole listing: see
    # tests/unit/test_dgx_planner.py for the planner and checklist side.
    devs = parse_pci_devices("0000:01:00.0 class=0x020000 vendor=0x15b3 device=0x1017 numa=0 cpus=5-3 irqs=7\n"
                             "0000:02:00.0 class=0x020000 vendor=0x15b3 device=0x1017 numa=0 cpus=0-7 irqs=8\n")
    assert [d["address"] for d in devs] == ["0000:01:00.0", "0000:02:00.0"]
    assert "5-3" in devs[0]["refused"] and devs[0]["local_cpus"] == [] and devs[0]["irqs"] == []
    assert devs[0]["numa_node"] == -1 and devs[0]["kind"] == "nic"
    assert "refused" not in devs[1] and devs[1]["local_cpus"] == list(range(8)) and devs[1]["irqs"] == [8]


def cut_nvidia_smi_q(name: str, before: str) -> str:
    """A public ``nvidia-smi -q`` cut just before its first line starting with ``before``."""
    lines = pub(name).splitlines()
    end = next(i for i, l in enumerate(lines) if l.startswith(before))
    return "\n".join(lines[:end]) + "\n"


def test_nvidia_smi_q_cut_inside_a_gpu_is_refused():
    # nvsmi-q-l40s.txt cut before "    FB Memory Usage": BAR1, ECC, power... of the GPU would vanish.
    text = cut_nvidia_smi_q("nvsmi-q-l40s.txt", "    FB Memory Usage")
    with pytest.raises(UntrustedOutput, match="00000000:.*cut short"):
        parse_nvidia_smi_q(text)
    assert parse_nvidia_smi_q(pub("nvsmi-q-l40s.txt"))["gpus"][0]["bar1_total_mib"]


def test_nvidia_smi_q_fewer_gpu_sections_than_attached_is_refused():
    # nvsmi-q-l4.txt cut before its GPU section: "Attached GPUs : 1", no GPU follows.
    text = cut_nvidia_smi_q("nvsmi-q-l4.txt", "GPU 0000")
    with pytest.raises(UntrustedOutput, match="Attached GPUs 1.*0 GPU section"):
        parse_nvidia_smi_q(text)


def test_nvidia_smi_q_display_subset_is_not_refused():
    # h200-vm/nvidia-smi-perf.txt is `nvidia-smi -q -d PERFORMANCE,...`: no Processes section, by design.
    q = parse_nvidia_smi_q((FIX / "h200-vm" / "nvidia-smi-perf.txt").read_text())
    assert q["gpus"]


# ---------------------------------------------------------------- lscpu -p offline CPUs

def r710_with_offline(cpus: set[int]) -> str:
    """lscpu-p-2s-2numa-dell-r710.txt with the rows of ``cpus`` emptied after the CPU number
    ("14,,,,,,,,"), which is how lscpu -p prints CPUs that are offline."""
    out = []
    for line in pub("lscpu-p-2s-2numa-dell-r710.txt").splitlines():
        m = re.match(r"^(\d+),", line)
        if m and int(m.group(1)) in cpus:
            line = m.group(1) + "," * line.count(",")
        out.append(line)
    return "\n".join(out)


def test_lscpu_offline_rows_are_not_online_on_node_0():
    real = parse_lscpu_parse(pub("lscpu-p-2s-2numa-dell-r710.txt"))
    topo = parse_lscpu_parse(r710_with_offline({13, 15}))
    assert topo["online"] == [c for c in range(16) if c not in (13, 15)]
    assert topo["offline"] == [13, 15]
    assert topo["numa_nodes"]["0"] == real["numa_nodes"]["0"]  # even CPUs, none added
    assert topo["numa_nodes"]["1"] == [1, 3, 5, 7, 9, 11]
    assert topo["numa_known"] is True and topo["cpu_count"] == 14
    assert real["offline"] == []


# ---------------------------------------------------------------- gather and the checklist

class _ShTransport:
    """Runs the fact script with the local sh: enough for facts whose command is ``cat FILE``."""

    def run_script(self, script: str):
        from bringup.ssh.transport import RunResult

        p = subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=False)
        return RunResult(p.returncode, p.stdout, p.stderr)


def _cat_fact(base, path):
    return type(base.__name__, (base,), {"command": f"cat {path}", "requires_command": None})


def test_untrusted_output_is_a_one_line_fact_error_shown_by_the_checklist(tmp_path):
    topo, query = tmp_path / "topo.txt", tmp_path / "q.txt"
    topo.write_text(cut_topo_without_nic_rows())
    query.write_text(cut_nvidia_smi_q("nvsmi-q-l40s.txt", "    FB Memory Usage"))
    values, errors = gather(_ShTransport(), [_cat_fact(NvidiaTopo, topo), _cat_fact(NvidiaQuery, query)])
    assert values == {"nvidia.topo": {}, "nvidia.query": {}}
    assert set(errors) == {"nvidia.topo", "nvidia.query"}
    for msg in errors.values():
        assert "\n" not in msg and "Traceback" not in msg and not msg.startswith("UntrustedOutput")
    assert "cut short" in errors["nvidia.query"]
    cs = [c for c in checks(values, {}, fact_errors=errors) if c.name.startswith("fact ")]
    assert [(c.name, c.status) for c in cs] == [("fact nvidia.query", "FAIL"), ("fact nvidia.topo", "FAIL")]
    assert cs[1].seen == errors["nvidia.topo"] and cs[1].fix


def test_every_real_fixture_is_still_trusted():
    # The real outputs are complete: none of them is refused by the fact it belongs to.
    assert parse_topo_matrix(pub(A100))["nics"]
    for name in ("nvsmi-q-l40s.txt", "nvsmi-q-a10g.txt", "nvsmi-q-l4.txt", "nvsmi-q-l40s-drv595.txt"):
        assert FACTS_BY_NAME["nvidia.query"].process(pub(name))["gpus"], name
