"""The NVIDIA stack's resources and roles planned on real outputs (tests/fixtures/hosts/)."""
from __future__ import annotations

import base64
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from bringup.errors import InputError
from bringup.facts.os_ import parse_os_release
from bringup.facts.pci import parse_pci_devices
from bringup.facts.nvidia_csv import parse_query_gpu_csv
from bringup.hardware.gpu import gpu_gate, nvidia_gpus
from bringup.resources import Packages
from bringup.resources.apt import AptRepository
from bringup.resources.openpgp import dearmor
from bringup.resources.guard import Fail, Skip
from bringup.resources.hold import Hold
from bringup.resources.image import DockerImage
from bringup.resources.jsonfile import JsonFile, merge
from bringup.resources.nvidia import NvidiaDriverLoaded, upstream_version
from bringup.engine.roles import HostContext, load_roles
from bringup.engine.templates import Templates
from harness.doubles.nvidia_mirror import stop_agent

ROOT = Path(__file__).resolve().parents[2]
from .fixture_hosts import FIX  # noqa: E402  (tests/fixtures/hosts, in this repository)
H200 = FIX / "h200-vm"


def strip(text: str) -> str:
    return "\n".join(l for l in text.splitlines() if not l.startswith("#"))


def h200_facts() -> dict:
    os_txt = (H200 / "os.txt").read_text()
    return {
        "os.release": parse_os_release(os_txt[os_txt.index("PRETTY_NAME"):]),
        "os.kernel": {"release": os_txt.split()[2]},
        # pci.txt holds other commands' outputs after its first "---": the PCI listing is the first section.
        "pci.devices": parse_pci_devices((H200 / "pci.txt").read_text().split("\n---\n")[0]),
        "nvidia.smi": parse_query_gpu_csv((H200 / "nvidia-smi-query.csv").read_text()),
        "system.systemd": {"booted": False, "pid1": "process_api"},  # as on that host
    }


@pytest.fixture(scope="module")
def roles():
    return load_roles(ROOT)[1]


def ctx(role, facts, **vars):
    return HostContext("h200", {**role.defaults, "gpu_profile": "h200", **vars}, facts,
                       Templates(ROOT / "templates").render)


# -------------------------------------------------------------- loaded driver

def test_driver_loaded_on_the_h200_capture():
    out = (H200 / "nvidia-smi-query.csv").read_text() + "smi_rc=0\n"
    assert NvidiaDriverLoaded("580", expected_gpus=1).plan(out).reason == \
        "driver 580.159.04 loaded, nvidia-smi sees 1 GPU(s): NVIDIA H200"
    p = NvidiaDriverLoaded("550").plan(out)
    assert not p.changed and p.reboot == "driver 580.159.04 is loaded, branch 550 is wanted"
    p = NvidiaDriverLoaded("580", version="580.126.09-0ubuntu1").plan(out)
    assert p.reboot == "driver 580.159.04 is loaded, branch 580 (580.126.09) is wanted"
    assert NvidiaDriverLoaded("580", version="580.159.04-0ubuntu0.24.04.1").plan(out).reboot is None
    assert "sees 1 GPU(s) (NVIDIA H200), expected 2" in NvidiaDriverLoaded("580", expected_gpus=2).plan(out).error


def test_driver_not_loaded_messages():
    p = NvidiaDriverLoaded("550").plan("Failed to initialize NVML: Driver/library version mismatch\n"
                                       "NVML library version: 550.144\nsmi_rc=18\n")
    assert p.reboot == "driver branch 550 not loaded (nvidia-smi: Failed to initialize NVML: Driver/library " \
                       "version mismatch)"
    assert NvidiaDriverLoaded("550").plan("smi=missing\n").reboot.startswith("driver branch 550 not loaded")
    assert upstream_version("3:550.54.15-1.el9") == "550.54.15"


# -------------------------------------------------------------- GPU detection and roles on H200 facts

def test_h200_pci_capture_has_one_nvidia_gpu():
    gpus = nvidia_gpus(h200_facts())
    assert [(g["vendor"], g["class"]) for g in gpus] == [("0x10de", "0x030200")]


def test_gpu_gate():
    class H:
        def __init__(self, facts, **vars):
            self.facts, self.vars = facts, vars
    assert gpu_gate(H(h200_facts(), gpu_profile="h200"), "x") is None
    no_gpu = {"pci.devices": [d for d in h200_facts()["pci.devices"] if d["vendor"] != "0x10de"]}
    assert isinstance(gpu_gate(H(no_gpu, gpu_profile="cpu"), "x")[0], Skip)
    fail = gpu_gate(H(no_gpu, gpu_profile="l40s"), "x")[0]
    assert isinstance(fail, Fail) and "gpu_profile is l40s but this host has no NVIDIA GPU" in fail.error
    assert gpu_gate(H(no_gpu, gpu_profile="l40s", nvidia_without_gpu="install"), "x") is None


def test_driver_role_on_the_h200_facts(roles):
    role = roles["nvidia_driver"]
    res = role.resources(ctx(role, h200_facts()))
    pkgs = [r for r in res if isinstance(r, Packages)]
    assert pkgs[0].packages == {"linux-headers-6.18.44-fc-v973-gpu": None}  # the running kernel's
    # No branch pinned: the loaded 580 is kept (issue 21: the defaults used to plan 550 over it).
    assert pkgs[1].packages == {"nvidia-headless-580-server": "580.*", "nvidia-utils-580-server": "580.*"}
    skip = next(r for r in res if isinstance(r, Skip))
    assert skip.name == "nvidia-persistenced" and "PID 1 is process_api" in skip.reason
    assert not any(isinstance(r, AptRepository) for r in res)  # Ubuntu's own archive
    loaded = res[-1]
    assert isinstance(loaded, NvidiaDriverLoaded) and loaded.expected_gpus == 1
    out = (H200 / "nvidia-smi-query.csv").read_text() + "smi_rc=0\n"
    assert loaded.plan(out).reason == "driver 580.159.04 loaded, nvidia-smi sees 1 GPU(s): NVIDIA H200"
    res = role.resources(ctx(role, h200_facts(), nvidia_driver_source="cuda", nvidia_driver_modules="open"))
    repo = next(r for r in res if isinstance(r, AptRepository))
    assert repo.url == "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/x86_64/"
    assert repo.key_url.endswith("/3bf863cc.pub")
    assert any(isinstance(r, Packages) and "nvidia-open-580" in r.packages for r in res)


def _without_driver(facts: dict) -> dict:
    # nvidia-smi absent or failing, and no nvidia module in /sys/module (driver.owner's read says so): no driver
    # loaded.  nvidia-smi's silence alone is not known to be that (tests/unit/test_driver_unknown.py).
    from bringup.facts.driver import parse_driver_owner

    return {**facts, "nvidia.smi": [],
            "driver.owner": parse_driver_owner("version=\nmanager=dpkg\nsmi=\nmodule=\nend=driver\n")}


@pytest.mark.parametrize("vars,error", [
    ({"nvidia_driver_branch": 550},
     "driver 580.159.04 (branch 580) is loaded and nvidia_driver_branch pins 550, a downgrade: set "
     "nvidia_driver_allow_downgrade: true to install 550, or unpin (nvidia_driver_branch: auto) to keep 580"),
    ({"nvidia_driver_version": "535.216.01-0ubuntu0.24.04.1"},
     "driver 580.159.04 (branch 580) is loaded and nvidia_driver_version pins 535.216.01-0ubuntu0.24.04.1, a "
     "downgrade: set nvidia_driver_allow_downgrade: true to install 535, or unpin (remove nvidia_driver_version) "
     "to keep 580"),
])
def test_a_pin_below_the_loaded_driver_is_refused_touching_nothing(roles, vars, error):
    role = roles["nvidia_driver"]
    res = role.resources(ctx(role, h200_facts(), **vars))
    assert len(res) == 1 and isinstance(res[0], Fail), res  # nothing else planned: nothing touched
    assert res[0].plan("true").error == error


def test_an_allowed_downgrade_says_so_in_the_plan(roles):
    role = roles["nvidia_driver"]
    res = role.resources(ctx(role, h200_facts(), nvidia_driver_branch=550, nvidia_driver_allow_downgrade=True))
    assert [r.packages for r in res if isinstance(r, Packages)][1] == {
        "nvidia-headless-550-server": "550.*", "nvidia-utils-550-server": "550.*"}
    out = (H200 / "nvidia-smi-query.csv").read_text() + "smi_rc=0\n"
    assert res[-1].plan(out).reboot == ("downgrade 580 -> 550 (nvidia_driver_allow_downgrade: true): "
                                        "driver 580.159.04 is loaded, branch 550 is wanted")
    # A pin at or above the loaded branch is no downgrade, and says none.
    for pin in (580, 590):
        loaded = role.resources(ctx(role, h200_facts(), nvidia_driver_branch=pin))[-1]
        assert loaded.branch == str(pin) and "downgrade" not in (loaded.plan(out).reboot or "")


def test_no_driver_loaded_installs_the_default_branch_unless_the_image_needs_newer(roles):
    role = roles["nvidia_driver"]
    image = "nvcr.io/nvidia/tritonserver:{}-py3"
    res = role.resources(ctx(role, _without_driver(h200_facts()), triton_image=image.format("24.06")))
    assert [r.packages for r in res if isinstance(r, Packages)][1] == {
        "nvidia-headless-550-server": "550.*", "nvidia-utils-550-server": "550.*"}
    res = role.resources(ctx(role, _without_driver(h200_facts()), triton_image=image.format("25.06")))
    assert len(res) == 1 and res[0].plan("true").error == (
        "no driver is loaded and Triton 25.06 (CUDA 12.9.1) needs R575+ (triton_image), newer than the branch "
        "installed by default (550): set nvidia_driver_branch to 575 or newer")
    res = role.resources(ctx(role, _without_driver(h200_facts()), triton_image=image.format("25.06"),
                             nvidia_driver_branch="580"))
    assert res[-1].branch == "580"


def test_a_loaded_branch_too_old_for_the_image_is_refused_not_replaced(roles):
    role = roles["nvidia_driver"]
    facts = {**h200_facts(), "nvidia.smi": [{**h200_facts()["nvidia.smi"][0], "driver_version": "535.54.03"}]}
    res = role.resources(ctx(role, facts, triton_image="nvcr.io/nvidia/tritonserver:24.06-py3"))
    assert len(res) == 1 and res[0].plan("true").error == (
        "driver 535.54.03 is loaded and Triton 24.06 (CUDA 12.5.0) needs R545+ (triton_image): set "
        "nvidia_driver_branch to 545 or newer to upgrade it, or pick an older triton_image")
    # 535.161.08 runs 24.06 through data-center forward compatibility: kept.
    facts["nvidia.smi"][0]["driver_version"] = "535.161.08"
    res = role.resources(ctx(role, facts, triton_image="nvcr.io/nvidia/tritonserver:24.06-py3"))
    assert res[-1].branch == "535"


@pytest.mark.parametrize("vars,error", [
    ({"nvidia_driver_branch": "55a"}, "nvidia_driver_branch"),
    ({"nvidia_driver_branch": "latest"}, "must be auto or a driver branch like 580 or 550"),
    ({"nvidia_driver_version": "*"}, "nvidia_driver_version * names no driver branch"),
    ({"nvidia_driver_branch": 580, "nvidia_driver_version": "550.144.03-*"}, "is not on nvidia_driver_branch 580"),
    ({"nvidia_driver_allow_downgrade": "true"}, "nvidia_driver_allow_downgrade"),
])
def test_driver_branch_variables_are_checked(roles, vars, error):
    role = roles["nvidia_driver"]
    with pytest.raises(InputError, match=re.escape(error)):
        role.validate({**role.defaults, **vars})
    role.validate({**role.defaults, "nvidia_driver_branch": None})  # null: auto


def test_docker_repo_path_on_ubuntu(roles):
    role = roles["docker"]
    res = role.resources(ctx(role, h200_facts(), docker_source="docker", docker_version="5:24.0.*"))
    repo = res[0]
    assert isinstance(repo, AptRepository)
    assert repo.content.decode().splitlines()[-1] == (
        "deb [signed-by=/usr/share/keyrings/docker.gpg] https://download.docker.com/linux/ubuntu noble stable")
    assert res[1].packages == {"docker-ce": "5:24.0.*", "docker-ce-cli": "5:24.0.*", "containerd.io": None}
    assert isinstance(res[2], Hold) and res[2].packages == ["docker-ce", "docker-ce-cli"]
    assert "docker-compose-plugin" in res[3].cmd
    assert isinstance(res[-1], Skip) and "PID 1 is process_api" in res[-1].reason


def test_dcgm_role_skips_without_systemd_and_counters_csv(roles):
    role = roles["dcgm_exporter"]
    assert isinstance(role.resources(ctx(role, h200_facts()))[0], Skip)
    facts = {**h200_facts(), "system.systemd": {"booted": True}}
    res = role.resources(ctx(role, facts, dcgm_exporter_extra_counters=[["DCGM_FI_DEV_MEM_CLOCK", "gauge", "x."]]))
    csv = res[1].content.decode()
    rows = [l for l in csv.splitlines() if l and not l.startswith("#")]
    assert rows[0] == "DCGM_FI_DEV_GPU_UTIL, gauge, GPU utilization (in %)." and len(rows) == 9
    unit = res[3].content.decode()
    assert "--gpus all --cap-add SYS_ADMIN -p 9400:9400" in unit
    assert "nvcr.io/nvidia/k8s/dcgm-exporter:3.3.9-3.6.1-ubuntu22.04 -f /etc/dcgm-exporter/bringup-counters.csv" in unit
    with pytest.raises(InputError, match="not a DCGM field"):
        role.validate({**role.defaults, "dcgm_exporter_counters": [["GPU_UTIL", "gauge", "x"]]})


# -------------------------------------------------------------- resources

def test_hold_plans_the_difference():
    h = Hold(["a", "b"])
    assert h.plan("a\n").commands == ["apt-mark hold -- b"]
    assert not h.plan("a\nb\nzz\n").changed
    d = Hold(["nvidia-driver"], manager="dnf")
    assert not d.plan("Last metadata expiration check: 0:01:02 ago.\nnvidia-driver-3:550.54.15-1.el9.*\n").changed


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def test_json_merge_keeps_other_keys_and_fails_on_invalid_json():
    ctk = strip((FIX / "public" / "docker-daemon-json-nvidia-ctk.txt").read_text())
    want = {"runtimes": {"nvidia": {"args": [], "path": "nvidia-container-runtime"}}}
    j = JsonFile("/etc/docker/daemon.json", want, command="nvidia-ctk runtime configure --runtime=docker")
    assert not j.plan(f"type=file\ncontent={_b64(ctk)}\n").changed  # what nvidia-ctk writes satisfies it
    p = j.plan(f"type=file\ncontent={_b64(json.dumps({'live-restore': True}))}\n")
    assert p.commands[-1] == "nvidia-ctk runtime configure --runtime=docker" and ".bak" in p.commands[0]
    assert "not valid JSON" in j.plan(f"type=file\ncontent={_b64('{oops')}\n").error
    assert merge({"a": 1, "log-opts": {"x": "1"}}, {"log-opts": {"y": "2"}, "a": None}) == \
        {"log-opts": {"x": "1", "y": "2"}}


def test_dearmor_matches_gpg(tmp_path):
    env = {**os.environ, "GNUPGHOME": str(tmp_path)}
    os.chmod(tmp_path, 0o700)
    try:
        subprocess.run(["gpg", "--batch", "--passphrase", "", "--quick-gen-key", "t <t@invalid>", "ed25519", "sign",
                        "never"], env=env, check=True, capture_output=True)
        binary = subprocess.run(["gpg", "--export"], env=env, check=True, capture_output=True).stdout
        armored = subprocess.run(["gpg", "--armor", "--export"], env=env, check=True, capture_output=True).stdout
    finally:
        stop_agent(tmp_path)
    assert dearmor(armored) == binary and dearmor(binary) == binary


def test_apt_repository_moves_conflicting_lists_and_refreshes_only_on_change():
    key = Path("/usr/share/keyrings/debian-archive-keyring.gpg").read_bytes()  # a real key: fakes are refused
    r = AptRepository("tk", url="file:/srv/m", suite="./", key=key)
    p = r.plan("conflict=/etc/apt/sources.list.d/old.list\n")
    assert any("mv -f -- /etc/apt/sources.list.d/old.list /var/backups/bringup-apt/old.list" in c for c in p.commands)
    assert "apt-get -q update -o Dir::Etc::sourcelist=/etc/apt/sources.list.d/tk.list" in p.commands[-1]
    import hashlib
    ls, ks = hashlib.sha256(r.content).hexdigest(), hashlib.sha256(key).hexdigest()
    assert not r.plan(f"list={ls}\nkey={ks}\nstamp={ls} {ks}\n").changed
    assert r.plan(f"list={ls}\nkey={ks}\nstamp=old\n").changes == {
        "indexes": ("not updated since the list or key changed", "updated")}
    with pytest.raises(InputError, match="needs components"):
        AptRepository("x", url="http://m", suite="noble", key=b"k")


def test_docker_image_push_plans():
    img = DockerImage("example/img:1", source="push")
    img._local = "sha256:" + "a" * 64
    assert not img.plan(f"id=sha256:{'a' * 64}\n").changed
    p = img.plan("id=\n")
    assert p.upload.local == ["docker", "save", "example/img:1"] and p.upload.remote == "docker load"
    img._local = None
    assert "is not on the control machine" in img.plan("id=\n").error
    with pytest.raises(InputError):
        DockerImage("x;reboot")
