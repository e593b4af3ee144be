"""The nvidia_driver role on a real sandbox host, from a signed `file:` mirror of TEST DOUBLES.

apt verifies the mirror's signature through the role's `signed-by` keyring,
resolves and pins the (double) packages, dpkg runs their scripts; the reboot
is a real restart of the host container, reconnected over SSH.  Checks go
through `docker exec`.
"""
from __future__ import annotations

import threading
import time

import pytest

from harness import write_inventory
from roles.nvidia_driver import NOUVEAU_FILE, PREFERENCES_FILE, UNATTENDED_FILE

from .helpers import invoke, last_report, recap, free_port
from harness.doubles.nvidia_mirror import build_mirror, running_kernel

pytestmark = pytest.mark.integration

PKGS = ["nvidia-headless-550-server", "nvidia-utils-550-server"]
NEW, OLD = "550.144.03-0ubuntu0.24.04.1", "550.127.05-0ubuntu0.24.04.1"
H = "gpu-double-01"


@pytest.fixture(scope="module")
def host(sandbox_host_factory):
    # A fixed SSH port: the reboot restarts the container, which would draw a new random one.
    return sandbox_host_factory(H, port=free_port())


@pytest.fixture(scope="module")
def project(host, tmp_path_factory):
    d = tmp_path_factory.mktemp("nvdrv")
    mirror = build_mirror(d / "build", running_kernel(host))
    mirror.copy_to(host)
    # initramfs-tools is not in the minimal image: its double logs each rebuild.
    host.exec("dpkg -i /srv/mirror/driver/initramfs-tools_*.deb >/dev/null")
    write_inventory(d / "hosts", [host], extra_vars={
        "nvidia_without_gpu": "install",  # the sandbox has no GPU: install the stack anyway
        "nvidia_driver_source": "ubuntu-server",
        "nvidia_driver_expected_gpus": 1,  # the H200 fixture nvidia-smi replays
        **mirror.inventory_vars(),
    })
    return d


def version(host, pkg) -> str:
    return host.exec(["dpkg-query", "-W", "-f=${Version}", pkg], check=False).stdout


def run(project, *args):
    return invoke("provision", "--host", H, "--roles", "nvidia_driver", *args, cwd=project, timeout=400)


def test_check_mode_plans_install_and_reboot_touches_nothing(host, project):
    # No driver loaded and no branch pinned (the default): the default install branch, 550.
    r = invoke("plan", "--host", H, "--roles", "nvidia_driver", cwd=project)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "would change" in r.stdout and "nvidia-headless-550-server: absent → 550.*" in r.stdout
    assert "reboot required: driver branch 550 not loaded" in r.stdout
    assert version(host, PKGS[0]) == ""
    assert host.exec(["ls", "/etc/apt/sources.list.d"]).stdout.strip() == ""


def test_install_holds_and_reports_reboot_required(host, project):
    r = run(project)
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert "reboot required: driver branch 550 not loaded" in out and "--allow-reboot" in out
    # Headers for the running kernel first: the DKMS double's postinst fails without them.
    assert version(host, f"linux-headers-{running_kernel(host)}") == "1.0-bringup1"
    assert [version(host, p) for p in PKGS] == [NEW, NEW]  # newest of the branch
    assert host.exec(["apt-mark", "showhold"]).stdout.split() == PKGS
    lst = host.exec(["cat", "/etc/apt/sources.list.d/nvidia-driver.list"]).stdout
    assert "deb [signed-by=/usr/share/keyrings/nvidia-driver.gpg] file:/srv/mirror/driver ./" in lst
    # The keyring is binary (dearmored on the control machine), and apt trusts the mirror through it only.
    assert host.exec(["sh", "-c", "head -c 1 /usr/share/keyrings/nvidia-driver.gpg | od -An -tx1"]
                     ).stdout.strip() in ("98", "99", "c6")
    assert "blacklist nouveau" in host.exec(["cat", NOUVEAU_FILE]).stdout
    unattended = host.exec(["cat", UNATTENDED_FILE]).stdout
    assert '"nvidia-headless-550-server";' in unattended and "Package-Blacklist" in unattended
    assert host.exec(["cat", "/var/log/update-initramfs-test-double.log"]).stdout == "update-initramfs -u\n"
    assert host.exec(["systemctl", "is-enabled", "nvidia-persistenced"]).stdout.strip() == "enabled"
    smi = host.exec(["nvidia-smi"], check=False)
    assert smi.returncode == 9 and "couldn't communicate with the NVIDIA driver" in smi.stdout
    assert last_report(project)["hosts"][0]["reboot_required"] is True


def test_rerun_without_reboot_changes_nothing_and_still_says_reboot(host, project):
    r = run(project)
    assert r.returncode == 0, r.stdout + r.stderr
    assert recap(r.stdout)[H]["changed"] == 0
    assert "reboot required" in r.stdout
    assert host.exec(["wc", "-l", "/var/log/update-initramfs-test-double.log"]).stdout.split()[0] == "1"


def test_allow_reboot_reboots_reconnects_and_verifies(host, project):
    started = host.exec(["sh", "-c", "cat /proc/1/stat | cut -d' ' -f22"]).stdout
    r = run(project, "--allow-reboot")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "rebooted: driver branch 550 not loaded" in r.stdout
    assert host.exec(["sh", "-c", "cat /proc/1/stat | cut -d' ' -f22"]).stdout != started  # a new PID 1
    smi = host.exec(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"]).stdout
    assert "NVIDIA H200" in smi and "550.144.03" in smi  # the fixture's row, this driver's version
    assert host.exec(["systemctl", "is-active", "nvidia-persistenced"]).stdout.strip() == "active"
    rep = last_report(project)["hosts"][0]
    assert rep["rebooted"] is True and rep["status"] == "ok"
    ids = {x["id"]: x for x in rep["resources"]}
    assert ids[f"reboot:{H}"]["status"] == "changed"
    assert ids["nvidia-driver:loaded 550"]["reason"].startswith("driver 550.144.03 loaded, nvidia-smi sees 1 GPU")


def test_converged_rerun_is_a_noop_in_two_round_trips(host, project):
    r = run(project)
    assert r.returncode == 0, r.stdout + r.stderr
    assert recap(r.stdout)[H]["changed"] == 0 and "reboot required" not in r.stdout
    assert last_report(project)["hosts"][0]["round_trips"] == 2


def test_a_pin_below_the_loaded_branch_is_refused_and_an_allowed_one_says_downgrade(host, project):
    """Issue 21: 550 is loaded; a pin of 535 would downgrade it.  Refused (plan and provision) with one line
    naming the loaded branch, the pin and the variable, nothing touched; allowed, the plan says "downgrade"."""
    prefs = lambda: host.exec(["cat", PREFERENCES_FILE]).stdout  # noqa: E731
    before = prefs()
    refusal = ("driver 550.144.03 (branch 550) is loaded and nvidia_driver_branch pins 535, a downgrade: set "
               "nvidia_driver_allow_downgrade: true to install 535, or unpin (nvidia_driver_branch: auto) "
               "to keep 550")
    r = invoke("plan", "--host", H, "--roles", "nvidia_driver", "--set", "nvidia_driver_branch=535", cwd=project)
    assert r.returncode == 2 and r.stdout.count(refusal) == 1, r.stdout + r.stderr
    assert "Traceback" not in r.stdout + r.stderr
    r = run(project, "--set", "nvidia_driver_branch=535")
    assert r.returncode == 2 and refusal in r.stdout, r.stdout + r.stderr
    assert recap(r.stdout)[H]["changed"] == 0
    assert [version(host, p) for p in PKGS] == [NEW, NEW] and version(host, "nvidia-headless-535-server") == ""
    assert prefs() == before and host.exec(["apt-mark", "showhold"]).stdout.split() == PKGS
    r = invoke("plan", "--host", H, "--roles", "nvidia_driver", "--set", "nvidia_driver_branch=535",
               "--set", "nvidia_driver_allow_downgrade=true", cwd=project)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "nvidia-headless-535-server: absent → 535.*" in r.stdout
    assert ("reboot required: downgrade 550 -> 535 (nvidia_driver_allow_downgrade: true): driver 550.144.03 is "
            "loaded, branch 535 is wanted") in r.stdout
    assert version(host, "nvidia-headless-535-server") == "" and prefs() == before  # a plan touches nothing


def test_audit_passes_converged_and_names_an_unheld_package(host, project):
    audit = lambda: invoke("audit", "--host", H, "--roles", "nvidia_driver", cwd=project, timeout=120)  # noqa: E731
    r = audit()
    assert r.returncode == 0, r.stdout + r.stderr
    host.exec(["apt-mark", "unhold", PKGS[1]])
    host.exec(["rm", "-f", UNATTENDED_FILE])
    r = audit()
    assert r.returncode == 2  # drift
    assert f"{H}: " in r.stdout and f"{PKGS[1]} is not held, want held" in r.stdout
    assert f"{UNATTENDED_FILE} is missing" in r.stdout
    r = run(project)  # repair, for the tests after this one
    assert r.returncode == 0, r.stdout + r.stderr
    assert audit().returncode == 0


def test_exact_version_through_the_hold_and_a_held_apt_lock(host, project):
    # Another process holds dpkg's frontend lock (an fcntl lock, what apt takes) for 6 s: apt waits.
    hold = threading.Thread(target=host.exec, args=(
        "python3 -c \"import fcntl,time; f=open('/var/lib/dpkg/lock-frontend','w'); "
        "fcntl.lockf(f, fcntl.LOCK_EX); open('/run/locked','w').close(); time.sleep(6)\"",), daemon=True)
    hold.start()
    while host.exec(["test", "-e", "/run/locked"], check=False).returncode:
        time.sleep(0.2)
    t0 = time.monotonic()
    r = run(project, "--set", f"nvidia_driver_version={OLD}", "--allow-reboot")
    assert r.returncode == 0, r.stdout + r.stderr
    assert time.monotonic() - t0 > 4  # it waited for the lock
    hold.join()
    assert [version(host, p) for p in PKGS] == [OLD, OLD]
    assert host.exec(["apt-mark", "showhold"]).stdout.split() == PKGS  # still held
    assert "rebooted: driver 550.144.03 is loaded, branch 550 (550.127.05) is wanted" in r.stdout
    assert "550.127.05" in host.exec(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]).stdout


def test_apt_lock_held_too_long_is_a_clear_error(host, project):
    # The lock is held until the run is over (at most 120 s), not for a fixed time that a loaded machine outlasts.
    host.exec("rm -f /run/locked /run/release")
    hold = threading.Thread(target=host.exec, args=(
        "python3 -c \"import fcntl,os,time; f=open('/var/lib/dpkg/lock-frontend','w'); "
        "fcntl.lockf(f, fcntl.LOCK_EX); open('/run/locked','w').close(); t=time.time()\n"
        "while not os.path.exists('/run/release') and time.time()-t<120: time.sleep(0.2)\"",), daemon=True)
    hold.start()
    while host.exec(["test", "-e", "/run/locked"], check=False).returncode:
        time.sleep(0.2)
    try:
        r = run(project, "--set", f"nvidia_driver_version={NEW}", "--set", "apt_lock_timeout=1")
    finally:
        host.exec("touch /run/release")
        hold.join()
    assert r.returncode == 2
    assert "Could not get lock /var/lib/dpkg/lock-frontend" in r.stdout
    assert [version(host, p) for p in PKGS] == [OLD, OLD]


def test_no_gpu_skips_on_cpu_profile_and_fails_on_a_gpu_profile(host, project):
    r = run(project, "--set", "nvidia_without_gpu=skip", "--set", f"nvidia_driver_version={OLD}")
    assert r.returncode == 0, r.stdout + r.stderr
    assert recap(r.stdout)[H]["skipped"] == 1
    assert "no NVIDIA GPU on this host (no PCI display device of vendor 0x10de) and gpu_profile is cpu" in r.stdout
    r = run(project, "--set", "nvidia_without_gpu=skip", "--set", "gpu_profile=l40s")
    assert r.returncode == 2
    assert "gpu_profile is l40s but this host has no NVIDIA GPU" in r.stdout


# (A version of another branch, nvidia_driver_version=535.1-1, is no longer bad input: with no branch pinned it
# pins 535, refused as a downgrade of the loaded 550 (above).)
@pytest.mark.parametrize("value", ["nvidia_driver_branch=55a", "nvidia_driver_version=latest",
                                   "nvidia_driver_source=runfile", "nvidia_without_gpu=maybe",
                                   "nvidia_driver_branch=latest", "nvidia_driver_allow_downgrade=maybe"])
def test_bad_input_is_one_line(host, project, value):
    r = run(project, "--set", value)
    assert r.returncode == 1
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: host {H}, role nvidia_driver:"), r.stderr
    assert "Traceback" not in r.stdout + r.stderr
