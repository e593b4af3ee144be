"""Issue 34 item 7: on a host whose PID 1 is not systemd, a role applies what it can live and skips only what
needs systemd, with one reason naming what is not persisted (dcgm_exporter's clean skip, for every role).

On the real H200 VM (PID 1 ``process_api``, fact ``system.systemd``: booted no) ``irq_affinity`` pinned
nothing: its irqbalance service failed to plan ("systemd is not running") and every IRQ after it was "not run:
another resource of the role failed"; ``cpu_tuning`` failed the same way on its PM QoS unit.  Planned here
from the VM's raw facts bundle, through the same RoleRun a provision uses, each read answered as the VM
answers it (tests/unit/h200_offline.py).
"""
from __future__ import annotations

import pytest

from bringup.checklist.pages import tuning_checks
from bringup.engine.results import HostResult

from .h200_offline import check_plan, declare, facts, raw

CHECKS = ("report written",)


def _by_status(results) -> dict[str, list]:
    out: dict[str, list] = {}
    for r in results:
        out.setdefault(r.status, []).append(r)
    return out


def test_the_bundle_is_a_host_without_systemd():
    assert facts()["system.systemd"] == {"booted": False, "pid1": "process_api", "version": None,
                                         "version_text": None}


@pytest.mark.reliability(item=34, fault="irq_affinity on the real H200 VM, PID 1 not systemd (raw facts bundle)",
                         checks=CHECKS)
@pytest.mark.parametrize("irqbalance", ["keep", "disabled", "unmanaged"])
def test_irq_affinity_pins_live_and_names_what_is_not_persisted(irqbalance):
    # The VM says it is a container image (/run/systemd/container): IRQs are moved there only when asked.
    role, resources = declare("irq_affinity", gpu_profile="auto", irqbalance=irqbalance,
                              irq_affinity_in_containers=True)
    results = check_plan(role, resources)
    st = _by_status(results)
    assert "failed" not in st, [(r.id, r.error) for r in st["failed"]]
    assert not any("another resource of the role failed" in (r.reason or "") for r in results), results
    pins = [r for r in st["changed"] if r.id.startswith("irq:")]
    assert len(pins) >= 3, results  # the NIC's and the storage controllers' IRQs, from 0-15 to their CPUs
    (skip,) = st["skipped"]
    assert skip.reason.startswith("systemd is not running (PID 1 is process_api): ")
    assert "not persisted: bringup-irq-affinity.service" in skip.reason
    assert ("irqbalance not managed" in skip.reason) == (irqbalance != "unmanaged")
    # Nothing that needs systemd is planned: no unit file, no service, no irqbalance config.
    assert not [r.id for r in results if r.id.startswith("service:") or "/etc/systemd/" in r.id
                or "irqbalance" in r.id.split(":", 1)[1].split(" ")[0]], results
    # The rack checklist: one WARN for the role, naming what is not persisted.
    (line,) = tuning_checks(HostResult("h200-vm", resources=[r for r in results if r.status != "changed"]))
    assert line.status == "WARN" and "not persisted: bringup-irq-affinity.service" in line.seen, line


def test_irq_affinity_in_its_container_default_still_fails_nothing():
    role, resources = declare("irq_affinity", gpu_profile="auto")
    st = _by_status(check_plan(role, resources))
    assert "failed" not in st
    assert not [r for r in st.get("changed", []) if r.id.startswith("irq:")]  # the machine's IRQs left alone
    irqs = [r for r in st["skipped"] if r.id.startswith("irq:")]
    assert irqs and all("this host is a container" in r.reason for r in irqs), irqs


@pytest.mark.reliability(item=34, fault="cpu_tuning on the real H200 VM, PID 1 not systemd (raw facts bundle)",
                         checks=CHECKS)
def test_cpu_tuning_applies_thp_live_and_skips_only_the_pm_qos_service():
    assert raw("system.thp").strip() == "always [madvise] never"
    role, resources = declare("cpu_tuning", gpu_profile="auto")
    results = check_plan(role, resources)
    st = _by_status(results)
    assert "failed" not in st, [(r.id, r.error) for r in st["failed"]]
    changed = {r.id for r in st["changed"]}
    assert "sysfs:/sys/kernel/mm/transparent_hugepage/enabled" in changed  # madvise -> never, live
    assert {"file:/etc/bringup/triton-cpuset", "file:/etc/bringup/topology.json"} <= changed
    skipped = {r.id: r.reason for r in st["skipped"]}
    assert skipped.pop("skip:PM QoS hold").startswith("systemd is not running (PID 1 is process_api): "
                                                      "bringup-cpu-dma-latency.service is not installed")
    assert list(skipped) == ["cpufreq:governor=performance,epp=performance"]  # no cpufreq on this VM
    assert not [r.id for r in results if r.id.startswith("service:") or "/etc/systemd/" in r.id]


def test_with_systemd_the_roles_declare_what_they_did():
    """The same roles on the same facts with systemd running: units and services as before."""
    over = {"system.systemd": {"booted": True, "pid1": "systemd", "version": 255, "version_text": "systemd 255"}}
    _role, irq = declare("irq_affinity", facts_over=over, gpu_profile="auto")
    assert [r.id for r in irq if r.kind in ("service", "packages")] == [
        "packages:irqbalance", "service:irqbalance.service", "service:bringup-irq-affinity.service"]
    assert not [r for r in irq if r.kind == "skip"]
    _role, cpu = declare("cpu_tuning", facts_over=over, gpu_profile="auto")
    assert "service:bringup-cpu-dma-latency.service" in [r.id for r in cpu]
    assert not [r for r in cpu if r.kind == "skip"]
