"""Role irq_affinity: irqbalance kept off the Triton CPUs, the boot unit and its plan, live IRQs where managed."""
from __future__ import annotations

import pytest

from bringup.auditkit import declared, find
from roles.irq_affinity import PLAN_FILE, SCRIPT, UNIT, UNIT_FILE


@pytest.fixture(scope="module")
def state(target):
    return declared(target, "irq_affinity")


def _drift(target, items):
    wrong = [d.drift for d in items if d.drift]
    assert not wrong, f"{target.name}: " + "; ".join(wrong)


def test_irqbalance(target, state):
    mode = target.vars["irqbalance"]
    files = [d for d in find(state, "file") if d.resource.name.endswith("/irqbalance")]
    svc = find(state, "service", "irqbalance.service")
    if mode == "unmanaged":
        assert not files and not svc, f"{target.name}: irqbalance is unmanaged, yet the role declares it"
        return
    assert svc, f"{target.name}: the role declares no irqbalance.service state (irqbalance: {mode})"
    if mode == "keep":
        assert files, f"{target.name}: the role declares no irqbalance environment file"
    # The unit's own conditions (ConditionVirtualization=!container) make it a skip, with systemd's reason.
    _drift(target, files + svc)


def test_boot_unit_and_plan_file(target, state):
    paths = [PLAN_FILE, SCRIPT, UNIT_FILE]
    items = [d for d in find(state, "file") if d.resource.name in paths] + find(state, "service", UNIT)
    if not target.vars["irq_affinity_persist"]:
        assert not items, f"{target.name}: irq_affinity_persist is false, yet the role declares {UNIT}"
        return
    assert len(items) == 4, f"{target.name}: the role declares {[d.resource.id for d in items]}, want 3 files + {UNIT}"
    _drift(target, items)


def test_live_affinities(target, state):
    irqs = find(state, "irq")
    # In a container without irq_affinity_in_containers (and for IRQs the kernel manages) each IRQ is a
    # skip with the role's reason: nothing to audit there.
    assert all(d.plan.reason for d in irqs if d.plan.skipped), f"{target.name}: an IRQ skipped without a reason"
    _drift(target, irqs)
