"""IRQ affinity: ``/proc/irq/N/smp_affinity_list``, written only where it differs.

The kernel refuses to move some IRQs: managed IRQs (NVMe and virtio-blk
queues, whose affinity the driver spreads itself) answer ``EIO`` on older
kernels and ``EPERM`` on newer ones.  Such a refusal is not a failure: the
write step records it in a file under ``/run`` (gone at reboot, when IRQs may
be renumbered) and the IRQ is reported as skipped, with the kernel's answer,
from then on.  Any other write error (a CPU list the kernel rejects) fails.
"""
from __future__ import annotations

from ..ssh.command import sh
from ..errors import InputError
from ..facts.base import format_cpulist, parse_cpulist
from .base import Plan, Resource, kv_lines

__all__ = ["IrqAffinity", "REFUSED_FILE"]

#: IRQs the kernel refused to move this boot: lines ``N <tee's message>``.
REFUSED_FILE = "/run/bringup/irq-refused"

#: What tee prints when the kernel will not move an IRQ (EIO, EPERM).
_REFUSALS = ("Input/output error", "Operation not permitted")


class IrqAffinity(Resource):
    """One IRQ's affinity list.

        IrqAffinity(38, [1], label="virtio2-input.0")
    """

    kind = "irq"
    read_alongside = True

    def __init__(self, irq: int, cpus: list[int], *, label: str = "", refused_file: str = REFUSED_FILE,
                 container: str | None = None, in_container: bool = False, notify=()):
        if not isinstance(irq, int) or isinstance(irq, bool) or irq < 0:
            raise InputError(f"IRQ {irq!r} must be a whole number")
        if not cpus:
            raise InputError(f"IRQ {irq}: the CPU list is empty")
        super().__init__(str(irq) + (f" ({label})" if label else ""), notify=notify)
        self.irq, self.cpus, self.label = irq, sorted(set(cpus)), label
        self.want = format_cpulist(self.cpus)
        self.path = f"/proc/irq/{irq}/smp_affinity_list"
        self.refused_file = refused_file
        #: What says this host is a container (the fact ``system.container``), or None.  A container sees the
        #: machine's /proc/irq: moving IRQs there is opt-in (``in_container``).
        self.container, self.in_container = container, in_container

    def read(self) -> str:
        # The value, then the refusal an earlier run recorded for this IRQ (its file's last line for it).
        value = sh("p=%s; if [ -e \"$p\" ]; then printf 'value='; cat -- \"$p\"; else echo state=absent; fi",
                   self.path)
        refused = sh("if [ -r %s ]; then awk -v n=%s '$1 == n { sub(/^[^ ]+ /, \"\"); m = $0 } "
                     "END { if (m != \"\") print \"refused=\" m }' %s; fi",
                     self.refused_file, self.irq, self.refused_file)
        return value + "\n" + refused

    def plan(self, current: str) -> Plan:
        st = kv_lines(current)
        what = f"IRQ {self.name}"
        if st.get("state") == "absent":
            return Plan.skip(f"{what}: no such IRQ on this host now (device gone, or IRQs renumbered since "
                             "the facts were gathered)")
        have = st.get("value", "").strip()
        if self.container and not self.in_container:
            return Plan.skip(f"{what}: this host is a container ({self.container}); its /proc/irq is the "
                             f"machine's, left at {have} "
                             "(irq_affinity_in_containers: true moves it anyway)")
        if "refused" in st:
            return Plan.skip(f"{what}: the kernel refuses to move it ({st['refused'].rsplit(': ', 1)[-1]}: a "
                             f"managed IRQ, placed by its driver); left at {have}")
        try:
            same = parse_cpulist(have) == self.cpus
        except ValueError:
            same = False
        if same:
            return Plan.noop(f"{what} is already on CPU {self.want}")
        return Plan(commands=[self._write()], changes={f"irq {self.irq}": (have, self.want)})

    def _write(self) -> str:
        # tee, not the shell's redirection: dash says "I/O error" whatever the errno.
        return sh(
            "if ! err=$(printf '%%s\\n' %s | tee -- %s 2>&1 >/dev/null); then\n"
            "  case $err in\n"
            "    *%s*|*%s*) mkdir -p -- \"$(dirname -- %s)\"; printf '%%s %%s\\n' %s \"$err\" >> %s\n"
            "      echo \"IRQ %s: refused by the kernel: $err\";;\n"
            "    *) echo \"$err\"; false;;\n"
            "  esac\n"
            "fi",
            self.want, self.path, _REFUSALS[0], _REFUSALS[1], self.refused_file, self.irq,
            self.refused_file, self.irq,
        )
