"""A SIGINT or SIGTERM to bringup while it waits for a child of its own, before the run's handlers are in place:
the vault's password program, an inventory script, an ssh_config ``Match exec`` command.

The child runs in a process group of its own (a terminal's Ctrl-C reaches bringup alone), so before the fix a
SIGTERM ended bringup and left the child (and its ``sleep``) running under PID 1, and a SIGINT that Python did
not turn into KeyboardInterrupt (a background job's, ignored) waited out the child's 30 s bound.  Real
processes: the child writes its pid (its process group's id: bringup makes it a group leader) and sleeps; the
signal goes to bringup; whether anything of that group still runs is read from /proc (a zombie runs nothing:
where PID 1 does not reap, the killed ``sleep`` stays one).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BRINGUP = "import sys; sys.argv[0] = 'bringup'; from bringup.entry import main; main()"


def _group_running(pgid: int) -> list[int]:
    """The pids of the group ``pgid`` that still run (zombies left out)."""
    left = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            fields = (p / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            left.append(int(p.name))
    return left


def _program(path: Path, pidfile: Path) -> Path:
    path.write_text(f"#!/bin/sh\necho $$ > {pidfile}\nsleep 1000\n")
    path.chmod(0o755)
    return path


def _signalled(tmp_path: Path, args: list[str], pidfile: Path, sig: signal.Signals, ignore_int: bool = False
               ) -> tuple[int, str, float, list[int]]:
    """Run bringup ``args`` in ``tmp_path``, send ``sig`` once the child wrote its pid; bringup's exit code, its
    output, the seconds from the signal to its exit, and what of the child's group still ran 3 s later."""
    env = {**os.environ, "HOME": str(tmp_path), "PYTHONPATH": str(REPO), "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("ANSIBLE_VAULT_PASSWORD_FILE", None)
    # ignore_int: as a shell starts a background job (``bringup ... &``): SIGINT ignored from the start.
    pre = (lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if ignore_int else None
    p = subprocess.Popen([sys.executable, "-c", BRINGUP, *args], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, start_new_session=True, preexec_fn=pre)
    pgid = 0
    try:
        deadline = time.monotonic() + 60
        while not (pidfile.exists() and pidfile.read_text().strip()):
            assert p.poll() is None and time.monotonic() < deadline, p.communicate()[0] if p.poll() is not None else ""
            time.sleep(0.05)
        pgid = int(pidfile.read_text())
        time.sleep(0.3)  # the child's sleep started
        p.send_signal(sig)
        sent = time.monotonic()
        try:
            out, _ = p.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()
            out = p.communicate()[0] + "\n(still running 20 s after the signal)"
        took = time.monotonic() - sent
        deadline = time.monotonic() + 3
        while _group_running(pgid) and time.monotonic() < deadline:
            time.sleep(0.05)
        return p.returncode, out, took, _group_running(pgid)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        if pgid and _group_running(pgid):  # what this test's child left: not left to the next test
            os.killpg(pgid, signal.SIGKILL)


@pytest.mark.reliability(item=40, fault="SIGINT/SIGTERM to bringup while the vault's password program or an "
                                        "inventory script ran: the child kept running under PID 1, or the signal "
                                        "waited out its 30 s bound", variants=6,
                         checks=("nothing left running", "one clear line", "exit code"))
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["TERM", "INT"])
@pytest.mark.parametrize("child", ["vault-password-program", "inventory-script", "background-INT"])
def test_a_signal_ends_the_child_group_and_bringup_with_one_line(tmp_path, sig, child):
    pidfile = tmp_path / "pid"
    if child == "inventory-script":
        _program(tmp_path / "inv.sh", pidfile)
        args = ["hosts", "-i", "inv.sh"]
        said = "the inventory script inv.sh"
    else:
        (tmp_path / "inv.yml").write_text("all:\n  hosts:\n    h1: {}\n")
        _program(tmp_path / "pw.sh", pidfile)
        args = ["hosts", "-i", "inv.yml", "--vault-password-file", "pw.sh"]
        said = "the password program of --vault-password-file pw.sh"
    rc, out, took, left = _signalled(tmp_path, args, pidfile, sig, ignore_int=child == "background-INT")
    assert not left, f"the child's group still runs: {left}"
    assert rc == 128 + sig, (rc, out)
    assert out == f"{sig.name}: stopped; {said} was ended, with everything it started\n", out
    assert took < 5, took


@pytest.mark.reliability(item=40, fault="SIGTERM to bringup while an ssh_config Match exec command ran: it kept "
                                        "running under PID 1", variants=1,
                         checks=("nothing left running", "one clear line", "exit code"))
def test_a_signal_during_a_match_exec_ends_it(tmp_path):
    pidfile = tmp_path / "pid"
    (tmp_path / "ssh_config").write_text(f'Match exec "echo $$ > {pidfile}; sleep 1000"\n  User deploy\n')
    (tmp_path / "inv.yml").write_text("all:\n  vars:\n    ansible_host: 127.0.0.1\n    ansible_port: 9\n"
                                      "    ssh_config: ssh_config\n    ssh_connect_timeout: 60\n"
                                      "  hosts:\n    h1:\n")
    rc, out, took, left = _signalled(tmp_path, ["plan", "--host", "h1", "-i", "inv.yml"], pidfile, signal.SIGTERM)
    assert not left, f"the Match exec command still runs: {left}"
    assert rc == 143, (rc, out)
    assert out == "SIGTERM: stopped; a Match exec command of the ssh config was ended, with everything it started\n", out
    assert took < 5, took


@pytest.mark.reliability(item=40, fault="SIGHUP (the operator's terminal gone) while the vault's password program or an "
                                        "inventory script ran: bringup died on the spot and the child ran on",
                         variants=2, checks=("nothing left running", "one clear line", "exit code"))
@pytest.mark.parametrize("child", ["vault-password-program", "inventory-script"])
def test_a_hang_up_ends_the_child_group_and_bringup_with_one_line(tmp_path, child):
    pidfile = tmp_path / "pid"
    if child == "inventory-script":
        _program(tmp_path / "inv.sh", pidfile)
        args = ["hosts", "-i", "inv.sh"]
        said = "the inventory script inv.sh"
    else:
        (tmp_path / "inv.yml").write_text("all:\n  hosts:\n    h1: {}\n")
        _program(tmp_path / "pw.sh", pidfile)
        args = ["hosts", "-i", "inv.yml", "--vault-password-file", "pw.sh"]
        said = "the password program of --vault-password-file pw.sh"
    rc, out, took, left = _signalled(tmp_path, args, pidfile, signal.SIGHUP)
    assert not left, f"the child's group still runs: {left}"
    assert rc == 128 + signal.SIGHUP, (rc, out)
    assert out == f"SIGHUP: stopped; {said} was ended, with everything it started\n", out
    assert took < 5, took


def test_under_nohup_a_hang_up_leaves_the_childs_wait_alone():
    """``nohup``: SIGHUP ignored by the operator's shell stays ignored while a child runs."""
    from bringup import child

    before = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        r = child.capture(["sh", "-c", f"kill -HUP {os.getpid()}; sleep 0.2; echo ran on"], timeout=30, cap=1024)
        assert r.out == b"ran on\n" and r.rc == 0
        assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, before)
