"""Role container_toolkit: the four packages at the pinned version and held, the nvidia runtime in daemon.json and docker info."""
from __future__ import annotations

import pytest

from bringup.auditkit import declared, find
from bringup.command import sh
from roles.container_toolkit import PACKAGES


@pytest.fixture(scope="module")
def state(target):
    return declared(target, "container_toolkit")


def _drift(target, items):
    wrong = [d.drift for d in items if d.drift]
    assert not wrong, f"{target.name}: " + "; ".join(wrong)


def _gated(target, state) -> None:
    """No GPU on a cpu profile: the role skipped itself; a GPU profile without one fails (precondition)."""
    _drift(target, find(state, "precondition"))
    skips = find(state, "skip")
    if skips:
        pytest.skip(f"skipped by the role: {skips[0].plan.reason}")


def test_packages_pinned_and_held(target, state):
    _gated(target, state)
    pkgs = find(state, "packages")
    assert pkgs and set(PACKAGES) <= set(pkgs[0].resource.packages), f"{target.name}: the role declares no toolkit packages"
    items = pkgs + (find(state, "hold") if target.vars["container_toolkit_hold"] else [])
    _drift(target, items)
    ver = target.vars["container_toolkit_version"]
    got = target.read_many({p: sh("dpkg-query -W -f='${Version}' -- %s", p) for p in PACKAGES})
    wrong = [f"{p} is {got[p] or 'absent'}, want {ver}" for p in PACKAGES if (got[p] or "").strip() != ver]
    assert not wrong, f"{target.name}: " + "; ".join(wrong)


def test_daemon_json_has_the_nvidia_runtime(target, state):
    _gated(target, state)
    _drift(target, find(state, "json"))


def test_docker_info_lists_the_runtime(target, state):
    _gated(target, state)
    probes = find(state, "probe")
    assert probes, f"{target.name}: the role declares no docker info check"
    wrong = [f"check failed: {d.resource.name}" for d in probes if d.drift]
    assert not wrong, f"{target.name}: " + "; ".join(wrong)
