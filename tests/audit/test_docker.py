"""Role docker: engine packages (held when pinned), containerd and docker running and enabled, compose, daemon.json."""
from __future__ import annotations

import pytest

from bringup.auditkit import declared, find


@pytest.fixture(scope="module")
def state(target):
    return declared(target, "docker")


def _drift(target, items):
    wrong = [d.drift for d in items if d.drift]
    assert not wrong, f"{target.name}: " + "; ".join(wrong)


def test_preconditions(target, state):
    _drift(target, find(state, "precondition"))


def test_packages_and_hold(target, state):
    _drift(target, find(state, "packages") + find(state, "hold"))


def test_service_running_and_enabled(target, state):
    skips = find(state, "skip")
    if skips:  # no systemd: the role's own reason
        assert all(d.plan.reason for d in skips)
        return
    svc = find(state, "service", "docker")
    assert svc, f"{target.name}: the role declares no docker service"
    _drift(target, svc + find(state, "service", "containerd"))


def test_compose_available(target, state):
    if target.vars["docker_compose"] == "none":
        return
    r = target.host.run("docker compose version || docker-compose version")
    assert r.rc == 0, f"{target.name}: neither `docker compose` nor `docker-compose` works ({r.stderr.strip()[:120]})"


def test_daemon_json(target, state):
    _drift(target, find(state, "json"))
