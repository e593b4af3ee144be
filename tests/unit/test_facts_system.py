"""Parsers of system.* facts, on recorded real outputs."""
from __future__ import annotations

import json
from pathlib import Path

from bringup.facts.system import (
    SystemThp,
    parse_bracket_choice,
    parse_cmdline,
    parse_cpufreq,
    parse_cpuidle,
    parse_docker_daemon_json,
    parse_docker_info_json,
    parse_sysctl,
    parse_systemd,
)
from harness.captures import parse_docker_info_text

REPO = Path(__file__).resolve().parents[2]
from .fixture_hosts import FIX  # noqa: E402  (tests/fixtures/hosts, in this repository)
H200 = FIX / "h200-vm"
PUB = FIX / "public"


def sys_sections() -> list[str]:
    # sys.txt: cmdline, /proc/interrupts, cpufreq probe, cpuidle probe, THP + node dir
    return (H200 / "sys.txt").read_text().split("\n---\n")


# ---------------------------------------------------------------- systemd

def test_systemd_not_pid1_like_h200():
    v = parse_systemd("booted=no\npid1=process_api\nversion=systemd 255 (255.4-1ubuntu8.6)\n")
    assert v == {"booted": False, "pid1": "process_api", "version": 255,
                 "version_text": "systemd 255 (255.4-1ubuntu8.6)"}


def test_systemd_absent():
    v = parse_systemd("booted=no\npid1=init\nversion=\n")
    assert v["version"] is None and v["version_text"] is None and v["pid1"] == "init"
    assert parse_systemd("booted=yes\npid1=systemd\nversion=systemd 252 (252.38-1~deb12u1)\n")["booted"] is True


# ---------------------------------------------------------------- docker

def test_docker_info_text_nvidia_runtime():
    d = parse_docker_info_text((PUB / "docker-info-nvidia-runtime-nct1.17.6.txt").read_text())
    assert d["server_version"] == "28.0.0-rc.1"
    assert d["runtimes"] == ["io.containerd.runc.v2", "nvidia", "runc"]
    assert d["nvidia_runtime"] is True
    assert d["default_runtime"] == "runc"
    assert d["cgroup_driver"] == "systemd" and d["cgroup_version"] == "2"


def test_docker_info_json():
    info = {
        "ServerVersion": "28.0.0",
        "Runtimes": {"runc": {"path": "runc"}, "nvidia": {"path": "nvidia-container-runtime"}},
        "DefaultRuntime": "nvidia",
        "CgroupDriver": "systemd",
        "CgroupVersion": "2",
    }
    d = parse_docker_info_json(json.dumps(info) + "\n")
    assert d["runtimes"] == ["nvidia", "runc"]
    assert d["runtime_paths"]["nvidia"] == "nvidia-container-runtime"
    assert d["default_runtime"] == "nvidia" and d["nvidia_runtime"] is True
    assert d["errors"] == []


def test_docker_info_json_daemon_down():
    out = json.dumps({"ServerVersion": "", "Runtimes": None,
                      "ServerErrors": ["Cannot connect to the Docker daemon at unix:///var/run/docker.sock."]})
    d = parse_docker_info_json(out)
    assert d["server_version"] is None and d["runtimes"] == []
    assert d["errors"][0].startswith("Cannot connect")
    d = parse_docker_info_json("permission denied while trying to connect to the Docker daemon socket\n")
    assert d["server_version"] is None and "permission denied" in d["errors"][0]


def test_docker_daemon_json_written_by_nvidia_ctk():
    text = "\n".join(l for l in (PUB / "docker-daemon-json-nvidia-ctk.txt").read_text().splitlines()
                     if not l.startswith("#"))
    d = parse_docker_daemon_json(text)
    assert d["error"] is None
    assert d["runtimes"] == ["nvidia"]
    assert d["config"]["runtimes"]["nvidia"] == {"args": [], "path": "nvidia-container-runtime"}
    assert d["default_runtime"] is None  # nvidia-ctk does not make it the default
    assert parse_docker_daemon_json("") is None
    assert parse_docker_daemon_json("{ bad")["error"]


# ---------------------------------------------------------------- sysctl

def test_sysctl_h200():
    s = parse_sysctl((H200 / "sysctl.txt").read_text())
    assert len(s) == 190
    assert s["kernel.numa_balancing"] == "0"
    assert s["net.core.busy_poll"] == "0"
    assert s["net.core.somaxconn"] == "4096"
    assert s["net.ipv4.tcp_congestion_control"] == "bbr"
    # tab-separated vectors are normalised to single spaces
    assert s["net.ipv4.tcp_rmem"] == "4096 131072 33554432"
    assert s["net.ipv4.tcp_mem"] == "1545075 2060100 3090150"
    assert s["vm.lowmem_reserve_ratio"] == "256 256 32 0 0"
    assert s["net.ipv4.tcp_allowed_congestion_control"] == "reno bbr"


def test_sysctl_odd_lines():
    s = parse_sysctl("kernel.domainname = (none)\nfs.binfmt_misc.register = \nsysctl: permission denied on key 'x'\n"
                     "dev.cdrom.info = CD-ROM information\ndev.cdrom.info = \ndev.cdrom.info = drive name:\n")
    assert s["kernel.domainname"] == "(none)"
    assert s["fs.binfmt_misc.register"] == ""
    assert s["dev.cdrom.info"] == "CD-ROM information drive name:"
    assert not any(k.startswith("sysctl") for k in s)


# ---------------------------------------------------------------- cmdline

def test_cmdline_h200():
    c = parse_cmdline(sys_sections()[0])
    p = c["params"]
    assert p["console"] == "ttyS0"
    assert p["quiet"] is None
    assert p["pci"] == "realloc=off"  # only the first '=' splits
    assert p["mitigations"] == "auto,no_guest_host,no_guest_guest"
    assert p["driver_async_probe"] == "mlx5_core"
    assert p["rdinit"] == "/process_api"
    assert "isolcpus" not in p and "--firecracker-init" not in p
    assert c["init_args"][:3] == ["--firecracker-init", "--addr", "0.0.0.0:2024"]
    assert c["args"][0] == "mitigations=auto,no_guest_host,no_guest_guest"


def test_cmdline_quotes_and_repeats():
    c = parse_cmdline('BOOT_IMAGE=/vmlinuz console=tty0 console=ttyS0,115200 isolcpus=2-7 dyndbg="file a.c +p"\n')
    assert c["params"]["console"] == "ttyS0,115200"  # last wins
    assert c["params"]["isolcpus"] == "2-7"
    assert c["params"]["dyndbg"] == "file a.c +p"
    assert c["init_args"] == []
    assert parse_cmdline("") == {}


# ---------------------------------------------------------------- cpufreq / cpuidle

def test_cpufreq_absent_on_h200():
    # the capture's probe shows no cpufreq dir; the fact then prints nothing
    assert "No such file" in sys_sections()[2]
    assert parse_cpufreq(sys_sections()[2]) is None
    assert parse_cpufreq("") is None


def test_cpufreq_present():
    out = (
        "cpu=0 governor=performance driver=intel_pstate min=800000 max=3800000 hwmax=3800000 epp=performance\n"
        "cpu=1 governor=powersave driver=intel_pstate min=800000 max=3800000 hwmax=3800000 epp=balance_power\n"
        "no_turbo=0\n"
    )
    f = parse_cpufreq(out)
    assert f["governor"] is None and f["governors"] == ["performance", "powersave"]
    assert f["driver"] == "intel_pstate"
    assert f["cpus"]["1"]["epp"] == "balance_power" and f["cpus"]["0"]["max_khz"] == 3800000
    assert f["no_turbo"] is False and f["boost"] is None


def test_cpuidle_absent_on_h200():
    assert parse_cpuidle(sys_sections()[3]) is None
    # What the fact printed on the live H200 VM: a cpuidle dir, driver "none", no states.
    assert parse_cpuidle("driver=none\ngovernor=menu\n") is None


def test_cpuidle_states():
    out = (
        "driver=intel_idle\ngovernor=menu\n"
        "state 0 latency=0 residency=0 disable=0 name=POLL\n"
        "state 1 latency=2 residency=2 disable=0 name=C1\n"
        "state 2 latency=170 residency=600 disable=1 name=C6\n"
        "state 3 latency=1 residency=1 disable=0 name=haltpoll idle\n"
    )
    ci = parse_cpuidle(out)
    assert ci["driver"] == "intel_idle" and ci["governor"] == "menu"
    assert [s["name"] for s in ci["states"]] == ["POLL", "C1", "C6", "haltpoll idle"]
    assert ci["states"][2] == {"index": 2, "name": "C6", "latency_us": 170, "residency_us": 600, "disabled": True}


# ---------------------------------------------------------------- THP

def test_thp_h200():
    assert SystemThp.process(sys_sections()[4].splitlines()[0]) == "madvise"
    assert parse_bracket_choice("[always] madvise never") == "always"
    assert parse_bracket_choice("always defer defer+madvise [madvise] never") == "madvise"
    assert parse_bracket_choice("") is None


# --- system.container: what says this host is a container -------------------------------------------

def test_container_probe_outputs():
    from bringup.facts.system import parse_container
    # This CI VM (no systemd; Docker's marker and systemd-detect-virt say docker), a sandbox host (systemd in
    # Docker writes its record), a bare-metal or VM host (nothing printed).
    assert parse_container("container=systemd-detect-virt --container says docker\n") == \
        "systemd-detect-virt --container says docker"
    assert parse_container("container=/run/systemd/container says docker\n") == "/run/systemd/container says docker"
    assert parse_container("") is None
    assert parse_container("container=\n") is None


def test_container_probe_runs_here():
    """The probe itself, on this machine: whatever it finds is named, and a container's own marker counts."""
    import os
    import subprocess
    from bringup.facts import FACTS_BY_NAME
    fact = FACTS_BY_NAME["system.container"]
    said = fact.process(subprocess.run(["sh", "-c", fact.command], capture_output=True, text=True).stdout)
    if os.path.exists("/run/systemd/container") or os.path.exists("/.dockerenv"):
        assert said is not None
