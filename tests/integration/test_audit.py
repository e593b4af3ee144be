"""`invoke audit` on real sandbox hosts: passes after provisioning, names drift in one line per item,
changes nothing, says unreachable in one line, and runs from an installed copy."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from harness import SANDBOX_VARS, write_inventory

from .helpers import free_port, install_copy, invoke

pytestmark = pytest.mark.integration

CONF = "/etc/sysctl.d/90-trt-latency.conf"


@pytest.fixture(scope="module")
def project(sandbox_host, tmp_path_factory):
    d = tmp_path_factory.mktemp("audit")
    write_inventory(d / "hosts", [sandbox_host], extra_vars=SANDBOX_VARS)
    r = invoke("provision", "--host", sandbox_host.name, "--roles", "sysctl", cwd=d)
    assert r.returncode == 0, r.stdout + r.stderr
    return d


def latest(project, ext):
    return sorted((project / "reports").glob(f"*-audit.{ext}"))[-1]


def only_lines(out: str, host: str) -> None:
    """Every line the audit prints is about one host: no traceback, no repr."""
    bad = [l for l in out.splitlines() if l.strip() and not l.startswith(f"{host}")]
    assert not bad, out
    assert "Traceback" not in out and "<" not in out, out


def test_audit_passes_on_a_provisioned_host(sandbox_host, project):
    r = invoke("audit", "--host", sandbox_host.name, "--roles", "sysctl", cwd=project)
    assert r.returncode == 0, r.stdout + r.stderr
    only_lines(r.stdout, sandbox_host.name)
    summary = json.loads(latest(project, "json").read_text())
    # Every sysctl key the sandbox lets a container set, plus the persisted file; the hidden ones skip with why.
    assert summary["failed"] == 0 and summary["passed"] >= 5 and summary["exit"] == 0
    assert all(i["message"] for i in summary["results"] if i["outcome"] == "skipped")
    # One connection: the declared facts in one round trip, every resource and promise read in another.
    assert summary["round_trips"] == {sandbox_host.name: 2}
    assert f"{sandbox_host.name} : passed={summary['passed']} failed=0 skipped={summary['skipped']} unreachable=0" \
        in r.stdout
    suite = ET.parse(latest(project, "xml")).getroot().find("testsuite")
    assert suite.get("name") == sandbox_host.name and suite.get("failures") == "0"
    assert int(suite.get("tests")) == summary["passed"] + summary["skipped"]


def _sha(host, path: str) -> str:
    return host.exec(["sha256sum", "--", path]).stdout.split()[0]


def test_audit_names_what_drifted_and_where_and_changes_nothing(sandbox_host, project):
    h = sandbox_host.name
    sandbox_host.exec(f"echo 1 > /proc/sys/net/ipv4/tcp_slow_start_after_idle && "
                      f"sed -i '/^net.ipv4.tcp_fastopen/d' {CONF}")
    try:
        before = _sha(sandbox_host, CONF)
        r = invoke("audit", "--host", h, "--roles", "sysctl", cwd=project)
        assert r.returncode == 2, r.stdout + r.stderr
        only_lines(r.stdout, h)
        assert f"{h}: net.ipv4.tcp_slow_start_after_idle is 1, want 0\n" in r.stdout
        assert f"{h}: {CONF} lacks net.ipv4.tcp_fastopen = 3\n" in r.stdout
        assert f"{h} : passed=" in r.stdout and " failed=2 " in r.stdout
        summary = json.loads(latest(project, "json").read_text())
        assert summary["failed"] == 2 and summary["exit"] == 2
        failures = ET.parse(latest(project, "xml")).getroot().findall(".//failure")
        assert sorted(f.get("message") for f in failures) == sorted(
            [f"{h}: {CONF} lacks net.ipv4.tcp_fastopen = 3", f"{h}: net.ipv4.tcp_slow_start_after_idle is 1, want 0"])
        # Check mode only: the drift is still there, seen through docker exec.
        assert sandbox_host.exec("cat /proc/sys/net/ipv4/tcp_slow_start_after_idle").stdout.strip() == "1"
        assert _sha(sandbox_host, CONF) == before
    finally:
        r = invoke("provision", "--host", h, "--roles", "sysctl", cwd=project)
        assert r.returncode == 0
    sandbox_host.exec(f"chmod 600 {CONF}")
    try:
        r = invoke("audit", "--host", h, "--roles", "sysctl", cwd=project)
        assert r.returncode == 2 and f"{h}: file:{CONF}: mode is 600, want 644\n" in r.stdout, r.stdout
    finally:
        assert invoke("provision", "--host", h, "--roles", "sysctl", cwd=project).returncode == 0
    assert invoke("audit", "--host", h, "--roles", "sysctl", cwd=project).returncode == 0


def test_an_audit_of_every_role_leaves_every_file_as_it_was(sandbox_host, project):
    """All roles, with drift present: sha256 of every file the roles could touch, before and after."""
    snap = ("find /etc /opt /usr/local /var/lib/bringup /data /root -xdev -type f 2>/dev/null | sort "
            "| xargs -d '\\n' sha256sum 2>/dev/null; cat /proc/sys/net/core/somaxconn")
    sandbox_host.exec(f"echo 1 > /proc/sys/net/ipv4/tcp_slow_start_after_idle && chmod 600 {CONF}")
    try:
        before = sandbox_host.exec(snap, check=False).stdout
        r = invoke("audit", "--host", sandbox_host.name, cwd=project, timeout=300)
        after = sandbox_host.exec(snap, check=False).stdout
        assert r.returncode == 2, r.stdout + r.stderr
        only_lines(r.stdout, sandbox_host.name)
        assert len(before.splitlines()) > 100 and before == after
        assert sandbox_host.exec("cat /proc/sys/net/ipv4/tcp_slow_start_after_idle").stdout.strip() == "1"
        # Roles without an audit module before (trt_engines, window_tuner) are audited too: their declared state.
        roles = {i["role"] for i in json.loads(latest(project, "json").read_text())["results"]}
        assert {"sysctl", "irq_affinity", "cpu_tuning", "docker", "triton", "monitoring"} <= roles
    finally:
        assert invoke("provision", "--host", sandbox_host.name, "--roles", "sysctl", cwd=project).returncode == 0


@pytest.mark.reliability(item=18, fault="invoke audit of an unreachable host",
                         checks=("one clear line", "exit code", "recap and report"))
def test_an_unreachable_host_is_one_line_and_exit_4(tmp_path):
    port = free_port()
    (tmp_path / "hosts").write_text("all:\n  hosts:\n    gone: {ansible_host: 127.0.0.1, ansible_port: %d, "
                                    "ssh_connect_timeout: 3}\n" % port)
    r = invoke("audit", "--host", "gone", cwd=tmp_path)
    assert r.returncode == 4, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 2 and lines[0].startswith(f"gone: unreachable: ssh to 127.0.0.1:{port} failed"), r.stdout
    assert lines[1] == "gone : passed=0 failed=0 skipped=0 unreachable=1"
    assert "Traceback" not in r.stdout + r.stderr
    summary = json.loads(sorted((tmp_path / "reports").glob("*-audit.json"))[-1].read_text())
    assert summary["unreachable"] == 1 and summary["exit"] == 4


def test_audit_over_local_connection(tmp_path):
    (tmp_path / "hosts").write_text("all:\n  hosts:\n    me: {ansible_connection: local}\n")
    live = open("/proc/sys/net/core/somaxconn").read().strip()
    want = 12345 if live != "12345" else 12346
    r = invoke("audit", "--host", "me", "--roles", "sysctl", "--set", f"sysctl={{net.core.somaxconn: {want}}}",
               cwd=tmp_path)
    # Nothing here was provisioned to that value: the audit runs over the local connection and names the gap.
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"me: net.core.somaxconn is {live}, want {want}\n" in r.stdout
    assert open("/proc/sys/net/core/somaxconn").read().strip() == live
    summary = json.loads(sorted((tmp_path / "reports").glob("*-audit.json"))[-1].read_text())
    assert summary["hosts"] == ["me"] and summary["failed"] >= 1


def test_audit_runs_from_an_installed_copy(sandbox_host, project, tmp_path):
    """`bringup audit` of a pip-installed bringup, from a folder holding only a hosts file."""
    venv = install_copy(tmp_path)
    ops = tmp_path / "ops"
    ops.mkdir()
    shutil.copy(project / "hosts", ops / "hosts")
    where = subprocess.run([str(venv / "bin" / "python"), "-c", "import bringup, bringup_content; "
                            "print(bringup.__file__); print(bringup_content.__file__)"],
                           cwd=ops, capture_output=True, text=True, check=True).stdout
    assert all(line.startswith(str(venv)) for line in where.split()), where
    r = subprocess.run([str(venv / "bin" / "bringup"), "audit", "--host", sandbox_host.name, "--roles", "sysctl"],
                       cwd=ops, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"{sandbox_host.name} : passed=" in r.stdout and " failed=0 " in r.stdout
    assert sorted(p.suffix for p in (ops / "reports").iterdir()) == [".json", ".xml"]
    assert sorted(p.name for p in ops.iterdir()) == ["hosts", "reports"]
