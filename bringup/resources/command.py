"""A command guarded by a check, so that re-runs do nothing."""
from __future__ import annotations

from ..ssh.command import sh
from ..errors import InputError
from .base import Plan, Resource

__all__ = ["Command"]


class Command(Resource):
    """Run ``cmd`` unless its guard says the work is done.

        Command("update-grub", "update-grub", unless="grep -q skew_tick /boot/grub/grub.cfg")

    Guards (one at least, or the command runs every time and says so):
    ``creates`` (a path that exists once done), ``removes`` (a path that is
    gone once done), ``unless`` (a check command that succeeds once done),
    ``onlyif`` (a check command that must succeed for the command to run).
    """

    kind = "command"

    def __init__(self, name: str, cmd: str, *, creates: str | None = None, removes: str | None = None,
                 unless: str | None = None, onlyif: str | None = None, notify=()):
        super().__init__(name, notify=notify)
        if not cmd.strip():
            raise InputError(f"command {name!r}: the command is empty")
        self.cmd, self.creates, self.removes, self.unless, self.onlyif = cmd, creates, removes, unless, onlyif

    def read(self) -> str:
        parts = []
        if self.creates:
            parts.append(sh("[ -e %s ] && echo creates=yes", self.creates))
        if self.removes:
            parts.append(sh("[ -e %s ] || echo removes=gone", self.removes))
        if self.unless:
            parts.append("if ( " + self.unless + " ) >/dev/null 2>&1; then echo unless=ok; fi")
        if self.onlyif:
            parts.append("if ( " + self.onlyif + " ) >/dev/null 2>&1; then echo onlyif=ok; else echo onlyif=no; fi")
        return "\n".join(parts) + "\ntrue" if parts else "true"

    def plan(self, current: str) -> Plan:
        if "creates=yes" in current:
            return Plan.noop(f"{self.creates} exists")
        if "removes=gone" in current:
            return Plan.noop(f"{self.removes} is gone")
        if "unless=ok" in current:
            return Plan.noop(f"check passed: {self.unless}")
        if "onlyif=no" in current:
            return Plan.noop(f"condition not met: {self.onlyif}")
        guard = "no guard: runs every time" if not (self.creates or self.removes or self.unless or self.onlyif) else "guard not met"
        return Plan(commands=[self.cmd], changes={"run": (guard, self.name)})
