"""bringup.orphans on its own: what a subreaper takes for an orphan (a descendant that left its session and was
handed here) and what it spares (a child a library started in this session), also where this process's session
leader lies outside its PID namespace (a container, a CI runner: ``getsid`` reads 0 there)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import os, subprocess, sys, time
sys.path.insert(0, sys.argv[1])
from bringup import orphans
assert orphans.become_subreaper()
mark = sys.argv[2]
kept = subprocess.Popen(["sleep", mark + "1"])        # a library's child, in this session: spared
subprocess.run(["sh", "-c", f"setsid sleep {mark}2 >/dev/null 2>&1 </dev/null &"], check=True)
deadline = time.monotonic() + 10
def sleeping(p):  # sleep itself, past setsid(1)'s own setsid() (setsid's cmdline ends with the mark too)
    try:
        return open(f"/proc/{p}/cmdline", "rb").read() == f"sleep\0{mark}2\0".encode()
    except OSError:
        return False
while time.monotonic() < deadline and not any(sleeping(p) for p in os.listdir("/proc") if p.isdigit()):
    time.sleep(0.05)
found = orphans._orphans()
orphans.kill_orphans()
print(len(found), kept.pid in found, kept.poll(), orphans._orphans(), flush=True)
kept.kill()
"""


def _run(prefix: list[str], tmp_path: Path) -> str:
    mark = f"{os.getpid()}.{len(prefix)}"
    r = subprocess.run([*prefix, sys.executable, "-c", SCRIPT, str(REPO), mark], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout.strip()


def test_an_orphan_handed_here_is_found_and_killed_a_library_child_spared(tmp_path):
    # one orphan (the setsid sleep), the library's sleep not among them and still running, none left after
    assert _run([], tmp_path) == "1 False None []"


@pytest.mark.skipif(not shutil.which("unshare") or os.geteuid() != 0, reason="needs unshare and root")
def test_the_same_where_the_session_leader_is_outside_this_pid_namespace(tmp_path):
    # Before: the tty field was read for the session; with no terminal (0) and getsid() 0 (leader outside the
    # namespace, as under CI), every orphan was taken for a library's child and outlived the audit.
    assert _run(["unshare", "--pid", "--fork", "--mount-proc"], tmp_path) == "1 False None []"
