"""Faults leave neither debt nor litter on a real sandbox host.

- A handler lost to a dropped connection (daemon.json written, ``restart docker`` not run) runs on
  the next run, which says why; the run after it changes nothing.
- A daemon.json write that fails on a full disk (a tiny tmpfs in the container) leaves no temporary
  file and no half-made backup (dockerd's own key.json may appear: the restart a failed write still
  owes runs); backups bringup made are pruned to the newest, others' files kept.
- A file name of 250 characters ships, and is replaced with a backup.

Checks go through ``docker exec``.
"""
from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from harness import write_inventory

from .helpers import invoke, recap, role_project

pytestmark = pytest.mark.integration

PENDING = "/var/lib/bringup/pending-handlers"


def docker_debug(host) -> str:
    """Whether the running dockerd has debug on, from the daemon itself (not its file)."""
    for _ in range(60):
        r = host.exec(["docker", "info", "--format", "{{.Debug}}"], check=False)
        if r.returncode == 0:
            return r.stdout.strip()
        time.sleep(1)
    raise AssertionError(f"dockerd does not answer: {r.stderr}")


def daemon_json(host) -> dict:
    return json.loads(host.exec(["cat", "/etc/docker/daemon.json"]).stdout)


def ls(host, folder: str) -> list[str]:
    return sorted(host.exec(["ls", "-A", folder]).stdout.split())


def litter(host, folder: str) -> list[str]:
    """bringup's temporary files and backups in ``folder``."""
    return [n for n in ls(host, folder) if ".bringup" in n or n.endswith(".bak")]


def _run_cut_off_after_write(hosts: Path, container: str):
    """The docker role in-process; ``docker pause`` the host once its write script has returned."""
    from bringup.inventory.hosts import load_inventory
    from bringup.project import content_root
    from bringup.engine.roles import load_roles, select_roles
    from bringup.engine.runner import Options, prepare, run_hosts
    from bringup.engine.templates import Templates

    inv = load_inventory(hosts)
    chosen = list(inv.hosts.values())
    order, every = load_roles(content_root())
    roles = select_roles(order, every, "docker")

    def progress(host: str, text: str) -> None:
        # "verifying" comes after the write round trip and before the re-read and the handlers.
        if text == "docker: verifying":
            subprocess.run(["docker", "pause", container], check=True, capture_output=True)

    try:
        return run_hosts(chosen, roles, prepare(chosen, roles, list(every.values())), Options(forks=1),
                         Templates(content_root() / "templates"), progress)[0]
    finally:
        subprocess.run(["docker", "unpause", container], capture_output=True)


@pytest.mark.reliability(item=10, fault='connection dropped between the daemon.json write and restart docker',
                         checks=('whole old or new file', 'no leftovers', 'next run converges'))
def test_a_handler_lost_to_a_dropped_connection_runs_on_the_next_run(sandbox_host, tmp_path):
    host = sandbox_host
    host.exec("rm -f /etc/docker/daemon.json; systemctl enable --now docker")
    assert docker_debug(host) == "false"
    write_inventory(tmp_path / "hosts", [host], extra_vars={"docker_daemon_config": {"debug": True},
                                                            "command_timeout": 8})

    cut = _run_cut_off_after_write(tmp_path / "hosts", host.container)
    assert cut.status == "unreachable", (cut.status, cut.message)
    # The file is new, the daemon still runs the old config, and the debt is recorded on the host.
    assert daemon_json(host) == {"debug": True}
    assert not [n for n in ls(host, "/etc/docker") if ".bringup" in n]
    assert docker_debug(host) == "false"
    assert host.exec(["cat", PENDING]).stdout == "docker:restart docker\n"

    r = invoke("provision", "--host", host.name, "--roles", "docker", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "handler:restart docker  pending from an interrupted run" in r.stdout, r.stdout
    assert recap(r.stdout)[host.name]["changed"] == 1
    assert docker_debug(host) == "true"
    assert host.exec(["test", "-e", PENDING], check=False).returncode == 1

    r = invoke("provision", "--host", host.name, "--roles", "docker", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert recap(r.stdout)[host.name]["changed"] == 0, r.stdout


@pytest.fixture()
def full_docker_dir(sandbox_host):
    """/etc/docker on a 64 KiB tmpfs in the container; unmounted afterwards."""
    host = sandbox_host
    host.exec("mkdir -p /etc/docker && mount -t tmpfs -o size=64k,mode=0755 tmpfs /etc/docker")
    try:
        yield host
    finally:
        host.exec("umount /etc/docker", check=False)


@pytest.mark.reliability(item=12, fault='daemon.json write on a full disk: the temp file, then the backup copy', variants=2,
                         checks=('whole old or new file', 'no leftovers', 'next run converges'))
def test_a_daemon_json_write_failing_on_a_full_disk_leaves_nothing(full_docker_dir, tmp_path):
    host = full_docker_dir
    # 6 KB of a key someone else set: the merged file and its backup need two pages each.
    old = json.dumps({"labels": ["bulk=" + "x" * 6000]})
    host.exec("cat > /etc/docker/daemon.json", input=old)
    write_inventory(tmp_path / "hosts", [host], extra_vars={"docker_daemon_config": {"debug": True}})

    def fails_leaving_nothing() -> None:
        r = invoke("provision", "--host", host.name, "--roles", "docker", cwd=tmp_path)
        assert r.returncode == 2 and "No space left" in r.stdout, r.stdout + r.stderr
        assert litter(host, "/etc/docker") == []
        assert host.exec(["cat", "/etc/docker/daemon.json"]).stdout == old

    # No room at all: the temporary file cannot be written.
    host.exec("dd if=/dev/zero of=/etc/docker/filler bs=4k 2>/dev/null || true")
    fails_leaving_nothing()
    # Room for the new file (three pages) but not for its backup too: the copy fails half-way.
    host.exec("truncate -s -12K /etc/docker/filler")
    fails_leaving_nothing()

    # Room again: the next run converges, with one backup of the old file.
    host.exec("rm /etc/docker/filler")
    r = invoke("provision", "--host", host.name, "--roles", "docker", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert daemon_json(host)["debug"] is True
    backups = litter(host, "/etc/docker")
    assert len(backups) == 1 and backups[0].startswith("daemon.json.2"), backups
    assert host.exec(["cat", f"/etc/docker/{backups[0]}"]).stdout == old


ROLE = '''
from bringup.resources import File

def resources(host):
    return [File("/srv/h4/" + "n" * 250, content=host.vars["text"]),
            File("/srv/h4/app.conf", content=host.vars["text"])]
'''


@pytest.fixture()
def project(sandbox_host, tmp_path) -> Path:
    return role_project(tmp_path, {"ship": ROLE}, {"h": sandbox_host})


@pytest.mark.reliability(item=12, fault="a 250-character file name; backups pruned to bringup's own",
                         checks=('no leftovers', "others' files kept", 'next run converges'))
def test_a_250_character_name_ships_and_backups_are_pruned_to_bringups_own(sandbox_host, project):
    host = sandbox_host
    long = "n" * 250
    host.exec("rm -rf /srv/h4 && mkdir -p /srv/h4")
    # Backups of app.conf bringup made earlier, and files someone else named alike.
    ours = [f"app.conf.2020010{i}T000000.bak" for i in range(1, 8)]
    theirs = ["app.conf.bak", "app.conf.orig.bak", "app.conf.2020.bak", "app.conf.20200101T000000.bak.keep"]
    host.exec("cd /srv/h4 && touch " + " ".join(ours + theirs))

    r = invoke("provision", "--host", "h", "--set", "text=one", cwd=project)
    assert r.returncode == 0, r.stdout + r.stderr
    assert host.exec(["cat", f"/srv/h4/{long}"]).stdout == "one"
    r = invoke("provision", "--host", "h", "--set", "text=two", cwd=project)
    assert r.returncode == 0, r.stdout + r.stderr
    assert host.exec(["cat", f"/srv/h4/{long}"]).stdout == "two"

    names = ls(host, "/srv/h4")
    assert not [n for n in names if ".bringup" in n], names
    long_backups = [n for n in names if n.startswith("nnnn") and n.endswith(".bak")]
    assert len(long_backups) == 1 and len(long_backups[0]) <= 255
    assert host.exec(["cat", f"/srv/h4/{long_backups[0]}"]).stdout == "one"
    app_backups = sorted(n for n in names if n.startswith("app.conf.") and n not in theirs)
    # The newest five: four of the old ones and the backup of "one" made by the second run.
    assert len(app_backups) == 5, names
    assert app_backups[:4] == ours[-4:]
    assert host.exec(["cat", f"/srv/h4/{app_backups[-1]}"]).stdout == "one"
    assert all(n in names for n in theirs)
    r = invoke("provision", "--host", "h", "--set", "text=two", cwd=project)
    assert recap(r.stdout)["h"]["changed"] == 0
