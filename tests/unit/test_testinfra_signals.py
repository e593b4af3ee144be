"""``invoke audit --testinfra`` with site tests that end their own pytest (``os._exit``, a signal) or leave a
detached process behind (``setsid``), on a local host (issue 40 item 7).  What is checked goes through other
channels than the tool's words too: the exit code, the JSON summary, and /proc for what is left running.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.processes import gone, holding

REPO = Path(__file__).resolve().parents[2]


def _project(tmp_path: Path, body: str) -> Path:
    (tmp_path / "hosts").write_text("all:\n  vars: {gpu_profile: cpu}\n  hosts:\n    h1: {ansible_connection: local}\n")
    (tmp_path / "test_site.py").write_text(body)
    return tmp_path / "test_site.py"


def _audit(cwd: Path, *args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "invoke", "--search-root", str(REPO), "audit", "--host", "h1",
                           "--roles", "window_tuner", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.reliability(item=40, fault="audit --testinfra: a site test ends its pytest (os._exit(0), SIGKILL)",
                         checks=("exit code", "recap and report", "one clear line"))
@pytest.mark.parametrize("how, said", [
    ("import os; os._exit(0)", "pytest ended (exit 0) while test_dies was running; 2 of 3 tests not finished"),
    ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)",
     "pytest ended (killed by SIGKILL) while test_dies was running; 2 of 3 tests not finished"),
])
def test_a_site_test_that_ends_its_pytest_counts_as_failed(tmp_path, how, said):
    # Before: the test in flight was dropped as "ended from outside" and the others passed: exit 0, all good.
    suite = _project(tmp_path, "def test_first(host):\n    assert host.run('true').rc == 0\n\n"
                               f"def test_dies(host):\n    {how}\n\n"
                               "def test_after(host):\n    pass\n")
    r = _audit(tmp_path, "--testinfra", str(suite))
    assert r.returncode == 2, r.stdout + r.stderr
    assert "Traceback" not in r.stdout + r.stderr
    assert f"h1: testinfra: {said}" in r.stdout.splitlines(), r.stdout
    summary = json.loads(next((tmp_path / "reports").glob("*-audit.json")).read_text())
    assert summary["testinfra"]["hosts"]["h1"] == {"passed": 1, "failed": 1, "skipped": 0, "unreachable": 0}
    assert summary["testinfra"]["not_run"] == {"h1": said}


@pytest.mark.reliability(item=40, fault="audit --testinfra: a site test leaves a detached child (setsid, "
                                        "its own session; env -i setsid, no tag either)", checks=("no leftovers", "exit code"))
def test_no_detached_child_of_a_site_test_outlives_the_audit(tmp_path):
    mark = f"{int(time.time() * 1000) % 90000 + 10000}.{os.getpid()}"   # unique to this test's run
    suite = _project(tmp_path, "import subprocess\n\n"
                               "def test_leaves_a_daemon(host):\n"
                               f"    subprocess.Popen(['sleep', {mark!r}], start_new_session=True,\n"
                               "                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
                               f"    assert host.run('setsid sleep {mark} >/dev/null 2>&1 < /dev/null &').rc == 0\n"
                               # env -i sheds the run's tag as well: found as an orphan handed to bringup
                               f"    assert host.run('env -i setsid sleep {mark} >/dev/null 2>&1 < /dev/null &').rc == 0\n"
                               f"    assert host.run('env -i setsid sh -c \\'sleep {mark} & sleep {mark}\\' "
                               ">/dev/null 2>&1 < /dev/null &').rc == 0\n")
    r = _audit(tmp_path, "--testinfra", str(suite))
    assert r.returncode == 0, r.stdout + r.stderr
    assert gone(f"sleep {mark}", within=5) == []


@pytest.mark.reliability(item=40, fault="audit --testinfra killed (SIGKILL) while a site test's detached child "
                                        "runs (setsid; env -i setsid)",
                         checks=("no leftovers",))
def test_the_audit_killed_leaves_no_detached_child_of_a_site_test(tmp_path):
    mark = f"{int(time.time() * 1000) % 90000 + 10000}.{os.getpid()}"
    started = tmp_path / "started"
    suite = _project(tmp_path, "import subprocess, time\nfrom pathlib import Path\n\n"
                               "def test_leaves_a_daemon_and_waits(host):\n"
                               f"    subprocess.Popen(['sleep', {mark!r}], start_new_session=True,\n"
                               "                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
                               f"    assert host.run('env -i setsid sleep {mark} >/dev/null 2>&1 < /dev/null &').rc == 0\n"
                               f"    Path({str(started)!r}).write_text('yes')\n"
                               "    time.sleep(600)\n")
    p = subprocess.Popen([sys.executable, "-m", "invoke", "--search-root", str(REPO), "audit", "--host", "h1",
                          "--roles", "window_tuner", "--testinfra", str(suite)], cwd=tmp_path,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 90
        while not started.exists() and time.monotonic() < deadline and p.poll() is None:
            time.sleep(0.2)
        assert started.exists() and holding(f"sleep {mark}"), "the site test never started its daemon"
    finally:
        p.kill()
        p.wait()
    assert gone(f"sleep {mark}", within=20) == []
