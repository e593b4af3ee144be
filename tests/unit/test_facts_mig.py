"""The MIG instance count (issue 21): ``nvidia.query`` reads ``nvidia-smi -L`` beside ``nvidia-smi -q``, and the
checklist's MIG line (a WARN) says how many MIG instances Triton will see.

The ``-L`` outputs are real public captures (``tests/fixtures/hosts/public/nvsmi-L-*``, sources in their
``# source:`` lines).  No public ``nvidia-smi -q`` of those hosts was found: where a test needs the two of one
host, it takes a stored ``-q`` capture and changes, in the test, its "MIG Mode / Current" to Enabled and its GPU
UUIDs to the ``-L`` capture's (the join key), and says so.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from bringup.facts import FACTS_BY_NAME
from bringup.facts.gather import fact_snippet, load_facts, parse_raw
from bringup.facts.nvidia import NvidiaQuery
from bringup.facts.nvidia_list import LIST_MARK, parse_nvidia_query, parse_nvidia_smi_list
from bringup.facts.nvidia_q import parse_nvidia_smi_q
from harness.captures import strip_comments

from .fixture_hosts import FIX

REPO = Path(__file__).resolve().parents[2]
PUB = FIX / "public"
ONE_A100_7MIG = PUB / "nvsmi-L-a100sxm80-7mig-drv535.txt"
FOUR_A100_1MIG = PUB / "nvsmi-L-4xa100sxm80-1mig4.txt"


def listing(path: Path) -> str:
    return strip_comments(path.read_text()) + "\n"


def as_host_of(q_text: str, list_text: str, mig_on: set[int]) -> str:
    """A stored ``nvidia-smi -q`` changed to be the ``-L`` capture's host: the n-th GPU section's UUID becomes
    the ``-L``'s n-th GPU UUID, and "MIG Mode / Current" is Enabled on the GPUs in ``mig_on`` (by position)."""
    uuids = re.findall(r"^GPU \d+: .*\(UUID: (GPU-[0-9a-f-]+)\)$", list_text, re.M)
    sections = re.split(r"(?m)^(?=GPU [0-9A-F]{8}:)", q_text)
    assert len(sections) - 1 == len(uuids), (len(sections) - 1, len(uuids))
    out = [sections[0]]
    for i, (sec, uuid) in enumerate(zip(sections[1:], uuids)):
        sec = re.sub(r"(GPU UUID\s+: )GPU-[0-9a-f-]+", lambda m: m.group(1) + uuid, sec, count=1)
        if i in mig_on:
            sec = re.sub(r"(MIG Mode\n\s+Current\s+: )Disabled", r"\1Enabled", sec, count=1)
        out.append(sec)
    return "".join(out)


def query_output(q_text: str, list_text: str) -> str:
    """What ``nvidia.query``'s command prints: the report, the mark, the list."""
    return q_text.rstrip("\n") + "\n\n" + LIST_MARK + "\n" + list_text


# ---------------------------------------------------------------- nvidia-smi -L

def test_list_one_a100_seven_mig_devices():
    (gpu,) = parse_nvidia_smi_list(listing(ONE_A100_7MIG))
    assert (gpu["index"], gpu["name"], gpu["uuid"]) == (0, "NVIDIA A100-SXM4-80GB",
                                                        "GPU-7fdaf0a5-179b-f636-d15d-daf243e3ff16")
    assert [d["index"] for d in gpu["mig_devices"]] == list(range(7))
    assert {d["profile"] for d in gpu["mig_devices"]} == {"1g.10gb"}
    assert gpu["mig_devices"][6]["uuid"] == "MIG-1aae4990-b962-574e-8375-119d6d9b9687"


def test_list_four_a100_mig_on_the_first_only():
    gpus = parse_nvidia_smi_list(listing(FOUR_A100_1MIG))
    assert [g["index"] for g in gpus] == [0, 1, 2, 3]
    assert [len(g["mig_devices"]) for g in gpus] == [4, 0, 0, 0]
    assert [d["profile"] for d in gpus[0]["mig_devices"]] == ["1g.20gb"] * 4


def test_list_cut_mid_line_leaves_that_gpus_count_unknown():
    """Cut inside the fourth MIG line (the bytes a dropped connection leaves): that GPU's count is unknown
    (None), never 3; a GPU listed whole before it keeps its count."""
    text = listing(FOUR_A100_1MIG)
    cut = text.index("  MIG 1g.20gb     Device  3:") + len("  MIG 1g.20gb     Dev")
    (gpu,) = parse_nvidia_smi_list(text[:cut])
    assert gpu["mig_devices"] is None
    two = "GPU 1: X (UUID: GPU-1)\n" + text[:cut]
    assert [g["mig_devices"] for g in parse_nvidia_smi_list(two)] == [[], None]


def test_list_errors_give_no_gpus():
    assert parse_nvidia_smi_list("") == []
    assert parse_nvidia_smi_list("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n") == []


# ---------------------------------------------------------------- nvidia.query: -q joined with -L

def test_query_joins_mig_devices_by_uuid():
    q = strip_comments((PUB / "nvsmi-q-4xa100sxm80-drv555.txt").read_text())
    text = listing(FOUR_A100_1MIG)
    value = parse_nvidia_query(query_output(as_host_of(q, text, {0}), text))
    gpus = value["gpus"]
    assert [g["mig_mode_current"] for g in gpus] == [True, False, False, False]
    assert [len(g["mig_devices"]) for g in gpus] == [4, 0, 0, 0]
    # The report itself is parsed as before: only mig_devices is added.
    before = parse_nvidia_smi_q(as_host_of(q, text, {0}))
    assert [{k: v for k, v in g.items() if k != "mig_devices"} for g in gpus] == before["gpus"]
    assert {k: v for k, v in value.items() if k != "gpus"} == {k: v for k, v in before.items() if k != "gpus"}


def test_query_without_the_list_has_no_count():
    """A ``-q`` alone (an output saved before, a vendor's capture): no GPU gets ``mig_devices``; a ``-L`` of other
    GPUs (no UUID in common) adds none either."""
    q = strip_comments((PUB / "nvsmi-q-4xa100sxm80-drv555.txt").read_text())
    assert not any("mig_devices" in g for g in parse_nvidia_query(q)["gpus"])
    other = parse_nvidia_query(query_output(q, listing(FOUR_A100_1MIG)))
    assert not any("mig_devices" in g for g in other["gpus"])
    assert parse_nvidia_query("") == {} == NvidiaQuery.default



# ---------------------------------------------------------------- the command, and the raw bundle to the checklist

H200_Q = FIX / "h200-vm" / "nvidia-smi-q.txt"


def fake_nvidia_smi(tmp_path: Path, q_text: str, list_text: str) -> dict[str, str]:
    """An ``nvidia-smi`` on PATH that prints the given ``-q`` and ``-L`` outputs (and the H200's query CSV):
    the environment of a child process that runs the fact's command."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "q.txt").write_text(q_text)
    (tmp_path / "L.txt").write_text(list_text)
    (bin_dir / "nvidia-smi").write_text(
        "#!/bin/sh\n"
        f'case "$*" in\n  -q) cat {tmp_path}/q.txt ;;\n  -L) cat {tmp_path}/L.txt ;;\n'
        f'  --query-gpu=*) cat {FIX}/h200-vm/nvidia-smi-query.csv ;;\n  *) exit 6 ;;\nesac\n')
    (bin_dir / "nvidia-smi").chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}


def h200_with_mig(list_path: Path) -> tuple[str, str]:
    """The H200's real ``-q`` as the host of a one-GPU ``-L`` capture (UUID, MIG Mode Current: Enabled)."""
    text = listing(list_path)
    return as_host_of(H200_Q.read_text(), text, {0}), text


def test_the_facts_command_prints_both_and_its_parser_counts(tmp_path):
    q, text = h200_with_mig(ONE_A100_7MIG)
    env = fake_nvidia_smi(tmp_path, q, text)
    r = subprocess.run(["sh", "-c", fact_snippet(NvidiaQuery)], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    assert LIST_MARK in r.stdout.splitlines()
    values, errors = parse_raw([FACTS_BY_NAME["nvidia.query"]], {"nvidia.query": {"rc": 0, "output": r.stdout}})
    (gpu,) = values["nvidia.query"]["gpus"]
    assert errors == {} and gpu["mig_mode_current"] is True and len(gpu["mig_devices"]) == 7


def invoke(*args, cwd, env=None):
    return subprocess.run([sys.executable, "-m", "invoke", "--search-root", str(REPO), *args], cwd=cwd,
                          capture_output=True, text=True, timeout=180, env=env)


MIG_LINE = ("| WARN | gpu | MIG instances | MIG on 1 GPU(s) (00000000:00:06.0): 7 MIG instance(s) (7 × 1g.10gb) "
            "| Triton sees each MIG instance as a GPU: gpu_profile h200 is sized for a whole GPU; define a "
            "profile for the slice under gpu_profiles, or nvidia-smi -mig 0 |")


def test_checklist_from_a_raw_bundle_warns_with_the_instance_count(tmp_path):
    """``invoke checklist --facts`` on a raw bundle (the shape ``invoke facts --raw`` writes): MIG mode stays a
    WARN, and the MIG line counts the instances from the bundle's ``nvidia-smi -L``."""
    h200 = FIX / "h200-vm"
    q, text = h200_with_mig(ONE_A100_7MIG)
    raw = {"cpu.topology": (h200 / "lscpu.txt").read_text(), "pci.devices": (h200 / "pci.txt").read_text(),
           "nvidia.smi": (h200 / "nvidia-smi-query.csv").read_text(), "nvidia.query": query_output(q, text)}
    (tmp_path / "hosts").write_text(yaml.safe_dump({"all": {"hosts": {"h": {"ansible_host": "127.0.0.1",
                                                                              "ansible_port": 9}}}}))
    (tmp_path / "raw.json").write_text(json.dumps({"host": "h", "raw": raw}))
    r = invoke("checklist", "--host", "h", "--facts", "raw.json", "--out", "pages", cwd=tmp_path)
    assert "Traceback" not in r.stderr, r.stderr
    md = (tmp_path / "pages" / "h.md").read_text()
    assert MIG_LINE in md, md
    assert re.search(r"\| WARN \| [^|]+ \| [^|]*MIG mode \| True \|", md), md
    # The same bundle with the -q alone (saved before this fact read -L): still the WARN, the count unknown.
    raw["nvidia.query"] = q
    (tmp_path / "raw.json").write_text(json.dumps({"host": "h", "raw": raw}))
    invoke("checklist", "--host", "h", "--facts", "raw.json", "--out", "pages", cwd=tmp_path)
    md = (tmp_path / "pages" / "h.md").read_text()
    assert "| WARN | gpu | MIG instances | MIG on 1 GPU(s) (00000000:00:06.0): the MIG instance count is not in " \
           "the facts |" in md, md


def test_invoke_facts_raw_carries_the_list_to_facts(tmp_path):
    """``invoke facts --raw`` on a host (this machine, with an ``nvidia-smi`` on PATH that prints the captures)
    saves the ``-L`` in ``nvidia.query``'s output, and a ``--facts`` file read back counts the instances."""
    q, text = h200_with_mig(ONE_A100_7MIG)
    env = fake_nvidia_smi(tmp_path, q, text)
    (tmp_path / "hosts").write_text(yaml.safe_dump({"all": {"hosts": {"me": {"ansible_connection": "local"}}}}))
    r = invoke("facts", "--host", "me", "--raw", cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    output = json.loads(r.stdout)["raw"]["nvidia.query"]["output"]
    assert output.splitlines()[-8:] == text.splitlines(), output[-800:]
    (tmp_path / "raw.json").write_text(r.stdout)
    facts, errors = load_facts(tmp_path / "raw.json", "me")
    (gpu,) = facts["nvidia.query"]["gpus"]
    assert "nvidia.query" not in errors and [d["index"] for d in gpu["mig_devices"]] == list(range(7))


# ---------------------------------------------------------------- -q without -L: its own "MIG Devices" (issue 34)

def mig_section(count: int, indent: str = "    ") -> str:
    """A GPU's ``MIG Devices`` section as ``nvidia-smi -q`` prints it (``MIG Devices``, then one ``MIG Device`` with
    its Index, GPU and Compute Instance IDs and attributes per device; the layout of nvidia-smi's XML
    ``mig_devices/mig_device``).  No public ``-q`` of a host with MIG devices was found: the section is written
    here, in the report's own indentation, and put into a real report."""
    out = [f"{indent}MIG Devices"]
    for i in range(count):
        out += [f"{indent}    MIG Device", f"{indent}        Index                             : {i}",
                f"{indent}        GPU Instance ID                   : {7 + i}",
                f"{indent}        Compute Instance ID               : 0",
                f"{indent}        Device Attributes",
                f"{indent}            Shared",
                f"{indent}                Multiprocessor count      : 16",
                f"{indent}        FB Memory Usage",
                f"{indent}            Total                         : 16128 MiB"]
    return "\n".join(out) + "\n"


def h200_q_with_mig_devices(count: int, cut: bool = False) -> str:
    """The H200's real ``nvidia-smi -q`` (no ``-L`` part) changed: MIG Mode Current Enabled and, after the Pending
    line, a ``MIG Devices`` section of ``count`` devices (``cut``: the last device's Index line dropped)."""
    q = H200_Q.read_text()
    q = re.sub(r"(MIG Mode\n\s+Current\s+: )Disabled", r"\1Enabled", q, count=1)
    section = mig_section(count)
    if cut:
        section = "\n".join(l for l in section.splitlines() if l.strip() != f"Index                             : {count - 1}") + "\n"
    head, tail = q.split("    Accounting Mode  ", 1)
    assert head.rstrip().endswith("Disabled")  # "Pending : Disabled": the section goes right after it
    return head + section + "    Accounting Mode  " + tail


@pytest.mark.reliability(item=34, fault="nvidia.query without its nvidia-smi -L part, MIG on", variants=2,
                         checks=("one clear line",))
def test_query_without_the_list_counts_the_mig_devices_of_q():
    from bringup.checklist.pages import gpu_checks

    from .fixture_hosts import h200_facts

    value = parse_nvidia_query(h200_q_with_mig_devices(7))
    (gpu,) = value["gpus"]
    assert gpu["mig_mode_current"] is True
    assert [d["index"] for d in gpu["mig_devices"]] == list(range(7))
    assert gpu["mig_devices"][0]["gpu_instance_id"] == 7 and gpu["mig_devices"][0]["profile"] is None
    (line,) = [c for c in gpu_checks({**h200_facts(), "nvidia.query": value}, {}) if c.name == "MIG instances"]
    assert "7 MIG instance(s)" in line.seen and "not in the facts" not in line.seen, line
    # A device cut from the section (its Index gone): the count is unknown, never 6.
    (cut,) = parse_nvidia_query(h200_q_with_mig_devices(7, cut=True))["gpus"]
    assert cut["mig_devices"] is None
    (line,) = [c for c in gpu_checks({**h200_facts(), "nvidia.query": {"gpus": [cut]}}, {})
               if c.name == "MIG instances"]
    assert line.seen.startswith("not checked: nvidia.query's MIG devices unreadable: ") and "6 MIG" not in line.seen
    # The -L part, where there, still names the profiles; MIG off prints no section: no mig_devices.
    assert "mig_devices" not in parse_nvidia_query(H200_Q.read_text())["gpus"][0]
