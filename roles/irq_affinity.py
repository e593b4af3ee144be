"""NIC and storage IRQs on housekeeping CPUs of their NUMA node, kept across reboots.

The topology planner (:mod:`bringup.hardware.topology`) decides which IRQ goes to which
CPU; this role writes ``/proc/irq/N/smp_affinity_list`` where it differs (an
IRQ the kernel refuses to move is skipped, per IRQ), configures irqbalance
to keep off the Triton CPUs and off the pinned IRQs, and installs a oneshot
unit that re-applies the plan at boot from a rendered file.

Variables:
    irq_cpus_per_node, triton_cpus_per_gpu, irq_device_kinds: the planner's.
    irqbalance: ``keep`` (default: installed, running, banned from the Triton
        CPUs and the pinned IRQs), ``disabled`` (stopped and disabled), or
        ``unmanaged`` (left alone).
    irq_affinity_persist: install the boot-time unit (default true).
    irq_affinity_in_containers: write IRQs even from inside a container (default false).

Without systemd (PID 1 is another init: a VM or container image, the fact ``system.systemd``), the IRQs are
still pinned live and the plan file and script are written; what needs systemd is skipped, with one reason
naming it: the boot unit (the pins are not persisted: the host's init system runs the script at boot) and
irqbalance (neither configured, started nor stopped).
"""
from __future__ import annotations

from typing import Literal

from bringup.hardware import topology
from bringup.ssh.command import sh
from bringup.inventory.vars import RoleVars, want
from bringup.facts.base import format_cpulist
from bringup.resources import Directory, File, Packages, Service
from bringup.resources.conditioned import ConditionedService
from bringup.resources.guard import unread_facts
from bringup.resources.irq import IrqAffinity
from bringup.resources.systemd import SYSTEMD_FACT, without_systemd

PLAN_FILE = "/etc/bringup/irq-affinity.conf"
SCRIPT = "/usr/local/sbin/bringup-irq-affinity"
UNIT = "bringup-irq-affinity.service"
UNIT_FILE = f"/etc/systemd/system/{UNIT}"

#: The facts this role reads (only these are gathered for it).
FACTS = (*topology.FACTS, "os.release", "system.container", SYSTEMD_FACT)

_MODES = ("keep", "disabled", "unmanaged")


class Vars(topology.PlannerVars, RoleVars):
    irqbalance: Literal[_MODES] = want("keep", f"use one of {', '.join(_MODES)}")
    irq_affinity_persist: bool = True
    #: A container's /proc/irq is the machine's: not moved unless asked.
    irq_affinity_in_containers: bool = False


HANDLERS = {
    "reload systemd": ["systemctl daemon-reload"],
    "restart irqbalance": [sh("systemctl restart -- %s", "irqbalance.service")],
}


def _redhat(facts: dict) -> bool:
    rel = facts.get("os.release") or {}
    words = f"{rel.get('id', '')} {rel.get('ID_LIKE', '')}".split()
    return any(w in ("rhel", "fedora", "centos", "rocky", "almalinux") for w in words)


def resources(host):
    # A container sees the machine's /proc/irq: not knowing whether this host is one means not touching it.
    refused = None if host.vars["irq_affinity_in_containers"] else unread_facts(host, ("system.container",),
                                                                                "IRQ affinity")
    if refused:
        return [refused]
    plan = topology.plan_topology(host.facts, host.vars)
    mode, persist = host.vars["irqbalance"], host.vars["irq_affinity_persist"]
    # What needs systemd: irqbalance's service (and its config, read only by that service), the boot unit.
    balance: list = []
    if mode == "keep":
        redhat = _redhat(host.facts)
        env = "/etc/sysconfig/irqbalance" if redhat else "/etc/default/irqbalance"
        args = [f"--banirq={p.irq}" for p in plan.irqs]
        balance = [
            Packages(["irqbalance"], manager="dnf" if redhat else "apt"),
            File(env, content=host.render("irq_affinity/irqbalance.env.j2", banned=format_cpulist(plan.triton_cpus),
                                          args=args), notify=["restart irqbalance"]),
            ConditionedService("irqbalance.service", running=True, enabled=True),
        ]
    elif mode == "disabled":
        # Stopped before the IRQs are written, so that it cannot move them back.
        balance = [Service("irqbalance.service", running=False, enabled=False)]
    boot = [File(UNIT_FILE, content=host.render("irq_affinity/bringup-irq-affinity.service.j2", conf=PLAN_FILE,
                                                script=SCRIPT), notify=["reload systemd"]),
            Service(UNIT, enabled=True)] if persist else []
    skip = None
    if balance or boot:
        undone = ([f"not persisted: {UNIT} (the pins hold until the next boot; run {SCRIPT} at boot with "
                   "this host's init system)"] if boot else []) + (
            [f"irqbalance not managed (irqbalance: {mode}): one started by this host's init system may move "
             "the pins; stop it there"] if balance else [])
        skip = without_systemd(host, "IRQ pins at boot" if boot else "irqbalance", "; ".join(undone))
    # Without systemd: one Skip says what is left undone, and the IRQs are pinned live all the same.
    out = [skip] if skip else balance
    out += [IrqAffinity(p.irq, p.cpus, label=p.name, container=host.facts["system.container"],
                        in_container=bool(host.vars["irq_affinity_in_containers"]))
            for p in plan.irqs]
    if persist:
        pins = [{"irq": p.irq, "name": p.name if p.name and " " not in p.name else "",
                 "cpus": format_cpulist(p.cpus), "device": p.device} for p in plan.irqs]
        out += [
            Directory("/etc/bringup", mode="0755"),
            File(PLAN_FILE, content=host.render("irq_affinity/irq-affinity.conf.j2", pins=pins, script=SCRIPT,
                                                unit=UNIT)),
            File(SCRIPT, content=host.render("irq_affinity/bringup-irq-affinity.sh.j2", conf=PLAN_FILE),
                 mode="0755"),
        ]
        if not skip:
            out += boot
    return out
