"""Issue 34 item 14: inputs that hung.  A ``gpu_profiles`` name regex with nested repeats against a long GPU name
ran 90 s until killed; a raw ``nvidia-smi -q`` with a line of 10,000 blanks, or 5,000 nesting levels, ran over
240 s (the tree parser's line regex was cubic in a line's blanks).

Each input is built here from a real output (the H200 VM's ``nvidia-smi -q`` and ``--query-gpu`` CSV,
tests/fixtures/hosts/h200-vm/, unedited), damaged as said at each test; each must simply finish (modest sizes,
no timing: before the fix the blank line alone took seconds at 2,000 blanks and grew with their cube).
"""
from __future__ import annotations

import pytest

from bringup import regexes
from bringup.facts.base import UntrustedOutput
from bringup.facts.gather import parse_raw
from bringup.facts.nvidia import NvidiaQuery
from bringup.facts.nvidia_csv import parse_query_gpu_csv
from bringup.facts.nvidia_q import parse_nvidia_smi_q
from bringup.hardware.gpu_profiles import Match, matches

from .fixture_hosts import FIX

Q = (FIX / "h200-vm" / "nvidia-smi-q.txt").read_text()
SMI = parse_query_gpu_csv((FIX / "h200-vm" / "nvidia-smi-query.csv").read_text())[0]


@pytest.mark.reliability(item=34, fault="raw nvidia-smi -q with a line of 10,000 blanks", variants=3,
                         checks=("no hang",))
@pytest.mark.parametrize("where", ["leading", "inside a key", "before the colon"])
def test_a_line_of_many_blanks_is_read_in_linear_time(where):
    line = {"leading": " " * 10_000 + "Product Brand x",
            "inside a key": "    Product" + " " * 10_000 + "Brand x",
            "before the colon": "    Product Brand" + " " * 10_000 + ": x"}[where]
    # Inserted after the first GPU's "Product Name" line of the real report.
    at = Q.index("\n", Q.index("Product Name")) + 1
    got = parse_nvidia_smi_q(Q[:at] + line + "\n" + Q[at:])
    want = parse_nvidia_smi_q(Q)
    assert got["gpus"][0]["product_name"] == want["gpus"][0]["product_name"] == "NVIDIA H200"
    assert got["driver_version"] == want["driver_version"]


@pytest.mark.reliability(item=34, fault="raw nvidia-smi -q nested 5,000 levels deep", checks=("no hang",))
def test_sections_nested_beyond_any_report_are_refused_by_name():
    deep = "".join(" " * i + f"Section {i}\n" for i in range(5_000))
    at = Q.index("\n", Q.index("Product Name")) + 1
    with pytest.raises(UntrustedOutput, match="nested deeper than 32 levels"):
        parse_nvidia_smi_q(Q[:at] + deep + Q[at:])
    # Through the gatherer, as `facts --raw` reads it back: one named error, never a RecursionError.
    values, errors = parse_raw([NvidiaQuery], {"nvidia.query": {"rc": 0, "output": Q[:at] + deep + Q[at:]}})
    assert errors["nvidia.query"].startswith("nvidia-smi -q: sections nested deeper than 32 levels")
    assert values["nvidia.query"] == NvidiaQuery.default


def test_the_linear_reader_reads_the_real_report_as_before():
    got = parse_nvidia_smi_q(Q)
    assert got["driver_version"] == "580.159.04" and got["gpus"][0]["bus_id"] == "00000000:00:06.0"
    assert got["gpus"][0]["bar1_total_mib"] == 262144


@pytest.mark.reliability(item=34, fault="gpu_profiles name regex that backtracks without end against a long GPU name",
                         variants=3, checks=("no hang",))
@pytest.mark.parametrize("pattern", [r"(a|aa)*c", r"\s*\s*\s*\s*\s*\s*\s*x", r"(?:H|H)*(?:H|H)*(?:H|H)*y"])
def test_a_name_match_runs_in_bounded_time_on_a_long_name(pattern):
    # Python's re backtracks on each of these for hours; none repeats a repeated part, so they are taken.
    assert regexes.problem(pattern) is None
    gpu = {**SMI, "name": SMI["name"] + " " + "a" * 10_000 + " " * 5_000 + "H" * 5_000}
    assert matches(Match(name=pattern), gpu) is False
    assert matches(Match(name=r"\bH200\b"), gpu) is True  # the real name still matches


@pytest.mark.parametrize("pattern,why", [
    ("(a+)+$", "repeats a repeated part"),
    (r"(\w+\s?)*H200", "repeats a repeated part"),
    ("H" * 257, "is 257 characters; at most 256 are taken"),
    ("H200(", "is not a regular expression"),
    (".{99999999}", "repeats a part 99,999,999 times; at most 256"),  # 18 GB to compile: refused unread
    ("H(?<=a{300})", "repeats a part 300 times; at most 256"),
])
def test_what_the_inventory_may_write_is_checked_where_it_is_read(pattern, why):
    assert regexes.problem(pattern).startswith(why)
    with pytest.raises(ValueError, match=why.replace("(", r"\(")):
        Match(name=pattern)
