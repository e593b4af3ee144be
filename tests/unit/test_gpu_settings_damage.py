"""The platform's GPU setting lines (BAR1 against memory, PCIe generation and width, persistence, ECC and MIG mode) on
a damaged ``nvidia-smi -q`` (the H200 VM's real raw bundle, one value changed, as ``checklist --facts FILE`` reads it)
and on a saved ``--facts`` file holding values no GPU gives: a value that is no reading (``Gen99``, a ``999x`` link,
``-1 MiB``, ``NaN``, ``1e308``, empty, 40 digits, a word nvidia-smi never prints there) is a WARN "not checked" naming
the field and the value, never a PASS and never a line that vanishes; ``N/A``, which nvidia-smi prints for a setting
the part does not have (ECC on a GeForce, MIG on an L40S: ``tests/fixtures/hosts/public/nvsmi-q-l40s.txt``), keeps its
meaning (no line)."""
from __future__ import annotations

import copy
import json
import re

import pytest

from bringup.checklist.pages import collect
from bringup.facts import FACTS_BY_NAME
from bringup.facts.gather import load_facts, parse_raw
from bringup.facts.nvidia_q import parse_nvidia_smi_q
from bringup.hardware.platform import checks

from .h200_offline import BUNDLE

VARS = {"gpu_profile": "auto", "inventory_hostname": "h200-vm"}
GPU = "GPU 00000000:00:06.0"
QUERY = json.loads(BUNDLE.read_text())["raw"]["nvidia.query"]["output"]


def with_value(key: str, value: str, nth: int = 1) -> str:
    """The H200's ``nvidia.query`` output with the ``nth`` leaf named ``key`` printing ``value``."""
    found = list(re.finditer(r"^(\s*" + re.escape(key) + r"\s+: )(.*)$", QUERY, re.M))[nth - 1]
    return QUERY[:found.start(2)] + value + QUERY[found.end(2):]


#: Where each value is in the H200's ``nvidia-smi -q``: (leaf, which of the leaves of that name) and the line it feeds.
WHERE = {
    "PCIe Generation Current": (("Current", 4), "PCIe generation"),
    "Link Width Current": (("Current", 5), "PCIe link width"),
    "BAR1 Memory Usage Total": (("Total", 2), "BAR1 covers GPU memory"),
    "FB Memory Usage Total": (("Total", 1), "BAR1 covers GPU memory"),
    "Persistence Mode": (("Persistence Mode", 1), "persistence mode"),
    "MIG Mode Current": (("Current", 1), "MIG mode"),
    "ECC Mode Current": (("Current", 7), "ECC"),
}


def h200_lines(query: str) -> dict:
    raw = copy.deepcopy(json.loads(BUNDLE.read_text())["raw"])
    raw["nvidia.query"]["output"] = query
    values, errors = parse_raw(list(FACTS_BY_NAME.values()), raw)
    return {c.name: c for c in collect(values, VARS, None, errors)}


def test_the_unchanged_h200_passes_every_setting():
    lines = h200_lines(QUERY)
    for check in {line for _, line in WHERE.values()}:
        assert lines[f"{GPU} {check}"].status == "PASS", lines[f"{GPU} {check}"]


@pytest.mark.parametrize("field, value", [
    ("PCIe Generation Current", "99"), ("PCIe Generation Current", "0"), ("PCIe Generation Current", "NaN"),
    ("PCIe Generation Current", "1e308"), ("PCIe Generation Current", ""), ("PCIe Generation Current", "9" * 40),
    ("Link Width Current", "999x"), ("Link Width Current", "0x"), ("Link Width Current", "NaNx"),
    ("Link Width Current", "1e308x"), ("Link Width Current", ""), ("Link Width Current", "16"),
    ("BAR1 Memory Usage Total", "NaN MiB"), ("BAR1 Memory Usage Total", "1e308 MiB"),
    ("BAR1 Memory Usage Total", "9" * 30 + " MiB"), ("BAR1 Memory Usage Total", ""), ("BAR1 Memory Usage Total", "0 MiB"),
    ("FB Memory Usage Total", "-1 MiB"), ("FB Memory Usage Total", "NaN MiB"), ("FB Memory Usage Total", "0 MiB"),
    ("FB Memory Usage Total", "17179869184 MiB"), ("FB Memory Usage Total", ""),
    ("Persistence Mode", "Maybe"), ("Persistence Mode", ""), ("Persistence Mode", "1"), ("Persistence Mode", "NaN"),
    ("MIG Mode Current", "Maybe"), ("MIG Mode Current", ""), ("ECC Mode Current", "Maybe"), ("ECC Mode Current", ""),
    ("Persistence Mode", "Enabled\x1b[2J"),
])
def test_a_setting_that_is_no_reading_is_not_checked_naming_field_and_value(field, value):
    (leaf, nth), check = WHERE[field]
    got = h200_lines(with_value(leaf, value, nth))[f"{GPU} {check}"]
    assert (got.status, got.seen) == ("WARN", f"not checked: nvidia.query unreadable: {field} {value[:40]!r}"
                                      .replace("\x1b", "\\x1b"))
    assert got.subject == GPU and "read the host again" in got.fix


@pytest.mark.parametrize("field, value, seen", [
    # Above its Max: no link runs faster or wider than it can (Max 5, Max 16x on this H200).
    ("PCIe Generation Current", "6", "PCIe Generation Current '6' above Max '5'"),
    ("Link Width Current", "32x", "Link Width Current '32x' above Max '16x'"),
])
def test_a_link_above_its_max_is_not_checked(field, value, seen):
    (leaf, nth), check = WHERE[field]
    got = h200_lines(with_value(leaf, value, nth))[f"{GPU} {check}"]
    assert (got.status, got.seen) == ("WARN", f"not checked: nvidia.query unreadable: {seen}")


@pytest.mark.parametrize("field, value, status, seen", [
    ("PCIe Generation Current", "4", "WARN", "Gen4 of Gen5"),
    ("Link Width Current", "8x", "FAIL", "x8 of x16"),
    ("Persistence Mode", "Disabled", "WARN", "False"),
    ("ECC Mode Current", "Disabled", "WARN", "False"),
    ("MIG Mode Current", "Enabled", "WARN", "True"),
])
def test_a_real_reading_keeps_its_verdict(field, value, status, seen):
    (leaf, nth), check = WHERE[field]
    got = h200_lines(with_value(leaf, value, nth))[f"{GPU} {check}"]
    assert (got.status, got.seen) == (status, seen)


@pytest.mark.parametrize("field", ["Persistence Mode", "MIG Mode Current", "ECC Mode Current"])
def test_n_a_is_a_part_without_the_setting_no_line(field):
    (leaf, nth), check = WHERE[field]
    lines = h200_lines(with_value(leaf, "N/A", nth))
    assert f"{GPU} {check}" not in lines
    assert not [c for c in lines.values() if "unreadable" in c.seen]


def test_an_unreadable_ecc_mode_is_never_no_ecc_on_this_part():
    # ECC Mode 'Maybe' and every counter N/A: whether the part has ECC is not known.
    query = with_value("Current", "Maybe", 7)
    query = re.sub(r"^(\s*(?:SRAM|DRAM) [A-Za-z -]+?\s+: )0$", r"\1N/A", query, flags=re.M)
    got = h200_lines(query)["ECC errors"]
    assert (got.status, got.seen) == ("WARN", "not checked: nvidia.query unreadable: ECC Mode Current 'Maybe'")


@pytest.mark.parametrize("key, value", [
    ("pcie_gen_current", 99), ("pcie_gen_current", 4.0), ("pcie_gen_current", "5"), ("pcie_gen_current", True),
    ("pcie_width_current", 999), ("pcie_width_current", 3), ("fb_total_mib", -1), ("bar1_total_mib", 0),
    ("fb_total_mib", 16 * 1024 ** 2), ("persistence_mode", "Maybe"), ("ecc_mode_current", 1), ("mig_mode_current", "N/A"),
])
def test_a_saved_facts_file_value_out_of_range_is_not_checked(tmp_path, key, value):
    """A ``--facts`` file of parsed facts hands values over typed, past the parser: held to the same ranges."""
    facts, errors = load_facts(BUNDLE, "h200-vm")
    saved = {**facts, "nvidia.query": {**facts["nvidia.query"], "gpus": [
        {**facts["nvidia.query"]["gpus"][0], key: value}]}}
    path = tmp_path / "facts.json"
    path.write_text(json.dumps({"host": "h200-vm", "facts": saved}))
    facts, errors = load_facts(path, "h200-vm")
    check = {"pcie_gen_current": "PCIe generation", "pcie_width_current": "PCIe link width",
             "fb_total_mib": "BAR1 covers GPU memory", "bar1_total_mib": "BAR1 covers GPU memory",
             "persistence_mode": "persistence mode", "ecc_mode_current": "ECC", "mig_mode_current": "MIG mode"}[key]
    got = {c.name: c for c in checks(facts, {}, errors)}[f"{GPU} {check}"]
    assert (got.status, got.seen) == ("WARN", f"not checked: nvidia.query unreadable: {key} {value!r}"[:119])


def test_saved_link_above_its_max_is_not_checked():
    g = {"bus_id": "00000000:01:00.0", "pcie_gen_current": 5, "pcie_gen_max": 4, "pcie_width_current": 16,
         "pcie_width_max": 8}
    cs = {c.name: c for c in checks({"nvidia.query": {"gpus": [g]}})}
    assert cs["GPU 00000000:01:00.0 PCIe generation"].seen == \
        "not checked: nvidia.query unreadable: pcie_gen_current 5 above pcie_gen_max 4"
    assert cs["GPU 00000000:01:00.0 PCIe link width"].seen == \
        "not checked: nvidia.query unreadable: pcie_width_current 16 above pcie_width_max 8"
    assert {c.status for c in cs.values()} == {"WARN"}


def test_the_parser_reads_the_settings_strictly():
    q = parse_nvidia_smi_q(with_value("Current", "99", 4).split("\n--- nvidia-smi -L")[0])
    (g,) = q["gpus"]
    assert g["pcie_gen_current"] is None and g["pcie_gen_max"] == 5
    assert g["settings_unreadable"] == {"pcie_generation": ["PCIe Generation Current '99'"]}
    # Printed twice (a section of a merged report): no value, named.
    twice = with_value("Persistence Mode", "Enabled\n    Persistence Mode                    : Disabled")
    (g,) = parse_nvidia_smi_q(twice.split("\n--- nvidia-smi -L")[0])["gpus"]
    assert g["persistence_mode"] is None and g["settings_unreadable"] == {"persistence": ["Persistence Mode printed twice"]}
