"""A connection lost mid-run (issue 12 item 18): the host's sshd session is killed while a step runs.

The host is reported unreachable with what was lost and when, not "failed" with an empty detail; the
recap and the report say so; the next run converges.  Checked on a real sandbox host, the session killed
through `docker exec`.
"""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from .helpers import REPO, last_report, recap, role_project

pytestmark = pytest.mark.integration

SLOW = '''
from bringup.ssh.command import sh
from bringup.resources import Command

def resources(host):
    return [Command("slow step", "mkdir -p /srv/lost && touch /srv/lost/started && sleep $(cat /srv/lost/seconds 2>/dev/null || echo 30) "
                                  "&& touch /srv/lost/done",
                    unless="test -e /srv/lost/done")]
'''


@pytest.fixture()
def project(sandbox_host, tmp_path) -> Path:
    sandbox_host.exec("rm -rf /srv/lost")
    return role_project(tmp_path, {"slow": SLOW}, {sandbox_host.name: sandbox_host})


@pytest.mark.reliability(item=18, fault="the host's sshd session killed mid-step (connection lost)",
                         checks=("exit code", "recap and report", "next run converges"))
def test_a_connection_lost_mid_step_is_unreachable_with_a_detail(sandbox_host, project):
    cmd = [sys.executable, "-m", "invoke", "--search-root", str(REPO), "provision", "--host", sandbox_host.name]
    proc = subprocess.Popen(cmd, cwd=project, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 60
    while sandbox_host.exec(["test", "-e", "/srv/lost/started"], check=False).returncode:
        assert time.monotonic() < deadline and proc.poll() is None, "the slow step never started"
        time.sleep(0.1)
    # Every sshd session process (the listener stays): what a crashed session or an OOM kill does.
    sandbox_host.exec("pkill -KILL -f '[s]shd: root' || true")
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 4, out
    assert recap(out)[sandbox_host.name]["unreachable"] == 1, out
    host = last_report(project)["hosts"][0]
    assert host["status"] == "unreachable", host
    assert host["message"].strip() and "lost" in host["message"], host
    assert host["message"] in out
    sandbox_host.exec("echo 0 > /srv/lost/seconds")  # the next run's step ends at once
    r = subprocess.run(cmd, cwd=project, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert sandbox_host.exec(["test", "-e", "/srv/lost/done"], check=False).returncode == 0
