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
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from bringup.command import join

from .helpers import REPO, invoke

pytestmark = pytest.mark.integration

ROLE = '''
from bringup.resources import File

FACTS = ()

def resources(host):
    return [File("/etc/pull-demo.conf", content=host.vars["greeting"] + "\\n")]
'''

#: What the pull run and the converge import (bringup's own modules are copied whole).
PROBE = ("import json, sys\n"
         "import bringup.cli, bringup.pull.run, bringup.pull.fleet, bringup.runner, bringup.rollout, bringup.report\n"
         "import bringup.templates, bringup.resources, bringup.facts, bringup.vault, bringup.inventory\n"
         "import bringup.connection, bringup.ahead, bringup.rolerun, bringup.secrets, bringup.stop\n"
         "import rich.console, rich.table, rich.progress, rich.live, rich.text, jinja2, yaml, pydantic\n"
         "import prometheus_client, prometheus_client.parser, invoke, paramiko\n"
         "print(json.dumps(sorted({m.__file__ for m in list(sys.modules.values())\n"
         "                         if getattr(m, '__file__', None)})))\n")


def python_libs(out: Path) -> Path:
    """bringup and the third-party packages the probe imports, as a folder for PYTHONPATH."""
    files = json.loads(subprocess.run([sys.executable, "-c", PROBE], cwd=REPO, capture_output=True, text=True,
                                      check=True).stdout)
    lib = out / "lib"
    lib.mkdir()
    tops = set()
    for f in files:
        parts = Path(f).parts
        if "site-packages" in parts:
            tops.add(Path(*parts[:parts.index("site-packages") + 2]))
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "tests")
    # Their distributions' metadata too: paramiko, for one, reads its version from it.
    from importlib.metadata import packages_distributions, distribution

    dists = {d for top in tops for d in packages_distributions().get(top.name.split(".")[0], [])}
    for name in dists:
        meta = Path(distribution(name)._path)  # type: ignore[attr-defined]
        shutil.copytree(meta, lib / meta.name, ignore=ignore)
    for top in tops:
        if top.is_dir():
            shutil.copytree(top, lib / top.name, ignore=ignore, symlinks=True)
        else:
            shutil.copy2(top, lib / top.name)
    shutil.copytree(REPO / "bringup", lib / "bringup", ignore=ignore)
    return lib


def git_repository(out: Path) -> Path:
    """A flat apt repository with this machine's git (its own files, ``dpkg -L git``) as package ``git``."""
    from harness.doubles.debrepo import write_index

    version = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "git"], capture_output=True, text=True,
                             check=True).stdout
    root = out / "build-git"
    for line in subprocess.run(["dpkg", "-L", "git"], capture_output=True, text=True, check=True).stdout.splitlines():
        src = Path(line)
        if line.startswith(("/usr/bin/", "/usr/lib/git-core/", "/usr/share/git-core/")) and \
                (src.is_symlink() or src.is_file()):
            dst = root / line.lstrip("/")
            dst.parent.mkdir(parents=True, exist_ok=True)
            if src.is_symlink():
                os.symlink(os.readlink(src), dst)
            else:
                shutil.copy2(src, dst)
    (root / "DEBIAN").mkdir()
    (root / "DEBIAN" / "control").write_text(
        f"Package: git\nVersion: {version}\nArchitecture: amd64\nMaintainer: bringup tests <tests@invalid>\n"
        "Depends: libc6, libpcre2-8-0, zlib1g\nDescription: this machine's git, repackaged by bringup's tests\n"
        " The files of the control machine's own git package (Debian 12), for a host without network.\n")
    repo = out / "repo"
    repo.mkdir()
    subprocess.run(["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", str(root), str(repo / "git.deb")],
                   check=True, capture_output=True)
    write_index(repo)
    return repo


def git(cwd: Path, *args: str, key: Path | None = None, env: dict | None = None) -> str:
    sign = ["-c", "gpg.format=ssh", "-c", f"user.signingkey={key}"] if key else []
    p = subprocess.run(["git", "-c", "user.name=ops", "-c", "user.email=ops@example.org", *sign, *args], cwd=cwd,
                       env=dict(os.environ, GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1", **(env or {})),
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return p.stdout.strip()


@pytest.fixture(scope="module")
def host(sandbox_host_factory, tmp_path_factory):
    h = sandbox_host_factory("pull-01")
    d = tmp_path_factory.mktemp("pull-host")
    repo = git_repository(d)
    subprocess.run(["docker", "cp", str(repo), f"{h.container}:/srv/pull-apt"], check=True, capture_output=True)
    h.exec("mkdir -p /root/apt-aside && mv /etc/apt/sources.list.d/* /etc/apt/sources.list /root/apt-aside/ "
           "2>/dev/null; echo 'deb [trusted=yes] file:/srv/pull-apt ./' > /etc/apt/sources.list.d/pull.list")
    lib = python_libs(d)
    h.exec("mkdir -p /opt/bringup")
    subprocess.run(["docker", "cp", str(lib), f"{h.container}:/opt/bringup/lib"], check=True, capture_output=True)
    h.exec("install -m 0755 /dev/stdin /usr/local/bin/bringup", input=(
        "#!/bin/sh\nPYTHONPATH=/opt/bringup/lib exec /usr/bin/python3 -c "
        "'import sys; from bringup.entry import main; sys.argv[0] = \"bringup\"; main()' \"$@\"\n"))
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
    work = tmp_path / "work"
    git(tmp_path, "init", "--quiet", "-b", "main", str(work))
    (work / "roles").mkdir()
    (work / "roles" / "__init__.py").write_text("ORDER = ['demo']\n")
    (work / "roles" / "demo.py").write_text(ROLE)
    (work / "templates" / "demo").mkdir(parents=True)
    (work / "templates" / "demo" / ".keep").write_text("")
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
