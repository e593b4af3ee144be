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
