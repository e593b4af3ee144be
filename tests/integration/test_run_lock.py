"""Issue 34 item 11 on a real sandbox host: the run lock (bringup.ssh.runlock) fences a run that is gone, and no
other local user can take it or make it fail for the wrong reason.

- The control machine SIGKILLed while a write of its run sleeps on the host: that script lives on (an orphan);
  the next run waits for it (or names it, by pid, when it outlasts run_lock_timeout) and it never lands after.
- An unprivileged user who holds flock on their own /run/lock/bringup.lock (the old place), or tries the new
  one, blocks nothing.
- A link, a folder, a read-only folder, a missing flock(1), a 20 MB owner file: each one line of its own.

Checks go through ``docker exec``.
"""
from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from .helpers import REPO, free_port, invoke, recap, role_project

pytestmark = pytest.mark.integration

FILE = "/srv/fence/file"

# A write whose command sleeps before it lands: the window in which the control machine is killed.
ROLE = '''
from bringup.ssh.command import sh
from bringup.resources import Command


def resources(host):
    tag, secs = host.vars["tag"], host.vars["secs"]
    return [Command("write " + tag, sh("mkdir -p /srv/fence && touch /srv/fence/started-%s && sleep %s && "
                                       "printf '%%s\\\\n' %s > %s", tag, secs, tag, "/srv/fence/file"),
                    unless=sh("grep -qx %s %s", tag, "/srv/fence/file"))]
'''


@pytest.fixture()
def project(sandbox_host, tmp_path) -> Path:
    sandbox_host.exec("rm -rf /srv/fence; pkill -x -f 'sleep 3[0-9]' || true")
    return role_project(tmp_path, {"fence": ROLE}, {"h": sandbox_host})


def with_vars(project: Path, **extra) -> None:
    inv = yaml.safe_load((project / "hosts").read_text())
    inv["all"]["hosts"]["h"].update(extra)
    (project / "hosts").write_text(yaml.safe_dump(inv))


def provision(project: Path, tag: str, secs: int, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return invoke("provision", "--host", "h", "--set", f"tag={tag}", "--set", f"secs={secs}", *args, cwd=project,
                  timeout=timeout)


def killed_mid_write(host, project: Path, tag: str, secs: int) -> None:
    """A provision SIGKILLed (the whole control side at once) while its write sleeps on the host."""
    proc = subprocess.Popen([sys.executable, "-m", "invoke", "--search-root", str(REPO), "provision", "--host", "h",
                             "--set", f"tag={tag}", "--set", f"secs={secs}"], cwd=project,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 120
    while host.exec(["test", "-e", f"/srv/fence/started-{tag}"], check=False).returncode:
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()[0]
        time.sleep(0.2)
    proc.kill()
    proc.wait(30)


def content(host) -> str:
    return host.exec(f"cat {FILE} 2>/dev/null || true").stdout


def orphan_running(host, secs: int) -> bool:
    return host.exec(["pgrep", "-x", "-f", f"sleep {secs}"], check=False).returncode == 0


def failure(out: str) -> str:
    """The host's one failure line of a provision's output."""
    lines = [l for l in out.splitlines() if "run lock" in l or "bringup run" in l or "flock" in l]
    assert len(lines) == 1, out
    return lines[0]


@pytest.mark.reliability(item=34, fault="provision SIGKILLed mid-write (its script orphaned on the host), then "
                         "the next run", checks=("next run converges", "whole old or new file"))
def test_a_killed_runs_orphaned_write_never_lands_after_the_next_run(sandbox_host, project):
    host = sandbox_host
    killed_mid_write(host, project, "a", 8)
    assert orphan_running(host, 8)  # the control side is gone, its write sleeps on
    r = provision(project, "b", 0)
    assert r.returncode == 0, r.stdout + r.stderr
    assert recap(r.stdout)["h"]["changed"] == 1, r.stdout
    assert content(host) == "b\n"
    assert not orphan_running(host, 8)  # it waited for the orphan to end, then wrote
    deadline = time.monotonic() + 30  # (without the fence: the orphan still sleeps; it lands within 8 s)
    while orphan_running(host, 8) and time.monotonic() < deadline:
        time.sleep(0.5)
    time.sleep(1)
    assert content(host) == "b\n"  # nothing landed after the run
    plan = invoke("plan", "--host", "h", "--set", "tag=b", "--set", "secs=0", cwd=project)
    assert plan.returncode == 0 and "would change" not in plan.stdout, plan.stdout + plan.stderr


@pytest.mark.reliability(item=34, fault="an orphaned write of a killed run that outlasts run_lock_timeout",
                         checks=("one clear line", "exit code", "nothing touched", "next run converges"))
def test_an_orphan_that_outlasts_the_wait_is_named_by_pid_and_the_run_touches_nothing(sandbox_host, project):
    host = sandbox_host
    with_vars(project, run_lock_timeout=3)
    killed_mid_write(host, project, "a", 37)
    r = provision(project, "b", 0)
    assert r.returncode == 2, r.stdout + r.stderr
    line = failure(r.stdout)
    assert "a script of an earlier bringup run (" in line and "still runs on this host and may still write" in line
    assert "waited 3 s (run_lock_timeout)" in line and "sleep 37" in line, line
    assert "Traceback" not in r.stdout + r.stderr
    assert content(host) == ""  # the new run wrote nothing
    pids = re.search(r"\(kill ([0-9 ]+)\)", line).group(1).split()
    host.exec(["kill", *pids])  # the fix the line gives
    r = provision(project, "b", 0)
    assert r.returncode == 0, r.stdout + r.stderr
    assert content(host) == "b\n"


@pytest.mark.reliability(item=34, fault="an unprivileged user holds flock on their own /run/lock/bringup.lock, "
                         "and tries the lock folder", checks=("next run converges", "no hang"))
def test_an_unprivileged_user_cannot_block_a_provision(sandbox_host, project):
    host = sandbox_host
    host.exec("id mallory >/dev/null 2>&1 || useradd -m mallory; rm -rf /run/lock/bringup.lock*")
    # The old place, taken first and held: a file of mallory's own, a link beside it.
    host.exec("su mallory -s /bin/sh -c 'touch /run/lock/bringup.lock && ln -sf /etc/shadow /run/lock/bringup.lock.owner"
              " && (flock /run/lock/bringup.lock sleep 300 >/dev/null 2>&1 &)'")
    started = time.monotonic()
    r = provision(project, "b", 0, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert time.monotonic() - started < 45  # not the 60 s wait for a lock that mallory holds
    assert content(host) == "b\n"
    # The new place is root's alone: mallory can neither open nor make the lock.
    assert host.exec("stat -c '%U %a' /run/bringup").stdout.split() == ["root", "700"]
    tried = host.exec("su mallory -s /bin/sh -c 'flock -n /run/bringup/run.lock true; "
                      "flock -n /run/bringup/scripts.lock true; ls /run/bringup'", check=False)
    assert tried.returncode != 0 and tried.stderr.count("Permission denied") == 3, tried.stderr
    host.exec("pkill -u mallory || true; rm -f /run/lock/bringup.lock /run/lock/bringup.lock.owner")


@pytest.mark.reliability(item=34, fault="the run lock's place a link, a folder, read-only; flock(1) missing",
                         variants=4, checks=("one clear line", "exit code", "nothing touched"))
@pytest.mark.parametrize("setup, undo, words", [
    ("ln -s /tmp /run/bringup", "rm -f /run/bringup",
     "the host's run lock is refused: /run/bringup: a symbolic link, not a folder; remove it (rm -r -- /run/bringup)"),
    ("mkdir -p -m 0700 /run/bringup/run.lock", "rm -rf /run/bringup",
     "the host's run lock is refused: /run/bringup/run.lock: a folder, not a regular file; remove it"),
    ("mkdir -p -m 0700 /run/bringup && mount -t tmpfs -o ro,mode=0700 tmpfs /run/bringup",
     "umount /run/bringup; rm -rf /run/bringup",
     "the host's run lock cannot be used: /run/bringup/run.lock: "),
    ("mv /usr/bin/flock /usr/bin/flock.away", "mv /usr/bin/flock.away /usr/bin/flock",
     "flock(1) was not found on the host: install util-linux"),
])
def test_each_unusable_lock_is_its_own_line(sandbox_host, project, setup, undo, words):
    host = sandbox_host
    host.exec("rm -rf /run/bringup")
    host.exec(setup)
    try:
        r = provision(project, "b", 0)
    finally:
        host.exec(undo)
    assert r.returncode == 2, r.stdout + r.stderr
    line = failure(r.stdout)
    assert words in line, line
    if "cannot be used" in words:
        assert "Read-only file system" in line and "flock(1)" not in line, line
    assert "Traceback" not in r.stdout + r.stderr
    assert content(host) == "" and host.exec("ls /srv/fence 2>/dev/null || true").stdout == ""  # nothing ran
    r = provision(project, "b", 0)  # put right: the next run converges
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.reliability(item=34, fault="a 20 MB owner file while another run holds the lock",
                         checks=("one clear line", "no hang", "exit code"))
def test_a_huge_owner_file_is_a_short_line_at_once(sandbox_host, project):
    host = sandbox_host
    with_vars(project, run_lock_timeout=2)
    assert provision(project, "a", 0).returncode == 0  # the folder made
    host.exec("head -c 20000000 /dev/zero | tr '\\0' x > /run/bringup/owner; "
              "(flock /run/bringup/run.lock sleep 120 >/dev/null 2>&1 &)")
    try:
        started = time.monotonic()
        r = provision(project, "b", 0)
        took = time.monotonic() - started
    finally:
        host.exec("pkill -x -f 'sleep 120' || true")
    assert r.returncode == 2, r.stdout + r.stderr
    line = failure(r.stdout)
    # The lock is held by a process that is not a bringup run (flock(1) by hand): named as such, by pid.
    assert "the host's run lock is held by another process, not by a bringup run: pid " in line, line
    assert "it is not a stale lock" in line and "waited 2 s (run_lock_timeout)" in line, line
    assert len(line) < 600, len(line)
    assert took < 40, took
    assert content(host) == "a\n"


@pytest.mark.reliability(item=34, fault="the run lock for a login that is not root: through sudo with a password, "
                         "and without become (its own folder)", variants=2, checks=("next run converges",))
def test_a_non_root_login_takes_the_lock_with_and_without_become(sandbox_host, project):
    from .test_connection import _sudo_user

    host = sandbox_host
    _sudo_user(host, "locker", "Lock-pw-34", nopasswd=False)
    with_vars(project, ansible_user="locker", ansible_become=True, ansible_become_password="Lock-pw-34")
    r = provision(project, "a", 0)
    assert r.returncode == 0, r.stdout + r.stderr
    assert content(host) == "a\n"
    assert "locker" not in host.exec("stat -c %U /run/bringup /run/bringup/owner").stdout  # root's, as sudo made it

    # Without become: the user's own folder, private to it; the scripts run and are fenced as before.
    host.exec("chown locker /srv/fence /srv/fence/file")
    with_vars(project, ansible_become=False)
    r = provision(project, "b", 0)
    assert r.returncode == 0, r.stdout + r.stderr
    assert content(host) == "b\n"
    uid = host.exec("id -u locker").stdout.strip()
    where = host.exec(f"ls -d /run/user/{uid}/bringup /home/locker/.cache/bringup 2>/dev/null || true").stdout.split()
    assert len(where) == 1, where
    assert host.exec(["stat", "-c", "%U %a", where[0]]).stdout.split() == ["locker", "700"]
    assert "pid" in host.exec(["cat", f"{where[0]}/owner"]).stdout


KERNEL = '''
from bringup.resources.base import Plan, Resource


class Kernel(Resource):
    kind = "kernel"

    def read(self):
        return "[ -e /var/lib/fk/installed ] && echo installed; [ -e /run/fk-old-boot ] && echo old; true"

    def plan(self, current):
        if "installed" not in current:
            return Plan(commands=["mkdir -p /var/lib/fk && touch /var/lib/fk/installed /run/fk-old-boot"],
                        changes={"kernel": (None, "new")}, reboot="new kernel")
        if "old" in current:
            return Plan(reason="installed", reboot="new kernel not running")
        return Plan.noop("running")


def resources(host):
    return [Kernel("k")]
'''


@pytest.mark.reliability(item=34, fault="a run that reboots the host: the lock went with the old boot",
                         checks=("next run converges",))
def test_after_a_reboot_the_run_takes_the_lock_again_and_writes(sandbox_host_factory, tmp_path):
    host = sandbox_host_factory("run-lock-reboot", port=free_port())  # its port kept through the restart
    project = role_project(tmp_path, {"kern": KERNEL, "fence": ROLE + "\nWAITS_FOR_REBOOT = True\n"}, {"h": host})
    r = provision(project, "a", 0, "--allow-reboot", timeout=400)
    assert r.returncode == 0, r.stdout + r.stderr
    assert recap(r.stdout)["h"]["changed"] == 3, r.stdout  # the kernel, the reboot, the write after it
    assert content(host) == "a\n"  # written after the reboot, by a script fenced by the new boot's lock
    assert host.exec(["test", "-e", "/run/fk-old-boot"], check=False).returncode == 1  # it did reboot
    assert "pid" in host.exec(["cat", "/run/bringup/owner"]).stdout


FACTLESS_ROLE = '''
from bringup.resources import File

FACTS = ()


def resources(host):
    return [File("/srv/factless.conf", content="kept = 1\\n", mode="0644")]
'''


def test_a_run_of_roles_that_read_no_facts_reads_nothing_ahead_and_keeps_serving(sandbox_host, tmp_path):
    """Roles that read no facts take the lock without a facts script: that holder reads nothing ahead and keeps no
    read; the run's reads are served as any script is (a read sent to be kept there made the holder stop serving,
    and the run waited out command_timeout)."""
    sandbox_host.exec("rm -f /srv/factless.conf")
    project = role_project(tmp_path, {"factless": FACTLESS_ROLE}, {"h": sandbox_host})
    inv = yaml.safe_load((project / "hosts").read_text())
    inv["all"]["hosts"]["h"]["command_timeout"] = 30
    (project / "hosts").write_text(yaml.safe_dump(inv))
    for changed in (1, 0):
        started = time.monotonic()
        r = invoke("provision", "--host", "h", cwd=project, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        assert recap(r.stdout)["h"]["changed"] == changed, r.stdout
        assert time.monotonic() - started < 25
    assert sandbox_host.exec(["cat", "/srv/factless.conf"]).stdout == "kept = 1\n"
