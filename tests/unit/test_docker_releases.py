"""The docker role per Debian release: 13 (trixie) ships the client apart from docker.io (only Recommended),
so the role installs docker-cli there; 12 and Ubuntu keep docker.io alone (the sandbox hosts prove both,
tests/integration/test_releases.py)."""
from __future__ import annotations

from pathlib import Path

import pytest

from bringup.facts.os_ import parse_os_release
from bringup.resources import Packages
from bringup.engine.roles import HostContext, load_roles
from bringup.engine.templates import Templates

ROOT = Path(__file__).resolve().parents[2]

OS_RELEASE = {
    "bookworm": 'ID=debian\nVERSION_ID="12"\nVERSION_CODENAME=bookworm\n',
    "trixie": 'ID=debian\nVERSION_ID="13"\nVERSION_CODENAME=trixie\n',
    "sid": "ID=debian\nVERSION_CODENAME=forky\n",
    "noble": 'ID=ubuntu\nID_LIKE=debian\nVERSION_ID="24.04"\nVERSION_CODENAME=noble\n',
}


@pytest.mark.parametrize("release,want", [
    ("bookworm", {"docker.io": "26.1"}), ("trixie", {"docker.io": "26.1", "docker-cli": "26.1"}),
    ("sid", {"docker.io": "26.1", "docker-cli": "26.1"}), ("noble", {"docker.io": "26.1"})])
def test_distro_packages_per_release(release, want):
    role = load_roles(ROOT)[1]["docker"]
    facts = {"os.release": parse_os_release(OS_RELEASE[release]), "system.systemd": {"booted": True},
             "system.docker": {}}
    host = HostContext("h", {**role.defaults, "docker_version": "26.1"}, facts, Templates(ROOT / "templates").render)
    packages = next(r for r in role.resources(host) if isinstance(r, Packages))
    assert packages.packages == want
