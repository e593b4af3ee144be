"""CPU power settings in sysfs: cpufreq governor and EPP per CPU, and bracketed choices (THP).

Both take ``root`` (default ``""``) prefixed to every sysfs path, so tests can
point them at a fixture tree.  Where the files do not exist (a VM has no
cpufreq) or are read-only (a container's /sys), the resource is skipped with
that reason.
"""
from __future__ import annotations

import re

from ..ssh.command import sh
from ..errors import InputError
from .base import Plan, Resource

__all__ = ["CpuFreq", "SysfsChoice"]

_WORD = re.compile(r"^[a-z_][a-z0-9_]*$")


class CpuFreq(Resource):
    """Every CPU's ``scaling_governor`` (and ``energy_performance_preference`` where it exists).

        CpuFreq("performance", epp="performance")
    """

    kind = "cpufreq"
    read_alongside = True

    def __init__(self, governor: str, *, epp: str | None = None, root: str = "", notify=()):
        for what, v in (("governor", governor), ("epp", epp)):
            if v is not None and not _WORD.match(str(v)):
                raise InputError(f"cpufreq {what} {v!r} is malformed (a word like performance)")
        super().__init__(f"governor={governor}" + (f",epp={epp}" if epp else ""), notify=notify)
        self.governor, self.epp, self.root = governor, epp, root.rstrip("/")

    def read(self) -> str:
        return sh(
            "for f in %s/sys/devices/system/cpu/cpu[0-9]*/cpufreq; do\n"
            "  [ -r \"$f/scaling_governor\" ] || continue\n"
            "  c=${f%%/cpufreq}; c=${c##*/cpu}\n"
            "  g=; a=; e=; w=ro\n"
            "  read -r g < \"$f/scaling_governor\"; [ -w \"$f/scaling_governor\" ] && w=rw\n"
            "  if [ -r \"$f/scaling_available_governors\" ]; then read -r a < \"$f/scaling_available_governors\"; fi\n"
            "  if [ -r \"$f/energy_performance_preference\" ]; then read -r e < \"$f/energy_performance_preference\"; fi\n"
            "  echo \"cpu=$c gov=$g w=$w epp=$e avail=$(echo $a | tr ' ' ,)\"\n"
            "done",
            self.root,
        )

    def plan(self, current: str) -> Plan:
        cpus = []
        for line in current.splitlines():
            kv = dict(t.partition("=")[::2] for t in line.split())
            if kv.get("cpu", "").isdigit():
                cpus.append(kv)
        if not cpus:
            return Plan.skip("no cpufreq on this host (a VM, or no frequency driver loaded): governor not set")
        if all(c["w"] == "ro" for c in cpus):
            return Plan.skip("cpufreq is read-only here (a container's /sys): governor not set")
        avail = set(cpus[0].get("avail", "").split(",")) - {""}
        if avail and self.governor not in avail:
            return Plan.fail(f"governor {self.governor!r} is not offered by this driver ({', '.join(sorted(avail))})")
        base = f"{self.root}/sys/devices/system/cpu"
        cmds, changes = [], {}
        gov = [c["cpu"] for c in cpus if c["gov"] != self.governor]
        if gov:
            changes["governor"] = (",".join(sorted({c["gov"] for c in cpus if c["gov"] != self.governor})),
                                   f"{self.governor} on {len(gov)} CPU(s)")
            cmds += [sh("printf '%%s\\n' %s > %s", self.governor, f"{base}/cpu{c}/cpufreq/scaling_governor")
                     for c in gov]
        if self.epp:
            # The EPP of the performance governor is fixed at "performance" by intel_pstate.
            epp = [c["cpu"] for c in cpus if c.get("epp") and c["epp"] != self.epp]
            if epp:
                changes["epp"] = (",".join(sorted({c["epp"] for c in cpus if c["cpu"] in epp})),
                                  f"{self.epp} on {len(epp)} CPU(s)")
                cmds += [sh("printf '%%s\\n' %s > %s", self.epp,
                            f"{base}/cpu{c}/cpufreq/energy_performance_preference") for c in epp]
        if not cmds:
            return Plan.noop(f"all {len(cpus)} CPUs already run {self.governor}" + (f" (EPP {self.epp})" if self.epp else ""))
        return Plan(commands=cmds, changes=changes)


class SysfsChoice(Resource):
    """A sysfs file listing choices with the current one bracketed (``always [madvise] never``).

        SysfsChoice("/sys/kernel/mm/transparent_hugepage/enabled", "madvise")
    """

    kind = "sysfs"
    read_alongside = True

    def __init__(self, path: str, value: str, *, root: str = "", notify=()):
        if not _WORD.match(str(value)):
            raise InputError(f"{path}: value {value!r} is malformed (a word like madvise)")
        super().__init__(path, notify=notify)
        self.path, self.value, self.full = path, value, root.rstrip("/") + path

    def read(self) -> str:
        return sh("p=%s; if [ ! -e \"$p\" ]; then echo absent; elif [ -w \"$p\" ]; then printf 'rw '; cat -- \"$p\"; "
                  "else printf 'ro '; cat -- \"$p\"; fi", self.full)

    def plan(self, current: str) -> Plan:
        if current.strip() == "absent" or not current.strip():
            return Plan.skip(f"{self.path}: not on this kernel")
        mode, _, text = current.strip().partition(" ")
        m = re.search(r"\[([^\]]+)\]", text)
        have = m.group(1) if m else text.strip()
        choices = text.replace("[", "").replace("]", "").split()
        if have == self.value:
            return Plan.noop(f"{self.path} is already {self.value}")
        if self.value not in choices:
            return Plan.fail(f"{self.path}: {self.value!r} is not one of {', '.join(choices)}")
        if mode == "ro":
            return Plan.skip(f"{self.path}: read-only here (a container's /sys); it is {have}")
        return Plan(commands=[sh("printf '%%s\\n' %s > %s", self.value, self.full)],
                    changes={self.path: (have, self.value)})
