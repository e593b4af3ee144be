"""Issue 31 section 3: Fabric Manager on NVSwitch boards, a driver no package owns kept, the Triton image against
the GPUs' architecture.

Planned from real captures: the H200 VM's own raw bundle (tests/fixtures/hosts/h200-vm/facts-raw.json) and the
public ``nvidia-smi -q`` of an 8x H100 SXM board (tests/fixtures/hosts/public/nvsmi-q-8xh100sxm-drv565.txt).

What no capture holds yet, each built here and said so where it is built:

- ``driver.owner`` on the H200 VM is its real output, from the raw bundle (``invoke facts --raw`` there,
  2026-12-04: ``nvidia-smi`` in /usr/local/nvidia/bin, owned by no package).  The other hosts' ``driver.owner`` and
  ``driver.fabric_manager`` outputs are written below in the command's own format, with what each tool prints
  there (``dpkg-query -S`` answers ``package: /path``; an unowned path gives rc 1 and no line on stdout;
  ``nv-fabricmanager --version``'s line is a real one, tests/fixtures/hosts/public/nv-fabricmanager-version-450.txt).
- The 8x H100 board has no published PCI listing nor ``/etc/os-release``: its ``pci.devices`` GPUs are made from
  the capture's own bus ids, its OS and kernel are the H200 VM's (Ubuntu 24.04).  The NVSwitch is known from the
  capture's Fabric sections (State Completed), as on a live host.
- No GB200 capture is stored: the GB200 case is the 8x H100 capture with each GPU's product name and
  architecture changed to what a GB200's ``nvidia-smi -q`` prints (``NVIDIA GB200``, ``Blackwell``) and compute
  capability 10.0 in the query CSV's entries.
"""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest

from bringup.facts.base import UntrustedOutput
from bringup.facts.driver import END, parse_driver_owner, parse_fabric_manager
from bringup.facts.gather import load_facts
from bringup.facts.nvidia_q import parse_nvidia_smi_q
from bringup.facts.os_ import parse_os_release
from bringup.resources import Packages, Service
from bringup.resources.files import File
from bringup.resources.guard import Fail, Unused
from bringup.resources.hold import Hold
from bringup.resources.nvidia import NvidiaDriverLoaded
from bringup.engine.roles import HostContext, load_roles
from bringup.engine.templates import Templates

from .fixture_hosts import FIX

REPO = Path(__file__).resolve().parents[2]

ROOT = Path(__file__).resolve().parents[2]
BUNDLE = FIX / "h200-vm" / "facts-raw.json"
H100X8 = FIX / "public" / "nvsmi-q-8xh100sxm-drv565.txt"
ROLES = load_roles(ROOT)[1]

#: The H200 VM's driver.owner, as its raw bundle holds it (captured there by `invoke facts --raw`, 2026-12-04):
#: nvidia-smi in /usr/local/nvidia/bin owned by no package, no modinfo on that image.
H200_OWNER = json.loads(BUNDLE.read_text())["raw"]["driver.owner"]["output"]
#: A host of Canonical's packages, branch 565 (DKMS module).
CANONICAL_565 = ("version=565.57.01\nmanager=dpkg\nsmi=/usr/bin/nvidia-smi\n"
                 "module=/lib/modules/6.8.0-49-generic/updates/dkms/nvidia.ko.zst\n"
                 "owner=rc=0 path=/usr/bin/nvidia-smi\nby=nvidia-utils-565-server: /usr/bin/nvidia-smi\n"
                 "owner=rc=1 path=/lib/modules/6.8.0-49-generic/updates/dkms/nvidia.ko.zst\n" + END + "\n")


def ctx(role: str, facts: dict, **vars) -> HostContext:
    r = ROLES[role]
    return HostContext("h", {**r.defaults, **vars}, facts, Templates(ROOT / "templates").render)


def h200_facts(owner: str | None = H200_OWNER) -> dict:
    """The H200 VM's facts from its raw bundle, through the parsers; ``driver.owner`` as given, left out for None
    (a bundle saved before the fact existed)."""
    doc = json.loads(BUNDLE.read_text())
    if owner is not None:
        doc["raw"]["driver.owner"] = {"rc": 0, "output": owner}
    else:
        doc["raw"].pop("driver.owner", None)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "facts-raw.json"
        path.write_text(json.dumps(doc))
        facts, errors = load_facts(path, "h200-vm")
    assert not errors, errors
    return facts


def h100x8_facts(owner: str = CANONICAL_565, fm: str | None = None, gb200: bool = False, path: Path = H100X8,
                 edit=lambda text: text) -> dict:
    """The 8x H100 SXM board from its ``nvidia-smi -q`` (the rest built: see the module's docstring); ``path`` another
    capture of such a board, ``edit`` a change made to its text (the test says which)."""
    q = parse_nvidia_smi_q(edit("\n".join(l for l in path.read_text().splitlines() if not l.startswith("#"))))
    if gb200:
        q["gpus"] = [{**g, "product_name": "NVIDIA GB200", "product_architecture": "Blackwell"} for g in q["gpus"]]
    smi = [{"index": i, "name": g["product_name"], "pci_address": g["pci_address"],
            "driver_version": q["driver_version"], "compute_cap": "10.0" if gb200 else "9.0"}
           for i, g in enumerate(q["gpus"])]
    pci = [{"address": g["pci_address"], "class": "0x030200", "vendor": "0x10de", "device": "0x2330", "kind": "gpu",
            "numa_node": -1, "local_cpus": [], "irqs": []} for g in q["gpus"]]
    os_txt = (FIX / "h200-vm" / "os.txt").read_text()
    facts = {"os.release": parse_os_release(os_txt[os_txt.index("PRETTY_NAME"):]),
             "os.kernel": {"release": "6.8.0-49-generic"}, "pci.devices": pci, "nvidia.smi": smi, "nvidia.query": q,
             "system.systemd": {"booted": True, "pid1": "systemd"}, "driver.owner": parse_driver_owner(owner)}
    if fm is not None:
        facts["driver.fabric_manager"] = parse_fabric_manager(fm)
    return facts


# ------------------------------------------------------------------ the facts' parsers


def test_driver_owner_tells_an_unowned_driver_from_a_packaged_one():
    h200 = parse_driver_owner(H200_OWNER)
    assert h200["packaged"] is False and h200["version"] == "580.159.04"
    assert h200["nvidia_smi"] == {"path": "/usr/local/nvidia/bin/nvidia-smi", "packages": []}
    pkg = parse_driver_owner(CANONICAL_565)
    assert pkg["packaged"] is True and pkg["nvidia_smi"]["packages"] == ["nvidia-utils-565-server"]
    assert pkg["module"]["packages"] == []  # a DKMS-built module belongs to no package: nvidia-smi decides
    # The .run installer's own files are named; rpm's answer is a package name per line.
    run = parse_driver_owner("version=550.54.15\nmanager=rpm\nsmi=/usr/bin/nvidia-smi\nmodule=\n"
                             "installer=/usr/bin/nvidia-uninstall\nowner=rc=1 path=/usr/bin/nvidia-smi\n" + END)
    assert run["packaged"] is False and run["installer"] == ["/usr/bin/nvidia-uninstall"]
    rpm = parse_driver_owner("version=550.54.15\nmanager=rpm\nsmi=/usr/bin/nvidia-smi\nmodule=\n"
                             "owner=rc=0 path=/usr/bin/nvidia-smi\nby=nvidia-driver-cuda\n" + END)
    assert rpm["packaged"] is True and rpm["nvidia_smi"]["packages"] == ["nvidia-driver-cuda"]
    # No package manager, or no nvidia-smi: not known, never "unowned".
    assert parse_driver_owner("version=\nmanager=\nsmi=/usr/bin/nvidia-smi\nmodule=\n" + END)["packaged"] is None
    assert parse_driver_owner("version=\nmanager=dpkg\nsmi=\nmodule=\n" + END)["packaged"] is None


@pytest.mark.parametrize("damage", [
    lambda t: t[:t.index("owner=rc=1")],                         # cut before its end line
    lambda t: t.replace("580.159.04", "58\ufffd.159.04"),          # non-UTF-8 bytes, as decoded with replace
    lambda t: t.replace("owner=rc=1 path=", "owner=rc= "),                                  # garbled
], ids=["cut", "non-utf8", "garbled"])
def test_a_damaged_driver_owner_is_refused(damage):
    with pytest.raises(UntrustedOutput):
        parse_driver_owner(damage(H200_OWNER))


def strip(text: str) -> str:
    return "\n".join(l for l in text.splitlines() if not l.startswith("#"))


def test_fabric_manager_fact_reads_packages_and_the_binary():
    fm = parse_fabric_manager("pkg=ii  nvidia-fabricmanager-565 565.57.01-0ubuntu0.24.04.1\n"
                              "pkg=un  cuda-drivers-fabricmanager-565 \n" + END + "\n")
    assert fm == {"packages": {"nvidia-fabricmanager-565": "565.57.01-0ubuntu0.24.04.1"}, "version": "565.57.01",
                  "active": None}
    # The binary's own word wins: a real `nv-fabricmanager --version` (its fixture), as the command prints it
    # after the package lines (none here: installed from NVIDIA's archive, say) and before its end line.
    binary = strip((FIX / "public" / "nv-fabricmanager-version-450.txt").read_text())
    assert parse_fabric_manager(binary + "\n" + END)["version"] == "450.102.04"
    assert parse_fabric_manager(binary) is None  # the bare capture is not this fact's output: not known
    assert parse_fabric_manager(END + "\n") == {"packages": {}, "version": None, "active": None}  # none installed
    assert parse_fabric_manager("") is None  # not known
    with pytest.raises(UntrustedOutput):
        parse_fabric_manager("pkg=ii  nvidia-fabricmanager-565 565.57.01-1\n")  # cut before its end line
    with pytest.raises(UntrustedOutput):  # non-UTF-8 bytes, as decoded with replace
        parse_fabric_manager("pkg=ii  nvidia-fabricmanager-565 565.57.\ufffd1-1\n" + END)


# ------------------------------------------------------------------ the H200 VM: a driver no package owns


def test_the_h200_vm_plans_no_driver_packages_and_no_headers():
    res = ROLES["nvidia_driver"].resources(ctx("nvidia_driver", h200_facts(), gpu_profile="h200"))
    assert not [r for r in res if isinstance(r, (Packages, Hold, File, Fail))], res
    kept = next(r for r in res if isinstance(r, Unused) and r.name == "nvidia driver packages")
    assert kept.reason.startswith("driver 580.159.04 loaded from outside the package manager "
                                  "(/usr/local/nvidia/bin/nvidia-smi owned by no package: NVIDIA .run installer?): kept; "
                                  "no driver packages or kernel headers planned"), kept.reason
    assert "nvidia_driver_manage: packages" in kept.reason
    fm = next(r for r in res if isinstance(r, Unused) and r.name == "nvidia-fabricmanager")
    assert fm.reason.startswith("no NVSwitch on this host")
    assert isinstance(res[-1], NvidiaDriverLoaded) and res[-1].branch == "580"  # still checked


@pytest.mark.parametrize("ask", [{"nvidia_driver_manage": "packages"}, {"nvidia_driver_branch": 580}])
def test_an_explicit_ask_replaces_it_and_the_plan_says_what(ask):
    res = ROLES["nvidia_driver"].resources(ctx("nvidia_driver", h200_facts(), gpu_profile="h200", **ask))
    pkgs = [r.packages for r in res if isinstance(r, Packages)]
    assert pkgs == [{"linux-headers-6.18.44-fc-v1252-gpu": None},
                    {"nvidia-headless-580-server": "580.*", "nvidia-utils-580-server": "580.*"}]
    out = "index, name, pci.bus_id, driver_version\n0, NVIDIA H200, 00000000:00:06.0, 580.159.04\nsmi_rc=0\n"
    assert res[-1].plan(out).reason.startswith(
        "replaces the driver 580.159.04 loaded from outside the package manager (/usr/local/nvidia/bin/nvidia-smi ")


def test_without_the_owner_fact_the_plan_is_as_before():
    """A bundle saved before driver.owner existed: not known, so packages are planned as they were."""
    res = ROLES["nvidia_driver"].resources(ctx("nvidia_driver", h200_facts(owner=None), gpu_profile="h200"))
    assert any(isinstance(r, Packages) and "nvidia-utils-580-server" in r.packages for r in res)


def test_the_checklist_never_tells_to_install_packages_over_it():
    facts = h200_facts()
    (kept,) = ROLES["nvidia_driver"].checks(ctx("nvidia_driver", facts, gpu_profile="h200"))
    assert kept.status == "PASS" and "580.159.04 (no pin: kept, installed outside the package manager" in kept.seen
    # Triton 25.10 needs R575+: 580 runs it.  An image needing more than the loaded driver: the fix upgrades it
    # the way it was installed; packages only as the inventory's choice, said as such.
    facts["nvidia.smi"] = [dict(facts["nvidia.smi"][0], driver_version="570.86.10")]
    (line,) = ROLES["nvidia_driver"].checks(ctx("nvidia_driver", facts, gpu_profile="h200",
                                                triton_image="nvcr.io/nvidia/tritonserver:25.10-py3"))
    assert line.status == "FAIL" and line.fix.startswith("upgrade it to R575+ the way it was installed"), line
    assert "provision" not in line.fix


# ------------------------------------------------------------------ 8x H100 SXM: Fabric Manager


def test_the_8x_h100_board_plans_fabric_manager_at_the_drivers_version():
    res = ROLES["nvidia_driver"].resources(ctx("nvidia_driver", h100x8_facts(), gpu_profile="h100"))
    pkgs = [r.packages for r in res if isinstance(r, Packages)]
    assert {"nvidia-headless-565-server": "565.*", "nvidia-utils-565-server": "565.*"} in pkgs
    assert {"nvidia-fabricmanager-565": "565.57.01-*"} in pkgs  # the loaded driver's exact version
    (hold,) = [r for r in res if isinstance(r, Hold)]
    assert "nvidia-fabricmanager-565" in hold.packages
    pref = next(r for r in res if isinstance(r, File) and r.path.endswith("bringup-nvidia-driver"))
    text = pref.content.decode() if isinstance(pref.content, bytes) else pref.content
    # The first specific-form record matching a version decides (apt_preferences(5)): the exact pin, then every
    # other version of the branch refused, both before the branch family's record, which matches it too.
    assert text.index("Package: nvidia-fabricmanager-565\nPin: version 565.57.01-*\nPin-Priority: 1001\n\n"
                      "Package: nvidia-fabricmanager-565\nPin: version 565.*\nPin-Priority: -1\n") \
        < text.index("Package: /^(lib)?nvidia-")
    unattended = next(r for r in res if isinstance(r, File) and "unattended" in r.path)
    body = unattended.content.decode() if isinstance(unattended.content, bytes) else unattended.content
    assert '"nvidia-fabricmanager-565";' in body
    fm = next(r for r in res if isinstance(r, Service) and r.unit == "nvidia-fabricmanager")
    assert fm.enabled is True and fm.running is True
    assert not [r for r in res if isinstance(r, Unused)]


def test_an_exact_driver_version_pins_fabric_manager_at_its_upstream_version():
    res = ROLES["nvidia_driver"].resources(ctx("nvidia_driver", h100x8_facts(), gpu_profile="h100",
                                               nvidia_driver_version="565.57.01-0ubuntu0.24.04.1"))
    assert {"nvidia-fabricmanager-565": "565.57.01-*"} in [r.packages for r in res if isinstance(r, Packages)]


def test_rhel_gets_the_modules_fm_profile():
    facts = h100x8_facts()
    facts["os.release"] = {"id": "rocky", "version_id": "9.4", "id_like": "rhel centos fedora"}
    res = ROLES["nvidia_driver"].resources(ctx("nvidia_driver", facts, gpu_profile="h100"))
    cmds = [r for r in res if r.kind == "command"]
    assert [c.name for c in cmds] == ["dnf module nvidia-driver:565-dkms", "dnf module nvidia-driver:565-dkms/fm"]
    (hold,) = [r for r in res if isinstance(r, Hold)]
    assert "nvidia-fabric-manager" in hold.packages


@pytest.mark.parametrize("fm,status,seen", [
    (f"pkg=ii  nvidia-fabricmanager-565 565.57.01-0ubuntu0.24.04.1\n{END}\n", "PASS",
     "Fabric Manager 565.57.01 = driver 565.57.01"),
    (f"pkg=ii  nvidia-fabricmanager-565 565.57.02-0ubuntu0.24.04.1\n{END}\n", "FAIL",
     "Fabric Manager 565.57.02, driver 565.57.01: nvidia-fabricmanager refuses to start"),
    (f"{END}\n", "FAIL", "8 GPU(s) in an NVLink fabric (nvidia-smi -q Fabric State Completed); no Fabric Manager"),
], ids=["same", "other-version", "missing"])
def test_the_checklist_holds_fabric_manager_to_the_driver(fm, status, seen):
    lines = ROLES["nvidia_driver"].checks(ctx("nvidia_driver", h100x8_facts(fm=fm), gpu_profile="h100"))
    (line,) = [l for l in lines if l.name == "Fabric Manager version"]
    assert line.status == status and line.seen.startswith(seen), line
    if status == "FAIL":
        assert "provision --roles nvidia_driver" in line.fix and "nvidia-fabricmanager-565 at 565.57.01" in line.fix


def test_fabric_manager_installed_but_not_running_fails():
    fm = f"pkg=ii  nvidia-fabricmanager-565 565.57.01-0ubuntu0.24.04.1\nactive=failed\n{END}\n"
    assert parse_fabric_manager(fm)["active"] == "failed"
    lines = ROLES["nvidia_driver"].checks(ctx("nvidia_driver", h100x8_facts(fm=fm), gpu_profile="h100"))
    (line,) = [l for l in lines if l.name.startswith("Fabric Manager")]
    assert (line.name, line.status) == ("Fabric Manager running", "FAIL") and "is failed" in line.seen
    running = fm.replace("active=failed", "active=active")
    lines = ROLES["nvidia_driver"].checks(ctx("nvidia_driver", h100x8_facts(fm=running), gpu_profile="h100"))
    assert [l.status for l in lines if l.name == "Fabric Manager version"] == ["PASS"]
    with pytest.raises(UntrustedOutput):
        parse_fabric_manager(f"active=act\x1b[0m\n{END}\n")


def test_no_fabric_manager_line_without_nvswitch():
    lines = ROLES["nvidia_driver"].checks(ctx("nvidia_driver", h200_facts(), gpu_profile="h200"))
    assert [l.name for l in lines] == ["driver branch newer than the guide's"]


# ------------------------------------------------------------------ Triton image vs the GPUs' architecture

MODEL = {"m": {"platform": "tensorrt_plan", "max_batch_size": 8,
               "input": [{"name": "i", "data_type": "TYPE_FP16", "dims": [4]}],
               "output": [{"name": "o", "data_type": "TYPE_FP16", "dims": [4]}]}}


def triton_lines(facts: dict, image: str) -> dict:
    return {l.name: l for l in ROLES["triton"].checks(ctx("triton", facts, triton_image=image))}


def test_triton_24_06_runs_on_the_8x_h100_board():
    lines = triton_lines(h100x8_facts(), "nvcr.io/nvidia/tritonserver:24.06-py3")
    assert lines["Triton container vs driver"].status == "PASS"
    assert "Triton container vs GPU architecture" not in lines


def test_triton_24_06_fails_on_gb200_and_25_10_does_not():
    gb200 = h100x8_facts(gb200=True)
    lines = triton_lines(gb200, "nvcr.io/nvidia/tritonserver:24.06-py3")
    arch = lines["Triton container vs GPU architecture"]
    assert arch.status == "FAIL" and "this host has NVIDIA GB200 (Blackwell)" in arch.seen, arch
    assert "rel-24-06.html" in arch.seen  # the matrix's source
    lines = triton_lines(gb200, "nvcr.io/nvidia/tritonserver:25.10-py3")
    assert "Triton container vs GPU architecture" not in lines
    # The role refuses to deploy the old image there, with the same words.
    res = ROLES["triton"].resources(ctx("triton", gb200, triton_image="nvcr.io/nvidia/tritonserver:24.06-py3",
                                        triton_models=MODEL, gpu_profile="cpu"))
    assert isinstance(res[0], Fail) and "supports Pascal, Volta, Turing, Ampere, Hopper, Ada Lovelace" in res[0].error


def test_the_architecture_comes_from_the_compute_capability_without_nvidia_smi_q():
    from bringup.hardware.driver_matrix import architecture_of, triton_need, unsupported_gpus

    assert [architecture_of({"compute_cap": c}) for c in ("6.1", "7.0", "7.5", "8.6", "8.9", "9.0", "10.0", "12.0")] \
        == ["Pascal", "Volta", "Turing", "Ampere", "Ada Lovelace", "Hopper", "Blackwell", "Blackwell"]
    need = triton_need("tritonserver:25.10-py3")
    assert unsupported_gpus(need, {"nvidia.smi": [{"name": "Tesla P100", "compute_cap": "6.0"}]}).endswith(
        "this host has Tesla P100 (Pascal)")


def test_a_driver_container_with_no_nvidia_smi_on_the_host_is_kept():
    """A GPU Operator host: the module loaded (580 in /sys/module/nvidia/version), no nvidia-smi on the host, dpkg
    there.  Built from the H200's real driver.owner output with its nvidia-smi line emptied (no capture of such a
    host is stored): packages and headers over it would fight the driver container."""
    owner = H200_OWNER.replace("smi=/usr/local/nvidia/bin/nvidia-smi\n", "smi=\n").replace(
        "owner=rc=1 path=/usr/local/nvidia/bin/nvidia-smi\n", "")
    assert parse_driver_owner(owner)["packaged"] is False
    facts = h200_facts(owner)
    facts["nvidia.smi"], facts["nvidia.query"] = [], {}  # no nvidia-smi on the host: its facts are empty
    res = ROLES["nvidia_driver"].resources(ctx("nvidia_driver", facts, gpu_profile="h200"))
    assert not [r for r in res if isinstance(r, (Packages, Hold, File, Fail, NvidiaDriverLoaded))], res
    kept = next(r for r in res if isinstance(r, Unused) and r.name == "nvidia driver packages")
    assert kept.reason.startswith("driver 580.159.04 loaded from outside the package manager (no nvidia-smi on the "
                                  "host: a driver container?): kept"), kept.reason


# ------------------------------------------------------------------ issue 41: Fabric Manager in a VM, and words that
# agree with the fabric state seen

#: A real pass-through VM of an 8x H100 board (gpud's fleet, driver 535.161.08): every GPU Virtualization Mode
#: Pass-Through, Fabric State Completed, Status Success.  Its PCI bus was not published: pci.devices is built from
#: its bus ids (GPUs only, no NVSwitch), as h100x8_facts does.
VM_H100X8 = FIX / "public" / "nvsmi-q-8xh100sxm-swthermal-drv535.txt"
VM_565 = CANONICAL_565.replace("565.57.01", "535.161.08").replace("565", "535")


def test_a_passthrough_vm_whose_fabric_is_up_needs_no_fabric_manager():
    facts = h100x8_facts(owner=VM_565, fm=f"{END}\n", path=VM_H100X8)
    q = facts["nvidia.query"]["gpus"]
    assert {(g["virtualization_mode"], g["fabric_state"], g["fabric_status"]) for g in q} == {
        ("Pass-Through", "Completed", "Success")}
    c = ctx("nvidia_driver", facts, gpu_profile="h100")
    lines = [l for l in ROLES["nvidia_driver"].checks(c) if l.name.startswith("Fabric Manager")]
    assert [(l.name, l.status) for l in lines] == [("Fabric Manager", "PASS")], lines
    assert "hypervisor host" in lines[0].seen and "Completed, Status Success" in lines[0].seen
    res = ROLES["nvidia_driver"].resources(c)
    assert not [r for r in res if isinstance(r, Packages) and any("fabricmanager" in p for p in r.packages)]
    assert not [r for r in res if isinstance(r, Service) and r.name == "nvidia-fabricmanager"]
    (unused,) = [r for r in res if isinstance(r, Unused) and r.name == "nvidia-fabricmanager"]
    assert "hypervisor host" in unused.text
    # Its health lines: every GPU's fabric PASS.
    from bringup.hardware.health import gpu_health_checks

    assert {l.status for l in gpu_health_checks(facts) if l.name == "NVSwitch fabric"} == {"PASS"}
    # The same VM given the NVSwitches too (full pass-through: one bridge of class 0x0680 added to its PCI bus) runs
    # Fabric Manager itself: held to the driver as on bare metal.
    facts["pci.devices"] = facts["pci.devices"] + [{"address": "0000:05:00.0", "class": "0x068000", "vendor": "0x10de",
                                                    "device": "0x22a3", "kind": "other"}]
    (fm,) = [l for l in ROLES["nvidia_driver"].checks(ctx("nvidia_driver", facts, gpu_profile="h100"))
             if l.name.startswith("Fabric Manager")]
    assert (fm.name, fm.status) == ("Fabric Manager version", "FAIL") and "NVSwitch(es) on the PCI bus" in fm.seen


def test_a_vm_whose_fabric_is_not_up_is_told_where_fabric_manager_runs():
    # Changed in the VM capture: the first GPU's Fabric State Completed -> In Progress.
    import re as _re

    facts = h100x8_facts(owner=VM_565, fm=f"{END}\n", path=VM_H100X8,
                         edit=lambda t: _re.sub(r"(Fabric\n\s+State\s+:) Completed", r"\1 In Progress", t, count=1))
    from bringup.hardware.health import gpu_health_checks

    (bad,) = [l for l in gpu_health_checks(facts) if l.name == "NVSwitch fabric" and l.status != "PASS"]
    assert bad.status == "FAIL" and "In Progress" in bad.seen and "hypervisor host" in bad.fix
    # Not every GPU registered, yet no NVSwitch on this VM's bus: the hypervisor host's Fabric Manager is the one to
    # fix; none is asked for in the VM (it was: "no Fabric Manager installed", fix "install" one here).
    (fm,) = [l for l in ROLES["nvidia_driver"].checks(ctx("nvidia_driver", facts, gpu_profile="h100"))
             if l.name.startswith("Fabric Manager")]
    assert fm.status == "WARN" and fm.seen.startswith("none to install here: a pass-through VM with no NVSwitch")
    assert "State In Progress" in fm.seen and "State Completed, Status Success on 7" in fm.seen
    assert "hypervisor host's operator" in fm.fix and "provision" not in fm.fix


def test_bare_metal_fabric_manager_fail_words_follow_the_fabric_state():
    # The 8x H100 board (bare metal: Virtualization Mode None), no Fabric Manager installed.
    up = ROLES["nvidia_driver"].checks(ctx("nvidia_driver", h100x8_facts(fm=f"{END}\n"), gpu_profile="h100"))
    (line,) = [l for l in up if l.name == "Fabric Manager version"]
    assert line.status == "FAIL" and "yet the fabric is up (State Completed, Status Success on 8 GPU(s))" in line.seen
    assert "CUDA does not start until" not in line.seen
    # Changed: every GPU's State Completed -> Not Started (what nvidia-smi shows before Fabric Manager ran).
    import re as _re

    facts = h100x8_facts(fm=f"{END}\n", edit=lambda t: _re.sub(r"(Fabric\n\s+State\s+:) Completed",
                                                                r"\1 Not Started", t))
    (line,) = [l for l in ROLES["nvidia_driver"].checks(ctx("nvidia_driver", facts, gpu_profile="h100"))
               if l.name == "Fabric Manager version"]
    assert line.status == "FAIL" and "fabric State Not Started" in line.seen and "CUDA does not start" in line.seen
    from bringup.hardware.health import gpu_health_checks

    bad = [l for l in gpu_health_checks(facts) if l.name == "NVSwitch fabric"]
    assert {l.status for l in bad} == {"FAIL"} and "has not registered the GPU" in bad[0].fix


def test_fabric_completed_with_an_error_is_not_told_to_start_fabric_manager():
    # tests/fixtures/hosts/public/nvsmi-q-fabric-insufficient-resources.txt's state, on the bare-metal board: Fabric
    # Manager ran (Completed) and answered an error; "start nvidia-fabricmanager" would contradict it.
    import re as _re

    facts = h100x8_facts(edit=lambda t: _re.sub(r"(Fabric\n\s+State\s+: Completed\n\s+Status\s+:) Success",
                                                r"\1 Insufficient Resources", t, count=1))
    from bringup.hardware.health import gpu_health_checks

    (bad,) = [l for l in gpu_health_checks(facts) if l.name == "NVSwitch fabric" and l.status != "PASS"]
    assert "Fabric Manager ran" in bad.fix and "start nvidia-fabricmanager" not in bad.fix


def test_the_h200_vm_has_no_fabric_and_no_fabric_manager_line():
    facts = h200_facts()
    c = ctx("nvidia_driver", facts, gpu_profile="h200")
    assert not [l for l in ROLES["nvidia_driver"].checks(c) if l.name.startswith("Fabric Manager")]
    (unused,) = [r for r in ROLES["nvidia_driver"].resources(c) if isinstance(r, Unused)
                 and r.name == "nvidia-fabricmanager"]
    assert "no NVSwitch on this host" in unused.text


def _h200_with_smi(output: str) -> tuple[dict, dict]:
    """The H200 VM's raw bundle with its nvidia-smi --query-gpu output replaced by ``output`` (the other nvidia-smi
    outputs, -q and topo -m, as captured there), through the parsers: its facts and their errors."""
    doc = json.loads(BUNDLE.read_text())
    doc["raw"]["nvidia.smi"] = {"rc": 0, "output": output}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "facts-raw.json"
        path.write_text(json.dumps(doc))
        return load_facts(path, "h200-vm")


@pytest.mark.reliability(item=41, fault="nvidia-smi's query output lost or cut while nvidia-smi -q answered",
                         checks=("one clear line",))
@pytest.mark.parametrize("damage", ["empty", "cut-header", "not-utf8"])
def test_an_unreadable_query_output_is_not_checked_not_install_a_driver(damage):
    from bringup.checklist.pages import role_checks

    real = json.loads(BUNDLE.read_text())["raw"]["nvidia.smi"]["output"]
    output = {"empty": "", "cut-header": real[:30],
              "not-utf8": "\udcff\udcfe" + real[2:]}[damage]
    facts, errors = _h200_with_smi(output)
    lines = role_checks([ROLES["nvidia_driver"]], "h200-vm", facts,
                        {**ROLES["nvidia_driver"].defaults, "gpu_profile": "h200"}, None, errors)
    (line,) = [l for l in lines if l.name == "driver version"]
    assert line.status == "WARN" and line.seen.startswith("not checked: "), line
    assert "nvidia-smi -q answered: driver 580.159.04, 1 GPU(s)" in line.seen
    assert "install a driver" not in line.fix
    # The real output: the driver line as before (a driver no package owns, kept).
    facts, errors = _h200_with_smi(real)
    lines = role_checks([ROLES["nvidia_driver"]], "h200-vm", facts,
                        {**ROLES["nvidia_driver"].defaults, "gpu_profile": "h200"}, None, errors)
    assert not [l for l in lines if l.seen.startswith("not checked")] and lines


def test_no_driver_at_all_is_still_told_to_install_one():
    # Neither nvidia-smi output answered (no driver): the FAIL with its fix, as before.
    facts = h100x8_facts()
    facts["nvidia.smi"], facts["nvidia.query"] = [], {}
    (line,) = ROLES["nvidia_driver"].checks(ctx("nvidia_driver", facts, gpu_profile="h100"))
    assert line.status == "FAIL" and "install a driver" in line.fix


@pytest.mark.parametrize("printed, shown", [
    ("580garbage", "'580garbage'"), ("99999.1.1", "'99999.1.1'"), ("５８０.159.04", "'５８０.159.04'"),
    ("NaN", "'NaN'"), ("1e308", "'1e308'"), ("0.0", "'0.0'"), ("Unknown Error", "'Unknown Error'"),
    ("9" * 5000, "'" + "9" * 36 + "..."),
], ids=["junk", "five-digit-branch", "fullwidth", "nan", "1e308", "zero", "error", "5000-digits"])
def test_a_driver_version_that_is_no_version_is_not_checked(printed, shown):
    # A value nvidia-smi printed as the driver version that is no NVIDIA version: never a branch read from its
    # leading digits (PASS "newer than the guide's", FAIL "upgrade to R545+"), never a traceback (5000 digits).
    from bringup.checklist.pages import role_checks
    from bringup.hardware.gpu import branch_of

    real = json.loads(BUNDLE.read_text())["raw"]["nvidia.smi"]["output"]
    facts, errors = _h200_with_smi(real.replace("580.159.04", printed))
    assert branch_of(facts["nvidia.smi"][0]["driver_version"]) is None
    lines = role_checks([ROLES["nvidia_driver"], ROLES["triton"]], "h200-vm", facts,
                        {**ROLES["nvidia_driver"].defaults, **ROLES["triton"].defaults, "gpu_profile": "h200"},
                        None, errors)
    (line,) = [l for l in lines if l.area == "software"]
    assert (line.status, line.name, line.seen) == ("WARN", "driver version",
                                                   f"not checked: driver version unreadable ({shown})")
    assert "install" not in line.fix.split(":")[0]


def test_real_driver_versions_have_their_branch():
    from bringup.hardware.gpu import branch_of

    assert [branch_of(v) for v in ("580.159.04", "595.80", "510.73.08", "390.157", "1000.12.1")] == \
        [580, 595, 510, 390, 1000]


def test_the_h200_vms_own_checklist_has_no_fabric_line(tmp_path):
    # Issue 41 item 1 on the H200 itself: the device tool's pass-through VM, captured by that day's `invoke facts
    # --raw` (2026-12-07, unedited: its pci.devices ends with the command's own end=pci). One GPU handed to a VM
    # (Fabric State N/A) has no fabric of its own: no fabric or Fabric Manager line, no FAIL, its GPU on the bus.
    import subprocess
    import sys

    bundle = FIX / "h200-vm" / "facts-raw-2026-12-07.json"
    (tmp_path / "hosts.yml").write_text("all:\n  hosts:\n    h200-vm:\n      ansible_connection: local\n"
                                        "      gpu_profile: auto\n")
    r = subprocess.run([sys.executable, "-m", "invoke", "--search-root", str(REPO), "checklist", "--host", "h200-vm",
                        "--inventory", "hosts.yml", "--facts", str(bundle), "--out", "pages"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=300, env={**os.environ, "COLUMNS": "200"})
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "Virtualization Mode                            : Pass-Through" in bundle.read_text()
    assert "fabric" not in r.stdout.lower(), r.stdout
    assert ", 0 fail" in r.stdout and "| PASS | gpu | GPU count | 1 on the PCI bus: 0000:00:06.0 |" in r.stdout, r.stdout
