"""Resources plan from what they read, and their commands converge for real.

The read and write snippets run in a real local shell on files under a temp
folder: the plan is checked, then applied, then read again.
"""
import os
import stat
import subprocess

import pytest

from bringup.errors import InputError
from bringup.resources import Command, Directory, File, Packages, Service, Sysctl


def sh(script):
    return subprocess.run(["sh", "-c", script], capture_output=True, text=True)


def converge(res):
    """read → plan → apply → read → plan; returns (first plan, second plan)."""
    p1 = res.plan(sh(res.read()).stdout)
    for cmd in p1.commands:
        r = sh(cmd)
        assert r.returncode == 0, r.stdout + r.stderr
    p2 = res.plan(sh(res.read()).stdout)
    return p1, p2


def test_file_created_then_noop_with_reason(tmp_path):
    path = tmp_path / "sub" / "f.conf"
    f = File(str(path), content="a = 1\n", mode="0640", owner=None, group=None)
    p1, p2 = converge(f)
    assert p1.changed and p1.changes["content"][0] == "absent"
    assert path.read_text() == "a = 1\n" and stat.S_IMODE(path.stat().st_mode) == 0o640
    assert not p2.changed and "already has this content" in p2.reason


def test_file_replaced_atomically_with_backup_and_diff(tmp_path):
    path = tmp_path / "f.conf"
    path.write_text("a = 0\n")
    f = File(str(path), content="a = 1\n", owner=None, group=None)
    p1, p2 = converge(f)
    assert "-a = 0" in p1.diff and "+a = 1" in p1.diff
    backups = [p for p in os.listdir(tmp_path) if p.startswith("f.conf.") and p.endswith(".bak")]
    assert len(backups) == 1 and (tmp_path / backups[0]).read_text() == "a = 0\n"
    assert not [p for p in os.listdir(tmp_path) if ".bringup." in p]  # no temp file left
    assert not p2.changed


def test_file_mode_only_change(tmp_path):
    path = tmp_path / "f"
    path.write_text("x")
    path.chmod(0o600)
    p1, p2 = converge(File(str(path), content="x", mode="0644", owner=None, group=None))
    assert p1.changes == {"mode": ("600", "644")} and not p2.changed


def test_file_refuses_a_symlink(tmp_path):
    (tmp_path / "t").write_text("x")
    (tmp_path / "l").symlink_to(tmp_path / "t")
    f = File(str(tmp_path / "l"), content="y")
    assert "not a regular file" in f.plan(sh(f.read()).stdout).error


@pytest.mark.parametrize("bad", ["relative/path", "/a/../b", "/a\nb"])
def test_file_path_validation(bad):
    with pytest.raises(InputError):
        File(bad, content="")


def test_directory(tmp_path):
    d = Directory(str(tmp_path / "a" / "b"), mode="0750", owner=None, group=None)
    p1, p2 = converge(d)
    assert p1.changes["state"] == ("absent", "directory") and not p2.changed
    assert stat.S_IMODE((tmp_path / "a" / "b").stat().st_mode) == 0o750


def test_sysctl_plans_from_proc_values():
    s = Sysctl("net.ipv4.tcp_rmem", "4096 131072 16777216")
    assert not s.plan("value=4096\t131072\t16777216\n").changed  # tabs as the kernel prints them
    p = s.plan("value=4096\t87380\t6291456\n")
    assert p.changes == {"net.ipv4.tcp_rmem": ("4096 87380 6291456", "4096 131072 16777216")}
    assert p.commands == ["printf '%s\\n' '4096 131072 16777216' > /proc/sys/net/ipv4/tcp_rmem"]
    miss = s.plan("absent\n")
    assert miss.skipped and "no such key" in miss.reason


def test_sysctl_reads_the_real_kernel():
    s = Sysctl("net.core.somaxconn", 4096)
    out = sh(s.read()).stdout
    assert out.startswith("value=") and out[6:].strip().isdigit()
    assert Sysctl("net.core.no_such_key", 1).plan(sh(Sysctl("net.core.no_such_key", 1).read()).stdout).skipped


@pytest.mark.parametrize("key,value", [("net..core", 1), ("Net.core.x", 1), ("net", 1), ("net.core.x; rm", 1),
                                       ("net.core.x", True), ("net.core.x", "1\n2"), ("net.core.x", "$(reboot)"),
                                       ("net.core.x", 1.5), ("net.core.x", "")])
def test_sysctl_refuses_malformed(key, value):
    with pytest.raises(InputError):
        Sysctl(key, value)


def test_packages_plan_one_install_for_all_missing():
    p = Packages({"curl": None, "docker.io": "24.*", "jq": "1.6-2.1"})
    out = "curl 7.88.1-10 ii \ndocker.io 20.10.24+dfsg1-1 ii \njq 1.6-2.1 rc \n"
    plan = p.plan(out)
    assert len(plan.commands) == 1
    assert plan.commands[0].endswith("install -- 'docker.io=24.*' jq=1.6-2.1")
    assert plan.changes == {"docker.io": ("20.10.24+dfsg1-1", "24.*"), "jq": ("absent", "1.6-2.1")}
    ok = p.plan("curl 7.88.1-10 ii \ndocker.io 24.0.5-0 ii \njq 1.6-2.1 ii \n")
    assert not ok.changed and "docker.io 24.0.5-0" in ok.reason


def test_packages_dnf_and_absent():
    p = Packages(["tuned"], manager="dnf", present=False)
    assert p.plan("tuned 2.21.0-1.el9 ii\n").commands == ["dnf -y -q remove -- tuned"]
    assert not p.plan("").changed
    with pytest.raises(InputError):
        Packages(["bad name"])


def test_packages_read_real_dpkg():
    p = Packages(["dpkg"])
    assert not p.plan(sh(p.read()).stdout).changed


def test_service_plans():
    s = Service("irqbalance", running=True, enabled=True, daemon_reload=True)
    p = s.plan("load=loaded\nactive=inactive\nenabled=disabled\n")
    assert p.commands == ["systemctl daemon-reload", "systemctl enable -- irqbalance", "systemctl start -- irqbalance"]
    assert not s.plan("load=loaded\nactive=active\nenabled=enabled\n").changed
    masked = s.plan("load=masked\nactive=inactive\nenabled=masked\n")
    assert masked.commands[1] == "systemctl unmask -- irqbalance"
    later = s.plan("load=not-found\nactive=inactive\nenabled=\n")  # the role may install it first
    assert later.commands == ["systemctl daemon-reload", "systemctl enable -- irqbalance",
                              "systemctl start -- irqbalance"]
    assert later.changes["unit"] == ("not found yet", "loaded")
    assert "systemd is not running" in s.plan("systemd=no\n").error


def test_command_guards(tmp_path):
    marker = tmp_path / "done"
    c = Command("make marker", f"touch {marker}", creates=str(marker))
    p1, p2 = converge(c)
    assert p1.changed and not p2.changed and p2.reason == f"{marker} exists"
    u = Command("x", "false", unless="true")
    assert u.plan(sh(u.read()).stdout).reason == "check passed: true"
    o = Command("x", "true", onlyif="false")
    assert "condition not met" in o.plan(sh(o.read()).stdout).reason
    assert "runs every time" in Command("x", "true").plan("").changes["run"][0]


def test_kernel_cmdline_reports_a_pending_reboot_until_booted_with_the_words():
    from bringup.resources.boot import KernelCmdline
    k = KernelCmdline(["skew_tick=1", "nohz_full=2-5"])
    pending = k.plan("BOOT_IMAGE=/vmlinuz ro quiet skew_tick=1\n")
    assert not pending.commands and pending.reboot == "kernel command line lacks nohz_full=2-5 (boot loader updated)"
    done = k.plan("ro quiet skew_tick=1 nohz_full=2-5\n")
    assert done.reboot is None and "booted with" in done.reason
    with pytest.raises(InputError):
        KernelCmdline(["two words"])


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_json_file_refuses_non_finite_numbers(bad):
    from bringup.resources.jsonfile import JsonFile

    with pytest.raises(InputError, match="NaN and Infinity are not JSON"):
        JsonFile("/etc/docker/daemon.json", {"default-shm-size": bad})


def test_non_finite_daemon_config_is_refused_before_connecting(tmp_path):
    import subprocess
    import sys

    from pathlib import Path

    import yaml

    repo = Path(__file__).resolve().parents[2]
    (tmp_path / "hosts").write_text(yaml.safe_dump({"all": {"hosts": {"h": {"ansible_host": "192.0.2.1"}}}}))
    r = subprocess.run([sys.executable, "-m", "invoke", "--search-root", str(repo), "provision", "--host", "h",
                        "--roles", "docker", "--set", "docker_daemon_config={mtu: .nan}"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, r.stdout + r.stderr  # bad input, nothing contacted (192.0.2.1 would be exit 4)
    assert "docker_daemon_config: NaN and Infinity are not JSON" in r.stderr and "Traceback" not in r.stderr
