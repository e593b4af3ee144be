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
    assert "SIGINT: stopping: no new host or role starts" in out, out
    assert "INTERRUPTED by SIGINT" in out and "no checklist: b-me" in out, out
    pages = tmp_path / "reports" / "checklist"
    assert (pages / "a-slow.md").exists()  # the host in progress finished (unreachable, said so)
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
