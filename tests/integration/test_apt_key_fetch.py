"""Issue 34 item 12 on a real sandbox host: a failed repository key fetch leaves no list naming a keyring that
was never written, and a failed update puts the previous list back: the host's own `apt-get update` keeps
working.  The repository is a signed flat `file:` repository of one test-double package (harness.doubles)."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from harness.doubles.debrepo import build_deb
from harness.doubles.nvidia_mirror import make_key, sign_flat_repo

from .helpers import invoke, role_project

pytestmark = pytest.mark.integration

ROLE = '''
from bringup.resources.apt import AptRepository

def resources(host):
    return [AptRepository("kf", url=host.vars["kf_url"], suite="./", key_url=host.vars["kf_key_url"])]
'''
LIST, KEYRING = "/etc/apt/sources.list.d/kf.list", "/usr/share/keyrings/kf.gpg"


@pytest.fixture()
def project(sandbox_host, tmp_path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    build_deb(repo, "kf-double", "1.0-1")
    key = make_key(tmp_path, "kf")
    sign_flat_repo(repo, key, "kf repository")
    (repo / "gpgkey").write_bytes(key.armored.read_bytes())
    sandbox_host.exec(["rm", "-rf", "/srv/kf"])
    subprocess.run(["docker", "cp", str(repo), f"{sandbox_host.container}:/srv/kf"], check=True, capture_output=True)
    (tmp_path / "p").mkdir()
    return role_project(tmp_path / "p", {"kf": ROLE}, {"h": sandbox_host})


def provision(project, url: str, key_url: str):
    return invoke("provision", "--host", "h", "--set", f"kf_url={url}", "--set", f"kf_key_url={key_url}",
                  cwd=project)


def apt_update(host) -> subprocess.CompletedProcess:
    return host.exec(["apt-get", "-q", "update"], check=False)


@pytest.mark.reliability(item=34, fault="repository key fetch fails, then the repository's update fails, on a "
                         "sandbox host", checks=("whole old or new file", "no leftovers", "next run converges"))
def test_no_list_without_its_key_and_a_failed_update_puts_the_old_list_back(sandbox_host, project):
    host = sandbox_host
    baseline = apt_update(host).returncode  # the sandbox's own sources, whatever they give offline
    r = provision(project, "file:/srv/kf", "file:///srv/kf/no-such-key")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "a step failed" in r.stdout, r.stdout
    assert host.exec(["ls", LIST, KEYRING], check=False).returncode != 0
    assert host.exec(["sh", "-c", "ls /tmp | grep -c bringup-apt || true"]).stdout.strip() == "0"
    after = apt_update(host)
    assert after.returncode == baseline and "kf" not in after.stdout + after.stderr, after.stdout + after.stderr

    r = provision(project, "file:/srv/kf", "file:///srv/kf/gpgkey")  # the key served: converges
    assert r.returncode == 0, r.stdout + r.stderr
    good = host.exec(["cat", LIST]).stdout
    assert "signed-by=/usr/share/keyrings/kf.gpg] file:/srv/kf ./" in good
    assert "kf-double" in host.exec(["apt-cache", "policy", "kf-double"]).stdout

    r = provision(project, "file:/srv/no-repo", "file:///srv/kf/gpgkey")  # a list whose update fails
    assert r.returncode == 2, r.stdout + r.stderr
    assert host.exec(["cat", LIST]).stdout == good  # the working list put back
    assert apt_update(host).returncode == baseline
