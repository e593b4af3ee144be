"""Nothing a run started outlives it on the host (issue 26, item 3), on a real sandbox host.

A read that hangs (a stand-in for a hung ``nvidia-smi``) makes the run cut the host off after
``command_timeout``; the host's own ``timeout`` then ends the script's whole process group, and the
read script's trap removes its ``/tmp/bringup-read.*`` folder, so nothing piles up run after run.
Checks go through ``docker exec``.
"""
from __future__ import annotations

import time

import pytest
import yaml

from .helpers import invoke, role_project

pytestmark = pytest.mark.integration

ROLE = '''
from bringup.resources.base import Plan, Resource


class Hangs(Resource):
    kind = "probe"
    read_alongside = True  # in a background lane, as facts and most reads run

    def read(self):
        return "sleep 7777; echo late"

    def plan(self, current):
        return Plan.noop("read")


class Quick(Resource):
    kind = "probe"
    read_alongside = True

    def read(self):
        return "echo quick"

    def plan(self, current):
        return Plan.noop("read")


def resources(host):
    return [Hangs("hung-nvidia-smi"), Quick("a"), Quick("b")]
'''


def left(host) -> tuple[str, str]:
    procs = host.exec("pgrep -af 'sleep 777[7]' || true").stdout.strip()
    folders = host.exec("ls -d /tmp/bringup-read.* 2>/dev/null || true").stdout.strip()
    return procs, folders


@pytest.mark.reliability(item=26, fault="a read that hangs on the host (a hung nvidia-smi), run after run",
                         variants=2, checks=("no leftovers", "no hang"))
def test_a_hung_read_leaves_no_process_or_folder_behind(sandbox_host, tmp_path):
    host = sandbox_host
    project = role_project(tmp_path, {"hang": ROLE}, {"h": host})
    inv = yaml.safe_load((project / "hosts").read_text())
    inv["all"]["hosts"]["h"]["command_timeout"] = 4
    (project / "hosts").write_text(yaml.safe_dump(inv))
    for _ in range(2):
        started = time.monotonic()
        r = invoke("provision", "--host", "h", cwd=project, timeout=120)
        assert r.returncode == 4, r.stdout + r.stderr
        assert "no result within 4 s (command_timeout)" in r.stdout, r.stdout
        assert time.monotonic() - started < 60
    # The host ends what is left within command_timeout + its grace (5 s) + TERM's handling.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and left(host) != ("", ""):
        time.sleep(1)
    assert left(host) == ("", ""), left(host)


@pytest.mark.reliability(item=26, fault="invoke facts on a host whose nvidia-smi hangs (command_timeout)",
                         checks=("one clear line", "exit code", "no leftovers"))
def test_facts_on_a_hung_nvidia_smi_is_one_line_and_leaves_nothing(sandbox_host, tmp_path):
    host = sandbox_host
    host.exec("printf '#!/bin/sh\\nexec sleep 7777\\n' > /usr/local/bin/nvidia-smi && chmod 755 /usr/local/bin/nvidia-smi")
    try:
        project = role_project(tmp_path, {"hang": ROLE}, {"h": host})
        inv = yaml.safe_load((project / "hosts").read_text())
        inv["all"]["hosts"]["h"]["command_timeout"] = 4
        (project / "hosts").write_text(yaml.safe_dump(inv))
        r = invoke("facts", "--host", "h", cwd=project, timeout=120)
        assert r.returncode == 4, r.stdout + r.stderr
        lines = [l for l in r.stderr.splitlines() if l.strip()]
        assert len(lines) == 1 and lines[0].startswith("unreachable: h: ") and "command_timeout" in lines[0], r.stderr
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and left(host) != ("", ""):
            time.sleep(1)
        assert left(host) == ("", ""), left(host)
    finally:
        host.exec("rm -f /usr/local/bin/nvidia-smi")


SLOW_ROLE = '''
from bringup.ssh.command import sh
from bringup.resources import Command


def resources(host):
    m = "/tmp/lock-order"
    tag = host.vars["tag"]
    done = "/tmp/lock-done-" + tag
    return [Command("slow write " + tag, sh("echo start-%s >> %s; sleep %s; echo end-%s >> %s; touch %s",
                                              tag, m, host.vars["secs"], tag, m, done), creates=done)]
'''


@pytest.mark.reliability(item=26, fault="two provisions at once on one host", checks=("next run converges",))
def test_two_provisions_of_one_host_take_turns(sandbox_host, tmp_path):
    import subprocess
    import sys

    from .helpers import REPO

    host = sandbox_host
    host.exec("rm -f /tmp/lock-order /tmp/lock-done-*")
    project = role_project(tmp_path, {"slow": SLOW_ROLE}, {"h": host})

    def start(tag: str, secs: int) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "invoke", "--search-root", str(REPO), "provision", "--host",
                                 "h", "--set", f"tag={tag}", "--set", f"secs={secs}"], cwd=project,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    first = start("a", 6)
    deadline = time.monotonic() + 60
    while "start-a" not in host.exec("cat /tmp/lock-order 2>/dev/null || true").stdout:
        assert time.monotonic() < deadline and first.poll() is None, first.communicate()[0]
        time.sleep(0.2)
    second = start("b", 0)
    out_a, out_b = first.communicate(timeout=120)[0], second.communicate(timeout=120)[0]
    assert first.returncode == 0, out_a
    assert second.returncode == 0, out_b
    # The second run waited for the first's lock: its write began after the first's ended.
    assert host.exec(["cat", "/tmp/lock-order"]).stdout.split() == ["start-a", "end-a", "start-b", "end-b"]
    assert "pid" in host.exec(["cat", "/run/bringup/owner"]).stdout  # who held it last
