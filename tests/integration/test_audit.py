"""`invoke audit` on a real sandbox host: passes after provisioning, fails on drift."""
from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from harness import SANDBOX_VARS, write_inventory

from .helpers import invoke

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def project(sandbox_host, tmp_path_factory):
    d = tmp_path_factory.mktemp("audit")
    write_inventory(d / "hosts", [sandbox_host], extra_vars=SANDBOX_VARS)
    r = invoke("provision", "--host", sandbox_host.name, "--roles", "sysctl", cwd=d)
    assert r.returncode == 0, r.stdout + r.stderr
    return d


def latest(project, ext):
    return sorted((project / "reports").glob(f"*-audit.{ext}"))[-1]


def test_audit_passes_on_a_provisioned_host(sandbox_host, project):
    r = invoke("audit", "--host", sandbox_host.name, "--roles", "sysctl", cwd=project)
    assert r.returncode == 0, r.stdout + r.stderr
    summary = json.loads(latest(project, "json").read_text())
    assert summary["failed"] == 0 and summary["passed"] == 3
    suite = ET.parse(latest(project, "xml")).getroot().find("testsuite")
    assert suite.get("tests") == "3" and suite.get("failures") == "0"


def test_audit_names_what_drifted_and_where(sandbox_host, project):
    sandbox_host.exec("echo 1 > /proc/sys/net/ipv4/tcp_slow_start_after_idle && "
                      "sed -i '/^net.ipv4.tcp_fastopen/d' /etc/sysctl.d/90-trt-latency.conf && "
                      "chmod 600 /etc/sysctl.d/90-trt-latency.conf")
    try:
        r = invoke("audit", "--host", sandbox_host.name, "--roles", "sysctl", cwd=project)
        assert r.returncode != 0
        out = r.stdout
        assert f"{sandbox_host.name}: net.ipv4.tcp_slow_start_after_idle is 1, want 0" in out
        assert "net.ipv4.tcp_fastopen = (absent), want 3" in out
        assert "should be root-owned 0644" in out
        summary = json.loads(latest(project, "json").read_text())
        assert summary["failed"] == 3
    finally:
        r = invoke("provision", "--host", sandbox_host.name, "--roles", "sysctl", cwd=project)
        assert r.returncode == 0
    assert invoke("audit", "--host", sandbox_host.name, "--roles", "sysctl", cwd=project).returncode == 0


def test_audit_over_local_connection(tmp_path):
    (tmp_path / "hosts").write_text("all:\n  hosts:\n    me: {ansible_connection: local}\n")
    live = open("/proc/sys/net/core/somaxconn").read().strip()
    want = 12345 if live != "12345" else 12346
    r = invoke("audit", "--host", "me", "--roles", "sysctl", "--set", f"sysctl={{net.core.somaxconn: {want}}}",
               cwd=tmp_path)
    # Nothing here was provisioned to that value: the audit runs over `local://` and names the gap.
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"me: net.core.somaxconn is {live}, want {want}" in r.stdout
    summary = json.loads(sorted((tmp_path / "reports").glob("*-audit.json"))[-1].read_text())
    assert summary["hosts"] == ["me"] and summary["failed"] >= 1
