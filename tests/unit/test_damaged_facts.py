"""Saved and gathered facts that are damaged (issue 34, items 1 to 4): a fact that could not be read is a line of
its own naming it and what was seen, and the checks that need it say "not checked: <fact> unreadable", never PASS
and never a verdict on the hardware.

Every output here is a real capture (``tests/fixtures/hosts/``: the H200 VM's own ``invoke facts --raw`` bundle and
the public ``lscpu -p`` of a Dell R710, sources in the fixtures' README and ``public/INDEX.tsv``).  Each test damages
a copy in memory the way real outputs get damaged and says how: emptied, cut at a row, one byte that is not UTF-8
(written into the bundle as ``invoke facts --raw`` saves it: a surrogate escape ``\\udcff``), one garbled character.
"""
from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from bringup.checklist.pages import collect
from bringup.facts import FACTS_BY_NAME
from bringup.facts.base import UntrustedOutput
from bringup.facts.cpu import parse_lscpu_parse
from bringup.facts.gather import load_facts, parse_raw
from bringup.facts.helpers import cpulist
from bringup.facts.nvidia_csv import parse_query_gpu_csv
from bringup.facts.pci import parse_pci_devices

from .fixture_hosts import FIX

REPO = Path(__file__).resolve().parents[2]
BUNDLE = FIX / "h200-vm" / "facts-raw.json"
R710 = FIX / "public" / "lscpu-p-2s-2numa-dell-r710.txt"
VARS = {"gpu_profile": "auto", "inventory_hostname": "h200-vm"}


def bundle() -> dict:
    return json.loads(BUNDLE.read_text())


def raw_with(**outputs: str) -> dict:
    """The H200's raw facts, the named facts' outputs replaced (``nvidia_query`` names ``nvidia.query``)."""
    raw = copy.deepcopy(bundle()["raw"])
    for key, text in outputs.items():
        raw[key.replace("_", ".", 1)]["output"] = text
    return raw


def checklist_of(raw: dict):
    values, errors = parse_raw(list(FACTS_BY_NAME.values()), raw)
    return collect(values, VARS, None, errors), errors


def named(checks, name: str):
    return [c for c in checks if c.name == name]


def r710_p() -> str:
    """The R710's ``lscpu -p`` section alone: its rows (16 CPUs, 2 threads per core) and their header."""
    text = R710.read_text().split("\n\n", 1)[1] if "\n\n" in R710.read_text() else R710.read_text()
    return "\n".join(l for l in text.splitlines() if not l.startswith("# source") and not l.startswith("# what"))


# --------------------------------------------------------------------------------------------------------------
# item 4: an empty output where the command prints something


@pytest.mark.reliability(item=34, fault="a fact's output empty although its command always prints (cpu.topology, "
                                        "nvidia.topo, nvidia.query, pci.devices, nvidia.smi)",
                         variants=1, checks=("one clear line",))
@pytest.mark.parametrize("fact, needs", [
    ("cpu.topology", ["NUMA alignment"]),
    ("nvidia.topo", ["NUMA alignment"]),
    ("nvidia.query", ["GPU settings (BAR1, PCIe link, persistence, ECC, MIG mode)",
                      "GPU health (ECC, memory repair, clocks, temperature, fabric)"]),
    ("pci.devices", ["GPU count", "NIC PCIe links", "NUMA alignment"]),
    ("nvidia.smi", ["driver sees the GPUs", "GPU class (gpu_profile auto)", "NUMA alignment"]),
])
def test_an_empty_output_is_named_and_its_checks_are_not_checked(fact, needs):
    # Damage: the fact's output in the real H200 bundle replaced by nothing (what a lost lane leaves).
    checks, errors = checklist_of(raw_with(**{fact: ""}))
    assert "empty output" in errors[fact], errors
    (line,) = named(checks, f"fact {fact}")
    assert line.status == "FAIL" and "empty output" in line.seen
    for name in needs:
        (c,) = named(checks, name)
        assert c.status == "WARN" and c.seen.startswith(f"not checked: {fact} unreadable"), c
    # Never a verdict on the hardware from a reading failure.
    assert not [c for c in checks if c.name == "GPUs present"], checks
    assert not [c for c in checks if c.status == "FAIL" and not c.name.startswith("fact ")], \
        [c for c in checks if c.status == "FAIL"]
    if fact == "nvidia.query":  # the per-GPU lines are not silently gone: the one line above says why
        assert not [c for c in checks if c.subject and c.area in ("platform", "health")], checks


def test_empty_pci_devices_does_not_blame_the_gpus():
    checks, _ = checklist_of(raw_with(pci_devices=""))
    (count,) = named(checks, "GPU count")
    assert count.status == "WARN" and "nvidia-smi lists 1 GPU(s)" in count.seen, count
    assert not [c for c in checks if "seat the GPUs" in c.fix]


def test_no_nvidia_smi_at_all_is_no_reading_failure():
    # Every fact of nvidia-smi empty: the program is missing (the fact's snippet prints nothing), not a lost output.
    _, errors = checklist_of(raw_with(nvidia_smi="", nvidia_query="", nvidia_topo="", nvidia_nvlink=""))
    assert not [f for f in errors if f.startswith("nvidia.")], errors


def test_the_real_bundle_has_no_fact_error():
    _, errors = checklist_of(bundle()["raw"])
    assert errors == {}, errors


# --------------------------------------------------------------------------------------------------------------
# item 1: a byte that is not UTF-8


def _page(tmp_path: Path, raw: dict, host: str = "h200-vm", extra: tuple = ()):
    doc = {"host": host, "raw": raw}
    (tmp_path / "bundle.json").write_text(json.dumps(doc))  # a lone surrogate is written as "\udcff", as --raw does
    (tmp_path / "hosts").write_text(yaml.safe_dump({"all": {"hosts": {host: {
        "ansible_host": "127.0.0.1", "ansible_port": 9, "gpu_profile": "auto"}}}}))
    r = subprocess.run([sys.executable, "-m", "invoke", "--search-root", str(REPO), "checklist", "--host", host,
                        "--facts", str(tmp_path / "bundle.json"), "--out", "pages", *extra], cwd=tmp_path,
                       capture_output=True, text=True, timeout=180)
    return r


@pytest.mark.reliability(item=34, fault="a byte that is not UTF-8 in a GPU name (nvidia-smi CSV and -q), saved by "
                                        "--raw as a surrogate escape",
                         checks=("one clear line", "report written"))
def test_a_gpu_name_not_utf8_is_named_and_the_pages_are_written(tmp_path):
    raw = bundle()["raw"]
    # Damage: one byte 0xff inside "NVIDIA H200" in the CSV and in the -q report (as the transport keeps it).
    for fact in ("nvidia.smi", "nvidia.query"):
        assert "NVIDIA H200" in raw[fact]["output"]
        raw[fact]["output"] = raw[fact]["output"].replace("NVIDIA H200", "NVIDIA H2\udcff00", 1)
    r = _page(tmp_path, raw)
    assert "Traceback" not in r.stderr and r.returncode in (0, 2), r.stdout + r.stderr
    md = (tmp_path / "pages" / "h200-vm.md").read_text()
    assert (tmp_path / "pages" / "h200-vm.html").read_text().strip()
    for fact in ("nvidia.smi", "nvidia.query"):
        (row,) = [l for l in md.splitlines() if f"| fact {fact} |" in l]
        assert row.startswith("| FAIL") and "not UTF-8" in row and "\\xff" in row, row


def test_a_nic_name_not_utf8_in_saved_facts_writes_the_pages(tmp_path):
    # `invoke facts` (parsed, not raw) of the same host, a NIC name holding a surrogate: the page still writes.
    values, errors = parse_raw(list(FACTS_BY_NAME.values()), bundle()["raw"])
    values["net.interfaces"][0]["name"] = "ens\udcff1"
    values["nvidia.smi"][0]["name"] = "NVIDIA H\udcff200"
    (tmp_path / "saved.json").write_text(json.dumps({"host": "h200-vm", "facts": values, "errors": errors}))
    (tmp_path / "hosts").write_text(yaml.safe_dump({"all": {"hosts": {"h200-vm": {
        "ansible_host": "127.0.0.1", "ansible_port": 9, "gpu_profile": "auto"}}}}))
    r = subprocess.run([sys.executable, "-m", "invoke", "--search-root", str(REPO), "checklist", "--host", "h200-vm",
                        "--facts", "saved.json", "--out", "pages"], cwd=tmp_path, capture_output=True, text=True,
                       timeout=180)
    assert "Traceback" not in r.stderr and r.returncode in (0, 2), r.stdout + r.stderr
    # Written out as \xff, and that backslash escaped for Markdown (it renders as "NVIDIA H\xff200").
    assert "NVIDIA H\\\\xff200" in (tmp_path / "pages" / "h200-vm.md").read_text()


@pytest.mark.reliability(item=34, fault="a byte that is not UTF-8 in one lscpu -p row", checks=("one clear line",))
def test_a_byte_not_utf8_in_an_lscpu_row_is_refused_not_an_unpaired_sibling():
    text = r710_p()
    # Damage: CPU 13's core id "5" preceded by the byte 0xff (surrogate escaped, as the transport keeps it).
    damaged = re.sub(r"(?m)^13,5,", "13,\udcff5,", text)
    assert damaged != text
    with pytest.raises(UntrustedOutput, match="core"):
        parse_lscpu_parse(damaged)
    _, errors = parse_raw([FACTS_BY_NAME["cpu.topology"]], {"cpu.topology": {"rc": 0, "output": damaged}})
    assert "not UTF-8" in errors["cpu.topology"] and "\\xff5" in errors["cpu.topology"], errors


# --------------------------------------------------------------------------------------------------------------
# item 2: lscpu -p cut short


@pytest.mark.reliability(item=34, fault="lscpu -p cut short: at a row, mid-row, rows cut from the middle, no node "
                                        "lines", variants=4, checks=("one clear line",))
def test_lscpu_rows_cut_are_refused_or_said():
    text = r710_p()
    rows = [l for l in text.splitlines() if re.match(r"^\d+,", l)]
    assert len(rows) == 16 and parse_lscpu_parse(text)["threads_per_core"] == 2
    # Damage 1: cut after CPU 11's row (the R710 pairs CPU n with n+8: CPUs 12-15 gone leave 4 cores alone).
    cut = text[:text.index("\n12,")]
    with pytest.raises(UntrustedOutput, match="fewer threads"):
        parse_lscpu_parse(cut)
    # Damage 2: CPU 13's row cut mid-line.
    with pytest.raises(UntrustedOutput, match="fields"):
        parse_lscpu_parse(text[:text.index("\n13,") + 6])
    # Damage 3: rows 5 to 7 cut out of the middle.
    middle = "\n".join(l for l in text.splitlines() if not re.match(r"^[567],", l))
    with pytest.raises(UntrustedOutput, match="no row for CPU"):
        parse_lscpu_parse(middle)


def test_the_h200_lscpu_cut_before_its_node_lines_is_said_on_the_checklist():
    out = bundle()["raw"]["cpu.topology"]["output"]
    # Damage 4: the fact's output cut after CPU 9's row: no "---" and no node lines (one thread per core: the rows
    # alone cannot show the cut).
    cut = out[:out.index("\n10,")]
    checks, errors = checklist_of(raw_with(cpu_topology=cut))
    (line,) = named(checks, "fact cpu.topology")
    assert line.status == "WARN" and "'---' line is missing" in line.seen and "cut short" in line.seen, line
    whole = parse_lscpu_parse(out)
    assert "unverified" not in whole


# --------------------------------------------------------------------------------------------------------------
# item 3: a garbled CPU list


@pytest.mark.reliability(item=34, fault="a cpulist with one garbled character (device local_cpulist, kernel node "
                                        "list)", variants=2, checks=("one clear line",))
def test_a_garbled_cpulist_is_refused_not_an_empty_list():
    with pytest.raises(UntrustedOutput, match="garbled"):
        cpulist("0-1S")
    assert cpulist("") == [] and cpulist("0-3,8") == [0, 1, 2, 3, 8]
    pci = (FIX / "h200-vm" / "pci.txt").read_text()
    raw_pci = bundle()["raw"]["pci.devices"]["output"]
    assert "cpus=0-15" in raw_pci, raw_pci[:300]
    # Damage: the GPU's local_cpulist "0-15" with its last digit garbled to "0-1S".
    damaged = re.sub(r"(?m)^(0000:00:06\.0 .*?cpus=)0-15", r"\g<1>0-1S", raw_pci)
    assert damaged != raw_pci and pci
    (gpu,) = [d for d in parse_pci_devices(damaged) if d["address"] == "0000:00:06.0"]
    assert "garbled" in gpu["refused"] and gpu["local_cpus"] == []
    checks, _ = checklist_of(raw_with(pci_devices=damaged))
    (refused,) = named(checks, "devices read")
    assert refused.status == "WARN" and "0000:00:06.0" in refused.seen and "0-1S" in refused.seen
    # The kernel's node list of lscpu's fact garbled the same way: the fact is refused, named.
    topo = bundle()["raw"]["cpu.topology"]["output"].replace("node 0 0-15", "node 0 0-1S")
    _, errors = parse_raw([FACTS_BY_NAME["cpu.topology"]], {"cpu.topology": {"rc": 0, "output": topo}})
    assert "node 0" in errors["cpu.topology"] and "garbled" in errors["cpu.topology"], errors


# --------------------------------------------------------------------------------------------------------------
# item 16: hostile text in a GPU name; a host named index


@pytest.mark.reliability(item=34, fault="ANSI escape sequences and <script> in a GPU name", variants=1,
                         checks=("report written",))
def test_escapes_and_script_in_a_gpu_name_are_shown_never_acting(tmp_path):
    raw = bundle()["raw"]
    # Hostile: the CSV's GPU name given an ANSI clear-screen and colour, and a <script> tag.
    assert "NVIDIA H200" in raw["nvidia.smi"]["output"]
    raw["nvidia.smi"]["output"] = raw["nvidia.smi"]["output"].replace(
        "NVIDIA H200", "NVIDIA H200 \x1b[2J\x1b[31m<script>alert(1)</script>", 1)
    r = _page(tmp_path, raw)
    assert "Traceback" not in r.stderr and r.returncode in (0, 2), r.stdout + r.stderr
    assert "\x1b" not in r.stdout + r.stderr
    md = (tmp_path / "pages" / "h200-vm.md").read_text()
    html = (tmp_path / "pages" / "h200-vm.html").read_text()
    assert "\x1b" not in md + html and "<script>" not in md and "<script>alert" not in html
    assert "\\x1b[2J" in md and "&lt;script>alert(1)&lt;/script>" in md, md
    assert "&lt;script&gt;alert(1)" in html
    assert "\\x1b[2J" in r.stdout  # the terminal shows the escape as text


@pytest.mark.reliability(item=34, fault="a host named index with --group (the rack page's name)",
                         checks=("one clear line", "exit code", "nothing touched"))
def test_a_host_named_index_is_refused_before_it_overwrites_the_group_page(tmp_path):
    (tmp_path / "bundle.json").write_text(json.dumps({"host": "index", "raw": bundle()["raw"]}))
    (tmp_path / "hosts").write_text(yaml.safe_dump({"all": {"children": {"rack": {"hosts": {"index": {
        "ansible_host": "127.0.0.1", "ansible_port": 9, "gpu_profile": "auto"}}}}}}))
    r = subprocess.run([sys.executable, "-m", "invoke", "--search-root", str(REPO), "checklist", "--group", "rack",
                        "--facts", "bundle.json", "--out", "pages"], cwd=tmp_path, capture_output=True, text=True,
                       timeout=180)
    said = (r.stdout + r.stderr).strip().splitlines()
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stdout + r.stderr
    assert len(said) == 1 and "'index'" in said[0] and "index.html" in said[0] and "rename" in said[0], said
    assert not (tmp_path / "pages").exists()
    # Without --group the host's page is its own: checked as before.
    r = _page(tmp_path, bundle()["raw"], host="index")
    assert r.returncode in (0, 2) and (tmp_path / "pages" / "index.md").exists(), r.stdout + r.stderr


@pytest.mark.reliability(item=34, fault="a health fact cut (nvidia-smi nvlink -s cut mid-line)",
                         checks=("one clear line",))
def test_a_cut_health_fact_makes_its_health_lines_not_checked():
    text = "\n".join(l for l in (FIX / "public" / "nvlink-s-8xa100sxm.txt").read_text().splitlines()
                     if not l.startswith("#")) + "\n"
    # Damage: the 8x A100's nvlink -s cut inside GPU 0's link 3 ("25 GB/s" left as "25").
    cut = text[:text.index("Link 3: 25") + len("Link 3: 25")]
    checks, errors = checklist_of(raw_with(nvidia_nvlink=cut))
    assert "link 3" in errors["nvidia.nvlink"], errors
    (nvlink,) = named(checks, "NVLink")
    assert nvlink.status == "WARN" and nvlink.seen == "not checked: nvidia.nvlink unreadable", nvlink
    # The GPU's other health lines still read their own fact.
    assert [c.status for c in checks if c.name == "ECC errors"] == ["PASS"]


# --------------------------------------------------------------------------------------------------------------
# nvidia-smi --query-gpu CSV cut or broken at a row (issue 41: a cut row was dropped, and the GPU with it)

L40S_2 = FIX / "public" / "nvsmi-query-gpu-csv-2xl40s-sr665v3.txt"


def _l40s_csv() -> str:
    """The public 2x L40S capture's CSV part alone (its header and both GPUs' rows, each ending in a newline)."""
    text = L40S_2.read_text()
    part = text[text.index("name, driver_version"):]
    return "\n".join(l for l in part.splitlines() if l.strip()) + "\n"


@pytest.mark.reliability(item=41, fault="nvidia-smi --query-gpu CSV cut: inside a row, inside the last field, an "
                                        "error line in place of a GPU's row", checks=("one clear line",))
@pytest.mark.parametrize("how", ["mid-row", "last field", "error row"])
def test_a_cut_query_csv_is_unreadable_never_one_gpu_fewer(how):
    whole = _l40s_csv()
    assert [g["pci_bus_id"] for g in parse_query_gpu_csv(whole)] == ["00000000:01:00.0", "00000000:91:00.0"]
    second = whole.index("NVIDIA L40S, 595.71.05, 46068 MiB, 00000000:91")
    damaged = {
        # Damage: cut after the second GPU's name and driver (a lost lane mid-line).
        "mid-row": whole[:second + len("NVIDIA L40S, 595.71.05")] + "\n",
        # Damage: cut inside the last field, before its newline ("0x26B9" of "0x26B910DE").
        "last field": whole[:whole.rindex("10DE")],
        # What nvidia-smi prints for a GPU it cannot reach, in place of that GPU's row.
        "error row": whole[:second] + "Unable to determine the device handle for GPU 0000:91:00.0: Unknown Error\n",
    }[how]
    with pytest.raises(UntrustedOutput) as e:
        parse_query_gpu_csv(damaged)
    if how == "error row":
        # nvidia-smi's own error in place of a row is said in its words, as nvidia-smi -q's is (the GPU it cannot
        # reach), so the lines name a GPU fault.
        assert str(e.value) == "nvidia-smi --query-gpu: nvidia-smi cannot reach GPU 0000:91:00.0: Unknown Error"
    else:
        assert ("row 2" in str(e.value)) if how == "mid-row" else ("without its newline" in str(e.value))


@pytest.mark.reliability(item=41, fault="nvidia-smi --query-gpu CSV cut inside the H200's row, through the checklist",
                         checks=("one clear line",))
def test_the_h200_csv_cut_makes_its_checks_not_checked():
    text = bundle()["raw"]["nvidia.smi"]["output"]
    checks, errors = checklist_of(raw_with(nvidia_smi=text[:text.index(", 1980 MHz")] + "\n"))
    assert "row 1 has" in errors["nvidia.smi"], errors
    (line,) = named(checks, "fact nvidia.smi")
    assert line.status == "FAIL" and "row 1 has" in line.seen
    (c,) = named(checks, "driver sees the GPUs")
    assert c.status == "WARN" and c.seen.startswith("not checked: nvidia.smi unreadable"), c


def test_the_loaded_driver_read_cut_is_a_failure_not_a_reboot():
    from bringup.resources.nvidia import NvidiaDriverLoaded
    whole = (FIX / "h200-vm" / "nvidia-smi-query.csv").read_text()
    assert NvidiaDriverLoaded("580", expected_gpus=1).plan(whole + "smi_rc=0\n").error is None
    p = NvidiaDriverLoaded("580", expected_gpus=1).plan(whole[:whole.index(", 700.00 W")] + "smi_rc=0\n")
    assert p.reboot is None and "row 1 has 7 of the header's 10 fields" in p.error, p


# --------------------------------------------------------------------------------------------------------------
# nvidia-smi -q counters and flags that are no reading (hostile-input review: NaN, -1, Maybe counted as 0 or No)

def _h200_q(old: str, new: str) -> str:
    text = bundle()["raw"]["nvidia.query"]["output"]
    assert old in text
    return text.replace(old, new, 1)  # the first: Volatile under ECC Errors


DRAM_UNCORR = "DRAM Uncorrectable                         : 0"


@pytest.mark.reliability(item=34, fault="nvidia-smi -q ECC counter NaN, -1, 1e3, inf, 0x10, '3 (est)', text, empty, "
                         "10^400", variants=9, checks=("one clear line",))
@pytest.mark.parametrize("value", ["NaN", "-1", "1e3", "inf", "0x10", "3 (est)", "garbage", "", "1" * 400])
def test_an_unreadable_ecc_counter_is_not_checked_never_zero(value):
    checks, errors = checklist_of(raw_with(nvidia_query=_h200_q(DRAM_UNCORR, DRAM_UNCORR[:-1] + value)))
    (ecc,) = named(checks, "ECC errors")
    assert ecc.status == "WARN" and ecc.seen.startswith("not checked: nvidia.query unreadable: "), ecc
    assert "Volatile DRAM Uncorrectable" in ecc.seen, ecc
    # The GPU's other health lines still read.
    assert [c.status for c in named(checks, "memory repair")] == ["PASS"]


@pytest.mark.reliability(item=40, fault="nvidia-smi -q ECC counter N/A beside the block's figures (DRAM Uncorrectable "
                         "N/A beside SRAM 0) summed as 0: PASS '0 uncorrectable'; a Volatile or Aggregate block all N/A "
                         "beside the other's figures read as '0 uncorrectable'", variants=6, checks=("one clear line",))
@pytest.mark.parametrize("value", ["N/A", "[N/A]", "[Not Supported]", "Not Supported"])
def test_a_counter_na_beside_the_block_figures_is_not_checked_never_zero(value):
    checks, _ = checklist_of(raw_with(nvidia_query=_h200_q(DRAM_UNCORR, DRAM_UNCORR[:-1] + value)))
    (ecc,) = named(checks, "ECC errors")
    assert ecc.status == "WARN" and ecc.seen == ("not checked: nvidia.query unreadable: Volatile DRAM Uncorrectable "
                                                 f"{value!r} beside the block's figures"), ecc


def test_a_memory_all_na_beside_the_other_is_not_checked_unless_it_is_a_gddr_parts_sram():
    # DRAM all N/A beside SRAM figures on an HBM part (an H200): a failed counter query, never "0 uncorrectable"
    # (a second reader of 7193ccd, which excused a memory all N/A either way round).
    text = bundle()["raw"]["nvidia.query"]["output"]
    m = re.search(r"^        Volatile\n((?:            [^\n]*\n)+)", text, flags=re.M)
    damaged = re.sub(r"^(            DRAM [^:]*: )0$", r"\g<1>N/A", m.group(1), flags=re.M)
    assert damaged != m.group(1)
    checks, _ = checklist_of(raw_with(nvidia_query=text[:m.start(1)] + damaged + text[m.end(1):]))
    (ecc,) = named(checks, "ECC errors")
    assert ecc.status == "WARN" and ecc.seen.startswith("not checked: nvidia.query unreadable: Volatile DRAM"), ecc
    # Every SRAM counter N/A beside DRAM figures (what the real RTX A6000 and A10 print): no damage.
    sram = re.sub(r"^(            SRAM [^:]*: )0$", r"\g<1>N/A", m.group(1), flags=re.M)
    checks, _ = checklist_of(raw_with(nvidia_query=text[:m.start(1)] + sram + text[m.end(1):]))
    assert [c.status for c in named(checks, "ECC errors")] == ["PASS"]


@pytest.mark.parametrize("block, other", [("Volatile", "Aggregate"), ("Aggregate", "Volatile")])
def test_an_ecc_block_all_na_beside_the_other_is_not_checked(block, other):
    text = bundle()["raw"]["nvidia.query"]["output"]
    m = re.search(rf"^        {block}\n((?:            [^\n]*\n)+)", text, flags=re.M)
    damaged = re.sub(r": 0$", ": N/A", m.group(1), flags=re.M)
    checks, _ = checklist_of(raw_with(nvidia_query=text[:m.start(1)] + damaged + text[m.end(1):]))
    (ecc,) = named(checks, "ECC errors")
    assert ecc.status == "WARN" and ecc.seen == ("not checked: nvidia.query unreadable: every "
                                                 f"{block} counter 'N/A' beside the {other} figures"), ecc
    # Both blocks N/A (ECC off, a part without it): no counts at all, as before.
    both = re.sub(r"(            (?:SRAM|DRAM) \w[^:]*: )0$", r"\g<1>N/A", text, flags=re.M)
    checks, _ = checklist_of(raw_with(nvidia_query=both))
    assert [c.status for c in named(checks, "ECC errors")] == ["PASS"]


ROWS_UNCORR = "        Uncorrectable Error                            : 0"
ROWS_PENDING = "Pending                                        : No\n        Remapping"


@pytest.mark.reliability(item=34, fault="nvidia-smi -q remapped rows: Uncorrectable Error NaN/-1/many, Pending "
                         "Maybe/yes/YES/empty", variants=7, checks=("one clear line",))
@pytest.mark.parametrize("old,new,named_as", [
    (ROWS_UNCORR, ROWS_UNCORR[:-1] + "NaN", "Remapped Rows Uncorrectable Error 'NaN'"),
    (ROWS_UNCORR, ROWS_UNCORR[:-1] + "-1", "Remapped Rows Uncorrectable Error '-1'"),
    (ROWS_UNCORR, ROWS_UNCORR[:-1] + "many", "Remapped Rows Uncorrectable Error 'many'"),
    (ROWS_PENDING, ROWS_PENDING.replace("No", "Maybe"), "Remapped Rows Pending 'Maybe'"),
    (ROWS_PENDING, ROWS_PENDING.replace("No", "yes"), "Remapped Rows Pending 'yes'"),
    (ROWS_PENDING, ROWS_PENDING.replace("No", "YES"), "Remapped Rows Pending 'YES'"),
    (ROWS_PENDING, ROWS_PENDING.replace(" No", ""), "Remapped Rows Pending ''"),
])
def test_an_unreadable_remapped_row_value_is_not_checked_never_no(old, new, named_as):
    checks, _ = checklist_of(raw_with(nvidia_query=_h200_q(old, new)))
    (repair,) = named(checks, "memory repair")
    assert repair.status == "WARN" and repair.seen == "not checked: nvidia.query unreadable: " + named_as, repair
    assert [c.status for c in named(checks, "ECC errors")] == ["PASS"]


# --------------------------------------------------------------------------------------------------------------
# nvidia-smi temperatures and sizes read whole (hostile-input review: 1e308 C was 1 °C, 33 F was 33 °C, NaN left out)

CUR_TEMP = "GPU Current Temp                               : 33 C"
TLIMIT = "GPU T.Limit Temp                               : 54 C"


@pytest.mark.reliability(item=34, fault="nvidia-smi -q temperature 1e308 C, 0x21 C, 1_000 C, 33 F, NaN, inf, 10^400, "
                         "empty; T.Limit NaN", variants=9, checks=("one clear line",))
@pytest.mark.parametrize("old,new", [(CUR_TEMP, CUR_TEMP.replace("33 C", v)) for v in
                                     ("1e308 C", "0x21 C", "1_000 C", "33 F", "NaN C", "inf C", "1" * 400 + " C", "")]
                         + [(TLIMIT, TLIMIT.replace("54 C", "NaN C"))])
def test_an_unreadable_temperature_is_not_checked_never_a_prefix(old, new):
    checks, _ = checklist_of(raw_with(nvidia_query=_h200_q(old, new)))
    (temp,) = named(checks, "temperature")
    key = old.split("  ")[0]
    assert temp.status == "WARN" and temp.seen.startswith(f"not checked: nvidia.query unreadable: {key} "), temp
    assert [c.status for c in named(checks, "ECC errors")] == ["PASS"]


def test_a_temperature_the_part_does_not_print_is_still_left_out_unsaid():
    checks, _ = checklist_of(raw_with(nvidia_query=_h200_q(CUR_TEMP, CUR_TEMP.replace("33 C", "N/A"))))
    (temp,) = named(checks, "temperature")
    assert temp.status == "PASS" and temp.seen == "56 °C below the slowdown limit", temp


@pytest.mark.reliability(item=34, fault="nvidia-smi --query-gpu memory.total 1e308, 0x10, NaN, 33 GiB",
                         variants=4, checks=("one clear line",))
@pytest.mark.parametrize("value", ["1e308 MiB", "0x10 MiB", "NaN MiB", "33 GiB"])
def test_a_csv_size_not_whole_is_unreadable_never_its_prefix(value):
    csv = bundle()["raw"]["nvidia.smi"]["output"].replace("143771 MiB", value)
    with pytest.raises(UntrustedOutput, match=r"memory.total \[MiB\] .* is no number in MiB"):
        parse_query_gpu_csv(csv)
    _, errors = checklist_of(raw_with(nvidia_smi=csv))
    assert "nvidia.smi" in errors
    # nounits, as --format=csv,nounits prints it, still reads.
    assert parse_query_gpu_csv(csv.replace(value, "143771"))[0]["memory_total_mib"] == 143771


@pytest.mark.reliability(item=34, fault="kernel.xid says count 5 and lists no Xid line", checks=("one clear line",))
def test_an_xid_count_with_no_line_listed_is_not_none_since_boot():
    checks, errors = checklist_of(raw_with(kernel_xid="source dmesg\nfirst [    0.000000] L\ncount 5\nexit 0\n"))
    assert "count 5 but 0 Xid line(s) listed" in errors["kernel.xid"], errors
    assert not [c for c in checks if c.name == "Xid events" and c.status == "PASS"], named(checks, "Xid events")


@pytest.mark.parametrize("edit", [
    lambda t: t.replace('{', '{"host": "other", ', 1),  # the host named twice: which one is it?
    lambda t: t.replace('"raw": {', '"raw": {"nvidia.query": {"rc": 0, "output": ""}, ', 1),  # a fact twice
])
def test_a_saved_facts_file_with_a_key_given_twice_is_refused(tmp_path, edit):
    # json keeps the last of a key given twice: a second "nvidia.query" would replace the first unseen.
    path = tmp_path / "facts.json"
    path.write_text(edit(BUNDLE.read_text()))
    from bringup.errors import InputError

    with pytest.raises(InputError, match=r"^--facts .*: the key '(host|nvidia\.query)' is given twice"):
        load_facts(path, "h200-vm")


@pytest.mark.reliability(item=40, fault="a saved facts file holding a 100,000-digit number, nested 100,000 deep, "
                                        "not UTF-8 or cut mid-way (Python's own 'Exceeds the limit (4300 digits)' "
                                        "advice)", variants=5, checks=("one clear line",))
@pytest.mark.parametrize("text, why", [
    ('{"host": "h200-vm", "facts": {"mem.total": ' + "9" * 100_000 + "}}",
     "an integer of 100000 digits (at most 4000 are read)"),
    ('{"host": ' + "9" * 100_000 + ', "facts": {}}', "an integer of 100000 digits (at most 4000 are read)"),
    ('{"host": "h200-vm", "facts": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested more than 64 levels deep"),
    (b'{"host": "h200-vm\xff", "facts": {}}', "not UTF-8"),
    ('{"host": "h200-vm", "facts": {"mem.total": ', "not JSON (Expecting value at line 1 column 44)"),
], ids=["digits", "digits-host", "nested", "not-utf8", "cut"])
def test_a_hostile_saved_facts_file_is_one_line_naming_the_file_and_the_fix(tmp_path, text, why):
    from bringup.errors import InputError

    path = tmp_path / "facts.json"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(InputError) as e:
        load_facts(path, "h200-vm")
    line = str(e.value)
    assert line.startswith(f"--facts {path}: {why}") and "\n" not in line, line
    assert line.endswith("facts --host h200-vm > FILE"), line
    assert "set_int_max_str_digits" not in line and "4300" not in line


@pytest.mark.reliability(item=40, fault="nvidia-smi -q printing one GPU's section twice (one copy with 7 uncorrectable "
                         "ECC errors; with and without the Attached GPUs line)", variants=2,
                         checks=("one clear line",))
@pytest.mark.parametrize("attached", [True, False], ids=["attached line", "no attached line"])
def test_a_gpu_section_printed_twice_is_named_and_its_gpu_not_checked(attached):
    """The tree made the repeated section a list, which the parser passed over: with "Attached GPUs" it read as "0
    GPU section(s) (output cut short?)", without it as no GPU at all, and every GPU setting and health line was
    silently gone from the checklist."""
    from bringup.facts.nvidia_list import LIST_MARK

    q = bundle()["raw"]["nvidia.query"]["output"]
    report, listed = q[:q.index(LIST_MARK)], q[q.index(LIST_MARK):]
    block = report[report.index("GPU 00000000"):]
    bad = block.replace("DRAM Uncorrectable                         : 0",
                        "DRAM Uncorrectable                         : 7", 1)
    text = report + bad + listed
    if not attached:
        text = text.replace("Attached GPUs", "Attached GPUx")
    checks, errors = checklist_of(raw_with(nvidia_query=text))
    assert errors == {"nvidia.query": "nvidia-smi -q: the section of GPU 00000000:00:06.0 is printed 2 times: not "
                                      "one report"}
    health = named(checks, "GPU health (ECC, memory repair, clocks, temperature, fabric)")
    assert [c.status for c in health] == ["WARN"] and "not checked: nvidia.query unreadable" in health[0].seen
    assert not [c for c in checks if c.name == "ECC errors"]


@pytest.mark.reliability(item=40, fault="nvidia-smi --query-gpu CSV that lost its header line (a GPU's row first)",
                         variants=1, checks=("one clear line",))
def test_a_gpu_row_without_its_header_is_named_never_read_as_no_driver():
    """Without a header the output was taken for nvidia-smi's error text: no GPU listed, no error, and the checklist
    blamed the driver ("driver sees the GPUs: nvidia-smi absent or printed nothing", "no driver loaded")."""
    csv_text = bundle()["raw"]["nvidia.smi"]["output"]
    checks, errors = checklist_of(raw_with(nvidia_smi=csv_text.split("\n", 1)[1]))
    assert errors["nvidia.smi"].startswith("nvidia-smi --query-gpu: a GPU's row without the header line naming its "
                                           "columns (output cut short?): '0, NVIDIA H200, GPU-"), errors
    assert not [c for c in checks if "no driver loaded" in c.seen or "absent or printed nothing" in c.seen]
    # nvidia-smi's own error text (no driver) is still no GPU list and no damage.
    assert parse_query_gpu_csv("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n") == []


TOPO_TWICE = {"a GPU row twice": ("GPU0\t X \t0-15\t0\t\tN/A\n", "GPU0\t X \t0-15\t0\t\tN/A\nGPU0\t X \t0-7\t1\t\tN/A\n",
                                  "nvidia-smi topo -m: row GPU0 is printed twice"),
              "a NUMA node's CPU list twice": ("node 0 0-15", "node 0 0-15\nnode 0 0-7",
                                               "nvidia-smi topo -m: NUMA node 0's CPU list is printed twice")}


@pytest.mark.reliability(item=40, fault="nvidia-smi topo -m with a GPU row, or a NUMA node's CPU list, printed twice "
                         "(the two disagreeing)", variants=len(TOPO_TWICE), checks=("one clear line",))
@pytest.mark.parametrize("old,new,said", TOPO_TWICE.values(), ids=TOPO_TWICE.keys())
def test_a_topology_row_printed_twice_is_named_never_last_or_first_wins(old, new, said):
    """The GPU row read last won (its CPUs and NUMA node planned from), the node's list read first won (the
    truncation check held the GPU's CPUs against it): one of two disagreeing answers, silently."""
    topo = bundle()["raw"]["nvidia.topo"]["output"]
    assert old in topo
    checks, errors = checklist_of(raw_with(nvidia_topo=topo.replace(old, new)))
    assert errors == {"nvidia.topo": said}
    assert [c.seen for c in named(checks, "NUMA alignment")] == ["not checked: nvidia.topo unreadable"]
