"""Issue 34 item 12: a failed repository key fetch must not leave a list naming a keyring never written.

Before, the plan wrote ``<name>.list`` (``signed-by=/usr/share/keyrings/<name>.gpg``) first and fetched the
key after it: a fetch that failed left the list, and the host's every ``apt-get update`` failed.  Now the
keyring comes first, the list last, and a failed step puts back what the steps before it wrote.

The plan's own read and write scripts run here with ``sh``, their folders moved under a temporary root (the
only edit: the five absolute folders the resource uses) and ``apt-get`` a stub exiting with the code the test
chooses; ``curl`` is the real one, fetching ``file://`` URLs.
"""
from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import pytest

from bringup.resources.apt import AptRepository

KEY = Path("/usr/share/keyrings/debian-archive-keyring.gpg")  # a real OpenPGP key: fakes are refused
FOLDERS = ("/usr/share/keyrings", "/etc/apt/sources.list.d", "/etc/apt/auth.conf.d", "/var/lib/bringup/apt",
           "/var/backups/bringup-apt")
CHECKS = ("whole old or new file", "no leftovers", "next run converges")


class Host:
    """A temporary root holding the resource's folders, and an apt-get that exits with ``apt_rc``."""

    def __init__(self, root: Path):
        self.root = root
        for f in FOLDERS:
            (root / f.lstrip("/")).mkdir(parents=True, exist_ok=True)
        stub = root / "bin"
        stub.mkdir()
        (stub / "apt-get").write_text('#!/bin/sh\necho "apt-get $*" >> "$APT_LOG"\nexit "${APT_RC:-0}"\n')
        (stub / "apt-get").chmod(0o755)
        self.apt_rc = 0

    def path(self, p: str) -> Path:
        return self.root / p.lstrip("/")

    def sh(self, script: str) -> subprocess.CompletedProcess:
        for f in FOLDERS:
            script = script.replace(f, str(self.root) + f)
        env = {**os.environ, "PATH": f"{self.root / 'bin'}:{os.environ['PATH']}", "APT_RC": str(self.apt_rc),
               "APT_LOG": str(self.root / "apt.log"), "TMPDIR": str(self.root)}
        return subprocess.run(["sh", "-c", script], capture_output=True, text=True, env=env, timeout=60)

    def provision(self, repo: AptRepository) -> subprocess.CompletedProcess:
        """Read, plan and apply ``repo`` as a run does (its write steps as one section)."""
        plan = repo.plan(self.read(repo))
        return self.sh("( " + "\n".join(plan.commands) + "\n) 2>&1")

    def read(self, repo: AptRepository) -> str:
        """What ``repo``'s read prints, in the host's own paths (as a real host would print them)."""
        return self.sh(repo.read()).stdout.replace(str(self.root), "")

    def files(self) -> dict[str, bytes]:
        return {str(p.relative_to(self.root)): p.read_bytes() for p in sorted(self.root.rglob("*"))
                if p.is_file() and "bin" != p.relative_to(self.root).parts[0] and p.name != "apt.log"}


def repo(key_url: str, **kw) -> AptRepository:
    return AptRepository("docker", url="https://download.docker.com/linux/ubuntu", suite="noble",
                         components=["stable"], key_url=key_url, **kw)


@pytest.fixture
def host(tmp_path):
    return Host(tmp_path / "root")


def test_the_keyring_is_planned_before_the_list_that_names_it():
    plan = repo("file:///k.gpg").plan("")
    text = "\n".join(plan.commands)
    assert text.index("curl -fsSL") < text.index(".docker.list.bringup.") < text.index("apt-get -q update")
    assert list(plan.changes) == ["keyring", "list"]


@pytest.mark.reliability(item=34, fault="the repository key fetch fails (key_url gives nothing): before, the "
                         "list was left naming a keyring never written", checks=CHECKS)
def test_a_failed_key_fetch_writes_no_list_and_the_next_run_converges(host, tmp_path):
    missing = tmp_path / "served" / "gpg"
    r = host.provision(repo(f"file://{missing}"))
    assert r.returncode != 0
    assert host.files() == {}  # no list, no keyring, no stamp, no temporary file
    assert "apt repository docker: a step failed" in r.stdout + r.stderr, r.stdout + r.stderr
    assert not list(host.root.glob("bringup-apt.*"))
    assert not (host.root / "apt.log").exists()  # apt never ran against a list without its key
    # The key served again: the next run writes both and updates.
    missing.parent.mkdir()
    missing.write_bytes(KEY.read_bytes())
    r = host.provision(repo(f"file://{missing}"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert host.path("/usr/share/keyrings/docker.gpg").read_bytes() == KEY.read_bytes()
    assert b"signed-by=/usr/share/keyrings/docker.gpg" in host.path("/etc/apt/sources.list.d/docker.list").read_bytes()
    assert not repo(f"file://{missing}").plan(host.read(repo(f"file://{missing}"))).changed


@pytest.mark.reliability(item=34, fault="the repository's indexes fail to update after its list and key were "
                         "written (apt-get update exit 100)", checks=CHECKS + ("others' files kept",))
def test_a_failed_update_puts_back_the_list_key_and_moved_lists(host, tmp_path):
    served = tmp_path / "gpg"
    served.write_bytes(KEY.read_bytes())
    old = host.path("/etc/apt/sources.list.d/old-docker.list")
    old.write_text("deb https://download.docker.com/linux/ubuntu noble stable\n")  # an operator's copy
    before = host.files()
    host.apt_rc = 100
    r = host.provision(repo(f"file://{served}"))
    assert r.returncode == 100, r.stdout + r.stderr
    assert host.files() == before  # the operator's list back in place, no list or keyring of ours
    assert "a step failed (exit 100)" in r.stdout + r.stderr
    host.apt_rc = 0
    assert host.provision(repo(f"file://{served}")).returncode == 0
    assert not old.exists() and host.path("/var/backups/bringup-apt/old-docker.list").exists()


@pytest.mark.reliability(item=34, fault="a rotated key refused against its pin on a host whose repository worked",
                         checks=CHECKS)
def test_a_refused_key_rotation_leaves_the_working_pair(host, tmp_path):
    served = tmp_path / "gpg"
    served.write_bytes(KEY.read_bytes())
    assert host.provision(repo(f"file://{served}")).returncode == 0
    before = host.files()
    served.write_bytes(Path("/usr/share/keyrings/debian-archive-removed-keys.gpg").read_bytes())  # rotated
    pin = hashlib.sha256(KEY.read_bytes()).hexdigest()
    other = AptRepository("docker", url="https://download.docker.com/linux/ubuntu/v2", suite="noble",
                          components=["stable"], key_url=f"file://{served}", key_sha256="0" * 64)
    r = host.provision(other)  # a new list and a key that does not match its pin
    assert r.returncode != 0 and "not the pinned" in r.stdout + r.stderr
    assert host.files() == before
    assert hashlib.sha256(host.path("/usr/share/keyrings/docker.gpg").read_bytes()).hexdigest() == pin


def test_a_list_left_by_the_old_order_without_its_keyring_goes(host, tmp_path):
    """A host an older run left broken (the list, no keyring): a failed fetch now removes that list."""
    host.path("/etc/apt/sources.list.d/docker.list").write_bytes(repo("file:///x").content)
    r = host.provision(repo(f"file://{tmp_path / 'nothing'}"))
    assert r.returncode != 0
    assert "removed" in r.stdout + r.stderr and host.files() == {}
