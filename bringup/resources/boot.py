"""Boot-time state: what the running kernel was booted with."""
from __future__ import annotations

from ..errors import InputError
from .base import Plan, Resource

__all__ = ["KernelCmdline"]


class KernelCmdline(Resource):
    """The running kernel's command line holds ``words`` (``skew_tick=1``, ``nohz_full=2-5``).

    Nothing to run: a boot-loader file (grub drop-in) puts the words there at
    the next boot.  Until the kernel runs with them the plan says the host must
    reboot, and keeps saying so on every run until it has.

        KernelCmdline(["skew_tick=1", "intel_idle.max_cstate=1"])
    """

    kind = "cmdline"
    read_alongside = True

    def __init__(self, words: list[str]):
        if not words or any(not isinstance(w, str) or not w or any(c.isspace() for c in w) for w in words):
            raise InputError(f"kernel command line words {words!r} must be non-empty words without spaces")
        super().__init__(" ".join(words))
        self.words = list(words)

    def read(self) -> str:
        return "cat /proc/cmdline"

    def plan(self, current: str) -> Plan:
        running = current.split()
        missing = [w for w in self.words if w not in running]
        if not missing:
            return Plan.noop(f"the running kernel was booted with {' '.join(self.words)}")
        return Plan(reason=f"takes effect at the next boot: {' '.join(missing)}",
                    reboot=f"kernel command line lacks {' '.join(missing)} (boot loader updated)")
