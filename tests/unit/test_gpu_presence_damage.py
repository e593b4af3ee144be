"""The GPU-presence and driver lines on damaged or faulty nvidia-smi and sysfs outputs (the H200 VM's real raw bundle,
one output changed): a GPU that nvidia-smi cannot reach is a GPU fault, never "install a driver"; a cut PCI listing is
"not checked", never "seat the GPUs"."""
from __future__ import annotations

import json
import re

import pytest

from bringup.checklist.pages import collect, role_checks
from bringup.engine.roles import load_roles
from bringup.facts.gather import load_facts

from .h200_offline import BUNDLE, REPO

ROLES = load_roles(REPO)[1]
LOST = "Unable to determine the device handle for GPU0000:00:06.0: Unknown Error\n"


def h200_lines(tmp_path, **raw: str) -> list:
    """Every checklist line of the H200 VM (``gpu_profile: h200``, the driver and Triton roles) with the raw outputs
    ``raw`` (``nvidia_query=...``) in place of the captured ones."""
    doc = json.loads(BUNDLE.read_text())
    for name, output in raw.items():
        doc["raw"][name.replace("_", ".", 1)] = {"rc": 0, "output": output}
    path = tmp_path / "raw.json"
    path.write_text(json.dumps(doc))
    facts, errors = load_facts(path, "h200-vm")
    roles = [ROLES["nvidia_driver"], ROLES["triton"]]
    vars = {**ROLES["nvidia_driver"].defaults, **ROLES["triton"].defaults, "gpu_profile": "h200", "gpu_count": 1}
    return collect(facts, vars, None, errors, role_checks(roles, "h200-vm", facts, vars, None, errors))


def by_name(lines, name: str):
    (found,) = [l for l in lines if l.name == name]
    return found


@pytest.mark.parametrize("said, seen", [
    (LOST, "nvidia-smi cannot reach GPU 0000:00:06.0: Unknown Error"),
    ("No devices were found\n", "nvidia-smi: No devices were found"),
], ids=["device-handle", "no-devices"])
def test_a_gpu_nvidia_smi_cannot_reach_is_a_gpu_fault_not_install_a_driver(tmp_path, said, seen):
    lines = h200_lines(tmp_path, nvidia_smi=said, nvidia_query=said + "\n--- nvidia-smi -L\n" + said)
    sees = by_name(lines, "driver sees the GPUs")
    assert (sees.status, sees.seen) == ("FAIL", seen + " (driver 580.159.04 loaded)")
    assert "not a missing driver" in sees.fix and "reset the GPU" in sees.fix and "install" not in sees.fix
    drv = by_name(lines, "driver version")
    assert (drv.status, drv.seen) == ("WARN", f"not checked: {seen} (driver 580.159.04 loaded)")
    assert "do not install another" in drv.fix
    assert not [l for l in lines if "install a driver" in l.fix or "branch 550" in l.fix]
    # The GPU's own lines: not checked, named, never gone.
    health = by_name(lines, "health (ECC, memory repair, clocks, temperature)")
    assert (health.status, health.subject) == ("WARN", "GPU 0000:00:06.0") and health.seen.startswith("not checked: ")
    settings = by_name(lines, "GPU 0000:00:06.0 settings (BAR1, PCIe link, persistence, ECC, MIG mode)")
    assert settings.status == "WARN" and settings.seen.startswith("not checked: ")


def test_only_nvidia_smi_q_failing_leaves_the_gpus_health_not_checked_not_gone(tmp_path):
    lines = h200_lines(tmp_path, nvidia_query=LOST)
    health = by_name(lines, "health (ECC, memory repair, clocks, temperature)")
    assert (health.status, health.seen) == ("WARN", "not checked: nvidia-smi cannot reach GPU 0000:00:06.0: Unknown Error")
    assert [l.status for l in lines if l.subject == "GPU 0000:00:06.0"] == ["WARN", "WARN"]


@pytest.mark.parametrize("said", [
    LOST,
    # The header, then the error in place of the GPU's row.
    "index, name, uuid, pci.bus_id, driver_version, memory.total [MiB], persistence_mode, power.limit [W], "
    "clocks.max.sm [MHz], compute_cap\n" + LOST,
], ids=["alone", "after-the-header"])
def test_only_the_query_output_saying_it_cannot_reach_a_gpu_names_nvidia_smis_error(tmp_path, said):
    # nvidia-smi -q answered (the GPU, its values), --query-gpu printed the device-handle error: a GPU fault in
    # nvidia-smi's words, never "listed no GPU", "absent or printed nothing" or "install the driver".
    lines = h200_lines(tmp_path, nvidia_smi=said)
    words = "nvidia-smi --query-gpu cannot reach GPU 0000:00:06.0: Unknown Error"
    sees = by_name(lines, "driver sees the GPUs")
    assert (sees.status, sees.seen) == ("FAIL", words + " (driver 580.159.04 loaded)")
    assert "not a missing driver" in sees.fix and "reset the GPU" in sees.fix
    drv = by_name(lines, "driver version")
    assert (drv.status, drv.seen) == ("WARN", f"not checked: {words} (driver 580.159.04 loaded)")
    assert "do not install another" in drv.fix
    fact = by_name(lines, "fact nvidia.smi")
    assert (fact.status, fact.seen) == ("FAIL", "nvidia-smi --query-gpu: nvidia-smi cannot reach GPU 0000:00:06.0: "
                                                "Unknown Error")
    assert "not a missing driver" in fact.fix
    assert not [l for l in lines if "listed no GPU" in l.seen or "printed nothing" in l.seen
                or "install a driver" in l.fix or "install the driver" in l.fix]


def _pci_real() -> str:
    return json.loads(BUNDLE.read_text())["raw"]["pci.devices"]["output"]


@pytest.mark.parametrize("damage", ["cut-before-gpu", "cut-in-gpu-line", "error-text", "error-then-end"])
def test_a_cut_or_garbled_pci_listing_is_not_checked_never_seat_the_gpus(tmp_path, damage):
    real = _pci_real()
    at = real.index("0000:00:06.0")
    output = {"cut-before-gpu": real[:at], "cut-in-gpu-line": real[:at + 20],
              "error-text": "ls: cannot access /sys/bus/pci/devices: Input/output error\n",
              "error-then-end": "ls: cannot access /sys/bus/pci/devices: Input/output error\nend=pci\n"}[damage]
    lines = h200_lines(tmp_path, pci_devices=output)
    assert not [l for l in lines if l.name == "GPUs present" or "seat the GPUs" in l.fix]
    fact = by_name(lines, "fact pci.devices")
    assert fact.status == "FAIL"
    assert ("no device line" in fact.seen) if damage == "error-then-end" else ("ends before its last line 'end=pci'"
                                                                                in fact.seen)
    count = by_name(lines, "GPU count")
    assert (count.status, count.seen) == ("WARN", "not checked: pci.devices unreadable (nvidia-smi lists 1 GPU(s))")


def test_the_whole_pci_listing_is_read_as_before(tmp_path):
    lines = h200_lines(tmp_path, pci_devices=_pci_real())
    assert (by_name(lines, "GPU count").status, by_name(lines, "GPU count").seen) == \
        ("PASS", "1 on the PCI bus: 0000:00:06.0")


def _q_with(**values: str) -> str:
    """The H200's nvidia-smi -q with the first ``Key : value`` of each key (``Fabric State`` as ``State``) set."""
    import re

    q = json.loads(BUNDLE.read_text())["raw"]["nvidia.query"]["output"]
    for key, value in values.items():
        key = key.replace("_", " ")
        m = re.search(r"^(\s*" + re.escape(key) + r"\s+: )(.*)$", q, re.M)
        q = q[:m.start(2)] + value + q[m.end(2):]
    return q


@pytest.mark.parametrize("state, status", [("In Progress", "N/A"), ("Not Started", "N/A"),
                                           ("Completed", "Insufficient Resources")])
def test_a_passthrough_vm_whose_fabric_is_not_up_is_not_told_to_install_fabric_manager(tmp_path, state, status):
    lines = h200_lines(tmp_path, nvidia_query=_q_with(State=state, Status=status, Virtualization_Mode="Pass-Through"))
    assert not [l for l in lines if l.name == "Fabric Manager version"]
    fm = by_name(lines, "Fabric Manager")
    assert fm.status == "WARN" and fm.seen.startswith("none to install here: a pass-through VM with no NVSwitch")
    assert "hypervisor host's operator" in fm.fix and "install Fabric Manager" not in fm.fix


@pytest.mark.parametrize("edit", ["default-na", "draw-zero"])
def test_an_idle_gpu_under_sw_power_cap_is_not_told_to_raise_its_limit(edit):
    # The public 10x A40 capture (P8, 29.7 W of a 300 W limit, SW Power Cap Active), one reading changed.
    import re

    from bringup.facts.nvidia_q import parse_nvidia_smi_q
    from bringup.hardware.health import gpu_health_checks

    from .fixture_hosts import FIX

    text = "".join(l for l in (FIX / "public" / "nvsmi-q-10xa40-idle-swpowercap-drv550.txt").read_text()
                   .splitlines(keepends=True) if not l.startswith("#"))
    text = {"default-na": lambda t: re.sub(r"(Default Power Limit\s+: )[0-9.]+ W", r"\g<1>N/A", t),
            "draw-zero": lambda t: re.sub(r"(Power Draw\s+: )[0-9.]+ W", r"\g<1>0.00 W", t)}[edit](text)
    lines = [l for l in gpu_health_checks({"nvidia.query": parse_nvidia_smi_q(text)})
             if l.name == "clock event reasons" and "SW power cap" in l.seen]
    assert lines and all(l.status == "PASS" and "the cap holds nothing now" in l.seen and not l.fix for l in lines)


@pytest.mark.parametrize("state, status", [("Completed", "Success"), ("In Progress", "N/A")])
@pytest.mark.parametrize("damage", ["cut-before-gpu", "error-text"])
def test_a_passthrough_vm_with_its_pci_listing_unreadable_claims_nothing_of_its_bus(tmp_path, state, status, damage):
    # The pass-through VM's Fabric Manager line follows the NVSwitches on its PCI bus: with the listing cut (or an
    # error in its place) pci.devices reads as no device, and the line said "a pass-through VM ... with no NVSwitch on
    # its PCI bus" (PASS "none needed here" when the fabric is up, WARN "none to install here" when not).
    real = _pci_real()
    pci = {"cut-before-gpu": real[:real.index("0000:00:06.0")],
           "error-text": "ls: cannot access /sys/bus/pci/devices: Input/output error\n"}[damage]
    lines = h200_lines(tmp_path, pci_devices=pci,
                       nvidia_query=_q_with(State=state, Status=status, Virtualization_Mode="Pass-Through"))
    fm = by_name(lines, "Fabric Manager")
    assert fm.status == "WARN" and fm.seen == (
        "not checked: pci.devices unreadable; a pass-through VM: whether its PCI bus holds NVSwitches is not known "
        f"(fabric State {state}, Status {status} on 1 GPU(s))"), fm.seen
    assert fm.fix == "read the host again; the line of fact pci.devices says what its command printed"
    assert not [l for l in lines if "no NVSwitch" in l.seen or l.name == "Fabric Manager version"]
    # The whole listing: as before (the fabric up: none needed here; not up: none to install here).
    lines = h200_lines(tmp_path, nvidia_query=_q_with(State=state, Status=status, Virtualization_Mode="Pass-Through"))
    assert "no NVSwitch on its PCI bus" in by_name(lines, "Fabric Manager").seen


def test_an_unreadable_pci_listing_is_no_gpu_role_skip_or_fail_from_an_empty_bus(tmp_path):
    # A GPU role's gate read the unread listing (its default, no device) as "no NVIDIA GPU on this host".
    from bringup.engine.role_contract import FactView, HostContext

    doc = json.loads(BUNDLE.read_text())
    doc["raw"]["pci.devices"] = {"rc": 0, "output": _pci_real()[:_pci_real().index("0000:00:06.0")]}
    path = tmp_path / "raw.json"
    path.write_text(json.dumps(doc))
    facts, errors = load_facts(path, "h200-vm")
    assert "pci.devices" in errors and facts["pci.devices"] == []
    role = ROLES["nvidia_driver"]
    for profile, kind in (("h200", "Fail"), ("cpu", "Skip")):
        vars = {**role.defaults, "gpu_profile": profile}
        host = HostContext("h200-vm", vars, FactView(facts, role.facts, role.name, errors), render=None)
        (gate,) = role.resources(host)
        said = gate.text
        assert type(gate).__name__ == kind and "no NVIDIA GPU" not in said, said
        assert said.startswith("gpu_profile is cpu (no GPU); pci.devices unreadable: the PCI bus not read") if kind \
            == "Skip" else said.startswith("nvidia driver not touched: the fact pci.devices (pci.devices: the output "
                                           "ends before its last line 'end=pci'"), said


def _two_gpus_on_the_bus() -> str:
    """The H200 VM's PCI listing with a second H200 (0000:00:07.0) beside the first."""
    pci = json.loads(BUNDLE.read_text())["raw"]["pci.devices"]["output"]
    first = next(l for l in pci.splitlines() if "vendor=0x10de" in l)
    end = pci.index("end=pci")
    return pci[:end] + first.replace("0000:00:06.0", "0000:00:07.0") + "\n" + pci[end:]


@pytest.mark.reliability(item=40, fault="nvidia-smi --query-gpu listing one GPU twice (the same row, or two rows of "
                         "one UUID or one bus id) on a host with two GPUs: 'driver sees the GPUs: 2 x H200' passed, "
                         "the GPU the driver lost hidden behind the copy", variants=3,
                         checks=("one clear line",))
@pytest.mark.parametrize("twice", ["row", "uuid", "bus id"])
def test_a_gpu_listed_twice_by_nvidia_smi_is_named_never_counted_twice(tmp_path, twice):
    csv = json.loads(BUNDLE.read_text())["raw"]["nvidia.smi"]["output"].splitlines()
    row = csv[1]
    if twice == "uuid":
        row = row.replace("0, ", "1, ", 1).replace("00:06.0", "00:07.0")
    elif twice == "bus id":
        row = re.sub(r"GPU-[0-9a-f]{8}", "GPU-99999999", row.replace("0, ", "1, ", 1))
    lines = h200_lines(tmp_path, pci_devices=_two_gpus_on_the_bus(), nvidia_smi="\n".join([*csv, row]) + "\n")
    seen = by_name(lines, "driver sees the GPUs")
    assert seen.status != "PASS" and "not checked" in seen.seen, seen
    fact = by_name(lines, "fact nvidia.smi")
    assert fact.status == "FAIL" and "listed twice" in fact.seen, fact
    assert {"row": "with index", "uuid": "with UUID", "bus id": "with bus id"}[twice] in fact.seen, fact


@pytest.mark.reliability(item=40, fault="nvidia-smi -q: a GPU section whose bus id has a 400-digit domain, two "
                         "sections "
                         "of one UUID, or more sections than Attached GPUs: read as GPUs, their lines PASS", variants=3,
                         checks=("one clear line",))
@pytest.mark.parametrize("damage", ["domain", "uuid", "more"])
def test_a_garbled_gpu_section_of_nvidia_smi_q_is_named(tmp_path, damage):
    q = json.loads(BUNDLE.read_text())["raw"]["nvidia.query"]["output"]
    start = q.index("\nGPU 00000000:00:06.0")
    section = q[start:q.index("\n\n\n--- nvidia-smi -L")]
    if damage == "domain":
        q = q.replace("GPU 00000000:00:06.0", "GPU 1" + "0" * 400 + ":00:06.0")
    else:
        second = section.replace("GPU 00000000:00:06.0", "GPU 00000000:00:07.0")
        q = q[:start] + section + second + q[start + len(section):]
        if damage == "uuid":
            q = re.sub(r"(Attached GPUs +: )1", r"\g<1>2", q)
    lines = h200_lines(tmp_path, nvidia_query=q)
    fact = by_name(lines, "fact nvidia.query")
    assert fact.status == "FAIL", fact
    assert any(w in fact.seen for w in ("listed twice", "GPU section", "Attached GPUs")), fact
    assert not [l for l in lines if l.status == "PASS" and "1" + "0" * 40 in l.name + l.seen]


@pytest.mark.reliability(item=40, fault="nvidia-smi --query-gpu listing a GPU that nvidia-smi -q does not (the forms "
                         "disagree on the GPU count): that GPU's health lines (ECC, memory repair, clocks, "
                         "temperature) were left out unsaid", variants=1, checks=("one clear line",))
def test_a_gpu_the_query_lists_and_q_does_not_is_named_not_checked(tmp_path):
    csv = json.loads(BUNDLE.read_text())["raw"]["nvidia.smi"]["output"].splitlines()
    second = re.sub(r"GPU-[0-9a-f]{8}", "GPU-99999999", csv[1].replace("0, ", "1, ", 1).replace("00:06.0", "00:07.0"))
    lines = h200_lines(tmp_path, pci_devices=_two_gpus_on_the_bus(), nvidia_smi="\n".join([*csv, second]) + "\n")
    (k,) = [l for l in lines if l.subject == "GPU 00000000:00:07.0"]
    assert k.status == "WARN" and k.seen.startswith("not checked: nvidia-smi -q lists no GPU 00000000:00:07.0"), k
    assert [l.status for l in lines if l.subject == "GPU 00000000:00:06.0" and l.area == "health"]  # GPU 0 judged
