"""MIG on and no ``nvidia-smi -L`` part (issue 41 item 4): the MIG instance count comes from the MIG devices that
``nvidia-smi -q`` lists, read from real captures, and a damaged output is named unreadable, never counted short.

The captures are real (``tests/fixtures/hosts/public/nvsmi-q-h100-mig4-drv590.txt`` and ``-h200-mig5-``, with
the ``-L`` of the same hosts; sources in their ``# source:`` lines): driver 590 prints each ``MIG Device`` straight
under the GPU, after ``MIG Mode``, with no ``MIG Devices`` heading, which the parser did not read before (the count
was "not in the facts").  The damaged variants are made here from those files, each saying what it changed.
"""
from __future__ import annotations

import pytest

from bringup.checklist.pages import gpu_checks
from bringup.facts import FACTS_BY_NAME
from bringup.facts.gather import parse_raw
from bringup.facts.nvidia_list import LIST_MARK, parse_nvidia_query
from harness.captures import strip_comments

from .fixture_hosts import FIX, h200_facts

PUB = FIX / "public"
H100_Q, H100_L = PUB / "nvsmi-q-h100-mig4-drv590.txt", PUB / "nvsmi-L-h100-mig4-drv590.txt"
H200_Q, H200_L = PUB / "nvsmi-q-h200-mig5-drv590.txt", PUB / "nvsmi-L-h200-mig5-drv590.txt"


def text(path) -> str:
    return strip_comments(path.read_text())


def with_list(q: str, listing: str) -> str:
    """What ``nvidia.query``'s command prints: the report, the mark, the list."""
    return q.rstrip("\n") + "\n\n" + LIST_MARK + "\n" + listing


def mig_line(query_value: dict, errors: dict | None = None):
    (line,) = [c for c in gpu_checks({**h200_facts(), "nvidia.query": query_value}, {}, errors)
               if c.name == "MIG instances"]
    return line


def read(output: str) -> tuple[dict, dict]:
    """``output`` through the gathering's own reading (undecodable bytes, empty output, the parser), beside a
    ``nvidia.smi`` that answered (the real H200 VM's query CSV: nvidia-smi is there, so an empty ``-q`` is lost)."""
    raw = {"nvidia.smi": {"rc": 0, "output": (FIX / "h200-vm" / "nvidia-smi-query.csv").read_text()},
           "nvidia.query": {"rc": 0, "output": output}}
    values, errors = parse_raw([FACTS_BY_NAME["nvidia.smi"], FACTS_BY_NAME["nvidia.query"]], raw)
    assert "nvidia.smi" not in errors
    return values["nvidia.query"], errors


@pytest.mark.parametrize(("q", "gi_ids", "ci_ids"), [(H100_Q, [2, 3, 9, 10], [0, 0, 0, 0]),
                                                     (H200_Q, [2, 2, 3, 9, 10], [0, 1, 0, 0, 0])])
def test_real_q_without_the_list_counts_its_mig_devices(q, gi_ids, ci_ids):
    value, errors = read(text(q))
    (gpu,) = value["gpus"]
    assert errors == {} and gpu["mig_mode_current"] is True
    assert [d["index"] for d in gpu["mig_devices"]] == list(range(len(gi_ids)))
    assert [d["gpu_instance_id"] for d in gpu["mig_devices"]] == gi_ids
    assert [d["compute_instance_id"] for d in gpu["mig_devices"]] == ci_ids
    line = mig_line(value)
    assert line.status == "WARN" and f": {len(gi_ids)} MIG instance(s) | " in f"{line.seen} | ", line
    assert "not in the facts" not in line.seen and "not checked" not in line.seen


def test_real_q_with_its_list_names_the_profiles():
    value, errors = read(with_list(text(H100_Q), text(H100_L)))
    (gpu,) = value["gpus"]
    assert errors == {}
    assert [(d["profile"], d["gpu_instance_id"]) for d in gpu["mig_devices"]] == [
        ("3g.40gb", 2), ("2g.20gb", 3), ("1g.10gb", 9), ("1g.10gb", 10)]
    assert "4 MIG instance(s) (2 × 1g.10gb, 1 × 2g.20gb, 1 × 3g.40gb)" in mig_line(value).seen


@pytest.mark.reliability(item=41, fault="MIG on, nvidia-smi -L part cut, garbled or failed beside a whole -q",
                         variants=4, checks=("one clear line",))
def test_a_damaged_list_part_never_counts_short():
    q, listing = text(H200_Q), text(H200_L)
    # -L cut at a line boundary after 2 of its 5 MIG lines (a whole-looking list): -q's 5 disagree, unreadable.
    cut = "\n".join(listing.splitlines()[:3]) + "\n"
    value, _ = read(with_list(q, cut))
    line = mig_line(value)
    assert line.seen.startswith("not checked: nvidia.query's MIG devices unreadable: nvidia-smi -L lists 2 MIG "
                                "device(s) of GPU 00000000:83:00.0, nvidia-smi -q 5"), line
    assert "2 MIG instance(s)" not in line.seen and line.status == "WARN"
    # -L cut mid-line (a garbled MIG line), or -L failed (NVML's error, no GPU line): -q's own 5 devices count.
    mid = listing[:listing.index("Device  3:") + 4]
    for part in (mid, "Failed to initialize NVML: Unknown Error\n", ""):
        value, errors = read(with_list(q, part))
        assert errors == {} and "5 MIG instance(s)" in mig_line(value).seen, part


def cut_in_the_mig_section(q: str) -> str:
    """The report cut inside its last MIG device, mid-line, as a dropped connection leaves it."""
    at = q.rindex("Compute Instance ID")
    return q[:at + len("Compute Inst")]


@pytest.mark.reliability(item=41, fault="MIG on, nvidia-smi -q cut in, emptied or garbled in its MIG devices, "
                         "no -L part", variants=6, checks=("one clear line",))
@pytest.mark.parametrize("damage", ["cut-mid-mig", "cut-mid-mig-with-list", "empty", "not-utf8", "index-garbled",
                                    "index-twice"])
def test_a_damaged_q_is_named_unreadable_never_a_count(damage):
    q = text(H100_Q)
    if damage == "cut-mid-mig":
        output = cut_in_the_mig_section(q)
    elif damage == "cut-mid-mig-with-list":  # nvidia-smi -q itself stopped short; -L answered after it
        output = with_list(cut_in_the_mig_section(q), text(H100_L))
    elif damage == "empty":
        output = ""
    elif damage == "not-utf8":  # one byte of the third device's GPU Instance ID garbled (not UTF-8)
        at = q.index("GPU Instance ID                                : 9")
        output = q[:at] + "GPU Instance ID                                : \udcff9" + q[at + 50:]
    elif damage == "index-garbled":  # the last device's Index no whole number
        output = q.replace("Index                                          : 3",
                           "Index                                          : 3x")
    else:  # the last device's Index repeats the third's
        output = q.replace("Index                                          : 3",
                           "Index                                          : 2")
    assert output != q
    value, errors = read(output)
    line = mig_line(value, errors)
    assert line.status == "WARN" and line.seen.startswith("not checked: nvidia.query"), (damage, line)
    assert "MIG instance(s)" not in line.seen
    if damage in ("index-garbled", "index-twice"):
        # The rest of the report is whole: only the MIG count is unreadable, and says where.
        assert errors == {}
        assert "GPU 00000000:00:09.0: MIG Device: MIG device" in line.seen, line
        assert ("no whole-number Index" if damage == "index-garbled" else "Index 2 twice") in line.seen
    else:
        assert "nvidia.query unreadable" in line.seen and errors["nvidia.query"], errors


def test_q_heading_form_and_no_devices():
    """The other form the parser reads, a ``MIG Devices`` heading, and MIG on with no instance created: a
    heading ``MIG Devices : None`` is 0 instances; MIG on with no device in -q and no -L is not a count."""
    q = text(H100_Q)
    head, rest = q.split("    MIG Device\n", 1)
    devices, tail = rest.split("    Accounting Mode ", 1)
    indented = "".join("    " + l if l.strip() else l for l in ("    MIG Device\n" + devices).splitlines(True))
    (gpu,) = parse_nvidia_query(head + "    MIG Devices\n" + indented + "    Accounting Mode " + tail)["gpus"]
    assert [d["gpu_instance_id"] for d in gpu["mig_devices"]] == [2, 3, 9, 10]
    none = head + "    MIG Devices                                        : None\n    Accounting Mode " + tail
    (gpu,) = parse_nvidia_query(none)["gpus"]
    assert gpu["mig_devices"] == [] and "0 MIG instance(s)" in mig_line({"gpus": [gpu]}).seen
    (gpu,) = parse_nvidia_query(head + "    Accounting Mode " + tail)["gpus"]
    assert "mig_devices" not in gpu
    assert "the MIG instance count is not in the facts" in mig_line({"gpus": [gpu]}).seen
