"""Packages, systemd services and handlers on a real sandbox host, over SSH.

The packages come from a flat `file:` apt repository of test doubles copied
into the host; apt and systemd do their real work.  Checks go through
`docker exec`.
"""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from harness.doubles.debrepo import build_deb, write_index
from .helpers import invoke, recap

pytestmark = pytest.mark.integration

ROLE = '''
from bringup.ssh.command import sh
from bringup.resources import Directory, File, Packages, Service

DEFAULTS = {"demo_pin": "1.0-1", "demo_sleep": 1000}
HANDLERS = {"restart demo": ["systemctl daemon-reload", sh("systemctl restart -- %s", "bringup-demo")]}

def resources(host):
    unit = host.render("svc/demo.service.j2", sleep=host.vars["demo_sleep"])
    return [
        Packages({"bringup-double-hello": host.vars["demo_pin"]}),
        Directory("/etc/bringup-demo", mode="0750"),
        File("/etc/systemd/system/bringup-demo.service", content=unit, notify=["restart demo"]),
        Service("bringup-demo", running=True, enabled=True, daemon_reload=True),
    ]
'''

UNIT = """[Unit]
Description=bringup demo service (test)

[Service]
ExecStart=/bin/sleep {{ sleep }}

[Install]
WantedBy=multi-user.target
"""


@pytest.fixture(scope="module")
def project(sandbox_host, tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("svc")
    (d / "roles").mkdir()
    (d / "roles" / "__init__.py").write_text("ORDER = ['svc']\n")
    (d / "roles" / "svc.py").write_text(ROLE)
    (d / "templates" / "svc").mkdir(parents=True)
    (d / "templates" / "svc" / "demo.service.j2").write_text(UNIT)
    (d / "hosts").write_text(yaml.safe_dump({"all": {"hosts": {"h": sandbox_host.inventory_vars()}}}))
    repo = d / "repo"
    repo.mkdir()
    for v in ("1.0-1", "2.0-1"):
        build_deb(repo, "bringup-double-hello", v)
    write_index(repo)
    subprocess.run(["docker", "cp", str(repo), f"{sandbox_host.container}:/srv/repo"], check=True)
    sandbox_host.exec("echo 'deb [trusted=yes] file:/srv/repo ./' > /etc/apt/sources.list.d/doubles.list && "
                      "apt-get -o Dir::Etc::sourcelist=- -o Dir::Etc::sourceparts=/etc/apt/sources.list.d "
                      "update -q >/dev/null")
    return d


def pkg_version(host) -> str:
    return host.exec(["dpkg-query", "-W", "-f=${Version}", "bringup-double-hello"], check=False).stdout


def main_pid(host) -> str:
    return host.exec(["systemctl", "show", "-p", "MainPID", "--value", "bringup-demo"]).stdout.strip()


def test_first_run_installs_and_starts(sandbox_host, project):
    r = invoke("provision", "--host", "h", cwd=project)
    assert r.returncode == 0, r.stdout + r.stderr
    assert pkg_version(sandbox_host) == "1.0-1"
    assert sandbox_host.exec(["systemctl", "is-active", "bringup-demo"]).stdout.strip() == "active"
    assert sandbox_host.exec(["systemctl", "is-enabled", "bringup-demo"]).stdout.strip() == "enabled"
    assert sandbox_host.exec(["stat", "-c", "%a", "/etc/bringup-demo"]).stdout.strip() == "750"
    assert "handler:restart demo" in r.stdout  # the unit file changed


def test_second_run_is_noop_and_restarts_nothing(sandbox_host, project):
    pid = main_pid(sandbox_host)
    r = invoke("provision", "--host", "h", "--verbose", cwd=project)
    assert recap(r.stdout)["h"] == {"ok": 4, "changed": 0, "failed": 0, "skipped": 0, "unreachable": 0}
    assert "all installed: bringup-double-hello 1.0-1" in r.stdout and "bringup-demo is active" in r.stdout
    assert main_pid(sandbox_host) == pid


def test_changed_unit_restarts_once_and_pin_upgrades(sandbox_host, project):
    pid = main_pid(sandbox_host)
    r = invoke("provision", "--host", "h", "--set", "demo_sleep=2000", "--set", "demo_pin=2.0-*", cwd=project)
    assert r.returncode == 0, r.stdout + r.stderr
    assert recap(r.stdout)["h"]["changed"] == 3  # package, unit file, handler
    assert pkg_version(sandbox_host) == "2.0-1"
    assert main_pid(sandbox_host) != pid
    cmd = sandbox_host.exec(["systemctl", "show", "-p", "ExecStart", "--value", "bringup-demo"]).stdout
    assert "sleep 2000" in cmd or "2000" in cmd


def test_stopped_service_is_started_again(sandbox_host, project):
    sandbox_host.exec(["systemctl", "stop", "bringup-demo"])
    r = invoke("provision", "--host", "h", "--set", "demo_sleep=2000", "--set", "demo_pin=2.0-*", cwd=project)
    assert "running: inactive → active" in r.stdout
    assert sandbox_host.exec(["systemctl", "is-active", "bringup-demo"]).stdout.strip() == "active"


def test_missing_package_version_fails_clearly(sandbox_host, project):
    r = invoke("provision", "--host", "h", "--set", "demo_pin=9.9-9", cwd=project)
    assert r.returncode == 2
    assert "packages:bringup-double-hello" in r.stdout and "exit 100" in r.stdout
    assert "Version '9.9-9' for 'bringup-double-hello' was not found" in r.stdout
    assert pkg_version(sandbox_host) == "2.0-1"
