"""The host roles on Debian 12 and Debian 13 sandbox hosts, and invoke drift on them.

A smoke per release, not the whole suite twice (CI time): sysctl, cpu_tuning
and docker converge on a bookworm and a trixie host, a second run changes
nothing, and the result is checked through ``docker exec``.  Then ``invoke
drift`` over both hosts plus one that is down: converged, then a live sysctl
changed behind bringup's back (drift, exit 2), the down host (exit 4), and
the Prometheus file parsed by promtool.  ``pytest --sandbox-suite trixie``
runs every role test on trixie instead.
"""
from __future__ import annotations

import json
import shutil
import subprocess

import pytest
import yaml

from harness import SANDBOX_VARS, SUITES, write_inventory
from roles.cpu_tuning import LATENCY_UNIT
from roles.sysctl import PERSIST_FILE

from .helpers import free_port, invoke, recap

pytestmark = pytest.mark.integration

ROLES = "sysctl,cpu_tuning,docker"
#: A per-network-namespace key a container may write (test_sysctl_role.py checks the rest).
KEY = "net.ipv4.tcp_slow_start_after_idle"


@pytest.fixture(scope="module")
def hosts(sandbox_suite_host_factory):
    return {suite: sandbox_suite_host_factory(f"rel-{suite}", suite) for suite in SUITES}


@pytest.fixture(scope="module")
def project(hosts, tmp_path_factory):
    d = tmp_path_factory.mktemp("releases")
    write_inventory(d / "hosts", list(hosts.values()), extra_vars=SANDBOX_VARS)
    return d


def release(host) -> str:
    return host.exec(["sh", "-c", ". /etc/os-release && echo $VERSION_CODENAME"]).stdout.strip()


@pytest.mark.parametrize("suite", SUITES)
def test_roles_converge_then_rerun_changes_nothing(hosts, project, suite):
    host = hosts[suite]
    assert release(host) == suite
    r = invoke("provision", "--host", host.name, "--roles", ROLES, cwd=project, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert recap(r.stdout)[host.name]["changed"] >= 3
    again = invoke("provision", "--host", host.name, "--roles", ROLES, cwd=project, timeout=600)
    assert again.returncode == 0, again.stdout + again.stderr
    assert recap(again.stdout)[host.name]["changed"] == 0, again.stdout
    # Through docker exec: what the roles declared is there.
    assert f"{KEY} = 0" in host.exec(["cat", PERSIST_FILE]).stdout
    assert host.exec(["cat", f"/proc/sys/{KEY.replace('.', '/')}"]).stdout.strip() == "0"
    assert host.exec(["systemctl", "is-enabled", LATENCY_UNIT]).stdout.strip() == "enabled"
    assert host.exec(["systemctl", "is-active", "docker"]).stdout.strip() == "active"
    assert host.exec(["docker", "info", "--format", "{{.ServerVersion}}"]).stdout.strip()
    compose = host.exec("docker compose version || docker-compose version", check=False)
    assert compose.returncode == 0, compose.stdout + compose.stderr


@pytest.mark.parametrize("suite", SUITES)
@pytest.mark.reliability(item=26, fault="a daemon.json typo against each release's dockerd (20.10: a copy read "
                                        "up to its pid file; 26: dockerd --validate)",
                         checks=("whole old or new file", "no leftovers", "exit code"))
def test_a_daemon_json_typo_is_refused_by_the_releases_own_dockerd(hosts, project, suite):
    host = hosts[suite]
    before = host.exec("cat /etc/docker/daemon.json 2>/dev/null || true").stdout
    pid = host.exec(["systemctl", "show", "-p", "MainPID", "--value", "docker"]).stdout
    r = invoke("provision", "--host", host.name, "--roles", "docker", "--set",
               "docker_daemon_config={log-levl: info}", cwd=project, timeout=600)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "dockerd refuses the merged /etc/docker/daemon.json" in r.stdout and "log-levl" in r.stdout, r.stdout
    assert host.exec("cat /etc/docker/daemon.json 2>/dev/null || true").stdout == before
    assert host.exec(["systemctl", "show", "-p", "MainPID", "--value", "docker"]).stdout == pid
    assert not [n for n in host.exec(["ls", "-A", "/etc/docker"]).stdout.split() if ".bringup" in n]


def drift(project, *args):
    return invoke("drift", "--group", "sandbox", "--roles", ROLES, *args, cwd=project, timeout=600)


def test_drift_converged_then_drifted_then_unreachable(hosts, project, tmp_path):
    r = drift(project, "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads(r.stdout)
    assert doc["drifted"] == [] and {h["status"] for h in doc["hosts"].values()} == {"converged"}

    # Behind bringup's back, on trixie only: the live value differs from the inventory's.
    hosts["trixie"].exec(["sysctl", "-w", f"{KEY}=1"])
    r = drift(project, "--json")
    assert r.returncode == 2, r.stdout + r.stderr
    doc = json.loads(r.stdout)
    assert doc["drifted"] == [hosts["trixie"].name]
    assert doc["hosts"][hosts["trixie"].name]["roles"]["sysctl"]["pending"] == [f"sysctl:{KEY}"]
    assert doc["hosts"][hosts["bookworm"].name]["status"] == "converged"
    assert hosts["trixie"].exec(["sysctl", "-n", KEY]).stdout.strip() == "1"  # check mode changed nothing

    # A host that is down: unreachable wins (exit 4); the table and the Prometheus file say which.
    inv = yaml.safe_load((project / "hosts").read_text())
    inv["all"]["children"]["sandbox"]["hosts"]["down-01"] = {"ansible_host": "127.0.0.1", "ansible_port": free_port(),
                                                             "ssh_connect_timeout": 3}
    (project / "hosts").write_text(yaml.safe_dump(inv))
    prom = tmp_path / "bringup.prom"
    r = drift(project, "--prometheus", str(prom))
    assert r.returncode == 4, r.stdout + r.stderr
    rows = {l.split()[0]: l.split()[1] for l in r.stdout.splitlines() if l.strip().startswith(("rel-", "down-"))}
    assert rows == {hosts["bookworm"].name: "converged", hosts["trixie"].name: "drifted", "down-01": "unreachable"}
    text = prom.read_text()
    check = subprocess.run([shutil.which("promtool") or "promtool", "check", "metrics"], input=text,
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    assert f'bringup_drift_resources{{host="{hosts["trixie"].name}",role="sysctl"}} 1.0' in text
    assert f'bringup_drift_resources{{host="{hosts["bookworm"].name}",role="sysctl"}} 0.0' in text
    assert 'bringup_unreachable{host="down-01"} 1.0' in text
    assert f'bringup_unreachable{{host="{hosts["trixie"].name}"}} 0.0' in text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bringup.prom"]  # no temporary left
