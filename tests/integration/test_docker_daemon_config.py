"""A bad docker_daemon_config never takes Docker down (issue 26, item 1), on a real sandbox host.

- A one-letter typo (``log-levl``) is refused by dockerd's own check before daemon.json is
  replaced: the run fails with dockerd's words, the file and the running daemon are left as they were.
- Fixing the inventory converges: the keys bringup merged and no longer wants are removed, a key an
  operator set by hand stays.
- A value dockerd's check passes but the service refuses at start (``hosts`` against the unit's
  ``-H fd://``): the previous file is put back, Docker runs again, the run fails with dockerd's words.
- A restart owed by a cut-off run is skipped when Docker already runs the file; a Docker stopped by
  systemd's start limit is started again.

Checks go through ``docker exec``.
"""
from __future__ import annotations

import json
import time

import pytest

from harness import write_inventory

from .helpers import invoke, recap

pytestmark = pytest.mark.integration

PENDING = "/var/lib/bringup/pending-handlers"
HAND_SET = {"live-restore": True}


def daemon_json(host) -> dict:
    return json.loads(host.exec(["cat", "/etc/docker/daemon.json"]).stdout)


def main_pid(host) -> str:
    return host.exec(["systemctl", "show", "-p", "MainPID", "--value", "docker"]).stdout.strip()


def active(host) -> str:
    return host.exec(["systemctl", "is-active", "docker"], check=False).stdout.strip()


def docker_info(host, field: str) -> str:
    """What the running dockerd itself says (not its file)."""
    for _ in range(60):
        r = host.exec(["docker", "info", "--format", "{{." + field + "}}"], check=False)
        if r.returncode == 0:
            return r.stdout.strip()
        time.sleep(1)
    raise AssertionError(f"dockerd does not answer: {r.stderr}")


def litter(host) -> list[str]:
    return [n for n in host.exec(["ls", "-A", "/etc/docker"]).stdout.split() if ".bringup" in n]


@pytest.fixture(scope="module")
def host(sandbox_host):
    sandbox_host.exec("rm -f /etc/docker/daemon.json* /var/lib/bringup/json/etc/docker/daemon.json.keys")
    sandbox_host.exec("cat > /etc/docker/daemon.json", input=json.dumps(HAND_SET))
    sandbox_host.exec("systemctl enable --now docker")
    return sandbox_host


def provision(host, tmp_path, config: dict):
    write_inventory(tmp_path / "hosts", [host], extra_vars={"docker_daemon_config": config})
    return invoke("provision", "--host", host.name, "--roles", "docker", cwd=tmp_path, timeout=400)


@pytest.mark.reliability(item=26, fault="a one-letter typo in docker_daemon_config (log-levl), then fixed",
                         variants=2, checks=("whole old or new file", "no leftovers", "next run converges",
                                             "others' files kept", "exit code"))
def test_a_typo_is_refused_by_dockerd_and_docker_keeps_running(host, tmp_path):
    r = provision(host, tmp_path, {"log-level": "warn", "debug": True})
    assert r.returncode == 0, r.stdout + r.stderr
    assert docker_info(host, "Debug") == "true"
    before, pid = host.exec(["cat", "/etc/docker/daemon.json"]).stdout, main_pid(host)

    # Twice: a refused change owes no restart (repeated failed runs once restarted Docker each time,
    # into systemd's start limit).
    for _ in range(2):
        r = provision(host, tmp_path, {"log-level": "warn", "log-levl": "info"})
        assert r.returncode == 2, r.stdout + r.stderr
        assert "dockerd refuses the merged /etc/docker/daemon.json, left as it was" in r.stdout, r.stdout
        assert "don't match any configuration option: log-levl" in r.stdout, r.stdout
        assert host.exec(["cat", "/etc/docker/daemon.json"]).stdout == before
        assert active(host) == "active" and main_pid(host) == pid  # never restarted
        assert litter(host) == []
        assert host.exec(["test", "-e", PENDING], check=False).returncode == 1  # no restart owed

    # The inventory fixed (and `debug` dropped from it): bringup's `debug` goes, the hand-set key stays.
    r = provision(host, tmp_path, {"log-level": "warn"})
    assert r.returncode == 0, r.stdout + r.stderr
    assert daemon_json(host) == {**HAND_SET, "log-level": "warn"}
    assert docker_info(host, "Debug") == "false"
    r = provision(host, tmp_path, {"log-level": "warn"})
    assert r.returncode == 0 and recap(r.stdout)[host.name]["changed"] == 0, r.stdout


@pytest.mark.reliability(item=26, fault="a daemon.json value dockerd's check passes but the service refuses "
                                        "at start (hosts against -H fd://)", variants=2,
                         checks=("whole old or new file", "next run converges", "exit code"))
def test_a_restart_that_fails_puts_the_previous_file_back_and_docker_runs(host, tmp_path):
    r = provision(host, tmp_path, {"log-level": "warn"})
    assert r.returncode == 0, r.stdout + r.stderr
    before = host.exec(["cat", "/etc/docker/daemon.json"]).stdout
    bad = {"log-level": "warn", "hosts": ["unix:///run/docker-extra.sock"]}
    for _ in range(2):  # and again: never down, whatever the number of runs
        r = provision(host, tmp_path, bad)
        assert r.returncode == 2, r.stdout + r.stderr
        assert "docker.service did not start with the new config" in r.stdout, r.stdout
        assert "specified both as a flag and in the configuration file" in r.stdout, r.stdout
        assert "put back as /etc/docker/daemon.json" in r.stdout and "runs again on the previous config" in r.stdout
        assert host.exec(["cat", "/etc/docker/daemon.json"]).stdout == before
        assert active(host) == "active" and docker_info(host, "ServerVersion")
    r = provision(host, tmp_path, {"log-level": "warn"})
    assert r.returncode == 0, r.stdout + r.stderr
    assert daemon_json(host) == {**HAND_SET, "log-level": "warn"}
    r = provision(host, tmp_path, {"log-level": "warn"})
    assert recap(r.stdout)[host.name]["changed"] == 0, r.stdout


@pytest.mark.reliability(item=26, fault="a restart owed by a cut-off run, Docker already on the file; "
                                        "Docker stopped by systemd's start limit", variants=2,
                         checks=("next run converges",))
def test_an_owed_restart_is_skipped_when_docker_runs_the_file_and_a_start_limit_is_cleared(host, tmp_path):
    r = provision(host, tmp_path, {"log-level": "warn"})
    assert r.returncode == 0, r.stdout + r.stderr
    # Docker started after the file last changed; a cut-off run left the restart owed.
    host.exec("touch -d '-1 hour' /etc/docker/daemon.json && systemctl restart docker")
    host.exec(f"mkdir -p /var/lib/bringup && echo 'docker:restart docker' > {PENDING}")
    pid = main_pid(host)
    r = provision(host, tmp_path, {"log-level": "warn"})
    assert r.returncode == 0, r.stdout + r.stderr
    assert "handler:restart docker" in r.stdout, r.stdout
    assert main_pid(host) == pid
    assert host.exec(["test", "-e", PENDING], check=False).returncode == 1

    # Restarts in a burst: systemd's start limit leaves Docker failed, refusing a plain start.
    host.exec("for i in 1 2 3 4 5; do systemctl restart docker || break; done", check=False)
    assert active(host) == "failed"
    assert host.exec(["systemctl", "start", "docker"], check=False).returncode != 0
    r = provision(host, tmp_path, {"log-level": "warn"})
    assert r.returncode == 0, r.stdout + r.stderr
    assert active(host) == "active" and docker_info(host, "ServerVersion")
