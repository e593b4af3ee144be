"""Role cpu_tuning: the PM QoS holder and its value, THP mode, cpufreq where it exists, the exported plan."""
from __future__ import annotations

import pytest

from bringup.auditkit import declared, find
from bringup.command import sh
from roles.cpu_tuning import CPUSET_FILE, LATENCY_SCRIPT, LATENCY_UNIT, PLAN_FILE, THP


@pytest.fixture(scope="module")
def state(target):
    return declared(target, "cpu_tuning")


def _drift(target, items):
    wrong = [d.drift for d in items if d.drift]
    assert not wrong, f"{target.name}: " + "; ".join(wrong)


def test_latency_holder_and_pm_qos(target, state):
    us = target.vars["cpu_dma_latency_us"]
    files = [d for d in find(state, "file") if d.resource.name in (LATENCY_SCRIPT, f"/etc/systemd/system/{LATENCY_UNIT}")]
    svc = find(state, "service", LATENCY_UNIT)
    if us is None:
        assert not files and not svc, f"{target.name}: cpu_dma_latency_us is null, yet the role declares {LATENCY_UNIT}"
        return
    assert len(files) == 2 and svc, f"{target.name}: the role does not declare {LATENCY_UNIT} and its script"
    _drift(target, files + svc)
    if svc[0].plan.skipped:
        return  # ConditionPathExists=/dev/cpu_dma_latency failed here: the role's reason, nothing is held
    got = target.read_many({"qos": sh("od -An -td4 -N4 -- %s", "/dev/cpu_dma_latency")})["qos"] or ""
    value = int(got.split()[0]) if got.split() else None
    # PM QoS keeps the smallest request of all holders: ours caps it.
    assert value is not None and value <= us, \
        f"{target.name}: /dev/cpu_dma_latency is {value}, want at most {us} us ({LATENCY_UNIT} holds it)"


def test_thp_mode(target, state):
    want = target.vars["thp"]
    items = [d for d in find(state, "sysfs") if d.resource.name.endswith(THP)]
    if want is None:
        assert not items, f"{target.name}: thp is null, yet the role declares {THP}"
        return
    assert items, f"{target.name}: the role declares no {THP}"
    _drift(target, items)  # read-only /sys in a container: a skip with the role's reason


def test_cpufreq(target, state):
    items = find(state, "cpufreq")
    assert all(d.plan.reason for d in items if d.plan.skipped), f"{target.name}: cpufreq skipped without a reason"
    _drift(target, items)  # a VM without cpufreq: skipped by the role ("no cpufreq on this host")


def test_exported_plan(target, state):
    items = [d for d in find(state, "file") if d.resource.name in (CPUSET_FILE, PLAN_FILE)]
    assert len(items) == 2, f"{target.name}: the role does not declare {CPUSET_FILE} and {PLAN_FILE}"
    _drift(target, items)
