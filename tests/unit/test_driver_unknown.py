"""Issue 34 item 9: the driver downgrade guard holds when nvidia-smi fails, and a loaded branch that cannot be
told changes no package without an explicit allow.

Before: with nvidia-smi failing on a driver/library version mismatch (module 580.159 loaded, library 580.200
installed, exit 18) the loaded branch read as "none", so ``nvidia_driver_branch: 550`` without
``nvidia_driver_allow_downgrade`` planned the 550 pin and packages, and provision started writing.

The H200 VM's raw facts bundle (tests/fixtures/hosts/h200-vm/facts-raw.json, driver 580.159.04, unedited) is
planned with its two nvidia-smi outputs replaced by what a real nvidia-smi printed on such a mismatch
(tests/fixtures/hosts/public/nvsmi-nvml-driver-library-mismatch-580.txt, exit status 18 as nvidia-smi
documents for it); its ``driver.owner`` output (the loaded module's version, from /sys/module/nvidia/version)
is kept, or cut by the test where the loaded branch must be unknown.
"""
from __future__ import annotations

import json

import pytest

from bringup.facts.nvidia_csv import parse_query_gpu_csv
from bringup.facts.nvidia_list import parse_nvidia_query
from bringup.resources import Packages
from bringup.resources.guard import Fail

from .fixture_hosts import FIX
from .h200_offline import BUNDLE, declare_raw

MISMATCH = "".join(line for line in (FIX / "public" / "nvsmi-nvml-driver-library-mismatch-580.txt").read_text()
                   .splitlines(keepends=True) if not line.startswith("#"))
SMI_FAILS = {"nvidia.smi": {"rc": 18, "output": MISMATCH},
             "nvidia.query": {"rc": 18, "output": MISMATCH + "\n--- nvidia-smi -L\n" + MISMATCH}}
OWNER = json.loads(BUNDLE.read_text())["raw"]["driver.owner"]["output"]
# driver.owner cut before its last line (end=driver): the loaded module's version is not read.
OWNER_CUT = {"driver.owner": {"rc": None, "output": OWNER[:OWNER.index("manager=")]}}


def test_the_mismatch_is_read_from_nvidia_smi_as_it_prints_it():
    assert parse_query_gpu_csv(MISMATCH) == []  # no GPU line: nvidia-smi answered nothing
    want = {"nvml_error": "Driver/library version mismatch", "nvml_library_version": "580.178"}
    assert parse_nvidia_query(MISMATCH) == want
    assert parse_nvidia_query(MISMATCH + "\n--- nvidia-smi -L\n" + MISMATCH) == want
    # Cut after its first line (an older nvidia-smi prints no library line): the failure, its library unknown.
    assert parse_nvidia_query(MISMATCH.splitlines()[0]) == {"nvml_error": "Driver/library version mismatch",
                                                            "nvml_library_version": None}
    assert parse_nvidia_query("") == {}


def _packages(resources) -> list:
    return [p for r in resources if isinstance(r, Packages) for p in r.packages]


@pytest.mark.reliability(item=34, fault="nvidia-smi failing on a driver/library version mismatch (exit 18) with "
                         "nvidia_driver_branch below the loaded module's", checks=("nothing touched",))
def test_a_pin_below_the_loaded_module_is_refused_while_nvidia_smi_fails(tmp_path):
    _role, _ctx, res = declare_raw("nvidia_driver", SMI_FAILS, tmp_path, gpu_profile="auto", nvidia_driver_branch=550)
    (only,) = res
    assert isinstance(only, Fail)
    assert only.error.startswith("driver 580.159.04 (branch 580) is loaded and nvidia_driver_branch pins 550, "
                                 "a downgrade: set nvidia_driver_allow_downgrade: true"), only.error
    _role, _ctx, res = declare_raw("nvidia_driver", SMI_FAILS, tmp_path, gpu_profile="auto", nvidia_driver_branch=550,
                                   nvidia_driver_allow_downgrade=True)
    assert "nvidia-utils-550-server" in _packages(res)  # asked for explicitly: planned


@pytest.mark.reliability(item=34, fault="loaded driver branch unknown (nvidia-smi failing, driver.owner cut)",
                         variants=2, checks=("nothing touched",))
@pytest.mark.parametrize("pin", [{"nvidia_driver_branch": 550}, {}])
def test_an_unknown_loaded_branch_changes_no_package_without_the_allow(tmp_path, pin):
    _role, _ctx, res = declare_raw("nvidia_driver", {**SMI_FAILS, **OWNER_CUT}, tmp_path, gpu_profile="auto", **pin)
    (only,) = res
    assert isinstance(only, Fail)
    assert only.error.startswith("the loaded driver's branch is not known (driver.owner: "), only.error
    assert "nvidia-smi: Failed to initialize NVML: Driver/library version mismatch" in only.error
    _role, _ctx, res = declare_raw("nvidia_driver", {**SMI_FAILS, **OWNER_CUT}, tmp_path, gpu_profile="auto",
                                   nvidia_driver_allow_downgrade=True, **pin)
    assert "nvidia-utils-550-server" in _packages(res)


def test_the_read_bundle_keeps_its_driver():
    # Unchanged outputs: the loaded 580 is kept, no question of a downgrade.
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        _role, _ctx, res = declare_raw("nvidia_driver", {}, Path(d), gpu_profile="auto")
    assert not [r for r in res if isinstance(r, Fail)]


@pytest.mark.reliability(item=34, fault="the rack checklist on a driver/library version mismatch", checks=("one clear line",))
def test_the_checklist_says_reboot_to_load_the_installed_driver(tmp_path):
    role, ctx, _res = declare_raw("nvidia_driver", SMI_FAILS, tmp_path, gpu_profile="auto")
    lines = role.checks(ctx)
    (drv,) = [c for c in lines if c.area == "software" and c.status == "FAIL"]
    assert drv.seen == ("nvidia-smi: Failed to initialize NVML: Driver/library version mismatch (module 580.159.04 "
                        "loaded, NVML library 580.178 installed)")
    assert drv.fix.startswith("reboot to load the installed driver (580.178)")
    assert "install a driver" not in drv.fix


def test_the_gpu_lines_blame_the_mismatch_not_a_missing_driver(tmp_path):
    from bringup.checklist.pages import gpu_checks
    from bringup.facts.gather import load_facts

    doc = json.loads(BUNDLE.read_text())
    doc["raw"].update(SMI_FAILS)
    (tmp_path / "raw.json").write_text(json.dumps(doc))
    facts, errors = load_facts(tmp_path / "raw.json", "h200-vm")
    (sees,) = [c for c in gpu_checks(facts, {}, errors) if c.name == "driver sees the GPUs"]
    assert sees.status == "FAIL"
    assert sees.seen == "nvidia-smi: Failed to initialize NVML: Driver/library version mismatch"
    assert sees.fix.startswith("reboot to load the installed driver (580.178)"), sees.fix
