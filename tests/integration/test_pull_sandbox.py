"""Pull mode on a sandbox host (issue 33): the pull role installed from the control machine, then the host
converging itself from the Git repository with no control machine involved: a signed push applies, an
unsigned one is refused and the host stays at the last good revision.

The Git server is the host's own ``/srv/fleet.git``, pushed to over SSH from here (``git push ssh://``); the
host's timer unit fetches it as ``file:///srv/fleet.git``.  No network: the host's only apt source is a
``file:`` repository holding this machine's own git (Debian 12's, as the host's) packaged as ``git``, which
the role installs; bringup itself is this checkout with the Python libraries it imports, copied to
``/opt/bringup/lib`` and run by the host's python3 (3.11, as here) from ``/usr/local/bin/bringup`` (the role's
``command``; on a rack, its ``package`` installs it with pip).
"""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from bringup.ssh.command import join

from .helpers import invoke
from .pull_setup import demo_repository, git, git_repository, install_bringup, python_libs, use_apt_repository

pytestmark = pytest.mark.integration

@pytest.fixture(scope="module")
def host(sandbox_host_factory, tmp_path_factory):
    h = sandbox_host_factory("pull-01")
    d = tmp_path_factory.mktemp("pull-host")
    use_apt_repository(h, git_repository(d))
    install_bringup(h, python_libs(d))
    return h


@pytest.mark.reliability(item=33, fault="pull on a sandbox host under its timer's unit: an unsigned push, then one "
                                        "signed by an unknown key", variants=2,
                         checks=("nothing touched", "report written", "next run converges"))
def test_the_pull_role_installs_and_the_host_converges_itself_from_signed_pushes_only(host, tmp_path):
    ops, stranger = tmp_path / "ops", tmp_path / "stranger"
    for key in (ops, stranger):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", key.name, "-f", str(key)], check=True)
    signer = f"ops@example.org {(tmp_path / 'ops.pub').read_text().strip()}"
    # 1. From the control machine: the pull role (git, the allowed signers, the service and its timer).
    control = tmp_path / "control"
    control.mkdir()
    (control / "hosts").write_text(yaml.safe_dump({"all": {"hosts": {host.name: {
        **host.inventory_vars(),
        "bringup_pull": {"url": "file:///srv/fleet.git", "branch": "main", "allowed_signers": [signer],
                         "command": "/usr/local/bin/bringup", "on_boot": "1h", "interval": "1h"}}}}}))
    r = invoke("provision", "--host", host.name, "--roles", "pull", cwd=control, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert host.exec("systemctl is-enabled bringup-pull.timer; systemctl is-active bringup-pull.timer"
                     ).stdout.split() == ["enabled", "active"]
    assert host.exec(["cat", "/etc/bringup/allowed_signers"]).stdout == signer + "\n"

    # 2. The repository: its own role, and an inventory naming the host with the local connection.
    host.exec("git init --quiet --bare -b main /srv/fleet.git")
    work = demo_repository(tmp_path / "work")
    ssh = {"GIT_SSH_COMMAND": join(host.ssh_argv()[:-3])}  # git adds the port and the user@host of the URL
    server = f"ssh://root@127.0.0.1:{host.port}/srv/fleet.git"

    def push(greeting: str, signed: bool, key: Path = ops) -> str:
        (work / "hosts").write_text(yaml.safe_dump({"all": {"hosts": {host.name: {
            "ansible_connection": "local", "greeting": greeting}}}}))
        git(work, "add", "-A")
        git(work, "commit", "--quiet", *(["-S"] if signed else []), "-m", greeting, key=key if signed else None)
        git(work, "push", "--quiet", server, "HEAD:main", env=ssh)
        return git(work, "rev-parse", "HEAD")

    def tick() -> tuple[int, dict]:
        """What the timer does: one run of the service, to its end."""
        rc = host.exec("systemctl start bringup-pull.service", check=False, timeout=600).returncode
        state = host.exec(["cat", "/var/lib/bringup/pull/state.json"], check=False)
        assert state.returncode == 0, host.exec("journalctl -u bringup-pull --no-pager | tail -40", check=False).stdout
        return rc, json.loads(state.stdout)

    # 3. A signed push converges the host, with no control machine involved.
    good = push("hello from git", signed=True)
    rc, state = tick()
    assert rc == 0, host.exec("journalctl -u bringup-pull --no-pager | tail -40", check=False).stdout
    assert host.exec(["cat", "/etc/pull-demo.conf"]).stdout == "hello from git\n"
    assert state["applied"] == good and state["last"]["status"] == "applied"
    prom = host.exec(["cat", "/var/lib/node_exporter/textfile_collector/bringup-pull.prom"]).stdout
    assert f'bringup_pull_applied_info{{host="{host.name}",revision="{good}"}} 1.0' in prom

    # 4. An unsigned push is refused: the file stays, the refusal is in the state, the metrics and the journal.
    bad = push("unsigned change", signed=False)
    rc, state = tick()
    assert rc != 0  # the unit failed (exit 3): systemctl --failed shows the host
    assert host.exec(["cat", "/etc/pull-demo.conf"]).stdout == "hello from git\n"
    assert state["applied"] == good and state["last_refusal"]["reason"] == "unsigned"
    assert state["last_refusal"]["revision"] == bad
    journal = host.exec("journalctl -u bringup-pull --no-pager", check=False).stdout
    assert f"refused: revision {bad[:12]} is not signed" in journal
    prom = host.exec(["cat", "/var/lib/node_exporter/textfile_collector/bringup-pull.prom"]).stdout
    assert 'reason="unsigned"' in prom and f'revision="{good}"' in prom

    # 5. A revision signed by a key the host does not trust: refused the same way.
    push("stranger's change", signed=True, key=stranger)
    rc, state = tick()
    assert rc != 0 and state["last_refusal"]["reason"] == "unknown-key" and state["applied"] == good
    assert host.exec(["cat", "/etc/pull-demo.conf"]).stdout == "hello from git\n"

    # 6. The next signed push converges again.
    newer = push("hello again", signed=True)
    rc, state = tick()
    assert rc == 0 and state["applied"] == newer
    assert host.exec(["cat", "/etc/pull-demo.conf"]).stdout == "hello again\n"
