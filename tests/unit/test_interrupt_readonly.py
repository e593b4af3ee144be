"""SIGINT during `invoke checklist` and `invoke audit` (issue 12 item 11, the read-only tasks).

Two hosts, run in name order: ``a-slow`` (a port that accepts TCP and never answers SSH) first, then ``b-me``
(``ansible_connection: local``, check mode only).  The signal arrives while ``a-slow`` is being connected
to: ``b-me`` never starts, what was done is printed and written, the hosts left out are named, and the
exit code is the signal's (130), with no traceback.

The signal is sent once the tool is ready for it (:func:`tests.ready.wait_until_blocked`: its handler is in
place and it waits on ``a-slow``), not after a fixed time: under load a SIGINT before the handler killed it
(exit -2).
"""
from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import tests.silent
from tests.ready import wait_until_blocked

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def silent_port():
    with tests.silent.silent_port() as port_and_accepted:
        yield port_and_accepted


def _interrupted(tmp_path, silent_port, *task):
    port, accepted = silent_port
    # a-slow's handshake must still be pending when the tool is ready for the signal: on a loaded machine that
    # can be seconds after its first connection, hence 10 s.
    (tmp_path / "hosts").write_text(
        "all:\n  hosts:\n"
        f"    a-slow: {{ansible_host: 127.0.0.1, ansible_port: {port}, ssh_connect_timeout: 10}}\n"
        "    b-me: {ansible_connection: local}\n")
    proc = subprocess.Popen([sys.executable, "-m", "invoke", "--search-root", str(REPO), *task, "--group", "all",
                             "--roles", "sysctl"], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    assert accepted.wait(60), "the tool never connected to the slow host"
    wait_until_blocked(proc)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=120)
    return proc.returncode, out


@pytest.mark.reliability(item=11, fault="SIGINT during `invoke checklist` (2 hosts)",
                         checks=("exit code", "report written"))
def test_checklist_interrupted_writes_what_was_done_and_names_the_rest(tmp_path, silent_port):
    code, out = _interrupted(tmp_path, silent_port, "checklist")
    assert code == 130, out
    assert "Traceback" not in out, out
    assert "SIGINT: stopping: the reads in flight are ended at once" in out, out
    assert "INTERRUPTED by SIGINT" in out, out
    pages = tmp_path / "reports" / "checklist"
    # The host in progress was abandoned (a read: nothing to finish) or finished (unreachable, said so).
    assert (pages / "a-slow.md").exists() or "no checklist: a-slow, b-me" in out, out
    assert "b-me" in out.split("no checklist:")[1], out
    assert not (pages / "b-me.md").exists()  # the next one never started
    assert (pages / "index.html").exists()


@pytest.mark.reliability(item=11, fault="SIGINT during `invoke audit` (2 hosts)",
                         checks=("exit code", "recap and report"))
def test_audit_interrupted_writes_its_report_and_names_the_rest(tmp_path, silent_port):
    code, out = _interrupted(tmp_path, silent_port, "audit", "--forks", "1")
    assert code == 130, out
    assert "Traceback" not in out, out
    assert "a-slow : passed=0 failed=0 skipped=0 unreachable=1" in out, out
    assert "INTERRUPTED by SIGINT" in out and "not started: b-me" in out, out
    assert "b-me :" not in out, out
    report = json.loads(next((tmp_path / "reports").glob("*-audit.json")).read_text())
    assert report["interrupted"] == "SIGINT" and report["not_started"] == ["b-me"] and report["hosts"] == ["a-slow"]


def _hung_smi(tmp_path) -> dict:
    """A local host whose nvidia-smi hangs (a GPU fallen off the bus): each call writes its pid and sleeps."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "nvidia-smi").write_text(f"#!/bin/sh\necho $$ >> {tmp_path}/smi.pids\nexec sleep 1000\n")
    (bin_ / "nvidia-smi").chmod(0o755)
    (tmp_path / "hosts").write_text("all:\n  hosts:\n    ctl: {ansible_connection: local}\n")
    return {**__import__("os").environ, "PATH": f"{bin_}:/usr/bin:/bin"}


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _left(pids) -> list[int]:
    """The fake nvidia-smi's processes still running 10 s on (killed, with their shells, so a failure leaves none)."""
    import os
    import time

    listed = [int(p) for p in pids.read_text().split()]
    deadline = time.monotonic() + 10
    while any(_running(p) for p in listed) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [p for p in listed if _running(p)]
    for p in left:
        with open(f"/proc/{p}/stat") as f:
            parent = int(f.read().rsplit(")", 1)[1].split()[1])
        for q in (parent, p) if parent > 1 else (p,):
            try:
                os.kill(q, signal.SIGKILL)
            except OSError:
                pass
    return left


@pytest.mark.reliability(item=40, fault="SIGTERM or SIGHUP during `facts`/`checklist` of a local host whose nvidia-smi "
                         "hangs: facts died on the spot (no line, the hung command left running), checklist waited "
                         "for the read's 180 s limit per hung fact", variants=4,
                         checks=("exit code", "one clear line", "nothing left running", "no hang"))
@pytest.mark.parametrize("task", [("facts", "--host", "ctl"), ("checklist", "--host", "ctl", "--out", "pages")])
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_ends_a_reads_round_trip_at_once_and_its_commands_with_it(tmp_path, task, sig):
    import os
    import time

    env = _hung_smi(tmp_path)
    proc = subprocess.Popen([sys.executable, "-m", "invoke", "--search-root", str(REPO), *task], cwd=tmp_path,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    pids = tmp_path / "smi.pids"
    deadline = time.monotonic() + 60
    while not pids.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)
    assert pids.exists(), proc.communicate()[0]
    proc.send_signal(sig)
    try:
        out, _ = proc.communicate(timeout=60)  # before, the checklist's stop waited 180 s for each hung read
    finally:
        proc.kill()
        proc.wait()
        left = _left(pids)
    assert proc.returncode == 128 + sig, out
    assert "Traceback" not in out, out
    name = signal.Signals(sig).name
    assert f"{name}: stopping: the reads in flight are ended at once" in out, out
    assert not left, "a hung nvidia-smi outlived the stopped read"
    assert not (tmp_path / "pages").exists() or not list((tmp_path / "pages").iterdir())
