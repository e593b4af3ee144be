"""Packages on a host whose apt lists do not know the package yet (a fresh cloud image: lists empty or
older than the repository).  The install fails with "Unable to locate package"; bringup updates the lists
and installs once more, instead of failing the run until someone runs `apt-get update` by hand.

A sandbox host of its own whose only apt source is a `file:` repository of one TEST-DOUBLE package (no
network: Debian's sources are moved aside on that host).
"""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from harness.doubles.debrepo import build_deb, write_index
from .helpers import invoke, recap, role_project

pytestmark = pytest.mark.integration

ROLE = '''
from bringup.resources import Packages

def resources(host):
    return [Packages({"bringup-lists-td": None})]
'''


@pytest.fixture(scope="module")
def host(sandbox_host_factory, tmp_path_factory):
    h = sandbox_host_factory("pkg-lists")
    repo = tmp_path_factory.mktemp("td-repo")
    build_deb(repo, "bringup-lists-td", "1.0")
    write_index(repo)
    for stray in repo.glob("build-*"):
        subprocess.run(["rm", "-rf", str(stray)], check=True)
    subprocess.run(["docker", "cp", str(repo), f"{h.container}:/srv/td"], check=True, capture_output=True)
    h.exec("mkdir -p /root/apt-aside && mv /etc/apt/sources.list.d/* /etc/apt/sources.list /root/apt-aside/ "
           "2>/dev/null; echo 'deb [trusted=yes] file:/srv/td ./' > /etc/apt/sources.list.d/td.list")
    return h


@pytest.fixture()
def project(host, tmp_path) -> Path:
    return role_project(tmp_path, {"lists": ROLE}, {host.name: host})


def test_a_package_the_lists_do_not_know_is_installed_after_an_update(host, project):
    # What apt says before: the lists have never seen this repository.
    said = host.exec("apt-get -q -s install bringup-lists-td 2>&1 || true").stdout
    assert "Unable to locate package bringup-lists-td" in said
    r = invoke("provision", "--host", host.name, cwd=project)
    assert r.returncode == 0, r.stdout + r.stderr
    assert host.exec(["dpkg-query", "-W", "-f=${Version}", "bringup-lists-td"]).stdout == "1.0"
    r = invoke("provision", "--host", host.name, cwd=project)
    assert r.returncode == 0 and recap(r.stdout)[host.name]["changed"] == 0, r.stdout


def test_a_package_no_repository_has_still_fails_with_apts_words(host, tmp_path, project):
    (project / "roles" / "lists.py").write_text(ROLE.replace("bringup-lists-td", "bringup-nowhere-td"))
    r = invoke("provision", "--host", host.name, cwd=project)
    assert r.returncode == 2
    assert "Unable to locate package bringup-nowhere-td" in r.stdout, r.stdout
