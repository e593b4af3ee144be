"""SIGINT/SIGTERM during a run on real sandbox hosts, `--forks 1`: the host in progress finishes its
role, no later role or host starts, the recap and the report say who was done, cut short and never
started, and the exit code is the signal's (130, 143).  A second signal abandons the step in flight.
After the first signal, a host that answers nothing (its container paused) is let go after a short grace.

Whether a host was touched is checked through `docker exec`: its files, and its sshd's own log of
logins.  Each signal is sent once the tool is ready for it, never after a fixed time: the first once the slow
step runs on the host (the handler is in place before any role starts), the second once the tool said it took
the first (two signals close together reach Python's handler as one).
"""
from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.ready import Lines

from .helpers import REPO, last_report, recap, role_project

pytestmark = pytest.mark.integration

SLOW = '''
from bringup.ssh.command import sh
from bringup.resources import Command

DEFAULTS = {"slow_seconds": 3}

def resources(host):
    return [Command("slow step", sh("mkdir -p /srv/h4-sig && touch /srv/h4-sig/started && sleep %s && "
                                    "touch /srv/h4-sig/finished", host.vars["slow_seconds"]),
                    unless="test -e /srv/h4-sig/finished")]
'''

AFTER = '''
from bringup.resources import Command

def resources(host):
    return [Command("after step", "touch /srv/h4-sig/after", unless="test -e /srv/h4-sig/after")]
'''


@pytest.fixture(scope="module")
def hosts(sandbox_host, sandbox_host_factory):
    return {"a": sandbox_host, "b": sandbox_host_factory("interrupt-b")}


@pytest.fixture()
def project(hosts, tmp_path) -> Path:
    role_project(tmp_path, {"slow": SLOW, "after": AFTER}, hosts)
    for h in hosts.values():
        h.exec("rm -rf /srv/h4-sig")
    return tmp_path


def logins(host) -> int:
    """SSH logins the host's sshd has accepted so far (its journal)."""
    out = host.exec("journalctl -u ssh.service -o cat --no-pager | grep -c '^Accepted ' || true").stdout
    return int(out.strip() or 0)


def exists(host, path: str) -> bool:
    return host.exec(["test", "-e", path], check=False).returncode == 0


def provision(*args: str) -> list[str]:
    return [sys.executable, "-m", "invoke", "--search-root", str(REPO), "provision", "--hosts", "a,b",
            "--forks", "1", *args]


def start(project: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen(provision(*args), cwd=project, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)


def wait_for(host, path: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not exists(host, path):
        assert time.monotonic() < deadline, f"{host.name}: {path} never appeared"
        time.sleep(0.1)


@pytest.mark.reliability(item=11, fault='SIGINT / SIGTERM during host 1 of 2 (--forks 1)',
                         checks=('exit code', 'recap and report', 'next run converges'))
@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_during_host_one_stops_the_run_in_order(hosts, project, sig, code):
    a, b = hosts["a"], hosts["b"]
    b_logins = logins(b)
    proc = start(project)
    wait_for(a, "/srv/h4-sig/started")
    proc.send_signal(sig)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == code, out

    # Host a finished the role it was in, and started no other; host b was never connected to.
    assert exists(a, "/srv/h4-sig/finished") and not exists(a, "/srv/h4-sig/after")
    assert not exists(b, "/srv/h4-sig")
    assert logins(b) == b_logins

    name = sig.name
    assert recap(out)["a"]["changed"] == 1 and "b" not in recap(out), out
    assert f"a: interrupted by {name} before role after (not run: after)" in out
    assert "not started: b" in out
    report = last_report(project)
    assert {h["host"]: h["status"] for h in report["hosts"]} == {"a": "interrupted", "b": "not started"}
    assert report["finished"] is not None

    # The next run finishes the job.
    r = subprocess.run(provision(), cwd=project, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout
    assert exists(a, "/srv/h4-sig/after") and exists(b, "/srv/h4-sig/after")


@pytest.mark.reliability(item=11, fault='a second SIGINT during a 20 s step',
                         checks=('exit code', 'report written', 'no hang'))
def test_a_second_signal_abandons_the_step_in_flight(hosts, project):
    a = hosts["a"]
    proc = start(project, "--set", "slow_seconds=20")
    lines = Lines(proc)
    wait_for(a, "/srv/h4-sig/started")
    began = time.monotonic()
    proc.send_signal(signal.SIGINT)
    lines.wait_for("SIGINT: stopping")
    proc.send_signal(signal.SIGINT)
    out = lines.text(timeout=60)
    took = time.monotonic() - began
    assert proc.returncode == 130, out
    assert took < 15, (took, out)  # not the 20 s of the step
    assert "SIGINT again: abandoning" in out
    host_a = {h["host"]: h for h in last_report(project)["hosts"]}["a"]
    assert host_a["status"] == "interrupted" and "abandoned by a second SIGINT" in host_a["message"], host_a
    assert not exists(a, "/srv/h4-sig/after")


@pytest.mark.reliability(item=26, fault='SIGTERM while the host in flight is silent (docker pause)',
                         checks=('exit code', 'recap and report', 'no hang', 'next run converges'))
def test_the_first_signal_lets_a_silent_host_go_after_the_grace(hosts, project):
    from bringup.ssh.stop import SILENT_GRACE_S

    a, b = hosts["a"], hosts["b"]
    grace = f"{SILENT_GRACE_S:g}"
    # The step outlasts the grace by far (not a step that ends by itself), and command_timeout stays 1800 s.
    proc = start(project, "--set", "slow_seconds=25")
    lines = Lines(proc)
    wait_for(a, "/srv/h4-sig/started")
    try:
        subprocess.run(["docker", "pause", a.container], check=True, capture_output=True)
        began = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        out = lines.text(timeout=120)
        took = time.monotonic() - began
    finally:
        subprocess.run(["docker", "unpause", a.container], capture_output=True)
    assert proc.returncode == 143, out
    assert took < SILENT_GRACE_S + 15, (took, out)  # the grace, not the step's 25 s nor command_timeout
    assert "Traceback" not in out, out
    assert out.count(f"SIGTERM: no answer from a within {grace} s: closing its connection") == 1, out
    assert f"a: no answer within {grace} s after SIGTERM: connection closed, the step in flight may have " \
           "finished on the host or not" in out, out
    assert "not started: b" in out, out
    report = {h["host"]: h for h in last_report(project)["hosts"]}
    assert report["a"]["status"] == "interrupted" and report["a"]["message"].startswith(
        f"no answer within {grace} s after SIGTERM"), report["a"]
    assert report["b"]["status"] == "not started"
    assert not exists(b, "/srv/h4-sig")

    # Thawed, the host finishes the step it was in (what the line warns of); the run lock went with the
    # connection, and the next run converges both hosts.
    wait_for(a, "/srv/h4-sig/finished")
    r = subprocess.run(provision(), cwd=project, capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stdout
    assert exists(a, "/srv/h4-sig/after") and exists(b, "/srv/h4-sig/after")
    assert recap(r.stdout)["a"]["changed"] == 1, r.stdout  # the slow step was done: only the after step ran
