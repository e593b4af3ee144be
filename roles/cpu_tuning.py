"""CPU power and memory settings for low latency, and the Triton cpuset from the topology plan.

- Governor ``performance`` and EPP where cpufreq exists (VMs: skipped, with why).
- C-state depth limited through PM QoS the way tuned's ``force_latency`` does:
  a service holds ``/dev/cpu_dma_latency`` open at ``cpu_dma_latency_us``.
- Transparent huge pages mode (live; ``transparent_hugepage=`` on the kernel
  command line keeps it across boots when ``kernel_cmdline`` asks).
- Optional kernel command line additions (``kernel_cmdline``, and
  ``nohz_full``/``rcu_nocbs`` for the Triton CPUs with ``isolate_triton_cpus``)
  through ``/etc/default/grub.d/90-bringup.cfg`` and ``update-grub``; they
  need a reboot, which this role reports and never does.
- ``/etc/bringup/triton-cpuset`` and ``/etc/bringup/topology.json``: the plan,
  for the Triton role's compose ``cpuset:``.

``kernel.numa_balancing`` is the sysctl role's (profile network-latency sets 0).

Without systemd (PID 1 is another init: the fact ``system.systemd``) the governor, EPP, THP, the
kernel command line and the plan files are applied all the same; only the PM QoS service is skipped,
with one reason: nothing holds the C-state limit (its script is written, for the host's init system to run).

Variables:
    cpu_governor (``performance``), cpu_epp (``performance``, null: leave),
    cpu_dma_latency_us (10; null: no PM QoS service), thp (``never``; null: leave),
    kernel_cmdline (list of extra words), isolate_triton_cpus (false),
    sysfs_root ("": tests point it at a fixture tree), and the planner's variables.
"""
from __future__ import annotations

import json
import struct
from typing import Annotated, Literal

from pydantic import Field, field_validator

from bringup.hardware import topology
from bringup.engine.auditkit import Expect
from bringup.ssh.command import sh
from bringup.inventory.vars import RoleVars, want
from bringup.facts.base import format_cpulist
from bringup.resources import Directory, File, Service
from bringup.resources.boot import KernelCmdline
from bringup.resources.conditioned import ConditionedService
from bringup.resources.cpu import CpuFreq, SysfsChoice
from bringup.resources.systemd import SYSTEMD_FACT, without_systemd

CPUSET_FILE = "/etc/bringup/triton-cpuset"
PLAN_FILE = "/etc/bringup/topology.json"
LATENCY_SCRIPT = "/usr/local/sbin/bringup-cpu-dma-latency"
LATENCY_UNIT = "bringup-cpu-dma-latency.service"
GRUB_FILE = "/etc/default/grub.d/90-bringup.cfg"
THP = "/sys/kernel/mm/transparent_hugepage/enabled"
PM_QOS = "/dev/cpu_dma_latency"

#: The facts this role reads (only these are gathered for it).
FACTS = (*topology.FACTS, SYSTEMD_FACT)

HANDLERS = {
    "reload systemd": ["systemctl daemon-reload"],
    "restart cpu-dma-latency": [sh("systemctl try-restart -- %s", LATENCY_UNIT)],
    # Debian/Ubuntu regenerate grub.cfg from the drop-in; RHEL-family hosts
    # (BLS entries) take the same words through grubby.
    "update grub": [sh("if command -v update-grub >/dev/null 2>&1; then update-grub; "
                       "elif command -v grubby >/dev/null 2>&1; then "
                       "grubby --update-kernel=ALL --args=\"$(sed -n 's/^# bringup-args: //p' %s)\"; "
                       "else echo 'neither update-grub nor grubby on this host' >&2; exit 1; fi", GRUB_FILE)],
}

#: cpufreq's governors and EPP values (the kernel's cpu-freq documentation) and the THP modes.
GOVERNORS = ("performance", "powersave", "schedutil", "ondemand", "conservative", "userspace")
EPP = ("default", "performance", "balance_performance", "balance_power", "power")
THP_MODES = ("always", "madvise", "never")


class Vars(topology.PlannerVars, RoleVars):
    cpu_governor: Literal[GOVERNORS] = want("performance", f"one of {', '.join(GOVERNORS)}")
    cpu_epp: Literal[EPP] | None = want("performance", f"one of {', '.join(EPP)}, or null to leave it")
    #: The guide: "C-States: limit their depth" (适当限制深度).  10 us keeps C1/C1E
    #: (exit latency <= 10 us on current Xeon/EPYC) and forbids C6 and deeper.
    cpu_dma_latency_us: int | None = want(10, "a whole number of microseconds (0 = C0 only), or null",
                                          ge=0, le=2_000_000_000)
    #: tuned's network-latency profile: no khugepaged compaction stalls.
    thp: Literal[THP_MODES] | None = want("never", f"one of {', '.join(THP_MODES)}, or null to leave it")
    kernel_cmdline: list[Annotated[str, Field(pattern=r"^[A-Za-z0-9_.,:=/-]+$")]] = want(
        [], "a list of words like intel_idle.max_cstate=1")
    isolate_triton_cpus: bool = False
    #: Tests point it at a fixture tree.
    sysfs_root: str = want("", "an absolute path, or empty for the real /sys")

    @field_validator("sysfs_root")
    @classmethod
    def _root(cls, v: str) -> str:
        if v and (not v.startswith("/") or ".." in v.split("/") or "\n" in v):
            raise ValueError("an absolute path without '..', or empty for the real /sys")
        return v


def resources(host):
    v = host.vars
    plan = topology.plan_topology(host.facts, v)
    root = v["sysfs_root"]
    out = [CpuFreq(v["cpu_governor"], epp=v["cpu_epp"], root=root)]
    if v["thp"] is not None:
        out.append(SysfsChoice(THP, v["thp"], root=root))
    if v["cpu_dma_latency_us"] is not None:
        us = v["cpu_dma_latency_us"]
        octal = "".join(f"\\{b:03o}" for b in struct.pack("=i", us))
        skip = without_systemd(host, "PM QoS hold", f"{LATENCY_UNIT} is not installed, so nothing holds "
                               f"{PM_QOS} at {us} us (deep C-states stay allowed); run {LATENCY_SCRIPT} with this "
                               "host's init system")
        script = File(LATENCY_SCRIPT, content=host.render("cpu_tuning/bringup-cpu-dma-latency.sh.j2", us=us,
                                                          octal=octal),
                      mode="0755", notify=[] if skip else ["restart cpu-dma-latency"])
        out += [script, skip] if skip else [
            script,
            File(f"/etc/systemd/system/{LATENCY_UNIT}", content=host.render(
                "cpu_tuning/bringup-cpu-dma-latency.service.j2", us=us, script=LATENCY_SCRIPT),
                notify=["reload systemd", "restart cpu-dma-latency"]),
            ConditionedService(LATENCY_UNIT, running=True, enabled=True),
        ]
    args = list(v["kernel_cmdline"])
    if v["isolate_triton_cpus"] and plan.triton_cpus:
        cs = format_cpulist(plan.triton_cpus)
        args += [f"nohz_full={cs}", f"rcu_nocbs={cs}"]
    if args:
        out.append(File(GRUB_FILE, content=host.render("cpu_tuning/grub.cfg.j2", args=args), notify=["update grub"]))
        out.append(KernelCmdline(args))  # "reboot required" until the kernel runs with them
    doc = json.dumps(plan.to_dict(), indent=2, sort_keys=True) + "\n"
    out += [
        Directory("/etc/bringup", mode="0755"),
        File(CPUSET_FILE, content=format_cpulist(plan.triton_cpus) + "\n"),
        File(PLAN_FILE, content=doc),
    ]
    return out


def audit(host):
    """What the files do not show: the PM QoS request in force is at most ``cpu_dma_latency_us``.

    PM QoS keeps the smallest request of all holders, so ours caps it.  Without
    ``/dev/cpu_dma_latency`` the unit's ConditionPathExists skips it (the
    service resource says so) and nothing is held.
    """
    us = host.vars["cpu_dma_latency_us"]
    if us is None or without_systemd(host, "PM QoS hold", ""):
        return []  # nothing asked, or nothing can hold it here: the role's own Skip says so

    def judge(out: str) -> str | None:
        got = out.split()
        if got == ["absent"]:
            return None
        if not got or not got[0].lstrip("-").isdigit():
            return f"{PM_QOS} could not be read ({out.strip()[:80] or 'no output'}), want at most {us} us"
        value = int(got[0])
        return None if value <= us else f"{PM_QOS} is {value}, want at most {us} us ({LATENCY_UNIT} holds it)"

    return [Expect("PM QoS request", sh("if [ -e %s ]; then od -An -td4 -N4 -- %s 2>&1; else echo absent; fi",
                                        PM_QOS, PM_QOS), judge)]
