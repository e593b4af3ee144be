"""Role nvidia_driver: branch packages installed and held, nouveau blacklisted, persistenced, no unattended upgrade."""
from __future__ import annotations

import pytest

from bringup.auditkit import declared, find
from roles.nvidia_driver import NOUVEAU_FILE, PREFERENCES_FILE, UNATTENDED_FILE


@pytest.fixture(scope="module")
def state(target):
    items = declared(target, "nvidia_driver")
    wrong = [d.drift for d in find(items, "precondition") if d.drift]  # e.g. a GPU profile without a GPU
    assert not wrong, f"{target.name}: " + "; ".join(wrong)
    skips = find(items, "skip")
    if skips and len(items) == 1:  # no GPU on a cpu profile: the role skipped itself
        pytest.skip(f"skipped by the role: {skips[0].plan.reason}")
    return items


def _drift(target, items):
    wrong = [d.drift for d in items if d.drift]
    assert not wrong, f"{target.name}: " + "; ".join(wrong)


def test_branch_packages_installed_and_held(target, state):
    pkgs = [d for d in find(state, "packages") if not any(p.startswith(("linux-headers-", "kernel-devel-"))
                                                         for p in d.resource.packages)]
    assert pkgs or find(state, "command"), f"{target.name}: the role declares no driver packages"
    holds = find(state, "hold")
    if target.vars["nvidia_driver_hold"]:
        assert holds, f"{target.name}: nvidia_driver_hold is true, yet the role declares no hold"
    _drift(target, pkgs + find(state, "command") + holds
           + [d for d in find(state, "file") if d.resource.name == PREFERENCES_FILE])


def test_nouveau_blacklisted(target, state):
    items = [d for d in find(state, "file") if d.resource.name == NOUVEAU_FILE]
    if target.vars["nvidia_driver_blacklist_nouveau"]:
        assert items, f"{target.name}: the role declares no {NOUVEAU_FILE}"
    _drift(target, items)


def test_unattended_upgrades_blacklist(target, state):
    items = [d for d in find(state, "file") if d.resource.name == UNATTENDED_FILE]
    if find(state, "hold") and find(state, "hold")[0].resource.manager == "apt":
        assert items, f"{target.name}: the role declares no {UNATTENDED_FILE}"
    _drift(target, items)


def test_persistenced(target, state):
    svc = find(state, "service", "nvidia-persistenced")
    skips = [d for d in find(state, "skip") if d.resource.name == "nvidia-persistenced"]
    assert svc or skips, f"{target.name}: the role declares nothing for nvidia-persistenced"
    # Without systemd: a skip whose reason names PID 1 (the role's promise there).
    _drift(target, svc)


def test_driver_loaded(target, state):
    _drift(target, find(state, "nvidia-driver"))
